package sitepair

import (
	"fmt"
	"testing"
)

// benchGroup is a group of n sites whose primary is down with every
// replica corroborating, so Decide runs detection, the anti-flap checks and
// the full candidate comparison (the most expensive path).
func benchGroup(n int) (Observed, Persisted) {
	sites := []SiteObservation{site("s00", UR)}
	for i := 1; i < n; i++ {
		opts := []so{lost("s00"), exec(upto(10 + i%3)), prio(i % 4)}
		if i%5 == 0 {
			opts = append(opts, dr)
		}
		sites = append(sites, site(fmt.Sprintf("s%02d", i), RO, opts...))
	}
	return group(sites...), active("s00")
}

func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{3, 16} {
		obs, st := benchGroup(n)
		pol := DefaultPolicy()
		if d := Decide(obs, st, pol, now); d.Action != RevokeEpoch {
			b.Fatalf("%d sites: benchmark input decides %s, want a failover", n, d)
		}
		b.Run(fmt.Sprintf("%d sites", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Decide(obs, st, pol, now)
			}
		})
	}
}
