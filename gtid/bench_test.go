package gtid

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

const benchIntervals = 10_000

// bigMySQL returns gtid_executed text with 10k intervals spread over 10 UUIDs,
// in MySQL's own output format. Intervals are [start+k*step, start+k*step+width-1].
func bigMySQL(start, step, width uint64) string {
	var b strings.Builder
	for u := range 10 {
		if u > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "%08x-71ca-11e1-9e33-c80aa9429562", u)
		for k := range uint64(benchIntervals / 10) {
			lo := start + k*step
			b.WriteString(":" + strconv.FormatUint(lo, 10) + "-" + strconv.FormatUint(lo+width-1, 10))
		}
	}
	return b.String()
}

// bigMariaDB returns a binlog state with 10k triples (100 domains × 100 servers).
func bigMariaDB() string {
	var b strings.Builder
	for d := range 100 {
		for s := range 100 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d-%d-%d", d, s+1, 1000+d*s)
		}
	}
	return b.String()
}

func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct {
		name string
		f    Flavor
		text string
	}{
		{"mysql-10k-intervals", MySQL, bigMySQL(1, 10, 5)},
		{"mariadb-10k-triples", MariaDB, bigMariaDB()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.text)))
			for b.Loop() {
				if _, err := Parse(bc.f, bc.text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkContains(b *testing.B) {
	primary := MustParse(MySQL, bigMySQL(1, 10, 5))  // 1-5:11-15:...
	replica := MustParse(MySQL, bigMySQL(2, 10, 3))  // 2-4:12-14:... ⊂ primary
	diverged := MustParse(MySQL, bigMySQL(2, 10, 5)) // 2-6:12-16:... ⊄ primary (fails at the first interval)
	late := primary.Union(MustParse(MySQL, "ffffffff-71ca-11e1-9e33-c80aa9429562:1")).Subtract(primary).Union(replica)
	for _, bc := range []struct {
		name string
		a, o Set
		want bool
	}{
		{"10k-in-10k-true", primary, replica, true},
		{"10k-in-10k-early-false", primary, diverged, false},
		{"10k-in-10k-late-false", primary, late, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if bc.a.Contains(bc.o) != bc.want {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}

func BenchmarkUnion(b *testing.B) {
	x := MustParse(MySQL, bigMySQL(1, 10, 5)) // 1-5:11-15:...
	y := MustParse(MySQL, bigMySQL(4, 10, 5)) // 4-8:14-18:... overlaps every interval of x
	sub := MustParse(MySQL, bigMySQL(2, 10, 3))
	b.Run("10k-overlapping", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x.Union(y)
		}
	})
	b.Run("10k-superset-shares", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x.Union(sub)
		}
	})
}

func BenchmarkSubtract(b *testing.B) {
	x := MustParse(MySQL, bigMySQL(1, 10, 5))
	y := MustParse(MySQL, bigMySQL(2, 10, 3)) // punches a hole into every interval of x
	b.Run("10k-splitting", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x.Subtract(y)
		}
	})
	b.Run("10k-to-empty", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			y.Subtract(x)
		}
	})
}

func BenchmarkString(b *testing.B) {
	x := MustParse(MySQL, bigMySQL(1, 10, 5))
	b.ReportAllocs()
	for b.Loop() {
		_ = x.String()
	}
}
