package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/view"
)

// ErrRefused is wrapped by errors of operator requests the group refuses
// (the API answers 409 with the message).
var ErrRefused = api.ErrRefused

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

// group runs one group's loop: observe → decide → act → persist → publish.
// Groups share nothing but the store and the publisher.
type group struct {
	cfg    configs.Group
	flavor gtid.Flavor
	policy sitepair.Policy
	store  store.Store
	exec   *executor
	pub    *publisher
	follow *handoff // routing and cache, never awaited by a promotion
	// sidecars holds the sidecars' latest reports (lease proof input).
	sidecars *sidecars
	events   Events
	identity string // this daemon's, recorded with every save
	obs      Observations
	now      func() time.Time
	log      *slog.Logger

	// actionTimeout bounds one action (a whole promotion sequence).
	actionTimeout time.Duration
	// pause, when set (the harness), is called by waitFor instead of
	// sleeping (the harness runs the rest of its world once), and an
	// action's parallel parts run one after another (see concurrently).
	pause func()

	mu        sync.Mutex // guards the fields below, read by status
	stored    store.GroupState
	state     sitepair.Persisted
	fenced    map[string]uint64 // site → epoch at which its fence was read back
	last      sitepair.Decision
	decidedAt time.Time // when last was decided
	lastErr   error
	barrier   time.Time // decisions wait for probes started after it
	requests  chan request
	hooks     notifier                // event hooks; nil without any
	cacheMove *status.CacheSwitchover // the last planned switchover's cache move
	reclones  map[string]bool         // sites whose reclone job runs in this daemon
	recloned  chan recloneResult      // finished reclone jobs
	// restarts are the replicas a re-assert may still have to start again
	// once they are seen back (restartPendingReplicas).
	restarts pendingRestarts
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

// request is an operator action handed to the loop (one action at a time).
type request struct {
	kind   string // kindSwitchover, kindAcknowledge, kindConfirmFence or kindReclone
	target string // the switchover's target, the site whose fence is confirmed or to reclone
	token  string // the reclone's token
	force  bool   // a switchover within the failover cooldown
	by     string // who asked (for the history)
	reply  chan error
}

// Operator request kinds besides kindSwitchover.
const (
	kindAcknowledge  = store.AuditAcknowledge
	kindConfirmFence = store.AuditConfirmFence
)

func flavorOf(engine string) gtid.Flavor {
	if engine == configs.EngineMariaDB {
		return gtid.MariaDB
	}
	return gtid.MySQL
}

// load reads the persisted state. A group that was never saved starts at
// epoch 0 with no active site: the first decision adopts the observed
// primary rather than trusting in-memory defaults.
func (g *group) load(ctx context.Context) error {
	st, err := g.store.Load(ctx, g.cfg.Name)
	if err != nil {
		return fmt.Errorf("load state of group %s from %s: %w", g.cfg.Name, g.store.Describe(), err)
	}
	p, err := toPersisted(st, g.flavor)
	if err != nil {
		return fmt.Errorf("load state of group %s from %s: %w", g.cfg.Name, g.store.Describe(), err)
	}
	if p.InFlight != nil {
		// The revoke time was written by another process (or another
		// leader) on its own clock: measure every wait from ours.
		p.InFlight.RevokedAt = later(p.InFlight.RevokedAt, g.now())
	}
	g.mu.Lock()
	g.stored, g.state = st, p
	g.mu.Unlock()
	g.publish()
	g.log.Info("state.loaded", "store", g.store.Describe(), "exists", st.Exists,
		"epoch", st.Epoch, "active_site", st.ActiveSite, "in_flight", st.InFlight != nil)
	return nil
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

// round decides once, on settled observations, and carries the decision out.
// ctx is the leadership term's context.
func (g *group) round(ctx context.Context, servingSince time.Time) {
	if r, ok := g.decide(ctx, servingSince); ok {
		g.carryOut(ctx, r.Decision)
	}
	g.restartPendingReplicas(ctx)
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
	g.mu.Lock()
	st, barrier := g.state, g.barrier
	g.mu.Unlock()
	// Deciding on probes taken before our last action would, for instance,
	// see a just-promoted primary as still read-only and act again.
	if !g.obs.Settled(barrier) {
		return Round{}, false
	}
	// A reclone no daemon runs any more must not look like one running.
	if len(st.Recloning) > 0 {
		g.interruptedReclones(ctx)
		g.mu.Lock()
		st = g.state
		g.mu.Unlock()
	}
	o := g.observed(servingSince)
	return Round{Observed: o, State: st, Decision: sitepair.Decide(o, st, g.policy, g.now())}, true
}

func (g *group) carryOut(ctx context.Context, d sitepair.Decision) {
	g.mu.Lock()
	changed := d.Reason != g.last.Reason || d.Action != g.last.Action || d.Target != g.last.Target
	g.last, g.decidedAt = d, g.now()
	g.mu.Unlock()
	if changed {
		level := slog.LevelInfo
		if d.Action == sitepair.Alert {
			level = slog.LevelWarn
		}
		g.log.Log(ctx, level, "decision", "action", string(d.Action), "reason", string(d.Reason),
			"target", d.Target, "fence", d.Fence, "proof", string(d.FenceProof), "epoch", d.Epoch, "message", d.Message)
	}
	if d.Action == sitepair.None || d.Action == sitepair.Alert {
		if changed {
			g.fireAfter(d, nil, true)
		}
		return
	}
	actx, cancel := context.WithTimeout(ctx, g.actionTimeout)
	defer cancel()
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

// act carries out one decision within ctx; term is the leadership term's
// context, for work that outlives the action (a reclone's copy).
func (g *group) act(ctx, term context.Context, d sitepair.Decision) error {
	switch d.Action {
	case sitepair.RecloneSite:
		return g.recloneByPolicy(ctx, term, d)
	case sitepair.AdoptPrimary, sitepair.MarkDiverged, sitepair.ClearDiverged, sitepair.HaltFailover:
		return g.commit(ctx, d, "", "")
	case sitepair.RevokeEpoch:
		return g.revoke(ctx, d)
	case sitepair.FenceSites:
		err := g.fenceSites(ctx, d.Fence)
		g.mu.Lock()
		inf := g.state.InFlight
		g.mu.Unlock()
		if inf != nil && inf.OperatorConfirmed != nil && slices.Contains(d.Fence, inf.From) {
			// The old primary came back: a human's confirmation that it was
			// dead no longer holds, whether or not this fence worked.
			if cerr := g.commit(ctx, d, "", ""); cerr != nil {
				return errors.Join(err, cerr)
			}
		}
		return err
	case sitepair.Promote:
		return g.promote(ctx, d)
	case sitepair.ReassertPrimary:
		if err := g.makeWritable(ctx, d.Target); err != nil {
			return fmt.Errorf("re-assert %s: %w", d.Target, err)
		}
		if err := g.commit(ctx, d, "", ""); err != nil {
			return err
		}
		// A total loss's replicas may come back after the re-assert: each is
		// restarted when seen back (restartPendingReplicas, every round).
		var others []string
		for _, site := range g.cfg.Sites {
			if site.Name != d.Target {
				others = append(others, site.Name)
			}
		}
		g.mu.Lock()
		g.restarts = pendingRestarts{primary: d.Target, epoch: d.Epoch, sites: others}
		g.mu.Unlock()
		g.restartPendingReplicas(ctx)
		return nil
	case sitepair.Rejoin:
		if err := g.exec.repoint(ctx, d.Target, d.Repoint); err != nil {
			return err
		}
		if err := g.exec.semiSync(ctx, d.Target, d.Repoint); err != nil {
			g.log.Warn("semisync.reconfigure_failed", "err", err)
		}
		return nil
	case sitepair.StopReplicaIO:
		return g.stopIO(ctx, d.Detach)
	}
	return fmt.Errorf("unknown action %q", d.Action)
}

// commit applies d to the persisted state, saves it durably and publishes
// the new view. step/promotion record the executor's progress of an
// in-flight failover.
func (g *group) commit(ctx context.Context, d sitepair.Decision, step, promotion string) error {
	now := g.now()
	g.mu.Lock()
	next := sitepair.Apply(g.state, d, now)
	prev := g.stored
	g.mu.Unlock()
	return g.save(ctx, next, prev, now, step, promotion)
}

func (g *group) save(ctx context.Context, next sitepair.Persisted, prev store.GroupState, now time.Time, step, promotion string) error {
	st := fromPersisted(g.cfg.Name, next, prev, now)
	st.UpdatedBy = g.identity
	if st.InFlight != nil && step != "" {
		st.InFlight.Step = step
		st.InFlight.StepDone = true
		if promotion != "" {
			st.InFlight.PromotionGTID = promotion
		}
	}
	if err := g.store.Save(ctx, st); err != nil {
		return fmt.Errorf("persist group %s: %w", g.cfg.Name, err)
	}
	g.mu.Lock()
	g.stored, g.state = st, next
	g.mu.Unlock()
	g.publish()
	return nil
}

// step records progress of the in-flight failover without changing the
// decision state. It first checks that this daemon still leads and that the
// store still holds what it last wrote.
func (g *group) step(ctx context.Context, name, promotion string) error {
	if err := g.checkStore(ctx); err != nil {
		return err
	}
	g.mu.Lock()
	st, prev := g.state, g.stored
	g.mu.Unlock()
	if err := g.save(ctx, st, prev, g.now(), name, promotion); err != nil {
		return err
	}
	g.failpoint(name)
	return nil
}

// ErrSuperseded means the store holds a state this daemon did not write (a
// newer epoch or another in-flight failover): another daemon acted, so this
// one stops the action and reloads.
var ErrSuperseded = errors.New("state changed under this daemon")

// checkStore stops an action at a step boundary when leadership was lost
// (ctx derives from the term) or the persisted state moved on without us.
func (g *group) checkStore(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("group %s: before the next step: %w", g.cfg.Name, err)
	}
	cur, err := g.store.Load(ctx, g.cfg.Name)
	if err != nil {
		return fmt.Errorf("group %s: re-read state before the next step: %w", g.cfg.Name, err)
	}
	g.mu.Lock()
	mine := g.stored
	g.mu.Unlock()
	if cur.Epoch != mine.Epoch || inFlightID(cur) != inFlightID(mine) {
		// Guards against a deposed leader finishing a failover another
		// daemon has taken over or ended.
		if lerr := g.load(ctx); lerr != nil {
			g.log.Error("state.reload_failed", "err", lerr)
		}
		return fmt.Errorf("group %s: %w: stored epoch %d in flight %q, ours epoch %d in flight %q",
			g.cfg.Name, ErrSuperseded, cur.Epoch, inFlightID(cur), mine.Epoch, inFlightID(mine))
	}
	return nil
}

// makeWritable is the only way the group makes a site writable: it re-reads
// the store first and refuses (ErrSuperseded, or the term's end) when
// another daemon moved the state on or this daemon no longer leads.
func (g *group) makeWritable(ctx context.Context, target string) error {
	// Guards against a second writable site from a decision another
	// leader's newer state has overtaken (leaderships overlapping).
	if err := g.checkStore(ctx); err != nil {
		return err
	}
	return g.exec.makeWritable(ctx, target)
}

func inFlightID(st store.GroupState) string {
	if st.InFlight == nil {
		return ""
	}
	return st.InFlight.ID
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (g *group) failpoint(name string) {
	if g.exec.failpoint != nil {
		g.exec.failpoint(name)
	}
}

// revoke is phase 1: persist and publish the epoch in which no site is
// active, then fence the old primary if it answers.
func (g *group) revoke(ctx context.Context, d sitepair.Decision) error {
	defer g.phase("revoke", g.now())
	// Persisting before fencing means a crash right after still leaves
	// every sidecar told that the old primary lost its epoch.
	if err := g.commit(ctx, d, StepRevoked, ""); err != nil {
		return err
	}
	// Lease and catch-up arithmetic starts once the revoke is durable and
	// published (commit did both), not when it was decided.
	g.mu.Lock()
	if g.state.InFlight != nil {
		g.state.InFlight.RevokedAt = later(g.state.InFlight.RevokedAt, g.now())
	}
	g.mu.Unlock()
	g.log.Warn("epoch.revoked", "epoch", d.Epoch, "from", d.From, "to", d.Target, "planned", d.Planned, "reason", string(d.Reason))
	g.failpoint(StepRevoked)
	// Both at once: a hung old primary makes the fence attempt and the IO
	// threads reading from it slow.
	var wg sync.WaitGroup
	if fence := g.reachable(d.Fence); len(fence) > 0 {
		g.concurrently(&wg, func() {
			if err := g.bestEffortFence(ctx, fence); err != nil {
				// Best effort: the old primary may be down; phase 2 waits for a proof.
				g.log.Info("fence.best_effort_failed", "err", err)
			}
		})
	}
	if len(d.Detach) > 0 {
		g.concurrently(&wg, func() {
			if err := g.stopIO(ctx, d.Detach); err != nil {
				// The next decision sees which IO threads still run and retries.
				g.log.Warn("semisync.detach_failed", "err", err)
			}
		})
	}
	wg.Wait()
	return nil
}

// stopIO stops the IO thread of every site (semi-sync fencing: none of them
// can acknowledge the old primary's commits any more), all at once: a
// replica whose source hangs takes seconds to stop its IO thread.
func (g *group) stopIO(ctx context.Context, sites []string) error {
	errs := make([]error, len(sites))
	var wg sync.WaitGroup
	for i, s := range sites {
		g.concurrently(&wg, func() {
			err := g.exec.on(ctx, s, stepTimeout, func(ctx context.Context, in Instance) error { return in.StopReplicaIO(ctx) })
			if err != nil {
				errs[i] = fmt.Errorf("stop IO thread of %s: %w", s, err)
				return
			}
			g.log.Info("site.io_stopped", "site", s)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// concurrently runs f in wg, or right now in a group driven by the harness
// (the deterministic simulation, whose histories must replay exactly).
func (g *group) concurrently(wg *sync.WaitGroup, f func()) {
	if g.pause != nil {
		f()
		return
	}
	wg.Go(f)
}

// reachable keeps the sites not debounced unreachable: a best-effort fence
// of a lost site only spends the promotion's time.
func (g *group) reachable(sites []string) []string {
	if len(sites) == 0 {
		return nil
	}
	var out []string
	obs := g.obs.Observed()
	for _, s := range sites {
		for _, o := range obs.Sites {
			if o.Name == s && o.State != statemachine.Unreachable {
				out = append(out, s)
			}
		}
	}
	return out
}

// bestEffortFence fences sites that may well be hung or gone, within a
// couple of probe timeouts: the failover must not wait on them (a proof
// that does not need them is, or will be, available).
func (g *group) bestEffortFence(ctx context.Context, sites []string) error {
	ctx, cancel := context.WithTimeout(ctx, max(2*g.cfg.ProbeTimeout, time.Second))
	defer cancel()
	return g.fenceSites(ctx, sites)
}

// fenceSites fences each site and records the epoch of each confirmed fence
// (the proof phase 2 looks for).
func (g *group) fenceSites(ctx context.Context, sites []string) error {
	var errs []error
	for _, s := range sites {
		if err := g.exec.fence(ctx, s); err != nil {
			errs = append(errs, err)
			continue
		}
		g.mu.Lock()
		g.fenced[s] = g.state.Epoch
		oldPrimary := g.state.InFlight != nil && g.state.InFlight.From == s
		g.mu.Unlock()
		g.ev().Fenced(g.cfg.Name, s, "daemon")
		if oldPrimary {
			g.failpoint(StepOldPrimaryFenced)
		}
	}
	return errors.Join(errs...)
}

// promote is phase 2, the fixed sequence of docs/design.md. Every step is
// idempotent and recorded, so a restarted daemon re-runs it safely.
func (g *group) promote(ctx context.Context, d sitepair.Decision) error {
	log := g.log.With("target", d.Target, "from", d.From, "proof", string(d.FenceProof))
	g.promotionStarted()
	if err := g.retarget(ctx, d.Target); err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	if fence := g.reachable(d.Fence); len(fence) > 0 {
		// Best effort only: the proof already holds (down or lease expired).
		_ = g.bestEffortFence(ctx, fence)
	}
	start := g.now()
	res, err := g.exec.drain(ctx, d.Target, g.drainTimeout())
	g.phase("drain", start)
	if err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	if res.TimedOut || !res.Incomplete.IsEmpty() {
		// Promoting without these is fine only if no peer holds them whole.
		if err := g.refuseLoss(ctx, d); err != nil {
			return fmt.Errorf("promote %s: %w", d.Target, err)
		}
	}
	if err := g.step(ctx, StepRelayDrained, ""); err != nil {
		return err
	}
	start = g.now()
	promo, err := g.exec.detach(ctx, d.Target)
	g.phase("detach", start)
	if err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	g.failpoint(StepReplicationReset)
	if err := g.step(ctx, StepPromotionRecorded, promo.String()); err != nil {
		return err
	}
	// The decision checked the target holds every other site's transactions;
	// the set read after the drain must still cover that.
	// (Less a transaction it received only in part: nobody acknowledged it.)
	if want := d.PromotionGTID.Subtract(res.Incomplete); !promo.Covers(want) && g.cfg.OnDrainTimeout != "promote" {
		return fmt.Errorf("promote %s: %w: executed %s lacks %s", d.Target, ErrDrainAborted, promo.Compact(), promo.Uncovered(want).Compact())
	}
	// A lost Lease or another daemon's write stops the promotion before
	// its view is published (makeWritable re-reads once more after).
	if err := g.checkStore(ctx); err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	start = g.now()
	if err := g.publishPromotion(ctx, d); err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	g.phase("publish", start)
	start = g.now()
	if err := g.makeWritable(ctx, d.Target); err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	g.phase("writable", start)
	g.promoted(d)
	g.failpoint(StepWritable)
	d.PromotionGTID = promo
	if err := g.commit(ctx, d, "", ""); err != nil {
		return err
	}
	log.Warn("failover.promoted", "epoch", d.Epoch, "promotion_gtid", promo.Compact(), "planned", d.Planned)
	g.failpoint(StepPromoted)
	start = g.now()
	if err := g.exec.repoint(ctx, d.Target, d.Repoint); err != nil {
		// Not fatal: Rejoin decisions retry on the next rounds.
		log.Warn("repoint.failed", "err", err)
	}
	if err := g.exec.semiSync(ctx, d.Target, d.Repoint); err != nil {
		log.Warn("semisync.reconfigure_failed", "err", err)
	}
	g.phase("repoint", start)
	g.failpoint(StepRepointed)
	return nil
}

// drainTimeout bounds the promotion's relay drain: relayDrainTimeout, and
// at most maxLagWait for a planned switchover (whose source is fenced and
// waiting to be given back its writes if the target cannot catch up).
func (g *group) drainTimeout() time.Duration {
	g.mu.Lock()
	planned := g.state.InFlight != nil && g.state.InFlight.Planned
	g.mu.Unlock()
	if planned {
		return min(g.cfg.RelayDrainTimeout, g.cfg.MaxLagWait)
	}
	return g.cfg.RelayDrainTimeout
}

// refuseLoss is onDrainTimeout=promote's limit: the candidate may give up
// what only it received, never what another reachable replica also holds
// (under semi-sync, acknowledged writes). On refusal its IO thread runs again.
func (g *group) refuseLoss(ctx context.Context, d sitepair.Decision) error {
	var executed gtid.Set
	err := g.exec.on(ctx, d.Target, stepTimeout, func(ctx context.Context, in Instance) error {
		st, err := in.Status(ctx)
		executed = st.Executed
		return err
	})
	if err != nil {
		return fmt.Errorf("read executed set after the drain timeout: %w", err)
	}
	for _, s := range g.obs.Observed().Sites {
		if s.Name == d.Target || s.Name == d.From || !s.State.Reachable() {
			continue
		}
		if have := s.Executed.Union(s.Retrieved); !executed.Covers(have) {
			// Promoting would throw away transactions a peer acknowledged.
			_ = g.exec.on(ctx, d.Target, stepTimeout, func(ctx context.Context, in Instance) error { return in.StartReplicaIO(ctx) })
			return fmt.Errorf("%w: onDrainTimeout is promote, but %s lacks %s that %s holds",
				ErrDrainAborted, d.Target, executed.Uncovered(have).Compact(), s.Name)
		}
	}
	return nil
}

// retarget records a new target of the failover in flight before acting on
// it, so a restarted daemon resumes towards the site actually being
// promoted.
func (g *group) retarget(ctx context.Context, target string) error {
	g.mu.Lock()
	st, prev := g.state, g.stored
	g.mu.Unlock()
	if st.InFlight == nil || st.InFlight.To == target {
		return nil
	}
	f := *st.InFlight
	was := f.To
	f.To = target
	st.InFlight = &f
	if err := g.save(ctx, st, prev, g.now(), "", ""); err != nil {
		return fmt.Errorf("record new target %s: %w", target, err)
	}
	g.log.Warn("failover.retargeted", "from", was, "to", target)
	return nil
}

// publishPromotion persists and publishes the view naming the target
// before the target is made writable, then waits (bounded) until the
// target's sidecar holds it: a sidecar still holding the revoking view would
// fence the new primary the moment it became writable.
func (g *group) publishPromotion(ctx context.Context, d sitepair.Decision) error {
	g.mu.Lock()
	st, prev := g.state, g.stored
	g.mu.Unlock()
	if st.InFlight == nil {
		return nil
	}
	f := *st.InFlight
	if f.PublishedTo != d.Target || f.PublishedEpoch != d.Epoch {
		f.PublishedEpoch, f.PublishedTo = d.Epoch, d.Target
		st.InFlight = &f
		if err := g.save(ctx, st, prev, g.now(), StepPublished, ""); err != nil {
			return fmt.Errorf("publish epoch %d naming %s: %w", d.Epoch, d.Target, err)
		}
	}
	g.failpoint(StepPublished)
	if !g.sidecars.known(d.Target) {
		return nil
	}
	// A sidecar renews every checkInterval; one that does not answer in a
	// few is dead (it fences nothing) or cut off (a fence by it only costs
	// availability, and the daemon re-asserts the primary).
	caught, err := g.waitFor(ctx, 3*g.cfg.Sidecar.CheckInterval, func() bool { return g.sidecars.observation(d.Target).Epoch >= d.Epoch })
	if err == nil && !caught {
		g.log.Warn("sidecar.not_caught_up", "site", d.Target, "epoch", d.Epoch,
			"note", "making it writable anyway; if its sidecar fences it, the primary is re-asserted")
	}
	return err
}

// waitPoll is how often waitFor checks its condition.
const waitPoll = 10 * time.Millisecond

// waitFor waits until cond holds (true), at most limit (false), checking
// every waitPoll. A group driven by the harness lets the harness run the
// rest of the world at each check instead of sleeping (pause).
func (g *group) waitFor(ctx context.Context, limit time.Duration, cond func() bool) (bool, error) {
	if g.pause != nil {
		for range max(1, int(limit/waitPoll)) {
			if cond() {
				return true, nil
			}
			g.pause()
		}
		return cond(), nil
	}
	wait := time.NewTimer(limit)
	defer wait.Stop()
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-wait.C:
			return cond(), nil
		case <-tick.C:
		}
	}
	return true, nil
}

// publish signs and publishes the group's current view: the persisted one,
// or the one naming the target of a promotion about to make it writable.
// Routing and the cache only follow a completed promotion.
func (g *group) publish() {
	g.mu.Lock()
	v := view.View{Group: g.cfg.Name, Epoch: g.state.Epoch, ActiveSite: g.state.ActiveSite, IssuedAt: g.now()}
	served := v
	if f := g.state.InFlight; f != nil && f.PublishedTo != "" {
		served.Epoch, served.ActiveSite = f.PublishedEpoch, f.PublishedTo
	}
	g.mu.Unlock()
	g.pub.set(served)
	g.follow.want(v)
}

// run is the group's loop until ctx ends. lead gates every action and gives
// the leadership term's context every action derives from.
func (g *group) run(ctx context.Context, lead func() (context.Context, time.Time, bool)) {
	// Decide a few times per poll interval so a decision follows the probe
	// that enables it closely; actions stay paced by the probes themselves
	// (the barrier), so this never acts more often than sites are observed.
	tick := time.NewTicker(max(g.cfg.PollInterval/4, 50*time.Millisecond))
	defer tick.Stop()
	var woken <-chan struct{}
	if w, ok := g.obs.(waker); ok {
		woken = w.Woken()
	}
	for {
		select {
		case <-ctx.Done():
			return
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
		}
		if lctx, since, ok := lead(); ok && ctx.Err() == nil {
			g.round(lctx, since)
		}
	}
}

// handle carries out an operator request inside the loop.
func (g *group) handle(req request, lead func() (context.Context, time.Time, bool)) error {
	ctx, since, ok := lead()
	if !ok {
		return fmt.Errorf("%w: this daemon is not the leader", api.ErrNotLeader)
	}
	g.mu.Lock()
	st := g.state
	g.mu.Unlock()
	now := g.now()
	entry := store.AuditEntry{At: now, Action: req.kind, Site: req.target, By: req.by, Result: store.AuditAccepted}
	switch req.kind {
	case kindSwitchover:
		d := sitepair.DecideSwitchover(g.observed(since), st, g.policy, req.target, req.force, now)
		if d.Action != sitepair.RevokeEpoch {
			g.log.Warn("switchover.refused", "target", req.target, "by", req.by, "reason", string(d.Reason), "message", d.Message)
			err := fmt.Errorf("%w: switchover to %s: %s (%s)", ErrRefused, req.target, d.Message, d.Reason)
			g.auditRefused(ctx, entry, err)
			return err
		}
		// The cache moves first, before MySQL is touched: with
		// onSyncTimeout=fail a cache that cannot follow leaves everything as
		// it was.
		if err := g.switchCache(ctx, st.ActiveSite, req.target); err != nil {
			g.log.Warn("switchover.refused", "target", req.target, "by", req.by, "reason", "cache", "err", err)
			err = fmt.Errorf("%w: switchover to %s: the cache could not follow: %w", ErrRefused, req.target, err)
			g.auditRefused(ctx, entry, err)
			return err
		}
		g.log.Warn("switchover.accepted", "target", req.target, "by", req.by, "forced", req.force)
		// The revoke's durable write carries the entry.
		g.mu.Lock()
		g.stored.Audit = store.AppendAudit(g.stored.Audit, entry)
		g.mu.Unlock()
		g.carryOut(ctx, d)
		return nil
	case kindAcknowledge:
		g.log.Warn("escalation.acknowledged", "by", req.by)
		return g.audited(ctx, sitepair.Acknowledge(st), entry)
	case kindConfirmFence:
		next, err := sitepair.ConfirmFence(g.observed(since), st, g.policy, req.target, now, req.by)
		if err != nil {
			g.log.Warn("fence.confirmation_refused", "site", req.target, "by", req.by, "err", err)
			err = fmt.Errorf("%w: %w", ErrRefused, err)
			g.auditRefused(ctx, entry, err)
			return err
		}
		// Recorded before the promotion it allows: a restarted daemon
		// still knows a human took responsibility for the old primary.
		if err := g.audited(ctx, next, entry); err != nil {
			return err
		}
		g.log.Warn("fence.confirmed_by_operator", "site", req.target, "by", req.by, "epoch", st.Epoch)
		return nil
	case kindReclone:
		return g.startReclone(ctx, req, g.observed(since), st, entry)
	}
	return fmt.Errorf("%w: unknown request %q", ErrRefused, req.kind)
}

// audited saves next with entry appended to the group's history.
func (g *group) audited(ctx context.Context, next sitepair.Persisted, entry store.AuditEntry) error {
	g.mu.Lock()
	prev := g.stored
	g.mu.Unlock()
	prev.Audit = store.AppendAudit(prev.Audit, entry)
	return g.save(ctx, next, prev, entry.At, "", "")
}

// auditRefused records a refused request in the history (best effort: the
// refusal stands whether or not the record is written).
func (g *group) auditRefused(ctx context.Context, entry store.AuditEntry, why error) {
	entry.Result = "refused: " + why.Error()
	g.mu.Lock()
	st := g.state
	g.mu.Unlock()
	if err := g.audited(ctx, st, entry); err != nil {
		g.log.Warn("audit.write_failed", "action", entry.Action, "err", err)
	}
}

// submit hands an operator request to the loop and waits for its outcome.
func (g *group) submit(ctx context.Context, req request) error {
	req.reply = make(chan error, 1)
	select {
	case g.requests <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// restartPendingReplicas starts replication again, once primary is
// re-asserted, on the read-only sites still configured to replicate from it
// whose threads are stopped without an error: after every site went down
// (total loss) the replicas come back with their replication stopped, since
// servers start with skip_replica_start (docs/design.md; MySQL's my.cnf, and
// MariaDB's skip_slave_start), and no decision would start them again (they
// already "replicate from" the primary). Replicating from the re-asserted
// primary, which holds every transaction they hold, is what they did before
// the loss; the repoint re-checks containment.
//
// The re-assert does not wait for the replicas (one never made writable
// does not block it), so this runs every round while any of them is
// pending: a site still unreachable stays pending, a site seen back is
// tried once (best effort: a failure is logged and the site stays reported
// as not following) or dropped when there is nothing to restart (running,
// stopped on an error, diverged, following another source: a later stop is
// an operator's). A later epoch or another primary ends the restarts.
func (g *group) restartPendingReplicas(ctx context.Context) {
	g.mu.Lock()
	p := g.restarts
	if len(p.sites) > 0 && (g.state.ActiveSite != p.primary || g.state.Epoch != p.epoch) {
		// Superseded: a restart would act on a re-assert that no longer holds.
		g.restarts, p = pendingRestarts{}, pendingRestarts{}
	}
	diverged := g.state.Diverged
	g.mu.Unlock()
	if len(p.sites) == 0 {
		return
	}
	var stopped, waiting []string
	for _, s := range g.obs.Observed().Sites {
		if !slices.Contains(p.sites, s.Name) {
			continue
		}
		_, div := diverged[s.Name]
		switch {
		case !s.State.Reachable() || s.Debouncing:
			waiting = append(waiting, s.Name) // not back yet
		case div || s.State != statemachine.ReadOnly:
		case s.ReplicatingFrom == p.primary && s.IOStopped && !s.ReplicationBroken:
			stopped = append(stopped, s.Name)
		}
	}
	g.mu.Lock()
	if g.restarts.primary == p.primary && g.restarts.epoch == p.epoch {
		g.restarts.sites = waiting
	}
	g.mu.Unlock()
	if len(stopped) == 0 {
		return
	}
	g.log.Info("reassert.restart_replicas", "sites", stopped, "source", p.primary)
	if err := g.exec.repoint(ctx, p.primary, stopped); err != nil {
		g.log.Warn("reassert.restart_replicas_failed", "err", err)
		return
	}
	if err := g.exec.semiSync(ctx, p.primary, stopped); err != nil {
		g.log.Warn("semisync.reconfigure_failed", "err", err)
	}
}
