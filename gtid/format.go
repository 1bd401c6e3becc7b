package gtid

import (
	"encoding/hex"
	"strconv"
	"strings"
)

// String returns the canonical text of the set (sorted, merged; see the
// package doc), which Parse accepts and maps to an Equal set. The empty set
// is "".
func (s Set) String() string {
	n := 0
	for _, r := range s.runs {
		n += 38 + len(r.k.tag) + 12*len(r.iv) // estimate; avoids most regrowth
	}
	b := make([]byte, 0, n)
	if s.f == MariaDB {
		for _, r := range s.runs {
			for _, v := range r.iv {
				if len(b) > 0 {
					b = append(b, ',')
				}
				// [1, n] prints as the plain MariaDB triple, anything else as d-s-a..b.
				b = appendMariaDB(b, r.k, v)
			}
		}
		return string(b)
	}
	for i, r := range s.runs {
		switch {
		case i > 0 && r.k.major == s.runs[i-1].k.major && r.k.minor == s.runs[i-1].k.minor:
			// Same UUID, next tag (tags sort after ""): ":tag" follows below.
		case i > 0:
			b = append(b, ',')
			fallthrough
		default:
			b = appendUUID(b, r.k)
		}
		if r.k.tag != "" {
			b = append(b, ':')
			b = append(b, r.k.tag...)
		}
		for _, v := range r.iv {
			b = append(b, ':')
			b = appendMySQLInterval(b, v)
		}
	}
	return string(b)
}

// Compact returns a short human form for status output: the source with the
// highest transaction number, its span, and how much else the set holds, e.g.
//
//	3e11fa47…:1-5012 (+2 sources)
//	3e11fa47…:audit:1-70 (3 gaps, +1 source)
//	0-2-100 (+1 source)
//	empty
//
// "gaps" counts the holes inside the shown source's span. The form is for
// humans only; Parse does not accept it.
func (s Set) Compact() string {
	if s.IsEmpty() {
		return "empty"
	}
	top := s.runs[0]
	for _, r := range s.runs[1:] {
		if r.iv[len(r.iv)-1].hi > top.iv[len(top.iv)-1].hi {
			top = r
		}
	}
	span := interval{top.iv[0].lo, top.iv[len(top.iv)-1].hi}
	var b []byte
	if s.f == MariaDB {
		b = appendMariaDB(b, top.k, span)
	} else {
		var u [36]byte
		b = append(b, appendUUID(u[:0], top.k)[:8]...)
		b = append(b, "…"...)
		if top.k.tag != "" {
			b = append(b, ':')
			b = append(b, top.k.tag...)
		}
		b = append(b, ':')
		b = appendMySQLInterval(b, span)
	}
	var notes []string
	if gaps := len(top.iv) - 1; gaps > 0 {
		notes = append(notes, plural(gaps, "gap"))
	}
	if others := len(s.runs) - 1; others > 0 {
		notes = append(notes, "+"+plural(others, "source"))
	}
	if len(notes) > 0 {
		b = append(b, " ("+strings.Join(notes, ", ")+")"...)
	}
	return string(b)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

func appendUUID(b []byte, k key) []byte {
	var raw [16]byte
	for i := range 8 {
		raw[i] = byte(k.major >> (56 - 8*i))
		raw[8+i] = byte(k.minor >> (56 - 8*i))
	}
	var h [32]byte
	hex.Encode(h[:], raw[:])
	b = append(b, h[0:8]...)
	b = append(b, '-')
	b = append(b, h[8:12]...)
	b = append(b, '-')
	b = append(b, h[12:16]...)
	b = append(b, '-')
	b = append(b, h[16:20]...)
	b = append(b, '-')
	return append(b, h[20:32]...)
}

func appendMySQLInterval(b []byte, v interval) []byte {
	b = strconv.AppendUint(b, v.lo, 10)
	if v.hi != v.lo {
		b = append(b, '-')
		b = strconv.AppendUint(b, v.hi, 10)
	}
	return b
}

// appendMariaDB prints "d-s-n" for [1, n] and the extension "d-s-a..b" otherwise.
func appendMariaDB(b []byte, k key, v interval) []byte {
	b = strconv.AppendUint(b, k.major, 10)
	b = append(b, '-')
	b = strconv.AppendUint(b, k.minor, 10)
	b = append(b, '-')
	if v.lo != 1 {
		b = strconv.AppendUint(b, v.lo, 10)
		b = append(b, ".."...)
	}
	return strconv.AppendUint(b, v.hi, 10)
}
