package gtid

import "testing"

func TestTailOf(t *testing.T) {
	const a, b = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4d22eb58-82db-22f2-af44-d91bbaa3a673"
	for _, tc := range []struct {
		name       string
		f          Flavor
		tail, base string
		want       bool
	}{
		{"mysql: the transactions right after the base", MySQL, a + ":18-19", a + ":1-17," + b + ":1-5", true},
		{"mysql: one transaction right after", MySQL, a + ":18", a + ":1-17", true},
		{"mysql: a source the base lacks starts at 1", MySQL, b + ":1-2", a + ":1-17", true},
		{"mysql: a gap after the base", MySQL, a + ":19-20", a + ":1-17", false},
		{"mysql: two intervals", MySQL, a + ":18:20", a + ":1-17", false},
		{"mysql: older than the base's newest", MySQL, a + ":10", a + ":1-9:11-17", false},
		{"mysql: a source the base lacks, not from 1", MySQL, b + ":3-4", a + ":1-17", false},
		{"mysql: tagged tail", MySQL, a + ":t:3", a + ":1-17:t:1-2", true},
		{"mysql: empty tail", MySQL, "", a + ":1-17", false},
		{"mariadb: the old primary's next seq_nos", MariaDB, "0-1-18", "0-1-17,0-2-25", true},
		{"mariadb: nothing beyond the base", MariaDB, "0-1-17", "0-1-17,0-2-25", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tail, base := MustParse(tc.f, tc.tail), MustParse(tc.f, tc.base)
			if tc.f == MariaDB {
				// A MariaDB position names a server's newest seq_no (its
				// chain from 1): the tail is what the base lacks of it.
				tail = tail.Subtract(base)
			}
			if got := tail.TailOf(base); got != tc.want {
				t.Fatalf("%s.TailOf(%s) = %t, want %t", tail, base, got, tc.want)
			}
		})
	}
	if (Set{}).TailOf(Set{}) {
		t.Error("the empty set is a tail")
	}
	if MustParse(MySQL, a+":1").TailOf(MustParse(MariaDB, "0-1-1")) {
		t.Error("a tail of another flavor")
	}
}
