package daemon

import (
	"slices"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/hooks"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/status"
)

// notifier runs the group's event hooks in the background (*hooks.Runner).
type notifier interface {
	Fire(ev hooks.Event)
	Results() []hooks.Result
}

// fire tells the event hooks about d (never waits for them: a hook must not
// delay or undo a promotion). site names the site concerned, if any.
func (g *group) fire(event string, d sitepair.Decision, site string) {
	if g.hooks == nil {
		return
	}
	ev := hooks.Event{Type: event, Group: g.cfg.Name, Epoch: d.Epoch, From: d.From, To: d.Target, Site: site,
		Reason: string(d.Reason), Message: d.Message, At: g.now()}
	if !d.PromotionGTID.IsEmpty() {
		ev.GTID = d.PromotionGTID.String()
	}
	g.hooks.Fire(ev)
}

// fireBefore runs before d is carried out: a promotion is about to make its
// target writable.
func (g *group) fireBefore(d sitepair.Decision) {
	if d.Action == sitepair.Promote {
		g.fire(configs.HookBeforePromote, d, d.Target)
	}
}

// fireAfter runs once d was carried out (err nil) or failed; changed tells
// whether d differs from the previous decision (a standing alert fires once).
func (g *group) fireAfter(d sitepair.Decision, err error, changed bool) {
	switch {
	case (d.Action == sitepair.Promote || d.Reason == sitepair.ReasonGroupPrimaryElected) && err == nil:
		// A Group Replication group's new primary, followed: the hooks
		// move what routing does not, as after a promotion.
		g.fire(configs.HookAfterPromote, d, d.Target)
	case (d.Action == sitepair.Promote || d.Action == sitepair.RevokeEpoch) && err != nil:
		g.fire(configs.HookFailoverFailed, d, d.Target)
	case (d.Reason == sitepair.ReasonCatchUpTimeout || d.Reason == sitepair.ReasonTargetLost) && err == nil:
		// The failover or switchover was abandoned: the old primary again.
		g.fire(configs.HookFailoverFailed, d, d.Target)
	case d.Action == sitepair.MarkDiverged && err == nil:
		for _, x := range d.Diverged {
			g.fire(configs.HookRecoveryBlocked, d, x.Site)
		}
	case changed && d.Reason == sitepair.ReasonCatchUpTimeoutBlocked:
		g.fire(configs.HookFailoverFailed, d, d.Target)
	case changed && classOf(d.Reason) == status.ClassSplitBrain:
		g.fire(configs.HookSplitBrain, d, "")
	}
}

// hookRuns is the latest run of each hook, for the status.
func (g *group) hookRuns() []status.HookRun {
	if g.hooks == nil {
		return nil
	}
	var out []status.HookRun
	for _, r := range g.hooks.Results() {
		h := status.HookRun{Hook: r.Hook, Event: r.Event, Epoch: r.Epoch, At: r.At, DurationSeconds: r.Duration.Seconds(), Attempts: r.Attempts, State: "ok"}
		switch {
		case r.InProgress():
			h.State = "running"
		case !r.OK:
			h.State, h.Error = "failed", r.Err
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b status.HookRun) int {
		switch {
		case a.Hook < b.Hook:
			return -1
		case a.Hook > b.Hook:
			return 1
		}
		return 0
	})
	return out
}
