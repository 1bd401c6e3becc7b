package sitepair

import (
	"fmt"
	"slices"

	"github.com/failoverd/failoverd/gtid"
)

// The model check's safety invariants (TestModelCheck enumerates the
// states, model_test.go; checkInvariants judges every decision).

// checkInvariants returns the first safety invariant d violates.
func checkInvariants(obs Observed, st Persisted, pol Policy, d Decision) error {
	// Every decision explains itself with a known reason of its action.
	if a, ok := ActionOf(d.Reason); !ok || a != d.Action || d.Message == "" {
		return fmt.Errorf("reason %q (action %q) or message %q invalid for action %s", d.Reason, a, d.Message, d.Action)
	}
	// Epochs only grow, by one at most.
	if d.Epoch != st.Epoch && d.Epoch != st.Epoch+1 {
		return fmt.Errorf("epoch %d from persisted %d", d.Epoch, st.Epoch)
	}
	bumps := d.Action == RevokeEpoch || d.Action == Promote || d.Action == ReassertPrimary || d.Action == AdoptPrimary
	if bumps != (d.Epoch == st.Epoch+1) {
		return fmt.Errorf("%s with epoch %d from persisted %d", d.Action, d.Epoch, st.Epoch)
	}
	site := func(name string) (SiteObservation, bool) {
		for _, s := range obs.Sites {
			if s.Name == name {
				return s, true
			}
		}
		return SiteObservation{}, false
	}
	// Never two sites made writable: the decided-writable site plus the
	// sites still writable and not fenced by the decision.
	made := d.MakesWritable()
	before, after := 0, 0
	var left []string
	for _, s := range obs.Sites {
		w := s.State == W
		if w {
			before++
		}
		if (w && !slices.Contains(d.Fence, s.Name)) || s.Name == made {
			after++
			left = append(left, s.Name)
		}
	}
	if made != "" && after != 1 {
		return fmt.Errorf("making %s writable leaves writable %v", made, left)
	}
	if before <= 1 && after > 1 {
		return fmt.Errorf("decision creates a second writable site: %v", left)
	}
	if d.Action == FenceSites && (len(d.Fence) == 0 || slices.Contains(d.Fence, d.Target) && d.Target != "") {
		return fmt.Errorf("fence list %v with kept site %q", d.Fence, d.Target)
	}
	have := func(s SiteObservation) gtid.Set { return s.Executed.Union(s.Retrieved) }
	// need: what a promoted site must hold of s (a known divergence excepted).
	need := func(s SiteObservation) gtid.Set { return have(s).Subtract(st.Diverged[s.Name]) }
	// The target of a failover or re-assertion: never dr-only, diverged or
	// operator-fenced, never lacking what another reachable site has.
	target := made
	if d.Action == RevokeEpoch {
		target = d.Target
	}
	// A paused group carries out nothing that writes to a server (a
	// failover in flight excepted: it finishes).
	if st.Pause.ActiveAt(now) && st.InFlight == nil && withheldWhilePaused(d.Action) {
		return fmt.Errorf("paused group carries out %s (%s)", d.Action, d.Reason)
	}
	// A held site is never chosen for a new primary.
	if d.Action == RevokeEpoch || (d.Action == Promote && d.Reason == ReasonPromoteRetarget) {
		if _, held := st.HoldAt(d.Target, now); held {
			return fmt.Errorf("held site %s chosen by %s", d.Target, d.Reason)
		}
	}
	if target != "" {
		t, ok := site(target)
		if !ok {
			return fmt.Errorf("target %q unknown", target)
		}
		if _, div := st.Diverged[target]; div || t.Role == DROnly || slices.Contains(st.OperatorFenced, target) {
			return fmt.Errorf("target %s is diverged, dr-only or operator-fenced", target)
		}
		if t.State != RO && !(d.Reason == ReasonPromoteResume && t.State == W) {
			return fmt.Errorf("target %s is %s", target, t.State)
		}
		for _, s := range obs.Sites {
			if s.Name == target || !s.State.Reachable() {
				continue
			}
			if d.Action == RevokeEpoch && s.Name == d.From {
				continue // the old primary is checked again before phase 2
			}
			if !have(t).Contains(need(s)) {
				return fmt.Errorf("target %s lacks transactions of %s", target, s.Name)
			}
		}
	}
	// A missing primary is excused only right after our own promotion of
	// the recorded primary, for a bounded time, while it answers read-only.
	if d.Reason == ReasonPromotionSettling {
		a, _ := site(st.ActiveSite)
		since := now.Sub(st.LastFailoverAt)
		if st.InFlight != nil || st.ActiveSite == "" || st.ActiveSite != st.LastFailoverTarget || st.LastFailoverAt.IsZero() ||
			since < 0 || since >= pol.PromotionSettleWindow() || a.State != RO {
			return fmt.Errorf("promotion-settling for %q (last promoted %q %v ago, %s)", st.ActiveSite, st.LastFailoverTarget, since, a.State)
		}
		for _, s := range obs.Sites {
			if s.State == W || s.State == UK {
				return fmt.Errorf("promotion-settling while %s is %s", s.Name, s.State)
			}
		}
	}
	switch d.Action {
	case RevokeEpoch:
		// Decide never revokes inside the cooldown (armed by automatic
		// failovers only) or while halted.
		if last, ok := st.CooldownFrom(); ok && now.Sub(last) < pol.FailoverCooldown {
			return fmt.Errorf("failover inside the cooldown (last automatic at %v)", last)
		}
		if st.EscalationHalted || st.InFlight != nil || d.From != st.ActiveSite {
			return fmt.Errorf("revoke while halted, in flight, or from %q not the recorded primary %q", d.From, st.ActiveSite)
		}
	case Promote:
		// Never promote unless a fence proof holds for the old primary.
		f := st.InFlight
		if f == nil || d.Epoch != f.Epoch+1 || d.From != f.From {
			return fmt.Errorf("promote without a matching failover in flight")
		}
		from, _ := site(f.From)
		if from.State == W {
			return fmt.Errorf("promote while the old primary %s is writable", f.From)
		}
		var ok bool
		switch d.FenceProof {
		case ProofFenceConfirmed:
			ok = from.FencedEpoch >= f.Epoch
		case ProofPrimaryDown:
			// Refused twice, and every replica of it lost it (none streams).
			lost, streaming := 0, 0
			for _, s := range obs.Sites {
				if s.Name != f.From && s.State == RO && s.ReplicatingFrom == f.From {
					if s.IOConnected {
						streaming++
					} else {
						lost++
					}
				}
			}
			ok = from.RefusedProbes >= 2 && from.State == UR && lost > 0 && streaming == 0
		case ProofLeaseExpired:
			ok = pol.Fencing == FencingSidecar && !now.Before(pol.LeaseDeadline(f.RevokedAt))
		case ProofOperatorConfirmed:
			// Only this failover's own confirmation, and never while the old
			// primary answers.
			c := f.OperatorConfirmed
			ok = c != nil && c.Site == f.From && c.Epoch == f.Epoch && from.State == UR
		case ProofNoFencing:
			ok = pol.Fencing == FencingNone
		case ProofSemiSync:
			// Nobody can acknowledge the old primary's commits any more.
			ok = pol.Fencing.UsesSemiSync() && pol.SemiSyncReady(from.SemiSync) == ""
			for _, s := range obs.Sites {
				switch {
				case s.Name == f.From:
				case s.State == UR:
					ok = ok && s.RefusedProbes >= 2
				case s.State == UK:
					ok = false
				default:
					ok = ok && (s.IOStopped || (s.ReplicatingFrom != f.From && s.ReplicatingFrom != ""))
				}
			}
		}
		if !ok {
			return fmt.Errorf("promote with proof %q that does not hold (mode %s)", d.FenceProof, pol.Fencing)
		}
		if t, _ := site(d.Target); from.State.Reachable() && !have(t).Contains(need(from)) {
			return fmt.Errorf("promote %s lacking the reachable old primary's transactions", d.Target)
		}
	case ReassertPrimary:
		// Besides read-only sites, only unreachable ones failoverd never
		// left writable: not answering writable, not the recorded primary,
		// the last failover's target or a published in-flight target, and
		// every deposed primary was deposed with a fence proof.
		proven := pol.Fencing != FencingNone && (st.LastFailoverTarget == "" ||
			st.LastFailoverFrom != "" && st.LastFailoverProof != "" && st.LastFailoverProof != ProofNoFencing)
		for _, s := range obs.Sites {
			lost := s.State == UR && proven && !s.Debouncing && s.Name != st.ActiveSite && s.Name != d.Target &&
				(s.Name != st.LastFailoverTarget || st.InFlight != nil && st.InFlight.From == s.Name) &&
				(st.InFlight == nil || st.InFlight.PublishedTo != s.Name)
			if s.State != RO && !lost {
				return fmt.Errorf("re-assert while %s is %s", s.Name, s.State)
			}
		}
		// Abandoning a failover re-asserts its old primary, which must hold
		// every reachable site's transactions; otherwise only the recorded
		// primary is re-asserted.
		if f := st.InFlight; f != nil {
			if (d.Reason != ReasonCatchUpTimeout && d.Reason != ReasonTargetLost) || d.Target != f.From {
				return fmt.Errorf("re-assert of %s while a failover from %s is in flight", d.Target, f.From)
			}
			t, _ := site(d.Target)
			for _, s := range obs.Sites {
				if s.State.Reachable() && !have(t).Contains(need(s)) {
					return fmt.Errorf("abandoning re-asserts %s lacking %s's transactions", d.Target, s.Name)
				}
			}
		} else if d.Target != st.ActiveSite {
			return fmt.Errorf("re-assert of %s with recorded primary %q", d.Target, st.ActiveSite)
		}
	case Rejoin:
		p, _ := site(d.Target)
		for _, r := range d.Repoint {
			if rs, _ := site(r); !p.Executed.Contains(rs.Executed) {
				return fmt.Errorf("rejoin of %s whose set is not contained in %s's", r, d.Target)
			}
		}
	case MarkDiverged:
		for _, x := range d.Diverged {
			if x.Set.IsEmpty() || x.Count == 0 {
				return fmt.Errorf("divergence of %s is empty", x.Site)
			}
			if x.Count > x.Set.Count() {
				return fmt.Errorf("divergence of %s counts %d transactions, more than its set %s holds", x.Site, x.Count, x.Set)
			}
		}
	}
	return nil
}
