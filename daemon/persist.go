package daemon

// The group's persisted record (record.go): loaded when a term starts,
// saved whole by persist after every change, whether a decision (commit),
// a step of a failover in flight (step, after checking that the store
// still holds what this daemon last wrote) or an operator request.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
)

// load reads the persisted record. A group that was never saved starts at
// epoch 0 with no active site: the first decision adopts the observed
// primary rather than trusting in-memory defaults.
func (g *group) load(ctx context.Context) error {
	st, err := g.store.Load(ctx, g.cfg.Name)
	if err != nil {
		return fmt.Errorf("load state of group %s from %s: %w", g.cfg.Name, g.store.Describe(), err)
	}
	r, err := toRecord(st, g.flavor)
	if err != nil {
		return fmt.Errorf("load state of group %s from %s: %w", g.cfg.Name, g.store.Describe(), err)
	}
	if r.InFlight != nil {
		// The revoke time was written by another process (or another
		// leader) on its own clock: measure every wait from ours.
		r.InFlight.RevokedAt = later(r.InFlight.RevokedAt, g.now())
	}
	g.mu.Lock()
	g.rec = r
	g.loadDenominator(r)
	g.mu.Unlock()
	g.publish()
	g.log.Info("state.loaded", "store", g.store.Describe(), "exists", st.Exists,
		"epoch", st.Epoch, "active_site", st.ActiveSite, "in_flight", st.InFlight != nil)
	if g.observing() && st.InFlight != nil {
		g.log.Warn("group.observe_in_flight", "epoch", st.Epoch, "from", st.InFlight.From, "to", st.InFlight.To,
			"note", "a failover is in flight and an observing group does not finish it: set mode: active to let it")
	}
	return nil
}

// commit applies d to the persisted record and persists it. step/promotion
// record the progress of an in-flight failover.
func (g *group) commit(ctx context.Context, d sitepair.Decision, step, promotion string) error {
	now := g.now()
	g.mu.Lock()
	next := g.rec.advance(g.cfg.Name, sitepair.Apply(g.rec.Persisted, d, now), now).stepped(step, promotion)
	next = next.chronicle(g.rec, d, now, g.startOf(d, now)).stamped(step, now)
	g.mu.Unlock()
	return g.persist(ctx, next)
}

// persist saves next whole, durably, and publishes the new view. The
// store refuses it (compare-and-swap) when it would lower the epoch or
// replace another failover in flight.
func (g *group) persist(ctx context.Context, next record) error {
	// Prevents an observing group from moving the persisted epoch, active
	// site or view, which an active daemon would later take for real.
	if g.observing() {
		return fmt.Errorf("persist group %s: %w", g.cfg.Name, ErrObserveOnly)
	}
	st := toStore(g.cfg.Name, next)
	st.UpdatedBy = g.identity
	if err := g.store.Save(ctx, st); err != nil {
		return fmt.Errorf("persist group %s: %w", g.cfg.Name, err)
	}
	g.mu.Lock()
	g.rec = next
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
	next := g.rec.stepped(name, promotion).stamped(name, g.now())
	g.mu.Unlock()
	if err := g.persist(ctx, next); err != nil {
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
	mine := g.rec
	g.mu.Unlock()
	if cur.Epoch != mine.Epoch || inFlightID(cur) != mine.inFlightID() {
		// Guards against a deposed leader finishing a failover another
		// daemon has taken over or ended.
		if lerr := g.load(ctx); lerr != nil {
			g.log.Error("state.reload_failed", "err", lerr)
		}
		return fmt.Errorf("group %s: %w: stored epoch %d in flight %q, ours epoch %d in flight %q",
			g.cfg.Name, ErrSuperseded, cur.Epoch, inFlightID(cur), mine.Epoch, mine.inFlightID())
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
	return g.servers.makeWritable(ctx, target)
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
	if g.failpointHook != nil {
		g.failpointHook(name)
	}
}
