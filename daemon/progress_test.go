package daemon

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/kube"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/sdnotify"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
)

// A loop is stalled only once it made no iteration for the bound past the
// later of its last iteration and its action's deadline; a loop that does
// not run is never stalled.
func TestLoopProgressStallsOnlyPastTheActionDeadline(t *testing.T) {
	const bound = 30 * time.Second
	var p loopProgress
	if why := p.stalled(t0.Add(time.Hour), bound); why != "" {
		t.Errorf("a loop that never ran: stalled %q", why)
	}
	p.start(t0)
	if why := p.stalled(t0.Add(bound), bound); why != "" {
		t.Errorf("idle for exactly the bound: stalled %q", why)
	}
	if why := p.stalled(t0.Add(bound+time.Second), bound); !strings.Contains(why, "no loop iteration for 31s") {
		t.Errorf("idle past the bound: %q, want no loop iteration for 31s", why)
	}
	p.beat(t0.Add(time.Minute))
	p.within(t0.Add(2 * time.Minute)) // an action with a one-minute deadline
	if why := p.stalled(t0.Add(2*time.Minute+bound), bound); why != "" {
		t.Errorf("in an action, the bound past its deadline: stalled %q", why)
	}
	if why := p.stalled(t0.Add(2*time.Minute+bound+time.Second), bound); !strings.Contains(why, "past its deadline") {
		t.Errorf("in an action past its deadline and the bound: %q, want past its deadline", why)
	}
	p.beat(t0.Add(3 * time.Minute))
	if why := p.stalled(t0.Add(3*time.Minute+bound), bound); why != "" {
		t.Errorf("the action ended: stalled %q", why)
	}
	p.stop()
	if why := p.stalled(t0.Add(time.Hour), bound); why != "" {
		t.Errorf("a loop that returned: stalled %q", why)
	}
}

// blockingSite is site c of a daemon whose every call blocks, whatever its
// context, until release closes: a hung driver call the loop cannot escape.
type blockingSite struct {
	fakeInstance
	entered chan struct{} // receives once per blocked call
	release chan struct{}
}

func (b blockingSite) block() {
	select {
	case b.entered <- struct{}{}:
	default: // the test saw enough
	}
	<-b.release
}

func (b blockingSite) Status(ctx context.Context) (mysqlctl.Status, error) {
	b.block()
	return b.fakeInstance.Status(ctx)
}

// wedgeDaemon is a running daemon of group g (modeConfig, active) on a
// manual clock, with fake observations and site c's calls blocking.
type wedgeDaemon struct {
	d     *Daemon
	clock *manualClock
	obs   *settableObs
	c     blockingSite
	// unblock ends every blocked call on c (once).
	unblock func()
}

func startWedgeDaemon(t *testing.T, notifier *sdnotify.Notifier) *wedgeDaemon {
	t.Helper()
	w := &wedgeDaemon{clock: &manualClock{t: t0}, obs: &settableObs{},
		c: blockingSite{entered: make(chan struct{}, 16), release: make(chan struct{})}}
	w.obs.set(healthyObs())
	ops := &opLog{}
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	cfg := modeConfig(t, configs.ModeActive)
	cfg.Groups[0].Hooks = nil
	d, err := New(context.Background(), cfg, Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: w.clock.now, Identity: "me",
		Store:   newTestStore(t, store.GroupState{Group: "g", Epoch: 1, ActiveSite: "a"}),
		Observe: func(context.Context, configs.Group, *slog.Logger) (Observations, error) { return w.obs, nil },
		Dial: func(_ context.Context, _ configs.Group, s configs.Site) (Instance, error) {
			in := fakeInstance{site: s.Name, log: ops, executed: exec}
			if s.Name == "c" {
				return blockingSite{fakeInstance: in, entered: w.c.entered, release: w.c.release}, nil
			}
			return in, nil
		},
		Followers:       func(configs.Group, *kube.Clusters, *slog.Logger) ([]Follower, error) { return nil, nil },
		ReaderFollowers: func(configs.Group, *kube.Clusters, *slog.Logger) []ReaderFollower { return nil },
		Notifier:        notifier,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.d = d
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	w.unblock = func() { once.Do(func() { close(w.c.release) }) }
	t.Cleanup(func() {
		w.unblock() // the blocked round returns, then the loop stops
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return w
}

// healthz is GET /healthz on the daemon's own listener.
func (w *wedgeDaemon) healthz(t *testing.T) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + w.d.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// wedge makes c a read-only site that replicates from nobody: the next
// round decides to rejoin it, and the rejoin's first call on c blocks.
func (w *wedgeDaemon) wedge(t *testing.T) {
	t.Helper()
	o := healthyObs()
	o.Sites[2] = modeSite("c", 2, statemachine.ReadOnly, nil)
	w.obs.set(o)
	select {
	case <-w.c.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop never called site c: no rejoin decided")
	}
}

// The acceptance case of issue 30's wedged-loop item: /healthz is 200 while
// the loop turns (even after the clock jumps, once it turned again) and
// while its action is blocked within the action's deadline; a call that
// blocks forever turns it 503 naming the group once the deadline plus the
// stall bound have passed, and not before.
func TestHealthzReportsAWedgedLoop(t *testing.T) {
	w := startWedgeDaemon(t, nil)
	g := w.d.groupList()[0]
	bound := stallBound(g.cfg)
	if code, body := w.healthz(t); code != 200 {
		t.Fatalf("a running loop: %d %s, want 200", code, body)
	}
	w.clock.advance(3 * bound)
	waitUntil(t, "healthz 200 again after the loop's next turn", func() bool { code, _ := w.healthz(t); return code == 200 })

	start := w.clock.now()
	w.wedge(t)
	if code, body := w.healthz(t); code != 200 {
		t.Fatalf("an action just started: %d %s, want 200", code, body)
	}
	// Blocked in an action: the action's deadline, plus the bound.
	limit := g.actionTimeout + bound
	w.clock.advance(limit - time.Second)
	if code, body := w.healthz(t); code != 200 {
		t.Fatalf("blocked %v into an action bounded by %v (bound %v): %d %s, want 200 (not yet wedged)",
			w.clock.now().Sub(start), g.actionTimeout, bound, code, body)
	}
	w.clock.advance(2 * time.Second)
	code, body := w.healthz(t)
	var eb api.ErrorBody
	_ = json.Unmarshal([]byte(body), &eb)
	if code != 503 || !strings.Contains(eb.Error, "group g:") || !strings.Contains(eb.Error, "past its deadline") {
		t.Fatalf("blocked past the action's deadline plus the bound: %d %s, want 503 naming group g", code, body)
	}
	if got := w.d.Stalled(); len(got) != 1 {
		t.Errorf("Stalled() = %q, want one line for group g", got)
	}
}

// stallBound is the documented N × poll interval, never less than the
// time one or two bounded server steps of a round may take.
func TestStallBoundIsPollIntervalsWithAFloor(t *testing.T) {
	for _, tc := range []struct{ poll, want time.Duration }{
		{500 * time.Millisecond, minStall},
		{time.Second, minStall},
		{5 * time.Second, 100 * time.Second},
	} {
		if got := stallBound(configs.Group{PollInterval: tc.poll}); got != tc.want {
			t.Errorf("pollInterval %v: bound %v, want %v", tc.poll, got, tc.want)
		}
	}
}

var _ Observations = (*settableObs)(nil)

// The decision the wedge test's blocked round carries out.
func TestWedgeObservationsDecideARejoinOfC(t *testing.T) {
	o := healthyObs()
	o.Sites[2] = modeSite("c", 2, statemachine.ReadOnly, nil)
	d := sitepair.Decide(o, sitepair.Persisted{Epoch: 1, ActiveSite: "a"}, policyOf(modeConfig(t, configs.ModeActive).Groups[0]), t0)
	if d.Action != sitepair.Rejoin || len(d.Repoint) != 1 || d.Repoint[0] != "c" {
		t.Fatalf("decision %s %s %v, want rejoin of c", d.Action, d.Reason, d.Repoint)
	}
}
