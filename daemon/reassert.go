package daemon

import (
	"context"
	"fmt"
	"slices"

	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
)

// reassert makes d.Target, a read-only site holding every acknowledged
// write, the writable primary again (every site read-only, a total loss
// over, or a switchover target lost and the source given back), then lets
// its replicas follow it.
func (g *group) reassert(ctx context.Context, d sitepair.Decision) error {
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
	// The semi-sync roles move with the primary on every path that
	// makes one (a restarted primary comes back with its my.cnf's).
	if err := g.servers.semiSync(ctx, d.Target, g.followers(d.Target)); err != nil {
		g.log.Warn("semisync.reconfigure_failed", "err", err)
	}
	return nil
}

// followers lists the read-only sites replicating from primary that the
// daemon may reconfigure (not operator-fenced, recloning or diverged).
func (g *group) followers(primary string) []string {
	g.mu.Lock()
	st := g.rec.Persisted
	g.mu.Unlock()
	var out []string
	for _, s := range g.obs.Observed().Sites {
		_, diverged := st.Diverged[s.Name]
		_, recloning := st.Recloning[s.Name]
		if s.Name == primary || s.State != statemachine.ReadOnly || s.ReplicatingFrom != primary || diverged || recloning || slices.Contains(st.OperatorFenced, s.Name) {
			continue
		}
		out = append(out, s.Name)
	}
	return out
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
	if len(p.sites) > 0 && (g.rec.ActiveSite != p.primary || g.rec.Epoch != p.epoch) {
		// Superseded: a restart would act on a re-assert that no longer holds.
		g.restarts, p = pendingRestarts{}, pendingRestarts{}
	}
	diverged := g.rec.Diverged
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
	if err := g.servers.repoint(ctx, p.primary, stopped); err != nil {
		g.log.Warn("reassert.restart_replicas_failed", "err", err)
		return
	}
	if err := g.servers.semiSync(ctx, p.primary, stopped); err != nil {
		g.log.Warn("semisync.reconfigure_failed", "err", err)
	}
}
