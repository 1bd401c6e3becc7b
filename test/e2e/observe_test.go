package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/test/testenv"
)

// TestObserveModeKillPrimaryWritesNothing: a group of real servers (and a
// Redis per site) under a write load, its primary site0 killed with SIGKILL
// while the daemon runs it in observe mode. The daemon changes nothing,
// checked on the servers: every running site stays read-only, each replica
// still replicates from site0 (IO thread not stopped), the semi-sync
// settings and the cache roles are as they were, the state file keeps
// epoch 1 naming site0. It logs a would-decision naming the failover to a
// candidate; switched to active (a restart) on the same servers, the
// daemon's first decision that acts is that one, and it fails over with
// no acknowledged write lost.
func TestObserveModeKillPrimaryWritesNothing(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, cache: true, extraConfig: "    mode: active\n"})
		// An active run records site0 as the primary (epoch 1), then the
		// group is switched to observe mode.
		g.startDaemon()
		g.waitHealthy("site0", 30*time.Second)
		g.stopDaemon()
		g.setMode("observe")
		g.startDaemon()
		g.waitFor("observing, site0 healthy", 30*time.Second, func() bool {
			st, err := g.status()
			return err == nil && st.Mode == status.ModeObserve && st.Reason == "healthy" && st.Epoch == 1
		})
		load := testenv.StartWriteLoad(t, testenv.AppDSNs(g.topo.Sites...), testenv.WriteLoadOptions{Workers: 2})
		load.WaitForAcks(t, 50, 20*time.Second)
		before := g.serverSettings(1, 2) // the replicas: site0 is about to die

		g.kill(0)
		g.waitFor("a would-decision to fail over", failoverTimeout, func() bool { return len(g.wouldFailovers()) > 0 })
		time.Sleep(5 * time.Second) // well past the steps an active daemon would have run by now
		would := g.wouldFailovers()[0]
		if would.Target != "site1" && would.Target != "site2" || would.Epoch != 2 || would.From != "site0" {
			t.Errorf("would-decision %+v, want a failover from site0 to a candidate at epoch 2", would)
		}
		if after := g.serverSettings(1, 2); after != before {
			t.Errorf("the observing daemon changed the servers:\nbefore %s\nafter  %s", before, after)
		}
		if w := g.writable(); len(w) != 0 {
			t.Errorf("writable sites %v while observing, want none (site0 is dead)", w)
		}
		g.checkCacheMaster(0)
		st, err := g.status()
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode != status.ModeObserve || st.Epoch != 1 || st.ActiveSite != "site0" || st.InFlight != nil || st.Action != "revoke-epoch" {
			t.Errorf("status while observing: %+v", st.Group)
		}
		if saved := g.stateFile(); saved.Epoch != 1 || saved.ActiveSite != "site0" || saved.InFlight != nil {
			t.Errorf("state file %+v, want epoch 1 naming site0", saved)
		}
		for _, msg := range []string{"epoch.revoked", "site.fenced", "site.io_stopped", "site.repointed", "follow.done", "failover.promoted"} {
			if strings.Contains(g.logs.String(), `"msg":"`+msg+`"`) {
				t.Errorf("the observing daemon logged %s", msg)
			}
		}
		g.stopDaemon()

		// Active on the same servers: it decides what the observer said it
		// would, and carries it out.
		g.setMode("active")
		g.startDaemon()
		n := g.promotedFrom("site0")
		if first := g.firstActingDecision(); first.Action != would.Action || first.Target != would.Target || first.Epoch != would.Epoch {
			t.Errorf("the active daemon's first acting decision %+v, the observer's would-decision %+v", first, would)
		}
		if fmt.Sprintf("site%d", n) != would.Target {
			t.Errorf("site%d promoted, the observer would have promoted %s", n, would.Target)
		}
		acked := len(load.Acked())
		load.WaitForAcks(t, acked+20, 30*time.Second)
		load.Stop()
		if missing := load.Missing(t, g.topo.Sites[n].AppDB(t)); len(missing) > 0 {
			t.Fatalf("%d acknowledged writes missing on the new primary", len(missing))
		}
	})
}

// setMode rewrites the group's mode in the daemon's configuration.
func (g *group) setMode(mode string) {
	g.t.Helper()
	b, err := os.ReadFile(g.config)
	if err != nil {
		g.t.Fatal(err)
	}
	cfg := string(b)
	for _, m := range []string{"active", "observe"} {
		cfg = strings.Replace(cfg, "    mode: "+m+"\n", "    mode: "+mode+"\n", 1)
	}
	if err := os.WriteFile(g.config, []byte(cfg), 0o600); err != nil {
		g.t.Fatal(err)
	}
}

// loggedDecision is a decision or decision.would log line.
type loggedDecision struct {
	Msg, Action, Reason, Target, From string
	Epoch                             uint64
}

// decisionLines are the current daemon's decision log lines with message msg.
func (g *group) decisionLines(msg string) []loggedDecision {
	var out []loggedDecision
	for _, line := range strings.Split(g.logs.String(), "\n") {
		var l loggedDecision
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == msg {
			out = append(out, l)
		}
	}
	return out
}

// wouldFailovers are the observing daemon's would-decisions to revoke the
// epoch (the failover's first step).
func (g *group) wouldFailovers() []loggedDecision {
	var out []loggedDecision
	for _, d := range g.decisionLines("decision.would") {
		if d.Action == "revoke-epoch" {
			out = append(out, d)
		}
	}
	return out
}

// firstActingDecision is the current daemon's first logged decision that
// acts (neither none nor alert).
func (g *group) firstActingDecision() loggedDecision {
	for _, d := range g.decisionLines("decision") {
		if d.Action != "none" && d.Action != "alert" {
			return d
		}
	}
	return loggedDecision{}
}

// serverSettings is what a daemon's write would change on the sites
// numbered sites: read_only (and super_read_only on MySQL), the semi-sync
// sides, the replication source and whether the IO thread was stopped.
func (g *group) serverSettings(sites ...int) string {
	var b strings.Builder
	for _, i := range sites {
		m := g.topo.Sites[i]
		sro := "-"
		if g.engine == testenv.MySQL {
			sro = m.QueryString(g.t, "SELECT @@global.super_read_only")
		}
		src := m.QueryString(g.t, "SELECT @@global."+semiSyncSourceVar(g.engine, "enabled"))
		rep := m.QueryString(g.t, "SELECT @@global."+semiSyncReplicaVar(g.engine, "enabled"))
		rs := m.ReplicaStatus(g.t)
		// "Connecting" while site0 is dead: only a stop makes it "No".
		io := rs["Slave_IO_Running"] != "No" && rs["Slave_IO_Running"] != ""
		fmt.Fprintf(&b, "site%d ro=%s sro=%s semisync=%s/%s source=%s io=%v; ", i, readOnly(g.t, m), sro, src, rep, rs["Master_Port"], io)
	}
	return b.String()
}

// checkCacheMaster checks site i's Redis is still the master and every
// other running one replicates from it.
func (g *group) checkCacheMaster(i int) {
	g.t.Helper()
	if g.caches[i].Info(g.t, "replication")["role"] != "master" {
		g.t.Errorf("cache%d is no longer the master", i)
	}
	for j, c := range g.caches {
		if info := c.Info(g.t, "replication"); j != i && (info["role"] != "slave" || info["master_port"] != fmt.Sprint(g.caches[i].Port)) {
			g.t.Errorf("cache%d: role %s of port %s, want a replica of cache%d", j, info["role"], info["master_port"], i)
		}
	}
}
