package sitepair

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/statemachine"
)

// relation is a site's GTID history relative to the common base upto(10).
type relation int

const (
	relEqual    relation = iota // upto(10)
	relAhead                    // executed upto(11), retrieved upto(12)
	relBehind                   // upto(8)
	relDiverged                 // upto(9) plus one errant transaction of its own
	numRelations
)

func (r relation) sets(site string) (executed, retrieved gtid.Set) {
	switch r {
	case relAhead:
		return upto(11), upto(12)
	case relBehind:
		return upto(8), gtid.Set{}
	case relDiverged:
		return upto(9).Union(errant(site, 1)), gtid.Set{}
	}
	return upto(10), gtid.Set{}
}

// evidence is what the daemon knows about the old primary's fence.
type evidence int

const (
	evNone     evidence = iota
	evReadBack          // read_only=ON read back at the current epoch
	evDown              // mysqld refused connections (only when unreachable)
	evOperator          // an operator confirmed it dead in this failover (ConfirmFence)
	evStale             // an operator confirmation recorded for an older epoch
	numEvidence
)

// withConfirmation records the operator confirmation ev stands for in st's
// failover in flight (a copy; st is not modified).
func withConfirmation(st Persisted, ev evidence) Persisted {
	if ev != evOperator && ev != evStale {
		return st
	}
	f := *st.InFlight
	c := &FenceConfirmation{Site: f.From, Epoch: f.Epoch, At: now.Add(-time.Second), By: "model"}
	if ev == evStale {
		c.Epoch--
	}
	f.OperatorConfirmed = c
	st.InFlight = &f
	return st
}

// extras are the dimensions enumerated beside the core ones.
type extras struct {
	streaming bool // replicas' IO threads connected to the recorded primary
	stray     bool // the first non-primary site replicates from nobody (a former primary)
	lastDR    bool // the last declared site is dr-only
	knownDiv  bool // sites with relDiverged are recorded in Persisted.Diverged
	mode      FencingMode
	ev        evidence
	revokedAt time.Time // in flight: when the epoch was revoked; every sidecar reported then last
}

// modelStats counts what the enumeration produced, so the test can prove
// that it is not vacuous.
type modelStats struct {
	states  int
	reasons map[Reason]int
	proofs  map[FenceProof]int
}

// enumerate feeds every combination for n sites to visit:
//
//   - per site: 4 debounced states × 4 GTID relations;
//   - history: no failover (a recorded primary) or "we promoted X" for every
//     site X, the latter with the last failover inside the promotion settle
//     window (without a failover in flight only), inside or outside the
//     cooldown (outside it: from the next site, proof lease-expired);
//   - in flight: none, or revoked from the recorded primary to every other
//     site with the sidecar lease pending or expired;
//   - without a failover in flight: replicas streaming or not × the first
//     non-primary site replicating from nobody (a former primary) or not ×
//     last site dr-only or not × diverged sites recorded or not;
//   - with a failover in flight: fencing mode (4) × fence evidence for the
//     old primary (none, read back, mysqld down, confirmed dead by an
//     operator in this failover, or at an older epoch) × replicas streaming or
//     not; for 2 sites also × last site dr-only × diverged sites recorded
//     (for 3 sites those two alternate deterministically, to keep the run
//     short).
func enumerate(n int, visit func(obs Observed, st Persisted, pol Policy)) {
	names := []string{"a", "b", "c", "d"}[:n]
	pow := 1
	for range n {
		pow *= 4
	}
	bools := []bool{false, true}
	var noFlight, inFlight []extras
	for _, s := range bools {
		for _, d := range bools {
			for _, k := range bools {
				for _, stray := range bools {
					noFlight = append(noFlight, extras{streaming: s, stray: stray, lastDR: d, knownDiv: k, mode: FencingSidecar})
				}
				if n > 2 && (d || k) {
					continue
				}
				for _, m := range []FencingMode{FencingSidecar, FencingConfirmed, FencingNone, FencingSemiSync} {
					for ev := range numEvidence {
						inFlight = append(inFlight, extras{streaming: s, lastDR: d, knownDiv: k, mode: m, ev: ev})
					}
				}
			}
		}
	}
	var histories []Persisted
	histories = append(histories, Persisted{Epoch: 1, ActiveSite: names[0]})
	for i, x := range names {
		// Inside the promotion settle window, inside and outside the 10 min
		// cooldown; the oldest one records its old primary (the next site)
		// and its proof, so a deposed primary may be proven fenced.
		for _, ago := range []time.Duration{time.Second, time.Minute, 2 * time.Hour} {
			h := Persisted{Epoch: 2, ActiveSite: x, LastFailoverAt: now.Add(-ago),
				LastFailoverTarget: x, PromotionGTID: upto(8), FailoverHistory: []time.Time{now.Add(-ago)}}
			if ago > time.Hour {
				h.LastFailoverFrom, h.LastFailoverProof = names[(i+1)%n], ProofLeaseExpired
			}
			histories = append(histories, h)
		}
	}
	// Operating modes: a paused group, and a no-promote and a maintenance
	// hold on a replica of the recorded primary.
	until := now.Add(time.Hour)
	histories = append(histories,
		Persisted{Epoch: 1, ActiveSite: names[0], Pause: &Pause{Until: until, By: "op", Reason: "model"}},
		Persisted{Epoch: 1, ActiveSite: names[0], Holds: map[string]Hold{names[1]: {Kind: HoldNoPromote, Until: until, By: "op", Reason: "model"}}},
		Persisted{Epoch: 1, ActiveSite: names[0], Holds: map[string]Hold{names[1]: {Kind: HoldMaintenance, Until: until, By: "op", Reason: "model"}}})
	// The GTID sets of every (relation, site), built once.
	var sets [numRelations][][2]gtid.Set
	for r := range numRelations {
		for _, name := range names {
			e, x := r.sets(name)
			sets[r] = append(sets[r], [2]gtid.Set{e, x})
		}
	}
	all := statemachine.AllStates()
	states := make([]statemachine.State, n)
	rels := make([]relation, n)
	buf := make([]SiteObservation, n) // reused: visit must not retain obs
	mix := 0
	for si := range pow {
		for i, x := 0, si; i < n; i, x = i+1, x/4 {
			states[i] = all[x%4]
		}
		for ri := range pow {
			for i, x := 0, ri; i < n; i, x = i+1, x/4 {
				rels[i] = relation(x % 4)
			}
			build := func(primary string, epoch uint64, ex extras) Observed {
				return modelObserved(buf, names, states, rels, &sets, primary, epoch, ex)
			}
			for _, h := range histories {
				primary := h.ActiveSite
				// No failover in flight.
				for _, ex := range noFlight {
					visit(build(primary, h.Epoch, ex), withDiverged(h, names, rels, ex), modelPolicy(ex))
				}
				// Revoked from the recorded primary to every other site (a
				// promotion a second ago changes nothing there: skipped to
				// keep the run short).
				if now.Sub(h.LastFailoverAt) < DefaultPromotionSettle {
					continue
				}
				for _, to := range names {
					if to == primary {
						continue
					}
					for _, at := range []time.Time{leasePending, leaseExpired} {
						st := h
						st.Epoch++
						st.ActiveSite = ""
						st.InFlight = &InFlight{Epoch: st.Epoch, RevokedAt: at, From: primary, To: to}
						for _, ex := range inFlight {
							ex.revokedAt = at
							if n > 2 {
								mix++
								ex.lastDR, ex.knownDiv = mix%2 == 1, mix%3 == 1
							}
							visit(build(primary, st.Epoch, ex), withConfirmation(withDiverged(st, names, rels, ex), ex.ev), modelPolicy(ex))
						}
					}
				}
			}
		}
	}
}

func modelObserved(buf []SiteObservation, names []string, states []statemachine.State, rels []relation, sets *[numRelations][][2]gtid.Set, primary string, epoch uint64, ex extras) Observed {
	obs := Observed{Sites: buf}
	for i, name := range names {
		s := SiteObservation{Name: name, Role: PrimaryCandidate, Index: i, State: states[i], LagKnown: true}
		s.Executed, s.Retrieved = sets[rels[i]][i][0], sets[rels[i]][i][1]
		if ex.lastDR && i == len(names)-1 {
			s.Role = DROnly
		}
		if name != primary {
			s.ReplicatingFrom, s.IOConnected = primary, ex.streaming
			if ex.stray {
				s.ReplicatingFrom, s.IOConnected, ex.stray = "", false, false
			}
		}
		if ex.mode.UsesSemiSync() && !ex.revokedAt.IsZero() {
			// The old primary ran safe semi-sync; replicas that lost it
			// had their IO threads stopped.
			if name == primary {
				s.SemiSync = SemiSyncObservation{Known: true, Enabled: true, Active: true, Timeout: MinSemiSyncTimeout, WaitNoReplica: true, WaitPoint: "AFTER_SYNC"}
			} else {
				s.IOStopped = !ex.streaming
			}
		}
		if ex.ev == evDown && s.State == UR {
			s.RefusedProbes = 2
		}
		if !ex.revokedAt.IsZero() {
			// Every sidecar reported at the revoke; the old primary's went
			// silent then, the others hold the revoked epoch.
			// The others kept reporting from the same run (AliveAt: now).
			s.Sidecar = SidecarObservation{Configured: true, LastReport: ex.revokedAt, Epoch: epoch, CanKill: true, AliveAt: now}
			if name == primary {
				s.Sidecar.Epoch, s.Sidecar.AliveAt = epoch-1, time.Time{}
			}
		}
		if ex.ev == evReadBack {
			s.FencedEpoch = epoch
		}
		obs.Sites[i] = s
	}
	return obs
}

func withDiverged(st Persisted, names []string, rels []relation, ex extras) Persisted {
	if !ex.knownDiv {
		return st
	}
	st.Diverged = map[string]gtid.Set{}
	for i, name := range names {
		if rels[i] == relDiverged {
			st.Diverged[name] = errant(name, 1)
		}
	}
	return st
}

func modelPolicy(ex extras) Policy {
	p := DefaultPolicy()
	p.Fencing = ex.mode
	return p
}

func runModel(t *testing.T, n int) modelStats {
	t.Helper()
	stats := modelStats{reasons: map[Reason]int{}, proofs: map[FenceProof]int{}}
	failures := 0
	enumerate(n, func(obs Observed, st Persisted, pol Policy) {
		stats.states++
		d := Decide(obs, st, pol, now)
		stats.reasons[d.Reason]++
		if d.Action == Promote {
			stats.proofs[d.FenceProof]++
		}
		if d.Action == Promote && !slices.Contains(FenceProofs(), d.FenceProof) {
			t.Fatalf("promotion with proof %q, not one of FenceProofs()", d.FenceProof)
		}
		if err := checkInvariants(obs, st, pol, d); err != nil {
			failures++
			if failures <= 5 {
				t.Errorf("invariant violated: %v\n  decision: %s\n  persisted: %+v\n  observed: %s", err, d, st, describe(obs))
			}
		}
	})
	if failures > 0 {
		t.Errorf("%d of %d states violate an invariant", failures, stats.states)
	}
	return stats
}

func describe(obs Observed) string {
	out := ""
	for _, s := range obs.Sites {
		out += fmt.Sprintf("[%s %s %s exec=%s retr=%s from=%q io=%v refused=%d fenced=%d] ",
			s.Name, s.Role, s.State, s.Executed.Compact(), s.Retrieved.Compact(), s.ReplicatingFrom, s.IOConnected, s.RefusedProbes, s.FencedEpoch)
	}
	return out
}

// TestModelCheck enumerates every combination described at enumerate for
// two and three sites and checks the safety invariants on each decision.
func TestModelCheck(t *testing.T) {
	common := []Reason{ReasonFailoverRevoke, ReasonPromote, ReasonPromoteNoFencing, ReasonPromoteResume,
		ReasonCooldown, ReasonSplitBrainKeepPromoted, ReasonSplitBrainKeepWinner, ReasonReassertPrimary, ReasonRejoin,
		ReasonMarkDiverged, ReasonFenceWritableDuringFailover, ReasonFenceOldPrimary, ReasonAwaitLeaseExpiry,
		ReasonAwaitFenceConfirmation, ReasonAwaitCatchUp, ReasonTargetWritableWithoutProof, ReasonCandidateLacksTransactions,
		ReasonPrimaryPartitioned, ReasonUncorroborated, ReasonTotalLoss, ReasonNoEligibleCandidate, ReasonHealthy,
		ReasonPromotionSettling, ReasonNoPrimaryNotAllReachable, ReasonTargetLost, ReasonCatchUpTimeout}
	tests := []struct {
		n         int
		minStates int // the enumeration must never silently shrink
		reach     []Reason
	}{
		// states × relations × (histories × no-flight extras + histories outside
		// the settle window × targets × lease phases × in-flight extras)
		{2, 16 * 16 * (7*16 + 5*2*160), common},
		{3, 64 * 64 * (10*16 + 7*2*2*40), append(common, ReasonIncomparableCandidates, ReasonPromoteRetarget)},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d sites", tc.n), func(t *testing.T) {
			if tc.n > 2 && testing.Short() {
				t.Skip("three-site model check skipped in -short mode")
			}
			stats := runModel(t, tc.n)
			t.Logf("%d sites: %d states checked; %d distinct reasons; promotions by proof %v", tc.n, stats.states, len(stats.reasons), stats.proofs)
			if stats.states < tc.minStates {
				t.Errorf("checked %d states, want at least %d", stats.states, tc.minStates)
			}
			// The model must reach the outcomes the invariants are about.
			for _, r := range tc.reach {
				if stats.reasons[r] == 0 {
					t.Errorf("no state produced %s", r)
				}
			}
			for _, p := range []FenceProof{ProofFenceConfirmed, ProofPrimaryDown, ProofLeaseExpired, ProofSemiSync, ProofOperatorConfirmed, ProofNoFencing} {
				if stats.proofs[p] == 0 {
					t.Errorf("no promotion with proof %s", p)
				}
			}
		})
	}
}
