package gtid

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxGNO is the largest MySQL transaction number (GNO_END = 2^63-1 is exclusive).
const maxGNO = math.MaxInt64 - 1

// maxTagLen is the maximal length of a MySQL GTID tag.
const maxTagLen = 32

// ParseError describes where and why Parse rejected its input. It wraps
// ErrParse.
type ParseError struct {
	Flavor Flavor
	Offset int    // byte offset in the input where the problem was found
	Msg    string // what is wrong
}

// Error implements error.
func (e *ParseError) Error() string {
	return fmt.Sprintf("gtid: parse %s set at offset %d: %s", e.Flavor, e.Offset, e.Msg)
}

// Unwrap returns ErrParse.
func (e *ParseError) Unwrap() error { return ErrParse }

// Parse parses a GTID set of flavor f (see the package doc for the syntax).
// The empty or all-whitespace string is the empty set. Errors are
// *ParseError values wrapping ErrParse, or wrap ErrUnknownFlavor.
func Parse(f Flavor, s string) (Set, error) {
	p := parser{f: f, s: s}
	var err error
	switch f {
	case MySQL:
		// Every interval follows a ':'; sizing up front avoids regrowth.
		p.b.grow(strings.Count(s, ":"), strings.Count(s, ",")+1)
		err = p.mysql()
	case MariaDB:
		n := strings.Count(s, ",") + 1
		p.b.grow(n, n)
		err = p.mariadb()
	default:
		return Set{}, fmt.Errorf("gtid: parse: %w: %d", ErrUnknownFlavor, int(f))
	}
	if err != nil {
		return Set{}, err
	}
	return p.b.set(f), nil
}

// MustParse is Parse that panics on error, for tests and constants.
func MustParse(f Flavor, s string) Set {
	set, err := Parse(f, s)
	if err != nil {
		panic(err)
	}
	return set
}

type parser struct {
	f Flavor
	s string
	i int
	b builder
}

func (p *parser) fail(at int, format string, args ...any) error {
	return &ParseError{Flavor: p.f, Offset: at, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *parser) skipSpace() {
	for p.i < len(p.s) && isSpace(p.s[p.i]) {
		p.i++
	}
}

// skipEmpty skips whitespace and empty elements (",,"), as MySQL does.
func (p *parser) skipEmpty() {
	for p.skipSpace(); p.peek() == ','; p.skipSpace() {
		p.i++
	}
}

// found describes the input at the cursor for error messages.
func (p *parser) found() string {
	if p.i >= len(p.s) {
		return "end of input"
	}
	return strconv.Quote(clip(p.s[p.i:]))
}

// number reads a decimal number no larger than limit.
func (p *parser) number(what string, limit uint64) (uint64, error) {
	start := p.i
	var n uint64
	for ; p.i < len(p.s) && isDigit(p.s[p.i]); p.i++ {
		d := uint64(p.s[p.i] - '0')
		if n > (limit-d)/10 {
			for p.i < len(p.s) && isDigit(p.s[p.i]) {
				p.i++
			}
			return 0, p.fail(start, "%s %s out of range (max %d)", what, clip(p.s[start:p.i]), limit)
		}
		n = n*10 + d
	}
	if p.i == start {
		return 0, p.fail(start, "expected %s, found %s", what, p.found())
	}
	return n, nil
}

// endElement checks that an element ends at end of input or a comma.
func (p *parser) endElement(expected string) error {
	if p.skipSpace(); p.i < len(p.s) && p.s[p.i] != ',' {
		return p.fail(p.i, "expected %s, found %s", expected, p.found())
	}
	return nil
}

func (p *parser) mysql() error {
	for p.skipEmpty(); p.i < len(p.s); p.skipEmpty() {
		start := p.i
		for p.i < len(p.s) && p.s[p.i] != ':' && p.s[p.i] != ',' && !isSpace(p.s[p.i]) {
			p.i++
		}
		k, ok := parseUUID(p.s[start:p.i])
		if !ok {
			return p.fail(start, "invalid UUID %q", clip(p.s[start:p.i]))
		}
		tagAt, n := start, 0 // where the current tag starts; intervals since it
		for p.skipSpace(); p.peek() == ':'; p.skipSpace() {
			p.i++
			p.skipSpace()
			switch c := p.peek(); {
			case isDigit(c):
				at := p.i
				lo, err := p.number("transaction number", maxGNO)
				if err != nil {
					return err
				}
				if lo == 0 {
					return p.fail(at, "transaction number 0 (must be ≥ 1)")
				}
				hi := lo
				if p.skipSpace(); p.peek() == '-' {
					p.i++
					p.skipSpace()
					if hi, err = p.number("end of interval", maxGNO); err != nil {
						return err
					}
				}
				if hi < lo {
					return p.fail(at, "interval %d-%d ends before it starts", lo, hi)
				}
				p.b.add(k, interval{lo, hi})
				n++
			case isTagChar(c):
				if n == 0 && k.tag != "" {
					return p.fail(tagAt, "tag %q has no intervals", k.tag)
				}
				tagAt = p.i
				for p.i < len(p.s) && isTagChar(p.s[p.i]) {
					p.i++
				}
				if p.i-tagAt > maxTagLen {
					return p.fail(tagAt, "tag %q longer than %d characters", clip(p.s[tagAt:p.i]), maxTagLen)
				}
				// Clone so that the set does not pin a large input string.
				k.tag, n = strings.ToLower(strings.Clone(p.s[tagAt:p.i])), 0
			default:
				return p.fail(p.i, "expected interval or tag, found %s", p.found())
			}
		}
		if err := p.endElement("':' or ','"); err != nil {
			return err
		}
		if n == 0 && k.tag != "" {
			return p.fail(tagAt, "tag %q has no intervals", k.tag)
		}
		if n == 0 {
			return p.fail(start, "UUID %s has no intervals", p.s[start:start+36])
		}
	}
	return nil
}

func (p *parser) mariadb() error {
	for p.skipEmpty(); p.i < len(p.s); p.skipEmpty() {
		domain, err := p.number("domain id", math.MaxUint32)
		if err != nil {
			return err
		}
		if err := p.dash("domain id"); err != nil {
			return err
		}
		server, err := p.number("server id", math.MaxUint32)
		if err != nil {
			return err
		}
		if err := p.dash("server id"); err != nil {
			return err
		}
		at := p.i
		seq, err := p.number("sequence number", math.MaxUint64)
		if err != nil {
			return err
		}
		k := key{major: domain, minor: server}
		if p.skipSpace(); strings.HasPrefix(p.s[p.i:], "..") {
			p.i += 2
			p.skipSpace()
			hi, err := p.number("end of range", math.MaxUint64)
			if err != nil {
				return err
			}
			if seq == 0 {
				return p.fail(at, "range %d..%d starts at 0 (must be ≥ 1)", seq, hi)
			}
			if hi < seq {
				return p.fail(at, "range %d..%d ends before it starts", seq, hi)
			}
			p.b.add(k, interval{seq, hi})
		} else if seq > 0 { // d-s-0 holds no transactions
			p.b.add(k, interval{1, seq})
		}
		if err := p.endElement("','"); err != nil {
			return err
		}
	}
	return nil
}

// dash consumes the '-' that follows the field named after.
func (p *parser) dash(after string) error {
	if p.skipSpace(); p.peek() != '-' {
		return p.fail(p.i, "expected '-' after %s, found %s", after, p.found())
	}
	p.i++
	p.skipSpace()
	return nil
}

// parseUUID parses the 36-character dashed form, case-insensitively.
func parseUUID(t string) (key, bool) {
	if len(t) != 36 || t[8] != '-' || t[13] != '-' || t[18] != '-' || t[23] != '-' {
		return key{}, false
	}
	var k key
	n := 0
	for i := 0; i < len(t); i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			continue
		}
		d, ok := hexVal(t[i])
		if !ok {
			return key{}, false
		}
		if n < 16 {
			k.major = k.major<<4 | d
		} else {
			k.minor = k.minor<<4 | d
		}
		n++
	}
	return k, true
}

func hexVal(c byte) (uint64, bool) {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0'), true
	case 'a' <= c && c <= 'f':
		return uint64(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isTagChar(c byte) bool {
	return c == '_' || isDigit(c) || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// clip shortens s for error messages.
func clip(s string) string {
	if len(s) > 24 {
		return s[:24] + "…"
	}
	return s
}
