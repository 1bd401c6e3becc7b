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
	g.restartStoppedReplicas(ctx, d.Target)
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

// restartStoppedReplicas starts replication again, once primary is
// re-asserted, on the read-only sites still configured to replicate from it
// whose threads are stopped without an error: after every site went down
// (total loss) the replicas come back with their replication stopped, since
// servers start with skip_replica_start (docs/design.md; MySQL's my.cnf, and
// MariaDB's skip_slave_start), and no decision would start them again (they
// already "replicate from" the primary). Replicating from the re-asserted
// primary, which holds every transaction they hold, is what they did before
// the loss; the repoint re-checks containment. Best effort: a failure is
// logged and the site stays reported as not following.
func (g *group) restartStoppedReplicas(ctx context.Context, primary string) {
	g.mu.Lock()
	diverged := g.rec.Diverged
	g.mu.Unlock()
	var stopped []string
	for _, s := range g.obs.Observed().Sites {
		if _, ok := diverged[s.Name]; ok || s.Name == primary || s.State != statemachine.ReadOnly {
			continue
		}
		if s.ReplicatingFrom == primary && s.IOStopped && !s.ReplicationBroken {
			stopped = append(stopped, s.Name)
		}
	}
	if len(stopped) == 0 {
		return
	}
	g.log.Info("reassert.restart_replicas", "sites", stopped, "source", primary)
	if err := g.servers.repoint(ctx, primary, stopped); err != nil {
		g.log.Warn("reassert.restart_replicas_failed", "err", err)
		return
	}
	if err := g.servers.semiSync(ctx, primary, stopped); err != nil {
		g.log.Warn("semisync.reconfigure_failed", "err", err)
	}
}
