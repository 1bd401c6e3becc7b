package daemon

// The loop of a replication: group group (MySQL Group Replication,
// single-primary): the group elects its primary, failoverd follows. Each
// round reads every member's report (mysqlctl GroupStatus), cross-checks
// them (grview.Evaluate) and decides (sitepair.DecideGroupReplication);
// the only action it ever carries out is a new epoch naming the primary a
// quorate verdict names (followGroup), which moves routing, the cache, DNS
// and hooks through the same followers as an async failover. Every
// statement that would change a member (fence, promote, read_only, replica
// threads, semi-sync, clone, STOP GROUP_REPLICATION) is refused below the
// decision, at the connection (grInstance); the one write it allows is an
// operator's switchover, asked of the group with
// group_replication_set_as_primary (grSwitchover).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/grview"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/poller"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/store"
)

// ErrGroupReplicationNoWrite: a statement that would change a member of a
// replication: group group (fence, promote, read_only, replica threads,
// semi-sync, clone) was asked for; the group elects and fences itself, so
// failoverd refuses it before it reaches the server.
var ErrGroupReplicationNoWrite = errors.New("refused on a Group Replication member: the group elects and fences itself; failoverd only follows it")

// kindObserved is the history kind of a primary change the group made by
// itself and failoverd followed.
const kindObserved = "failover-observed"

// Timeline steps of a followed election (besides TimelineRequested,
// StepPublished and TimelineRouted).
const (
	// TimelinePrimaryLost is the first round whose verdict no longer named
	// the recorded primary (no quorum, unconfirmed, no primary, another
	// primary).
	TimelinePrimaryLost = "primary-lost"
	// TimelineSetAsPrimary is a switchover's set_as_primary returning with
	// the target elected, as the member it ran on read back.
	TimelineSetAsPrimary = "set-as-primary"
	// TimelineViewChanged is the first round whose quorate verdict named
	// the new primary: the group's view change as failoverd saw it.
	TimelineViewChanged = "view-changed"
)

// grSwitchoverWait is how long group_replication_set_as_primary lets the
// old primary's running transactions finish before it rolls them back;
// mysqlctl bounds the whole call to it plus the election.
const grSwitchoverWait = 30 * time.Second

// grMember is what the Group Replication loop reads and asks of a member
// (mysqlctl.Instance).
type grMember interface {
	GroupStatus(ctx context.Context) (mysqlctl.GroupStatus, error)
	SetAsPrimary(ctx context.Context, uuid string, timeout time.Duration) error
	ForceMembers(ctx context.Context, addrs []string, timeout time.Duration) error
	BootstrapGroup(ctx context.Context, timeout time.Duration) error
	StartGroupReplication(ctx context.Context, timeout time.Duration) error
}

var _ grMember = (*mysqlctl.Instance)(nil)

// grLoop is the Group Replication loop's state (guarded by group.mu), in
// memory but for the majority's denominator (grview.State.MaxViewSize),
// which the group's record keeps (record.gr): a restarted daemon starts
// without the rest of the history, but never with a smaller denominator
// than the one it left (persistDenominator, loadDenominator).
type grLoop struct {
	sites []grview.Site
	state grview.State
	// verdict is the last round's, at verdictAt; errs the sites whose
	// report could not be read then, with the error.
	verdict   grview.Verdict
	verdictAt time.Time
	errs      map[string]string
	settings  map[string][]string // site → its unsafe settings (grview.Settings.Unsafe)
	// lostAt is the first round whose verdict no longer named the recorded
	// primary (zero while it does).
	lostAt time.Time
	// switching is the operator's switchover asked of the group whose
	// election routing has not followed yet.
	switching *grSwitch
	// trigger is the member watch event that runs the next round (zero:
	// the poll), until that round ends (noteWatchEvent).
	trigger poller.WatchEvent
}

// grSwitch is a switchover asked of the group.
type grSwitch struct {
	target, by string
	steps      []store.TimelineStep
}

func newGRLoop(gc configs.Group) *grLoop {
	l := &grLoop{errs: map[string]string{}, settings: map[string][]string{}}
	for _, s := range gc.Sites {
		l.sites = append(l.sites, grview.Site{Name: s.Name, Addr: s.MySQL.Address})
	}
	return l
}

// grRound is one round of a Group Replication group: read every member,
// cross-check, decide, carry out (only ever a new epoch naming the
// group's primary). ctx is the leadership term's.
func (g *group) grRound(ctx context.Context, servingSince time.Time) {
	defer func() {
		g.mu.Lock()
		g.gr.trigger = poller.WatchEvent{}
		g.mu.Unlock()
	}()
	g.expireModes(ctx)
	reports, errs, settings, _ := g.readMembers(ctx)
	now := g.now()
	g.mu.Lock()
	l := g.gr
	v, next := grview.Evaluate(l.state, l.sites, reports, now)
	prev := l.verdict
	l.state, l.verdict, l.verdictAt, l.errs, l.settings = next, v, now, errs, settings
	g.servingSince = servingSince
	st := g.rec.Persisted
	// The history's first step: when the recorded primary stopped being
	// the quorate verdict's.
	if v.Reason == grview.ReasonQuorate && v.PrimarySite == st.ActiveSite {
		l.lostAt = time.Time{}
	} else if l.lostAt.IsZero() && st.ActiveSite != "" {
		l.lostAt = now
	}
	g.mu.Unlock()
	g.noteVerdict(prev, v)
	g.persistDenominator(ctx)
	g.carryOut(ctx, sitepair.DecideGroupReplication(v, st))
	// After the action: the readers follow the record it left.
	g.updateGroupReaders(v, reports)
	g.noteRouted(ctx)
}

// persistDenominator saves the majority's denominator into the group's
// record when the verdict grew it past the recorded one (or none is
// recorded yet), before the round's decision is carried out: a restarted
// daemon must never take a majority of fewer members than this one did,
// or a member left alone in a small view (its peers expelled, a second
// group) could win with the configured members' count. A failed save is
// retried by the next round (the record still holds the smaller one).
func (g *group) persistDenominator(ctx context.Context) {
	// An observing group writes nothing to the store: its denominator
	// stays in memory.
	if g.observing() {
		return
	}
	g.mu.Lock()
	n := g.gr.state.MaxViewSize
	next := g.rec
	grow := n > 0 && (next.gr == nil || n > next.gr.maxViewSize)
	g.mu.Unlock()
	if !grow {
		return
	}
	was := -1
	if next.gr != nil {
		was = next.gr.maxViewSize
	}
	next.gr = &grRecord{maxViewSize: n}
	if err := g.persist(ctx, next); err != nil {
		g.log.Warn("group.denominator_persist_failed", "denominator", n, "err", err)
		return
	}
	g.log.Info("group.denominator_persisted", "denominator", n, "previous", was)
}

// loadDenominator takes the denominator from the record just loaded: the
// record is the authority once it holds one (a human's force-members or
// bootstrap-group, run on whichever daemon led, lowered it there); without
// one (an older record, never saved) the loop keeps its own, which is 0,
// the configured members, in a daemon that just started.
func (g *group) loadDenominator(r record) {
	if g.gr == nil || r.gr == nil {
		return
	}
	g.gr.state.MaxViewSize = r.gr.maxViewSize
}

// noteWatchEvent makes ev, what a member's watch session saw (a new view,
// an election in the same view, a broken session), the trigger of the
// round that runs next, and logs it; events already queued behind it are
// logged and served by the same round.
func (g *group) noteWatchEvent(ev poller.WatchEvent, more <-chan poller.WatchEvent) {
	for {
		g.log.Info("group.watch_event", "site", ev.Site, "trigger", ev.Trigger, "detail", ev.Detail)
		g.mu.Lock()
		if g.gr != nil && g.gr.trigger.Trigger == "" {
			g.gr.trigger = ev
		}
		g.mu.Unlock()
		select {
		case ev = <-more:
		default:
			return
		}
	}
}

// triggerArgs are the log arguments naming what ran the round (l.trigger):
// a member's watch event, or the poll.
func (l *grLoop) triggerArgs() []any {
	if l.trigger.Trigger == "" {
		return []any{"trigger", "poll"}
	}
	return []any{"trigger", l.trigger.Trigger, "trigger_site", l.trigger.Site}
}

// readMembers reads every configured member's report at once, each
// bounded by the probe timeout: a hung member never holds up the others.
func (g *group) readMembers(ctx context.Context) ([]grview.Report, map[string]string, map[string][]string, map[string]mysqlctl.GroupStatus) {
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		reports  []grview.Report
		errs     = map[string]string{}
		settings = map[string][]string{}
		statuses = map[string]mysqlctl.GroupStatus{}
	)
	timeout := g.cfg.ProbeTimeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	for _, s := range g.cfg.Sites {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			var gs mysqlctl.GroupStatus
			err := g.servers.conns.do(rctx, s.Name, func(in Instance) error {
				m, ok := in.(grMember)
				if !ok {
					return fmt.Errorf("group status of %s: %w", s.Name, mysqlctl.ErrNotSupported)
				}
				var err error
				gs, err = m.GroupStatus(rctx)
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[s.Name] = err.Error()
				return
			}
			reports = append(reports, gs.Report(s.Name))
			statuses[s.Name] = gs
			if u := gs.Settings.Unsafe(); len(u) > 0 && gs.GroupName != "" {
				settings[s.Name] = u
			}
		}()
	}
	wg.Wait()
	// Configuration order, so a verdict never depends on which read
	// finished first.
	slices.SortFunc(reports, func(a, b grview.Report) int { return g.siteIndex(a.Site) - g.siteIndex(b.Site) })
	return reports, errs, settings, statuses
}

func (g *group) siteIndex(name string) int {
	return slices.IndexFunc(g.cfg.Sites, func(s configs.Site) bool { return s.Name == name })
}

// noteVerdict logs a verdict whose reason, view or primary changed.
func (g *group) noteVerdict(prev, v grview.Verdict) {
	if prev.Reason == v.Reason && prev.ViewID == v.ViewID && prev.Primary.ID == v.Primary.ID && slices.Equal(prev.Warnings, v.Warnings) {
		return
	}
	args := []any{"verdict", string(v.Reason), "view", v.ViewID, "view_size", v.ViewSize, "denominator", v.Denominator,
		"primary", v.PrimarySite, "primary_uuid", v.Primary.ID, "agreeing", v.Agreeing(), "previous", string(prev.Reason)}
	g.mu.Lock()
	args = append(args, g.gr.triggerArgs()...)
	g.mu.Unlock()
	if v.Quorate {
		g.log.Info("group.verdict", args...)
	} else {
		g.log.Warn("group.verdict", args...)
	}
	for _, w := range v.Warnings {
		g.log.Warn("group.warning", "warning", w)
	}
}

// followGroup carries out the decision naming the group's primary: a new
// epoch naming it, persisted and published (routing, the cache, DNS and
// hooks follow the published view), with its history entry
// (failover-observed, or the operator's switchover) and its metrics. It
// writes nothing to any member.
func (g *group) followGroup(ctx context.Context, d sitepair.Decision) error {
	now := g.now()
	g.mu.Lock()
	l := g.gr
	next := g.rec.advance(g.cfg.Name, sitepair.Apply(g.rec.Persisted, d, now), now)
	kind, by, steps := kindObserved, "", []store.TimelineStep(nil)
	if d.Reason == sitepair.ReasonGroupPrimaryElected {
		if sw := l.switching; sw != nil && sw.target == d.Target {
			kind, by, steps = kindSwitchover, sw.by, slices.Clone(sw.steps)
		} else if !l.lostAt.IsZero() {
			steps = []store.TimelineStep{{Step: TimelinePrimaryLost, At: l.lostAt}}
		}
		steps = append(steps, store.TimelineStep{Step: TimelineViewChanged, At: l.verdictAt}, store.TimelineStep{Step: StepPublished, At: now})
		next.LastFailoverAt, next.LastFailoverTarget, next.LastFailoverFrom = now, d.Target, d.From
		next.last = &lastFailover{kind: kind, epoch: next.Epoch}
		next.failovers = store.AppendFailover(next.failovers, store.FailoverRecord{ID: fmt.Sprintf("%s-%d", g.cfg.Name, next.Epoch), Kind: kind,
			From: d.From, To: d.Target, Epoch: next.Epoch, Reason: string(d.Reason), By: by, Outcome: store.OutcomeCompleted, EndedAt: now, Timeline: steps})
	}
	seen, trigger := l.verdictAt, l.triggerArgs()
	g.mu.Unlock()
	if err := g.persist(ctx, next); err != nil {
		return err
	}
	g.mu.Lock()
	if d.Reason == sitepair.ReasonGroupPrimaryElected {
		// noteRouted stamps the routed step once every follower follows.
		g.routing = fmt.Sprintf("%s-%d", g.cfg.Name, next.Epoch)
	}
	if l.switching != nil && l.switching.target == d.Target {
		l.switching = nil
	}
	l.lostAt = time.Time{}
	g.mu.Unlock()
	g.log.Warn("group.primary_followed", append([]any{"kind", kind, "from", d.From, "to", d.Target, "epoch", next.Epoch, "by", by,
		"seen_to_published_seconds", now.Sub(seen).Seconds()}, trigger...)...)
	if d.Reason == sitepair.ReasonGroupPrimaryElected {
		g.ev().GroupPrimaryFollowed(g.cfg.Name, kind, now.Sub(seen))
	}
	return nil
}

// grSwitchover carries out an operator's switchover of a Group Replication
// group: decided on the last verdict (sitepair.DecideGroupSwitchover),
// then asked of the group on the target itself with
// group_replication_set_as_primary, bounded by grSwitchoverWait plus the
// election. Routing follows once a quorate verdict names the target, in
// the round that runs right after this request.
func (g *group) grSwitchover(ctx context.Context, req request, st sitepair.Persisted, entry store.AuditEntry) error {
	g.mu.Lock()
	v := g.gr.verdict
	g.mu.Unlock()
	d, uuid := sitepair.DecideGroupSwitchover(v, st, req.target, entry.At)
	if req.answer != nil {
		*req.answer = d.Message
	}
	if d.Reason != sitepair.ReasonGroupSwitchover {
		err := fmt.Errorf("%w: switchover to %s: %s (%s)", ErrRefused, req.target, d.Message, d.Reason)
		if req.dryRun {
			return fmt.Errorf("%w: switchover to %s would be refused: %s (%s)", ErrRefused, req.target, d.Message, d.Reason)
		}
		g.log.Warn("switchover.refused", "target", req.target, "by", req.by, "reason", string(d.Reason), "message", d.Message)
		g.auditRefused(ctx, entry, err)
		return err
	}
	if req.dryRun {
		*req.answer = "would switch over: " + d.Message
		return nil
	}
	g.log.Warn("switchover.accepted", "target", req.target, "by", req.by, "uuid", uuid, "mode", "group_replication_set_as_primary")
	g.mu.Lock()
	g.gr.switching = &grSwitch{target: req.target, by: req.by, steps: []store.TimelineStep{{Step: TimelineRequested, At: entry.At}}}
	g.mu.Unlock()
	err := g.servers.conns.do(ctx, req.target, func(in Instance) error {
		m, ok := in.(grMember)
		if !ok {
			return fmt.Errorf("set as primary on %s: %w", req.target, mysqlctl.ErrNotSupported)
		}
		return m.SetAsPrimary(ctx, uuid, grSwitchoverWait)
	})
	if err != nil {
		g.mu.Lock()
		g.gr.switching = nil
		g.mu.Unlock()
		g.log.Error("switchover.failed", "target", req.target, "by", req.by, "err", err)
		err = fmt.Errorf("switchover to %s: group_replication_set_as_primary: %w (read `failoverd status`: the group may still elect it)", req.target, err)
		g.auditRefused(ctx, entry, err)
		return err
	}
	g.mu.Lock()
	if sw := g.gr.switching; sw != nil {
		sw.steps = append(sw.steps, store.TimelineStep{Step: TimelineSetAsPrimary, At: g.now()})
	}
	g.rec.audit = store.AppendAudit(g.rec.audit, entry)
	g.mu.Unlock()
	if k, ok := g.obs.(kicker); ok {
		k.Kick()
	}
	return nil
}

// grStatus is the Group Replication part of the group's status (nil for
// an async group).
func (g *group) grStatus() *status.GroupReplication {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gr == nil {
		return nil
	}
	l := g.gr
	v := l.verdict
	out := &status.GroupReplication{Verdict: string(v.Reason), HasQuorum: v.Quorate, GroupName: v.GroupName, ViewID: v.ViewID,
		ViewSize: v.ViewSize, Denominator: v.Denominator, MaxViewSize: l.state.MaxViewSize, Primary: v.Primary.ID, PrimarySite: v.PrimarySite,
		EvaluatedAt: l.verdictAt, GroupNames: slices.Clone(v.GroupNames), Warnings: slices.Clone(v.Warnings), Members: map[string]int{}}
	for s, n := range v.States {
		out.Members[string(s)] = n
	}
	if out.Denominator == 0 {
		out.Denominator = max(l.state.MaxViewSize, len(l.sites))
	}
	for _, sv := range v.Sites {
		out.Sites = append(out.Sites, status.GroupReplicationSite{Site: sv.Site, UUID: sv.UUID, State: string(sv.State), Role: string(sv.Role),
			ViewID: sv.ViewID, ViewSize: sv.ViewSize, Quorate: sv.Quorate, Standing: string(sv.Standing), Error: l.errs[sv.Site],
			UnsafeSettings: slices.Clone(l.settings[sv.Site])})
	}
	if len(v.GroupNames) > 1 {
		out.TwoGroups = true
	}
	if sw := l.switching; sw != nil {
		out.SwitchoverTo = sw.target
	}
	return out
}
