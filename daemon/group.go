package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/poller"
	"github.com/failoverd/failoverd/readers"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/store"
)

// Observations is the group's view of its sites, in decision form. The
// poller-backed implementation fills everything but FencedEpoch, which the
// group adds from its own record of fences.
type Observations interface {
	Observed() sitepair.Observed
	// Settled reports whether every site has a probe that started at or
	// after t, so a decision cannot rest on what a site looked like before
	// our last action changed it.
	Settled(t time.Time) bool
}

// group runs one group's loop: observe → decide → act → persist → publish
// (this file). A failover's decisions run as steps of its sequence
// (failover.go) on the per-server primitives (servers.go); operator
// requests are handled between rounds (requests.go); the persisted record
// is loaded and saved in persist.go. Groups share nothing but the store and
// the publisher.
type group struct {
	cfg     configs.Group
	flavor  gtid.Flavor
	policy  sitepair.Policy
	store   store.Store
	servers *servers
	pub     *publisher
	follow  *handoff // routing and cache, never awaited by a promotion
	// readFollow moves the reader targets (reader Service, reader DNS
	// record) to the reader set; nil without readers.kubernetes/dns.
	readFollow *handoff
	// sidecars holds the sidecars' latest reports (lease proof input).
	sidecars *sidecars
	events   Events
	identity string // this daemon's, recorded with every save
	obs      Observations
	now      func() time.Time
	log      *slog.Logger

	// wakeAt wakes the loop at a decision's RecheckAt (a sidecar lease
	// deadline) instead of its next tick; wakeAtTimer is the armed one.
	// Both are the loop goroutine's.
	wakeAt      chan struct{}
	wakeAtTimer *time.Timer

	// actionTimeout bounds one action (a whole promotion sequence).
	actionTimeout time.Duration
	// progress is the loop's progress (progress.go): /healthz and the
	// systemd watchdog read it.
	progress loopProgress
	// pace runs an action's parallel parts and its bounded waits.
	pace pacer
	// failpointHook, when set, is called after each persisted failover
	// step (the Step* names); the crash tests make it SIGKILL the process.
	failpointHook func(step string)

	mu  sync.Mutex // guards the fields below, read by status
	rec record     // the persisted record, as last loaded or saved
	// servingSince is when the leadership term of the last decision began
	// (the readiness check decides as that decision did).
	servingSince time.Time
	fenced       map[string]uint64 // site → epoch at which its fence was read back
	last         sitepair.Decision
	decidedAt    time.Time // when last was decided
	lastErr      error
	barrier      time.Time // decisions wait for probes started after it
	requests     chan request
	hooks        notifier                // event hooks; nil without any
	cacheMove    *status.CacheSwitchover // the last planned switchover's cache move
	reclones     map[string]bool         // sites whose reclone job runs in this daemon
	recloned     chan recloneResult      // finished reclone jobs
	// restarts are the replicas a re-assert may still have to start again
	// once they are seen back (restartPendingReplicas).
	restarts pendingRestarts
	// starting is the switchover request being carried out: who asked and
	// its steps before the revoke, for its history (history.go).
	starting *actionStart
	// routing is the action this daemon promoted whose routing the history
	// awaits ("" for none; noteRouted).
	routing string
	// readers is the read-routing state (readers.enabled), in memory only.
	readers readers.State
	// readerRounds counts the counted reader rounds since the state started
	// over; readerSetAt is when the published set last changed.
	readerRounds int
	readerSetAt  time.Time
	// readSites are the last round's observations, noReads the sites the
	// published view withholds from reads (publish.go).
	readSites []sitepair.SiteObservation
	noReads   map[string]string

	// The group's life in the daemon (lifecycle.go): ctx ends its
	// observations, loop and routing; retire asks the loop to return
	// between rounds for a reload; loopDone and followDone close when the
	// loop and the routing handoff returned; gone closes once the group
	// is closed for good (a request handed to it is answered then).
	ctx        context.Context
	stop       context.CancelFunc
	retire     chan chan string
	loopDone   chan struct{}
	followDone chan struct{}
	gone       chan struct{}
	// shadow is an observing group's record with the record-only decisions
	// it would have made applied (mode.go); in memory only, never persisted
	// or published. Nil for an active group.
	shadow *sitepair.Persisted
	// gr is the Group Replication loop's state (grloop.go); nil for an
	// async group.
	gr *grLoop
	// recheck is the pending early probe of a failover waiting for its
	// target to catch up (recheckCatchUp); nil when none is pending.
	recheck *time.Timer
}

// pendingRestarts are the replicas a re-assert of primary at epoch has not
// yet seen back: each is restarted once it answers with its replication
// stopped, or dropped once seen otherwise.
type pendingRestarts struct {
	primary string
	epoch   uint64
	sites   []string
}

// kicker asks for a probe of every site now (the poller-backed Observations).
type kicker interface{ Kick() }

// waker signals when a new observation arrived (the poller-backed Observations).
type waker interface{ Woken() <-chan struct{} }

// watchEventer delivers what the watch sessions of a replication: group
// group's members saw: a new view, an election in the same view, a broken
// session (the poller-backed Observations; a nil channel for an async
// group).
type watchEventer interface {
	WatchEvents() <-chan poller.WatchEvent
}

func flavorOf(engine string) gtid.Flavor {
	if engine == configs.EngineMariaDB {
		return gtid.MariaDB
	}
	return gtid.MySQL
}

// run is the group's loop until ctx ends. lead gates every action and gives
// the leadership term's context every action derives from.
func (g *group) run(ctx context.Context, lead func() (context.Context, time.Time, bool)) {
	// Decide a few times per poll interval so a decision follows the probe
	// that enables it closely; actions stay paced by the probes themselves
	// (the barrier), so this never acts more often than sites are observed.
	every := g.cfg.PollInterval / 4
	var woken <-chan struct{}
	if w, ok := g.obs.(waker); ok {
		woken = w.Woken()
	}
	var events <-chan poller.WatchEvent
	if g.gr != nil {
		// A Group Replication group's round reads the members itself, on
		// their watch sessions' events (a new view, a broken session), and
		// once a poll interval as the backstop; the probes' observations
		// are not its input, so they do not wake it.
		every, woken = g.cfg.PollInterval, nil
		if w, ok := g.obs.(watchEventer); ok {
			events = w.WatchEvents()
		}
	}
	tick := time.NewTicker(max(every, 50*time.Millisecond))
	defer tick.Stop()
	g.wakeAt = make(chan struct{}, 1)
	defer func() {
		if g.wakeAtTimer != nil {
			g.wakeAtTimer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case reply := <-g.retire:
			// Rebuilding a group between two steps of its failover would
			// hand the sequence to a loop built for other sites: refused
			// while busy, and the reload waits.
			why := g.busy(lead)
			reply <- why
			if why == "" {
				return
			}
		case req := <-g.requests:
			req.reply <- g.handle(req, lead)
		case res := <-g.recloned:
			if lctx, _, ok := lead(); ok && ctx.Err() == nil {
				g.finishReclone(lctx, res)
			} else {
				g.mu.Lock()
				delete(g.reclones, res.site) // the next leader records it interrupted
				g.mu.Unlock()
			}
		case <-tick.C:
		case <-woken:
			// A probe just landed: decide on it now (a promotion waits for
			// the probes its revoke asked for, not for the next tick).
		case <-g.wakeAt:
			// A lease deadline passed: the lease-expired proof holds now.
		case ev := <-events:
			g.noteWatchEvent(ev, events)
		}
		if lctx, since, ok := lead(); ok && ctx.Err() == nil {
			g.round(lctx, since)
		}
		// A loop blocked in any step above past its bound shows in
		// /healthz and stops the watchdog's pings (progress.go).
		g.progress.beat(g.now())
	}
}

// round decides once, on settled observations, and carries the decision out.
// ctx is the leadership term's context.
func (g *group) round(ctx context.Context, servingSince time.Time) {
	// A Group Replication group follows the group's own elections: it
	// never runs the async decisions, which would fence and promote.
	if g.gr != nil {
		g.grRound(ctx, servingSince)
		return
	}
	// A pause or hold that ran out is dropped first: its end is what the
	// operator asked for when setting it.
	g.expireModes(ctx)
	if r, ok := g.decide(ctx, servingSince); ok {
		g.armRecheck(r.Decision.RecheckAt)
		g.carryOut(ctx, r.Decision)
		g.updateReaders(r.Observed)
		g.refreshNoReads(r.Observed)
	}
	g.restartPendingReplicas(ctx)
	g.noteRouted(ctx)
}

// armRecheck wakes the loop just after at (zero: nothing to arm): a
// failover waiting for the old primary's sidecar lease to run out promotes
// at the deadline, not up to a tick later.
func (g *group) armRecheck(at time.Time) {
	if at.IsZero() || g.wakeAt == nil {
		return
	}
	d := at.Sub(g.now())
	if d <= 0 {
		return // due already: this round decides on it
	}
	if g.wakeAtTimer != nil {
		g.wakeAtTimer.Stop()
	}
	ch := g.wakeAt
	g.wakeAtTimer = time.AfterFunc(d+time.Millisecond, func() {
		select {
		case ch <- struct{}{}:
		default: // a recheck is already pending
		}
	})
}

// Round is one decision of a group's loop with its inputs.
type Round struct {
	Observed sitepair.Observed
	State    sitepair.Persisted
	Decision sitepair.Decision
}

// decide is a round's decision, not yet carried out; ok is false while the
// observations are not settled since the last action.
func (g *group) decide(ctx context.Context, servingSince time.Time) (r Round, ok bool) {
	st := g.decisionState()
	g.mu.Lock()
	barrier := g.barrier
	g.mu.Unlock()
	// Deciding on probes taken before our last action would, for instance,
	// see a just-promoted primary as still read-only and act again.
	if !g.obs.Settled(barrier) {
		return Round{}, false
	}
	// A reclone no daemon runs any more must not look like one running.
	// (Not recorded by an observing group: it writes nothing to the store,
	// and its decisions leave a recloning site out all the same.)
	if len(st.Recloning) > 0 && !g.observing() {
		g.interruptedReclones(ctx)
		g.mu.Lock()
		st = g.rec.Persisted
		g.mu.Unlock()
	}
	o := g.observed(servingSince)
	g.mu.Lock()
	g.servingSince = servingSince
	g.mu.Unlock()
	return Round{Observed: o, State: st, Decision: sitepair.Decide(o, st, g.policy, g.now())}, true
}

// observed returns the current observations with the fences we confirmed
// and what the sidecars reported; servingSince is when this daemon's
// current term began.
func (g *group) observed(servingSince time.Time) sitepair.Observed {
	o := g.obs.Observed()
	o.ServingSince = servingSince
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range o.Sites {
		o.Sites[i].FencedEpoch = g.fenced[o.Sites[i].Name]
		o.Sites[i].Sidecar = g.sidecars.observation(o.Sites[i].Name)
	}
	return o
}

func (g *group) carryOut(ctx context.Context, d sitepair.Decision) {
	g.mu.Lock()
	changed := d.Reason != g.last.Reason || d.Action != g.last.Action || d.Target != g.last.Target
	g.last, g.decidedAt = d, g.now()
	g.mu.Unlock()
	// Prevents an observing group from changing anything: no action, store
	// write, hook or failover step (it logs what it would do instead).
	if g.observeOnly(ctx, d, changed) {
		return
	}
	if changed {
		g.logDecision(ctx, d)
	}
	if d.Action == sitepair.None || d.Action == sitepair.Alert {
		if changed {
			g.fireAfter(d, nil, true)
		}
		g.recheckCatchUp(d)
		return
	}
	actx, cancel := context.WithTimeout(ctx, g.actionTimeout)
	defer cancel()
	// An action blocked until its deadline is not a wedged loop.
	g.progress.within(g.now().Add(g.actionTimeout))
	g.fireBefore(d)
	err := g.act(actx, ctx, d)
	g.fireAfter(d, err, changed)
	g.mu.Lock()
	g.lastErr = err
	g.barrier = g.now()
	g.mu.Unlock()
	// The next decision needs probes taken after this action: ask for them
	// now rather than waiting up to a poll interval (steps run back to back).
	if k, ok := g.obs.(kicker); ok {
		k.Kick()
	}
	if err != nil {
		g.log.Error("action.failed", "action", string(d.Action), "target", d.Target, "err", err)
		if d.Action == sitepair.Promote || d.Action == sitepair.RevokeEpoch {
			g.failoverDone(d, err)
		}
	} else if d.Action == sitepair.FenceSites && (d.Reason == sitepair.ReasonSplitBrainKeepPromoted || d.Reason == sitepair.ReasonSplitBrainKeepWinner) {
		g.ev().SplitBrainResolved(g.cfg.Name)
	}
	// Another writer moved the state on: decide again from what it wrote,
	// never retry a write based on what we had.
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrEpochRegression) || errors.Is(err, store.ErrInFlightMismatch) {
		if lerr := g.load(ctx); lerr != nil {
			g.log.Error("state.reload_failed", "err", lerr)
		}
	}
}

// logDecision logs d, a decision that differs from the previous one.
func (g *group) logDecision(ctx context.Context, d sitepair.Decision) {
	level := slog.LevelInfo
	if d.Action == sitepair.Alert {
		level = slog.LevelWarn
	}
	g.log.Log(ctx, level, "decision", "action", string(d.Action), "reason", string(d.Reason),
		"target", d.Target, "fence", d.Fence, "proof", string(d.FenceProof), "epoch", d.Epoch, "detection", string(d.Detection.Code), "message", d.Message)
	if w := d.Withheld; w != nil {
		// What a paused group would have done: the operator's to judge.
		g.log.Warn("pause.withheld", "action", string(w.Action), "reason", string(w.Reason), "target", w.Target,
			"fence", w.Fence, "epoch", w.Epoch, "message", w.Message)
	}
}

// act carries out one decision within ctx; term is the leadership term's
// context, for work that outlives the action (a reclone's copy). A
// failover's decisions run as steps of its sequence (failover.go).
func (g *group) act(ctx, term context.Context, d sitepair.Decision) error {
	if g.gr != nil {
		// Prevents failoverd from fencing, promoting or repointing a member
		// of a Group Replication group: it only ever follows the group.
		if d.Action != sitepair.AdoptPrimary {
			return fmt.Errorf("%s (%s): %w", d.Action, d.Reason, ErrGroupReplicationNoWrite)
		}
		return g.followGroup(ctx, d)
	}
	switch d.Action {
	case sitepair.RecloneSite:
		return g.recloneByPolicy(ctx, term, d)
	case sitepair.AdoptPrimary, sitepair.MarkDiverged, sitepair.ClearDiverged, sitepair.HaltFailover:
		return g.commit(ctx, d, "", "")
	case sitepair.RevokeEpoch:
		return g.failover(d).revoke(ctx)
	case sitepair.FenceSites:
		return g.failover(d).fence(ctx)
	case sitepair.Promote:
		return g.failover(d).promote(ctx)
	case sitepair.ReassertPrimary:
		return g.reassert(ctx, d)
	case sitepair.Rejoin:
		if err := g.servers.repoint(ctx, d.Target, d.Repoint); err != nil {
			return err
		}
		if err := g.servers.semiSync(ctx, d.Target, d.Repoint); err != nil {
			g.log.Warn("semisync.reconfigure_failed", "err", err)
		}
		return nil
	case sitepair.StopReplicaIO:
		return g.failover(d).stopIO(ctx, d.Detach)
	case sitepair.DisableSemiSyncSource:
		return g.servers.sourceOff(ctx, d.SemiSyncOff)
	}
	return fmt.Errorf("unknown action %q", d.Action)
}

// Catch-up rechecks: a failover waiting for its target to receive the
// fenced old primary's last transactions (ReasonAwaitCatchUp) asks for
// probes again after a quarter of the time it has waited so far, within
// [catchUpRecheckMin, PollInterval/4]: the transactions are usually in
// flight for milliseconds, and without an early probe the promotion waited
// for the target's next regular one, up to a poll interval (issue 32: the
// 0.5-0.7 s switchovers). The growing pause keeps a target far behind from
// being probed at a busy rate for its whole maxLagWait.
const catchUpRecheckMin = 5 * time.Millisecond

// recheckDelay is the pause before the next catch-up recheck of a failover
// revoked waited ago.
func recheckDelay(waited, pollInterval time.Duration) time.Duration {
	return max(min(waited/4, pollInterval/4), catchUpRecheckMin)
}

// recheckCatchUp schedules the early probes of a failover waiting for its
// target to catch up (d, a None decision), one at a time; other decisions
// schedule nothing.
func (g *group) recheckCatchUp(d sitepair.Decision) {
	k, ok := g.obs.(kicker)
	if d.Reason != sitepair.ReasonAwaitCatchUp || !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.recheck != nil || g.rec.InFlight == nil {
		return // one is pending: its probes wake the next round
	}
	delay := recheckDelay(g.now().Sub(g.rec.InFlight.RevokedAt), g.cfg.PollInterval)
	g.recheck = time.AfterFunc(delay, func() {
		g.mu.Lock()
		g.recheck = nil
		g.mu.Unlock()
		k.Kick()
	})
}
