package sitepair

import (
	"fmt"
	"strings"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/statemachine"
)

// giveBack ends an in-flight failover that cannot go on (why; wait is the
// decision explaining the block) once its deadline passed: the revoked
// state is bounded. It re-asserts the old primary from when that is safe
// (abandon, with reason r). Before the deadline, or while the old primary
// is unreachable (nothing to give back), it returns wait.
func (v *view) giveBack(from int, r Reason, why string, wait Decision) Decision {
	if !v.sites[from].State.Reachable() {
		return wait
	}
	limit := v.catchUpTimeout()
	if dl := v.st.InFlight.RevokedAt.Add(limit); v.now.Before(dl) {
		wait.Message += fmt.Sprintf("; old primary %s is given back at %s (%v after the revoke) unless this clears", v.sites[from].Name, dl.UTC().Format(time.RFC3339), limit)
		return wait
	}
	return v.abandon(from, r, fmt.Sprintf("%s %v after the revoke", why, limit))
}

// abandon ends an in-flight failover that cannot complete (its target
// cannot catch up, or is lost) by re-asserting the reachable old primary
// from with reason r; it alerts instead when from may not be primary, lacks
// a peer's transactions or an unreachable site may be writable.
func (v *view) abandon(from int, r Reason, why string) Decision {
	name := v.sites[from].Name
	if u := v.unpromotable(from); u != "" || v.sites[from].State != statemachine.ReadOnly {
		if u == "" {
			u = v.sites[from].State.String()
		}
		return v.decision(ReasonCatchUpTimeoutBlocked, "%s; old primary %s cannot be re-asserted (%s): the group stays without a primary until a human decides", why, name, u)
	}
	// An unreachable site that may be writable: re-asserting could make two.
	if u := v.mayWrite(); len(u) > 0 {
		return v.decision(ReasonCatchUpTimeoutBlocked, "%s; unreachable and possibly writable: %s; so old primary %s is not re-asserted: the group stays without a primary until a human decides",
			why, strings.Join(u, "; "), name)
	}
	if j := v.lacking(from, ""); j >= 0 {
		return v.decision(ReasonCatchUpTimeoutBlocked, "%s; old primary %s lacks %s: the group stays without a primary until a human decides", why, name, v.missing(from, j))
	}
	// Sidecars may hold a view published for the target: outrank it.
	epoch := max(v.st.Epoch, v.st.InFlight.PublishedEpoch) + 1
	d := v.decision(r, "%s: abandoning the failover and re-asserting old primary %s at epoch %d", why, name, epoch)
	d.Target = name
	d.Epoch = epoch
	return d
}

// mayWrite lists the unreachable sites that may be accepting writes, each
// with why, so that nothing is made writable beside them (re-assert,
// give-back). An unreachable site may write when its latest probes answer
// writable, or when failoverd may have left it writable with nothing
// proving it stopped: the recorded primary, the in-flight old primary
// without a fence proof, the site a view of the failover in flight named
// (it may have been made writable), the last failover's target when it is
// neither; and every site when nothing proves each deposed primary fenced
// (fencing none, or the last failover's proof unknown or no-fencing). Any
// other site was never made writable by failoverd, or was deposed by a
// failover whose proof held, and restarts read-only (docs/decisions.md §9).
func (v *view) mayWrite() []string {
	st, inf := v.st, v.st.InFlight
	lineage := ""
	switch {
	case v.pol.Fencing == FencingNone:
		lineage = "fencing none proves no deposed primary fenced"
	case st.LastFailoverTarget != "" && st.LastFailoverFrom == "":
		lineage = "the last failover's old primary is not recorded"
	case st.LastFailoverFrom != "" && (st.LastFailoverProof == "" || st.LastFailoverProof == ProofNoFencing):
		lineage = fmt.Sprintf("the last failover, from %s, rested on no fence proof", st.LastFailoverFrom)
	}
	var out []string
	for _, s := range v.sites {
		if s.State != statemachine.Unreachable {
			continue
		}
		why := lineage
		switch {
		case s.Debouncing:
			why = "its latest probes answer writable"
		case s.Name == st.ActiveSite:
			why = "the recorded primary"
		case inf != nil && s.Name == inf.PublishedTo:
			why = fmt.Sprintf("a view naming it was published at epoch %d", inf.PublishedEpoch)
		case inf != nil && s.Name == inf.From && v.proof() == "":
			why = "old primary of the failover in flight, no fence proof"
		case s.Name == st.LastFailoverTarget && (inf == nil || s.Name != inf.From):
			why = "our last failover's target"
		}
		if why != "" {
			out = append(out, s.Name+" ("+why+")")
		}
	}
	return out
}

// noPrimary re-asserts the recorded primary when that is provably safe.
func (v *view) noPrimary() Decision {
	t := v.st.ActiveSite
	if t == "" {
		return v.decision(ReasonNoPrimaryNoActiveSite, "no site is writable and no primary is recorded; a human must choose one")
	}
	i := v.index(t)
	// Our own promotion is not seen yet: the new primary's writable probes
	// are debounced (RecoveryThreshold of them) while the old primary is
	// still down, so "no primary" now would be a false alarm. Bounded: a
	// promotion that did not take is alerted on after the window.
	if since := v.now.Sub(v.st.LastFailoverAt); t == v.st.LastFailoverTarget && !v.st.LastFailoverAt.IsZero() &&
		since >= 0 && since < v.pol.PromotionSettleWindow() && v.sites[i].State == statemachine.ReadOnly {
		return v.decision(ReasonPromotionSettling, "no site is seen writable yet but %s was promoted %v ago: waiting up to %v for its writable probes",
			t, since, v.pol.PromotionSettleWindow())
	}
	// An unreachable site that may be writable: re-asserting could make
	// two. One proven fenced (a deposed old primary) must not block it, or a
	// new primary that came back read-only stays so while the old is lost.
	if u := v.mayWrite(); len(u) > 0 {
		return v.decision(ReasonNoPrimaryNotAllReachable, "no site is writable; unreachable and possibly writable: %s; not re-asserting %s", strings.Join(u, "; "), t)
	}
	// Probes are turning the recorded primary writable (a promotion just
	// made it so): re-asserting it again would only bump the epoch.
	if v.sites[i].Debouncing {
		return v.decision(ReasonWaitingForProbes, "no site is writable yet but the recorded primary %s is becoming writable; waiting for its probes", t)
	}
	if why := v.unpromotable(i); why != "" {
		return v.decision(ReasonNoPrimaryTargetIneligible, "no site is writable and the recorded primary %s is %s", t, why)
	}
	// Re-enabling a primary that lacks a peer's transactions would lose them.
	if j := v.lacking(i, ""); j >= 0 {
		if d, ok := v.ownTails(i); ok {
			return d
		}
		return v.decision(ReasonNoPrimaryTargetBehind, "no site is writable and the recorded primary %s lacks %s", t, v.missing(i, j))
	}
	if !v.have[i].Covers(v.st.PromotionGTID) {
		m := v.have[i].Uncovered(v.st.PromotionGTID)
		return v.decision(ReasonNoPrimaryTargetBehind, "no site is writable and the recorded primary %s lacks %d transactions of its own promotion set (%s)", t, m.Count(), m.Compact())
	}
	d := v.decision(ReasonReassertPrimary, "every site is read-only and %s has every transaction: re-asserting it at epoch %d", t, v.st.Epoch+1)
	d.Target = t
	d.Epoch = v.st.Epoch + 1
	return d
}

// ownTails marks diverged the peers whose transactions the recorded primary
// t lacks when those are only writes each peer made itself that no other
// site received and that t's promotion did not include: a deposed primary's
// unreplicated tail (or its writes after it lost its epoch), a replica's
// errant writes. The recorded primary's history never held them; once they
// are marked, t can be re-asserted (simulation seed 184). ok is false when
// any lacking transaction is another site's or reached a third site: t
// may have lost it, and re-asserting t would lose it for good.
func (v *view) ownTails(t int) (Decision, bool) {
	var div []Divergence
	var parts []string
	for j, s := range v.sites {
		if j == t || !s.State.Reachable() {
			continue
		}
		miss := v.have[t].Uncovered(v.need(j))
		if miss.IsEmpty() {
			continue
		}
		own := v.errant(s, v.sites[t])
		if !own.Covers(miss) || !miss.Intersect(v.st.PromotionGTID).IsEmpty() {
			return Decision{}, false
		}
		for k, o := range v.sites {
			if k != t && k != j && o.State.Reachable() && !v.have[k].Intersect(miss).IsEmpty() {
				return Decision{}, false
			}
		}
		// Added to what is already recorded of its divergence (a mark
		// replaces the recorded set).
		div = append(div, Divergence{Site: s.Name, Set: miss.Union(v.st.Diverged[s.Name]), Count: gtid.DivergentCount(s.Executed, v.sites[t].Executed)})
		parts = append(parts, fmt.Sprintf("%s has %d of its own that %s lacks (%s)", s.Name, miss.Count(), v.sites[t].Name, miss.Compact()))
	}
	if len(div) == 0 {
		return Decision{}, false
	}
	d := v.decision(ReasonMarkDiverged, "no site is writable and the recorded primary %s lacks only writes its peers made themselves: %s; marked diverged so %s can be re-asserted",
		v.sites[t].Name, strings.Join(parts, "; "), v.sites[t].Name)
	d.Target = v.sites[t].Name
	d.Diverged = div
	return d, true
}
