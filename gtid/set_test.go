package gtid

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestOperations checks every binary operation on pairs of sets in both
// directions, against hand-computed canonical results.
func TestOperations(t *testing.T) {
	tests := []struct {
		name             string
		f                Flavor
		a, b             string
		union, intersect string
		aMinusB, bMinusA string
	}{
		{name: "both empty", f: MySQL},
		{name: "empty and non-empty", f: MySQL, b: u1 + ":1-3",
			union: u1 + ":1-3", bMinusA: u1 + ":1-3"},
		{name: "equal", f: MySQL, a: u1 + ":1-3," + u2 + ":5", b: u2 + ":5," + u1 + ":1-3",
			union: u1 + ":1-3," + u2 + ":5", intersect: u1 + ":1-3," + u2 + ":5"},
		{name: "disjoint uuids", f: MySQL, a: u1 + ":1-5", b: u2 + ":1-3",
			union: u1 + ":1-5," + u2 + ":1-3", aMinusB: u1 + ":1-5", bMinusA: u2 + ":1-3"},
		{name: "strict superset", f: MySQL, a: u1 + ":1-10", b: u1 + ":3-5",
			union: u1 + ":1-10", intersect: u1 + ":3-5", aMinusB: u1 + ":1-2:6-10"},
		{name: "overlap with gaps", f: MySQL, a: u1 + ":1-5:10-15", b: u1 + ":4-11",
			union: u1 + ":1-15", intersect: u1 + ":4-5:10-11", aMinusB: u1 + ":1-3:12-15", bMinusA: u1 + ":6-9"},
		{name: "adjacent intervals merge in union", f: MySQL, a: u1 + ":1-5", b: u1 + ":6-9",
			union: u1 + ":1-9", aMinusB: u1 + ":1-5", bMinusA: u1 + ":6-9"},
		{name: "one interval splits many", f: MySQL, a: u1 + ":1-20", b: u1 + ":2:4-5:19-30",
			union: u1 + ":1-30", intersect: u1 + ":2:4-5:19-20", aMinusB: u1 + ":1:3:6-18", bMinusA: u1 + ":21-30"},
		{name: "several uuids, partial", f: MySQL, a: u1 + ":1-9," + u2 + ":1-4," + u3 + ":7", b: u2 + ":3-6," + u3 + ":7",
			union: u1 + ":1-9," + u2 + ":1-6," + u3 + ":7", intersect: u2 + ":3-4," + u3 + ":7",
			aMinusB: u1 + ":1-9," + u2 + ":1-2", bMinusA: u2 + ":5-6"},
		{name: "tag is a separate source", f: MySQL, a: u1 + ":1-5", b: u1 + ":x:1-5",
			union: u1 + ":1-5:x:1-5", aMinusB: u1 + ":1-5", bMinusA: u1 + ":x:1-5"},
		{name: "tags mixed", f: MySQL, a: u1 + ":1-5:t:1-3", b: u1 + ":t:1-5",
			union: u1 + ":1-5:t:1-5", intersect: u1 + ":t:1-3", aMinusB: u1 + ":1-5", bMinusA: u1 + ":t:4-5"},
		{name: "max gno", f: MySQL, a: u1 + ":1-9223372036854775806", b: u1 + ":9223372036854775806",
			union: u1 + ":1-9223372036854775806", intersect: u1 + ":9223372036854775806", aMinusB: u1 + ":1-9223372036854775805"},

		{name: "mariadb both empty", f: MariaDB},
		{name: "mariadb same key", f: MariaDB, a: "0-1-100", b: "0-1-40",
			union: "0-1-100", intersect: "0-1-40", aMinusB: "0-1-41..100"},
		{name: "mariadb new server id", f: MariaDB, a: "0-1-50,0-2-100", b: "0-1-50",
			union: "0-1-50,0-2-100", intersect: "0-1-50", aMinusB: "0-2-100"},
		{name: "mariadb errant", f: MariaDB, a: "0-1-50", b: "0-1-50,0-3-51",
			union: "0-1-50,0-3-51", intersect: "0-1-50", bMinusA: "0-3-51"},
		{name: "mariadb domains independent", f: MariaDB, a: "0-1-10,1-1-5", b: "0-1-5,1-1-10",
			union: "0-1-10,1-1-10", intersect: "0-1-5,1-1-5", aMinusB: "0-1-6..10", bMinusA: "1-1-6..10"},
		{name: "mariadb ranges", f: MariaDB, a: "0-1-5..20", b: "0-1-10,0-1-15..30",
			union: "0-1-30", intersect: "0-1-5..10,0-1-15..20", aMinusB: "0-1-11..14", bMinusA: "0-1-4,0-1-21..30"},
		{name: "mariadb top of range", f: MariaDB, a: "0-1-18446744073709551615", b: "0-1-5..18446744073709551615",
			union: "0-1-18446744073709551615", intersect: "0-1-5..18446744073709551615", aMinusB: "0-1-4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := MustParse(tt.f, tt.a), MustParse(tt.f, tt.b)
			check := func(op string, got Set, want string) {
				t.Helper()
				if got.String() != want {
					t.Errorf("%s = %q, want %q", op, got, want)
				}
				if !got.IsEmpty() && got.Flavor() != tt.f {
					t.Errorf("%s flavor = %v, want %v", op, got.Flavor(), tt.f)
				}
			}
			check("A∪B", a.Union(b), tt.union)
			check("B∪A", b.Union(a), tt.union)
			check("A∩B", a.Intersect(b), tt.intersect)
			check("B∩A", b.Intersect(a), tt.intersect)
			check("A−B", a.Subtract(b), tt.aMinusB)
			check("B−A", b.Subtract(a), tt.bMinusA)
			if got, want := a.Contains(b), tt.bMinusA == ""; got != want {
				t.Errorf("A.Contains(B) = %v, want %v", got, want)
			}
			if got, want := b.Contains(a), tt.aMinusB == ""; got != want {
				t.Errorf("B.Contains(A) = %v, want %v", got, want)
			}
			if got, want := a.Equal(b), tt.aMinusB == "" && tt.bMinusA == ""; got != want || b.Equal(a) != want {
				t.Errorf("Equal = %v, want %v", got, want)
			}
			if got, want := Comparable(a, b), tt.aMinusB == "" || tt.bMinusA == ""; got != want {
				t.Errorf("Comparable = %v, want %v", got, want)
			}
			if a.String() != MustParse(tt.f, tt.a).String() || b.String() != MustParse(tt.f, tt.b).String() {
				t.Errorf("operands modified: A=%q B=%q", a, b)
			}
		})
	}
}

func TestCount(t *testing.T) {
	tests := []struct {
		f    Flavor
		in   string
		want uint64
	}{
		{MySQL, "", 0},
		{MySQL, u1 + ":1-5:7:10-19", 16},
		{MySQL, u1 + ":1-5:t:1-5," + u2 + ":3", 11},
		{MySQL, u1 + ":1-9223372036854775806," + u2 + ":1-9223372036854775806", 2 * (math.MaxInt64 - 1)},
		{MySQL, u1 + ":1-9223372036854775806," + u2 + ":1-9223372036854775806," + u3 + ":1-5", math.MaxUint64},
		{MariaDB, "0-1-100", 100},
		{MariaDB, "0-1-50,0-2-100", 150}, // upper bound: really 100 transactions
		{MariaDB, "0-1-5..20,1-1-3", 19},
		{MariaDB, "0-1-18446744073709551615", math.MaxUint64},
		{MariaDB, "0-1-18446744073709551615,0-2-1", math.MaxUint64},
	}
	for _, tt := range tests {
		if got := MustParse(tt.f, tt.in).Count(); got != tt.want {
			t.Errorf("Count(%s %q) = %d, want %d", tt.f, tt.in, got, tt.want)
		}
	}
}

func TestZeroValue(t *testing.T) {
	var z Set
	m := MustParse(MySQL, u1+":1-5")
	if !z.IsEmpty() || z.Count() != 0 || z.String() != "" || z.Flavor() != 0 || z.Compact() != "empty" {
		t.Errorf("zero Set: empty=%v count=%d string=%q flavor=%v compact=%q", z.IsEmpty(), z.Count(), z, z.Flavor(), z.Compact())
	}
	if !m.Contains(z) || z.Contains(m) || !z.Contains(z) || !Comparable(z, m) {
		t.Error("zero Set containment wrong")
	}
	if u := z.Union(m); !u.Equal(m) || u.Flavor() != MySQL {
		t.Errorf("zero ∪ m = %q (%v)", u, u.Flavor())
	}
	if d := m.Subtract(z); !d.Equal(m) || d.Flavor() != MySQL {
		t.Errorf("m − zero = %q (%v)", d, d.Flavor())
	}
	if i := z.Intersect(m); !i.IsEmpty() || i.Flavor() != MySQL {
		t.Errorf("zero ∩ m = %q (%v)", i, i.Flavor())
	}
	if !z.Equal(MustParse(MariaDB, "")) || !MustParse(MySQL, "").Equal(MustParse(MariaDB, "")) {
		t.Error("empty sets of any flavor must be Equal")
	}
}

func TestFlavorMismatch(t *testing.T) {
	my, maria := MustParse(MySQL, u1+":1-5"), MustParse(MariaDB, "0-1-5")
	emptyMy, emptyMaria := MustParse(MySQL, ""), MustParse(MariaDB, "")

	if err := CheckFlavor(my, maria); !errors.Is(err, ErrFlavorMismatch) {
		t.Errorf("CheckFlavor(mysql, mariadb) = %v, want ErrFlavorMismatch", err)
	}
	for _, pair := range [][2]Set{{my, emptyMaria}, {emptyMy, maria}, {my, my}, {Set{}, maria}} {
		if err := CheckFlavor(pair[0], pair[1]); err != nil {
			t.Errorf("CheckFlavor(%v %q, %v %q) = %v, want nil", pair[0].Flavor(), pair[0], pair[1].Flavor(), pair[1], err)
		}
	}

	// An empty set of the other flavor combines without panicking.
	if u := my.Union(emptyMaria); !u.Equal(my) || u.Flavor() != MySQL {
		t.Errorf("mysql ∪ empty mariadb = %q (%v)", u, u.Flavor())
	}
	if u := emptyMy.Union(maria); u.Flavor() != MariaDB || u.String() != "0-1-5" {
		t.Errorf("empty mysql ∪ mariadb = %q (%v)", u, u.Flavor())
	}
	if !maria.Contains(emptyMy) || emptyMaria.Contains(my) {
		t.Error("containment with empty other-flavor set wrong")
	}

	ops := map[string]func(){
		"Equal":      func() { my.Equal(maria) },
		"Contains":   func() { my.Contains(maria) },
		"Union":      func() { my.Union(maria) },
		"Intersect":  func() { maria.Intersect(my) },
		"Subtract":   func() { maria.Subtract(my) },
		"Comparable": func() { Comparable(my, maria) },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, ErrFlavorMismatch) {
					t.Errorf("panic value = %v, want error wrapping ErrFlavorMismatch", err)
				}
			}()
			op()
		})
	}
}

// TestSharingIsSafe guards the immutability contract: results share interval
// storage with their operands, so later operations must never write into it.
func TestSharingIsSafe(t *testing.T) {
	a := MustParse(MySQL, u1+":1-5:10-20,"+u2+":1-3")
	b := MustParse(MySQL, u1+":6-9,"+u3+":1")
	u := a.Union(b)
	_ = u.Union(MustParse(MySQL, u2+":4-9,"+u1+":21-30"))
	_ = u.Subtract(MustParse(MySQL, u1+":2"))
	_ = a.Subtract(MustParse(MySQL, u3+":1"))
	if got, want := a.String(), u1+":1-5:10-20,"+u2+":1-3"; got != want {
		t.Errorf("a changed to %q", got)
	}
	if got, want := u.String(), u1+":1-20,"+u2+":1-3,"+u3+":1"; got != want {
		t.Errorf("a ∪ b = %q, want %q", got, want)
	}
}

func TestCompact(t *testing.T) {
	tests := []struct {
		f        Flavor
		in, want string
	}{
		{MySQL, "", "empty"},
		{MySQL, u1 + ":1-5012", "3e11fa47…:1-5012"},
		{MySQL, u1 + ":7", "3e11fa47…:7"},
		{MySQL, u1 + ":1-5012," + u2 + ":1-30," + u3 + ":1-2", "3e11fa47…:1-5012 (+2 sources)"},
		{MySQL, u1 + ":1-10:12:15-70," + u2 + ":1-9", "3e11fa47…:1-70 (2 gaps, +1 source)"},
		{MySQL, u1 + ":1-5:audit:1-70", "3e11fa47…:audit:1-70 (+1 source)"},
		{MariaDB, "0-1-100", "0-1-100"},
		{MariaDB, "0-1-50,0-2-100,1-7-3", "0-2-100 (+2 sources)"},
		{MariaDB, "0-1-41..100", "0-1-41..100"},
		{MariaDB, "0-1-4,0-1-10..20", "0-1-20 (1 gap)"},
	}
	for _, tt := range tests {
		if got := MustParse(tt.f, tt.in).Compact(); got != tt.want {
			t.Errorf("Compact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestOriginatedBy(t *testing.T) {
	const u1, u2 = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4d8b2e3a-0f1c-11ef-8b2a-0242ac120002"
	cases := []struct {
		name   string
		f      Flavor
		set    string
		server string
		want   string
	}{
		{"mysql one uuid, all tags", MySQL, u1 + ":1-5:t:1-2," + u2 + ":1-9", u1, u1 + ":1-5:t:1-2"},
		{"mysql upper-case server uuid", MySQL, u1 + ":1-5," + u2 + ":1-9", strings.ToUpper(u2), u2 + ":1-9"},
		{"mysql absent", MySQL, u1 + ":1-5", u2, ""},
		{"mariadb every domain of a server", MariaDB, "0-1-50,0-3-51,1-3-7,1-2-9", "3", "0-3-51,1-3-7"},
		{"mariadb absent", MariaDB, "0-1-50", "2", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := MustParse(c.f, c.set).OriginatedBy(c.server)
			if err != nil {
				t.Fatal(err)
			}
			if want := MustParse(c.f, c.want); !got.Equal(want) {
				t.Errorf("OriginatedBy(%s) = %s, want %s", c.server, got, want)
			}
		})
	}
	if _, err := MustParse(MySQL, u1+":1").OriginatedBy("nope"); !errors.Is(err, ErrParse) {
		t.Errorf("bad uuid: %v", err)
	}
	if _, err := MustParse(MariaDB, "0-1-1").OriginatedBy("x"); !errors.Is(err, ErrParse) {
		t.Errorf("bad server id: %v", err)
	}
}
