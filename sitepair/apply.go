package sitepair

import (
	"maps"
	"slices"
	"time"

	"github.com/failoverd/failoverd/gtid"
)

// MaxHistory bounds Persisted.FailoverHistory; older entries are dropped.
const MaxHistory = 64

// Apply returns the persisted state after d was carried out successfully at
// now (daemon clock). It never modifies st. Decisions that change nothing
// durable (None, Alert, Rejoin, and FenceSites except as below) return an
// equal copy. A FenceSites that fences the old primary of the failover in
// flight drops its operator confirmation (it answered: it was not dead), so
// the daemon persists it when that changes the state.
func Apply(st Persisted, d Decision, now time.Time) Persisted {
	next := st
	next.Diverged = maps.Clone(st.Diverged)
	next.DivergedCount = maps.Clone(st.DivergedCount)
	next.OperatorFenced = slices.Clone(st.OperatorFenced)
	next.Recloning = maps.Clone(st.Recloning)
	next.FailoverHistory = slices.Clone(st.FailoverHistory)
	next.Holds = maps.Clone(st.Holds)
	if st.Pause != nil {
		p := *st.Pause
		next.Pause = &p
	}
	if st.InFlight != nil {
		f := *st.InFlight
		f.LostHolders = slices.Clone(f.LostHolders)
		next.InFlight = &f
	}
	switch d.Action {
	case RevokeEpoch:
		next.Epoch = max(st.Epoch, d.Epoch)
		next.ActiveSite = ""
		next.InFlight = &InFlight{Epoch: next.Epoch, RevokedAt: now, From: d.From, To: d.Target, Planned: d.Planned, AllowDROnly: d.Planned && d.AllowDROnly}
	case Promote:
		// The new primary gets a new epoch: a view naming it must supersede
		// the revoking view of the same failover, never tie with it.
		next.Epoch = max(st.Epoch+1, d.Epoch)
		next.ActiveSite = d.Target
		next.InFlight = nil
		next.LastFailoverAt = now
		next.LastFailoverTarget = d.Target
		next.LastFailoverFrom = ""
		if st.InFlight != nil {
			next.LastFailoverFrom = st.InFlight.From
		}
		next.PromotionGTID = d.PromotionGTID
		// The history says what the promotion rested on, and who vouched
		// for it when a human did.
		next.LastFailoverProof = d.FenceProof
		next.LastFailoverConfirmation = nil
		if c := st.InFlight; d.FenceProof == ProofOperatorConfirmed && c != nil && c.OperatorConfirmed != nil {
			oc := *c.OperatorConfirmed
			next.LastFailoverConfirmation = &oc
		}
		// Only automatic failovers count towards the escalation limit.
		if !d.Planned {
			next.FailoverHistory = append(next.FailoverHistory, now)
			if n := len(next.FailoverHistory); n > MaxHistory {
				next.FailoverHistory = next.FailoverHistory[n-MaxHistory:]
			}
		}
	case ReassertPrimary, AdoptPrimary:
		next.Epoch = max(st.Epoch, d.Epoch)
		next.ActiveSite = d.Target
		// Re-asserting the old primary abandons a failover in flight.
		next.InFlight = nil
	case MarkDiverged:
		if next.Diverged == nil {
			next.Diverged = map[string]gtid.Set{}
		}
		if next.DivergedCount == nil {
			next.DivergedCount = map[string]uint64{}
		}
		for _, x := range d.Diverged {
			next.Diverged[x.Site] = x.Set
			next.DivergedCount[x.Site] = x.Count
		}
	case RecloneSite:
		// Recorded before the copy starts: a restarted daemon keeps the
		// half-copied site out of every decision (as for a human's reclone).
		if next.Recloning == nil {
			next.Recloning = map[string]Reclone{}
		}
		for _, x := range d.Diverged {
			next.Recloning[x.Site] = Reclone{Donor: st.ActiveSite, Epoch: st.Epoch, At: now, By: RecloneByPolicy}
		}
	case ClearDiverged:
		for _, site := range d.Repaired {
			delete(next.Diverged, site)
			delete(next.DivergedCount, site)
		}
	case HaltFailover:
		next.EscalationHalted = true
	case FenceSites:
		// The old primary answered again (it is being fenced): a human's
		// word that it was dead no longer holds.
		if f := next.InFlight; f != nil && f.OperatorConfirmed != nil && slices.Contains(d.Fence, f.From) {
			f.OperatorConfirmed = nil
		}
	}
	return next
}

// Acknowledge is a human's acknowledgement of an escalation halt or of a
// failover cooldown: automatic failover is allowed again, the failover
// history (which arms both) starts afresh.
func Acknowledge(st Persisted) Persisted {
	next := Apply(st, Decision{Action: None}, time.Time{})
	next.EscalationHalted = false
	next.FailoverHistory = nil
	return next
}
