package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
)

// Failover steps, persisted in store.InFlight.Step and used as failpoint
// names (FAILOVERD_FAILPOINT) by the crash tests, in the order a failover
// passes them.
const (
	StepRevoked           = "revoked"
	StepOldPrimaryFenced  = "old-primary-fenced"
	StepRelayDrained      = "relay-drained"
	StepReplicationReset  = "replication-reset"
	StepPromotionRecorded = "promotion-recorded"
	StepPublished         = "published"
	StepWritable          = "writable"
	StepPromoted          = "promoted"
	StepRepointed         = "repointed"
)

// failoverRun carries out one decision of a failover or switchover: the
// revoke (phase 1), the fences and IO-thread stops that give its proof, and
// the promotion (phase 2), in the order of docs/design.md ("The failover
// sequence"). Every step is idempotent and recorded in the store before the
// next one starts, so a daemon restarted after any step (the crash tests
// kill it at every failpoint) resumes the sequence safely.
//
// It holds what the steps need of the group: its record (the persisted
// state, the saves that publish the view, the fences read back, events)
// through g, and the servers, observations, sidecar reports and pacer.
type failoverRun struct {
	d        sitepair.Decision
	g        *group
	servers  *servers
	obs      Observations
	sidecars *sidecars
	pace     pacer
	cfg      configs.Group
	log      *slog.Logger
}

// failover is the run that carries d out.
func (g *group) failover(d sitepair.Decision) *failoverRun {
	return &failoverRun{d: d, g: g, servers: g.servers, obs: g.obs, sidecars: g.sidecars, pace: g.pace, cfg: g.cfg, log: g.log}
}

// revoke is phase 1: persist and publish the epoch in which no site is
// active, then fence the old primary if it answers.
func (f *failoverRun) revoke(ctx context.Context) error {
	g, d := f.g, f.d
	defer g.phase("revoke", g.now())
	// Persisting before fencing means a crash right after still leaves
	// every sidecar told that the old primary lost its epoch.
	if err := g.commit(ctx, d, StepRevoked, ""); err != nil {
		return err
	}
	// Lease and catch-up arithmetic starts once the revoke is durable and
	// published (commit did both), not when it was decided.
	g.mu.Lock()
	if g.rec.InFlight != nil {
		g.rec.InFlight.RevokedAt = later(g.rec.InFlight.RevokedAt, g.now())
	}
	g.mu.Unlock()
	f.log.Warn("epoch.revoked", "epoch", d.Epoch, "from", d.From, "to", d.Target, "planned", d.Planned, "reason", string(d.Reason))
	g.failpoint(StepRevoked)
	// Both at once: a hung old primary makes the fence attempt and the IO
	// threads reading from it slow.
	var parts []func()
	if fence := f.reachable(d.Fence); len(fence) > 0 {
		parts = append(parts, func() {
			if err := f.bestEffortFence(ctx, fence); err != nil {
				// Best effort: the old primary may be down; phase 2 waits for a proof.
				f.log.Info("fence.best_effort_failed", "err", err)
			}
		})
	}
	if len(d.Detach) > 0 {
		parts = append(parts, func() {
			if err := f.stopIO(ctx, d.Detach); err != nil {
				// The next decision sees which IO threads still run and retries.
				f.log.Warn("semisync.detach_failed", "err", err)
			}
		})
	}
	f.pace.all(parts...)
	return nil
}

// fence is the FenceSites decision: fence its sites (the old primary once
// it answers, or the losers of a split brain).
func (f *failoverRun) fence(ctx context.Context) error {
	g, d := f.g, f.d
	err := f.fenceSites(ctx, d.Fence)
	g.mu.Lock()
	inf := g.rec.InFlight
	g.mu.Unlock()
	if inf != nil && inf.OperatorConfirmed != nil && slices.Contains(d.Fence, inf.From) {
		// The old primary came back: a human's confirmation that it was
		// dead no longer holds, whether or not this fence worked.
		if cerr := g.commit(ctx, d, "", ""); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
	return err
}

// stopIO stops the IO thread of every site (semi-sync fencing: none of them
// can acknowledge the old primary's commits any more), all at once: a
// replica whose source hangs takes seconds to stop its IO thread.
func (f *failoverRun) stopIO(ctx context.Context, sites []string) error {
	errs := make([]error, len(sites))
	parts := make([]func(), len(sites))
	for i, s := range sites {
		parts[i] = func() {
			err := f.servers.on(ctx, s, stepTimeout, func(ctx context.Context, in Instance) error { return in.StopReplicaIO(ctx) })
			if err != nil {
				errs[i] = fmt.Errorf("stop IO thread of %s: %w", s, err)
				return
			}
			f.log.Info("site.io_stopped", "site", s)
		}
	}
	f.pace.all(parts...)
	return errors.Join(errs...)
}

// reachable keeps the sites not debounced unreachable: a best-effort fence
// of a lost site only spends the promotion's time.
func (f *failoverRun) reachable(sites []string) []string {
	if len(sites) == 0 {
		return nil
	}
	var out []string
	obs := f.obs.Observed()
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
func (f *failoverRun) bestEffortFence(ctx context.Context, sites []string) error {
	ctx, cancel := context.WithTimeout(ctx, max(2*f.cfg.ProbeTimeout, time.Second))
	defer cancel()
	return f.fenceSites(ctx, sites)
}

// fenceSites fences each site and records the epoch of each confirmed fence
// (the proof phase 2 looks for).
func (f *failoverRun) fenceSites(ctx context.Context, sites []string) error {
	g := f.g
	var errs []error
	for _, s := range sites {
		if err := f.servers.fence(ctx, s); err != nil {
			errs = append(errs, err)
			continue
		}
		g.mu.Lock()
		g.fenced[s] = g.rec.Epoch
		oldPrimary := g.rec.InFlight != nil && g.rec.InFlight.From == s
		g.mu.Unlock()
		g.ev().Fenced(f.cfg.Name, s, "daemon")
		if oldPrimary {
			g.stamp(StepOldPrimaryFenced)
			g.failpoint(StepOldPrimaryFenced)
		}
	}
	return errors.Join(errs...)
}

// promote is phase 2, the fixed sequence of docs/design.md. Every step is
// idempotent and recorded, so a restarted daemon re-runs it safely.
func (f *failoverRun) promote(ctx context.Context) error {
	g, d := f.g, f.d
	log := f.log.With("target", d.Target, "from", d.From, "proof", string(d.FenceProof))
	g.promotionStarted()
	g.stamp(TimelineFenced)
	if err := f.retarget(ctx, d.Target); err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	if fence := f.reachable(d.Fence); len(fence) > 0 {
		// Best effort only: the proof already holds (down or lease expired).
		_ = f.bestEffortFence(ctx, fence)
	}
	start := g.now()
	res, err := f.servers.drain(ctx, d.Target, f.drainTimeout())
	g.phase("drain", start)
	if err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	if res.TimedOut || !res.Incomplete.IsEmpty() {
		// Promoting without these is fine only if no peer holds them whole.
		if err := f.refuseLoss(ctx); err != nil {
			return fmt.Errorf("promote %s: %w", d.Target, err)
		}
	}
	if err := g.step(ctx, StepRelayDrained, ""); err != nil {
		return err
	}
	start = g.now()
	promo, err := f.servers.detach(ctx, d.Target)
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
	if want := d.PromotionGTID.Subtract(res.Incomplete); !promo.Covers(want) && f.cfg.OnDrainTimeout != "promote" {
		return fmt.Errorf("promote %s: %w: executed %s lacks %s", d.Target, ErrDrainAborted, promo.Compact(), promo.Uncovered(want).Compact())
	}
	// A lost Lease or another daemon's write stops the promotion before
	// its view is published (makeWritable re-reads once more after).
	if err := g.checkStore(ctx); err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	start = g.now()
	if err := f.publishPromotion(ctx); err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	g.phase("publish", start)
	start = g.now()
	if err := g.makeWritable(ctx, d.Target); err != nil {
		return fmt.Errorf("promote %s: %w", d.Target, err)
	}
	g.phase("writable", start)
	g.stamp(StepWritable)
	g.promoted(d)
	g.failpoint(StepWritable)
	d.PromotionGTID = promo
	g.mu.Lock()
	id := g.rec.inFlightID()
	g.mu.Unlock()
	if err := g.commit(ctx, d, "", ""); err != nil {
		return err
	}
	g.mu.Lock()
	g.routing = id
	g.mu.Unlock()
	log.Warn("failover.promoted", "epoch", d.Epoch, "promotion_gtid", promo.Compact(), "planned", d.Planned)
	g.failpoint(StepPromoted)
	start = g.now()
	if err := f.servers.repoint(ctx, d.Target, d.Repoint); err != nil {
		// Not fatal: Rejoin decisions retry on the next rounds.
		log.Warn("repoint.failed", "err", err)
	}
	if err := f.servers.semiSync(ctx, d.Target, d.Repoint); err != nil {
		log.Warn("semisync.reconfigure_failed", "err", err)
	}
	g.phase("repoint", start)
	g.stampEnded(ctx, id, StepRepointed, g.now())
	g.failpoint(StepRepointed)
	return nil
}

// drainTimeout bounds the promotion's relay drain: relayDrainTimeout, and
// at most maxLagWait for a planned switchover (whose source is fenced and
// waiting to be given back its writes if the target cannot catch up).
func (f *failoverRun) drainTimeout() time.Duration {
	f.g.mu.Lock()
	planned := f.g.rec.InFlight != nil && f.g.rec.InFlight.Planned
	f.g.mu.Unlock()
	if planned {
		return min(f.cfg.RelayDrainTimeout, f.cfg.MaxLagWait)
	}
	return f.cfg.RelayDrainTimeout
}

// refuseLoss is onDrainTimeout=promote's limit: the candidate may give up
// what only it received, never what another reachable replica also holds
// (under semi-sync, acknowledged writes). On refusal its IO thread runs again.
func (f *failoverRun) refuseLoss(ctx context.Context) error {
	d := f.d
	var executed gtid.Set
	err := f.servers.on(ctx, d.Target, stepTimeout, func(ctx context.Context, in Instance) error {
		st, err := in.Status(ctx)
		executed = st.Executed
		return err
	})
	if err != nil {
		return fmt.Errorf("read executed set after the drain timeout: %w", err)
	}
	for _, s := range f.obs.Observed().Sites {
		if s.Name == d.Target || s.Name == d.From || !s.State.Reachable() {
			continue
		}
		if have := s.Executed.Union(s.Retrieved); !executed.Covers(have) {
			// Promoting would throw away transactions a peer acknowledged.
			_ = f.servers.on(ctx, d.Target, stepTimeout, func(ctx context.Context, in Instance) error { return in.StartReplicaIO(ctx) })
			return fmt.Errorf("%w: onDrainTimeout is promote, but %s lacks %s that %s holds",
				ErrDrainAborted, d.Target, executed.Uncovered(have).Compact(), s.Name)
		}
	}
	return nil
}

// retarget records a new target of the failover in flight before acting on
// it, so a restarted daemon resumes towards the site actually being
// promoted.
func (f *failoverRun) retarget(ctx context.Context, target string) error {
	g := f.g
	g.mu.Lock()
	next := g.rec
	g.mu.Unlock()
	if next.InFlight == nil || next.InFlight.To == target {
		return nil
	}
	inf := *next.InFlight
	was := inf.To
	inf.To = target
	next.InFlight = &inf
	if err := g.persist(ctx, next.retargeted()); err != nil {
		return fmt.Errorf("record new target %s: %w", target, err)
	}
	f.log.Warn("failover.retargeted", "from", was, "to", target)
	return nil
}

// publishPromotion persists and publishes the view naming the target
// before the target is made writable, then waits (bounded) until the
// target's sidecar holds it: a sidecar still holding the revoking view would
// fence the new primary the moment it became writable.
func (f *failoverRun) publishPromotion(ctx context.Context) error {
	g, d := f.g, f.d
	g.mu.Lock()
	next := g.rec
	g.mu.Unlock()
	if next.InFlight == nil {
		return nil
	}
	inf := *next.InFlight
	if inf.PublishedTo != d.Target || inf.PublishedEpoch != d.Epoch {
		inf.PublishedEpoch, inf.PublishedTo = d.Epoch, d.Target
		next.InFlight = &inf
		if err := g.persist(ctx, next.stepped(StepPublished, "").stamped(StepPublished, g.now())); err != nil {
			return fmt.Errorf("publish epoch %d naming %s: %w", d.Epoch, d.Target, err)
		}
	}
	g.failpoint(StepPublished)
	if !f.sidecars.known(d.Target) {
		return nil
	}
	// A sidecar renews every checkInterval; one that does not answer in a
	// few is dead (it fences nothing) or cut off (a fence by it only costs
	// availability, and the daemon re-asserts the primary).
	caught, err := f.pace.waitFor(ctx, 3*f.cfg.Sidecar.CheckInterval, func() bool { return f.sidecars.observation(d.Target).Epoch >= d.Epoch })
	if err == nil && !caught {
		f.log.Warn("sidecar.not_caught_up", "site", d.Target, "epoch", d.Epoch,
			"note", "making it writable anyway; if its sidecar fences it, the primary is re-asserted")
	}
	return err
}
