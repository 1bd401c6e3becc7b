package sitepair

import (
	"testing"
	"time"
)

// A target that received everything but cannot apply it in time (its
// applier blocked) is given up once the catch-up deadline passed — but only
// when the old primary is reachable, fenced and holding everything, so it
// can be re-asserted; a failover from a dead primary keeps draining.
func TestUnappliedTargetIsGivenUpAfterTheDeadline(t *testing.T) {
	pol := DefaultPolicy()
	pol.CatchUpTimeout = 2 * time.Second
	planned := func(revokedAt time.Time) Persisted {
		p := revoked("a", "b", revokedAt)
		p.InFlight.Planned = true
		return p
	}
	// b received 11 (Retrieved) but applied only 10.
	blocked := func(a SiteObservation) Observed {
		return group(a, site("b", RO, follows("a"), exec(upto(10)), retr(upto(11))), site("c", RO, follows("a"), exec(upto(11))))
	}
	fenced := site("a", RO, exec(upto(11)), fencedAt(2))
	for _, tc := range []struct {
		name string
		obs  Observed
		st   Persisted
		want want
	}{
		{"before the deadline: promote (the drain waits)", blocked(fenced), planned(now.Add(-time.Second)),
			want{action: Promote, reason: ReasonPromote, target: "b", proof: ProofFenceConfirmed}},
		{"after the deadline, old primary fenced and holding all: re-assert it", blocked(fenced), planned(now.Add(-3 * time.Second)),
			want{action: ReassertPrimary, reason: ReasonCatchUpTimeout, target: "a", epoch: 3}},
		{"after the deadline, old primary down: keep promoting (nothing to give back to)",
			group(site("a", UR, exec(upto(11)), down), site("b", RO, lost("a"), exec(upto(10)), retr(upto(11))), site("c", RO, lost("a"), exec(upto(11)))),
			revoked("a", "b", now.Add(-3*time.Second)),
			want{action: Promote, reason: ReasonPromote, target: "b", proof: ProofPrimaryDown, fence: []string{"a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.obs, tc.st, pol, now)
			if tc.want.action == Promote && tc.want.proof == ProofFenceConfirmed {
				tc.want.fence = nil
			}
			tc.want.check(t, d)
		})
	}
}

// A planned switchover waits maxLagWait (Policy.MaxLagWait), not the
// failover's catch-up timeout, before giving the fenced source back its
// writes; an unplanned failover keeps the longer bound.
func TestSwitchoverCatchUpIsBoundedByMaxLagWait(t *testing.T) {
	pol := DefaultPolicy()
	pol.CatchUpTimeout = 30 * time.Second
	pol.MaxLagWait = 2 * time.Second
	// b lacks 11, which the fenced source a holds and is sending it.
	obs := group(site("a", RO, exec(upto(11)), fencedAt(2)), site("b", RO, follows("a"), exec(upto(10)), retr(upto(10))), site("c", RO, follows("a"), exec(upto(10))))
	inFlight := func(planned bool) Persisted {
		p := revoked("a", "b", now.Add(-3*time.Second))
		p.InFlight.Planned = planned
		return p
	}
	want{action: ReassertPrimary, reason: ReasonCatchUpTimeout, target: "a", epoch: 3}.check(t, Decide(obs, inFlight(true), pol, now))
	want{action: None, reason: ReasonAwaitCatchUp}.check(t, Decide(obs, inFlight(false), pol, now))
}
