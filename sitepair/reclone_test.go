package sitepair

import (
	"errors"
	"strings"
	"testing"

	"github.com/failoverd/failoverd/gtid"
)

// divergedC is the state with a primary and c recorded as diverged by two
// errant transactions.
func divergedC() Persisted {
	return with(active("a"), func(p *Persisted) {
		p.Diverged = map[string]gtid.Set{"c": errant("c", 2)}
		p.DivergedCount = map[string]uint64{"c": 2}
	})
}

// A known-diverged site is re-checked on every round: once a human repaired
// it (its history contained in the primary's, or streaming from the primary
// with nothing of its own the primary lacks) the divergence is cleared and
// a later round rejoins it; while it still holds errant transactions it
// stays diverged, and a recloning site is left alone whatever it holds.
func TestDivergenceIsRecheckedAndClearedOnceRepaired(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    SiteObservation
		st   Persisted
		want want
	}{
		{"still holding its errant writes: stays diverged", site("c", RO, exec(upto(10).Union(errant("c", 2)))), divergedC(),
			want{action: Alert, reason: ReasonDegradedNotFollowing}},
		{"re-seeded by hand (contained): cleared", site("c", RO, exec(upto(8))), divergedC(),
			want{action: ClearDiverged, reason: ReasonDivergenceRepaired, target: "a"}},
		{"repointed by hand, errant writes still there: stays diverged",
			site("c", RO, follows("a"), withID(errantUUID("c")), exec(upto(10).Union(errant("c", 2)))), divergedC(),
			want{action: None, reason: ReasonHealthy}},
		{"streaming from the primary with nothing of its own: cleared",
			site("c", RO, follows("a"), withID(errantUUID("c")), exec(upto(10))), divergedC(),
			want{action: ClearDiverged, reason: ReasonDivergenceRepaired, target: "a"}},
		{"contained but recloning: left alone (a partial restore looks contained)", site("c", RO, exec(upto(3))),
			with(divergedC(), func(p *Persisted) { p.Recloning = map[string]Reclone{"c": {Donor: "a", Epoch: 1, At: now, By: "op"}} }),
			want{action: Alert, reason: ReasonDegradedNotFollowing}},
		{"a recloning site that is not diverged is not rejoined either", site("c", RO, exec(upto(3))),
			with(active("a"), func(p *Persisted) {
				p.Recloning = map[string]Reclone{"c": {Donor: "a", At: now, By: "op", Failed: "hook exited 1"}}
			}),
			want{action: Alert, reason: ReasonDegradedNotFollowing}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := group(site("a", W, exec(upto(10))), site("b", RO, follows("a")), tc.c)
			d := Decide(obs, tc.st, DefaultPolicy(), now)
			tc.want.check(t, d)
			if d.Action != ClearDiverged {
				return
			}
			if len(d.Repaired) != 1 || d.Repaired[0] != "c" {
				t.Fatalf("repaired %v, want [c]", d.Repaired)
			}
			next := Apply(tc.st, d, now)
			if _, ok := next.Diverged["c"]; ok {
				t.Fatal("divergence still recorded after ClearDiverged")
			}
			if _, ok := next.DivergedCount["c"]; ok {
				t.Fatal("divergent count still recorded after ClearDiverged")
			}
			if _, ok := tc.st.Diverged["c"]; !ok {
				t.Fatal("Apply modified its input")
			}
			// The next round rejoins it.
			want{action: Rejoin, reason: ReasonRejoin, target: "a"}.check(t, Decide(group(site("a", W, exec(upto(10))), site("b", RO, follows("a")), site("c", RO, exec(upto(8)))), next, DefaultPolicy(), now))
		})
	}
}

// A recloning site is never promoted, and what it holds is never required
// of a candidate (it is being replaced by the primary's data).
func TestRecloningSiteIsNeverACandidate(t *testing.T) {
	st := with(promoted("a"), func(p *Persisted) { p.Recloning = map[string]Reclone{"c": {Donor: "a", At: now, By: "op"}} })
	obs := group(site("a", UR, down), site("b", RO, lost("a"), exec(upto(9))), site("c", RO, lost("a"), exec(upto(12))))
	d := Decide(obs, st, DefaultPolicy(), now)
	if d.Target == "c" {
		t.Fatalf("decision %s targets the recloning site", d)
	}
	if d.Action != RevokeEpoch || d.Target != "b" {
		t.Fatalf("decision %s, want a revoke to b (c's transactions are not owed)", d)
	}
}

// probeOf is a reclone probe read from obs: site's and the active site
// a's executed sets.
func probeOf(obs Observed, site string) RecloneProbe {
	pr := RecloneProbe{Donor: "a"}
	for _, s := range obs.Sites {
		switch s.Name {
		case site:
			pr.SiteExecuted = s.Executed
		case "a":
			pr.DonorExecuted = s.Executed
		}
	}
	return pr
}

func TestStartReclone(t *testing.T) {
	healthy := group(site("a", W, exec(upto(10))), site("b", RO, follows("a")), site("c", RO, exec(upto(10).Union(errant("c", 2)))))
	contained := group(site("a", W, exec(upto(10))), site("b", RO, follows("a")), site("c", RO, exec(upto(8))))
	token, err := RecloneToken(divergedC(), "c", probeOf(healthy, "c"))
	if err != nil || !strings.HasPrefix(token, "00000000-") {
		t.Fatalf("token %q (%v) is not the divergent set", token, err)
	}
	for _, tc := range []struct {
		name  string
		obs   Observed
		st    Persisted
		site  string
		token string
		by    string
		err   error
	}{
		{"the first 8 characters of the divergent set", healthy, divergedC(), "c", token[:8], "op", nil},
		{"the whole divergent set", healthy, divergedC(), "c", token, "op", nil},
		{"too short a prefix", healthy, divergedC(), "c", token[:7], "op", ErrRecloneToken},
		{"not a prefix", healthy, divergedC(), "c", "3e11fa47-71ca", "op", ErrRecloneToken},
		{"the site name while a divergence is recorded", healthy, divergedC(), "c", "c", "op", ErrRecloneToken},
		{"nothing the donor lacks: the site name", contained, active("a"), "c", "c", "op", nil},
		{"nothing the donor lacks: anything else", contained, active("a"), "c", "cc", "op", ErrRecloneToken},
		{"the primary itself", healthy, active("a"), "a", "a", "op", ErrRecloneRefused},
		{"a writable site", group(site("a", W), site("c", W)), active("a"), "c", "c", "op", ErrRecloneRefused},
		{"donor not writable", group(site("a", UR), site("c", RO)), active("a"), "c", "c", "op", ErrRecloneRefused},
		{"failover in flight", healthy, revoked("a", "b", now), "c", "c", "op", ErrRecloneRefused},
		{"no primary recorded", healthy, Persisted{}, "c", "c", "op", ErrRecloneRefused},
		{"unknown site", healthy, active("a"), "z", "z", "op", ErrRecloneRefused},
		{"nobody asked", healthy, active("a"), "c", "c", "", ErrRecloneRefused},
		{"already running", contained, with(active("a"), func(p *Persisted) { p.Recloning = map[string]Reclone{"c": {Donor: "a"}} }), "c", "c", "op", ErrRecloneRunning},
		{"retry after a failure", contained, with(active("a"), func(p *Persisted) { p.Recloning = map[string]Reclone{"c": {Donor: "a", Failed: "x"}} }), "c", "c", "op", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, r, err := StartReclone(tc.obs, tc.st, tc.site, tc.token, probeOf(tc.obs, tc.site), now, tc.by)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				if len(next.Recloning) != len(tc.st.Recloning) {
					t.Fatal("a refused reclone changed the state")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Donor != "a" || r.By != tc.by || !r.At.Equal(now) || r.Failed != "" || next.Recloning[tc.site] != r {
				t.Fatalf("recorded %+v / %+v", r, next.Recloning)
			}
			if tc.st.Recloning != nil && tc.st.Recloning[tc.site].Failed == "" && tc.st.Recloning[tc.site].Donor != "" {
				t.Fatal("input modified")
			}
		})
	}
}

// A site never recorded as diverged that holds transactions the donor
// lacks (an old primary that came back this round, an operator-fenced site
// never marked) is not wiped with its bare name as the token: what the
// fresh probe finds it alone holds needs the same token as a recorded
// divergence, and the refusal names it. A recorded divergence the site has
// since grown past needs the start of the larger set.
func TestRecloneOfAnUnmarkedSiteHoldingTransactionsTheDonorLacksNeedsTheirSet(t *testing.T) {
	obs := group(site("a", W, exec(upto(10))), site("b", RO, follows("a")), site("c", RO, exec(upto(8))))
	// The observations predate c's own writes; the probe does not.
	probe := RecloneProbe{Donor: "a", SiteExecuted: upto(12), DonorExecuted: upto(10).Union(errant("a", 3))}
	lost := srcUUID + ":11-12"
	_, _, err := StartReclone(obs, active("a"), "c", "c", probe, now, "op")
	if !errors.Is(err, ErrRecloneToken) {
		t.Fatalf("reclone of c, holding %s the donor lacks, with its name: err %v, want %v", lost, err, ErrRecloneToken)
	}
	for _, part := range []string{lost, "2 transactions the donor a lacks", "first 8 or more characters"} {
		if !strings.Contains(err.Error(), part) {
			t.Fatalf("refusal %q does not say %q", err, part)
		}
	}
	if tok, _ := RecloneToken(active("a"), "c", probe); tok != lost {
		t.Fatalf("token %q, want %q", tok, lost)
	}
	for _, tok := range []string{lost[:8], lost} {
		if next, _, err := StartReclone(obs, active("a"), "c", tok, probe, now, "op"); err != nil || next.Recloning["c"].Donor != "a" {
			t.Fatalf("reclone with token %q: %v", tok, err)
		}
	}
	if _, _, err := StartReclone(obs, active("a"), "c", lost[:7], probe, now, "op"); !errors.Is(err, ErrRecloneToken) {
		t.Fatalf("too short a token: %v", err)
	}

	// Recorded c:1-2, and c wrote c:3 since: the token names all three.
	grown := RecloneProbe{Donor: "a", SiteExecuted: upto(10).Union(errant("c", 3)), DonorExecuted: upto(10)}
	if _, _, err := StartReclone(obs, divergedC(), "c", errant("c", 2).String(), grown, now, "op"); !errors.Is(err, ErrRecloneToken) ||
		!strings.Contains(err.Error(), errant("c", 3).String()) {
		t.Fatalf("reclone with the recorded set after c grew past it: %v", err)
	}
	if _, _, err := StartReclone(obs, divergedC(), "c", errant("c", 3).String(), grown, now, "op"); err != nil {
		t.Fatal(err)
	}
}

// Without a probe of both sites now, or with one read against another
// donor or in another GTID flavor, what the reclone throws away is unknown:
// refused whatever the token.
func TestRecloneIsRefusedWithoutAFreshProbe(t *testing.T) {
	obs := group(site("a", W, exec(upto(10))), site("c", RO, exec(upto(8))))
	for name, probe := range map[string]RecloneProbe{
		"probe failed":   {Donor: "a", Err: errors.New("dial tcp: connection refused")},
		"another donor":  {Donor: "b", SiteExecuted: upto(8), DonorExecuted: upto(10)},
		"flavor differs": {Donor: "a", SiteExecuted: gtid.MustParse(gtid.MariaDB, "0-3-5"), DonorExecuted: upto(10)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := StartReclone(obs, active("a"), "c", "c", probe, now, "op"); !errors.Is(err, ErrRecloneRefused) {
				t.Fatalf("err %v, want %v", err, ErrRecloneRefused)
			}
		})
	}
}

func TestFinishReclone(t *testing.T) {
	running := with(divergedC(), func(p *Persisted) { p.Recloning = map[string]Reclone{"c": {Donor: "a", By: "op"}} })
	failed := FinishReclone(running, "c", "hook exited 1")
	if failed.Recloning["c"].Failed != "hook exited 1" || running.Recloning["c"].Failed != "" {
		t.Fatalf("failure recorded as %+v (input %+v)", failed.Recloning, running.Recloning)
	}
	if _, ok := failed.Diverged["c"]; !ok {
		t.Fatal("a failed reclone cleared the divergence")
	}
	done := FinishReclone(running, "c", "")
	if _, ok := done.Recloning["c"]; ok {
		t.Fatal("still recloning after success")
	}
	if _, ok := done.Diverged["c"]; ok {
		t.Fatal("still diverged after a successful reclone")
	}
	if _, ok := running.Diverged["c"]; !ok {
		t.Fatal("input modified")
	}
	if same := FinishReclone(divergedC(), "c", ""); same.Diverged["c"].IsEmpty() {
		t.Fatal("finishing a reclone that was never started cleared the divergence")
	}
}
