package sitepair

import (
	"time"

	"github.com/failoverd/failoverd/statemachine"
)

// DecideSwitchover decides an operator's planned switchover to target. It
// checks the same safety rules as an automatic failover (fence before
// promote, no dr-only, diverged or operator-fenced target, no target lacking
// another replica's transactions) but not the escalation limit; within the
// failover cooldown it refuses unless force is set (an operator who has just
// seen a failover must mean to move the primary again). Accepted, it returns
// RevokeEpoch with Planned set; phase 2 comes from Decide once the old
// primary is fenced and the target caught up.
func DecideSwitchover(obs Observed, st Persisted, pol Policy, target string, force bool, now time.Time) Decision {
	return DecideSwitchoverWith(obs, st, pol, target, SwitchoverOptions{Force: force}, now)
}

// SwitchoverOptions are an operator's switches on a planned switchover.
type SwitchoverOptions struct {
	// Force allows it within the failover cooldown.
	Force bool
	// AllowDROnly allows a dr-only target (never chosen automatically).
	AllowDROnly bool
}

// DecideSwitchoverWith is DecideSwitchover with every option.
func DecideSwitchoverWith(obs Observed, st Persisted, pol Policy, target string, opt SwitchoverOptions, now time.Time) Decision {
	force := opt.Force
	v, d, ok := prepare(obs, st, pol, now)
	if !ok {
		return d
	}
	// One failover at a time: a second revoke would orphan the first.
	if st.InFlight != nil {
		return v.decision(ReasonSwitchoverInFlight, "a failover from %s to %s is in flight", st.InFlight.From, st.InFlight.To)
	}
	// A paused group moves nothing: the operator who paused it is at work.
	if p := st.Pause; p.ActiveAt(now) {
		return v.decision(ReasonSwitchoverPaused, "the group is paused by %s until %s (%s); resume it first", p.By, p.Until.UTC().Format(time.RFC3339), p.Reason)
	}
	switch v.det.Code {
	case statemachine.Healthy, statemachine.ReplicaUnreachable, statemachine.ReplicationBroken,
		statemachine.ReplicaNotFollowingPrimary, statemachine.PrimaryDebouncing, statemachine.PrimaryExited,
		statemachine.PrimaryDown, statemachine.PrimaryDownUncorroborated, statemachine.UnreachablePrimary, statemachine.AwaitingWitnesses:
	default:
		return v.decision(ReasonSwitchoverGroupState, "group state %s has no single recorded primary to switch from", v.det.Code)
	}
	if st.ActiveSite == "" {
		return v.decision(ReasonSwitchoverGroupState, "no active site is recorded")
	}
	if target == st.ActiveSite {
		return v.decision(ReasonSwitchoverTargetIsPrimary, "%s already is the primary", target)
	}
	t := v.index(target)
	if t < 0 {
		return v.decision(ReasonSwitchoverBadTarget, "unknown site %q", target)
	}
	if why := v.ineligibleAs(t, st.ActiveSite, false, opt.AllowDROnly); why != "" {
		if why == "dr-only" {
			why += " (an explicit switchover may allow it: --allow-dr-only)"
		}
		return v.decision(ReasonSwitchoverBadTarget, "%s cannot be promoted: %s", target, why)
	}
	// Anti-flap: moving the primary again right after an automatic
	// failover needs intent (planned switchovers do not arm it).
	if last, ok := st.CooldownFrom(); !force && ok && now.Sub(last) < pol.FailoverCooldown {
		return v.decision(ReasonSwitchoverCooldown, "the last automatic failover (at %s) is within the %v cooldown; force it to switch over anyway",
			last.UTC().Format(time.RFC3339), pol.FailoverCooldown)
	}
	// The target must hold what every other replica holds, or be able to
	// get it from the primary it streams from: under load a target a few
	// transactions behind another replica is normal. Phase 2 promotes only
	// once it holds everything the fenced primary committed (or, at the
	// catch-up timeout, re-asserts the old primary): nothing is lost either way.
	if j := v.lacking(t, st.ActiveSite); j >= 0 && !v.catchesUpFrom(t, st.ActiveSite) {
		return v.decision(ReasonSwitchoverTargetBehind, "%s lacks %s and cannot get it from %s", target, v.missing(t, j), st.ActiveSite)
	}
	d = v.decision(ReasonSwitchover, "planned switchover from %s to %s: revoking epoch %d", st.ActiveSite, target, st.Epoch)
	d.Epoch = st.Epoch + 1
	d.Target, d.From, d.Planned, d.AllowDROnly = target, st.ActiveSite, true, opt.AllowDROnly
	d.Fence = []string{st.ActiveSite}
	return d
}
