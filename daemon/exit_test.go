package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/poller"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/view"
)

// exitObs is Observations with fixed sites that records the exit
// notifications it gets (the poller-backed one kicks the other sites).
type exitObs struct {
	mu     sync.Mutex
	sites  []sitepair.SiteObservation
	exited []string
}

func (o *exitObs) Observed() sitepair.Observed {
	o.mu.Lock()
	defer o.mu.Unlock()
	return sitepair.Observed{Sites: slices.Clone(o.sites)}
}
func (o *exitObs) Settled(time.Time) bool { return true }
func (o *exitObs) MysqldExited(site string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.exited = append(o.exited, site)
}
func (o *exitObs) notified() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.exited)
}

func exitReport(site, boot string, epoch uint64, x *view.MySQLdExit) []byte {
	b, _ := json.Marshal(view.Report{Group: "g", Site: site, Boot: boot, Epoch: epoch, MySQLdExit: x})
	return b
}

// TestSidecarExitReportIsRecordedOnceWithItsFirstBound: a signed exit report
// is recorded with the exit bounded on the daemon's clock (receipt − age)
// and notified once; the same exit told again keeps its first bound (a
// later one would let a probe of a restarted mysqld pass for one before the
// exit); an unsigned or forged one is refused and records nothing; a report
// without the exit clears it.
func TestSidecarExitReportIsRecordedOnceWithItsFirstBound(t *testing.T) {
	now := t0.Add(time.Hour)
	d, g, srv := reportDaemon(t, now)
	obs := &exitObs{}
	g.obs, g.log = obs, slog.New(slog.DiscardHandler)
	d.lead.begin(context.Background(), t0, nil)
	key := []byte("secret")
	x := &view.MySQLdExit{PID: 42, StartTicks: 9, AgoMs: 30}

	body := exitReport("a", "boot1", 7, x)
	if code, _ := postReport(t, srv.URL, body, ""); code != http.StatusUnauthorized {
		t.Fatalf("unsigned exit report: %d, want 401", code)
	}
	if code, _ := postReport(t, srv.URL, body, view.SignBytes(body, []byte("forged"))); code != http.StatusUnauthorized {
		t.Fatalf("forged exit report: %d, want 401", code)
	}
	if o := g.sidecars.observation("a"); !o.Exit.At.IsZero() || len(obs.notified()) > 0 {
		t.Fatalf("a refused report was recorded or notified: %+v %v", o.Exit, obs.notified())
	}
	if code, resp := postReport(t, srv.URL, body, view.SignBytes(body, key)); code != http.StatusOK {
		t.Fatalf("signed exit report: %d %s", code, resp)
	}
	want := sitepair.MysqldExit{PID: 42, Start: 9, At: now.Add(-30 * time.Millisecond)}
	if o := g.sidecars.observation("a"); o.Exit != want {
		t.Fatalf("exit recorded as %+v, want %+v", o.Exit, want)
	}
	if got := obs.notified(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("notified %v, want [a] once", got)
	}

	// The same exit, reported again later: same bound, no new notification.
	g.now = func() time.Time { return now.Add(200 * time.Millisecond) }
	body = exitReport("a", "boot1", 7, &view.MySQLdExit{PID: 42, StartTicks: 9, AgoMs: 10})
	if code, _ := postReport(t, srv.URL, body, view.SignBytes(body, key)); code != http.StatusOK {
		t.Fatal(code)
	}
	if o := g.sidecars.observation("a"); o.Exit != want {
		t.Fatalf("repeated exit moved its bound: %+v, want %+v", o.Exit, want)
	}
	if got := obs.notified(); len(got) != 1 {
		t.Fatalf("a repeated exit was notified again: %v", got)
	}

	// Another process (same pid, new start time) is a new exit.
	body = exitReport("a", "boot1", 7, &view.MySQLdExit{PID: 42, StartTicks: 10, AgoMs: 0})
	if code, _ := postReport(t, srv.URL, body, view.SignBytes(body, key)); code != http.StatusOK {
		t.Fatal(code)
	}
	if o := g.sidecars.observation("a"); o.Exit.Start != 10 || !o.Exit.At.Equal(now.Add(200*time.Millisecond)) || len(obs.notified()) != 2 {
		t.Fatalf("a new process's exit: %+v notified %v", o.Exit, obs.notified())
	}

	// The sidecar saw a mysqld again: its report carries no exit.
	body = exitReport("a", "boot1", 7, nil)
	if code, _ := postReport(t, srv.URL, body, view.SignBytes(body, key)); code != http.StatusOK {
		t.Fatal(code)
	}
	if o := g.sidecars.observation("a"); !o.Exit.At.IsZero() {
		t.Fatalf("exit kept after a report without it: %+v", o.Exit)
	}
}

// TestSidecarExitReportShortensDetectionOnlyForItsSite: through the daemon's
// own decide, a primary whose first probe after the crash failed is failed
// over on its own sidecar's exit report (detection PrimaryExited), and the
// same report signed in a replica's name changes nothing (the primary is
// still debounced). Without sidecars the decision is the same as before.
func TestSidecarExitReportShortensDetectionOnlyForItsSite(t *testing.T) {
	now := t0.Add(time.Hour)
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	sites := func() []sitepair.SiteObservation {
		a := sitepair.SiteObservation{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Writable, Debouncing: true,
			RefusedProbes: 1, Executed: exec, LastReachableAt: now.Add(-400 * time.Millisecond)}
		lost := func(n string, i int) sitepair.SiteObservation {
			return sitepair.SiteObservation{Name: n, Index: i, Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly,
				ReplicatingFrom: "a", Executed: exec, LagKnown: true, LastReachableAt: now}
		}
		return []sitepair.SiteObservation{a, lost("b", 1), lost("c", 2)}
	}
	cfg := configs.Group{Name: "g", Engine: configs.EngineMariaDB, PollInterval: 500 * time.Millisecond, FailureThreshold: 2,
		Detection: "corroborated", FailoverCooldown: time.Minute, RelayDrainTimeout: time.Second,
		Sites: []configs.Site{
			{Name: "a", Sidecar: &configs.Endpoint{Address: "127.0.0.1:1"}},
			{Name: "b", Sidecar: &configs.Endpoint{Address: "127.0.0.1:2"}},
			{Name: "c"},
		}}
	cfg.Escalation.MaxFailovers, cfg.Escalation.Window = 3, time.Hour
	cfg.Sidecar.LeaseTimeout = 10 * time.Second
	newG := func() (*group, *exitObs) {
		obs := &exitObs{sites: sites()}
		g := &group{cfg: cfg, policy: policyOf(cfg), sidecars: newSidecars(cfg), obs: obs, now: func() time.Time { return now },
			log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}}
		g.rec.Persisted = sitepair.Persisted{Epoch: 7, ActiveSite: "a"}
		return g, obs
	}
	x := &view.MySQLdExit{PID: 42, StartTicks: 9, AgoMs: 20}

	g, _ := newG()
	if r, ok := g.decide(context.Background(), t0); !ok || r.Decision.Detection.Code != statemachine.PrimaryDebouncing || r.Decision.Action != sitepair.None {
		t.Fatalf("without a report: %s/%s on %s, want no action on PrimaryDebouncing", r.Decision.Action, r.Decision.Reason, r.Decision.Detection.Code)
	}
	g.sidecars.record(view.Report{Group: "g", Site: "b", Boot: "x", Epoch: 7, MySQLdExit: x}, now.Add(-10*time.Millisecond))
	if r, _ := g.decide(context.Background(), t0); r.Decision.Detection.Code != statemachine.PrimaryDebouncing || r.Decision.Action != sitepair.None {
		t.Fatalf("a replica's exit report: %s/%s on %s, want no action on PrimaryDebouncing", r.Decision.Action, r.Decision.Reason, r.Decision.Detection.Code)
	}
	g.sidecars.record(view.Report{Group: "g", Site: "a", Boot: "y", Epoch: 7, MySQLdExit: x}, now.Add(-10*time.Millisecond))
	r, _ := g.decide(context.Background(), t0)
	if r.Decision.Detection.Code != statemachine.PrimaryExited || r.Decision.Action != sitepair.RevokeEpoch || r.Decision.Target != "b" {
		t.Fatalf("the primary's exit report: %s/%s on %s target %q (%s), want RevokeEpoch to b on PrimaryExited",
			r.Decision.Action, r.Decision.Reason, r.Decision.Detection.Code, r.Decision.Target, r.Decision.Message)
	}
	// A report of an epoch the group has left (a sidecar restarted before
	// it got the view) counts for nothing.
	g2, _ := newG()
	g2.sidecars.record(view.Report{Group: "g", Site: "a", Boot: "y", Epoch: 6, MySQLdExit: x}, now.Add(-10*time.Millisecond))
	if r, _ := g2.decide(context.Background(), t0); r.Decision.Detection.Code == statemachine.PrimaryExited {
		t.Fatalf("an older epoch's exit report shortened detection: %s/%s", r.Decision.Action, r.Decision.Reason)
	}
	if w := policyOf(cfg).ExitWindow; w != time.Second {
		t.Errorf("ExitWindow = %v, want failureThreshold × pollInterval = 1s", w)
	}
}

// exitProber answers every probe as a read-only server.
type exitProber struct{}

func (exitProber) Status(context.Context) (mysqlctl.Status, error) {
	return mysqlctl.Status{ReadOnly: true}, nil
}

// TestExitNotificationProbesTheOthersAndWakesTheLoop: the poller-backed
// Observations answer a sidecar's exit report with an early probe of every
// other site (the corroboration, read now) and a wake-up of the loop, never
// with an early probe of the exited site (its failure window is the
// PrimaryExited guards' to shorten, not the probes').
func TestExitNotificationProbesTheOthersAndWakesTheLoop(t *testing.T) {
	p, err := poller.New(poller.Config{Group: "g", PollInterval: time.Hour, ProbeTimeout: time.Minute, FailureThreshold: 2,
		Sites:  []poller.Site{{Name: "a", Addr: "a:3306"}, {Name: "b", Addr: "b:3306"}, {Name: "c", Addr: "c:3306"}},
		Dial:   func(context.Context, poller.Site) (poller.Prober, error) { return exitProber{}, nil },
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	probes := map[string]int{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx, func(o poller.Observation) { mu.Lock(); probes[o.Site]++; mu.Unlock() })
	}()
	t.Cleanup(func() { cancel(); <-done })
	count := func() map[string]int { mu.Lock(); defer mu.Unlock(); return maps.Clone(probes) }
	// The hour-long interval spreads the first ticks over it: kick every
	// site once so each has probed, then the exit report.
	time.Sleep(50 * time.Millisecond)
	p.Kick()
	deadline := time.Now().Add(10 * time.Second)
	for c := count(); c["a"] < 1 || c["b"] < 1 || c["c"] < 1; c = count() {
		if time.Now().After(deadline) {
			t.Fatalf("probes after a kick: %v", c)
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := count()
	pl := &polled{poller: p, wake: make(chan struct{}, 1)}
	pl.MysqldExited("a")
	select {
	case <-pl.Woken():
	default:
		t.Fatal("the loop was not woken")
	}
	for c := count(); c["b"] <= before["b"] || c["c"] <= before["c"]; c = count() {
		if time.Now().After(deadline) {
			t.Fatalf("probes after the exit report: %v (before %v): the other sites were not probed", c, before)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if c := count(); c["a"] != before["a"] {
		t.Fatalf("site a probed early on its own exit report: %v (before %v)", c, before)
	}
}

// wakeObs is exitObs that also counts SidecarChanged wake-ups.
type wakeObs struct {
	exitObs
	woken int
}

func (o *wakeObs) SidecarChanged() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.woken++
}

func (o *wakeObs) wakes() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.woken
}

// TestSidecarReportThatChangesItsFenceWakesTheLoop (issue 32): a report that
// changes what a decision reads of the sidecar (its epoch, its fence,
// mysqld down, a new boot) wakes the loop at once: the old primary's
// sidecar's report at the revoked epoch is a promotion's proof, the
// target's report of the new epoch lets it be made writable, and neither
// should wait for the next tick. The same report again wakes nothing (a
// renewal every round must not spin the loop).
func TestSidecarReportThatChangesItsFenceWakesTheLoop(t *testing.T) {
	now := t0.Add(time.Hour)
	d, g, srv := reportDaemon(t, now)
	obs := &wakeObs{}
	g.obs, g.log = obs, slog.New(slog.DiscardHandler)
	d.lead.begin(context.Background(), t0, nil)
	key := []byte("secret")
	post := func(r view.Report) {
		t.Helper()
		r.Group, r.Site = "g", "a"
		body, _ := json.Marshal(r)
		if code, resp := postReport(t, srv.URL, body, view.SignBytes(body, key)); code != http.StatusOK {
			t.Fatalf("report %+v: %d %s", r, code, resp)
		}
	}
	steps := []struct {
		what string
		r    view.Report
		wake bool
	}{
		{"the first report of a boot", view.Report{Boot: "b1", Epoch: 7, MySQLdUp: true}, true},
		{"the same again (a renewal)", view.Report{Boot: "b1", Epoch: 7, MySQLdUp: true}, false},
		{"the revoked epoch adopted", view.Report{Boot: "b1", Epoch: 8, MySQLdUp: true}, true},
		{"fenced at the revoked epoch", view.Report{Boot: "b1", Epoch: 8, FencedEpoch: 8}, true},
		{"fenced again", view.Report{Boot: "b1", Epoch: 8, FencedEpoch: 8}, false},
		{"mysqld down", view.Report{Boot: "b1", Epoch: 8, FencedEpoch: 8, MySQLdDown: true}, true},
		{"a new boot", view.Report{Boot: "b2", Epoch: 8, FencedEpoch: 8, MySQLdDown: true}, true},
	}
	for _, s := range steps {
		before := obs.wakes()
		post(s.r)
		if woke := obs.wakes() > before; woke != s.wake {
			t.Errorf("%s: woke %v, want %v", s.what, woke, s.wake)
		}
	}
	if len(obs.notified()) != 0 {
		t.Errorf("reports without an exit notified exits: %v", obs.notified())
	}
}

// TestLeaseDeadlineWakesTheLoop (issue 32): a decision waiting for the old
// primary's sidecar lease (RecheckAt) wakes the loop just after the
// deadline instead of up to a tick later; a past or zero instant arms
// nothing, and a later decision's instant replaces an earlier one's.
func TestLeaseDeadlineWakesTheLoop(t *testing.T) {
	g := &group{now: time.Now, wakeAt: make(chan struct{}, 1)}
	g.armRecheck(time.Time{})
	g.armRecheck(time.Now().Add(-time.Second))
	if g.wakeAtTimer != nil {
		t.Fatal("a zero or past instant armed a wake-up")
	}
	g.armRecheck(time.Now().Add(time.Hour))
	at := time.Now().Add(30 * time.Millisecond)
	g.armRecheck(at) // replaces the hour-long one
	select {
	case <-g.wakeAt:
		if time.Now().Before(at) {
			t.Fatal("woken before the deadline")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loop was not woken at the deadline")
	}
	g.wakeAtTimer.Stop()
}
