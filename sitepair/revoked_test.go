package sitepair

import (
	"testing"
	"time"
)

// Tests of the revoked states' deadlines and of the re-assert rules around
// unreachable sites (issue 26, holes 7 and 8). The cases expecting a
// give-back or a re-assert failed before the fix (the group stayed without
// a primary); the others pin down what must still block them.

// planned marks st's failover in flight an operator's switchover.
func planned(st Persisted) Persisted {
	f := *st.InFlight
	f.Planned = true
	st.InFlight = &f
	return st
}

// deposed records in st that our last failover, an hour before now, went
// from -> to resting on proof.
func deposed(st Persisted, from, to string, proof FenceProof) Persisted {
	at := now.Add(-time.Hour)
	st.LastFailoverAt, st.LastFailoverFrom, st.LastFailoverTarget, st.LastFailoverProof = at, from, to, proof
	st.PromotionGTID = upto(10)
	st.FailoverHistory = []time.Time{at}
	return st
}

// TestSwitchoverTargetLostGivesSourceBack: a planned switchover whose
// target is lost before it was published gives the fenced source back at
// its deadline, even with an unrelated site unreachable, as long as nothing
// unreachable may be writable.
func TestSwitchoverTargetLostGivesSourceBack(t *testing.T) {
	// a is the source, fenced (read back at the revoked epoch 2), b the
	// target, c an unrelated replica. The switchover's deadline is
	// CatchUpTimeout (30 s) after the revoke (MaxLagWait is 0).
	past := planned(revoked("a", "b", now.Add(-31*time.Second)))
	within := planned(revoked("a", "b", now.Add(-5*time.Second)))
	source := site("a", RO, fencedAt(2))
	published := with(past, func(p *Persisted) {
		f := *p.InFlight
		f.PublishedEpoch, f.PublishedTo = 3, "b"
		p.InFlight = &f
	})
	none := polWith(func(p *Policy) { p.Fencing = FencingNone })
	giveBack := want{action: ReassertPrimary, reason: ReasonTargetLost, target: "a", epoch: 3}
	blocked := want{action: Alert, reason: ReasonCatchUpTimeoutBlocked}
	for _, c := range []decideCase{
		{name: "target unreachable, an unrelated replica unreachable, past the deadline: give the source back",
			obs: group(source, site("b", UR), site("c", UR)), st: past, want: giveBack},
		{name: "target's replication broken, an unrelated replica unreachable, past the deadline: give the source back",
			obs: group(source, site("b", RO, follows("a"), broken), site("c", UR)), st: past, want: giveBack},
		{name: "two sites, target unreachable, past the deadline: give the source back",
			obs: group(source, site("b", UR)), st: past, want: giveBack},
		{name: "target no longer receiving what the source has, past the deadline: give the source back",
			obs: group(site("a", RO, fencedAt(2), exec(upto(12))), site("b", RO, lost("a")), site("c", UR)), st: past,
			want: want{action: ReassertPrimary, reason: ReasonCatchUpTimeout, target: "a", epoch: 3}},
		{name: "target no longer receiving, within the deadline: alert, wait",
			obs: group(site("a", RO, fencedAt(2), exec(upto(12))), site("b", RO, lost("a")), site("c", UR)), st: within,
			want: want{action: Alert, reason: ReasonCandidateLacksTransactions}},
		{name: "target unreachable within the deadline: alert, wait",
			obs: group(source, site("b", UR), site("c", UR)), st: within,
			want: want{action: Alert, reason: ReasonNoEligibleCandidate}},
		{name: "the deadline is maxLagWait for a switchover",
			obs: group(source, site("b", UR), site("c", UR)), st: within,
			pol: ptr(polWith(func(p *Policy) { p.MaxLagWait = 2 * time.Second })), want: giveBack},
		{name: "an unrelated unreachable site deposed by a failover with a proof does not block",
			obs: group(source, site("b", UR), site("c", UR)), st: deposed(past, "c", "a", ProofLeaseExpired), want: giveBack},
		// A view named the target: it may have been made writable.
		{name: "the target was published and is unreachable: no give-back",
			obs: group(source, site("b", UR), site("c", UR)), st: published, want: blocked},
		{name: "the target answers writable again: no give-back",
			obs: group(source, site("b", UR, bounce), site("c", UR)), st: past, want: blocked},
		{name: "an unreachable site deposed without a proof may be writable: no give-back",
			obs: group(source, site("b", UR), site("c", UR)), st: deposed(past, "c", "a", ProofNoFencing), want: blocked},
		{name: "an unreachable site deposed before proofs were recorded may be writable: no give-back",
			obs: group(source, site("b", UR), site("c", UR)), st: deposed(past, "c", "a", ""), want: blocked},
		{name: "fencing none proves no deposed primary fenced: no give-back",
			obs: group(source, site("b", UR), site("c", UR)), st: past, pol: &none, want: blocked},
		{name: "the source lacks an unrelated replica's write: no give-back",
			obs: group(source, site("b", UR), site("c", RO, exec(upto(10).Union(errant("c", 1))))), st: past, want: blocked},
		{name: "source lost too: nothing to give back, the alert stays",
			obs: group(site("a", UR, down), site("b", UR), site("c", RO, lost("a"))), st: past,
			want: want{action: Alert, reason: ReasonNoEligibleCandidate}},
		// The same deadline ends an automatic failover whose candidates
		// are all lost while its old primary came back and was fenced.
		{name: "automatic failover, every candidate lost, old primary back and fenced: give it back",
			obs: group(source, site("b", UR), site("c", RO, broken, lost("a"))), st: revoked("a", "b", now.Add(-31*time.Second)), want: giveBack},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}
}

// TestTargetLostGiveBackClearsTheFailover: the give-back abandons the
// switchover: the source is the active site again at the new epoch.
func TestTargetLostGiveBackClearsTheFailover(t *testing.T) {
	st := planned(revoked("a", "b", now.Add(-time.Hour)))
	d := Decide(group(site("a", RO, fencedAt(2)), site("b", UR), site("c", UR)), st, DefaultPolicy(), now)
	next := Apply(st, d, now)
	if d.Reason != ReasonTargetLost || next.InFlight != nil || next.ActiveSite != "a" || next.Epoch != 3 {
		t.Fatalf("after %s: %+v, want a active at epoch 3 with nothing in flight", d, next)
	}
}

// TestReassertNewPrimaryWhileOldPrimaryStaysLost: a new primary that came
// back read-only (restarted, or fenced by its own lagging sidecar) is
// re-asserted while the old primary stays unreachable, once that old
// primary's fence was proven by the failover; an unreachable site that may
// still be writable keeps blocking it.
func TestReassertNewPrimaryWhileOldPrimaryStaysLost(t *testing.T) {
	// We failed over from a to b an hour ago (epoch 2 revoked, 3 b's).
	lineage := func(proof FenceProof) Persisted {
		return deposed(Persisted{Epoch: 3, ActiveSite: "b"}, "a", "b", proof)
	}
	lost2 := group(site("a", UR), site("b", RO))
	reassert := want{action: ReassertPrimary, reason: ReasonReassertPrimary, target: "b", epoch: 4}
	notAll := want{action: Alert, reason: ReasonNoPrimaryNotAllReachable}
	cases := []decideCase{
		{name: "two sites, old primary deposed before proofs were recorded: no re-assert", obs: lost2, st: lineage(""), want: notAll},
		{name: "two sites, old primary deposed without fencing: no re-assert", obs: lost2, st: lineage(ProofNoFencing), want: notAll},
		{name: "two sites, fencing none: no re-assert", obs: lost2, st: lineage(ProofLeaseExpired),
			pol: ptr(polWith(func(p *Policy) { p.Fencing = FencingNone })), want: notAll},
		{name: "two sites, the old primary answers writable again: no re-assert", obs: group(site("a", UR, bounce), site("b", RO)),
			st: lineage(ProofLeaseExpired), want: notAll},
		{name: "three sites, old primary proven fenced and lost, a replica reachable: re-assert",
			obs: group(site("a", UR), site("b", RO), site("c", RO, follows("b"))), st: lineage(ProofPrimaryDown), want: reassert},
		{name: "three sites, old primary proven fenced and lost, a replica lost too: re-assert",
			obs: group(site("a", UR), site("b", RO), site("c", UR)), st: lineage(ProofSidecarFenced), want: reassert},
		{name: "within the settle window: settling, not a re-assert",
			obs: lost2, st: with(lineage(ProofLeaseExpired), func(p *Persisted) { p.LastFailoverAt = now.Add(-time.Second) }),
			want: want{action: None, reason: ReasonPromotionSettling}},
		{name: "the new primary lacks its promotion set: no re-assert",
			obs: group(site("a", UR), site("b", RO, exec(upto(8)))), st: lineage(ProofLeaseExpired),
			want: want{action: Alert, reason: ReasonNoPrimaryTargetBehind}},
	}
	for _, p := range []FenceProof{ProofFenceConfirmed, ProofPrimaryDown, ProofSidecarFenced, ProofLeaseExpired, ProofSemiSync, ProofOperatorConfirmed} {
		cases = append(cases, decideCase{name: "two sites, old primary deposed with proof " + string(p) + " and still lost: re-assert",
			obs: lost2, st: lineage(p), want: reassert})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}
}
