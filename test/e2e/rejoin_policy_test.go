package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/test/testenv"
)

// TestCrashedOldPrimaryRejoinsUnderRecloneUnacknowledged: with rejoin
// reclone-unacknowledged (and fencing semisync), an old primary killed under
// write load while its last commits waited for an acknowledgement comes back
// and rejoins the new primary without a human. The replicas' links to it are
// cut first, so its last commits are binlogged (AFTER_SYNC) and never
// acknowledged: a deterministic unacknowledged tail. What it holds beyond the
// new primary is read before the daemon may touch it and checked against the
// write load's ack log: none of it was acknowledged. On MySQL crash recovery
// keeps that tail and the policy reclones the site with CLONE (the test
// restarts the cloned mysqld, as its supervisor would); the history records
// exactly the tail. MariaDB's semi-sync crash recovery may truncate the tail
// itself, in which case the site simply rejoins; with a tail left, the
// policy reclones it through reclone.command.
func TestCrashedOldPrimaryRejoinsUnderRecloneUnacknowledged(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		cfg := "    rejoin: reclone-unacknowledged\n    reclone:\n      timeout: 2m\n"
		if e == testenv.MariaDB {
			hook, err := filepath.Abs("testdata/reclone-mariadb-dump.sh")
			if err != nil {
				t.Fatal(err)
			}
			cfg = fmt.Sprintf("    rejoin: reclone-unacknowledged\n    reclone:\n      command: [bash, %s]\n      timeout: 2m\n", hook)
		}
		g := newGroup(t, groupOptions{engine: e, sites: 3, isolatable: true, fencing: "semisync",
			semiSyncTimeoutMs: infiniteSemiSync, extraConfig: cfg})
		site0 := g.topo.Sites[0]
		// What the proof needs of the primary's my.cnf: the infinite timeout
		// (newGroup sets it at run time) and the AFTER_SYNC wait point
		// (MySQL's default, not MariaDB's). A restart forgets run-time
		// settings, so they are set again on the returning site below.
		semiSyncSettings := []string{
			fmt.Sprintf("SET GLOBAL %s = %d", semiSyncSourceVar(e, "timeout"), uint64(infiniteSemiSync)),
			fmt.Sprintf("SET GLOBAL %s = AFTER_SYNC", semiSyncSourceVar(e, "wait_point")),
		}
		for _, q := range semiSyncSettings {
			site0.Exec(t, q)
		}
		g.startDaemon("RECLONE_USER="+testenv.AdminUser, "RECLONE_PASSWORD_FILE="+filepath.Join(g.dir, "admin.pw"))
		g.waitHealthy("site0", 30*time.Second)
		wl := testenv.StartWriteLoad(t, testenv.AppDSNs(g.topo.Sites...), testenv.WriteLoadOptions{Workers: 2})
		wl.WaitForAcks(t, 100, 30*time.Second)

		// No replica can acknowledge any more: the next commits wait,
		// binlogged. Then the primary dies with them.
		g.replProxies[0].Cut()
		time.Sleep(time.Second)
		acksAtKill := len(wl.Acked())
		g.kill(0)
		// Either replica may be promoted: the one that received more of
		// site0's stream before the cut wins (on a busy machine site2 as
		// often as site1).
		newIdx := g.promotedFrom("site0")
		newP, other := g.topo.Sites[newIdx], g.topo.Sites[3-newIdx]
		wl.WaitForAcks(t, acksAtKill+50, 30*time.Second)
		g.waitFor(other.Name+" follows "+newP.Name, 30*time.Second, func() bool { return g.follows(other, newP) })

		// The old primary comes back while the daemon cannot reach it: what
		// it holds beyond the new primary is read before anything touches it.
		g.proxies[0].Cut()
		if e == testenv.MySQL {
			superviseRestart(t, site0) // restarts it now, and again after CLONE
		} else if err := site0.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		g.waitFor("site0 answers after its crash", 60*time.Second, func() bool { _, err := site0.AdminDB(t).Exec("SELECT 1"); return err == nil })
		flavor := gtid.MySQL
		if e == testenv.MariaDB {
			flavor = gtid.MariaDB
		}
		oldSet := gtid.MustParse(flavor, executedForDivergence(t, site0))
		newSet := gtid.MustParse(flavor, executedForDivergence(t, newP))
		tail := newSet.Uncovered(oldSet)
		extraRows := rowsOnlyOn(t, wl.Run(), site0, newP)
		acked := map[int64]bool{}
		for _, id := range wl.Acked() {
			acked[id] = true
		}
		for _, id := range extraRows {
			if acked[id] {
				t.Fatalf("row %d is on the old primary only, yet it was acknowledged: a lost acknowledged write", id)
			}
		}
		t.Logf("%s came back with %d transaction(s) %s lacks (%s), %d write-load row(s); none acknowledged",
			site0.Name, tail.Count(), newP.Name, tail.Compact(), len(extraRows))
		if e == testenv.MySQL && tail.IsEmpty() {
			t.Fatal("test setup: the crash left no unacknowledged tail on MySQL (commits were not waiting for an acknowledgement)")
		}
		for _, q := range semiSyncSettings {
			site0.Exec(t, q)
		}
		g.proxies[0].Restore()

		// The daemon's view first: site0 is down for a while during a reclone
		// (CLONE restarts it), when asking it directly would fail the test.
		g.waitFor("site0 rejoins "+newP.Name, 150*time.Second, func() bool {
			st, err := g.status()
			if err != nil {
				return false
			}
			s, ok := st.Site("site0")
			return ok && s.ReplicatingFrom == newP.Name && s.Diverged == "" && s.Reclone == nil && site0.Running() && g.follows(site0, newP)
		})
		if !tail.IsEmpty() {
			// The history names exactly what was thrown away.
			var found bool
			for _, a := range g.stateFile().Audit {
				if a.Site == "site0" && a.By == sitepair.RecloneByPolicy && strings.HasPrefix(a.Result, "accepted") {
					found = true
					if !strings.Contains(a.Result, tail.String()) || !strings.Contains(a.Result, fmt.Sprintf("discarding %d ", gtid.DivergentCount(oldSet, newSet))) {
						t.Errorf("history entry %q does not name the discarded tail %s (%d)", a.Result, tail, gtid.DivergentCount(oldSet, newSet))
					}
				}
			}
			if !found {
				t.Fatalf("no history entry of the policy reclone:\n%s", g.logs.String())
			}
			if !strings.Contains(g.logs.String(), string(sitepair.ReasonRecloneUnacknowledgedTail)) {
				t.Errorf("the daemon logged no %s decision", sitepair.ReasonRecloneUnacknowledgedTail)
			}
			if n := len(rowsOnlyOn(t, wl.Run(), site0, newP)); n != 0 {
				t.Errorf("site0 still holds %d row(s) %s lacks after the reclone", n, newP.Name)
			}
		}
		wl.Stop()
		if m := wl.Missing(t, newP.AdminDB(t)); len(m) > 0 {
			t.Fatalf("acknowledged writes lost on the new primary: %v", m)
		}
		g.waitFor("site0 holds every acknowledged write", 30*time.Second, func() bool { return len(wl.Missing(t, site0.AdminDB(t))) == 0 })
		if w := g.writable(); len(w) != 1 || w[0] != newP.Name {
			t.Fatalf("writable sites %v, want only %s", w, newP.Name)
		}
	})
}

// executedForDivergence is what the daemon compares: MySQL
// @@gtid_executed, MariaDB @@gtid_binlog_state (one entry per domain and
// server).
func executedForDivergence(t *testing.T, m *testenv.Server) string {
	t.Helper()
	if m.Engine == testenv.MySQL {
		return m.QueryString(t, "SELECT @@GLOBAL.gtid_executed")
	}
	return m.QueryString(t, "SELECT @@GLOBAL.gtid_binlog_state")
}

// rowsOnlyOn returns the write-load rows of run that a holds and b lacks.
func rowsOnlyOn(t *testing.T, run string, a, b *testenv.Server) []int64 {
	t.Helper()
	ids := func(m *testenv.Server) []int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rows, err := m.AdminDB(t).QueryContext(ctx, "SELECT id FROM "+testenv.WriteLoadTable+" WHERE run = ?", run)
		if err != nil {
			t.Fatalf("%s: write-load rows: %v", m.Name, err)
		}
		defer rows.Close()
		var out []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out = append(out, id)
		}
		return out
	}
	// a first: when a replicates from b, rows b takes after a was read
	// cannot show up as a's alone.
	onA := ids(a)
	have := ids(b)
	var only []int64
	for _, id := range onA {
		if !slices.Contains(have, id) {
			only = append(only, id)
		}
	}
	return only
}
