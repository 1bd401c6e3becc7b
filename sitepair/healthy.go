package sitepair

import (
	"fmt"
	"strings"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/statemachine"
)

// healthy handles exactly one writable site that is the recorded primary
// (or no primary is recorded yet): adoption, recovery, else health report.
func (v *view) healthy() Decision {
	p := v.det.Primary
	if v.st.ActiveSite == "" {
		d := v.decision(ReasonAdoptPrimary, "no primary recorded; adopting the only writable site %s at epoch %d", p, v.st.Epoch+1)
		d.Target = p
		d.Epoch = v.st.Epoch + 1
		return d
	}
	pi := v.index(p)
	var rejoin, repaired []string
	var div []Divergence
	for _, s := range v.sites {
		// A recloning site is mid-restore: its data and GTID set mean
		// nothing until the reclone finished (a partial restore looks
		// contained and would be rejoined with rows missing).
		if s.Name == p || s.State != statemachine.ReadOnly || v.opFenced(s.Name) || v.recloning(s.Name) {
			continue
		}
		if v.diverged(s.Name) {
			// Re-checked on every round: a human may have repaired it.
			if v.repaired(s, v.sites[pi]) {
				repaired = append(repaired, s.Name)
			}
			continue
		}
		if s.ReplicatingFrom == p {
			// A replica that wrote transactions of its own (errant) must
			// never be promoted: mark it while the primary can still tell.
			if extra := v.errant(s, v.sites[pi]); !extra.IsEmpty() {
				// Counted against the primary plus everything s holds that
				// it did not originate, as errant decides: a primary
				// observed a moment before s adds nothing to the count.
				seen := v.sites[pi].Executed.Union(s.Executed.Subtract(extra))
				div = append(div, Divergence{Site: s.Name, Set: extra, Count: gtid.DivergentCount(s.Executed, seen)})
			}
			continue
		}
		// Only a site whose history is a prefix of the primary's can
		// replicate from it without corrupting data.
		if v.sites[pi].Executed.Covers(s.Executed) {
			rejoin = append(rejoin, s.Name)
			continue
		}
		// An old primary whose extra transactions no client can have seen
		// committed is re-seeded instead of waiting for a human (opt-in).
		if tail, ok := v.unacknowledgedTail(s, v.sites[pi]); ok {
			return v.recloneTail(s, v.sites[pi], tail)
		}
		extra := v.sites[pi].Executed.Uncovered(s.Executed)
		div = append(div, Divergence{Site: s.Name, Set: extra, Count: gtid.DivergentCount(s.Executed, v.sites[pi].Executed)})
	}
	if len(div) > 0 {
		var parts []string
		for _, x := range div {
			noun := "transactions"
			if x.Count == 1 {
				noun = "transaction"
			}
			parts = append(parts, fmt.Sprintf("%s has %d %s %s lacks (%s)", x.Site, x.Count, noun, p, x.Set.Compact()))
		}
		d := v.decision(ReasonMarkDiverged, "diverged from primary %s: %s; a human must reconcile", p, strings.Join(parts, "; "))
		d.Target = p
		d.Diverged = div
		return d
	}
	if len(repaired) > 0 {
		d := v.decision(ReasonDivergenceRepaired, "%s no longer %s transactions primary %s lacks: divergence cleared, it may rejoin", strings.Join(repaired, ", "), plural(len(repaired), "holds", "hold"), p)
		d.Target = p
		d.Repaired = repaired
		return d
	}
	if len(rejoin) > 0 {
		d := v.decision(ReasonRejoin, "%s not replicating from primary %s and contained in it: rejoining", strings.Join(rejoin, ", "), p)
		d.Target = p
		d.Repoint = rejoin
		return d
	}
	// The semi-sync source side belongs on the primary only: on a replica
	// its applier's commits wait for acknowledgements nobody sends.
	if off := v.sourceOnReplicas(p); len(off) > 0 {
		d := v.decision(ReasonSemiSyncSourceOnReplica, "%s %s the semi-sync source side on: %s applier's commits wait for acknowledgements nobody sends; switching it off (the source side belongs on primary %s only)",
			strings.Join(off, ", "), plural(len(off), "has", "have"), plural(len(off), "its", "their"), p)
		d.Target = p
		d.SemiSyncOff = off
		return d
	}
	// Every commit on the primary waits: more urgent than any replica's
	// state (which is usually the cause).
	if why := v.pol.WritesStalled(v.sites[pi]); why != "" {
		return v.decision(ReasonWritesStalledAwaitingAck, "primary %s accepts no writes: %s; a replica that acknowledges (reachable, replicating from it with the semi-sync replica side on) ends the stall", p, why)
	}
	switch v.det.Code {
	case statemachine.ReplicationBroken:
		return v.decision(ReasonDegradedReplicationBroken, "primary %s is healthy but a replica's replication stopped on an error", p)
	case statemachine.ReplicaNotFollowingPrimary:
		return v.decision(ReasonDegradedNotFollowing, "primary %s is healthy but a replica does not follow it (IO not connected, operator-fenced or diverged)", p)
	case statemachine.ReplicaUnreachable:
		return v.decision(ReasonDegradedReplicaUnreachable, "primary %s is healthy but %s unreachable", p, strings.Join(v.inState(statemachine.Unreachable), ", "))
	}
	// A replica that silently stopped applying must never read as healthy
	// (it would be found out only by the failover that needs it).
	for _, s := range v.sites {
		// A site under maintenance may lag: no alert while the hold lasts.
		if s.Name == p || s.State != statemachine.ReadOnly || s.ReplicatingFrom != p || v.opFenced(s.Name) || v.recloning(s.Name) || v.diverged(s.Name) || v.maintenance(s.Name) {
			continue
		}
		if why := v.pol.ApplierBlocked(s); why != "" {
			return v.decision(ReasonApplierBlocked, "primary %s is healthy but replica %s's applier is blocked: %s", p, s.Name, why)
		}
	}
	// Checked on every healthy probe: a failover must not discover that the
	// proof it relies on was never available.
	if v.pol.Fencing.UsesSemiSync() {
		if why := v.pol.SemiSyncReady(v.sites[pi].SemiSync); why != "" {
			return v.decision(ReasonSemiSyncUnsafe, "primary %s is healthy but its semi-sync settings cannot prove a hung or isolated primary stopped acknowledging writes: %s", p, why)
		}
	}
	return v.decision(ReasonHealthy, "primary %s is writable and every replica follows it", p)
}

// repaired reports whether the known-diverged site s no longer holds
// anything primary lacks: it replicates from primary without errant
// transactions, or its whole history is contained in primary's.
func (v *view) repaired(s, primary SiteObservation) bool {
	if s.ReplicatingFrom == primary.Name && s.ServerID != "" {
		return v.errant(s, primary).IsEmpty()
	}
	return primary.Executed.Covers(s.Executed)
}

// sourceOnReplicas lists the read-only replicas of primary p whose
// semi-sync source side is on, except sites the daemon leaves alone
// (operator-fenced, recloning, known-diverged).
func (v *view) sourceOnReplicas(p string) []string {
	var out []string
	for _, s := range v.sites {
		if s.Name == p || s.State != statemachine.ReadOnly || s.ReplicatingFrom != p || !s.SemiSync.Known || !s.SemiSync.Enabled ||
			v.opFenced(s.Name) || v.recloning(s.Name) || v.diverged(s.Name) {
			continue
		}
		out = append(out, s.Name)
	}
	return out
}

// ApplierBlocked says why replica s's applier is blocked ("" when it is
// not): its threads wait for semi-sync acknowledgements, or with both
// threads running it has left what it received unapplied for longer than
// ApplierStallWindow. Pure; the daemon's status uses it too.
func (p Policy) ApplierBlocked(s SiteObservation) string {
	switch {
	case s.AckWaits.Known && s.AckWaits.Appliers > 0:
		return fmt.Sprintf("%d applier %s waiting %v for semi-sync acknowledgements (its own semi-sync source side is on; nobody acknowledges a replica's commits)",
			s.AckWaits.Appliers, plural(s.AckWaits.Appliers, "thread", "threads"), s.AckWaits.Longest)
	case !s.IOStopped && !s.ApplierStopped && !s.ReplicationBroken && s.BacklogAge > p.ApplierStallWindow():
		return fmt.Sprintf("transactions it received %v ago are still not applied while both replication threads run (from GTID sets; bound %v)",
			s.BacklogAge, p.ApplierStallWindow())
	}
	return ""
}

// WritesStalled says why commits on site s are stalled waiting for
// semi-sync acknowledgements ("" when they are not): a commit has waited
// longer than AckStallWindow. Pure; the daemon's status uses it too.
func (p Policy) WritesStalled(s SiteObservation) string {
	w := s.AckWaits
	if !w.Known || w.Sessions == 0 || w.Longest <= p.AckStallWindow() {
		return ""
	}
	return fmt.Sprintf("%d %s waiting for a semi-sync acknowledgement, the longest for %v (over %v)",
		w.Sessions, plural(w.Sessions, "session", "sessions"), w.Longest, p.AckStallWindow())
}
