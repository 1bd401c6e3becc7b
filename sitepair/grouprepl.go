package sitepair

import (
	"fmt"
	"strings"
	"time"

	"github.com/failoverd/failoverd/grview"
)

// DecideGroupReplication is the decision for a replication: group group
// (MySQL Group Replication, single-primary), from grview's verdict of this
// round and the persisted state. The group elects its primary itself, so
// the only action it ever returns is AdoptPrimary: a new epoch naming the
// primary a quorate verdict names (ReasonGroupAdoptPrimary,
// ReasonGroupPrimaryElected), which moves routing, the cache, DNS, hooks and
// readers after the group. Every other verdict (no quorum, unconfirmed, no
// primary, a primary that is no configured site) keeps the recorded active
// site and alerts: nothing writes to a server. It never returns RevokeEpoch,
// Promote, FenceSites, ReassertPrimary, Rejoin, StopReplicaIO or
// DisableSemiSyncSource (TestGroupReplicationDecisionNeverWritesToAServer).
// Pure: no I/O, no clock.
func DecideGroupReplication(v grview.Verdict, st Persisted) Decision {
	d := Decision{Action: Alert, Epoch: st.Epoch}
	switch v.Reason {
	case grview.ReasonNoQuorum:
		d.Reason = ReasonGroupNoQuorum
		d.Message = fmt.Sprintf("the group has no majority of its %d members: it takes no writes; routing stays on %s. "+
			"Bring members back; forcing the membership is a human decision (docs/design.md, \"Group Replication groups\")", v.Denominator, orNone(st.ActiveSite))
	case grview.ReasonUnconfirmed:
		d.Reason = ReasonGroupUnconfirmed
		d.Message = fmt.Sprintf("no majority of the group's %d members agrees on a view (a view change under way, or members unreached): routing stays on %s",
			v.Denominator, orNone(st.ActiveSite))
	case grview.ReasonNoPrimary:
		d.Reason = ReasonGroupNoPrimary
		d.Message = fmt.Sprintf("the group's quorate view %s has no single ONLINE primary (an election under way): routing stays on %s", v.ViewID, orNone(st.ActiveSite))
	case grview.ReasonQuorate:
		switch {
		case v.PrimarySite == "":
			// Routing can only name configured sites.
			d.Reason = ReasonGroupPrimaryNotConfigured
			d.Message = fmt.Sprintf("the group elected %s (%s), which is no configured site: add it to the group's sites; routing stays on %s",
				v.Primary.ID, v.Primary.Addr(), orNone(st.ActiveSite))
		case st.ActiveSite == "":
			d.Action, d.Reason, d.Target, d.Epoch = AdoptPrimary, ReasonGroupAdoptPrimary, v.PrimarySite, st.Epoch+1
			d.Message = fmt.Sprintf("no active site recorded: the group's primary %s (view %s) is adopted at epoch %d", v.PrimarySite, v.ViewID, d.Epoch)
		case st.ActiveSite != v.PrimarySite:
			d.Action, d.Reason, d.Target, d.From, d.Epoch = AdoptPrimary, ReasonGroupPrimaryElected, v.PrimarySite, st.ActiveSite, st.Epoch+1
			d.Message = fmt.Sprintf("the group elected %s in view %s (was %s): epoch %d names it; routing follows", v.PrimarySite, v.ViewID, st.ActiveSite, d.Epoch)
		default:
			var out []string
			for _, s := range v.Sites {
				if s.Standing != grview.StandingAgrees {
					out = append(out, fmt.Sprintf("%s %s", s.Site, s.Standing))
				}
			}
			if len(out) == 0 {
				d.Action, d.Reason = None, ReasonGroupHealthy
				d.Message = fmt.Sprintf("the group's view %s names %s primary; every member agrees", v.ViewID, st.ActiveSite)
			} else {
				d.Reason = ReasonGroupMemberNotOnline
				d.Message = fmt.Sprintf("the group's view %s names %s primary; not ONLINE in it: %s", v.ViewID, st.ActiveSite, strings.Join(out, ", "))
			}
		}
	default:
		d.Reason = ReasonInvalidInput
		d.Message = fmt.Sprintf("unknown Group Replication verdict %q: routing stays", v.Reason)
	}
	return d
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// DecideGroupSwitchover decides an operator's switchover of a Group
// Replication group to target from the last verdict: accepted
// (ReasonGroupSwitchover, with the target's server_uuid returned) only when the verdict is
// quorate, the target is a configured site ONLINE in its view and not
// already its primary, and the group is not paused. Accepted or refused,
// the Action is None: the switchover is the group's own election, asked of
// it with group_replication_set_as_primary; the epoch moves only when a
// later quorate verdict names the target (DecideGroupReplication). Pure.
func DecideGroupSwitchover(v grview.Verdict, st Persisted, target string, now time.Time) (Decision, string) {
	d := Decision{Action: None, Target: target, Epoch: st.Epoch}
	var uuid string
	var state grview.MemberState
	for _, s := range v.Sites {
		if s.Site == target {
			uuid, state = s.UUID, s.State
		}
	}
	online := false
	for _, m := range v.Members {
		if m.ID == uuid && uuid != "" && m.State == grview.StateOnline {
			online = true
		}
	}
	switch {
	case st.Pause.ActiveAt(now):
		d.Reason = ReasonSwitchoverPaused
		d.Message = fmt.Sprintf("the group is paused by %s until %s: resume it first", st.Pause.By, st.Pause.Until.UTC().Format(time.RFC3339))
	case !v.Quorate:
		d.Reason = ReasonSwitchoverGroupNoQuorum
		d.Message = fmt.Sprintf("the group has no quorate view (%s): no member can be elected", v.Reason)
	case v.PrimarySite == target:
		d.Reason = ReasonSwitchoverTargetIsPrimary
		d.Message = fmt.Sprintf("%s already is the group's primary (view %s)", target, v.ViewID)
	case !online:
		d.Reason = ReasonSwitchoverTargetNotOnline
		d.Message = fmt.Sprintf("%s is not ONLINE in the group's view %s (its own state: %s; server_uuid %q): only an ONLINE member can be elected",
			target, v.ViewID, orNone(string(state)), uuid)
	default:
		d.Reason = ReasonGroupSwitchover
		d.Message = fmt.Sprintf("the group is asked to elect %s (%s) in place of %s; routing follows its next quorate view naming it",
			target, uuid, orNone(v.PrimarySite))
		return d, uuid
	}
	return d, ""
}
