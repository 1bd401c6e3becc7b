package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/view"
)

// Fakes for the sidecar's edges, and a stand-in daemon for tests over real
// HTTP. None of them is production code.

var (
	testKey   = []byte("sidecar-unit-test-view-key-0123456789") // at least preflight.MinViewKeyBytes
	testGroup = "orders"
)

// sign signs a view of testGroup with testKey.
func sign(t *testing.T, epoch uint64, active string) view.Signed {
	t.Helper()
	s, err := view.Sign(view.View{Group: testGroup, Epoch: epoch, ActiveSite: active, IssuedAt: time.Unix(1_800_000_000, 0).UTC()}, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeClock is a manual clock: timers fire only when Advance passes them.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*fakeTimer]struct{}
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), timers: map[*fakeTimer]struct{}{}}
}

type fakeTimer struct {
	c  *fakeClock
	at time.Time
	ch chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() {
	t.c.mu.Lock()
	delete(t.c.timers, t)
	t.c.mu.Unlock()
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers[t] = struct{}{}
	return t
}

// Advance moves the clock and fires every timer that is due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.at.After(c.now) {
			t.ch <- c.now
			delete(c.timers, t)
		}
	}
}

// armedAt reports whether a timer is armed to fire at at.
func (c *fakeClock) armedAt(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t := range c.timers {
		if t.at.Equal(at) {
			return true
		}
	}
	return false
}

// Timers is how many timers are armed.
func (c *fakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// fakeMySQL is a local server in memory.
type fakeMySQL struct {
	mu         sync.Mutex
	engine     gtid.Flavor
	readOnly   bool
	replicaRun bool
	sqlStopped bool          // with replicaRun: the SQL thread is stopped (lag NULL)
	lag        time.Duration // with replicaRun: Seconds_Behind
	hang       bool          // every call blocks until its context ends (SIGSTOPped mysqld)
	statusErr  error         // returned by Status (and Fence) when set
	onStatus   func()        // called (unlocked) by each Status
	fenceErr   error
	fences     int
	kills      int
	promotes   int
	events     chan string // "fenced", "promoted"
}

func newFakeMySQL(readOnly bool) *fakeMySQL {
	return &fakeMySQL{engine: gtid.MariaDB, readOnly: readOnly, events: make(chan string, 100)}
}

func (f *fakeMySQL) block(ctx context.Context) error {
	f.mu.Lock()
	hang := f.hang
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (f *fakeMySQL) Status(ctx context.Context) (mysqlctl.Status, error) {
	if err := f.block(ctx); err != nil {
		return mysqlctl.Status{}, err
	}
	f.mu.Lock()
	hook := f.onStatus
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.statusErr != nil {
		return mysqlctl.Status{}, f.statusErr
	}
	st := mysqlctl.Status{Flavor: mysqlctl.Flavor{Engine: f.engine}, ReadOnly: f.readOnly, ExecutedRaw: "0-1-42"}
	if f.replicaRun {
		st.Replica = &mysqlctl.ReplicaStatus{IOThread: mysqlctl.ThreadYes, SQLThread: mysqlctl.ThreadYes, Lag: f.lag, LagKnown: !f.sqlStopped}
		if f.sqlStopped {
			st.Replica.SQLThread = mysqlctl.ThreadNo
		}
	}
	return st, nil
}

func (f *fakeMySQL) Fence(ctx context.Context) error {
	if err := f.block(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.statusErr != nil {
		return f.statusErr
	}
	if f.fenceErr != nil {
		return f.fenceErr
	}
	f.readOnly = true
	f.fences++
	return nil
}

func (f *fakeMySQL) KillClientConnections(ctx context.Context) (int, error) {
	if err := f.block(ctx); err != nil {
		return 0, err
	}
	f.mu.Lock()
	f.kills++
	f.mu.Unlock()
	f.events <- "fenced"
	return 3, nil
}

func (f *fakeMySQL) Promote(ctx context.Context) error {
	if err := f.block(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.replicaRun {
		return mysqlctl.ErrReplicaRunning
	}
	f.readOnly = false
	f.promotes++
	f.events <- "promoted"
	return nil
}

func (f *fakeMySQL) set(fn func(f *fakeMySQL)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeMySQL) counts() (fences, kills, promotes int, readOnly bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fences, f.kills, f.promotes, f.readOnly
}

// fakeDaemon answers reports with a programmable view or error, bound to
// the report's nonce.
type fakeDaemon struct {
	mu      sync.Mutex
	sv      *view.Signed
	err     error
	block   chan struct{} // when set, the next calls wait for it to close
	entered chan struct{}
	reports []view.Report
	sigs    []string
	bodies  [][]byte
}

func (d *fakeDaemon) Report(ctx context.Context, body []byte, sig string) (view.Answer, error) {
	var r view.Report
	if err := json.Unmarshal(body, &r); err != nil {
		return view.Answer{}, err
	}
	d.mu.Lock()
	d.reports = append(d.reports, r)
	d.sigs = append(d.sigs, sig)
	d.bodies = append(d.bodies, body)
	block, entered := d.block, d.entered
	d.mu.Unlock()
	if block != nil {
		if entered != nil {
			d.mu.Lock()
			if d.entered == entered {
				close(entered)
				d.entered = nil
			}
			d.mu.Unlock()
		}
		select {
		case <-block:
		case <-ctx.Done():
			return view.Answer{}, ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return view.Answer{}, d.err
	}
	if d.sv == nil {
		return view.Answer{}, ErrNoLeader
	}
	return bindAnswer(*d.sv, view.Request{Nonce: r.Nonce, From: r.Site, By: view.ByDaemon})
}

// bindAnswer binds sv to req with testKey, as a daemon or peer that knows
// bindings does.
func bindAnswer(sv view.Signed, req view.Request) (view.Answer, error) {
	return view.Bind(sv, req, testKey)
}

func (d *fakeDaemon) answer(sv view.Signed) {
	d.mu.Lock()
	d.sv, d.err = &sv, nil
	d.mu.Unlock()
}

func (d *fakeDaemon) down() {
	d.mu.Lock()
	d.err = errors.New("connection refused (fake)")
	d.mu.Unlock()
}

// count is how many reports arrived.
func (d *fakeDaemon) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.reports)
}

func (d *fakeDaemon) lastReport(t *testing.T) view.Report {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.reports) == 0 {
		t.Fatal("no report received")
	}
	return d.reports[len(d.reports)-1]
}

// fakePeers serves a programmable view per peer site, bound to the
// request's nonce.
type fakePeers struct {
	mu    sync.Mutex
	views map[string]view.Signed
	froms []string
}

func (p *fakePeers) ActiveSite(_ context.Context, peer Peer, from, nonce string) (view.Answer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.froms = append(p.froms, from)
	sv, ok := p.views[peer.Site]
	if !ok {
		return view.Answer{}, errors.New("peer unreachable (fake)")
	}
	return bindAnswer(sv, view.Request{Nonce: nonce, From: from, By: view.ByPeer(peer.Site)})
}

func (p *fakePeers) serve(site string, sv view.Signed) {
	p.mu.Lock()
	p.views[site] = sv
	p.mu.Unlock()
}

func (p *fakePeers) cut(site string) {
	p.mu.Lock()
	delete(p.views, site)
	p.mu.Unlock()
}

// fakeKiller records kills.
type fakeKiller struct {
	mu    sync.Mutex
	err   error
	kills int
	mysql *fakeMySQL // made unreachable by a kill
	gone  bool       // Gone's answer; a successful kill sets it
}

func (k *fakeKiller) CanKill() bool { return true }

func (k *fakeKiller) Gone() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.gone
}

func (k *fakeKiller) Kill(context.Context) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return 0, k.err
	}
	k.kills++
	k.gone = true
	if k.mysql != nil {
		k.mysql.set(func(f *fakeMySQL) { f.hang = false; f.statusErr = refusedErr() })
	}
	return 4242, nil
}

func (k *fakeKiller) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.kills
}

// harness is a sidecar "east" of testGroup with fakes for every edge.
type harness struct {
	s      *Sidecar
	clock  *fakeClock
	mysql  *fakeMySQL
	daemon *fakeDaemon
	peers  *fakePeers
	killer *fakeKiller
}

const (
	testLease = 2 * time.Second
	testCheck = 200 * time.Millisecond
)

func newHarness(t *testing.T, mod func(*Config, *Options)) *harness {
	t.Helper()
	clock := newFakeClock()
	h := &harness{
		clock:  clock,
		mysql:  newFakeMySQL(true),
		daemon: &fakeDaemon{},
		peers:  &fakePeers{views: map[string]view.Signed{}},
	}
	cfg := Config{
		Group: testGroup, Site: "east", Key: testKey,
		LeaseTimeout: testLease, CheckInterval: testCheck,
		DaemonURLs: []string{"http://daemon.invalid:8080"},
		Peers:      []Peer{{Site: "west", URL: "http://west.invalid:9300"}, {Site: "north", URL: "http://north.invalid:9300"}},
		ListenAddr: "127.0.0.1:0",
	}
	opts := Options{
		MySQL: h.mysql, Daemon: h.daemon, Peers: h.peers, Clock: clock,
		Logger: slog.New(slog.NewJSONHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&cfg, &opts)
	}
	if k, ok := opts.Killer.(*fakeKiller); ok {
		h.killer = k
	}
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	return h
}

// step is one round followed by the guard's enforcement, synchronously.
func (h *harness) step(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	h.s.round(ctx)
	h.s.lateContacts.Wait() // peers a round no longer waits for, applied before the checks
	h.s.enforce(ctx)
}

// metric returns the value of one sample line of /metrics (name with labels).
func metric(t *testing.T, s *Sidecar, sample string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	t.Fatalf("sample %s not in /metrics:\n%s", sample, rec.Body.String())
	return ""
}

// waitFor polls cond; the deadline is a safety net against a hung test, not
// a timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// standInDaemon is a STAND-IN for the daemon's POST /v1/sidecar/report (the
// real one lives in package daemon): it checks the report signature (401 on
// mismatch), records each report and answers the signed view it was given,
// bound to the report's nonce, or 503 like a follower while it has none.
type standInDaemon struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	sv      *view.Signed
	reports []view.Report
	badSigs int
}

func newStandInDaemon(t *testing.T) *standInDaemon {
	d := &standInDaemon{t: t}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != view.ReportPath {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if !view.VerifyBytes(body, r.Header.Get(view.SignatureHeader), testKey) {
			d.mu.Lock()
			d.badSigs++
			d.mu.Unlock()
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var rep view.Report
		if err := json.Unmarshal(body, &rep); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		d.reports = append(d.reports, rep)
		sv := d.sv
		d.mu.Unlock()
		if sv == nil {
			http.Error(w, "not the leader", http.StatusServiceUnavailable)
			return
		}
		a, err := bindAnswer(*sv, view.Request{Nonce: rep.Nonce, From: rep.Site, By: view.ByDaemon})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, a)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

// newStandInDaemonWith is a stand-in daemon that answers sv.
func newStandInDaemonWith(t *testing.T, sv view.Signed) *standInDaemon {
	d := newStandInDaemon(t)
	d.set(sv)
	return d
}

func (d *standInDaemon) URL() string { return d.srv.URL }

func (d *standInDaemon) set(sv view.Signed) {
	d.mu.Lock()
	d.sv = &sv
	d.mu.Unlock()
}

func (d *standInDaemon) lastReport() (view.Report, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.reports) == 0 {
		return view.Report{}, false
	}
	return d.reports[len(d.reports)-1], true
}

// rejected is how many reports failed the signature check.
func (d *standInDaemon) rejected() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.badSigs
}
