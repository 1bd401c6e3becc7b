package poller

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/test/testenv"
)

// TestE2EKilledPrimaryIsPrimaryDown: SIGKILL of the primary of a 3-site
// group (each engine) is classified PrimaryDown (both replicas lost it) within
// failureThreshold × pollInterval + probeTimeout (+ slack).
func TestE2EKilledPrimaryIsPrimaryDown(t *testing.T) {
	testenv.ForEachEngine(t, testE2EKilledPrimaryIsPrimaryDown)
}

func testE2EKilledPrimaryIsPrimaryDown(t *testing.T, e testenv.Engine) {
	lg := newLiveGroup(t, e, 3)
	lg.start(t)
	lg.waitHealthy(t, 30*time.Second)

	bound, slack := detectionBound(lg.group)
	killed := time.Now()
	if err := lg.topo.Sites[0].Kill(); err != nil {
		t.Fatalf("kill primary: %v", err)
	}
	d, ok := lg.waitFor(statemachine.PrimaryDown, killed, 30*time.Second)
	if !ok {
		t.Fatalf("no PrimaryDown within 30s of the kill; last code %q; sites %v", lg.lastCode(), lg.views())
	}
	latency := d.at.Sub(killed)
	t.Logf("kill → PrimaryDown in %v (bound %v incl. %v slack); lost witnesses %v", latency, bound, slack, d.result.Lost)
	if latency > bound {
		t.Errorf("PrimaryDown %v after the kill, want within %v", latency, bound)
	}
	if len(d.result.Lost) != 2 || len(d.result.Streaming) != 0 {
		t.Errorf("witnesses lost %v streaming %v, want both replicas lost", d.result.Lost, d.result.Streaming)
	}
	for _, e := range lg.since(killed) {
		if e.at.After(d.at) {
			break
		}
		if e.code == statemachine.UnreachablePrimary {
			t.Errorf("UnreachablePrimary reported on the way to PrimaryDown: a dead primary must never look partitioned")
		}
	}
}

// TestE2ECutDaemonLinkIsUnreachablePrimary: cutting only the daemon→primary
// link (the replica keeps streaming from the primary) gives
// UnreachablePrimary, never PrimaryDown, and Healthy again after Restore.
func TestE2ECutDaemonLinkIsUnreachablePrimary(t *testing.T) {
	testenv.ForEachEngine(t, testE2ECutDaemonLinkIsUnreachablePrimary)
}

func testE2ECutDaemonLinkIsUnreachablePrimary(t *testing.T, e testenv.Engine) {
	lg := newLiveGroup(t, e, 2)
	lg.start(t)
	lg.waitHealthy(t, 30*time.Second)

	cut := time.Now()
	lg.proxies[0].Cut()
	d, ok := lg.waitFor(statemachine.UnreachablePrimary, cut, 10*time.Second)
	if !ok {
		t.Fatalf("no UnreachablePrimary within 10s of the cut; last code %q; sites %v", lg.lastCode(), lg.views())
	}
	t.Logf("cut → UnreachablePrimary in %v; streaming witnesses %v", d.at.Sub(cut), d.result.Streaming)

	// Several seconds with the link cut: longer than the replicas' silence
	// threshold (1 s with testenv's 0.25 s heartbeats) and slave_net_timeout (3 s), so a heartbeat-blind or
	// IO-thread-only witness would have flipped by now.
	primary := lg.topo.Sites[0]
	primary.Exec(t, "CREATE TABLE IF NOT EXISTS app.poller_e2e (id INT PRIMARY KEY)")
	time.Sleep(6 * time.Second)
	lg.topo.WaitReplicated(t, 10*time.Second) // the replica still streams from the primary
	for _, e := range lg.since(cut) {
		if e.code == statemachine.PrimaryDown || e.code == statemachine.PrimaryDownUncorroborated {
			t.Fatalf("%s %v after cutting only the daemon's link; sites %v", e.code, e.at.Sub(cut), lg.views())
		}
	}
	if v, _ := lg.tracker.Site("site0"); v.State != statemachine.Unreachable || v.Latest.Class != ClassRefused {
		t.Errorf("site0: state %s, last class %q; want unreachable, refused (the proxy refuses)", v.State, v.Latest.Class)
	}
	if got := lg.lastCode(); got != statemachine.UnreachablePrimary {
		t.Errorf("code after 6s of cut link = %s, want %s", got, statemachine.UnreachablePrimary)
	}

	restored := time.Now()
	lg.proxies[0].Restore()
	// Backoff caps at 4 × 500ms, then 3 writable probes at 500ms.
	if _, ok := lg.waitFor(statemachine.Healthy, restored, 10*time.Second); !ok {
		t.Fatalf("not Healthy within 10s of Restore; last code %q; sites %v", lg.lastCode(), lg.views())
	}
	t.Logf("restore → Healthy in %v", time.Since(restored))
}

// pollerGoroutines counts the goroutines running poller or MySQL client
// code (site loops, probes, database/sql and driver helpers): what a
// pile-up would multiply. The fault proxy's own goroutines are excluded.
func pollerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		s := string(g)
		if strings.Contains(s, "poller.(*siteLoop)") || strings.Contains(s, "database/sql.") || strings.Contains(s, "go-sql-driver/mysql.") {
			count++
		}
	}
	return count
}

// TestE2EPausedPrimary: a SIGSTOPped primary (connections open, nothing
// answers) is PrimaryDown once the replica notices, through its heartbeat
// silence or slave_net_timeout (3 s), and the poller's goroutine count stays
// flat meanwhile.
func TestE2EPausedPrimary(t *testing.T) { testenv.ForEachEngine(t, testE2EPausedPrimary) }

func testE2EPausedPrimary(t *testing.T, e testenv.Engine) {
	lg := newLiveGroup(t, e, 2)
	lg.start(t)
	lg.waitHealthy(t, 30*time.Second)
	time.Sleep(time.Second) // settle: connections open
	baseline := pollerGoroutines()

	paused := time.Now()
	if err := lg.topo.Sites[0].Pause(); err != nil {
		t.Fatalf("pause primary: %v", err)
	}
	t.Cleanup(func() { _ = lg.topo.Sites[0].Resume() })

	// Unreachable after 2 timed-out probes (≈1.4 s); the replica's witness
	// is lost after the silence threshold (2 heartbeats + 1 poll interval)
	// or the 3 s slave_net_timeout.
	d, ok := lg.waitFor(statemachine.PrimaryDown, paused, 15*time.Second)
	if !ok {
		t.Fatalf("no PrimaryDown within 15s of SIGSTOP; last code %q; sites %v", lg.lastCode(), lg.views())
	}
	latency := d.at.Sub(paused)
	rep, _ := lg.tracker.Site("site1")
	t.Logf("SIGSTOP → PrimaryDown in %v; replica then: io connected %v, silent %v (for %v)",
		latency, rep.LastReachable.IOConnected, rep.LastReachable.SourceSilent, rep.LastReachable.SilentFor)
	if latency > 8*time.Second {
		t.Errorf("PrimaryDown %v after SIGSTOP, want within 8s (3 s slave_net_timeout + detection + slack)", latency)
	}
	if v, _ := lg.tracker.Site("site0"); v.Latest.Class != ClassTimeout {
		t.Errorf("paused primary: last probe class %q, want timeout", v.Latest.Class)
	}

	// Keep it paused for several more seconds of probing.
	peak := 0
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		peak = max(peak, pollerGoroutines())
	}
	t.Logf("poller/driver goroutines: %d before the pause, peak %d while paused (total goroutines %d)", baseline, peak, runtime.NumGoroutine())
	// A pile-up adds a goroutine per tick (2/s): 12+ over 6 s; a bounded
	// poller adds at most a probe and a driver helper or two.
	if peak > baseline+4 {
		t.Errorf("goroutines grew from %d to %d while the primary hung", baseline, peak)
	}
}
