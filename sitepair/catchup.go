package sitepair

import (
	"fmt"
	"slices"
	"time"

	"github.com/failoverd/failoverd/statemachine"
)

// caughtUp checks that target t lacks nothing a reachable site (the fenced
// old primary included) has (see need). Missing
// transactions that the reachable old primary holds and t is receiving from
// it are awaited; anything else blocks the promotion.
func (v *view) caughtUp(t, from int) (Decision, bool) {
	s := &v.sites[t]
	receiving := v.sites[from].State.Reachable() && s.ReplicatingFrom == v.sites[from].Name && s.IOConnected && !s.ReplicationBroken
	wait := -1
	for j, o := range v.sites {
		if j == t || !o.State.Reachable() || v.have[t].Covers(v.need(j)) {
			continue
		}
		// The old primary came back after semi-sync fencing stopped the
		// target's IO thread: replicate again to receive what it lacks.
		if !receiving && s.IOStopped && s.ReplicatingFrom == v.sites[from].Name && !s.ReplicationBroken &&
			v.sites[from].State == statemachine.ReadOnly && v.have[from].Covers(v.need(j)) && v.sites[from].Executed.Covers(s.Executed) {
			d := v.decision(ReasonResumeCatchUp, "%s lacks %s and its IO thread from the fenced old primary %s is stopped: replicating again", s.Name, v.missing(t, j), v.sites[from].Name)
			d.Target, d.Repoint = v.sites[from].Name, []string{s.Name}
			// A restart that never takes must not be retried for ever.
			return v.giveBack(from, ReasonCatchUpTimeout, fmt.Sprintf("%s still lacks %s", s.Name, v.missing(t, j)), d), false
		}
		// Promoting now would throw these transactions away; a target cut
		// off from the source it needs them from must not keep the group
		// without a primary for ever (its source is given back).
		if !receiving || !v.have[from].Covers(v.need(j)) {
			lacks := fmt.Sprintf("%s lacks %s and is not receiving them", s.Name, v.missing(t, j))
			return v.giveBack(from, ReasonCatchUpTimeout, lacks, v.decision(ReasonCandidateLacksTransactions, "%s", lacks)), false
		}
		wait = j
	}
	if wait >= 0 {
		// Every wait has a deadline: a target that cannot catch up must not
		// leave the group without a primary forever.
		d := v.decision(ReasonAwaitCatchUp, "%s still lacks %s; waiting for it to arrive from %s", s.Name, v.missing(t, wait), v.sites[from].Name)
		return v.giveBack(from, ReasonCatchUpTimeout, fmt.Sprintf("%s still lacks %s", s.Name, v.missing(t, wait)), d), false
	}
	// Received but not applied: the promotion's relay drain waits for it.
	// A target whose applier cannot get there (blocked, far behind) must not
	// keep the group without a primary while the old one is right there,
	// fenced and holding everything: after the deadline, give it back.
	if v.sites[from].State == statemachine.ReadOnly && !v.applied(t) {
		if limit := v.catchUpTimeout(); !v.now.Before(v.st.InFlight.RevokedAt.Add(limit)) {
			return v.abandon(from, ReasonCatchUpTimeout, fmt.Sprintf("%s has not applied what it received %v after the revoke", s.Name, limit)), false
		}
	}
	return Decision{}, true
}

// ackCount is how many replicas acknowledged each commit of the old primary
// from, as its last reachable probe read it: 0 when it was reached and runs
// without semi-sync (an acknowledged write may then be on no replica at all:
// no set of replicas can be sure to hold it, the group's RPO is not zero),
// at least 1 otherwise, also when it was never reached (a daemon restarted
// during the outage must assume it ran semi-sync).
func (v *view) ackCount(from SiteObservation) int {
	ss := from.SemiSync
	switch {
	case !from.LastReachableAt.IsZero() && (!ss.Known || !ss.Enabled):
		return 0
	case ss.WaitForReplicas > 1:
		return ss.WaitForReplicas
	}
	return 1
}

// unaccountedHolders returns the unreachable sites that may hold a write the
// unreachable old primary from acknowledged and target t lacks, when there
// are k or more of them (k = ackCount): each acknowledged write is on at
// least k replicas, so while at most k-1 are unaccounted for, one holder of
// every such write is reachable and t covers it (caughtUp). A site is
// accounted for when it is reachable, never among the replicas that
// acknowledge (recorded diverged: never pointed at the primary by
// failoverd; recloning: nothing it holds is owed), proven to hold nothing
// newer (heldNothingNewer) or confirmed lost by an operator (lostHolders).
// A reachable old primary holds everything it acknowledged: none then.
func (v *view) unaccountedHolders(t, from int) ([]string, int) {
	if v.sites[from].State.Reachable() {
		return nil, 0
	}
	k := v.ackCount(v.sites[from])
	if k == 0 {
		return nil, 0
	}
	var wait []string
	for j, s := range v.sites {
		if j == t || j == from || s.State.Reachable() || v.diverged(s.Name) || v.recloning(s.Name) ||
			v.heldNothingNewer(t, j) || v.lostConfirmed(s) {
			continue
		}
		wait = append(wait, s.Name)
	}
	if len(wait) < k {
		return nil, k
	}
	return wait, k
}

// heldNothingNewer: unreachable site j cannot hold a transaction target t
// lacks. Its last probe came after the revoke (since then failoverd starts
// no replication towards the old primary), found its IO thread stopped (the
// revoke's semi-sync detach), under semi-sync fencing, whose servers start
// with skip_replica_start (so a restart does not start it either), and t
// holds everything it had then.
func (v *view) heldNothingNewer(t, j int) bool {
	s := v.sites[j]
	return v.pol.Fencing.UsesSemiSync() && s.IOStopped && !s.LastReachableAt.IsZero() &&
		!s.LastReachableAt.Before(v.st.InFlight.RevokedAt) && v.have[t].Covers(v.need(j))
}

// lostConfirmed: an operator confirmed s lost for the failover in flight
// (ConfirmFence at ack-holder-unreachable). It counts only while s stays
// unreachable: one that answers is covered like any reachable site.
func (v *view) lostConfirmed(s SiteObservation) bool {
	return slices.ContainsFunc(v.lostHolders(), func(c FenceConfirmation) bool { return c.Site == s.Name })
}

// lostHolders are the operators' confirmations that count for the failover
// in flight: made in its epoch, for a site still unreachable.
func (v *view) lostHolders() []FenceConfirmation {
	var out []FenceConfirmation
	for _, c := range v.st.InFlight.LostHolders {
		if i := v.index(c.Site); i >= 0 && c.Epoch == v.st.InFlight.Epoch && !v.sites[i].State.Reachable() {
			out = append(out, c)
		}
	}
	return out
}

// catchUpTimeout is how long the failover in flight may wait for its target
// to catch up: maxLagWait for a planned switchover (the source was healthy
// and only its writes wait), CatchUpTimeout otherwise.
func (v *view) catchUpTimeout() time.Duration {
	if v.st.InFlight.Planned && v.pol.MaxLagWait > 0 {
		return v.pol.MaxLagWait
	}
	return v.pol.CatchUpTimeout
}

// applied reports whether site t has applied (not only received) what
// every other reachable site holds.
func (v *view) applied(t int) bool { return v.coversOthers(t, v.sites[t].Executed) }
