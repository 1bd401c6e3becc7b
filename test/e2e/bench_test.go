package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/benchdoc"
	"github.com/failoverd/failoverd/test/testenv"
)

// BenchmarkFailover measures what a user sees: from SIGKILL of the primary to
// the best replica accepting application writes, with the real failoverd
// binary and the default timings (poll 500ms, probe 400ms, 2 failures,
// corroborated detection, fencing confirmed by "mysqld refused"), on every
// selected engine (BenchmarkFailover/mariadb, /mysql). Run it with
// FAILOVERD_BENCH_WRITE=1 to rewrite docs/benchmarks/failover.md, one row
// per engine that ran:
//
//	FAILOVERD_BENCH_WRITE=1 go test -run '^$' -bench BenchmarkFailover -benchtime 1x ./test/e2e/
func BenchmarkFailover(b *testing.B) {
	if testing.Short() {
		b.Skip("starts real servers")
	}
	const runs = 12
	load := benchdoc.LoadAverage()
	var rep engineReport
	testenv.ForEachEngineB(b, func(b *testing.B, e testenv.Engine) {
		rep.add(b, e, "kill → new primary writable", benchdoc.Runs(b, runs, func(tb testing.TB) time.Duration { return killToWritable(tb, e) }))
	})
	if b.Failed() || !benchdoc.Enabled() {
		return
	}
	benchdoc.Write(b, "../..", "failover.md", fmt.Sprintf(`# Failover time: primary killed → new primary writable

%s
- Load average when the benchmark started: %s

## Setup

- 2 sites on 127.0.0.1 per engine (MariaDB 10.11, MySQL 9.7; test/testenv,
  semi-sync on), the real failoverd binary with the default timings:
  pollInterval 500ms, probeTimeout 400ms, failureThreshold 2,
  recoveryThreshold 3, detection corroborated, fencing confirmed (a refused
  connection proves the old mysqld is down).
- Each run: a fresh group; wait until the daemon adopted site0, then 300ms
  plus a random 0–500ms phase; SIGKILL site0; measure until site1 answers
  read_only=0 (polled every 10ms).
- The time covers detection (two failed probes plus the replica's lost IO
  thread), phase 1 (revoking epoch persisted with fsync), a fresh probe round
  (asked for right after the revoke, not waited for),
  phase 2 (relay drain, stop/reset replication, promotion GTID persisted,
  read_only=OFF read back).

## Results (%d runs per engine)

| engine | runs | min | p50 | p90 | max | mean |
|---|--:|--:|--:|--:|--:|--:|
%s
For comparison, the usual anchor promotes 12 s after a clean primary kill.

%sReproduce: `+"`FAILOVERD_BENCH_WRITE=1 go test -run '^$' -bench BenchmarkFailover -benchtime 1x ./test/e2e/`"+`
(FAILOVERD_TEST_ENGINE=mariadb or mysql for one engine only)
`, benchdoc.MachineInfo(), load, runs, rep.rows.String(), rep.raw.String()))
}

// engineReport gathers a Markdown report's per-engine lines: one row of
// the distribution (engine, runs, min, p50, p90, max, mean) and one line
// of raw samples per engine that ran.
type engineReport struct{ rows, raw strings.Builder }

// add reports ds, what measured on e: as b's metrics, in b's log and as
// e's row and raw line.
func (r *engineReport) add(b *testing.B, e testenv.Engine, what string, ds []time.Duration) {
	st := benchdoc.Distribution(ds)
	b.ReportMetric(float64(st.P50)/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(st.P90)/float64(time.Millisecond), "p90-ms")
	b.ReportMetric(float64(st.Max)/float64(time.Millisecond), "max-ms")
	b.Logf("%s: %s over %d runs: min %v p50 %v p90 %v max %v", e, what, len(ds), st.Min, st.P50, st.P90, st.Max)
	fmt.Fprintf(&r.rows, "| %s | %d | %d ms | %d ms | %d ms | %d ms | %d ms |\n", e, len(ds), st.Min.Milliseconds(), st.P50.Milliseconds(),
		st.P90.Milliseconds(), st.Max.Milliseconds(), st.Mean.Milliseconds())
	fmt.Fprintf(&r.raw, "Raw (ms), %s: %s\n\n", e, benchdoc.Millis(ds))
}

// killToWritable measures one kill → writable on a fresh 2-site group.
func killToWritable(b testing.TB, e testenv.Engine) time.Duration {
	g := newGroup(b, groupOptions{engine: e, sites: 2})
	g.startDaemon()
	g.waitActive("site0", 30*time.Second)
	// Settle, then kill at a random phase of the poll and decision ticks.
	time.Sleep(300*time.Millisecond + time.Duration(rand.Int64N(int64(500*time.Millisecond))))
	start := time.Now()
	if err := g.topo.Sites[0].Kill(); err != nil {
		b.Fatal(err)
	}
	for time.Since(start) < failoverTimeout {
		if g.topo.Sites[1].QueryString(b, "SELECT @@global.read_only") == "0" {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("site1 not writable within %v", failoverTimeout)
	return 0
}
