package sitepair

import (
	"fmt"
	"strings"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/statemachine"
)

// unpromotable says why site i may never be promoted whatever its state
// ("" if it may): dr-only, operator-fenced or known-diverged.
func (v *view) unpromotable(i int) string { return v.unpromotableAs(i, false) }

// unpromotableAs is unpromotable where allowDR lets a dr-only site through:
// an operator's explicit switchover to it (SwitchoverOptions.AllowDROnly).
func (v *view) unpromotableAs(i int, allowDR bool) string {
	s := &v.sites[i]
	switch {
	case s.Role != PrimaryCandidate && !allowDR:
		return "dr-only"
	case v.opFenced(s.Name):
		return "operator-fenced"
	case v.diverged(s.Name):
		return "known-diverged"
	case v.recloning(s.Name):
		return "recloning"
	}
	return ""
}

// ineligible says why site i cannot be promoted now ("" if it can).
// oldPrimary is never a candidate; lag is checked only for automatic
// failovers.
func (v *view) ineligible(i int, oldPrimary string, checkLag bool) string {
	return v.ineligibleAs(i, oldPrimary, checkLag, false)
}

// ineligibleAs is ineligible where allowDR lets a dr-only site through.
func (v *view) ineligibleAs(i int, oldPrimary string, checkLag, allowDR bool) string {
	s := &v.sites[i]
	if s.Name == oldPrimary {
		return "old primary"
	}
	if why := v.unpromotableAs(i, allowDR); why != "" {
		return why
	}
	// An operator keeps it out of every promotion while the hold lasts.
	if why := v.held(i); why != "" {
		return why
	}
	switch {
	case s.State != statemachine.ReadOnly:
		return s.State.String()
	case s.ReplicationBroken:
		return "replication broken"
	case checkLag && v.pol.MaxLag > 0 && !s.LagKnown:
		// Seconds_Behind_Master NULL is unknown, never "no lag".
		return "lag unknown"
	case checkLag && v.pol.MaxLag > 0 && s.Lag > v.pol.MaxLag:
		return fmt.Sprintf("lag %v over %v", s.Lag, v.pol.MaxLag)
	case checkLag && v.pol.MaxLag > 0 && s.BacklogAge > v.pol.MaxLag:
		// An applier blocked inside a commit may report Seconds_Behind 0
		// while what it received waits: the GTID sets say how far behind.
		return fmt.Sprintf("lag %v over %v (received transactions not applied, from GTID sets)", s.BacklogAge, v.pol.MaxLag)
	}
	return ""
}

// catchesUpFrom reports whether site t streams from the writable primary
// and everything any reachable site holds is on t or on that primary: once
// the primary is fenced, t receives the rest from it.
func (v *view) catchesUpFrom(t int, primary string) bool {
	p := v.index(primary)
	if p < 0 {
		return false
	}
	s, ps := v.sites[t], v.sites[p]
	if ps.State != statemachine.Writable || s.ReplicatingFrom != primary || !s.IOConnected || s.SourceSilent || s.ReplicationBroken {
		return false
	}
	held := v.have[t].Union(v.have[p])
	for j, o := range v.sites {
		if j == t || !o.State.Reachable() || held.Covers(v.need(j)) {
			continue
		}
		// A replica of the same primary probed a moment after it holds
		// more of the primary's newest transactions than the primary's own
		// probe showed: the target gets those from the primary as well.
		// Only the replica's own writes (errant) could not come from there.
		if o.ReplicatingFrom == primary && o.ServerID != "" && v.errant(o, ps).IsEmpty() {
			continue
		}
		return false
	}
	return true
}

// coversOthers reports whether held covers what every reachable site other
// than t holds (see need).
func (v *view) coversOthers(t int, held gtid.Set) bool {
	for j, o := range v.sites {
		if j != t && o.State.Reachable() && !held.Covers(v.need(j)) {
			return false
		}
	}
	return true
}

// need is what a promoted site must hold of site j's transactions: all of
// them, except the divergent set recorded for a known-diverged site (its
// errant transactions must not be required; anything newer still is).
func (v *view) need(j int) gtid.Set {
	// Its data is being replaced by the primary's: none of it is owed.
	if v.recloning(v.sites[j].Name) {
		return v.have[j].Subtract(v.have[j])
	}
	if d, ok := v.st.Diverged[v.sites[j].Name]; ok {
		return v.have[j].Subtract(d)
	}
	return v.have[j]
}

// lacking returns a reachable site (other than t and skip) holding
// transactions site t lacks (see need), or -1.
func (v *view) lacking(t int, skip string) int {
	for j, s := range v.sites {
		if j == t || s.Name == skip || !s.State.Reachable() {
			continue
		}
		if !v.have[t].Covers(v.need(j)) {
			return j
		}
	}
	return -1
}

// missing describes what site t lacks from site j, and says so when an
// operator's hold is what keeps j itself from being chosen.
func (v *view) missing(t, j int) string {
	m := v.have[t].Uncovered(v.need(j))
	out := fmt.Sprintf("%d transactions that %s has (%s)", m.Count(), v.sites[j].Name, m.Compact())
	if why := v.held(j); why != "" {
		out += fmt.Sprintf("; %s is not a candidate: %s", v.sites[j].Name, why)
	}
	return out
}

// errant returns the transactions replica s originated itself that primary
// lacks (empty when s's server identity is unknown).
func (v *view) errant(s, primary SiteObservation) gtid.Set {
	if s.ServerID == "" {
		return gtid.Set{}
	}
	// Only s's own transactions count: observing the two servers at
	// slightly different moments can never make them look errant.
	own, err := primary.Executed.Uncovered(s.Executed).OriginatedBy(s.ServerID)
	if err != nil {
		return gtid.Set{}
	}
	return own
}

// better reports whether candidate i ranks before j: the preferred site
// (in-flight target), then Policy.PreferSite, then higher Priority, then
// lower declaration Index.
func (v *view) better(i, j int, prefer string) bool {
	a, b := &v.sites[i], &v.sites[j]
	for _, p := range []string{prefer, v.pol.PreferSite} {
		if p != "" && (a.Name == p) != (b.Name == p) {
			return a.Name == p
		}
	}
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return a.Index < b.Index
}

// choose picks the failover target: among eligible candidates, the one
// whose set contains every other candidate's, ranked by better. It blocks
// (ok false, with an Alert decision) when no candidate is eligible or when
// the candidates' sets are incomparable. Callers then check that the pick
// lacks nothing another reachable site has.
func (v *view) choose(oldPrimary, prefer string) (int, Decision, bool) {
	var elig []int
	var why []string
	for i, s := range v.sites {
		if r := v.ineligible(i, oldPrimary, true); r != "" {
			if s.Name != oldPrimary {
				why = append(why, s.Name+": "+r)
			}
			continue
		}
		elig = append(elig, i)
	}
	if len(elig) == 0 {
		return -1, v.decision(ReasonNoEligibleCandidate, "no eligible candidate (%s)", strings.Join(why, "; ")), false
	}
	pick := -1
	for _, i := range elig {
		top := true
		for _, j := range elig {
			top = top && v.have[i].Covers(v.have[j])
		}
		if top && (pick < 0 || v.better(i, pick, prefer)) {
			pick = i
		}
	}
	if pick < 0 {
		var sets []string
		for _, i := range elig {
			sets = append(sets, v.sites[i].Name+"="+v.have[i].Compact())
		}
		return -1, v.decision(ReasonIncomparableCandidates, "no candidate has every other candidate's transactions: %s", strings.Join(sets, "; ")), false
	}
	return pick, Decision{}, true
}
