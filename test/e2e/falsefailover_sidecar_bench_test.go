package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/benchdoc"
	"github.com/failoverd/failoverd/test/testenv"
)

// BenchmarkFalseFailoversSidecar records false_failovers_sidecar (issue 32):
// the faults that must never start a failover, on a group whose sidecars
// watch their mysqld (--mysqld-pid-file) and hold a watch at the daemon, so
// the shortcuts of issue 32 (the exit report, urgent rounds, the watch) are
// all in play: short blips of every link of the primary (the daemon's,
// the replicas' and the sidecars'), SIGSTOP/SIGCONT blips of the primary's
// mysqld shorter than the failure window (a hang is no exit), and restarts
// of the primary's and a replica's sidecar (SIGKILL and SIGTERM). Per
// engine.
func BenchmarkFalseFailoversSidecar(b *testing.B) {
	if testing.Short() {
		b.Skip("starts real servers")
	}
	testenv.ForEachEngineB(b, falseFailoversSidecar)
}

func falseFailoversSidecar(b *testing.B, e testenv.Engine) {
	blips := envInt("FAILOVERD_BENCH_SIDECAR_BLIPS", 20)
	// Below the failure window (failureThreshold 2 × pollInterval 500 ms).
	const blipMin, blipMax = 50 * time.Millisecond, 450 * time.Millisecond
	g, load := startUnderLoad(b, groupOptions{engine: e, fencing: "sidecar", sidecars: true}, false)
	defer load.Stop()
	var counts []int
	type evAt struct {
		what string
		at   time.Time
	}
	var evLog []evAt
	// event runs one fault, waits until the group is healthy on site0 again
	// and counts the revocations it caused: each is a failover started.
	event := func(what string, fault func()) {
		since := time.Now()
		evLog = append(evLog, evAt{what, since})
		fault()
		g.waitFor("group settled after "+what, 60*time.Second, func() bool {
			st, err := g.status()
			return err == nil && st.InFlight == nil && (st.Reason == "healthy" || st.ActiveSite != "site0")
		})
		// A random phase against the poll ticks before the next one.
		time.Sleep(time.Second + time.Duration(rand.Int64N(int64(500*time.Millisecond))))
		n := countEvents(g.logs.String(), "epoch.revoked", since)
		counts = append(counts, n)
		if n > 0 {
			b.Errorf("%s started %d failover(s)", what, n)
		}
		if st, err := g.status(); err != nil || st.ActiveSite != "site0" {
			b.Fatalf("after %s the primary is %q (err %v), want site0", what, st.ActiveSite, err)
		}
	}
	blip := func() time.Duration { return blipMin + time.Duration(rand.Int64N(int64(blipMax-blipMin))) }
	for i := range blips {
		d := blip()
		event(fmt.Sprintf("link blip %d (%v)", i, d), func() {
			g.eachLink(0, (*testenv.Proxy).Blackhole)
			time.Sleep(d)
			g.eachLink(0, (*testenv.Proxy).Restore)
		})
	}
	for i := range blips {
		d := blip()
		event(fmt.Sprintf("SIGSTOP blip %d (%v)", i, d), func() {
			g.pause(0)
			time.Sleep(d)
			if err := g.topo.Sites[0].Resume(); err != nil {
				b.Fatal(err)
			}
		})
	}
	for _, r := range []struct {
		site int
		sig  syscall.Signal
	}{{0, syscall.SIGKILL}, {0, syscall.SIGTERM}, {1, syscall.SIGKILL}, {0, syscall.SIGKILL}} {
		event(fmt.Sprintf("restart of sidecar%d (%s)", r.site, r.sig), func() { g.restartSidecar(r.site, r.sig) })
	}
	load.Stop()
	if missing := load.Missing(b, g.topo.Sites[0].AppDB(b)); len(missing) > 0 {
		b.Errorf("%d acknowledged writes missing on site0", len(missing))
		for _, a := range load.Acks() {
			if slices.Contains(missing, a.ID) {
				b.Logf("missing id %d acknowledged by site%d at %s", a.ID, a.Target, a.At.Format(time.RFC3339Nano))
			}
		}
		for _, ev := range evLog {
			b.Logf("event %s at %s", ev.what, ev.at.Format(time.RFC3339Nano))
		}
	}
	benchdoc.RecordEngine(b, "../..", e.String(), benchdoc.CountFigure("false_failovers_sidecar", counts,
		benchdoc.Target{Text: "0", MaxMax: benchdoc.Bound(0)},
		fmt.Sprintf(`failovers started (epoch.revoked) per fault that must not start one, on a
3-site group with a failoverd sidecar per site watching its mysqld (--mysqld-pid-file,
fencing sidecar, leaseTimeout 3s) under a write load: %d blips of every link of the
primary (the daemon's, the replicas' and the sidecars', black-holed %v-%v), %d
SIGSTOP/SIGCONT blips of the primary's mysqld (%v-%v, below the failure window of
2 × 500 ms), and 4 sidecar restarts (the primary's SIGKILL twice and SIGTERM once, a
replica's SIGKILL); each fault is followed by a wait until the group is healthy on site0
and a random 1-1.5 s pause.`, blips, blipMin, blipMax, blips, blipMin, blipMax)))
}
