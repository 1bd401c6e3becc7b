package gtid

import (
	"errors"
	"math"
	"testing"
)

func TestDivergentCount(t *testing.T) {
	tests := []struct {
		name          string
		fl            Flavor
		site, primary string
		want          uint64
	}{
		// The examples of issue 16: a sequence number is not a count.
		{"old primary back with one errant insert", MariaDB, "0-1-3,0-2-4", "0-1-10", 1},
		{"two unreplicated writes after the failover point", MariaDB, "0-1-10,0-2-12", "0-1-15", 2},
		{"three servers in one domain", MariaDB, "0-3-5,0-1-8,0-2-9", "0-3-5,0-1-12", 1},
		{"domain the primary lacks entirely", MariaDB, "0-1-10,1-3-7", "0-1-10", 7},
		{"domain the primary lacks, several servers", MariaDB, "0-1-10,1-3-7,1-4-9", "0-1-12", 9},
		{"several diverged domains add up", MariaDB, "0-1-10,0-2-11,1-1-5,1-2-8", "0-1-10,1-1-6", 1 + 3},
		{"errant at the primary's own seq_no", MariaDB, "0-1-100,0-3-101", "0-1-101", 1},
		{"old primary wrote what the new one wrote over", MariaDB, "0-1-100", "0-1-50,0-2-100", 50},
		{"behind the primary: nothing divergent", MariaDB, "0-1-50", "0-1-50,0-2-100", 0},
		{"equal", MariaDB, "0-1-50,0-2-100", "0-1-50,0-2-100", 0},
		{"ahead on the primary's own chain", MariaDB, "0-1-60", "0-1-50", 10},
		{"empty site", MariaDB, "", "0-1-50", 0},
		{"empty primary", MariaDB, "0-1-50,0-2-100,1-1-3", "", 103},
		{"both empty", MariaDB, "", "", 0},
		{"subtract-style intervals count only the seq_nos held", MariaDB, "0-1-4,0-1-60..62", "0-1-10", 3},
		{"top of the range", MariaDB, "0-1-18446744073709551615,1-1-18446744073709551615", "", math.MaxUint64},
		{"mysql: plain difference", MySQL, u1 + ":1-10," + u2 + ":1-3", u1 + ":1-8", 2 + 3},
		{"mysql: gaps count exactly", MySQL, u1 + ":1-10:20-25", u1 + ":1-5:21", 5 + 5},
		{"mysql: contained", MySQL, u1 + ":1-5", u1 + ":1-10", 0},
		{"mysql: empty primary", MySQL, u1 + ":1-5:7", "", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			site, primary := MustParse(tt.fl, tt.site), MustParse(tt.fl, tt.primary)
			got := DivergentCount(site, primary)
			if got != tt.want {
				t.Fatalf("DivergentCount(%q, %q) = %d, want %d", tt.site, tt.primary, got, tt.want)
			}
			if up := site.Subtract(primary).Count(); got > up {
				t.Fatalf("count %d above the difference's upper bound %d", got, up)
			}
		})
	}
}

// An empty set of either flavor combines with anything; non-empty sets of
// different flavors panic with ErrFlavorMismatch, as Subtract does.
func TestDivergentCountFlavors(t *testing.T) {
	my, maria := MustParse(MySQL, u1+":1-5"), MustParse(MariaDB, "0-1-5")
	for _, c := range []struct {
		site, primary Set
		want          uint64
	}{
		{maria, Set{}, 5}, {Set{}, maria, 0}, {my, Set{}, 5},
		{maria, MustParse(MySQL, ""), 5}, {MustParse(MariaDB, ""), my, 0},
	} {
		if got := DivergentCount(c.site, c.primary); got != c.want {
			t.Errorf("DivergentCount(%q, %q) = %d, want %d", c.site, c.primary, got, c.want)
		}
	}
	defer func() {
		err, _ := recover().(error)
		if !errors.Is(err, ErrFlavorMismatch) || CheckFlavor(maria, my) == nil {
			t.Fatalf("mixed flavors: recovered %v, want a panic wrapping ErrFlavorMismatch", err)
		}
	}()
	DivergentCount(maria, my)
}
