package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/daemon"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/test/testenv"
)

// failoverTimeout is generous for a loaded 2-core CI machine; detection and
// promotion take a few seconds when idle.
const failoverTimeout = 45 * time.Second

// killPrimaryUnderLoad is the core scenario: the daemon adopts site0, a
// write load runs, site0 is SIGKILLed, and the best replica must take over
// with every acknowledged write and writes resuming.
func killPrimaryUnderLoad(t *testing.T, e testenv.Engine, sites int) {
	g := newGroup(t, groupOptions{engine: e, sites: sites, cache: sites > 2})
	g.startDaemon()
	first := g.waitActive("site0", 30*time.Second)
	load := testenv.StartWriteLoad(t, testenv.AppDSNs(g.topo.Sites...), testenv.WriteLoadOptions{Workers: 2})
	load.WaitForAcks(t, 50, 20*time.Second)

	g.kill(0)
	// Either replica of three may be promoted: the one whose set covers the
	// other's (site2 when it received a commit site1 had not yet).
	n := g.promotedFrom("site0")
	name := fmt.Sprintf("site%d", n)
	st, err := g.status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Epoch != first.Epoch+2 {
		t.Errorf("epoch %d after failover, want %d (revoke + promote)", st.Epoch, first.Epoch+2)
	}
	g.waitHealthyOrDegraded(name)
	// The decisions after the promotion account for it: no false alarm
	// while the new primary's writable probes are still being counted.
	for _, r := range g.decisionsAfter(`"msg":"failover.promoted"`) {
		if strings.HasPrefix(r, "no-primary") {
			t.Errorf("decision %q after the promotion (decisions: %v)", r, g.decisionsAfter(`"msg":"failover.promoted"`))
		}
	}
	before := len(load.Acked())
	load.WaitForAcks(t, before+50, 30*time.Second) // writes resume on the new primary
	load.Stop()
	if missing := load.Missing(t, g.topo.Sites[n].AppDB(t)); len(missing) > 0 {
		t.Fatalf("%d acknowledged writes missing on the new primary: %v", len(missing), missing[:min(len(missing), 10)])
	}
	for i, r := range g.topo.Sites {
		if i == 0 || i == n {
			continue
		}
		g.waitFor(r.Name+" follows "+name, 30*time.Second, func() bool { return g.follows(r, g.topo.Sites[n]) })
		if missing := load.Missing(t, r.AppDB(t)); len(missing) > 0 {
			// Give replication a moment to apply the tail of the load.
			g.waitFor(r.Name+" has every acknowledged write", 20*time.Second, func() bool { return len(load.Missing(t, r.AppDB(t))) == 0 })
		}
	}
	if g.caches != nil {
		// The cache follows the MySQL primary: its site's Redis is the
		// master, every other cache replicates from it.
		g.waitFor("cache follows "+name, 30*time.Second, func() bool {
			if g.caches[n].Info(t, "replication")["role"] != "master" {
				return false
			}
			for i, c := range g.caches {
				info := c.Info(t, "replication")
				if i != n && (info["role"] != "slave" || info["master_port"] != fmt.Sprint(g.caches[n].Port)) {
					return false
				}
			}
			return true
		})
	}
	saved := g.stateFile()
	if saved.ActiveSite != name || saved.LastFailover == nil || saved.LastFailover.From != "site0" || saved.LastFailover.PromotionGTID == "" {
		t.Errorf("persisted state after failover: %+v (last failover %+v)", saved, saved.LastFailover)
	}
}

func TestKillPrimaryTwoSites(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) { killPrimaryUnderLoad(t, e, 2) })
}

func TestKillPrimaryThreeSites(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) { killPrimaryUnderLoad(t, e, 3) })
}

// A replica that stopped replicating lacks recent transactions: even with
// the higher priority it must not be promoted.
func TestLaggingReplicaIsNotPromoted(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, priorities: []int{0, 100, 0}})
		g.startDaemon()
		g.waitActive("site0", 30*time.Second)
		g.topo.Sites[0].Exec(t, "CREATE TABLE app.lag (id INT PRIMARY KEY)")
		g.topo.WaitReplicated(t, 20*time.Second)
		g.topo.Sites[1].Exec(t, "STOP REPLICA")
		for i := range 20 {
			g.topo.Sites[0].Exec(t, "INSERT INTO app.lag (id) VALUES (?)", i)
		}
		g.waitFor("site2 caught up", 20*time.Second, func() bool {
			return g.topo.Sites[2].QueryString(t, "SELECT COUNT(*) FROM app.lag") == "20"
		})
		g.kill(0)
		g.expectSolePrimary("site2")
	})
}

// A replica with an errant transaction (written on it directly) is marked
// diverged while the primary is alive and never promoted.
func TestErrantReplicaIsNotPromoted(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, priorities: []int{0, 0, 100}})
		g.startDaemon()
		g.waitActive("site0", 30*time.Second)
		g.topo.Sites[0].Exec(t, "CREATE TABLE app.errant (id INT PRIMARY KEY)")
		g.topo.WaitReplicated(t, 20*time.Second)
		// An operator's write on a replica, by hand.
		if err := operatorExec(t, g.topo.Sites[2], "INSERT INTO app.errant (id) VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		g.waitFor("site2 recorded as diverged", 20*time.Second, func() bool {
			_, ok := g.stateFile().Diverged["site2"]
			return ok
		})
		g.kill(0)
		g.expectSolePrimary("site1")
	})
}

// Cutting only the daemon→primary link is a partition, not an outage: the
// replicas still stream from the primary, so nothing fails over.
func TestDaemonPrimaryPartitionDoesNotFailOver(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, proxied: true})
		g.startDaemon()
		before := g.waitActive("site0", 30*time.Second)
		g.proxies[0].Cut()
		g.waitFor("partition detected", 20*time.Second, func() bool {
			st, err := g.status()
			return err == nil && st.Detection == "UnreachablePrimary"
		})
		time.Sleep(5 * time.Second) // far beyond detection: a failover would have started
		st, err := g.status()
		if err != nil {
			t.Fatal(err)
		}
		if st.ActiveSite != "site0" || st.Epoch != before.Epoch || st.InFlight != nil || st.Reason != "primary-partitioned" {
			t.Fatalf("after a daemon↔primary partition: %+v, want site0 still active at epoch %d", st, before.Epoch)
		}
		if w := g.writable(); !slices.Equal(w, []string{"site0"}) {
			t.Fatalf("writable: %v, want [site0]", w)
		}
	})
}

// A second kill within the cooldown is not failed over automatically, the
// status says why, and an operator's switchover works when forced (refused,
// with the reason, when not) once the operator also gives up the first
// failover's lost old primary (ack-holder-unreachable).
func TestCooldownBlocksSecondFailoverButSwitchoverWorks(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3})
		g.startDaemon()
		g.waitActive("site0", 30*time.Second)
		g.kill(0)
		g.waitActive("site1", failoverTimeout)
		g.waitFor("site2 follows site1", 30*time.Second, func() bool { return g.follows(g.topo.Sites[2], g.topo.Sites[1]) })
		// site1 seen writable with semi-sync in effect: only then may it have
		// acknowledged a write that lives on another site, which is what the
		// switchover below must wait for. Killed sooner (a fast run killed it
		// 120 ms after its promotion), the daemon rightly promotes at once:
		// whatever site1 acknowledged without semi-sync is lost either way.
		g.waitFor("site1 writable with semi-sync in effect", 30*time.Second, func() bool {
			st, err := g.status()
			return err == nil && st.RPO == "zero"
		})
		g.kill(1)
		g.waitFor("cooldown reason", 30*time.Second, func() bool {
			st, err := g.status()
			return err == nil && st.Reason == "cooldown"
		})
		st, _ := g.status()
		if st.ActiveSite != "site1" || !strings.Contains(st.Message, "cooldown") {
			t.Fatalf("status inside the cooldown: %+v", st)
		}
		code, body := g.post("/v1/groups/orders/switchover?target=site2")
		if code != 409 || !strings.Contains(body, "switchover-refused-cooldown") {
			t.Fatalf("switchover inside the cooldown, not forced: %d %s, want 409 naming the cooldown", code, body)
		}
		code, body = g.post("/v1/groups/orders/switchover?target=site2&force=true")
		if code != 202 {
			t.Fatalf("forced switchover: %d %s", code, body)
		}
		// site0, the first failover's old primary, is still dead: for all
		// the daemon can tell it may hold the only copy of a write site1
		// acknowledged (two sites lost), so the switchover waits until the
		// operator, who knows it is gone, gives it up.
		g.waitFor("the switchover waits for site0", failoverTimeout, func() bool {
			st, err := g.status()
			return err == nil && st.Reason == "ack-holder-unreachable" && strings.Contains(st.Message, "site0")
		})
		token := filepath.Join(g.dir, "api.token")
		if code, out, errOut := g.cli("confirm-fence", "orders", "site0", "--token-file", token); code != 0 {
			t.Fatalf("confirm-fence of the lost site0: exit %d\n%s%s", code, out, errOut)
		}
		g.expectSolePrimary("site2")
	})
}

// A refused switchover says why and changes nothing.
func TestSwitchoverToUnknownSiteIsRefused(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 2})
		g.startDaemon()
		before := g.waitHealthy("site0", 30*time.Second)
		code, body := g.post("/v1/groups/orders/switchover?target=nowhere")
		if code != 404 || !strings.Contains(body, "nowhere") {
			t.Fatalf("switchover to an unknown site: %d %s, want 404", code, body)
		}
		code, body = g.post("/v1/groups/orders/switchover?target=site0")
		if code != 409 || !strings.Contains(body, "switchover-refused-target-is-primary") {
			t.Fatalf("switchover to the primary: %d %s, want 409 with the reason", code, body)
		}
		if st, _ := g.status(); st.Epoch != before.Epoch || st.ActiveSite != "site0" {
			t.Fatalf("a refused switchover changed the state: %+v", st)
		}
	})
}

// The daemon SIGKILLed right after each step of the failover sequence and
// restarted must finish with exactly one writable site and the same epoch
// history as an uninterrupted failover.
func TestCrashAtEveryStepResumes(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		steps := []string{daemon.StepRevoked, daemon.StepRelayDrained, daemon.StepReplicationReset, daemon.StepPromotionRecorded, daemon.StepPublished, daemon.StepWritable, daemon.StepPromoted, daemon.StepRepointed}
		for _, step := range steps {
			t.Run(step, func(t *testing.T) {
				g := newGroup(t, groupOptions{engine: e, sites: 3})
				g.startDaemon()
				first := g.waitActive("site0", 30*time.Second)
				g.stopDaemon()
				g.startDaemon("FAILOVERD_FAILPOINT=" + step)
				g.waitActive("site0", 30*time.Second)
				g.kill(0)
				g.waitCrash(failoverTimeout)
				g.startDaemon()
				st := g.expectSolePrimary("site1")
				if st.Epoch != first.Epoch+2 {
					t.Errorf("epoch %d after a crash at %s, want %d", st.Epoch, step, first.Epoch+2)
				}
				g.waitFor("site2 follows site1", 30*time.Second, func() bool { return g.follows(g.topo.Sites[2], g.topo.Sites[1]) })
			})
		}
	})
}

// The old primary is fenced (read back) before a planned switchover
// promotes; a crash right after that fence resumes too.
func TestCrashAfterFencingOldPrimaryResumes(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 2})
		g.startDaemon()
		first := g.waitActive("site0", 30*time.Second)
		g.stopDaemon()
		g.startDaemon("FAILOVERD_FAILPOINT=" + daemon.StepOldPrimaryFenced)
		g.waitHealthy("site0", 30*time.Second)
		_, _, _ = g.tryPost("/v1/groups/orders/switchover?target=site1") // the daemon dies while answering
		g.waitCrash(failoverTimeout)
		if g.topo.Sites[0].QueryString(t, "SELECT @@global.read_only") != "1" {
			t.Fatal("old primary not fenced at the failpoint")
		}
		g.startDaemon()
		st := g.expectSolePrimary("site1")
		if st.Epoch != first.Epoch+2 {
			t.Errorf("epoch %d, want %d", st.Epoch, first.Epoch+2)
		}
		g.waitFor("site0 rejoins site1", 30*time.Second, func() bool { return g.follows(g.topo.Sites[0], g.topo.Sites[1]) })
	})
}

// A corrupt state file stops startup with a message naming the file and
// the way to recover; the file is left untouched.
func TestCorruptStateFileStopsStartup(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 2})
		path := filepath.Join(g.dir, "state.json")
		if err := os.WriteFile(path, []byte(`{"version":1,"groups":{"orders":`), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(binary, "run", "-c", g.config, "--log-format", "text").CombinedOutput()
		if err == nil {
			t.Fatalf("failoverd started on a corrupt state file:\n%s", out)
		}
		for _, want := range []string{path, "state is corrupt", "restore the file from a backup"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if b, _ := os.ReadFile(path); string(b) != `{"version":1,"groups":{"orders":` {
			t.Error("the corrupt state file was modified")
		}
	})
}

// An old primary that comes back with a write of its own (errant) is never
// rejoined: it stays fenced and the status shows its divergent set and the
// exact number of divergent transactions (one, not the sequence number).
// Then a human reclones it: a wrong token is refused with the reason, the
// right one re-seeds the site from the primary — on MariaDB the
// reclone.command hook (a real re-seed with mariadb-dump), on MySQL the
// daemon's own CLONE INSTANCE (the test restarts the cloned mysqld, as its
// supervisor would) — and the site rejoins with the primary's data, its
// errant write gone.
func TestReturningOldPrimaryWithErrantWriteStaysFenced(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		hook, err := filepath.Abs("testdata/reclone-mariadb-dump.sh")
		if err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf("    reclone:\n      command: [bash, %s]\n      timeout: 2m\n", hook)
		if e == testenv.MySQL {
			cfg = "    reclone:\n      timeout: 2m\n"
		}
		g := newGroup(t, groupOptions{engine: e, sites: 3, extraConfig: cfg})
		st, i := divergeOldPrimary(t, g)
		newSite := fmt.Sprintf("site%d", i)
		if d := st.Diverged[0]; d.Transactions != 1 || d.GTID == "" {
			t.Fatalf("divergence %+v, want exactly 1 transaction and its set", d)
		}
		if s, _ := st.Site("site0"); s.Recovery != status.RecoveryBlocked {
			t.Fatalf("site0 recovery %q, want %q", s.Recovery, status.RecoveryBlocked)
		}
		time.Sleep(2 * time.Second) // it must stay fenced, never rejoined
		if ro := readOnly(t, g.topo.Sites[0]); ro != "1" {
			t.Fatalf("the diverged old primary is writable (read_only=%s)", ro)
		}
		if g.follows(g.topo.Sites[0], g.topo.Sites[i]) {
			t.Fatal("the diverged old primary was rejoined")
		}
		if w := g.writable(); len(w) != 1 || w[0] != newSite {
			t.Fatalf("writable sites %v, want only %s", w, newSite)
		}

		// Reclone: the token repeats the start of the divergent set.
		token := filepath.Join(g.dir, "api.token")
		if code, _, errOut := g.cli("reclone", "orders", "site0", "--confirm-discard", "site0", "--token-file", token); code != 1 || !strings.Contains(errOut, "wrong reclone token") {
			t.Fatalf("reclone with a wrong token: exit %d %q, want 1 naming the token", code, errOut)
		}
		if ro := readOnly(t, g.topo.Sites[0]); ro != "1" || g.topo.Sites[0].QueryString(t, "SELECT COUNT(*) FROM app.errant_back WHERE id = 99") != "1" {
			t.Fatal("a refused reclone touched the site")
		}
		if e == testenv.MySQL {
			superviseRestart(t, g.topo.Sites[0])
		}
		code, out, errOut := g.cli("reclone", "orders", "site0", "--confirm-discard", st.Diverged[0].GTID, "--token-file", token, "--wait", "--timeout", "90s")
		if code != 0 {
			t.Fatalf("reclone: exit %d\n%s%s\n%s", code, out, errOut, g.logs.String())
		}
		g.waitFor("site0 rejoined with the primary's rows", 30*time.Second, func() bool {
			return g.follows(g.topo.Sites[0], g.topo.Sites[i]) &&
				g.topo.Sites[0].QueryString(t, "SELECT COUNT(*) FROM app.errant_back") == g.topo.Sites[i].QueryString(t, "SELECT COUNT(*) FROM app.errant_back")
		})
		if n := g.topo.Sites[0].QueryString(t, "SELECT COUNT(*) FROM app.errant_back WHERE id = 99"); n != "0" {
			t.Fatal("the errant write survived the reclone")
		}
		g.topo.Sites[i].Exec(t, "INSERT INTO app.errant_back VALUES (101)")
		g.waitFor("site0 replicates new writes", 15*time.Second, func() bool {
			return g.topo.Sites[0].QueryString(t, "SELECT COUNT(*) FROM app.errant_back WHERE id = 101") == "1"
		})
		st, _ = g.status()
		if len(st.Diverged) != 0 {
			t.Fatalf("still diverged after the reclone: %+v", st.Diverged)
		}
		// Recovery stays in-progress until a probe sees it caught up (lag 0).
		g.waitFor("site0's recovery over", 15*time.Second, func() bool {
			st, err := g.status()
			s, _ := st.Site("site0")
			return err == nil && s.Reclone == nil && s.Recovery == ""
		})
		logged := []string{`"msg":"reclone.started"`, `"msg":"reclone.succeeded"`}
		if e == testenv.MariaDB {
			logged = append(logged, `"msg":"reclone.output"`) // the hook's
		}
		for _, want := range logged {
			if !strings.Contains(g.logs.String(), want) {
				t.Errorf("the daemon's log lacks %s", want)
			}
		}
	})
}

// divergeOldPrimary kills the primary site0 of g (3 sites), lets the daemon
// fail over to site1, then brings site0 back with one errant write while no
// daemon watches, restarts the daemon and waits until site0 is marked
// diverged. The daemon is started with the admin account for reclone hooks.
func divergeOldPrimary(t testing.TB, g *group) (groupStatus, int) {
	t.Helper()
	var err error
	g.startDaemon()
	g.waitHealthy("site0", 30*time.Second)
	g.topo.Sites[0].Exec(t, "CREATE TABLE app.errant_back (id INT PRIMARY KEY)")
	for i := range 5 {
		g.topo.Sites[0].Exec(t, "INSERT INTO app.errant_back VALUES (?)", i)
	}
	g.waitFor("replicas caught up", 10*time.Second, func() bool {
		// Not QueryString: until site1 applied the CREATE TABLE the query
		// fails (1146), which is "not yet", not a failure.
		var n int
		err := g.topo.Sites[1].AdminDB(t).QueryRow("SELECT COUNT(*) FROM app.errant_back").Scan(&n)
		return err == nil && n == 5
	})
	g.kill(0)
	// Either replica may be promoted: under a write load site2 may have
	// received a commit site1 had not when site0 died.
	newIdx := g.promotedFrom("site0")
	// The other replica must replicate from the new primary before the old
	// one is back: one still pointed at site0 would receive its errant
	// write as well.
	third := 3 - newIdx
	g.waitFor(fmt.Sprintf("site%d follows site%d", third, newIdx), 30*time.Second, func() bool {
		return g.follows(g.topo.Sites[third], g.topo.Sites[newIdx])
	})
	g.topo.Sites[newIdx].Exec(t, "INSERT INTO app.errant_back VALUES (100)") // the new primary moves on
	// While no daemon watches, the old primary comes back and takes one
	// write nobody else has (an operator's, by hand, through read_only).
	g.stopDaemon()
	g.note("restart site0")
	if err := g.topo.Sites[0].Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	// operatorExec retries past the pool's connections to the killed
	// server. Semi-sync off: no replica would acknowledge this write.
	err = operatorExec(t, g.topo.Sites[0], "SET GLOBAL "+semiSyncSourceVar(g.engine, "enabled")+" = OFF", "INSERT INTO app.errant_back VALUES (99)")
	if err != nil && !strings.Contains(err.Error(), "Error 1062") { // 1062: an earlier attempt committed but its answer was lost
		t.Fatalf("errant write on site0: %v", err)
	}
	g.note("errant write on site0 by hand")
	// A reclone hook logs in as the admin account (root has no TCP login here).
	g.startDaemon("RECLONE_USER="+testenv.AdminUser, "RECLONE_PASSWORD_FILE="+filepath.Join(g.dir, "admin.pw"))
	g.waitFor("site0 marked diverged", 30*time.Second, func() bool {
		st, err := g.status()
		return err == nil && len(st.Diverged) == 1 && st.Diverged[0].Site == "site0"
	})
	st, err := g.status()
	if err != nil {
		t.Fatal(err)
	}
	return st, newIdx
}

// promotedFrom waits until a site other than from is the settled active
// site and the only writable one, and returns its index.
func (g *group) promotedFrom(from string) int {
	g.t.Helper()
	name := ""
	g.waitFor("a replica promoted", failoverTimeout, func() bool {
		s, err := g.status()
		name = s.ActiveSite
		return err == nil && name != "" && name != from && s.InFlight == nil
	})
	g.expectSolePrimary(name)
	return siteIndex(name)
}

// A diverged site a human repairs by hand (here: re-seeded from the primary
// outside failoverd, on MariaDB with the same dump script, on MySQL with
// CLONE INSTANCE and a restart) is found repaired on a later round: its
// divergence is cleared and it rejoins the primary.
func TestDivergedSiteRepairedByHandRejoins(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3})
		_, i := divergeOldPrimary(t, g)
		if e == testenv.MySQL {
			cloneByHand(t, g.topo.Sites[0], g.topo.Sites[i])
		} else {
			hook, err := filepath.Abs("testdata/reclone-mariadb-dump.sh")
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", hook, "site0", fmt.Sprintf("site%d", i))
			cmd.Env = append(os.Environ(), "RECLONE_USER="+testenv.AdminUser, "RECLONE_PASSWORD_FILE="+filepath.Join(g.dir, "admin.pw"),
				"FAILOVERD_SITE_ADDRESS="+g.topo.Sites[0].Addr(), "FAILOVERD_DONOR_ADDRESS="+g.topo.Sites[i].Addr())
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("repair by hand: %v\n%s", err, out)
			}
		}
		g.waitFor("the divergence cleared and site0 rejoined", 30*time.Second, func() bool {
			st, err := g.status()
			return err == nil && len(st.Diverged) == 0 && g.follows(g.topo.Sites[0], g.topo.Sites[i])
		})
		if !strings.Contains(g.logs.String(), "divergence-repaired") {
			t.Error("the daemon's log does not name the divergence-repaired decision")
		}
		g.topo.Sites[i].Exec(t, "INSERT INTO app.errant_back VALUES (102)")
		g.waitFor("site0 replicates new writes", 15*time.Second, func() bool {
			return g.topo.Sites[0].QueryString(t, "SELECT COUNT(*) FROM app.errant_back WHERE id = 102") == "1"
		})
	})
}

// A replica whose replication stopped on an error (here a duplicate key: a
// row written on it by hand, outside binary logging) is reported with that
// error in the status, the metrics and the decision, and left alone: never
// skipped past, never promoted.
func TestReplicaStoppedOnAnErrorIsReportedWithTheError(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3})
		g.startDaemon()
		g.waitHealthy("site0", 30*time.Second)
		g.topo.Sites[0].Exec(t, "CREATE TABLE app.drift (id INT PRIMARY KEY)")
		g.waitFor("site2 has the table", 10*time.Second, func() bool {
			return g.topo.Sites[2].QueryString(t, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'app' AND table_name = 'drift'") == "1"
		})
		// One session: sql_log_bin is per session.
		if err := operatorExec(t, g.topo.Sites[2], "SET SESSION sql_log_bin = 0", "INSERT INTO app.drift VALUES (7)"); err != nil {
			t.Fatal(err)
		}
		g.topo.Sites[0].Exec(t, "INSERT INTO app.drift VALUES (7)")
		g.waitFor("site2 reported broken with its error", 30*time.Second, func() bool {
			st, err := g.status()
			if err != nil {
				return false
			}
			s, _ := st.Site("site2")
			return st.Reason == "degraded-replication-broken" && s.Replication != nil && s.Replication.Broken && strings.Contains(s.Replication.LastError, "Duplicate entry")
		})
		if m := g.metrics(); !strings.Contains(m, `failoverd_site_replication_broken{group="orders",site="site2"} 1`) {
			t.Error("the metrics do not show site2's broken replication")
		}
		code, out, _ := g.cli("status")
		if code != 0 || !strings.Contains(out, "site2 REPLICATION STOPPED") || !strings.Contains(out, "Duplicate entry") || !strings.Contains(out, "degraded-replication-broken") {
			t.Errorf("failoverd status: exit %d\n%s", code, out)
		}
		// Left alone: the daemon neither skips the transaction nor repoints it.
		time.Sleep(2 * time.Second)
		if rs := g.topo.Sites[2].ReplicaStatus(t); rs["Slave_SQL_Running"] != "No" || rs["Last_SQL_Errno"] != "1062" {
			t.Fatalf("site2's replication after the error: SQL %s, errno %s", rs["Slave_SQL_Running"], rs["Last_SQL_Errno"])
		}
	})
}

// superviseRestart starts m again once it exits by itself, as mysqld's
// supervisor (systemd, mysqld_safe) does after a CLONE INSTANCE: testenv
// runs mysqld unsupervised, so the clone ends with the server stopped
// (error 3707). Stops watching at the end of the test.
func superviseRestart(t *testing.T, m *testenv.Server) {
	t.Helper()
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if m.Running() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			err := m.Restart(ctx)
			cancel()
			if err != nil {
				t.Logf("supervisor: restart %s: %v", m.Name, err)
			}
		}
	}()
}

// cloneByHand re-seeds the MySQL recipient from donor the way an operator
// does without failoverd: CLONE INSTANCE as the admin account (super_read_only
// lifted for it, read_only stays ON), then a restart of the stopped mysqld.
func cloneByHand(t *testing.T, recipient, donor *testenv.Server) {
	t.Helper()
	superviseRestart(t, recipient)
	err := execOnOneSession(t, recipient, []string{
		"SET GLOBAL clone_valid_donor_list = '" + donor.Addr() + "'",
		fmt.Sprintf("CLONE INSTANCE FROM '%s'@'%s':%d IDENTIFIED BY '%s'", testenv.AdminUser, donor.Host, donor.Port, testenv.AdminPassword)})
	// The session ends with the server: 3707 (not supervised, restart it)
	// or a lost connection is how a finished clone answers.
	if err != nil && !strings.Contains(err.Error(), "3707") && !strings.Contains(err.Error(), "invalid connection") &&
		!strings.Contains(err.Error(), "bad connection") && !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("CLONE INSTANCE by hand: %v", err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		var state string
		if recipient.Running() && recipient.AdminDB(t).QueryRow("SELECT state FROM performance_schema.clone_status").Scan(&state) == nil && state == "Completed" {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the clone of %s from %s did not complete within 90s", recipient.Name, donor.Name)
}
