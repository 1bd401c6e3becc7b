package poller

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/test/benchdoc"
	"github.com/failoverd/failoverd/test/testenv"
	"github.com/failoverd/failoverd/test/testenv/promote"
)

// Benchmarks measure; they assert nothing about the numbers. Run with
//
//	go test -run '^$' -bench . -benchtime 1x ./poller/
//
// and FAILOVERD_BENCH_WRITE=1 to (re)write docs/benchmarks/detection.md and
// docs/benchmarks/polling.md. FAILOVERD_BENCH_RUNS (default 20) and
// FAILOVERD_BENCH_WINDOW (default 30s) tune them.

// benchWrite reports whether the benchmarks should write their results file.
func benchWrite() bool { return benchdoc.Enabled() }

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// BenchmarkDetectionLatency kills the primary of a 3-site MariaDB group
// FAILOVERD_BENCH_RUNS times (default 20) and measures kill → PrimaryDown
// with the default settings (poll 500ms, probe timeout 400ms, failure
// threshold 2, corroborated detection), daemon links through fault proxies.
func BenchmarkDetectionLatency(b *testing.B) {
	if testing.Short() {
		b.Skip("-short: this benchmark starts 3 MariaDB servers and kills the primary 20 times (about 2 minutes)")
	}
	runs := envInt("FAILOVERD_BENCH_RUNS", 20)
	lg := newLiveGroup(b, testenv.MariaDB, 3) // the committed figures are MariaDB's
	mariadbVersion := lg.topo.Sites[1].QueryString(b, "SELECT VERSION()")
	load := benchdoc.LoadAverage()
	var lat []time.Duration
	for i := range runs {
		lg.start(b)
		lg.waitHealthy(b, 60*time.Second)
		// A random phase between the kill and the poll ticks.
		time.Sleep(time.Second + rand.N(lg.group.PollInterval))
		killed := time.Now()
		if err := lg.topo.Sites[0].Kill(); err != nil {
			b.Fatalf("run %d: kill primary: %v", i, err)
		}
		d, ok := lg.waitFor(statemachine.PrimaryDown, killed, 60*time.Second)
		if !ok {
			b.Fatalf("run %d: no PrimaryDown within 60s; last code %q; sites %v", i, lg.lastCode(), lg.views())
		}
		lat = append(lat, d.at.Sub(killed))
		lg.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := lg.topo.Sites[0].Restart(ctx)
		cancel()
		if err != nil {
			b.Fatalf("run %d: restart primary: %v", i, err)
		}
		promote.Site(b, lg.topo.Sites[0]) // a restarted site comes back read-only
	}
	st := benchdoc.Distribution(lat)
	b.ReportMetric(ms(st.Min), "min-ms")
	b.ReportMetric(ms(st.P50), "p50-ms")
	b.ReportMetric(ms(st.P90), "p90-ms")
	b.ReportMetric(ms(st.Max), "max-ms")
	b.Logf("kill → PrimaryDown over %d runs: min %v p50 %v p90 %v max %v mean %v", len(lat), st.Min, st.P50, st.P90, st.Max, st.Mean)
	if !benchWrite() {
		return
	}
	g := lg.group
	var raw []string
	for _, d := range lat {
		raw = append(raw, fmt.Sprintf("%.0f", ms(d)))
	}
	verdict := "met by every run"
	switch target := 1500 * time.Millisecond; {
	case st.P50 > target:
		verdict = "NOT met"
	case st.Max > target:
		verdict = "met at p50, not by every run"
	}
	benchdoc.Write(b, "..", "detection.md", fmt.Sprintf(`# Detection latency: killed primary → PrimaryDown

%s
- MariaDB: %s; load average when the benchmark started: %s

## Setup

- 3 MariaDB sites on 127.0.0.1 (testenv.StartTopology): site0 primary, site1 and
  site2 GTID replicas (MASTER_HEARTBEAT_PERIOD=0.5, MASTER_CONNECT_RETRY=1,
  slave_net_timeout=3), replication direct.
- Daemon → site links through toxiproxy fault proxies (testenv.NewProxy).
- poller.NewFromGroup + poller.NewGroupTracker with the defaults:
  pollInterval %v, probeTimeout %v, failureThreshold %d, recoveryThreshold %d,
  detection %s. statemachine.Detect runs after every observation with site0 as
  the persisted primary.
- Each run: fresh poller and tracker, wait for Healthy, wait 1 s plus a random
  0–%v phase, SIGKILL site0, measure until Detect first returns PrimaryDown
  (daemon unreachable after %d failed probes, and both replicas report their IO
  thread lost), then restart site0.

## Results (%d runs)

| min | p50 | p90 | max | mean |
|----:|----:|----:|----:|-----:|
| %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.0f ms |

Target ≤ 1.5 s: %s. The anchor promotes 12 s after a clean primary kill.

Raw latencies (ms, in run order): %s

Expected shape: the first failed probe comes at the next tick after the kill
(0–%v), the second one interval later; both fail fast (the proxy closes the
connection at once), so latency ≈ %v + phase, and the replicas have lost the
primary's IO connection within about 70 ms.

Reproduce: `+"`FAILOVERD_BENCH_WRITE=1 go test -run '^$' -bench BenchmarkDetectionLatency -benchtime 1x ./poller/`"+`
`, benchdoc.MachineInfo(), mariadbVersion, load,
		g.PollInterval, g.ProbeTimeout, g.FailureThreshold, g.RecoveryThreshold, g.Detection,
		g.PollInterval, g.FailureThreshold,
		len(lat), ms(st.Min), ms(st.P50), ms(st.P90), ms(st.Max), ms(st.Mean), verdict,
		strings.Join(raw, ", "), g.PollInterval, time.Duration(g.FailureThreshold-1)*g.PollInterval))
}

// pollResult is one measured polling window.
type pollResult struct {
	sites                  int
	answered               int // sites that answered at least once before the window
	wall                   time.Duration
	cores, serverCores     float64
	sysShare               float64 // share of the CPU time spent in the kernel
	rssKB, hwmKB           int64
	stackKB                int64 // goroutine stacks in use (runtime.MemStats.StackInuse)
	goroutines             int
	probes, reachable      int
	p50, p99               time.Duration
	newConns, connectedEnd int64
}

func (r pollResult) rate() float64 { return float64(r.probes) / r.wall.Seconds() }

func (r pollResult) reachablePct() float64 {
	return 100 * float64(r.reachable) / float64(max(r.probes, 1))
}

// cpuPerProbe is this process's CPU per successful probe.
func (r pollResult) cpuPerProbe() time.Duration {
	return time.Duration(r.cores * float64(r.wall) / float64(max(r.reachable, 1)))
}

// BenchmarkPolling1000Sites polls 100, 1,000 and then 5,000 site entries
// (all pointing at one MariaDB; FAILOVERD_BENCH_SCALE_SITES,
// comma-separated, changes the sizes) every second and measures this
// process's CPU (getrusage over a window) and RSS. The smaller run shows the
// client's cost per probe while the one server keeps up; from 1,000 sites
// that server (answering 1,000 status probes a second and more on the same
// 2 cores) is the bottleneck, not the poller. It records the figures
// scale_cpu_<n> and scale_rss_<n> in docs/benchmarks/results.json (targets
// at 1,000 sites).
func BenchmarkPolling1000Sites(b *testing.B) {
	if testing.Short() {
		b.Skip("-short: this benchmark opens up to 5,000 MariaDB sessions and polls them for a few minutes")
	}
	window := envDuration("FAILOVERD_BENCH_WINDOW", 30*time.Second)
	sizes := scaleSizes()
	// Two sessions per site (prober and watch), and room for the harness's
	// own and reconnects.
	maxConns := 2*slices.Max(sizes) + 200
	m := testenv.StartMariaDB(b, testenv.ServerOptions{Name: "polled", ExtraArgs: []string{
		fmt.Sprintf("--max-connections=%d", maxConns), fmt.Sprintf("--open-files-limit=%d", 2*maxConns+1000), ownTmpdir(b)}})
	mariadbVersion := m.QueryString(b, "SELECT VERSION()")
	load := benchdoc.LoadAverage()
	var results []pollResult
	for _, sites := range sizes {
		b.Run(fmt.Sprintf("sites=%d", sites), func(b *testing.B) {
			r := measurePolling(b, m, sites, window)
			results = append(results, r)
			b.ReportMetric(r.cores, "cores")
			b.ReportMetric(float64(r.rssKB)/1024, "rss-MB")
			b.ReportMetric(r.rate(), "probes/s")
			b.ReportMetric(r.reachablePct(), "reachable-%")
			b.Logf("%d sites at 1s: %.3f cores (%.0f%% kernel), RSS %.1f MB (peak %.1f MB, goroutine stacks %.1f MB, %d goroutines), %.0f probes/s, %.2f%% reachable, probe p50 %v p99 %v, %v CPU per successful probe, server %.2f cores, %d new server connections in the window, %d connected",
				r.sites, r.cores, 100*r.sysShare, float64(r.rssKB)/1024, float64(r.hwmKB)/1024, float64(r.stackKB)/1024, r.goroutines, r.rate(), r.reachablePct(), r.p50, r.p99, r.cpuPerProbe(), r.serverCores, r.newConns, r.connectedEnd)
		})
	}
	recordScale(b, results)
	if !benchWrite() || len(results) < 2 {
		return
	}
	var rows strings.Builder
	for _, r := range results {
		fmt.Fprintf(&rows, "| %d | %.3f | %.0f %% | %.1f MB | %.1f MB | %.1f MB | %.0f | %.1f %% | %v | %v | %v | %.2f | %d |\n",
			r.sites, r.cores, 100*r.sysShare, float64(r.rssKB)/1024, float64(r.hwmKB)/1024, float64(r.stackKB)/1024, r.rate(), r.reachablePct(),
			r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.cpuPerProbe().Round(time.Microsecond), r.serverCores, r.newConns)
	}
	verdict := "Targets for 1,000 sites: not measured in this run (FAILOVERD_BENCH_SCALE_SITES)."
	if i := slices.IndexFunc(results, func(r pollResult) bool { return r.sites == 1000 }); i >= 0 {
		verdict = scaleVerdict(results[i])
	}
	verdict += growthNote(results)
	benchdoc.Write(b, "..", "polling.md", fmt.Sprintf(`# Polling cost: %s sites at 1 s

%s
- MariaDB: %s; load average when the benchmark started: %s (the machine is
  shared with other engineers' builds and tests)

## Setup

- One MariaDB on 127.0.0.1 (testenv.StartMariaDB, --max-connections=%d).
  %s site entries in turn point at it, as the daemon polls them: groups of
  %d sites, a poller.New per group (the daemon builds one per group with
  NewFromGroup), each site with its own mysqlctl.Instance (pool of one
  session, reused) opened by poller.MySQLDialer and polled every 1 s
  (probe timeout 800 ms), and its watch session (poller.MySQLWatcher: one
  more idle session a site, as the daemon holds).
  A probe is mysqlctl.Status: one SELECT of variables, SHOW GLOBAL STATUS
  LIKE 'Rpl_semi_sync_%%_status' and SHOW ALL SLAVES STATUS, sent in one
  request (MySQLDialer opens its instances StatusOnly, whose sessions accept
  multi-statement text and run nothing else).
- After every site answered once (or, past 2 minutes plus 10 ms a site, as
  many as did; the figure's notes say how many) and 3 s more, the CPU of this process is
  measured with getrusage(RUSAGE_SELF) (user + system) over a %v window; RSS
  and peak RSS (VmRSS, VmHWM) come from /proc/self/status at its end (the test
  binary's own baseline included), the goroutine stacks in use from
  runtime.MemStats.StackInuse. Server CPU is mariadbd's utime + stime from
  /proc over the same window.

## Results

| sites | CPU (cores) | of which kernel | RSS | peak RSS | goroutine stacks | probes/s | reachable | probe p50 | probe p99 | CPU per OK probe | server cores | new server conns |
|------:|------------:|----------------:|----:|---------:|-----------------:|---------:|----------:|----------:|----------:|-----------------:|-------------:|-----------------:|
%s
%s

Should the one server fall behind (probes failing), the scale_cpu figure of
results.json is the CPU per successful probe times the number of sites:
what the poller would spend if every probe succeeded, conservative since
the failed probes and reconnects are charged to the successful ones. No
target is set beyond 1,000 sites; 5,000 shows how the poller's cost and
memory grow.

The probe durations (p50, p99) include the wait at the one server: the
sites whose ticks share a step of the grid (below) send their probes to it
at the same instant, and it answers them one after the other. In a real
deployment every site is its own server.

%s

Reproduce: `+"`FAILOVERD_BENCH_WRITE=1 go test -run '^$' -bench BenchmarkPolling1000Sites -benchtime 1x ./poller/`"+`
`, sizesText(results, ", "), benchdoc.MachineInfo(), mariadbVersion, load, maxConns, sizesText(results, ", then "), benchGroupSize, window, rows.String(),
		verdict, probeCostNote))
}

// probeCostNote records the probe-path measurements of issue 18 (taken
// while making the changes; see BenchmarkProbeCPU).
const probeCostNote = `## What made the poller cheap (issue 18)

Measured on this machine while making each change (1,000 sites, one
poller of 1,000 site entries, 20 s windows):

1. **Ticks on a grid** (poller: regular ticks fire on multiples of a
   twentieth of the poll interval, at most 50 ms, of the clock's time; a
   group's sites start on steps chosen by the group's name). With a timer
   of its own per site, the process woke from sleep for nearly every probe:
   about half of its CPU went to the kernel (epoll, futex wake-ups of idle
   threads) and the Go scheduler's spinning. Batched, one wake-up serves
   the fifty or so probes due in a step: 0.260 → 0.075 core at 1,000 sites
   (kernel share 47 → 30 %), 0.35 core at 5,000. A tick fires at most one
   step late and the cadence stays on the exact times; early probes (the
   daemon's Kick, a broken watch session) are never held back, nor are the
   ticks of a site whose probes fail (they run a full interval apart from
   the first failed one), so detection keeps its timing (detection.md).
2. **A cheap status query for the server** (mysqlctl, MariaDB): the
   semi-sync variables come from @@GLOBAL and the two semi-sync status
   counters from SHOW GLOBAL STATUS LIKE, instead of scalar subqueries
   over information_schema.GLOBAL_VARIABLES and GLOBAL_STATUS, which
   materialise every variable (through temporary tables) on each probe.
   Server CPU per probe about 1-2 ms → 0.2 ms (the one MariaDB answering
   1,000 probes a second: 1.8 → 0.25 core), which is what lets one server
   answer 1,000 and 5,000 sites here at all (before, only 38 % of the
   probes at 1,000 sites succeeded). Every monitored server gains the same.
3. **One request per probe** (MySQLDialer opens its instances mysqlctl
   StatusOnly: one write, one read, one pool checkout and one database/sql
   context goroutine per probe instead of one per statement):
   BenchmarkProbeCPU (probes back to back on one site) 189 → 140 µs of CPU
   per probe. A long-lived probe goroutine per site instead of one per
   probe saved about 4 % more but kept about 9 KB more goroutine stack
   resident per site, so it was not kept.

What remains per probe is mostly the kernel's loopback TCP (write and
read; the in-kernel delivery to the server's socket is charged to the
writer), the MySQL driver's packet parsing (SHOW ALL SLAVES STATUS sends
the metadata of some 60 columns even when it has no row) and database/sql.`

// growthNote says how CPU and RSS grow with the number of sites: per
// 1,000 sites, from the smallest run to each larger one.
func growthNote(rs []pollResult) string {
	if len(rs) < 2 {
		return ""
	}
	var parts []string
	for _, r := range rs[1:] {
		d := float64(r.sites-rs[0].sites) / 1000
		parts = append(parts, fmt.Sprintf("%d → %d sites: %.3f core and %.0f MB more per 1,000 sites",
			rs[0].sites, r.sites, (r.cores-rs[0].cores)/d, float64(r.rssKB-rs[0].rssKB)/1024/d))
	}
	return "\nGrowth (linear when these agree): " + strings.Join(parts, "; ") + "."
}

// scaleVerdict is polling.md's verdict on the 1,000-site targets.
func scaleVerdict(big pollResult) string {
	// Cores for 1,000 successful probes a second, conservative: the CPU of
	// failed probes and reconnects is charged to the successful ones.
	est := big.cpuPerProbe().Seconds() * 1000
	verdict := fmt.Sprintf("Targets for 1,000 sites: < 0.3 core: %s (%.3f core, %.2f %% of the probes succeeded);\n< 150 MB RSS: %s (%.1f MB).",
		targetVerdict(big.cores < 0.3), big.cores, big.reachablePct(), targetVerdict(big.rssKB < 150*1024), float64(big.rssKB)/1024)
	if big.reachablePct() < 99.5 {
		verdict = fmt.Sprintf(`Targets for 1,000 sites: < 0.3 core: %s (measured %.3f core with only %.0f
successful probes a second because the server fell behind; %.3f core for 1,000
successful probes a second, scaling the CPU per successful probe, which also
carries the failed probes and reconnects); < 150 MB RSS: %s (%.1f MB).`,
			targetVerdict(big.cores < 0.3 && est < 0.3), big.cores, float64(big.reachable)/big.wall.Seconds(), est,
			targetVerdict(big.rssKB < 150*1024), float64(big.rssKB)/1024)
	}
	return verdict
}

// measurePolling polls sites entries pointing at m every second, as the
// daemon does (a poller per group of three sites), and measures one window.
func measurePolling(b *testing.B, m *testenv.Server, sites int, window time.Duration) pollResult {
	// As NewFromGroup builds it: a prober and a watch session per site.
	base := mysqlctl.Options{User: testenv.AdminUser, Password: testenv.AdminPassword, MaxOpenConns: 1, Logger: slog.New(slog.DiscardHandler)}
	var pollers []*Poller
	for first := 0; first < sites; first += benchGroupSize {
		cfg := Config{
			Group:            fmt.Sprintf("bench-%04d", first/benchGroupSize),
			PollInterval:     time.Second,
			ProbeTimeout:     800 * time.Millisecond,
			FailureThreshold: 2,
			Logger:           slog.New(slog.DiscardHandler),
			Dial:             MySQLDialer(base, nil),
			Watch:            MySQLWatcher(base, nil),
		}
		for i := first; i < min(first+benchGroupSize, sites); i++ {
			cfg.Sites = append(cfg.Sites, Site{Name: fmt.Sprintf("s%04d", i), Addr: m.Addr()})
		}
		p, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		pollers = append(pollers, p)
	}
	var (
		mu        sync.Mutex
		measuring bool
		seen      = map[string]bool{}
		total, ok int
		durations []time.Duration
	)
	sink := func(o Observation) {
		mu.Lock()
		defer mu.Unlock()
		if o.Reachable {
			seen[o.Site] = true
		}
		if !measuring {
			return
		}
		total++
		if o.Reachable {
			ok++
		}
		durations = append(durations, o.Duration)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	for _, p := range pollers {
		running.Go(func() { _ = p.Run(ctx, sink) })
	}
	defer func() { cancel(); running.Wait() }()

	// Warm-up: every site connected once, then a few seconds more. The
	// first round opens a session per site: allow 2 minutes plus 10 ms a
	// site. A server that cannot answer that many (5,000 sites, two
	// sessions each, on 2 shared cores: dials time out and back off) is
	// measured anyway, and the figure says how many answered.
	warmup := 2*time.Minute + time.Duration(sites)*10*time.Millisecond
	answered := 0
	for deadline := time.Now().Add(warmup); ; time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		answered = len(seen)
		mu.Unlock()
		if answered == sites {
			break
		}
		if time.Now().After(deadline) {
			if answered == 0 {
				log, _ := os.ReadFile(m.ErrorLog())
				b.Fatalf("only %d of %d sites answered within %v; server log:\n%s", answered, sites, warmup, log[max(0, len(log)-3000):])
			}
			b.Logf("%d of %d sites answered within %v; measuring anyway", answered, sites, warmup)
			break
		}
	}
	time.Sleep(3 * time.Second)
	connsBefore := serverCounter(b, m, "CONNECTIONS")

	mu.Lock()
	measuring = true
	mu.Unlock()
	user0, sys0 := selfCPU()
	serverCPU0, wall0 := childCPU("mariadbd"), time.Now()
	time.Sleep(window)
	user1, sys1 := selfCPU()
	serverCPU1, wall1 := childCPU("mariadbd"), time.Now()
	mu.Lock()
	measuring = false
	r := pollResult{sites: sites, answered: answered, wall: wall1.Sub(wall0), probes: total, reachable: ok}
	durs := slices.Clone(durations)
	mu.Unlock()
	r.rssKB, r.hwmKB = procStatusKB("VmRSS"), procStatusKB("VmHWM")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.stackKB, r.goroutines = int64(ms.StackInuse/1024), runtime.NumGoroutine()
	r.newConns = serverCounter(b, m, "CONNECTIONS") - connsBefore
	r.connectedEnd = serverCounter(b, m, "THREADS_CONNECTED")
	r.cores = (user1 - user0 + sys1 - sys0).Seconds() / r.wall.Seconds()
	r.sysShare = (sys1 - sys0).Seconds() / max((user1-user0+sys1-sys0).Seconds(), 1e-9)
	r.serverCores = (serverCPU1 - serverCPU0).Seconds() / r.wall.Seconds()
	r.p50, r.p99 = benchdoc.Percentile(durs, 0.5), benchdoc.Percentile(durs, 0.99)
	return r
}

func targetVerdict(met bool) string {
	if met {
		return "met"
	}
	return "NOT met"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// selfCPU returns this process's user and system CPU time.
func selfCPU() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// childCPU returns the CPU time (utime + stime from /proc/PID/stat) of this
// process's children named comm.
func childCPU(comm string) time.Duration {
	entries, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	var total time.Duration
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < 0 || s[open+1:end] != comm {
			continue
		}
		f := strings.Fields(s[end+1:]) // f[0] = state (field 3)
		if len(f) < 13 || f[1] != self {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)          // field 14
		st, _ := strconv.ParseInt(f[12], 10, 64)          // field 15
		total += time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
	}
	return total
}

// procStatusKB returns a "kB" field of /proc/self/status.
func procStatusKB(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// serverCounter reads a status counter of m, trying again a few times: the
// server answering thousands of probes (on a shared, loaded machine) may
// let one read time out.
func serverCounter(b *testing.B, m *testenv.Server, name string) int64 {
	var err error
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var v string
		err = m.AdminDB(b).QueryRowContext(ctx, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = ?", name).Scan(&v)
		cancel()
		if err == nil {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
		time.Sleep(time.Second)
	}
	b.Fatalf("read the server's %s: %v", name, err)
	return 0
}

// benchGroupSize is the number of sites of each group (one poller each) in
// the scale benchmark.
const benchGroupSize = 3

// ownTmpdir is a --tmpdir of the benchmark's own: the status query's
// information_schema reads go through temporary tables there, and every
// MariaDB starting with the shared /tmp as its tmpdir deletes the "#sql"
// files it finds (other tests on this machine start servers all the time),
// failing a probe in flight with "Error on delete of '/tmp/#sql-temptable…'".
func ownTmpdir(b *testing.B) string { return "--tmpdir=" + b.TempDir() }

// scaleSizes is FAILOVERD_BENCH_SCALE_SITES (comma-separated), default 100,
// 1,000 and 5,000 sites.
func scaleSizes() []int {
	var out []int
	for f := range strings.SplitSeq(os.Getenv("FAILOVERD_BENCH_SCALE_SITES"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return []int{100, 1000, 5000}
	}
	return out
}

func sizesText(rs []pollResult, sep string) string {
	var s []string
	for _, r := range rs {
		s = append(s, strconv.Itoa(r.sites))
	}
	return strings.Join(s, sep)
}

// recordScale records scale_cpu_<n> and scale_rss_<n> for every size
// measured; the targets are the 1,000-site ones (0.3 core, 150 MB).
func recordScale(b *testing.B, rs []pollResult) {
	var figs []benchdoc.Figure
	for _, r := range rs {
		cpuT, rssT := benchdoc.Target{}, benchdoc.Target{}
		if r.sites == 1000 {
			cpuT = benchdoc.Target{Text: "≤ 0.3 core", MaxMax: benchdoc.Bound(0.3)}
			rssT = benchdoc.Target{Text: "≤ 150 MB", MaxMax: benchdoc.Bound(150)}
		}
		cores, how := r.cores, "measured"
		if r.reachablePct() < 99.5 {
			// The server fell behind, so fewer probes were paid for: charge
			// the CPU per successful probe (failed ones included) for all.
			est := r.cpuPerProbe().Seconds() * float64(r.sites)
			if est > cores {
				cores, how = est, fmt.Sprintf("scaled to %d successful probes/s from the CPU per successful probe (only %.1f %% succeeded; measured %.3f core)", r.sites, r.reachablePct(), r.cores)
			}
		}
		after := "after every site answered once"
		if r.answered < r.sites {
			after = fmt.Sprintf("after %d of the sites answered once, the others still dialling", r.answered)
		}
		figs = append(figs,
			benchdoc.NewFigure(fmt.Sprintf("scale_cpu_%d", r.sites), "cores", []float64{cores}, cpuT, fmt.Sprintf(
				`CPU of the polling process (getrusage user+system over a %v window, %s)
polling %d site entries every 1 s, all pointing at one local MariaDB, in groups of %d with a poller each
(poller.New + MySQLDialer + MySQLWatcher, probe timeout 800 ms); %s. Details: polling.md.`, r.wall.Round(time.Second), after, r.sites, benchGroupSize, how)),
			benchdoc.NewFigure(fmt.Sprintf("scale_rss_%d", r.sites), "MB", []float64{float64(r.rssKB) / 1024}, rssT, fmt.Sprintf(
				`VmRSS of the polling process (the test binary's baseline included) at the end of the scale_cpu_%d window.`, r.sites)))
	}
	benchdoc.Record(b, "..", figs...)
}

// BenchmarkProbeCPU measures this process's CPU per probe on the probe path
// the daemon runs (siteLoop.probe: the probe goroutine, MySQLDialer's
// mysqlctl.Instance, mysqlctl.Status) against one local MariaDB, probes
// back to back on one site: the client-side cost per probe that the scale
// figures multiply, without the scheduling of many sites. Profile it with
//
//	go test -run '^$' -bench BenchmarkProbeCPU -benchtime 2000x -cpuprofile cpu.prof ./poller/
func BenchmarkProbeCPU(b *testing.B) {
	if testing.Short() {
		b.Skip("-short: this benchmark starts a MariaDB")
	}
	m := testenv.StartMariaDB(b, testenv.ServerOptions{Name: "probed", ExtraArgs: []string{ownTmpdir(b)}})
	cfg := Config{
		Group: "bench", PollInterval: time.Second, ProbeTimeout: 800 * time.Millisecond, FailureThreshold: 2,
		Dial: MySQLDialer(mysqlctl.Options{
			User: testenv.AdminUser, Password: testenv.AdminPassword, MaxOpenConns: 1,
			Logger: slog.New(slog.DiscardHandler),
		}, nil),
		Clock:  SystemClock{},
		Logger: slog.New(slog.DiscardHandler),
		Sites:  []Site{{Name: "s0", Addr: m.Addr()}},
	}
	loop := &siteLoop{cfg: &cfg, book: newAddressBook(cfg.Sites), site: cfg.Sites[0], log: cfg.Logger}
	defer loop.shutdown()
	ctx := context.Background()
	if obs, _ := loop.probe(ctx); !obs.Reachable { // connect outside the measurement
		b.Fatalf("first probe: %v", obs.Err)
	}
	user0, sys0 := selfCPU()
	b.ResetTimer()
	for range b.N {
		if obs, _ := loop.probe(ctx); !obs.Reachable {
			b.Fatalf("probe: %v", obs.Err)
		}
	}
	b.StopTimer()
	user1, sys1 := selfCPU()
	b.ReportMetric(float64((user1-user0+sys1-sys0).Microseconds())/float64(b.N), "cpu-µs/probe")
}
