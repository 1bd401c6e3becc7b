package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/benchdoc"
	"github.com/failoverd/failoverd/test/testenv"
)

// The HAProxy of deploy/haproxy/haproxy.cfg (Debian's haproxy, installed
// by scripts/deps) in front of real sites and their sidecars: clients
// reach the group only through its writer and reader frontends.

// shippedHAProxyConfig is the shipped example, relative to this package.
const shippedHAProxyConfig = "../../deploy/haproxy/haproxy.cfg"

// haproxyInter is the shipped backends' check interval (inter 1s): the
// slack a reader's staleness may have beyond maxLag.
const haproxyInter = time.Second

var (
	shippedBind   = regexp.MustCompile(`(?m)^(\s+bind )10\.0\.0\.5:(3306|3307)$`)
	shippedServer = regexp.MustCompile(`(?m)^(\s+server )site(\d+) 10\.0\.\d+\.10:3306 check port 9300$`)
)

// shippedHAProxy returns the shipped configuration for g: only the bind
// addresses (writer 3306, reader 3307), the server addresses (each site's
// mysqld, checked on its sidecar's port) and the readers' maxLag are
// rewritten; everything else (checks, timings, on-marked-down) is the
// file's. It fails t when the file no longer has the lines it rewrites.
func shippedHAProxy(t testing.TB, g *group, maxLag string) func(addrs map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(shippedHAProxyConfig)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := len(shippedBind.FindAllString(text, -1)); n != 2 {
		t.Fatalf("%s: %d bind lines 10.0.0.5:3306/3307, want 2 (writer and reader)", shippedHAProxyConfig, n)
	}
	if n := len(shippedServer.FindAllString(text, -1)); n != 2*len(g.topo.Sites) {
		t.Fatalf("%s: %d server lines, want %d (every site in both backends)", shippedHAProxyConfig, n, 2*len(g.topo.Sites))
	}
	if !strings.Contains(text, "maxLag=5s") {
		t.Fatalf("%s: the reader check has no maxLag=5s", shippedHAProxyConfig)
	}
	text = strings.ReplaceAll(text, "maxLag=5s", "maxLag="+maxLag)
	text = shippedServer.ReplaceAllStringFunc(text, func(line string) string {
		m := shippedServer.FindStringSubmatch(line)
		i, _ := strconv.Atoi(m[2]) // \d+ by the pattern
		_, port, _ := strings.Cut(g.sidecarAddrs[i], ":")
		return fmt.Sprintf("%ssite%d %s check port %s", m[1], i, g.topo.Sites[i].Addr(), port)
	})
	return func(addrs map[string]string) string {
		return shippedBind.ReplaceAllStringFunc(text, func(line string) string {
			m := shippedBind.FindStringSubmatch(line)
			if m[2] == "3306" {
				return m[1] + addrs["writer"]
			}
			return m[1] + addrs["reader"]
		})
	}
}

// startHAProxy starts the shipped HAProxy in front of g (sidecars running)
// and waits until the writer backend has exactly site0 up and the reader
// backend every other site.
func startHAProxy(t testing.TB, g *group, maxLag string) *testenv.HAProxy {
	t.Helper()
	h := testenv.StartHAProxy(t, testenv.HAProxyOptions{Frontends: []string{"writer", "reader"}, Config: shippedHAProxy(t, g, maxLag)})
	var replicas []string
	for i := 1; i < len(g.topo.Sites); i++ {
		replicas = append(replicas, fmt.Sprintf("site%d", i))
	}
	waitHAProxyUp(t, h, "mysql_writer", []string{"site0"}, 20*time.Second)
	waitHAProxyUp(t, h, "mysql_readers", replicas, 20*time.Second)
	return h
}

// waitHAProxyUp waits until exactly want pass backend's checks and returns
// how long it took; t.Fatalf after timeout.
func waitHAProxyUp(t testing.TB, h *testenv.HAProxy, backend string, want []string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var got []string
	var err error
	for time.Since(start) < timeout {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		got, err = h.Up(ctx, backend)
		cancel()
		if err == nil && slices.Equal(got, want) {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	states, _ := h.Servers(ctx, backend)
	t.Fatalf("haproxy %s: servers up %v (%v) after %v, want %v; states %v", backend, got, err, timeout, want, states)
	return 0
}

// heartbeat updates app.heartbeat's one row every 100 ms with the client's
// clock (UnixNano) through one DSN, and records each acknowledged value.
type heartbeat struct {
	db   *sql.DB
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	acks []hbAck // ascending in v and at
}

type hbAck struct {
	v  int64
	at time.Time
}

func startHeartbeat(t testing.TB, dsn string) *heartbeat {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	h := &heartbeat{db: db, stop: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS " + testenv.AppDatabase + ".heartbeat (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB",
		"REPLACE INTO " + testenv.AppDatabase + ".heartbeat VALUES (1, 0)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("heartbeat: %s: %v", q, err)
		}
	}
	go h.run()
	t.Cleanup(h.Stop)
	return h
}

func (h *heartbeat) run() {
	defer close(h.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-tick.C:
		}
		v := time.Now().UnixNano()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := h.db.ExecContext(ctx, "UPDATE "+testenv.AppDatabase+".heartbeat SET v = ? WHERE id = 1", v)
		cancel()
		if err == nil {
			h.mu.Lock()
			h.acks = append(h.acks, hbAck{v: v, at: time.Now()})
			h.mu.Unlock()
		}
	}
}

// Stop ends the updates; idempotent.
func (h *heartbeat) Stop() {
	select {
	case <-h.stop:
	default:
		close(h.stop)
		<-h.done
		_ = h.db.Close()
	}
}

// staleness is how outdated a read that started at start and returned v
// was: how long before start a newer value had been acknowledged (0 when
// none had been).
func (h *heartbeat) staleness(v int64, start time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := sort.Search(len(h.acks), func(i int) bool { return h.acks[i].v > v })
	if i == len(h.acks) || !h.acks[i].at.Before(start) {
		return 0
	}
	return start.Sub(h.acks[i].at)
}

// readLoad reads the heartbeat row through one DSN with a new connection
// per read (so every read is balanced by the proxy) and records what each
// read returned and which server answered.
type readLoad struct {
	db   *sql.DB
	stop chan struct{}
	wg   sync.WaitGroup
	errs atomic.Int64

	mu    sync.Mutex
	reads []hbRead
}

type hbRead struct {
	start  time.Time
	v      int64
	server uint32
}

func startReadLoad(t testing.TB, dsn string, workers int) *readLoad {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxIdleConns(0) // a new session per read: each one is routed afresh
	r := &readLoad{db: db, stop: make(chan struct{})}
	for range workers {
		r.wg.Go(func() {
			for {
				select {
				case <-r.stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				start := time.Now()
				var rd hbRead
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				err := db.QueryRowContext(ctx, "SELECT v, @@server_id FROM "+testenv.AppDatabase+".heartbeat WHERE id = 1").Scan(&rd.v, &rd.server)
				cancel()
				if err != nil {
					r.errs.Add(1)
					continue
				}
				rd.start = start
				r.mu.Lock()
				r.reads = append(r.reads, rd)
				r.mu.Unlock()
			}
		})
	}
	t.Cleanup(r.Stop)
	return r
}

// Stop ends the reads; idempotent.
func (r *readLoad) Stop() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
		r.wg.Wait()
		_ = r.db.Close()
	}
}

func (r *readLoad) all() []hbRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reads)
}

// waitReads waits until n more reads succeeded.
func (r *readLoad) waitReads(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	want := len(r.all()) + n
	deadline := time.Now().Add(timeout)
	for len(r.all()) < want {
		if time.Now().After(deadline) {
			t.Fatalf("reads through haproxy: %d of %d after %v (%d errors)", len(r.all()), want, timeout, r.errs.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// acksBySite returns load's acks with Target set to the index of the site
// that committed each (read from the rows' origin on db; -1 for a row db
// lacks): behind HAProxy every ack's own Target is the writer frontend.
func acksBySite(t testing.TB, g *group, load *testenv.WriteLoad, db *sql.DB) []testenv.Ack {
	t.Helper()
	origins := load.Origins(t, db)
	site := map[uint32]int{}
	for i, m := range g.topo.Sites {
		site[m.ServerID] = i
	}
	acks := load.Acks()
	for i := range acks {
		acks[i].Target = -1
		if o, ok := origins[acks[i].ID]; ok {
			if s, ok := site[o]; ok {
				acks[i].Target = s
			}
		}
	}
	return acks
}

// haproxyReadersConfig enables the daemon's reader decision with maxLag 2s.
const haproxyReadersConfig = "    readers:\n      enabled: true\n      maxLag: 2s\n"

const readersMaxLag = 2 * time.Second

// TestHAProxyRoutesWritesAndFreshReads is issue 29's HAProxy acceptance on
// real servers: the shipped deploy/haproxy/haproxy.cfg in front of a
// 3-site group with sidecars, clients connected only to its writer and
// reader frontends. It guards: (1) a replica whose SQL thread is stopped
// leaves the reader backend (no read reaches it afterwards, the daemon's
// reader decision drops it too) and returns after START REPLICA
// SQL_THREAD; (2) after kill -9 of the primary, writes resume through the
// writer frontend on the new primary with no acknowledged write lost and
// no ack by the old primary after the new one's first; (3) no read through
// the reader frontend returns a heartbeat older than maxLag + the check
// interval.
func TestHAProxyRoutesWritesAndFreshReads(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, sidecars: true, extraConfig: haproxyReadersConfig})
		g.startDaemon()
		g.waitHealthy("site0", 30*time.Second)
		g.startSidecars()
		g.waitSidecarsRenewed()
		h := startHAProxy(t, g, readersMaxLag.String())
		writer := testenv.SiteDSN(h.Addr("writer"), testenv.AppUser, testenv.AppPassword)
		reader := testenv.SiteDSN(h.Addr("reader"), testenv.AppUser, testenv.AppPassword)

		load := testenv.StartWriteLoad(t, []string{writer}, testenv.WriteLoadOptions{Workers: 2})
		hb := startHeartbeat(t, writer)
		reads := startReadLoad(t, reader, 2)
		load.WaitForAcks(t, 50, 20*time.Second)
		reads.waitReads(t, 20, 20*time.Second)

		// (1) site2's SQL thread stops: it leaves the reader backend, and
		// builds a backlog beyond maxLag while out.
		site2 := g.topo.Sites[2]
		g.note("stop site2's SQL thread")
		site2.Exec(t, "STOP REPLICA SQL_THREAD")
		took := waitHAProxyUp(t, h, "mysql_readers", []string{"site1"}, 10*time.Second)
		out := time.Now()
		t.Logf("site2 left the reader backend %v after its SQL thread stopped", took)
		g.waitFor("site2 out of the daemon's reader set", 10*time.Second, func() bool {
			st, err := g.status()
			s, ok := st.Site("site2")
			return err == nil && ok && s.Reader != nil && !s.Reader.Eligible
		})
		time.Sleep(readersMaxLag + time.Second)
		for _, rd := range reads.all() {
			if rd.server == site2.ServerID && rd.start.After(out) {
				t.Fatalf("a read started %v after site2 left the reader backend was served by site2", rd.start.Sub(out))
			}
		}
		g.note("start site2's SQL thread")
		site2.Exec(t, "START REPLICA SQL_THREAD")
		took = waitHAProxyUp(t, h, "mysql_readers", []string{"site1", "site2"}, 20*time.Second)
		t.Logf("site2 back in the reader backend %v after START REPLICA SQL_THREAD", took)
		reads.waitReads(t, 20, 20*time.Second)

		// (2) kill -9 of the primary under load.
		before := len(load.Acked())
		g.kill(0)
		var st groupStatus
		g.waitFor("a replica promoted", failoverTimeout, func() bool {
			s, err := g.status()
			st = s
			return err == nil && s.ActiveSite != "" && s.ActiveSite != "site0" && s.InFlight == nil
		})
		newIdx := slices.Index([]string{"site0", "site1", "site2"}, st.ActiveSite)
		load.WaitForAcks(t, before+50, 30*time.Second)
		waitHAProxyUp(t, h, "mysql_writer", []string{st.ActiveSite}, 10*time.Second)
		reads.waitReads(t, 10, 30*time.Second)
		load.Stop()
		hb.Stop()
		reads.Stop()

		newP := g.topo.Sites[newIdx]
		if missing := load.Missing(t, newP.AppDB(t)); len(missing) > 0 {
			t.Fatalf("%d acknowledged writes through the writer frontend missing on %s: %v", len(missing), st.ActiveSite, missing[:min(len(missing), 10)])
		}
		acks := acksBySite(t, g, load, newP.AdminDB(t))
		firstNew, overlap := overlapping(acks, 0, newIdx)
		if firstNew.IsZero() {
			t.Fatalf("no write through the writer frontend acknowledged by %s", st.ActiveSite)
		}
		for _, a := range overlap {
			t.Errorf("site0 acknowledged write %d at %s, after %s's first ack at %s", a.ID, a.At.Format(time.RFC3339Nano), st.ActiveSite, firstNew.Format(time.RFC3339Nano))
		}
		t.Logf("writes through haproxy resumed on %s %v after the last ack by site0; %d acks, none lost", st.ActiveSite, firstNew.Sub(lastAck(acks, 0)), len(acks))

		// (3) staleness of every read through the reader frontend.
		bound := readersMaxLag + haproxyInter
		var worst time.Duration
		primary := map[uint32]bool{g.topo.Sites[0].ServerID: true}
		for _, rd := range reads.all() {
			if primary[rd.server] {
				t.Errorf("a read through the reader frontend was served by the primary site0")
			}
			s := hb.staleness(rd.v, rd.start)
			worst = max(worst, s)
			if s > bound {
				t.Errorf("a read at %s returned a heartbeat outdated by %v (bound maxLag %v + check interval %v)", rd.start.Format(time.RFC3339Nano), s, readersMaxLag, haproxyInter)
			}
		}
		t.Logf("%d reads through the reader frontend (%d errors), worst staleness %v (bound %v)", len(reads.all()), reads.errs.Load(), worst, bound)
	})
}

// BenchmarkRTOKill9HAProxy records rto_kill9_haproxy per engine: the
// rto_kill9 run with the clients behind the shipped HAProxy (writes only
// through its writer frontend) and the sites' sidecars as its health
// checks; a direct write load (rto_kill9's, to the sites) runs beside it
// in the same runs, and the target is its p50 + 1 s.
func BenchmarkRTOKill9HAProxy(b *testing.B) {
	if testing.Short() {
		b.Skip("starts real servers")
	}
	testenv.ForEachEngineB(b, rtoKill9HAProxy)
}

// haproxyKillRun is one SIGKILL of the primary behind HAProxy.
type haproxyKillRun struct {
	gap    time.Duration // through haproxy: last ack by the old primary → first by the new
	direct time.Duration // the direct load's same gap
	marked time.Duration // fault → haproxy's writer backend has the new primary up
	lost   int           // acks through haproxy missing on the new primary
}

func rtoKill9HAProxy(b *testing.B, e testenv.Engine) {
	runs := runEach(b, benchRuns(), func(b *testing.B) haproxyKillRun { return kill9HAProxyOnce(b, e) })
	var gap, direct, marked []time.Duration
	lost := 0
	for _, r := range runs {
		gap, direct, marked = append(gap, r.gap), append(direct, r.direct), append(marked, r.marked)
		lost += r.lost
	}
	if lost > 0 {
		b.Fatalf("%d acknowledged writes through haproxy lost over %d runs", lost, len(runs))
	}
	directP50 := benchdoc.PercentileOf(benchdoc.Millis64(direct), 0.5)
	b.Logf("%s: through haproxy p50 %v max %v; direct p50 %.0f ms", e, benchdoc.Percentile(gap, 0.5), benchdoc.Percentile(gap, 1), directP50)
	benchdoc.RecordEngine(b, "../..", e.String(),
		benchdoc.DurationFigure("rto_kill9_haproxy", gap,
			benchdoc.Target{Text: fmt.Sprintf("p50 ≤ direct p50 + 1 s = %.0f ms (direct: the same runs' load to the sites)", directP50+1000), P50Max: benchdoc.Bound(directP50 + 1000)},
			`client-observed failover time through HAProxy after SIGKILL of the primary's mysqld:
the shipped deploy/haproxy/haproxy.cfg (Debian's haproxy; writer backend checking each
site's sidecar /health?role=primary, inter 1s, downinter 250ms, rise 1, fall 2,
on-marked-down shutdown-sessions) in front of a fresh 3-site group with a sidecar per site
(fencing confirmed, semi-sync on). A write load (2 workers, app account, 5 ms pause, 2 s
timeout) writes only through the writer frontend; each row records the server_id that
committed it, so the figure is its last ack by the old primary → its first ack by the new
one. A second load writes directly to the sites in the same runs (rto_kill9's); its gap is
the phase "direct gap" and the target's base. Kill at a random 0-500 ms phase after 50 acks;
no acknowledged write lost in any run.`).
			WithPhase("direct gap (same runs)", benchdoc.Millis64(direct)).
			WithPhase("fault → writer backend has the new primary up", benchdoc.Millis64(marked)))
}

func kill9HAProxyOnce(b *testing.B, e testenv.Engine) haproxyKillRun {
	g := newGroup(b, groupOptions{engine: e, sites: 3, sidecars: true})
	g.startDaemon()
	g.waitHealthy("site0", 30*time.Second)
	g.startSidecars()
	g.waitSidecarsRenewed()
	h := startHAProxy(b, g, "5s")
	load := testenv.StartWriteLoad(b, []string{testenv.SiteDSN(h.Addr("writer"), testenv.AppUser, testenv.AppPassword)}, testenv.WriteLoadOptions{Workers: 2})
	direct := testenv.StartWriteLoad(b, testenv.AppDSNs(g.topo.Sites...), testenv.WriteLoadOptions{Workers: 2})
	load.WaitForAcks(b, 50, 20*time.Second)
	direct.WaitForAcks(b, 50, 20*time.Second)
	time.Sleep(time.Duration(rand.Int64N(int64(500 * time.Millisecond))))
	fault := time.Now()
	g.kill(0)
	newIdx, _ := waitWritable(b, g, fault)
	newSite := fmt.Sprintf("site%d", newIdx)
	waitHAProxyUp(b, h, "mysql_writer", []string{newSite}, failoverTimeout)
	marked := time.Since(fault)
	g.waitActive(newSite, failoverTimeout)
	load.WaitForAcks(b, len(load.Acked())+20, 30*time.Second)
	direct.WaitForAcks(b, len(direct.Acked())+20, 30*time.Second)
	load.Stop()
	direct.Stop()
	newP := g.topo.Sites[newIdx]
	acks := acksBySite(b, g, load, newP.AdminDB(b))
	firstNew, overlap := overlapping(acks, 0, newIdx)
	if firstNew.IsZero() || len(overlap) > 0 {
		b.Fatalf("through haproxy: first ack by %s %v, %d acks by site0 after it", newSite, firstNew, len(overlap))
	}
	dacks := direct.Acks()
	dFirst, _ := overlapping(dacks, 0, newIdx)
	return haproxyKillRun{
		gap:    firstNew.Sub(lastAck(acks, 0)),
		direct: dFirst.Sub(lastAck(dacks, 0)),
		marked: marked,
		lost:   len(load.Missing(b, newP.AppDB(b))),
	}
}
