package gtid

import "testing"

// TestCoversMariaDBPerDomain pins the per-domain (gtid_current_pos) semantics
// of Covers/Uncovered on multi-domain MariaDB histories, next to what plain
// Contains says for the same sets.
func TestCoversMariaDBPerDomain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		s, o      string
		covers    bool
		uncovered string
		contains  bool
	}{
		{"restored from a backup: binlog state lost the old server's entry", "0-2-100", "0-1-50,0-2-100", true, "", false},
		{"same position, other way round", "0-1-50,0-2-100", "0-2-100", true, "", true},
		{"old primary's unreplicated transaction", "0-1-50,0-2-60", "0-1-51", false, "0-1-51..51", false},
		{"same seq_no written by two servers", "0-1-50,0-2-51", "0-1-51", false, "0-1-51..51", false},
		{"same seq_no the other way", "0-1-51", "0-1-50,0-2-51", false, "0-2-51", false},
		{"lagging domain", "0-1-40,1-3-30", "0-1-50,1-3-30", false, "0-1-41..50", false},
		{"ahead in one domain", "0-1-50,1-3-30", "0-1-40,1-3-30", true, "", true},
		{"errant transaction in another domain", "0-1-50", "0-1-50,5-3-1", false, "5-3-1", false},
		{"each side ahead in one domain", "0-1-50,1-1-20", "0-1-40,1-1-25", false, "1-1-21..25", false},
		{"head key present but behind: history forked", "0-1-40,0-2-100", "0-1-50", false, "0-1-41..50", false},
		{"older server entries need not be present", "0-9-7,0-2-100", "0-1-50,0-2-100,1-4-3", false, "1-4-3", false},
		{"empty covers empty", "", "", true, "", true},
		{"anything covers empty", "0-1-5", "", true, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, o := MustParse(MariaDB, tc.s), MustParse(MariaDB, tc.o)
			if got := s.Covers(o); got != tc.covers {
				t.Errorf("%q.Covers(%q) = %t, want %t", tc.s, tc.o, got, tc.covers)
			}
			if got := s.Uncovered(o).String(); got != tc.uncovered {
				t.Errorf("%q.Uncovered(%q) = %q, want %q", tc.s, tc.o, got, tc.uncovered)
			}
			if got := s.Contains(o); got != tc.contains {
				t.Errorf("%q.Contains(%q) = %t, want %t", tc.s, tc.o, got, tc.contains)
			}
		})
	}
}

// TestCoversMySQLIsContains: MySQL GTIDs are independent, so Covers is
// exactly Contains and Uncovered exactly the difference.
func TestCoversMySQLIsContains(t *testing.T) {
	a := "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"
	b := "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-7,4d8b2e3a-0f1c-11ef-8b2a-0242ac120002:1-2"
	s, o := MustParse(MySQL, a), MustParse(MySQL, b)
	if s.Covers(o) || !o.Covers(s) {
		t.Fatalf("Covers disagrees with Contains for %q and %q", a, b)
	}
	if got, want := s.Uncovered(o), o.Subtract(s); !got.Equal(want) {
		t.Fatalf("Uncovered = %s, want %s", got, want)
	}
	if !s.Heads().Equal(s) {
		t.Fatalf("MySQL Heads changed the set")
	}
}
