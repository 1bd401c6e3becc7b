package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/testenv"
	"github.com/failoverd/failoverd/view"
)

// Automatic failover of a hung (SIGSTOP) or isolated primary, with the two
// proofs that make it safe: semi-sync fencing and the self-fencing sidecar
// (issue 12). Every scenario runs a write load that logs each acknowledged
// write with the site that acknowledged it, and checks that none is lost and
// that the old primary acknowledged nothing after the new one's first ack.

// viewKey is the view signing key the harness configures.
const viewKey = "e2e-view-signing-key-0123456789abcdef" // at least preflight.MinViewKeyBytes

// infiniteSemiSync is the semi-sync timeout the semisync proof needs (ms).
const infiniteSemiSync = 4294967295

// sidecarProc is one `failoverd sidecar` process.
type sidecarProc struct {
	cmd    *exec.Cmd
	logs   *strings.Builder
	exited chan struct{}
	args   []string // what it was started with (restartSidecar)
}

// startSidecars starts `failoverd sidecar` beside every site. Sidecar i
// reaches the daemon and every peer j through its own fault proxies
// (links[i][j], j == len(sites) for the daemon), so one site's links can be
// cut without touching the others'.
func (g *group) startSidecars() {
	g.t.Helper()
	n := len(g.topo.Sites)
	g.links = make([][]*testenv.Proxy, n)
	for i := range n {
		g.links[i] = make([]*testenv.Proxy, n+1)
		for j := range n {
			if j != i {
				g.links[i][j] = testenv.NewProxy(g.t, fmt.Sprintf("sidecar%d-to-sidecar%d", i, j), g.sidecarAddrs[j])
			}
		}
		g.links[i][n] = testenv.NewProxy(g.t, fmt.Sprintf("sidecar%d-to-daemon", i), g.listen)
	}
	base, err := os.ReadFile(g.config)
	if err != nil {
		g.t.Fatal(err)
	}
	for i, m := range g.topo.Sites {
		// Sidecar i's own view of the addresses: its peers through its links.
		cfg := string(base)
		for j := range n {
			if j != i {
				cfg = strings.Replace(cfg, "address: "+g.sidecarAddrs[j]+"\n", "address: "+g.links[i][j].Addr()+"\n", 1)
			}
		}
		path := filepath.Join(g.dir, fmt.Sprintf("sidecar%d.yaml", i))
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			g.t.Fatal(err)
		}
		args := []string{"sidecar", "-c", path, "--group", "orders", "--site", fmt.Sprintf("site%d", i),
			"--listen", g.sidecarAddrs[i], "--mysql-address", m.Addr(),
			"--daemon-url", "http://" + g.links[i][n].Addr(), "--log-format", "json"}
		if !g.blindSidecars {
			args = append(args, "--mysqld-pid-file", m.PidFile())
		}
		g.sidecars = append(g.sidecars, g.launchSidecar(i, args))
		g.waitFor(fmt.Sprintf("sidecar%d answers /healthz", i), 15*time.Second, answersHealthz(g.sidecarAddrs[i]))
	}
}

// launchSidecar starts sidecar i with args and stops it at the test's end.
func (g *group) launchSidecar(i int, args []string) *sidecarProc {
	g.t.Helper()
	p := &sidecarProc{logs: &strings.Builder{}, exited: make(chan struct{}), args: args}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Stdout, p.cmd.Stderr = &lockedWriter{w: p.logs}, &lockedWriter{w: p.logs}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		g.t.Fatalf("start sidecar %d: %v", i, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	g.t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		// The sidecar logs in with the documented sidecar account.
		for line := range strings.SplitSeq(p.logs.String(), "\n") {
			if privilegeRefused(line) {
				g.t.Errorf("sidecar %d's documented account was refused a privilege: %s", i, line)
				break
			}
		}
		if g.t.Failed() {
			g.t.Logf("sidecar %d output:\n%s", i, tail(p.logs.String(), 40))
		}
	})
	return p
}

// restartSidecar stops sidecar i with sig (SIGKILL: a crash; SIGTERM: a
// restart by hand), starts it again with the same arguments and waits until
// it answers /healthz.
func (g *group) restartSidecar(i int, sig syscall.Signal) {
	g.t.Helper()
	g.note("restart sidecar%d (%s)", i, sig)
	p := g.sidecars[i]
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		g.t.Fatalf("sidecar %d did not stop on %s", i, sig)
	}
	g.sidecars[i] = g.launchSidecar(i, p.args)
	g.waitFor(fmt.Sprintf("sidecar%d answers /healthz again", i), 15*time.Second, answersHealthz(g.sidecarAddrs[i]))
}

// waitSidecarsRenewed waits until every sidecar holds the daemon's view and
// the primary is still writable.
func (g *group) waitSidecarsRenewed() {
	g.t.Helper()
	g.waitFor("sidecars hold the view", 20*time.Second, func() bool {
		for _, a := range g.sidecarAddrs {
			if sidecarEpoch(a) == 0 {
				return false
			}
		}
		return true
	})
	if w := g.writable(); !slices.Equal(w, []string{"site0"}) {
		g.t.Fatalf("writable sites %v once the sidecars run, want [site0]", w)
	}
}

// isolate black-holes every link of site i, as a lost site looks from
// outside (hangs, never a refusal): the daemon's to its MySQL, the
// replicas' replication links to it, and (with sidecars) its sidecar's links
// to the daemon and its peers and theirs to it. Clients still reach it.
func (g *group) isolate(i int) {
	g.t.Helper()
	g.note("isolate site%d", i)
	g.eachLink(i, (*testenv.Proxy).Blackhole)
}

// reconnect restores every link isolate cut.
func (g *group) reconnect(i int) {
	g.t.Helper()
	g.note("reconnect site%d", i)
	g.eachLink(i, (*testenv.Proxy).Restore)
}

func (g *group) eachLink(i int, fn func(*testenv.Proxy)) {
	if i < len(g.proxies) {
		fn(g.proxies[i])
	}
	if i < len(g.replProxies) && g.replProxies[i] != nil {
		fn(g.replProxies[i])
	}
	for a := range g.links {
		for b, p := range g.links[a] {
			if p != nil && (a == i || b == i) {
				fn(p)
			}
		}
	}
}

// pause SIGSTOPs site i's mysqld (a hung server or host).
func (g *group) pause(i int) {
	g.t.Helper()
	g.note("pause site%d", i)
	if err := g.topo.Sites[i].Pause(); err != nil {
		g.t.Fatalf("pause site%d: %v", i, err)
	}
}

// checkNoOverlap checks that every acknowledged write is on the new primary
// and that the old one acknowledged nothing after the new one's first ack.
func checkNoOverlap(t *testing.T, g *group, load *testenv.WriteLoad, oldIdx, newIdx int) {
	t.Helper()
	acks := load.Acks()
	firstNew, overlap := overlapping(acks, oldIdx, newIdx)
	if firstNew.IsZero() {
		t.Fatalf("no write acknowledged by site%d", newIdx)
	}
	for _, a := range overlap {
		t.Errorf("site%d acknowledged write %d at %s, after site%d's first ack at %s", oldIdx, a.ID, a.At.Format(time.RFC3339Nano), newIdx, firstNew.Format(time.RFC3339Nano))
	}
	if missing := load.Missing(t, g.topo.Sites[newIdx].AppDB(t)); len(missing) > 0 {
		t.Fatalf("%d acknowledged writes missing on site%d: %v", len(missing), newIdx, missing[:min(len(missing), 10)])
	}
	t.Logf("writes resumed on site%d %v after the last ack on site%d; %d acks, none lost", newIdx, firstNew.Sub(lastAck(acks, oldIdx)), oldIdx, len(acks))
}

// overlapping returns the new primary's first ack and the old primary's
// acks after it (which must not exist).
func overlapping(acks []testenv.Ack, oldIdx, newIdx int) (firstNew time.Time, overlap []testenv.Ack) {
	for _, a := range acks {
		if a.Target == newIdx && (firstNew.IsZero() || a.At.Before(firstNew)) {
			firstNew = a.At
		}
	}
	for _, a := range acks {
		if !firstNew.IsZero() && a.Target == oldIdx && a.At.After(firstNew) {
			overlap = append(overlap, a)
		}
	}
	return firstNew, overlap
}

func lastAck(acks []testenv.Ack, target int) time.Time {
	var last time.Time
	for _, a := range acks {
		if a.Target == target && a.At.After(last) {
			last = a.At
		}
	}
	return last
}

// startUnderLoad starts a 3-site group (site0's links on fault proxies
// unless hang), its daemon and sidecars, and a write load that acknowledged
// a few writes.
func startUnderLoad(tb testing.TB, o groupOptions, hang bool) (*group, *testenv.WriteLoad) {
	o.sites = 3
	o.isolatable = !hang
	g := newGroup(tb, o)
	g.startDaemon()
	// Sidecars join a group whose primary the daemon adopted (one started
	// earlier holds no view naming its site, and its lease starts expired).
	g.waitHealthy("site0", 30*time.Second)
	if o.sidecars {
		g.startSidecars()
		g.waitSidecarsRenewed()
	}
	timeout := cmp.Or(o.clientTimeout, 2*time.Second)
	load := testenv.StartWriteLoad(tb, testenv.AppDSNs(g.topo.Sites...), testenv.WriteLoadOptions{Workers: 2, Timeout: timeout})
	load.WaitForAcks(tb, 50, 20*time.Second)
	return g, load
}

// lostPrimary is the acceptance scenario: the primary hangs (SIGSTOP) or is
// isolated under write load; another site takes over with no acknowledged
// write lost and no overlap; once it returns, the old primary is fenced.
func lostPrimary(t *testing.T, o groupOptions, hang bool) {
	g, load := startUnderLoad(t, o, hang)
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range g.topo.Sites[1:] {
				t.Logf("%s executed %s, replica status %v", r.Name, r.GTIDExecuted(t), r.ReplicaStatus(t))
			}
		}
	})
	t.Logf("fault at %s", time.Now().Format(time.RFC3339Nano))
	if hang {
		g.pause(0)
	} else {
		g.isolate(0)
	}
	var st groupStatus
	g.waitFor("a replica promoted", failoverTimeout, func() bool {
		s, err := g.status()
		st = s
		return err == nil && s.ActiveSite != "" && s.ActiveSite != "site0" && s.InFlight == nil
	})
	newIdx := slices.Index([]string{"site0", "site1", "site2"}, st.ActiveSite)
	before := len(load.Acked())
	load.WaitForAcks(t, before+50, 30*time.Second)
	if st.LastFailover == nil || st.LastFailover.To != st.ActiveSite {
		t.Fatalf("last failover %+v, want to %s", st.LastFailover, st.ActiveSite)
	}
	t.Logf("failover done: %s", st.Message)
	// The old primary returns: it must end fenced (or down), never a second
	// writable site.
	if hang {
		// Resumed, or restarted if its sidecar SIGKILLed it.
		m := g.topo.Sites[0]
		if m.Running() {
			if err := m.Resume(); err != nil {
				t.Fatal(err)
			}
		} else {
			ctx, cancel := contextWithTimeout(30 * time.Second)
			defer cancel()
			if err := m.Restart(ctx); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		g.reconnect(0)
	}
	g.waitFor("old primary fenced or down", failoverTimeout, func() bool {
		return !slices.Contains(g.writable(), "site0")
	})
	load.Stop()
	checkNoOverlap(t, g, load, 0, newIdx)
}

func TestHungPrimarySemiSync(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		lostPrimary(t, groupOptions{engine: e, fencing: "semisync", semiSyncTimeoutMs: infiniteSemiSync}, true)
	})
}

// TestShortSIGSTOPBlipsDoNotFailOver: SIGSTOP/SIGCONT blips of the primary's
// mysqld under write load, each shorter than the failure window (two failed
// probes a poll interval apart: 500 ms at the defaults), start no failover
// and lose no acknowledged write, although the other sites are probed at
// the primary's first failed probe and the replicas' silence is read the
// moment it crosses its 1 s threshold (issue 32's shortcuts).
func TestShortSIGSTOPBlipsDoNotFailOver(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g, load := startUnderLoad(t, groupOptions{engine: e, fencing: "semisync", semiSyncTimeoutMs: infiniteSemiSync}, true)
		before, err := g.status()
		if err != nil {
			t.Fatal(err)
		}
		since := time.Now()
		m := g.topo.Sites[0]
		for _, d := range []time.Duration{300, 450, 300, 450, 300, 450, 300, 450} {
			// A random phase against the poll ticks.
			time.Sleep(time.Second + rand.N(500*time.Millisecond))
			g.pause(0)
			time.Sleep(d * time.Millisecond)
			if err := m.Resume(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(3 * time.Second) // past any detection the last blip could have begun
		if n := countEvents(g.logs.String(), "epoch.revoked", since); n != 0 {
			t.Fatalf("%d failovers started by SIGSTOP blips of 300-450 ms, want 0", n)
		}
		st, err := g.status()
		if err != nil {
			t.Fatal(err)
		}
		if st.ActiveSite != "site0" || st.Epoch != before.Epoch || st.InFlight != nil {
			t.Fatalf("after the blips: %+v, want site0 still active at epoch %d", st, before.Epoch)
		}
		load.WaitForAcks(t, len(load.Acked())+20, 20*time.Second)
		load.Stop()
		if missing := load.Missing(t, m.AppDB(t)); len(missing) > 0 {
			t.Fatalf("%d acknowledged writes missing on site0: %v", len(missing), missing[:min(len(missing), 10)])
		}
	})
}

func TestIsolatedPrimarySemiSync(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		lostPrimary(t, groupOptions{engine: e, fencing: "semisync", semiSyncTimeoutMs: infiniteSemiSync}, false)
	})
}

func TestHungPrimarySidecar(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		lostPrimary(t, groupOptions{engine: e, fencing: "sidecar", sidecars: true}, true)
	})
}

func TestIsolatedPrimarySidecar(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		lostPrimary(t, groupOptions{engine: e, fencing: "sidecar", sidecars: true}, false)
	})
}

// A semisync group whose primary keeps the default 10 s timeout is reported
// and does not use the semisync proof: a hung primary is not failed over.
func TestSemiSyncDefaultTimeoutIsReportedAndNotUsed(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, fencing: "semisync"})
		g.startDaemon()
		g.waitFor("semisync-settings-unsafe reported", 30*time.Second, func() bool {
			st, err := g.status()
			return err == nil && st.ActiveSite == "site0" && st.Reason == "semisync-settings-unsafe"
		})
		g.pause(0)
		g.waitFor("failover blocked on a fence confirmation", failoverTimeout, func() bool {
			st, err := g.status()
			return err == nil && st.InFlight != nil && st.Reason == "await-fence-confirmation"
		})
		time.Sleep(3 * time.Second) // well past detection + 1 s: nothing is promoted
		if st, _ := g.status(); st.ActiveSite != "" || !slices.Contains([]string{"await-fence-confirmation"}, st.Reason) {
			t.Fatalf("status %+v: want the group revoked and waiting", st)
		}
		if w := g.writable(); len(w) != 0 {
			t.Fatalf("writable sites %v while the hung primary is not proven fenced", w)
		}
		// The human's way out: once they know site0 is dead, they say so.
		token := filepath.Join(g.dir, "api.token")
		if code, _, errOut := g.cli("confirm-fence", "orders", "site1", "--token-file", token); code != 1 || !strings.Contains(errOut, "not the old primary") {
			t.Fatalf("confirm-fence of a site that is not the old primary: exit %d %q, want 1 with the reason", code, errOut)
		}
		if code, out, errOut := g.cli("confirm-fence", "orders", "site0", "--token-file", token); code != 0 {
			t.Fatalf("confirm-fence: exit %d\n%s%s", code, out, errOut)
		}
		g.waitFor("promotion on the operator's confirmation", failoverTimeout, func() bool {
			st, err := g.status()
			return err == nil && st.ActiveSite != "" && st.InFlight == nil
		})
		st, _ := g.status()
		if st.LastFailover == nil || st.LastFailover.Proof != "operator-confirmed" || !strings.Contains(st.LastFailover.ConfirmedBy, "@") {
			t.Fatalf("last failover %+v: want the operator-confirmed proof and who confirmed", st.LastFailover)
		}
		if w := g.writable(); len(w) != 1 || w[0] != st.ActiveSite {
			t.Fatalf("writable sites %v, want only %s", w, st.ActiveSite)
		}
		audit := g.stateFile().Audit
		if len(audit) != 2 || audit[0].Result == "accepted" || audit[1].Action != "confirm-fence" || audit[1].Site != "site0" || audit[1].Result != "accepted" {
			t.Fatalf("audit %+v: want the refused and the accepted confirmation", audit)
		}
	})
}

// A primary the daemon cannot reach but a peer sidecar can is fenced by
// gossip as soon as that peer adopts the revoking epoch, long before its
// lease would run out.
func TestPeerGossipFencesAPrimaryTheDaemonCannotReach(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, fencing: "sidecar", sidecars: true, proxied: true, lease: "8s"})
		g.startDaemon()
		g.waitHealthy("site0", 30*time.Second)
		g.startSidecars()
		g.waitSidecarsRenewed()
		n := len(g.topo.Sites)
		g.proxies[0].Cut()  // daemon → site0's MySQL
		g.links[0][n].Cut() // site0's sidecar → daemon
		g.waitFor("partition seen", 20*time.Second, func() bool {
			st, err := g.status()
			return err == nil && st.Detection == "UnreachablePrimary"
		})
		revoked := time.Now()
		if code, body := g.post("/v1/groups/orders/switchover?target=site1"); code != http.StatusAccepted {
			t.Fatalf("switchover: %d %s", code, body)
		}
		// site0's sidecar asks its peers every checkInterval (300ms): it must
		// fence within about one interval of a peer adopting the revoking epoch,
		// through gossip, long before its 8 s lease would run out.
		var adopted, fenced time.Time
		for deadline := time.Now().Add(8 * time.Second); (adopted.IsZero() || fenced.IsZero()) && time.Now().Before(deadline); {
			if adopted.IsZero() && (sidecarEpoch(g.sidecarAddrs[1]) >= 2 || sidecarEpoch(g.sidecarAddrs[2]) >= 2) {
				adopted = time.Now()
			}
			if fenced.IsZero() && readOnly(t, g.topo.Sites[0]) == "1" {
				fenced = time.Now()
			}
			time.Sleep(10 * time.Millisecond)
		}
		if adopted.IsZero() || fenced.IsZero() {
			t.Fatalf("after 8 s: peer adopted at %v, site0 fenced at %v", adopted, fenced)
		}
		const checkInterval, slack = 300 * time.Millisecond, 200 * time.Millisecond
		if lag := fenced.Sub(adopted); lag > checkInterval+slack {
			t.Fatalf("site0 fenced %v after a peer adopted the revoking epoch, want within one checkInterval (%v, + %v polling slack)", lag, checkInterval, slack)
		}
		t.Logf("site0 fenced %v after the revoke, %v after a peer adopted it (lease 8s)", fenced.Sub(revoked), fenced.Sub(adopted))
		g.expectSolePrimary("site1")
	})
}

// sidecarEpoch is the view epoch the sidecar at addr holds (0 if unknown).
func sidecarEpoch(addr string) uint64 {
	resp, err := http.Get("http://" + addr + "/peer/ping")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var ping struct{ Epoch uint64 }
	if json.NewDecoder(resp.Body).Decode(&ping) != nil {
		return 0
	}
	return ping.Epoch
}

// With the daemon down for two leases, sidecars keep renewing each other:
// no fence, writes go on.
func TestDaemonDownDoesNotFenceAHealthyGroup(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, fencing: "sidecar", sidecars: true, lease: "3s"})
		g.startDaemon()
		g.waitHealthy("site0", 30*time.Second)
		g.startSidecars()
		g.waitSidecarsRenewed()
		load := testenv.StartWriteLoad(t, testenv.AppDSNs(g.topo.Sites...), testenv.WriteLoadOptions{Workers: 1})
		load.WaitForAcks(t, 20, 20*time.Second)
		g.stopDaemon()
		time.Sleep(6 * time.Second) // 2 × leaseTimeout
		before := len(load.Acked())
		load.WaitForAcks(t, before+20, 10*time.Second)
		if w := g.writable(); !slices.Equal(w, []string{"site0"}) {
			t.Fatalf("writable sites %v with the daemon down, want [site0]", w)
		}
		load.Stop()
	})
}

// A site that restarts while another is active comes up fenced and stays
// fenced: its sidecar only lifts the fence for a view naming its own site.
func TestRestartedOldPrimaryStaysFenced(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, fencing: "sidecar", sidecars: true})
		g.startDaemon()
		g.waitHealthy("site0", 30*time.Second)
		g.startSidecars()
		g.waitSidecarsRenewed()
		g.kill(0)
		g.expectSolePrimary("site1")
		ctx, cancel := contextWithTimeout(30 * time.Second)
		defer cancel()
		if err := g.topo.Sites[0].Restart(ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(8 * time.Second)
		for time.Now().Before(deadline) {
			if ro := readOnly(t, g.topo.Sites[0]); ro != "1" {
				t.Fatalf("restarted old primary is writable (read_only=%s) while site1 is active", ro)
			}
			time.Sleep(200 * time.Millisecond)
		}
		g.expectSolePrimary("site1")
	})
}

// lockedWriter serialises the writes of a process's stdout and stderr.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// A forged view (bad signature, or signed with another key) reaching a
// sidecar through a peer changes nothing: the healthy primary stays
// writable.
func TestForgedViewChangesNothing(t *testing.T) {
	// why is the rejection the sidecar must count; switchFirst moves the
	// primary to site1 (epoch 3) before the forger speaks to its sidecar.
	forged := map[string]struct {
		body, why   string
		switchFirst bool
	}{
		"bad-signature": {`{"view":{"group":"orders","epoch":99,"activeSite":"site2","issuedAt":"2026-01-01T00:00:00Z"},"signature":"00"}`, "bad-signature", false},
		"other-key":     {signedWith(t, "not-the-key", 99, "site2"), "bad-signature", false},
		// Validly signed, but at the epoch the sidecar holds, naming another
		// site: equal epochs never flip.
		"equal-epoch-other-site": {signedWith(t, viewKey, 1, "site2"), "conflicting-epoch", false},
		// A genuine old view (epoch 1 named site0) replayed to the new
		// primary's sidecar at epoch 3.
		"older-epoch": {signedWith(t, viewKey, 1, "site0"), "older-epoch", true},
	}
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) { forgedViews(t, e, forged) })
}

func forgedViews(t *testing.T, e testenv.Engine, forged map[string]struct {
	body, why   string
	switchFirst bool
}) {
	for name, f := range forged {
		t.Run(name, func(t *testing.T) {
			forger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(f.body))
			}))
			defer forger.Close()
			g := newGroup(t, groupOptions{engine: e, sites: 3, fencing: "sidecar", sidecars: true})
			g.startDaemon()
			g.waitHealthy("site0", 30*time.Second)
			g.startSidecars()
			g.waitSidecarsRenewed()
			p := 0
			if f.switchFirst {
				if code, body := g.post("/v1/groups/orders/switchover?target=site1"); code != http.StatusAccepted {
					t.Fatalf("switchover: %d %s", code, body)
				}
				g.expectSolePrimary("site1")
				p = 1
			}
			primary := fmt.Sprintf("site%d", p)
			// The primary's sidecar now asks the forger instead of site2's.
			g.links[p][2].Retarget(strings.TrimPrefix(forger.URL, "http://"))
			time.Sleep(2 * time.Second) // several rounds
			if w := g.writable(); !slices.Equal(w, []string{primary}) {
				t.Fatalf("writable sites %v after a forged view, want [%s]", w, primary)
			}
			resp, err := http.Get("http://" + g.sidecarAddrs[p] + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(b), `failoverd_sidecar_rejected_views_total{why="`+f.why+`"}`) {
				t.Fatalf("no %s rejection counted:\n%s", f.why, b)
			}
		})
	}
}

func signedWith(t *testing.T, key string, epoch uint64, active string) string {
	t.Helper()
	s, err := view.Sign(view.View{Group: "orders", Epoch: epoch, ActiveSite: active, IssuedAt: time.Now()}, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Issue 26 hole 1, on real servers: sidecars without a pid file cannot
// SIGKILL mysqld nor prove it down. The hung primary's sidecar fails to
// fence it (the statement hangs) and its status reads time out; that once
// read as "mysqld down" and the daemon promoted site1 1.7 s after the
// revoke, and site0 resumed writable. Now nothing is promoted while site0
// is hung, and once it resumes it is fenced before anything else is
// promoted: no acknowledged write lost, none on two sites.
func TestHungPrimaryWithBlindSidecarsIsNotPromotedAway(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g, load := startUnderLoad(t, groupOptions{engine: e, fencing: "sidecar", sidecars: true, blindSidecars: true}, true)
		paused := time.Now()
		g.pause(0)
		g.waitFor("the epoch revoked", failoverTimeout, func() bool {
			s, err := g.status()
			return err == nil && s.InFlight != nil
		})
		// Long enough for every proof the old code accepted: a "down"
		// report (1.7 s) and lease expiry (lease 3 s + 1 s margin).
		hold := time.Now().Add(8 * time.Second)
		for time.Now().Before(hold) {
			s, err := g.status()
			if err == nil && s.ActiveSite != "" {
				t.Fatalf("promoted %s while site0 is hung and nothing proves it fenced: %s", s.ActiveSite, s.Message)
			}
			time.Sleep(100 * time.Millisecond)
		}
		resumed := time.Now()
		if err := g.topo.Sites[0].Resume(); err != nil {
			t.Fatal(err)
		}
		newIdx := g.promotedFrom("site0") // site0 resumed and fenced: the sole writable one
		st, err := g.status()
		if err != nil {
			t.Fatal(err)
		}
		if st.LastFailover == nil || st.LastFailover.Proof == "lease-expired" {
			t.Fatalf("last failover %+v: want one on a fence of the resumed site0", st.LastFailover)
		}
		before := len(load.Acked())
		load.WaitForAcks(t, before+50, 30*time.Second)
		load.Stop()
		// A write a client sent site0 less than its 2 s timeout before the
		// resume commits on SIGCONT (nothing can fence a stopped process
		// that cannot be killed); it must then be kept, and site0 must
		// acknowledge nothing once site1 or site2 does.
		late := 0
		for _, a := range load.Acks() {
			if a.Target == 0 && a.At.After(resumed) {
				late++
			}
		}
		t.Logf("site0 paused at %s, resumed at %s; %d writes acknowledged by it after the resume, all checked below",
			paused.Format(time.RFC3339Nano), resumed.Format(time.RFC3339Nano), late)
		checkNoOverlap(t, g, load, 0, newIdx)
		t.Logf("promoted %s on %s after site0 resumed", st.ActiveSite, st.LastFailover.Proof)
	})
}
