package daemon

// The failover history (failoverd history, GET /v1/groups/{g}/history).
// The action in flight stamps each step it reaches in its progress's
// timeline, on the daemon's clock, persisted with that step's own write (a
// step without one, e.g. the old primary's fence, with the next write).
// When a decision ends the action (its promotion committed, or a decision
// that clears it: the old primary re-asserted, another adopted, a newer
// revoke), commit moves it into the record's failovers, bounded by
// store.MaxFailovers. Steps reached after the promotion was committed
// (repointed, routed) are stamped on that record with a write of their own.
// Operator requests come from the audit.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/store"
)

// Timeline steps besides the failover sequence's Step* names (StepRevoked,
// StepOldPrimaryFenced, StepRelayDrained, StepPromotionRecorded,
// StepPublished, StepWritable, StepPromoted, StepRepointed). In the order
// an action reaches them: detected (or requested, cache-moved), revoked,
// old-primary-fenced, fenced, relay-drained, promotion-recorded, published,
// writable, promoted, repointed, routed.
const (
	// TimelineDetected is the decision to fail over (automatic failover).
	TimelineDetected = "detected"
	// TimelineRequested is an operator's switchover being accepted.
	TimelineRequested = "requested"
	// TimelineCacheMoved is a switchover's cache move, before its revoke.
	TimelineCacheMoved = "cache-moved"
	// TimelineFenced is a fence proof holding: the promotion begins (the
	// proof is the record's).
	TimelineFenced = "fenced"
	// TimelineRouted is every routing follower (Service selector, node
	// taints, DNS record, cache) following the new primary.
	TimelineRouted = "routed"
)

// promotionSteps are the steps a promotion reaches on its target: a new
// target (retarget) has reached none of them yet.
var promotionSteps = []string{StepRelayDrained, StepPromotionRecorded, StepPublished, StepWritable}

// actionStart is what the request starting a switchover knows before its
// revoke is committed: who asked, and the steps before the revoke.
type actionStart struct {
	by    string
	steps []store.TimelineStep
}

// reached tells whether timeline holds step.
func reached(timeline []store.TimelineStep, step string) bool {
	return slices.ContainsFunc(timeline, func(s store.TimelineStep) bool { return s.Step == step })
}

// stamped returns r with step reached at at in the timeline of the action
// in flight, unless it reached it already: the first time is kept, so a
// retried promotion neither moves a step nor grows the timeline.
func (r record) stamped(step string, at time.Time) record {
	if r.progress == nil || step == "" || reached(r.progress.timeline, step) {
		return r
	}
	p := *r.progress
	p.timeline = append(slices.Clone(p.timeline), store.TimelineStep{Step: step, At: at})
	r.progress = &p
	return r
}

// retargeted returns r without the promotion steps reached for the action's
// previous target.
func (r record) retargeted() record {
	if r.progress == nil {
		return r
	}
	p := *r.progress
	p.timeline = slices.DeleteFunc(slices.Clone(p.timeline), func(s store.TimelineStep) bool { return slices.Contains(promotionSteps, s.Step) })
	r.progress = &p
	return r
}

// chronicle returns r, which is prev moved on by d at now, with the history
// kept: an action prev had in flight that r no longer has ended (completed
// when r records its promotion, else abandoned by d), and an action r starts
// begins its timeline with start's steps and who asked.
func (r record) chronicle(prev record, d sitepair.Decision, now time.Time, start actionStart) record {
	if p := prev.progress; p != nil && prev.InFlight != nil && (r.progress == nil || r.progress.id != p.id) {
		r.failovers = store.AppendFailover(r.failovers, ended(prev, r, d, now))
	}
	if p := r.progress; p != nil && (prev.progress == nil || prev.progress.id != p.id) {
		np := *p
		np.timeline = slices.Clone(start.steps)
		np.by, np.reason = start.by, string(d.Reason)
		r.progress = &np
	}
	return r
}

// ended is the record of prev's action in flight, which next (moved on by
// d at now) no longer has.
func ended(prev, next record, d sitepair.Decision, now time.Time) store.FailoverRecord {
	p, f := prev.progress, prev.InFlight
	e := store.FailoverRecord{ID: p.id, Kind: kindFailover, From: f.From, To: f.To, RevokedEpoch: f.Epoch, Epoch: next.Epoch,
		Reason: p.reason, By: p.by, EndedAt: now, Timeline: slices.Clone(p.timeline)}
	if f.Planned {
		e.Kind = kindSwitchover
	}
	if next.InFlight == nil && next.LastFailoverTarget != "" && !next.LastFailoverAt.Equal(prev.LastFailoverAt) {
		e.Outcome, e.To = store.OutcomeCompleted, next.LastFailoverTarget
		e.Proof, e.PromotionGTID = string(next.LastFailoverProof), next.PromotionGTID.String()
		e.FenceConfirmation = confirmationOut(next.LastFailoverConfirmation)
		e.Timeline = append(e.Timeline, store.TimelineStep{Step: StepPromoted, At: now})
		return e
	}
	e.Outcome, e.Why = store.OutcomeAbandoned, fmt.Sprintf("%s: %s", d.Reason, d.Message)
	return e
}

// stampedEnded returns r with step reached at at in the timeline of the
// ended action id, in time order (routing may finish before the replicas
// were repointed), and whether that changed anything (not when there is no
// such action or it reached step already).
func (r record) stampedEnded(id, step string, at time.Time) (record, bool) {
	i := slices.IndexFunc(r.failovers, func(f store.FailoverRecord) bool { return f.ID == id })
	if i < 0 || reached(r.failovers[i].Timeline, step) {
		return r, false
	}
	out := slices.Clone(r.failovers)
	tl := out[i].Timeline
	j := len(tl)
	for j > 0 && tl[j-1].At.After(at) {
		j--
	}
	out[i].Timeline = slices.Insert(slices.Clone(tl), j, store.TimelineStep{Step: step, At: at})
	r.failovers = out
	return r, true
}

// startOf is how an action d starts at now (called with g.mu held): the
// switchover request's steps, or the decision to fail over.
func (g *group) startOf(d sitepair.Decision, now time.Time) actionStart {
	if d.Planned && g.starting != nil {
		return *g.starting
	}
	at := g.decidedAt
	if at.IsZero() || at.After(now) {
		at = now
	}
	first := TimelineDetected
	if d.Planned {
		first = TimelineRequested
	}
	return actionStart{steps: []store.TimelineStep{{Step: first, At: at}}}
}

// stamp records step reached now by the action in flight, in memory: the
// action's next write persists it.
func (g *group) stamp(step string) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rec = g.rec.stamped(step, now)
}

// stampEnded records step reached at at by the ended action id and saves
// it (best effort: the history only). Only a daemon that still holds what
// it last wrote saves.
func (g *group) stampEnded(ctx context.Context, id, step string, at time.Time) {
	g.mu.Lock()
	_, changed := g.rec.stampedEnded(id, step, at)
	g.mu.Unlock()
	if !changed {
		return
	}
	// Guards against a deposed leader overwriting the state another daemon
	// wrote since, for a line of history.
	err := g.checkStore(ctx)
	if err == nil {
		g.mu.Lock()
		next, _ := g.rec.stampedEnded(id, step, at)
		g.mu.Unlock()
		err = g.persist(ctx, next)
	}
	if err != nil {
		g.log.Warn("history.write_failed", "id", id, "step", step, "err", err)
	}
}

// noteRouted stamps the action this daemon promoted routed once every
// routing follower followed the epoch naming its target. Only that action:
// an older record (loaded, or promoted before followers were configured)
// would be stamped with the time this daemon's followers caught up, not
// its routing's.
func (g *group) noteRouted(ctx context.Context) {
	id, epoch, ok := g.awaitedRouting()
	if !ok {
		return
	}
	if at, ok := g.follow.routedAt(epoch); ok {
		g.stampEnded(ctx, id, TimelineRouted, at)
	}
}

// awaitedRouting is the action whose routing noteRouted awaits and the
// epoch naming its target; one already routed, or no longer recorded, is
// forgotten.
func (g *group) awaitedRouting() (string, uint64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.routing == "" {
		return "", 0, false
	}
	i := slices.IndexFunc(g.rec.failovers, func(f store.FailoverRecord) bool { return f.ID == g.routing })
	if i < 0 || reached(g.rec.failovers[i].Timeline, TimelineRouted) {
		g.routing = ""
		return "", 0, false
	}
	return g.routing, g.rec.failovers[i].Epoch, true
}

// History implements api.Control: the group's failovers and switchovers
// and its operator requests, as the leader holds them (a follower's record
// is only what it loaded at startup).
func (d *Daemon) History(group string) (status.History, error) {
	g := d.group(group)
	if g == nil {
		return status.History{}, fmt.Errorf("%w: unknown group %s", api.ErrNotFound, group)
	}
	if !d.isLeader() {
		return status.History{}, fmt.Errorf("%w: ask the leading daemon for the history", api.ErrNotLeader)
	}
	return g.history(d.opts.Clock()), nil
}

// history is the group's history as of now: the failovers and switchovers
// that ended, the one in flight, the operator requests, merged by time (a
// request before the action it started).
func (g *group) history(now time.Time) status.History {
	g.mu.Lock()
	stored := toStore(g.cfg.Name, g.rec)
	g.mu.Unlock()
	h := status.History{Group: g.cfg.Name, At: now, Entries: []status.HistoryEntry{}}
	for _, e := range stored.Audit {
		h.Entries = append(h.Entries, status.HistoryEntry{At: e.At,
			Action: &status.AuditEntry{At: e.At, Action: e.Action, Site: e.Site, By: e.By, Result: e.Result}})
	}
	for _, f := range stored.Failovers {
		h.Entries = append(h.Entries, failoverEntry(f))
	}
	if f := stored.InFlight; f != nil {
		e := failoverEntry(store.FailoverRecord{ID: f.ID, Kind: f.Kind, From: f.From, To: f.To, RevokedEpoch: f.RevokedEpoch,
			Reason: f.Reason, By: f.By, PromotionGTID: f.PromotionGTID, Timeline: f.Timeline})
		e.Failover.Outcome = status.OutcomeInFlight
		if e.At.IsZero() {
			e.At = f.StartedAt
		}
		h.Entries = append(h.Entries, e)
	}
	slices.SortStableFunc(h.Entries, func(a, b status.HistoryEntry) int { return a.At.Compare(b.At) })
	return h
}

// failoverEntry is f as a history entry, with its durations.
func failoverEntry(f store.FailoverRecord) status.HistoryEntry {
	out := &status.FailoverRecord{ID: f.ID, Kind: f.Kind, From: f.From, To: f.To, RevokedEpoch: f.RevokedEpoch, Epoch: f.Epoch,
		Reason: f.Reason, By: f.By, Outcome: f.Outcome, EndedAt: f.EndedAt, Why: f.Why, Proof: f.Proof,
		PromotionGTID: f.PromotionGTID, Timeline: []status.TimelineStep{}}
	if c := f.FenceConfirmation; c != nil {
		out.ConfirmedBy = c.By
	}
	at := map[string]time.Time{}
	for i, s := range f.Timeline {
		step := status.TimelineStep{Step: s.Step, At: s.At}
		if i > 0 {
			step.SincePreviousSeconds = s.At.Sub(f.Timeline[i-1].At).Seconds()
			step.SinceStartSeconds = s.At.Sub(f.Timeline[0].At).Seconds()
		}
		out.Timeline = append(out.Timeline, step)
		at[s.Step] = s.At
	}
	start := f.EndedAt
	if n := len(f.Timeline); n > 0 {
		start = f.Timeline[0].At
		out.TookSeconds = f.Timeline[n-1].At.Sub(start).Seconds()
	}
	revoked, ok1 := at[StepRevoked]
	writable, ok2 := at[StepWritable]
	if ok1 && ok2 {
		out.RevokedToWritableSeconds = writable.Sub(revoked).Seconds()
	}
	return status.HistoryEntry{At: start, Failover: out}
}
