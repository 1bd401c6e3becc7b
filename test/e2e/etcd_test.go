package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/daemon"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/test/testenv"
)

// etcdPrefix is where the e2e daemons keep their state and election.
const etcdPrefix = "/failoverd/e2e"

var etcdEndpointRE = regexp.MustCompile(`endpoints: \[[^\]]*\]`)

// peerAt is a second daemon for the same sites whose etcd endpoint is url
// (each daemon talks to its own site's member).
func (g *group) peerAt(name, url string) *group {
	g.t.Helper()
	b, err := os.ReadFile(g.config)
	if err != nil {
		g.t.Fatal(err)
	}
	p := &group{t: g.t, topo: g.topo, dir: g.dir, listen: freeAddr(g.t), proxies: g.proxies}
	p.config = filepath.Join(g.dir, name+".yaml")
	cfg := strings.Replace(string(b), "listen: "+g.listen, "listen: "+p.listen, 1)
	cfg = etcdEndpointRE.ReplaceAllString(cfg, "endpoints: ["+url+"]")
	if err := os.WriteFile(p.config, []byte(cfg), 0o600); err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(p.stopDaemon)
	return p
}

// snapshot is the daemon's whole status document.
func (g *group) snapshot() (status.Snapshot, error) {
	resp, err := http.Get("http://" + g.listen + "/v1/groups")
	if err != nil {
		return status.Snapshot{}, err
	}
	defer resp.Body.Close()
	var s status.Snapshot
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// leader returns the first daemon of ds that says it leads, or nil.
func leader(ds ...*group) *group {
	for _, d := range ds {
		if st, err := d.status(); err == nil && st.Leader {
			return d
		}
	}
	return nil
}

// etcdGroup starts a 3-site group whose three daemons each talk to their
// own site's member of a 3-member etcd cluster; daemon a (site0's) starts
// first and leads.
func etcdGroup(t *testing.T, viaProxy bool) (c *testenv.EtcdCluster, a, b, cc *group, px *testenv.Proxy) {
	t.Helper()
	c = testenv.StartEtcdCluster(t, 3)
	url0 := c.Members[0].ClientURL()
	if viaProxy {
		px = testenv.NewProxy(t, "daemon0-to-etcd0", strings.TrimPrefix(url0, "http://"))
		url0 = "http://" + px.Addr()
	}
	a = newGroup(t, groupOptions{sites: 3, etcd: url0})
	a.startDaemon()
	a.waitFor("daemon0 leads", 30*time.Second, func() bool { st, err := a.status(); return err == nil && st.Leader })
	a.waitActive("site0", 30*time.Second)
	b = a.peerAt("daemon1", c.Members[1].ClientURL())
	b.startDaemon()
	cc = a.peerAt("daemon2", c.Members[2].ClientURL())
	cc.startDaemon()
	for _, d := range []*group{b, cc} {
		d.waitFor("follower ready", 30*time.Second, func() bool {
			s, err := d.snapshot()
			return err == nil && !s.Daemon.Leader && s.Daemon.Ready && s.Daemon.LeaderIdentity != ""
		})
	}
	return c, a, b, cc, px
}

// Losing a whole site — its daemon (the leader), its etcd member and its
// MariaDB primary at once — leaves two sites whose etcd quorum elects
// another daemon, which fails over with no acknowledged write lost.
func TestEtcdSiteLossFailsOver(t *testing.T) {
	c, a, b, cc, _ := etcdGroup(t, false)
	load := testenv.StartWriteLoad(t, testenv.AppDSNs(a.topo.Sites...), testenv.WriteLoadOptions{Workers: 2})
	load.WaitForAcks(t, 50, 20*time.Second)
	lost := time.Now()
	a.mu.Lock()
	_ = a.cmd.Process.Kill()
	a.mu.Unlock()
	if err := c.Members[0].Kill(); err != nil {
		t.Fatal(err)
	}
	a.kill(0)
	a.waitCrash(10 * time.Second)
	var next *group
	b.waitFor("a daemon elsewhere leads and fails over", 60*time.Second, func() bool {
		next = leader(b, cc)
		if next == nil {
			return false
		}
		st, err := next.status()
		return err == nil && st.ActiveSite != "" && st.ActiveSite != "site0" && st.InFlight == nil
	})
	st, _ := next.status()
	newIdx := siteIndex(st.ActiveSite)
	g := next
	g.waitFor(st.ActiveSite+" accepts writes", 30*time.Second, func() bool { return slices.Equal(g.writable(), []string{st.ActiveSite}) })
	took := time.Since(lost)
	t.Logf("site loss → %s writable via a new leader in %v", st.ActiveSite, took)
	before := len(load.Acked())
	load.WaitForAcks(t, before+50, 30*time.Second)
	load.Stop()
	if missing := load.Missing(t, a.topo.Sites[newIdx].AppDB(t)); len(missing) > 0 {
		t.Fatalf("%d acknowledged writes missing on %s: %v", len(missing), st.ActiveSite, missing[:min(len(missing), 10)])
	}
}

// stepMessages are the log lines of actions that change a server or the
// group state: the old leader must log none after the new leader's first.
var stepMessages = []string{"epoch.revoked", "site.fenced", "site.io_stopped", "relay.drained", "failover.promoted", "site.repointed",
	"semisync.primary_enabled", "mysqlctl: promoted", "mysqlctl: fenced", "mysqlctl: replica reset", "mysqlctl: replicating"}

// stepTimes returns the times of the step lines in a daemon's log.
func stepTimes(logs string) []time.Time {
	var out []time.Time
	for _, line := range strings.Split(logs, "\n") {
		var l struct {
			Time time.Time
			Msg  string
		}
		if json.Unmarshal([]byte(line), &l) == nil && slices.Contains(stepMessages, l.Msg) {
			out = append(out, l.Time)
		}
	}
	return out
}

// A leader cut off from the etcd quorum while the primary dies stops
// acting before another daemon is elected: it performs no step after the
// new leader's first one, by both daemons' logs and by the store's history.
func TestEtcdPartitionedLeaderStopsActing(t *testing.T) {
	c, a, b, cc, px := etcdGroup(t, true)
	snap, err := a.snapshot()
	if err != nil || !snap.Daemon.Leader {
		t.Fatalf("daemon0 not leading: %+v %v", snap.Daemon, err)
	}
	oldID := snap.Daemon.Identity
	px.Cut()
	a.kill(0)
	var next *group
	b.waitFor("another daemon leads and fails over", 60*time.Second, func() bool {
		next = leader(b, cc)
		if next == nil {
			return false
		}
		st, err := next.status()
		return err == nil && st.ActiveSite != "" && st.ActiveSite != "site0" && st.InFlight == nil
	})
	time.Sleep(2 * time.Second) // give a lingering old leader the chance to misbehave
	newSteps := stepTimes(next.logs.String())
	if len(newSteps) == 0 {
		t.Fatal("the new leader logged no step")
	}
	first := slices.MinFunc(newSteps, func(x, y time.Time) int { return x.Compare(y) })
	for _, at := range stepTimes(a.logs.String()) {
		if !at.Before(first) {
			t.Errorf("the partitioned old leader logged a step at %s, after the new leader's first at %s", at.Format(time.RFC3339Nano), first.Format(time.RFC3339Nano))
		}
	}
	// The store's own history: once the new leader wrote, nothing by the old.
	hist, err := store.NewEtcd(c.Client(t), etcdPrefix, time.Now).History(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	newID := ""
	if s, err := next.snapshot(); err == nil {
		newID = s.Daemon.Identity
	}
	seenNew := false
	for _, r := range hist {
		seenNew = seenNew || r.State.UpdatedBy == newID
		if seenNew && r.State.UpdatedBy == oldID {
			t.Errorf("revision %d written by the deposed leader %s after the new leader %s wrote", r.ModRevision, oldID, newID)
		}
	}
	if !seenNew {
		t.Fatalf("no revision by the new leader %s in %d revisions", newID, len(hist))
	}
	if w := next.writable(); len(w) != 1 {
		t.Fatalf("writable sites %v", w)
	}
}

// Every daemon restarted in the middle of a failover resumes it from etcd,
// as from the file store: one writable site, the epoch of one failover.
func TestEtcdRestartAllMidFailoverResumes(t *testing.T) {
	_, a, b, cc, _ := etcdGroup(t, false)
	first, _ := a.status()
	b.stopDaemon()
	cc.stopDaemon()
	a.stopDaemon()
	a.startDaemon("FAILOVERD_FAILPOINT=" + daemon.StepRelayDrained)
	a.waitFor("daemon0 leads again", 30*time.Second, func() bool { st, err := a.status(); return err == nil && st.Leader })
	a.kill(0)
	a.waitCrash(failoverTimeout)
	for _, d := range []*group{a, b, cc} {
		d.startDaemon()
	}
	var next *group
	a.waitFor("the failover resumes", 60*time.Second, func() bool {
		next = leader(a, b, cc)
		if next == nil {
			return false
		}
		st, err := next.status()
		return err == nil && st.ActiveSite == "site1" && st.InFlight == nil
	})
	st := next.expectSolePrimary("site1")
	if st.Epoch != first.Epoch+2 {
		t.Errorf("epoch %d after resuming, want %d", st.Epoch, first.Epoch+2)
	}
}
