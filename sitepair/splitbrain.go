package sitepair

import (
	"slices"
	"strings"

	"github.com/failoverd/failoverd/statemachine"
)

// splitBrain keeps one writable site when history says which, and fences
// the others; otherwise it only alerts.
func (v *view) splitBrain() Decision {
	w := v.inState(statemachine.Writable)
	keep, reason := "", ReasonSplitBrainKeepWinner
	if last := v.st.LastFailoverTarget; last != "" {
		// We promoted it: it is the legitimate primary.
		if !slices.Contains(w, last) {
			return v.decision(ReasonSplitBrainAlertOnly, "%s are writable and our last failover target %s is not among them; a human must choose", strings.Join(w, ", "), last)
		}
		keep, reason = last, ReasonSplitBrainKeepPromoted
	} else {
		keep = v.splitWinner(w)
		if keep == "" {
			return v.decision(ReasonSplitBrainAlertOnly, "%s are writable and none may stay primary; a human must choose", strings.Join(w, ", "))
		}
	}
	var fence []string
	for _, s := range w {
		if s != keep {
			fence = append(fence, s)
		}
	}
	d := v.decision(reason, "%s are writable: keeping %s, fencing %s", strings.Join(w, ", "), keep, strings.Join(fence, ", "))
	d.Target = keep
	d.Fence = fence
	return d
}

// splitWinner picks who stays writable without failover history: the
// recorded active site, else PreferSite, else the best-ranked eligible
// primary candidate.
func (v *view) splitWinner(w []string) string {
	if slices.Contains(w, v.st.ActiveSite) {
		return v.st.ActiveSite
	}
	best := -1
	for _, name := range w {
		i := v.index(name)
		if v.unpromotable(i) != "" {
			continue
		}
		if best < 0 || v.better(i, best, "") {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return v.sites[best].Name
}

// unexpectedPrimary handles one writable site that is not the recorded
// primary. When our last failover made the recorded primary, the writable
// site has no claim to the role (a deposed primary that was hung or cut
// off through the failover and came back still writable, or one promoted
// outside failoverd): it is fenced, as a split brain's loser would be,
// and the no-primary or failover rules take over. Without failover
// history a human must say which record is right.
func (v *view) unexpectedPrimary() Decision {
	w, active := v.det.Primary, v.st.ActiveSite
	if last := v.st.LastFailoverTarget; last == "" || last != active {
		return v.decision(ReasonUnexpectedPrimary, "%s is the only writable site but the recorded primary is %s (changed outside failoverd); a human must reconcile",
			w, active)
	}
	// A writable site outside its epoch could acknowledge writes the
	// recorded primary's history will never hold.
	d := v.decision(ReasonUnexpectedPrimaryFenced, "%s is the only writable site but our last failover made %s the primary at epoch %d: fencing %s",
		w, active, v.st.Epoch, w)
	d.Fence = []string{w}
	return d
}
