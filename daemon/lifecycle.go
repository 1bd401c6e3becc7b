package daemon

// A group's life in the daemon (Run and reload.go): built and observing,
// its loop and routing started, retired between two rounds, closed. Each
// group runs under its own context, a child of Run's, so a reload can stop
// one group without touching the others.

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/hooks"
)

// build makes a group of gc ready to run under run: built as New builds
// it, its persisted state readable, observing its sites. It does not load
// the state into the group or publish anything; closeGroup discards it.
func (d *Daemon) build(ctx, run context.Context, gc configs.Group) (*group, error) {
	g, err := d.newGroup(gc)
	if err != nil {
		return nil, err
	}
	// Checked here so that a store that cannot give the state refuses the
	// reload instead of leaving a group without its loop.
	st, err := g.store.Load(ctx, gc.Name)
	if err == nil {
		_, err = toRecord(st, g.flavor)
	}
	if err != nil {
		g.closeHooks()
		return nil, fmt.Errorf("group %s: load state from %s: %w", gc.Name, g.store.Describe(), err)
	}
	if err := d.observe(run, g); err != nil {
		d.closeGroup(g)
		return nil, err
	}
	return g, nil
}

// observe starts g's observations under its own context, a child of run.
func (d *Daemon) observe(run context.Context, g *group) error {
	g.ctx, g.stop = context.WithCancel(run)
	observe := d.opts.Observe
	if observe == nil {
		observe = func(ctx context.Context, gc configs.Group, log *slog.Logger) (Observations, error) {
			return pollerObservations(ctx, gc, log, d.opts.Events)
		}
	}
	obs, err := observe(g.ctx, g.cfg, g.log)
	if err != nil {
		return fmt.Errorf("group %s: start observing: %w", g.cfg.Name, err)
	}
	g.obs = obs
	return nil
}

// startGroup runs g's decision loop and routing handoff under g.ctx.
func (d *Daemon) startGroup(g *group) {
	d.startLoop(g)
	done := make(chan struct{})
	g.followDone = done
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(done)
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			g.readFollow.run(g.ctx, d.isLeader)
		}()
		g.follow.run(g.ctx, d.isLeader)
		<-readDone
	}()
}

// startLoop runs g's decision loop until g.ctx ends or a reload retires it.
func (d *Daemon) startLoop(g *group) {
	done := make(chan struct{})
	g.loopDone = done
	// Recorded before the goroutine runs: a loop that never gets to run
	// shows as stalled.
	g.progress.start(d.opts.Clock())
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(done)
		defer g.progress.stop()
		g.run(g.ctx, d.lead.current)
	}()
}

// closeGroup ends a group whose loop returned or never ran: observations
// and routing stop, connections close, running hooks get a moment to end.
func (d *Daemon) closeGroup(g *group) {
	if g.stop != nil {
		g.stop()
	}
	if g.loopDone != nil {
		<-g.loopDone
	}
	if g.followDone != nil {
		<-g.followDone
	}
	g.servers.conns.closeAll()
	g.closeHooks()
	close(g.gone)
}

// closeHooks gives running hooks a moment to finish, then stops them.
func (g *group) closeHooks() {
	if r, ok := g.hooks.(*hooks.Runner); ok {
		hctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.Close(hctx)
		cancel()
	}
}

// retire asks g's loop to return between two rounds. It answers "" once
// the loop returned, or why the loop goes on: a failover in flight, a
// reclone this daemon runs, or an action still under way after retireWait.
func (d *Daemon) retire(ctx context.Context, g *group) string {
	reply := make(chan string, 1)
	t := time.NewTimer(retireWait)
	defer t.Stop()
	select {
	case g.retire <- reply:
	case <-g.loopDone:
		return ""
	case <-t.C:
		return "an action is being carried out"
	case <-ctx.Done():
		return "the daemon is stopping"
	}
	// The loop answers at once: it checks and returns without a round.
	why := <-reply
	if why == "" {
		<-g.loopDone
	}
	return why
}

// busy says why g must keep its loop ("" when it may be rebuilt): while
// this daemon leads, a failover or switchover in flight, or a reclone it
// runs. Called by the loop itself, between rounds, so that no round starts
// one between the check and the loop's return.
func (g *group) busy(lead func() (context.Context, time.Time, bool)) string {
	// A follower acts on nothing, and its next term reloads every state.
	if _, _, ok := lead(); !ok {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if f := g.rec.InFlight; f != nil {
		kind := "failover"
		if f.Planned {
			kind = "switchover"
		}
		return fmt.Sprintf("a %s from %s to %s is in flight; applied once it ends", kind, orNone(f.From), f.To)
	}
	if len(g.reclones) > 0 {
		return fmt.Sprintf("a reclone of %s runs in this daemon; applied once it ends", strings.Join(slices.Sorted(maps.Keys(g.reclones)), ", "))
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// setGroup puts g in place of the running group named name (appends it,
// or removes that group when g is nil).
func (d *Daemon) setGroup(name string, g *group) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := slices.IndexFunc(d.groups, func(x *group) bool { return x.cfg.Name == name })
	switch {
	case i < 0 && g != nil:
		d.groups = append(d.groups, g)
	case i >= 0 && g != nil:
		d.groups[i] = g
	case i >= 0:
		d.groups = slices.Delete(d.groups, i, i+1)
	}
}

// order sorts the running groups as want lists them, groups whose removal
// waits last. d.mu is held.
func (d *Daemon) order(want *configs.Config) {
	pos := map[string]int{}
	for i, gc := range want.Groups {
		pos[gc.Name] = i
	}
	slices.SortStableFunc(d.groups, func(a, b *group) int {
		pa, oka := pos[a.cfg.Name]
		pb, okb := pos[b.cfg.Name]
		switch {
		case oka && okb:
			return pa - pb
		case oka:
			return -1
		case okb:
			return 1
		}
		return 0
	})
}

// groupList is the running groups, in configuration order.
func (d *Daemon) groupList() []*group {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return slices.Clone(d.groups)
}
