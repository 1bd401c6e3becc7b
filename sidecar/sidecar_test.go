package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/failoverd/failoverd/view"
)

func refusedErr() error {
	return fmt.Errorf("status 127.0.0.1:3306: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
}

func epochOfSidecar(h *harness) uint64 { return h.s.epoch() }

func activeOf(t *testing.T, h *harness) string {
	t.Helper()
	sv, ok := h.s.View()
	if !ok {
		t.Fatal("no view")
	}
	return sv.View.ActiveSite
}

func TestAdoptsOnlyStrictlyNewerViews(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 3, "east"))
	h.step(t)
	if e := epochOfSidecar(h); e != 3 {
		t.Fatalf("epoch %d after the daemon's view 3", e)
	}
	// An older epoch from a lagging peer, naming another site: ignored.
	h.daemon.down()
	h.peers.serve("west", sign(t, 2, "west"))
	h.step(t)
	if e, a := epochOfSidecar(h), activeOf(t, h); e != 3 || a != "east" {
		t.Fatalf("older view changed the view to %d/%s", e, a)
	}
	if f, _, _, _ := h.mysql.counts(); f != 0 {
		t.Fatal("an older view fenced the site")
	}
	if got := metric(t, h.s, `failoverd_sidecar_rejected_views_total{why="older-epoch"}`); got == "0" {
		t.Error("older epoch not counted")
	}
	// A newer one is adopted, from a peer too.
	h.peers.serve("north", sign(t, 5, "east"))
	h.step(t)
	if e := epochOfSidecar(h); e != 5 {
		t.Fatalf("epoch %d, want 5 from the peer", e)
	}
	if got := metric(t, h.s, "failoverd_sidecar_view_epoch"); got != "5" {
		t.Errorf("view_epoch metric %s", got)
	}
}

func TestEqualEpochNeverFlips(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 4, "east"))
	h.step(t) // boot: the daemon names east, the site becomes writable
	if _, _, p, ro := h.mysql.counts(); p != 1 || ro {
		t.Fatalf("boot unfence did not happen: promotes %d readOnly %t", p, ro)
	}
	before := h.s.Report().LeaseRemainingMs
	// A validly signed view of the same epoch naming another site (a daemon
	// bug): no flip, no fence, no renewal.
	h.daemon.down()
	h.peers.serve("west", sign(t, 4, "west"))
	h.clock.Advance(testCheck)
	h.step(t)
	if a := activeOf(t, h); a != "east" {
		t.Fatalf("equal epoch flipped the view to %s", a)
	}
	if f, _, _, _ := h.mysql.counts(); f != 0 {
		t.Fatal("equal-epoch view fenced the site")
	}
	if got := h.s.Report().LeaseRemainingMs; got != before-testCheck.Milliseconds() {
		t.Errorf("lease remaining %d ms, want %d (not renewed)", got, before-testCheck.Milliseconds())
	}
	if got := metric(t, h.s, `failoverd_sidecar_rejected_views_total{why="conflicting-epoch"}`); got != "1" {
		t.Errorf("conflicting-epoch count %s", got)
	}
	// The same view again is no rejection and renews.
	h.peers.serve("west", sign(t, 4, "east"))
	h.step(t)
	if got := h.s.Report().LeaseRemainingMs; got != testLease.Milliseconds() {
		t.Errorf("equal view did not renew: %d ms", got)
	}
}

func TestUntrustedViewsChangeNothing(t *testing.T) {
	otherKey, _ := view.Sign(view.View{Group: testGroup, Epoch: 9, ActiveSite: "west"}, []byte("another key"))
	otherGroup, _ := view.Sign(view.View{Group: "payments", Epoch: 9, ActiveSite: "west"}, testKey)
	tampered := sign(t, 9, "east")
	tampered.View.ActiveSite = "west"
	cases := []struct {
		name string
		sv   view.Signed
		why  string
	}{
		{"signed with another key", otherKey, WhyBadSignature},
		{"tampered after signing", tampered, WhyBadSignature},
		{"other group", otherGroup, WhyOtherGroup},
		{"older epoch", sign(t, 1, "west"), WhyOlderEpoch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.daemon.answer(sign(t, 4, "east"))
			h.step(t)
			lease := h.s.Report().LeaseRemainingMs
			for _, src := range []string{"daemon", "peer"} {
				if src == "daemon" {
					h.daemon.answer(tc.sv)
				} else {
					h.daemon.down()
					h.peers.serve("west", tc.sv)
				}
				h.step(t)
				if e, a := epochOfSidecar(h), activeOf(t, h); e != 4 || a != "east" {
					t.Fatalf("%s: view became %d/%s", src, e, a)
				}
				if f, _, _, _ := h.mysql.counts(); f != 0 {
					t.Fatalf("%s: fenced", src)
				}
				if got := h.s.Report().LeaseRemainingMs; got != lease {
					t.Fatalf("%s: lease changed %d → %d", src, lease, got)
				}
			}
			if got := metric(t, h.s, fmt.Sprintf(`failoverd_sidecar_rejected_views_total{why=%q}`, tc.why)); got != "2" {
				t.Errorf("rejected{why=%s} = %s, want 2", tc.why, got)
			}
		})
	}
}

func TestLeaseRenewedByDaemonAndByPeer(t *testing.T) {
	h := newHarness(t, nil)
	if got := h.s.Report().LeaseRemainingMs; got != 0 {
		t.Fatalf("a new sidecar holds a lease: %d ms", got)
	}
	h.daemon.answer(sign(t, 1, "east"))
	h.step(t)
	if got := h.s.Report().LeaseRemainingMs; got != testLease.Milliseconds() {
		t.Fatalf("after the daemon's view: %d ms", got)
	}
	h.clock.Advance(500 * time.Millisecond)
	h.daemon.down()
	h.peers.serve("north", sign(t, 1, "east"))
	h.step(t)
	if got := h.s.Report().LeaseRemainingMs; got != testLease.Milliseconds() {
		t.Fatalf("after the peer's view: %d ms", got)
	}
	// Views that do not name this site renew nothing; the lease runs down.
	h.clock.Advance(500 * time.Millisecond)
	h.peers.serve("north", sign(t, 0, "east")) // older
	h.step(t)
	if got := h.s.Report().LeaseRemainingMs; got != testLease.Milliseconds()-500 {
		t.Fatalf("an older view renewed: %d ms", got)
	}
	if f, _, _, _ := h.mysql.counts(); f != 0 {
		t.Fatal("fenced while the lease runs")
	}
}

func TestRule1FencesAtOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 1, "east"))
	h.step(t)
	if _, _, _, ro := h.mysql.counts(); ro {
		t.Fatal("not unfenced at boot")
	}
	for _, tc := range []struct {
		epoch  uint64
		active string
	}{{2, ""}, {3, "west"}} {
		h.mysql.set(func(f *fakeMySQL) { f.readOnly = false }) // as if the daemon had made it writable again
		h.daemon.answer(sign(t, tc.epoch, tc.active))
		h.step(t) // the same instant: no lease has run out
		f, k, _, ro := h.mysql.counts()
		if !ro || k != int(tc.epoch-1) || f != int(tc.epoch-1) {
			t.Fatalf("epoch %d naming %q: fences %d kills %d readOnly %t", tc.epoch, tc.active, f, k, ro)
		}
		r := h.s.Report()
		if !r.Fenced || r.FencedEpoch != tc.epoch || r.Writable {
			t.Errorf("report after the fence: %+v", r)
		}
	}
	if got := metric(t, h.s, `failoverd_sidecar_fences_total{reason="view-names-other"}`); got != "2" {
		t.Errorf("fences{view-names-other} = %s", got)
	}
	// A fenced site is not fenced again every round.
	h.step(t)
	if f, _, _, _ := h.mysql.counts(); f != 2 {
		t.Errorf("fenced again: %d", f)
	}
}

func TestNoFenceOnAViewSupersededDuringTheStatusRead(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 1, "east"))
	h.step(t)
	h.daemon.answer(sign(t, 2, "")) // revoked
	h.s.round(t.Context())
	// The daemon promotes east under epoch 3 and that view arrives while the
	// guard reads the status on the strength of epoch 2.
	h.mysql.set(func(f *fakeMySQL) {
		f.onStatus = func() { h.s.consider(sign(t, 3, "east"), h.clock.Now(), true, source{daemon: true}) }
	})
	h.s.enforce(t.Context())
	if f, _, _, ro := h.mysql.counts(); f != 0 || ro {
		t.Fatalf("fenced on a superseded view: fences %d", f)
	}
	if e := epochOfSidecar(h); e != 3 {
		t.Fatalf("epoch %d", e)
	}
}

// runHarness runs the sidecar's own loops on the fake clock.
func runHarness(t *testing.T, h *harness) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.s.listener = ln
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func waitEvent(t *testing.T, f *fakeMySQL, want string) {
	t.Helper()
	select {
	case got := <-f.events:
		if got != want {
			t.Fatalf("event %q, want %q", got, want)
		}
	case <-time.After(30 * time.Second): // safety net, not a timing assertion
		t.Fatalf("no %q event", want)
	}
}

func TestRule1FencesRightAfterAdoptionInRun(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 1, "east"))
	runHarness(t, h)
	waitEvent(t, h.mysql, "promoted")
	waitFor(t, "round and lease timers", func() bool { return h.clock.Timers() == 2 })
	h.daemon.answer(sign(t, 2, "west"))
	h.clock.Advance(testCheck) // the next round, well inside the lease
	waitEvent(t, h.mysql, "fenced")
	waitFor(t, "the fence to be counted", func() bool {
		return metric(t, h.s, `failoverd_sidecar_fences_total{reason="view-names-other"}`) == "1"
	})
}

func TestRule2FencesAtLeaseExpiryByTimerWhileARoundHangs(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 1, "east"))
	runHarness(t, h)
	waitEvent(t, h.mysql, "promoted")
	waitFor(t, "round and lease timers", func() bool { return h.clock.Timers() == 2 })
	// The next round hangs on the daemon: only the lease timer can fence.
	block, entered := make(chan struct{}), make(chan struct{})
	h.daemon.mu.Lock()
	h.daemon.block, h.daemon.entered = block, entered
	h.daemon.mu.Unlock()
	t.Cleanup(func() { close(block) })
	h.clock.Advance(testCheck)
	<-entered
	waitFor(t, "the lease timer alone", func() bool { return h.clock.Timers() == 1 })
	h.clock.Advance(testLease - testCheck - time.Millisecond)
	if f, _, _, _ := h.mysql.counts(); f != 0 {
		t.Fatal("fenced before the lease ran out")
	}
	h.clock.Advance(time.Millisecond)
	waitEvent(t, h.mysql, "fenced")
	waitFor(t, "the fence to be counted", func() bool {
		return metric(t, h.s, `failoverd_sidecar_fences_total{reason="lease-expired"}`) == "1"
	})
}

func TestDaemonDownPeersRenewingNoFence(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 7, "east"))
	h.peers.serve("west", sign(t, 7, "east"))
	h.peers.serve("north", sign(t, 7, "east"))
	h.step(t)
	h.daemon.down()
	// Twice the lease without the daemon, healthy peers: never fenced.
	for elapsed := time.Duration(0); elapsed <= 2*testLease; elapsed += testCheck {
		h.clock.Advance(testCheck)
		h.step(t)
		if f, _, _, ro := h.mysql.counts(); f != 0 || ro {
			t.Fatalf("fenced after %s without the daemon", elapsed+testCheck)
		}
	}
	// Then the peers go too: fenced exactly when the lease runs out.
	h.peers.cut("west")
	h.peers.cut("north")
	lastRenewal := h.clock.Now()
	for h.clock.Now().Sub(lastRenewal) < testLease {
		if f, _, _, _ := h.mysql.counts(); f != 0 {
			t.Fatalf("fenced %s after the last renewal", h.clock.Now().Sub(lastRenewal))
		}
		h.clock.Advance(testCheck)
		h.step(t)
	}
	if f, _, _, ro := h.mysql.counts(); f != 1 || !ro {
		t.Fatalf("not fenced at lease expiry: fences %d", f)
	}
	if r := h.s.Report(); !r.Fenced || r.FencedEpoch != 7 || r.LeaseRemainingMs > 0 {
		t.Errorf("report %+v", r)
	}
}

func TestBootUnfenceOnlyFromTheDaemon(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.down()
	h.peers.serve("west", sign(t, 2, "east"))
	for range 3 {
		h.step(t)
		h.clock.Advance(testCheck)
	}
	if _, _, p, ro := h.mysql.counts(); p != 0 || !ro {
		t.Fatal("unfenced on a peer's view")
	}
	h.daemon.answer(sign(t, 2, "east"))
	h.step(t)
	if _, _, p, ro := h.mysql.counts(); p != 1 || ro {
		t.Fatal("not unfenced on the daemon's view")
	}
}

func TestBootUnfenceIsOnceAndOnlyAtBoot(t *testing.T) {
	t.Run("daemon names another site first", func(t *testing.T) {
		h := newHarness(t, nil)
		h.daemon.answer(sign(t, 2, "west"))
		h.step(t)
		h.daemon.answer(sign(t, 3, "east"))
		h.step(t)
		if _, _, p, _ := h.mysql.counts(); p != 0 {
			t.Fatal("unfenced after boot")
		}
	})
	t.Run("after its own fence", func(t *testing.T) {
		h := newHarness(t, nil)
		h.mysql.set(func(f *fakeMySQL) { f.readOnly = false }) // my.cnf without read_only=ON
		h.daemon.down()
		h.step(t) // no lease at boot: fenced
		h.daemon.answer(sign(t, 3, "east"))
		h.step(t)
		if f, _, p, ro := h.mysql.counts(); f != 1 || p != 0 || !ro {
			t.Fatalf("fences %d promotes %d readOnly %t", f, p, ro)
		}
	})
	t.Run("replication running", func(t *testing.T) {
		h := newHarness(t, nil)
		h.mysql.set(func(f *fakeMySQL) { f.replicaRun = true })
		h.daemon.answer(sign(t, 3, "east"))
		h.step(t)
		h.mysql.set(func(f *fakeMySQL) { f.replicaRun = false })
		h.step(t)
		if _, _, p, _ := h.mysql.counts(); p != 0 {
			t.Fatal("unfenced a replicating server, or later")
		}
	})
	t.Run("mysqld up only later", func(t *testing.T) {
		h := newHarness(t, nil)
		h.mysql.set(func(f *fakeMySQL) { f.statusErr = refusedErr() })
		h.daemon.answer(sign(t, 3, "east"))
		h.step(t)
		h.mysql.set(func(f *fakeMySQL) { f.statusErr = nil })
		h.clock.Advance(testCheck)
		h.step(t)
		if _, _, p, _ := h.mysql.counts(); p != 1 {
			t.Fatal("boot decision not made once mysqld answered")
		}
	})
}

func TestFenceTimeoutKillsMySQLDThroughThePIDFile(t *testing.T) {
	k := &fakeKiller{}
	h := newHarness(t, func(c *Config, o *Options) {
		c.FenceTimeout = 20 * time.Millisecond
		o.Killer = k
	})
	k.mysql = h.mysql
	h.daemon.answer(sign(t, 1, "east"))
	h.step(t)
	h.mysql.set(func(f *fakeMySQL) { f.hang = true }) // SIGSTOPped
	h.daemon.answer(sign(t, 2, "west"))
	h.step(t)
	if k.count() != 1 {
		t.Fatalf("kills %d", k.count())
	}
	if got := metric(t, h.s, `failoverd_sidecar_fences_total{reason="killed-mysqld"}`); got != "1" {
		t.Errorf("fences{killed-mysqld} = %s", got)
	}
	if r := h.s.Report(); !r.Fenced || r.FencedEpoch != 2 || r.MySQLdUp || !r.MySQLdDown || !r.CanKill {
		t.Errorf("report %+v", r)
	}
	// mysqld is gone (refused): no further kills.
	h.step(t)
	if k.count() != 1 {
		t.Fatalf("killed again: %d", k.count())
	}
}

func TestFenceFailureWithoutAKiller(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 1, "east"))
	h.step(t)
	h.mysql.set(func(f *fakeMySQL) { f.fenceErr = errors.New("access denied (fake)") })
	h.daemon.answer(sign(t, 2, "west"))
	h.step(t)
	if r := h.s.Report(); r.Fenced || r.CanKill || !r.Writable {
		t.Errorf("report %+v", r)
	}
	h.mysql.set(func(f *fakeMySQL) { f.fenceErr = nil })
	h.step(t) // retried every round
	if r := h.s.Report(); !r.Fenced || r.FencedEpoch != 2 {
		t.Errorf("report after the retry %+v", r)
	}
}

func TestRefusedMySQLIsNotKilledAndDownOnlyWhenGone(t *testing.T) {
	for _, gone := range []bool{false, true} {
		t.Run(fmt.Sprintf("gone=%v", gone), func(t *testing.T) {
			k := &fakeKiller{gone: gone}
			h := newHarness(t, func(_ *Config, o *Options) { o.Killer = k })
			h.mysql.set(func(f *fakeMySQL) { f.statusErr = refusedErr() }) // still starting, read-only
			h.daemon.answer(sign(t, 3, "west"))
			h.step(t)
			h.step(t)
			if k.count() != 0 {
				t.Fatal("killed a mysqld that refuses connections")
			}
			// Refused alone is not proof: a proxy or a Service without
			// endpoints refuses too. Only a vanished process is.
			if r := h.s.Report(); r.MySQLdUp || r.Fenced || r.MySQLdDown != gone {
				t.Errorf("report %+v, want mysqldDown=%v", r, gone)
			}
		})
	}
}

// Issue 26 hole 1: a kill that finds no process (no pid file, another pid
// namespace) proved "down" and the daemon promoted away a hung primary.
func TestKillFindingNoProcessIsNotDownUnlessGone(t *testing.T) {
	for _, gone := range []bool{false, true} {
		t.Run(fmt.Sprintf("gone=%v", gone), func(t *testing.T) {
			k := &fakeKiller{err: fmt.Errorf("kill: %w", ErrNoProcess), gone: gone}
			h := newHarness(t, func(c *Config, o *Options) {
				c.FenceTimeout = 20 * time.Millisecond
				o.Killer = k
			})
			h.mysql.set(func(f *fakeMySQL) { f.hang = true })
			h.daemon.answer(sign(t, 3, "west"))
			h.step(t)
			if r := h.s.Report(); r.Fenced || r.MySQLdUp || r.MySQLdDown != gone {
				t.Errorf("report %+v, want mysqldDown=%v", r, gone)
			}
		})
	}
}

// Issue 26 hole 1: a status read that times out (hung mysqld), fails on
// auth or hits "too many connections" is "unknown", never "down".
func TestFailedStatusReadIsNotDown(t *testing.T) {
	for name, set := range map[string]func(*fakeMySQL){
		"hung":                 func(f *fakeMySQL) { f.hang = true },
		"access denied":        func(f *fakeMySQL) { f.statusErr = errors.New("Error 1045: Access denied (fake)") },
		"too many connections": func(f *fakeMySQL) { f.statusErr = errors.New("Error 1040: Too many connections (fake)") },
	} {
		t.Run(name, func(t *testing.T) {
			for _, k := range []Killer{nil, &fakeKiller{}} {
				h := newHarness(t, func(c *Config, o *Options) {
					c.FenceTimeout = 20 * time.Millisecond
					o.Killer = k
				})
				h.daemon.answer(sign(t, 1, "east"))
				h.step(t)
				h.mysql.set(set)
				h.step(t)
				if r := h.s.Report(); r.MySQLdUp || r.MySQLdDown {
					t.Errorf("killer %v: report %+v, want neither up nor down", k != nil, r)
				}
			}
		})
	}
}

func TestReportsCarryServedPeerAgesAndAreSigned(t *testing.T) {
	h := newHarness(t, nil)
	get := func(from string) int {
		rec := httptest.NewRecorder()
		h.s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/peer/active-site?from="+from, nil))
		return rec.Code
	}
	if code := get("west"); code != http.StatusNotFound {
		t.Fatalf("active-site without a view: %d", code)
	}
	h.daemon.answer(sign(t, 4, "east"))
	h.step(t)
	if r := h.daemon.lastReport(t); len(r.Peers) != 0 {
		t.Fatalf("peers served before any view: %+v", r.Peers)
	}
	if code := get("west"); code != http.StatusOK {
		t.Fatalf("active-site: %d", code)
	}
	h.clock.Advance(300 * time.Millisecond)
	get("stranger") // not a peer: not recorded
	get("north")
	h.clock.Advance(100 * time.Millisecond)
	h.step(t)
	r := h.daemon.lastReport(t)
	want := map[string]view.PeerServed{"west": {ServedEpoch: 4, ServedAgoMs: 400}, "north": {ServedEpoch: 4, ServedAgoMs: 100}}
	if fmt.Sprint(r.Peers) != fmt.Sprint(want) {
		t.Errorf("peers %+v, want %+v", r.Peers, want)
	}
	if r.Group != testGroup || r.Site != "east" || r.Epoch != 4 || !r.MySQLdUp || !r.Writable || r.Executed != "0-1-42" || r.CanKill {
		t.Errorf("report %+v", r)
	}
	h.daemon.mu.Lock()
	body, sig := h.daemon.bodies[len(h.daemon.bodies)-1], h.daemon.sigs[len(h.daemon.sigs)-1]
	h.daemon.mu.Unlock()
	if !view.VerifyBytes(body, sig, testKey) || view.VerifyBytes(body, sig, []byte("other")) || view.VerifyBytes(append(body, ' '), sig, testKey) {
		t.Error("report signature does not cover the exact body")
	}
	var raw map[string]any
	_ = json.Unmarshal(body, &raw)
	for _, k := range []string{"group", "site", "epoch", "mysqldUp", "writable", "fenced", "fencedEpoch", "executed", "canKill", "leaseRemainingMs", "peers"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("report lacks %q: %s", k, body)
		}
	}
}

func TestHTTPEndpoints(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 6, "east"))
	h.step(t)
	srv := httptest.NewServer(h.s.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok" {
		t.Errorf("healthz %d %q", code, body)
	}
	if code, body := get("/peer/ping"); code != 200 || strings.TrimSpace(body) != `{"epoch":6,"site":"east"}` {
		t.Errorf("ping %d %s", code, body)
	}
	code, body := get("/peer/active-site?from=west")
	var sv view.Signed
	if err := json.Unmarshal([]byte(body), &sv); code != 200 || err != nil || sv.View.Epoch != 6 {
		t.Errorf("active-site %d %s", code, body)
	}
	if _, err := sv.Verify(testKey); err != nil {
		t.Errorf("served view does not verify: %v", err)
	}
	_, body = get("/metrics")
	for _, name := range []string{
		`failoverd_sidecar_fences_total{reason="view-names-other"} 0`,
		`failoverd_sidecar_fences_total{reason="lease-expired"} 0`,
		`failoverd_sidecar_fences_total{reason="killed-mysqld"} 0`,
		"failoverd_sidecar_lease_remaining_seconds 2",
		"failoverd_sidecar_view_epoch 6",
		`failoverd_sidecar_rejected_views_total{why="bad-signature"} 0`,
		`failoverd_sidecar_unbound_answers_total{why="bad-binding"} 0`,
	} {
		if !strings.Contains(body, name+"\n") {
			t.Errorf("metrics lack %q", name)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	good := Config{Group: "g", Site: "east", Key: testKey, LeaseTimeout: time.Second, CheckInterval: 100 * time.Millisecond}
	cases := map[string]func(*Config){
		"no site":    func(c *Config) { c.Site = "" },
		"no key":     func(c *Config) { c.Key = nil },
		"no lease":   func(c *Config) { c.LeaseTimeout = 0 },
		"bad daemon": func(c *Config) { c.DaemonURLs = []string{"daemon:8080"} },
		"self peer":  func(c *Config) { c.Peers = []Peer{{Site: "east", URL: "http://x:1"}} },
	}
	for name, mod := range cases {
		c := good
		mod(&c)
		if _, err := New(c, Options{MySQL: newFakeMySQL(true)}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := New(good, Options{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("no MySQL: %v", err)
	}
	if got := good.fenceTimeout(); got != 250*time.Millisecond {
		t.Errorf("fence timeout %s", got)
	}
	good.LeaseTimeout = 10 * time.Second
	if got := good.fenceTimeout(); got != 400*time.Millisecond {
		t.Errorf("fence timeout %s", got)
	}
}

// Epoch 0 is a group the daemon has not adopted a primary for yet: its "no
// active site" is no revocation (rule 1 does not fire on it; only the lease,
// which starts expired, does).
func TestEpochZeroIsNotARevocation(t *testing.T) {
	h := newHarness(t, nil)
	h.mysql.set(func(f *fakeMySQL) { f.readOnly = false })
	h.daemon.answer(sign(t, 0, ""))
	h.step(t)
	if got := metric(t, h.s, `failoverd_sidecar_fences_total{reason="view-names-other"}`); got != "0" {
		t.Fatalf("fences{view-names-other} = %s on an epoch-0 view", got)
	}
	if _, ok := h.s.View(); ok {
		t.Fatal("an epoch-0 view was adopted")
	}
	if got := metric(t, h.s, `failoverd_sidecar_rejected_views_total{why="epoch-zero"}`); got != "1" {
		t.Errorf("rejected{epoch-zero} = %s", got)
	}
}

// Issue 26 hole 3: the boot unfence read the status and then made the site
// writable on the view it had snapshotted before, although a newer view
// naming nobody was adopted during the read.
func TestBootUnfenceRechecksTheViewAfterTheStatusRead(t *testing.T) {
	h := newHarness(t, nil)
	calls := 0
	h.mysql.set(func(f *fakeMySQL) {
		f.onStatus = func() {
			calls++
			if calls == 2 { // the boot unfence's own read (the round's is the first)
				h.s.consider(sign(t, 3, ""), h.clock.Now(), false, source{peer: "west"})
			}
		}
	})
	h.daemon.answer(sign(t, 2, "east"))
	h.step(t)
	if _, _, p, ro := h.mysql.counts(); p != 0 || !ro {
		t.Fatalf("promotes %d readOnly %t: unfenced on a view revoked during the status read", p, ro)
	}
	if calls < 2 {
		t.Fatalf("the boot unfence read no status (%d reads): the test did not exercise it", calls)
	}
}
