package readers

import (
	"fmt"
	"time"

	"github.com/failoverd/failoverd/grview"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
)

// GroupRound is what one round of a Group Replication group read: the
// cross-checked verdict and each reached member's gtid_executed.
type GroupRound struct {
	// Verdict is the round's (grview.Evaluate): one SiteView per
	// configured site, in configuration order.
	Verdict grview.Verdict
	// Executed maps each site whose report was read this round to its
	// gtid_executed.
	Executed map[string]gtid.Set
}

// appliedSample is the primary's gtid_executed as one round read it.
type appliedSample struct {
	group string
	set   gtid.Set
	at    time.Time
}

// ComputeGroup is Compute for a Group Replication group (replication:
// group): the same hysteresis, IncludePrimary and events, on what the
// group's quorate verdict says of each member instead of its replication
// threads. A member is a good reader in a round when the quorate verdict's
// view has it ONLINE as a SECONDARY, its own report (read this round)
// agrees with that view, and its lag is known and at most MaxLag. A
// verdict without quorum or without a primary, a member outside the view,
// RECOVERING, UNREACHABLE, ERROR or OFFLINE in it, or whose own report
// disagrees with it, takes the member out at once (a safety reason).
//
// The lag is measured from GTID sets, as the async replicas' BacklogAge:
// every Round the primary's gtid_executed is sampled with its time; a
// member's lag is the age of the oldest sample its own gtid_executed (read
// in the same round) does not cover, 0 when it covers them all. It is a
// lower bound, exact to a round: the member lacks a transaction the
// primary had committed that long ago. A member that lacks even the oldest
// sample kept has an unknown lag until that sample is older than MaxLag
// (then it is over MaxLag); samples older than MaxLag+Round are dropped.
func ComputeGroup(r GroupRound, st sitepair.Persisted, cfg Config, prev State, now time.Time) (State, []Event) {
	cfg = cfg.normal()
	samples := sampleApplied(prev.applied, r, cfg, now)
	names := make([]string, len(r.Verdict.Sites))
	for i, sv := range r.Verdict.Sites {
		names[i] = sv.Site
	}
	next, events := combine(names, st.ActiveSite, func(i int) verdict {
		return evaluateMember(r.Verdict.Sites[i], r, samples, st, cfg, now)
	}, cfg, prev, now)
	next.applied = samples
	return next, events
}

// sampleApplied returns prev's samples still in the window, with this
// round's sample of the primary's gtid_executed when one is due.
func sampleApplied(prev []appliedSample, r GroupRound, cfg Config, now time.Time) []appliedSample {
	v := r.Verdict
	out := make([]appliedSample, 0, len(prev)+1)
	for _, s := range prev {
		// A group bootstrapped anew has another history: its members are
		// not measured against the old group's transactions.
		if s.group != v.GroupName && v.GroupName != "" {
			continue
		}
		// Lacking a newer sample already says over MaxLag.
		if now.Sub(s.at) > cfg.MaxLag+cfg.Round {
			continue
		}
		out = append(out, s)
	}
	set, read := r.Executed[v.PrimarySite]
	due := len(out) == 0 || now.Sub(out[len(out)-1].at) >= cfg.Round
	// Only a primary a quorate verdict names is sampled: a stale or
	// outvoted member's set is not the group's.
	if v.Quorate && v.PrimarySite != "" && read && due {
		out = append(out, appliedSample{group: v.GroupName, set: set, at: now})
	}
	return out
}

// memberLag is the lag of a member whose gtid_executed is executed,
// against samples; known is false when it lacks even the oldest sample and
// that one is not older than MaxLag.
func memberLag(executed gtid.Set, samples []appliedSample, cfg Config, now time.Time) (lag time.Duration, known bool) {
	for j, s := range samples {
		if executed.Covers(s.set) {
			continue
		}
		lag = now.Sub(s.at)
		if j == 0 && lag <= cfg.MaxLag {
			// What it lacked before the oldest sample is not measured.
			return 0, false
		}
		return lag, true
	}
	return 0, true
}

// evaluateMember judges one member of a Group Replication group in one
// round: good or not, why, and whether the reason is one of safety.
func evaluateMember(sv grview.SiteView, r GroupRound, samples []appliedSample, st sitepair.Persisted, cfg Config, now time.Time) verdict {
	unsafe := func(why string) verdict { return verdict{safety: true, why: why, lag: -1} }
	v := r.Verdict
	// Prevents reads from a view no majority confirmed (a minority
	// partition, a stale or lying member, quorum lost).
	if !v.Quorate {
		return unsafe(fmt.Sprintf("the group has no quorate view (%s): no readers", v.Reason))
	}
	// Prevents reads while the group elects (no primary in its view) or
	// before failoverd recorded one: nobody can say what is current.
	if v.PrimarySite == "" || st.ActiveSite == "" {
		return unsafe("the group's view names no primary failoverd recorded: no readers")
	}
	// Prevents reads from a view routing has not followed yet (the new
	// epoch not persisted): the writer still points at the old primary.
	if v.PrimarySite != st.ActiveSite {
		return unsafe(fmt.Sprintf("the group elected %s, failoverd's record still names %s: no readers until it follows", v.PrimarySite, st.ActiveSite))
	}
	if st.InFlight != nil {
		return unsafe(fmt.Sprintf("a primary change to %s in flight (epoch %d): no readers until it completes", st.InFlight.To, st.Epoch))
	}
	if why := recordWithheld(sv.Site, st, now); why != "" {
		return unsafe(why)
	}
	if sv.UUID == "" {
		return verdict{why: "unreachable: never read, its server_uuid is unknown", lag: -1}
	}
	m, ok := viewMember(v, sv.UUID)
	// Prevents an expelled member (or one that never joined) from serving
	// what the group moved past.
	if !ok {
		return unsafe(fmt.Sprintf("not in the group's view %s", v.ViewID))
	}
	switch m.State {
	case grview.StateOnline:
	case grview.StateRecovering:
		// Prevents reads from a member still copying what it missed.
		return unsafe("RECOVERING in the group's view: still copying what it missed")
	default:
		// Prevents reads from a member the majority lost (UNREACHABLE: it
		// may sit in a minority with an old view) or that left the group
		// (ERROR, OFFLINE: it applies nothing).
		return unsafe(fmt.Sprintf("%s in the group's view", m.State))
	}
	if !sv.Reached {
		return verdict{why: "unreachable: its report could not be read this round", lag: -1}
	}
	// Prevents reads from a member whose own table disagrees with the
	// majority (cut off before the others noticed, a second group).
	if sv.Standing != grview.StandingAgrees {
		return unsafe(fmt.Sprintf("its own report disagrees with the group's view (%s)", sv.Standing))
	}
	if sv.Site == st.ActiveSite {
		return verdict{good: true, why: "the primary", lag: 0}
	}
	// Prevents a second writer (multi-primary mode) from counting as a
	// replica.
	if m.Role != grview.RoleSecondary {
		return unsafe(fmt.Sprintf("role %q in the group's view, not SECONDARY", m.Role))
	}
	executed, read := r.Executed[sv.Site]
	if !read {
		return verdict{why: "lag unknown: its gtid_executed was not read this round", lag: -1}
	}
	l, known := memberLag(executed, samples, cfg, now)
	switch {
	case !known:
		return verdict{why: "lag unknown: it lacks transactions older than failoverd's first sample of the primary", lag: -1}
	case l > cfg.MaxLag:
		return verdict{why: fmt.Sprintf("lag %s over maxLag %s (applier queue %d)", l, cfg.MaxLag, m.ApplierQueue), lag: l.Seconds()}
	}
	return verdict{good: true, why: fmt.Sprintf("ONLINE secondary of %s, lag %s", st.ActiveSite, l), lag: l.Seconds()}
}

// viewMember is the member with server_uuid id in the verdict's view.
func viewMember(v grview.Verdict, id string) (grview.Member, bool) {
	for _, m := range v.Members {
		if m.ID == id {
			return m, true
		}
	}
	return grview.Member{}, false
}
