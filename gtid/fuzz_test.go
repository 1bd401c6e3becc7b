package gtid

import (
	"errors"
	"math"
	"math/bits"
	"testing"
)

// Realistic seeds shared by both fuzzers: (mariadb?, text).
var fuzzSeeds = []struct {
	mariadb bool
	s       string
}{
	{false, ""},
	{false, u1 + ":1-5012"},
	{false, u1 + ":1-5012,\n" + u2 + ":1-30:32-40,\n" + u3 + ":7"},
	{false, "3E11FA47-71CA-11E1-9E33-C80AA9429562:Domain_1:1-3:15-21, \n3E11FA47-71CA-11E1-9E33-C80AA9429562:Domain_2:8-52"},
	{false, u1 + ":1-5:7:aa:1-3:9:bb:2," + u2 + ":9223372036854775800-9223372036854775806"},
	{false, u1 + ":1-100"},
	{false, u1 + ":50-150," + u2 + ":1"},
	{true, ""},
	{true, "0-1-100"},
	{true, "0-1-50,0-2-100"},
	{true, "0-1-50,0-2-100,0-3-101,1-1-7"},
	{true, "0-1-41..100,0-1-4"},
	{true, "0-1-18446744073709551615,4294967295-4294967295-1"},
}

func flavorOf(mariadb bool) Flavor {
	if mariadb {
		return MariaDB
	}
	return MySQL
}

// FuzzParse: Parse never panics; errors are *ParseError; anything that parses
// is canonical and round-trips through String to an Equal set, stably.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.mariadb, s.s)
	}
	f.Fuzz(func(t *testing.T, mariadb bool, in string) {
		fl := flavorOf(mariadb)
		set, err := Parse(fl, in)
		if err != nil {
			var pe *ParseError
			if !errors.Is(err, ErrParse) || !errors.As(err, &pe) || pe.Offset < 0 || pe.Offset > len(in) {
				t.Fatalf("Parse(%q): bad error %#v", in, err)
			}
			return
		}
		checkCanonical(t, set)
		out := set.String()
		again, err := Parse(fl, out)
		if err != nil {
			t.Fatalf("Parse(String()) failed: %v\ninput:  %q\nstring: %q", err, in, out)
		}
		if !again.Equal(set) {
			t.Fatalf("round trip changed the set\ninput: %q\nfirst: %q\nagain: %q", in, out, again)
		}
		if again.String() != out {
			t.Fatalf("re-printing unstable: %q then %q", out, again)
		}
		if set.IsEmpty() != (set.Count() == 0) || (set.Compact() == "empty") != set.IsEmpty() {
			t.Fatalf("IsEmpty/Count/Compact disagree for %q", out)
		}
	})
}

// FuzzAlgebra checks the set-algebra laws on pairs of sets.
func FuzzAlgebra(f *testing.F) {
	for _, a := range fuzzSeeds {
		for _, b := range fuzzSeeds {
			if a.mariadb == b.mariadb {
				f.Add(a.mariadb, a.s, b.s)
			}
		}
	}
	f.Add(false, "\x00\x01\x05\x04\x03\x02", "\x00\x03\x03\x08\x01\x01")
	f.Add(true, "\x08\x00\x00\x01\x10\x0f", "\x08\x05\x05\x09\x3f\x0f")
	f.Fuzz(func(t *testing.T, mariadb bool, as, bs string) {
		fl := flavorOf(mariadb)
		a, b := genSet(fl, as), genSet(fl, bs)
		union, inter, diff := a.Union(b), a.Intersect(b), a.Subtract(b)
		for _, s := range []Set{union, inter, diff} {
			checkCanonical(t, s)
			if again := MustParse(fl, s.String()); !again.Equal(s) {
				t.Fatalf("result %q does not round-trip", s)
			}
		}
		switch {
		case !union.Contains(a) || !union.Contains(b):
			t.Fatalf("A∪B ⊉ A or B\nA=%q\nB=%q\nU=%q", a, b, union)
		case !union.Equal(b.Union(a)) || !inter.Equal(b.Intersect(a)):
			t.Fatalf("∪ or ∩ not commutative\nA=%q\nB=%q", a, b)
		case !diff.Intersect(b).IsEmpty():
			t.Fatalf("(A−B)∩B ≠ ∅\nA=%q\nB=%q\nA−B=%q", a, b, diff)
		case !diff.Union(inter).Equal(a):
			t.Fatalf("(A−B)∪(A∩B) ≠ A\nA=%q\nB=%q\nA−B=%q\nA∩B=%q", a, b, diff, inter)
		case !a.Contains(inter) || !b.Contains(inter):
			t.Fatalf("A∩B ⊄ A or B\nA=%q\nB=%q\nA∩B=%q", a, b, inter)
		case a.Contains(b) != b.Subtract(a).IsEmpty():
			t.Fatalf("A⊇B = %v but B−A = %q\nA=%q\nB=%q", a.Contains(b), b.Subtract(a), a, b)
		case a.Equal(b) != (a.Contains(b) && b.Contains(a)):
			t.Fatalf("Equal inconsistent with Contains\nA=%q\nB=%q", a, b)
		case Comparable(a, b) != (a.Contains(b) || b.Contains(a)):
			t.Fatalf("Comparable inconsistent\nA=%q\nB=%q", a, b)
		}
		// The exact divergent count never exceeds the plain difference's
		// count, is zero when B holds all of A, and equals it for MySQL.
		switch dc := DivergentCount(a, b); {
		case dc > diff.Count(), b.Contains(a) && dc != 0, fl == MySQL && dc != diff.Count():
			t.Fatalf("DivergentCount = %d, |A−B| = %d\nA=%q\nB=%q", dc, diff.Count(), a, b)
		}
		// Count(A∪B) = Count(A)+Count(B)−Count(A∩B), checked as
		// Count(A∪B)+Count(A∩B) = Count(A)+Count(B) in 128 bits, unless
		// Count saturated.
		if cu := union.Count(); cu != math.MaxUint64 {
			lh, ll := bits.Add64(cu, inter.Count(), 0)
			rh, rl := bits.Add64(a.Count(), b.Count(), 0)
			if lh != rh || ll != rl {
				t.Fatalf("Count law broken: |A|=%d |B|=%d |A∪B|=%d |A∩B|=%d\nA=%q\nB=%q",
					a.Count(), b.Count(), cu, inter.Count(), a, b)
			}
		}
	})
}

// genSet builds a set from s: Parse(f, s) if that succeeds; otherwise the
// bytes of s are read as (control, start, length) triples so that the fuzzer
// explores the algebra (small overlapping intervals over a few keys, and
// intervals near the top of the number range) rather than only the parser.
func genSet(f Flavor, s string) Set {
	if set, err := Parse(f, s); err == nil {
		return set
	}
	top := uint64(math.MaxUint64)
	if f == MySQL {
		top = maxGNO
	}
	var b builder
	for i := 0; i+2 < len(s); i += 3 {
		c, x, n := s[i], uint64(s[i+1]%64), uint64(s[i+2]%16)
		k := key{major: uint64(c & 1), minor: uint64(c >> 1 & 1)}
		if f == MySQL && c&4 != 0 {
			k.tag = "t"
		}
		lo := 1 + x
		if c&8 != 0 { // ending at or just below the top
			lo = top - x%4 - n
		}
		b.add(k, interval{lo, lo + n})
	}
	return b.set(f)
}

// checkCanonical verifies the representation invariants of s.
func checkCanonical(t *testing.T, s Set) {
	t.Helper()
	top := uint64(math.MaxUint64)
	if s.f == MySQL {
		top = maxGNO
	}
	for i, r := range s.runs {
		if i > 0 && cmpKey(s.runs[i-1].k, r.k) >= 0 {
			t.Fatalf("keys not strictly sorted at %d: %q", i, s)
		}
		if len(r.iv) == 0 || (s.f == MariaDB && r.k.tag != "") {
			t.Fatalf("bad run %d in %q", i, s)
		}
		for j, v := range r.iv {
			if v.lo < 1 || v.lo > v.hi || v.hi > top || (j > 0 && (v.lo <= r.iv[j-1].hi || v.lo-r.iv[j-1].hi < 2)) {
				t.Fatalf("interval %d of run %d not canonical: %+v in %q", j, i, r.iv, s)
			}
		}
	}
}
