package sitepair

// Failover readiness: what would happen if the primary were lost now. The
// answer comes from Decide itself, run on a hypothetical round in which the
// primary is lost, and again on what each of its decisions would lead to,
// so it can never disagree with the rules that would act.

import (
	"time"

	"github.com/failoverd/failoverd/statemachine"
)

// Fault is the loss a readiness check supposes.
type Fault string

// Faults a readiness check supposes.
const (
	// FaultCrash: the primary's mysqld exits (kill -9, OOM, crash): its
	// host refuses connections, its replicas lose it.
	FaultCrash Fault = "crash"
	// FaultLost: the primary answers nothing (its host or network lost,
	// mysqld hung): only a sidecar, semi-sync or a human can prove it
	// stopped acknowledging writes.
	FaultLost Fault = "lost"
)

// Faults returns every Fault.
func Faults() []Fault { return []Fault{FaultCrash, FaultLost} }

// Readiness is the answer for one Fault.
type Readiness struct {
	Fault Fault
	// Ready: the group would promote Candidate on its own.
	Ready bool
	// Candidate is the site it would promote ("" when none would be).
	Candidate string
	// Proof is the fence proof the promotion would rest on (Ready only).
	Proof FenceProof
	// ProofAfter is how long after the failover starts (the revoke) the
	// proof would hold: 0, or the sidecar lease (lease-expired).
	ProofAfter time.Duration
	// Reason and Message are the decision that blocks it (not Ready), or
	// the promotion's (Ready).
	Reason  Reason
	Message string
}

// maxReadinessSteps bounds the decisions followed per fault: a failover
// takes at most a revoke, a detach, a fence, a lease wait and a promotion.
const maxReadinessSteps = 12

// CheckReadiness answers, for every Fault, whether the group would fail over
// on its own if its primary were lost at now, to which site, on which proof,
// or what would block it. A group without a healthy recorded primary (none
// recorded, a failover in flight, no writable site) is not ready, with the
// current decision's reason.
func CheckReadiness(obs Observed, st Persisted, pol Policy, now time.Time) []Readiness {
	out := make([]Readiness, 0, len(Faults()))
	cur := Decide(obs, st, pol, now)
	p := -1
	for i, s := range obs.Sites {
		if s.Name == st.ActiveSite && s.State == statemachine.Writable {
			p = i
		}
	}
	for _, f := range Faults() {
		if st.InFlight != nil || p < 0 {
			out = append(out, Readiness{Fault: f, Reason: cur.Reason, Message: "no healthy primary to lose: " + cur.Message})
			continue
		}
		out = append(out, readiness(f, lose(obs, p, f, pol, now), st, pol, now))
	}
	return out
}

// lose returns obs with site p lost by fault f at now.
func lose(obs Observed, p int, f Fault, pol Policy, now time.Time) Observed {
	h := obs
	h.Sites = append([]SiteObservation(nil), obs.Sites...)
	name := h.Sites[p].Name
	ps := &h.Sites[p]
	ps.State, ps.Debouncing, ps.LastReachableAt = statemachine.Unreachable, false, now
	if f == FaultCrash {
		ps.RefusedProbes = max(pol.RefusedProbes, 1)
	}
	for i := range h.Sites {
		s := &h.Sites[i]
		if i != p && s.ReplicatingFrom == name && s.IOConnected {
			// Its replicas lose it with the daemon.
			s.IOConnected, s.SourceSilent, s.LastStreamingAt = false, true, now
		}
	}
	return h
}

// readiness follows the decisions the hypothetical loss would lead to.
func readiness(f Fault, obs Observed, st Persisted, pol Policy, now time.Time) Readiness {
	r := Readiness{Fault: f}
	at, revokedAt := now, time.Time{}
	waited := false
	for range maxReadinessSteps {
		d := Decide(obs, st, pol, at)
		switch {
		case d.Action == RevokeEpoch:
			r.Candidate, revokedAt = d.Target, at
			st = Apply(st, d, at)
			adoptView(&obs, st.Epoch, d.From, at)
			detach(&obs, d.Detach)
		case d.Action == StopReplicaIO:
			detach(&obs, d.Detach)
		case d.Action == FenceSites && fenceReachable(&obs, d.Fence, st.Epoch):
		case d.Action == Promote:
			r.Ready, r.Candidate, r.Proof, r.ProofAfter = true, d.Target, d.FenceProof, at.Sub(revokedAt)
			r.Reason, r.Message = d.Reason, d.Message
			return r
		case d.Reason == ReasonAwaitLeaseExpiry && !waited:
			// The lost primary's sidecar fences by its lease; the others
			// keep reporting meanwhile.
			waited = true
			at = at.Add(pol.LeaseTimeout + LeaseMargin + time.Second)
			adoptView(&obs, st.Epoch, st.InFlight.From, at)
		default:
			r.Reason, r.Message = d.Reason, d.Message
			if r.Reason == ReasonPausedWithheld && d.Withheld != nil && d.Withheld.Action == RevokeEpoch {
				r.Candidate = d.Withheld.Target
			}
			return r
		}
	}
	r.Reason, r.Message = ReasonWaitingForProbes, "the hypothetical failover did not settle within its steps"
	return r
}

// adoptView has every reporting sidecar but lost's hold epoch at: healthy
// peer sidecars adopt the revoking view within a check interval and keep
// answering the daemon.
func adoptView(obs *Observed, epoch uint64, lost string, at time.Time) {
	for i := range obs.Sites {
		s := &obs.Sites[i]
		if s.Name == lost || !s.Sidecar.Configured || s.Sidecar.LastReport.IsZero() || !s.State.Reachable() {
			continue
		}
		if s.Sidecar.Epoch < epoch {
			s.Sidecar.Epoch, s.Sidecar.EpochSince = epoch, at
		}
		s.Sidecar.LastReport, s.Sidecar.AliveAt = at, at
	}
}

// detach stops the IO threads of sites.
func detach(obs *Observed, sites []string) {
	for i := range obs.Sites {
		for _, n := range sites {
			if obs.Sites[i].Name == n {
				obs.Sites[i].IOStopped, obs.Sites[i].IOConnected = true, false
			}
		}
	}
}

// fenceReachable reads a fence back from the reachable sites among fence
// and reports whether that changed anything (an unreachable one stays
// unproven: following its fence again would loop).
func fenceReachable(obs *Observed, fence []string, epoch uint64) bool {
	changed := false
	for i := range obs.Sites {
		s := &obs.Sites[i]
		for _, n := range fence {
			if s.Name == n && s.State.Reachable() && s.FencedEpoch < epoch {
				s.FencedEpoch, s.State, changed = epoch, statemachine.ReadOnly, true
			}
		}
	}
	return changed
}
