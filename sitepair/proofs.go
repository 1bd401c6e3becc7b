package sitepair

import (
	"fmt"
	"strings"
	"time"

	"github.com/failoverd/failoverd/statemachine"
)

// proof returns the fence proof for the in-flight failover's old primary,
// or "" if none holds. docs/design.md lists every proof and its tests.
func (v *view) proof() FenceProof {
	inf := v.st.InFlight
	from := v.sites[v.index(inf.From)]
	switch {
	case from.State == statemachine.Writable:
		// A writable old primary is never fenced, whatever else we know.
		return ""
	case from.FencedEpoch >= inf.Epoch:
		return ProofFenceConfirmed
	case v.mysqldDown(from):
		return ProofPrimaryDown
	case v.pol.Fencing.UsesSidecar() && v.sidecarFenced(from):
		return ProofSidecarFenced
	case v.pol.Fencing.UsesSemiSync() && v.semiSyncFenced(from):
		return ProofSemiSync
	case v.pol.Fencing.UsesSidecar() && v.leaseExpired():
		return ProofLeaseExpired
	case v.operatorConfirmed(from):
		return ProofOperatorConfirmed
	case v.pol.Fencing == FencingNone:
		return ProofNoFencing
	}
	return ""
}

// operatorConfirmed: a human confirmed the old primary dead for this very
// failover (its site, its revoked epoch), and it still does not answer: one
// that answers again is fenced and read back instead (F2, F7), since the
// human's premise no longer holds.
func (v *view) operatorConfirmed(from SiteObservation) bool {
	c := v.st.InFlight.OperatorConfirmed
	return c != nil && c.Site == from.Name && c.Epoch == v.st.InFlight.Epoch && from.State == statemachine.Unreachable
}

// mysqldDown: the old primary refused enough consecutive probes and the
// replicas corroborate. A single refusal also comes from a Service without
// endpoints, a proxy in front or a restarting pod.
func (v *view) mysqldDown(from SiteObservation) bool {
	if from.State != statemachine.Unreachable || from.RefusedProbes < v.pol.RefusedProbes || v.pol.Detection == statemachine.DaemonOnly {
		return false
	}
	// A replica still receiving from it (or not asked since the daemon
	// gave it up) means something may answer there.
	return v.in.WitnessesConfirmLoss(from.Name)
}

// SemiSyncReady says why a primary's semi-sync settings cannot back the
// semi-sync proof ("" when they can).
func (p Policy) SemiSyncReady(s SemiSyncObservation) string {
	switch {
	case !s.Known:
		return "semi-sync settings unknown"
	case !s.Enabled:
		return "semi-sync is not enabled on the primary"
	case !s.Active:
		return "semi-sync is enabled but not active (the primary fell back to asynchronous commits)"
	case s.Timeout < MinSemiSyncTimeout:
		return fmt.Sprintf("semi-sync timeout %v is below %v: a hung primary that resumes falls back to async and acknowledges writes", s.Timeout, MinSemiSyncTimeout)
	case !s.WaitNoReplica:
		return "semi-sync does not wait when no replica is connected (wait_no_slave/wait_no_replica OFF)"
	case p.SemiSyncAfterSync && !strings.EqualFold(s.WaitPoint, "AFTER_SYNC"):
		return fmt.Sprintf("semi-sync wait point %q is not AFTER_SYNC", s.WaitPoint)
	}
	return ""
}

// semiSyncDetach returns the reachable sites that could still acknowledge
// the old primary's semi-sync commits (a running IO thread pointed at it or
// at an unknown source) and whether the proof is blocked by a site the
// daemon cannot reach whose mysqld is not known down.
func (v *view) semiSyncDetach(from SiteObservation) (detach []string, blocked string) {
	for _, s := range v.sites {
		switch {
		case s.Name == from.Name:
		case s.State == statemachine.Unreachable:
			// It may be connected to the old primary and acknowledge.
			if s.RefusedProbes < v.pol.RefusedProbes {
				blocked = s.Name
			}
		case s.State == statemachine.Unknown:
			blocked = s.Name
		case !s.IOStopped && (s.ReplicatingFrom == from.Name || s.ReplicatingFrom == ""):
			detach = append(detach, s.Name)
		}
	}
	return detach, blocked
}

// semiSyncFenced: the old primary's own settings (at its last reachable
// probe) never let a commit be acknowledged without a replica, and no
// replica can acknowledge any more.
func (v *view) semiSyncFenced(from SiteObservation) bool {
	if v.pol.SemiSyncReady(from.SemiSync) != "" {
		return false
	}
	detach, blocked := v.semiSyncDetach(from)
	return len(detach) == 0 && blocked == ""
}

// sidecarFenced: the old primary's sidecar said, holding the revoked epoch
// or a newer one, that it fenced or killed its mysqld or found it down.
func (v *view) sidecarFenced(from SiteObservation) bool {
	sc := from.Sidecar
	if !sc.Configured || sc.LastReport.IsZero() || sc.Epoch < v.st.InFlight.Epoch {
		return false
	}
	return sc.FencedEpoch >= v.st.InFlight.Epoch || sc.MysqldDown
}

func (v *view) leaseExpired() bool {
	dl, ok := v.leaseDeadline()
	return ok && !v.now.Before(dl) && v.peerRestartedBefore(dl) == ""
}

// peerRestartedBefore names a peer sidecar that may have restarted before
// dl ("" when none): a restarted sidecar holds no view, may adopt the old
// epoch from the old primary's sidecar and serve it back, renewing its lease
// while the daemon is told nothing. A peer that provably ran the same boot
// at dl (AliveAt) served only revoking views until then; after dl the old
// primary's sidecar has fenced, and it never unfences (issue 26 hole 2).
func (v *view) peerRestartedBefore(dl time.Time) string {
	from := v.st.InFlight.From
	for _, s := range v.sites {
		if s.Name != from && s.Sidecar.Configured && s.Sidecar.AliveAt.Before(dl) {
			return s.Name
		}
	}
	return ""
}

// leaseDeadline is when the old primary's sidecar lease has provably run
// out; ok is false when nothing can prove it. The lease may have been
// renewed by this daemon (its last report), by a peer sidecar still holding
// an older view (what the peers say they served it), or by another daemon
// before this one started serving views.
func (v *view) leaseDeadline() (deadline time.Time, ok bool) {
	inf := v.st.InFlight
	from := v.sites[v.index(inf.From)]
	sc := from.Sidecar
	// A sidecar that was never seen cannot have fenced itself.
	if !sc.Configured || sc.LastReport.IsZero() {
		return time.Time{}, false
	}
	// One that cannot SIGKILL mysqld leaves a hung one writable when it
	// resumes after the lease: expiry proves nothing there.
	if !sc.CanKill {
		return time.Time{}, false
	}
	// One silent long before the failure may be dead, not fencing:
	// nothing says its lease loop still runs. (An isolated one goes
	// silent when the failure starts, detection plus a report interval
	// before the revoke.)
	if sc.LastReport.Add(SidecarSilenceLimit(v.pol.LeaseTimeout)).Before(inf.RevokedAt) {
		return time.Time{}, false
	}
	// Every renewal this daemon gave was a report it received: LastReport
	// bounds them (the revoke time is not needed, and would only add the
	// detection time to the wait).
	last := later(sc.LastReport, v.obs.ServingSince)
	for _, s := range v.sites {
		if s.Name == from.Name || !s.Sidecar.Configured {
			continue
		}
		// A peer that may still hold the old view can renew the lease
		// through gossip for as long as it does.
		if s.Sidecar.LastReport.IsZero() || s.Sidecar.Epoch < inf.Epoch {
			return time.Time{}, false
		}
		// A view served at the revoked epoch or later revokes rather than
		// renews: the old one was served before the peer adopted the new.
		if sv := s.Sidecar.Served[from.Name]; sv.Epoch >= inf.Epoch {
			last = later(last, s.Sidecar.EpochSince)
		} else {
			last = later(last, sv.At)
		}
	}
	return v.pol.LeaseDeadline(last), true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
