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
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/view"
)

// ErrRefused is wrapped by errors of operator requests the group refuses.
var ErrRefused = errors.New("refused")

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
	obs    Observations
	now    func() time.Time
	log    *slog.Logger

	// actionTimeout bounds one action (a whole promotion sequence).
	actionTimeout time.Duration

	mu       sync.Mutex // guards the fields below, read by status
	stored   store.GroupState
	state    sitepair.Persisted
	fenced   map[string]uint64 // site → epoch at which its fence was read back
	last     sitepair.Decision
	lastErr  error
	barrier  time.Time // decisions wait for probes started after it
	requests chan request
}

// request is an operator action handed to the loop (one action at a time).
type request struct {
	kind   string // kindSwitchover or "acknowledge"
	target string
	reply  chan error
}

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
	g.mu.Lock()
	g.stored, g.state = st, p
	g.mu.Unlock()
	g.publish()
	g.log.Info("state.loaded", "store", g.store.Describe(), "exists", st.Exists,
		"epoch", st.Epoch, "active_site", st.ActiveSite, "in_flight", st.InFlight != nil)
	return nil
}

// observed returns the current observations with the fences we confirmed.
func (g *group) observed() sitepair.Observed {
	o := g.obs.Observed()
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range o.Sites {
		o.Sites[i].FencedEpoch = g.fenced[o.Sites[i].Name]
	}
	return o
}

// round decides once, on settled observations, and carries the decision out.
func (g *group) round(ctx context.Context) {
	g.mu.Lock()
	st, barrier := g.state, g.barrier
	g.mu.Unlock()
	// Deciding on probes taken before our last action would, for instance,
	// see a just-promoted primary as still read-only and act again.
	if !g.obs.Settled(barrier) {
		return
	}
	d := sitepair.Decide(g.observed(), st, g.policy, g.now())
	g.carryOut(ctx, d)
}

func (g *group) carryOut(ctx context.Context, d sitepair.Decision) {
	g.mu.Lock()
	changed := d.Reason != g.last.Reason || d.Action != g.last.Action || d.Target != g.last.Target
	g.last = d
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
		return
	}
	actx, cancel := context.WithTimeout(ctx, g.actionTimeout)
	defer cancel()
	err := g.act(actx, d)
	g.mu.Lock()
	g.lastErr = err
	g.barrier = g.now()
	g.mu.Unlock()
	if err != nil {
		g.log.Error("action.failed", "action", string(d.Action), "target", d.Target, "err", err)
	}
}

// act carries out one decision.
func (g *group) act(ctx context.Context, d sitepair.Decision) error {
	switch d.Action {
	case sitepair.AdoptPrimary, sitepair.MarkDiverged, sitepair.HaltFailover:
		return g.commit(ctx, d, "", "")
	case sitepair.RevokeEpoch:
		return g.revoke(ctx, d)
	case sitepair.FenceSites:
		return g.fenceSites(ctx, d.Fence)
	case sitepair.Promote:
		return g.promote(ctx, d)
	case sitepair.ReassertPrimary:
		if err := g.exec.makeWritable(ctx, d.Target); err != nil {
			return err
		}
		return g.commit(ctx, d, "", "")
	case sitepair.Rejoin:
		return g.exec.repoint(ctx, d.Target, d.Repoint)
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
// decision state.
func (g *group) step(ctx context.Context, name, promotion string) error {
	g.mu.Lock()
	st, prev := g.state, g.stored
	g.mu.Unlock()
	if err := g.save(ctx, st, prev, g.now(), name, promotion); err != nil {
		return err
	}
	g.failpoint(name)
	return nil
}

func (g *group) failpoint(name string) {
	if g.exec.failpoint != nil {
		g.exec.failpoint(name)
	}
}

// revoke is phase 1: persist and publish the epoch in which no site is
// active, then fence the old primary if it answers.
func (g *group) revoke(ctx context.Context, d sitepair.Decision) error {
	// Persisting before fencing means a crash right after still leaves
	// every sidecar told that the old primary lost its epoch.
	if err := g.commit(ctx, d, StepRevoked, ""); err != nil {
		return err
	}
	g.log.Warn("epoch.revoked", "epoch", d.Epoch, "from", d.From, "to", d.Target, "planned", d.Planned, "reason", string(d.Reason))
	g.failpoint(StepRevoked)
	if err := g.fenceSites(ctx, d.Fence); err != nil {
		// Best effort: the old primary may be down; phase 2 waits for a proof.
		g.log.Info("fence.best_effort_failed", "err", err)
	}
	return nil
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
	if len(d.Fence) > 0 {
		// Best effort only: the proof already holds (down or lease expired).
		_ = g.fenceSites(ctx, d.Fence)
	}
	if err := g.exec.drain(ctx, d.Target); err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	if err := g.step(ctx, StepRelayDrained, ""); err != nil {
		return err
	}
	promo, err := g.exec.detach(ctx, d.Target)
	if err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	g.failpoint(StepReplicationReset)
	if err := g.step(ctx, StepPromotionRecorded, promo.String()); err != nil {
		return err
	}
	// The decision checked the target holds every other site's transactions;
	// the set read after the drain must still cover that.
	if !promo.Contains(d.PromotionGTID) && g.cfg.OnDrainTimeout != "promote" {
		return fmt.Errorf("promote %s: %w: executed %s lacks %s", d.Target, ErrDrainAborted, promo.Compact(), d.PromotionGTID.Subtract(promo).Compact())
	}
	if err := g.exec.makeWritable(ctx, d.Target); err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	g.failpoint(StepWritable)
	d.PromotionGTID = promo
	if err := g.commit(ctx, d, "", ""); err != nil {
		return err
	}
	log.Warn("failover.promoted", "epoch", d.Epoch, "promotion_gtid", promo.Compact(), "planned", d.Planned)
	g.failpoint(StepPromoted)
	if err := g.exec.repoint(ctx, d.Target, d.Repoint); err != nil {
		// Not fatal: Rejoin decisions retry on the next rounds.
		log.Warn("repoint.failed", "err", err)
	}
	g.failpoint(StepRepointed)
	return nil
}

// publish signs and publishes the group's current view.
func (g *group) publish() {
	g.mu.Lock()
	v := view.View{Group: g.cfg.Name, Epoch: g.state.Epoch, ActiveSite: g.state.ActiveSite, IssuedAt: g.now()}
	g.mu.Unlock()
	g.pub.set(v)
	g.follow.want(v)
}

// run is the group's loop until ctx ends. isLeader gates every action.
func (g *group) run(ctx context.Context, isLeader func() bool) {
	// Decide a few times per poll interval so a decision follows the probe
	// that enables it closely; actions stay paced by the probes themselves
	// (the barrier), so this never acts more often than sites are observed.
	tick := time.NewTicker(max(g.cfg.PollInterval/4, 50*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-g.requests:
			req.reply <- g.handle(ctx, req, isLeader())
		case <-tick.C:
			if !isLeader() {
				continue
			}
			g.round(ctx)
		}
	}
}

// handle carries out an operator request inside the loop.
func (g *group) handle(ctx context.Context, req request, leader bool) error {
	if !leader {
		return fmt.Errorf("%w: this daemon is not the leader", ErrRefused)
	}
	g.mu.Lock()
	st := g.state
	g.mu.Unlock()
	switch req.kind {
	case kindSwitchover:
		d := sitepair.DecideSwitchover(g.observed(), st, g.policy, req.target, g.now())
		if d.Action != sitepair.RevokeEpoch {
			g.log.Warn("switchover.refused", "target", req.target, "reason", string(d.Reason), "message", d.Message)
			return fmt.Errorf("%w: switchover to %s: %s (%s)", ErrRefused, req.target, d.Message, d.Reason)
		}
		g.log.Warn("switchover.accepted", "target", req.target)
		g.carryOut(ctx, d)
		return nil
	case "acknowledge":
		now := g.now()
		g.mu.Lock()
		next, prev := sitepair.Acknowledge(g.state), g.stored
		g.mu.Unlock()
		return g.save(ctx, next, prev, now, "", "")
	}
	return fmt.Errorf("%w: unknown request %q", ErrRefused, req.kind)
}

// submit hands an operator request to the loop and waits for its outcome.
func (g *group) submit(ctx context.Context, kind, target string) error {
	req := request{kind: kind, target: target, reply: make(chan error, 1)}
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
