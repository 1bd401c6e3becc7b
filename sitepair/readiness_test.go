package sitepair

import (
	"testing"
	"time"
)

// TestReadinessMatchesWhatDecideWouldDo: for the situations an operator
// asks about (healthy semi-sync group, silent sidecar, lagging candidate,
// cooldown, pause), the readiness answer is what Decide does when the
// primary is then lost: the same candidate and proof, or the same blocker.
func TestReadinessMatchesWhatDecideWouldDo(t *testing.T) {
	semi := func(o *SiteObservation) { o.SemiSync = safeSemiSync }
	sidecar := func(last time.Time) so {
		return func(o *SiteObservation) {
			o.Sidecar = SidecarObservation{Configured: true, LastReport: last, Epoch: 1, CanKill: true, AliveAt: last}
		}
	}
	semiPol := polWith(func(p *Policy) { p.Fencing = FencingSemiSync })
	sidecarPol := DefaultPolicy()
	type want struct {
		ready     bool
		candidate string
		proof     FenceProof
		reason    Reason
	}
	for _, tc := range []struct {
		name        string
		obs         Observed
		st          Persisted
		pol         Policy
		crash, lost want
	}{
		{"healthy semi-sync group", group(site("a", W, semi), site("b", RO, follows("a")), site("c", RO, follows("a"))), active("a"), semiPol,
			want{true, "b", ProofSemiSync, ReasonPromote}, want{true, "b", ProofSemiSync, ReasonPromote}},
		{"sidecars reporting: the lease proves a lost primary fenced", group(site("a", W, sidecar(now)), site("b", RO, follows("a"), sidecar(now)), site("c", RO, follows("a"), sidecar(now))),
			active("a"), sidecarPol,
			want{true, "b", ProofPrimaryDown, ReasonPromote}, want{true, "b", ProofLeaseExpired, ReasonPromote}},
		{"the primary's sidecar is silent: a lost primary waits for a human", group(site("a", W, sidecar(now.Add(-time.Hour))), site("b", RO, follows("a"), sidecar(now)), site("c", RO, follows("a"), sidecar(now))),
			active("a"), sidecarPol,
			want{true, "b", ProofPrimaryDown, ReasonPromote}, want{false, "b", "", ReasonAwaitFenceConfirmation}},
		{"the only candidate lags", group(site("a", W, semi), site("b", RO, follows("a"), lag(time.Hour))), active("a"), semiPol,
			want{false, "", "", ReasonNoEligibleCandidate}, want{false, "", "", ReasonNoEligibleCandidate}},
		{"cooldown", group(site("a", W, semi), site("b", RO, follows("a"))), with(promoted("a"), automaticAt(now.Add(-time.Minute))), semiPol,
			want{false, "", "", ReasonCooldown}, want{false, "", "", ReasonCooldown}},
		{"paused", group(site("a", W, semi), site("b", RO, follows("a"))), with(active("a"), pausedAt(now.Add(time.Hour))), semiPol,
			want{false, "b", "", ReasonPausedWithheld}, want{false, "b", "", ReasonPausedWithheld}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := CheckReadiness(tc.obs, tc.st, tc.pol, now)
			if len(rs) != 2 || rs[0].Fault != FaultCrash || rs[1].Fault != FaultLost {
				t.Fatalf("CheckReadiness = %+v", rs)
			}
			for i, w := range []want{tc.crash, tc.lost} {
				r := rs[i]
				if r.Ready != w.ready || r.Candidate != w.candidate || r.Proof != w.proof || r.Reason != w.reason {
					t.Errorf("%s: %+v; want ready=%v candidate=%q proof=%q reason=%s", r.Fault, r, w.ready, w.candidate, w.proof, w.reason)
				}
				if r.Message == "" {
					t.Errorf("%s: no message", r.Fault)
				}
			}
			if rs[1].Proof == ProofLeaseExpired && rs[1].ProofAfter < tc.pol.LeaseTimeout {
				t.Errorf("lease proof after %v, want at least the lease %v", rs[1].ProofAfter, tc.pol.LeaseTimeout)
			}
		})
	}
	// No healthy primary: not ready, with the current reason.
	rs := CheckReadiness(group(site("a", UR), site("b", RO, lost("a"))), active("a"), semiPol, now)
	if rs[0].Ready || rs[0].Reason != ReasonFailoverRevoke {
		t.Errorf("primary already down: %+v", rs[0])
	}
}
