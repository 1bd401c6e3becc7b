package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/daemon"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/test/benchdoc"
	"github.com/failoverd/failoverd/test/testenv"
)

// etcdPrefix is where the e2e daemons keep their state and election.
const etcdPrefix = "/failoverd/e2e"

var etcdEndpointRE = regexp.MustCompile(`endpoints: \[[^\]]*\]`)

// peerAt is a second daemon for the same sites whose etcd endpoint is url
// (each daemon talks to its own site's member).
func (g *group) peerAt(name, url string) *group {
	g.t.Helper()
	return g.peerWith(name, func(cfg string) string {
		return etcdEndpointRE.ReplaceAllString(cfg, "endpoints: ["+url+"]")
	})
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
func etcdGroup(t testing.TB, e testenv.Engine, viaProxy bool) (c *testenv.EtcdCluster, a, b, cc *group, px *testenv.Proxy) {
	t.Helper()
	c, ds, px := electedGroup(t, e, viaProxy, 3)
	return c, ds[0], ds[1], ds[2], px
}

// electedGroup starts a 3-site group and n leader-elected daemons sharing a
// 3-member etcd cluster, daemon i talking to site i's member (daemon0
// through the fault proxy px when viaProxy, which also puts the members'
// peer links behind proxies). Daemon0 starts first, with env (e.g. a
// failpoint), and leads; the others are followers that forward to it.
func electedGroup(t testing.TB, e testenv.Engine, viaProxy bool, n int, env ...string) (c *testenv.EtcdCluster, ds []*group, px *testenv.Proxy) {
	t.Helper()
	// Peer traffic through proxies, so a test can isolate a member.
	c = testenv.StartEtcdClusterWith(t, 3, testenv.EtcdClusterOptions{ProxiedPeers: viaProxy})
	url0 := c.Members[0].ClientURL()
	if viaProxy {
		px = testenv.NewProxy(t, "daemon0-to-etcd0", strings.TrimPrefix(url0, "http://"))
		url0 = "http://" + px.Addr()
	}
	a := newGroup(t, groupOptions{engine: e, sites: 3, etcd: url0})
	a.startDaemon(env...)
	a.waitFor("daemon0 leads", 30*time.Second, func() bool { st, err := a.status(); return err == nil && st.Leader })
	a.waitActive("site0", 30*time.Second)
	ds = []*group{a}
	for i := 1; i < n; i++ {
		d := a.peerAt(fmt.Sprintf("daemon%d", i), c.Members[i].ClientURL())
		d.startDaemon()
		ds = append(ds, d)
	}
	for _, d := range ds[1:] {
		d.waitFor("follower ready", 30*time.Second, func() bool {
			s, err := d.snapshot()
			// Status shows the leader, the store and this daemon's session.
			return err == nil && !s.Daemon.Leader && s.Daemon.Ready && s.Daemon.LeaderIdentity == "http://"+a.listen &&
				s.Daemon.StoreType == "etcd" && strings.HasPrefix(s.Daemon.Store, "etcd ") && strings.HasPrefix(s.Daemon.Session, "etcd session ")
		})
		// A follower forwards what only the leader answers (daemon.advertiseURL).
		resp, err := http.Get("http://" + d.listen + "/active-site")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Failoverd-Answered-By") != "http://"+a.listen {
			t.Fatalf("follower /active-site: %d answered by %q, want 200 from the leader", resp.StatusCode, resp.Header.Get("X-Failoverd-Answered-By"))
		}
	}
	return c, ds, px
}

// failedOverLeader waits until one of ds leads and has settled a failover
// away from site0, and returns it.
func failedOverLeader(timeout time.Duration, ds ...*group) *group {
	ds[0].t.Helper()
	var next *group
	ds[0].waitFor("a daemon elsewhere leads and settled the failover", timeout, func() bool {
		next = leader(ds...)
		if next == nil {
			return false
		}
		st, err := next.status()
		return err == nil && st.ActiveSite != "" && st.ActiveSite != "site0" && st.InFlight == nil
	})
	return next
}

// Losing a whole site — its daemon (the leader), its etcd member and its
// MariaDB primary at once — leaves two sites whose etcd quorum elects
// another daemon, which fails over with no acknowledged write lost.
func TestEtcdSiteLossFailsOver(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		took := siteLoss(t, e)
		t.Logf("site loss → new primary writable via a new leader in %v", took)
	})
}

// siteLoss runs the site-loss scenario and returns the time from the loss to
// the new primary accepting writes.
func siteLoss(t testing.TB, e testenv.Engine) time.Duration {
	c, a, b, cc, _ := etcdGroup(t, e, false)
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
	// What a user sees: the first surviving site that accepts writes.
	var took time.Duration
	for deadline := time.Now().Add(60 * time.Second); took == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no surviving site became writable within 60s")
		}
		for _, m := range a.topo.Sites[1:] {
			if readOnly(t, m) == "0" {
				took = time.Since(lost)
			}
		}
	}
	next := failedOverLeader(30*time.Second, b, cc)
	a.waitCrash(10 * time.Second)
	st, _ := next.status()
	newIdx := siteIndex(st.ActiveSite)
	if w := next.writable(); !slices.Equal(w, []string{st.ActiveSite}) {
		t.Fatalf("writable sites %v, want only %s", w, st.ActiveSite)
	}
	before := len(load.Acked())
	load.WaitForAcks(t, before+50, 30*time.Second)
	load.Stop()
	if missing := load.Missing(t, a.topo.Sites[newIdx].AppDB(t)); len(missing) > 0 {
		t.Fatalf("%d acknowledged writes missing on %s: %v", len(missing), st.ActiveSite, missing[:min(len(missing), 10)])
	}
	return took
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
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		for _, cut := range []string{"daemon-to-member", "member-from-quorum"} {
			t.Run(cut, func(t *testing.T) { partitionedLeader(t, e, cut) })
		}
	})
}

// partitionedLeader cuts the leading daemon off the etcd quorum — its
// client link to its member, or its member's links to the other members —
// and kills the primary at the same moment.
func partitionedLeader(t *testing.T, e testenv.Engine, cut string) {
	c, a, b, cc, px := etcdGroup(t, e, true)
	snap, err := a.snapshot()
	if err != nil || !snap.Daemon.Leader {
		t.Fatalf("daemon0 not leading: %+v %v", snap.Daemon, err)
	}
	oldID := snap.Daemon.Identity
	if cut == "daemon-to-member" {
		px.Cut()
	} else if err := c.Members[0].Isolate(); err != nil {
		t.Fatal(err)
	}
	a.kill(0)
	cutAt := time.Now()
	next := failedOverLeader(60*time.Second, b, cc)
	t.Logf("%s: failed over by a new leader %v after the cut", cut, time.Since(cutAt))
	// Read through a member of the quorum (member0 may be the one cut off).
	deposedLeaderIdle(t, c.Members[1], a, next, oldID)
	if w := next.writable(); len(w) != 1 {
		t.Fatalf("writable sites %v", w)
	}
}

// deposedLeaderIdle checks that the deposed leader old (identity oldID)
// stopped acting once next took over: by both daemons' logs, old logged no
// step after next's first one, and by the store's history (read through
// member), old wrote no revision after next's first.
func deposedLeaderIdle(t testing.TB, member *testenv.EtcdMember, old, next *group, oldID string) {
	t.Helper()
	time.Sleep(2 * time.Second) // give a lingering old leader the chance to misbehave
	deposedLoggedNoStep(t, old, next)
	// The store's own history: once the new leader wrote, nothing by the old.
	hist, err := store.NewEtcd(member.Client(t), etcdPrefix, time.Now).History(context.Background(), "orders")
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
}

// Every daemon restarted in the middle of a failover resumes it from etcd,
// as from the file store: one writable site, the epoch of one failover.
func TestEtcdRestartAllMidFailoverResumes(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		_, a, b, cc, _ := etcdGroup(t, e, false)
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
	})
}

// BenchmarkSiteLoss measures the loss of a whole site with the etcd control
// plane: the leader daemon, its etcd member and the database primary of the
// same site SIGKILLed at once, until a surviving site accepts writes (a new
// leader elected elsewhere, then the failover), on every selected engine
// (BenchmarkSiteLoss/mariadb, /mysql). Run it with FAILOVERD_BENCH_WRITE=1
// to rewrite docs/benchmarks/site-loss.md, one row per engine that ran:
//
//	FAILOVERD_BENCH_WRITE=1 go test -run '^$' -bench BenchmarkSiteLoss -benchtime 1x ./test/e2e/
func BenchmarkSiteLoss(b *testing.B) {
	if testing.Short() {
		b.Skip("starts real servers")
	}
	const runs = 5
	load := benchdoc.LoadAverage()
	var rep engineReport
	testenv.ForEachEngineB(b, func(b *testing.B, e testenv.Engine) {
		rep.add(b, e, "site loss → writable", benchdoc.Runs(b, runs, func(tb testing.TB) time.Duration { return siteLoss(tb, e) }))
	})
	if b.Failed() || !benchdoc.Enabled() {
		return
	}
	benchdoc.Write(b, "../..", "site-loss.md", fmt.Sprintf(`# Site loss with the etcd control plane: site lost → a surviving site writable

%s
- Load average when the benchmark started: %s

## Setup

- 3 database sites per engine (MariaDB 10.11, MySQL 9.7; semi-sync on), a
  3-member etcd 3.7 cluster (one member per site) and 3 failoverd daemons,
  each talking to its own site's member, all on 127.0.0.1; a write load of
  2 workers.
- Election in etcd with leaseDuration (session TTL) 2s, retryPeriod 300ms;
  pollInterval 500ms, probeTimeout 400ms, fencing confirmed.
- Each run: a fresh group led by site0's daemon; SIGKILL site0's daemon, its
  etcd member and its database server at once; measure until site1 or
  site2 answers read_only=0 (polled every 20ms). Every run also checks that no
  acknowledged write is missing on the new primary.
- The time is the old leader's session expiring (up to the 2s TTL after its
  last renewal), a daemon elsewhere winning the election and re-reading the
  state, then the failover itself (see failover.md).

## Results (%d runs per engine)

| engine | runs | min | p50 | p90 | max | mean |
|---|--:|--:|--:|--:|--:|--:|
%s
%sReproduce: `+"`FAILOVERD_BENCH_WRITE=1 go test -run '^$' -bench BenchmarkSiteLoss -benchtime 1x ./test/e2e/`"+`
(FAILOVERD_TEST_ENGINE=mariadb or mysql for one engine only)
`, benchdoc.MachineInfo(), load, runs, rep.rows.String(), rep.raw.String()))
}
