package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/view"
)

// flaky fails its first failures calls, then records what it followed.
type flaky struct {
	mu       sync.Mutex
	failures int
	calls    int
	followed []view.View
}

func (f *flaky) Name() string { return "flaky" }
func (f *flaky) Follow(_ context.Context, v view.View) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.failures {
		return errors.New("apiserver unreachable")
	}
	f.followed = append(f.followed, v)
	return nil
}

func (f *flaky) snapshot() (int, []view.View) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, append([]view.View(nil), f.followed...)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestHandoffRetriesUntilInStepAndFollowsNewestView(t *testing.T) {
	f := &flaky{failures: 2}
	h := newHandoff([]Follower{f}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.firstRetry, h.maxRetry = time.Millisecond, 5*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.run(ctx, func() bool { return true })

	h.want(view.View{Group: "g", Epoch: 2}) // revoked: nothing to follow
	h.want(view.View{Group: "g", Epoch: 3, ActiveSite: "b"})
	waitUntil(t, "follow after two failures", func() bool { _, fw := f.snapshot(); return len(fw) == 1 })
	if calls, fw := f.snapshot(); calls != 3 || fw[0].ActiveSite != "b" {
		t.Fatalf("calls %d followed %+v, want 3 calls ending on b", calls, fw)
	}
	if st := h.report(); len(st) != 1 || st[0].Name != "flaky" || st[0].State != "ok" || !st[0].InSync {
		t.Fatalf("status %v", st)
	}
	h.want(view.View{Group: "g", Epoch: 1, ActiveSite: "a"}) // stale: ignored
	h.want(view.View{Group: "g", Epoch: 5, ActiveSite: "c"})
	waitUntil(t, "follow the newer view", func() bool { _, fw := f.snapshot(); return len(fw) == 2 })
	if _, fw := f.snapshot(); fw[1].ActiveSite != "c" {
		t.Fatalf("followed %+v, want c last", fw)
	}
}

func TestHandoffFollowerOnlyOnLeader(t *testing.T) {
	f := &flaky{}
	h := newHandoff([]Follower{f}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.firstRetry, h.maxRetry = time.Millisecond, time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var leader sync.Mutex
	isLeader := false
	go h.run(ctx, func() bool { leader.Lock(); defer leader.Unlock(); return isLeader })
	h.want(view.View{Group: "g", Epoch: 3, ActiveSite: "b"})
	time.Sleep(20 * time.Millisecond)
	if calls, _ := f.snapshot(); calls != 0 {
		t.Fatalf("a follower moved routing %d times without leadership", calls)
	}
	leader.Lock()
	isLeader = true
	leader.Unlock()
	waitUntil(t, "follow once leader", func() bool { _, fw := f.snapshot(); return len(fw) == 1 })
}

// stepClock is the handoff's clock in tests: run's every wait is handed to
// the test through waits (so the test knows the previous pass ended) and
// ends only when the test sends on fire.
type stepClock struct {
	waits chan time.Duration
	fire  chan time.Time
	done  chan struct{}
	at    time.Time
}

func newStepClock(t *testing.T, h *handoff) *stepClock {
	c := &stepClock{waits: make(chan time.Duration), fire: make(chan time.Time), done: make(chan struct{}),
		at: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	h.after = func(d time.Duration) <-chan time.Time {
		select {
		case c.waits <- d:
		case <-c.done:
		}
		return c.fire
	}
	h.now = func() time.Time { return c.at }
	t.Cleanup(func() { close(c.done) })
	return c
}

// idle waits until run waits again (its pass ended) and returns how long.
func (c *stepClock) idle(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-c.waits:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("handoff never went back to waiting")
		return 0
	}
}

// tick ends run's current wait and waits for the pass it starts to end.
func (c *stepClock) tick(t *testing.T) time.Duration {
	t.Helper()
	c.fire <- c.at
	return c.idle(t)
}

// result is one queued outcome of a scriptedFollower follower.
type followResult struct {
	changed []string
	err     error
}

// scriptedFollower is a Reconciler returning queued results (then nothing changed,
// no error) and recording every view it was run with; during, when set,
// runs inside each call.
type scriptedFollower struct {
	name    string
	mu      sync.Mutex
	results []followResult
	views   []view.View
	during  func(v view.View)
}

func (s *scriptedFollower) Name() string { return s.name }
func (s *scriptedFollower) Follow(ctx context.Context, v view.View) error {
	_, err := s.Reconcile(ctx, v)
	return err
}
func (s *scriptedFollower) Reconcile(_ context.Context, v view.View) ([]string, error) {
	s.mu.Lock()
	s.views = append(s.views, v)
	var r followResult
	if len(s.results) > 0 {
		r, s.results = s.results[0], s.results[1:]
	}
	during := s.during
	s.mu.Unlock()
	if during != nil {
		during(v)
	}
	return r.changed, r.err
}
func (s *scriptedFollower) queue(rs ...followResult) {
	s.mu.Lock()
	s.results = append(s.results, rs...)
	s.mu.Unlock()
}
func (s *scriptedFollower) seen() []view.View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.views)
}

// startHandoff runs a handoff of followers as leader on a stepClock with a
// 30s interval; it returns once run waits for the first time.
func startHandoff(t *testing.T, log io.Writer, followers ...Follower) (*handoff, *stepClock) {
	t.Helper()
	h := newHandoff(followers, slog.New(slog.NewJSONHandler(log, nil)))
	c := newStepClock(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go h.run(ctx, func() bool { return true })
	if d := c.idle(t); d != 30*time.Second {
		t.Fatalf("first wait %v, want the 30s default interval", d)
	}
	return h, c
}

func stateOf(t *testing.T, h *handoff, name string) status.Follower {
	t.Helper()
	for _, r := range h.report() {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no follower %s in %+v", name, h.report())
	return status.Follower{}
}

// A follower already in step is re-run every interval; drift it reports is
// a repair: logged, counted, shown in status. A plain Follower is re-run too.
func TestHandoffReconcilesOnIntervalAndRepairsDrift(t *testing.T) {
	kube := &scriptedFollower{name: "kube-service"}
	plain := &flaky{}
	var logs lockedLog
	h, c := startHandoff(t, &logs, kube, plain)
	var repairs []string
	h.onRepair = func(f string, v view.View, drift []string) {
		repairs = append(repairs, f+": "+strings.Join(drift, ","))
	}
	var done []string
	h.onDone = func(f string, v view.View, err error) { done = append(done, f) }

	v := view.View{Group: "g", Epoch: 4, ActiveSite: "b"}
	kube.queue(followResult{changed: []string{"service a/db/mysql selector"}}) // the handoff itself: not drift
	h.want(v)
	if d := c.idle(t); d != 30*time.Second {
		t.Fatalf("wait after a clean pass %v, want the interval", d)
	}
	if st := stateOf(t, h, "kube-service"); !st.InSync || st.State != "ok" || st.Repairs != 0 || st.Epoch != 4 {
		t.Fatalf("after the handoff: %+v", st)
	}

	c.tick(t) // nothing drifted
	kube.queue(followResult{changed: []string{"dnsendpoint a/dns/x targets [1] -> [2]"}})
	c.tick(t)
	if n := len(kube.seen()); n != 3 {
		t.Fatalf("kube follower ran %d times, want the handoff and two re-runs", n)
	}
	if calls, _ := plain.snapshot(); calls != 3 {
		t.Fatalf("plain follower ran %d times, want 3", calls)
	}
	st := stateOf(t, h, "kube-service")
	if !st.InSync || st.State != "ok" || st.Repairs != 1 || !st.LastRepairAt.Equal(c.at) ||
		!slices.Equal(st.LastDrift, []string{"dnsendpoint a/dns/x targets [1] -> [2]"}) || !st.LastCheckAt.Equal(c.at) {
		t.Fatalf("after a repair: %+v", st)
	}
	if !slices.Equal(repairs, []string{"kube-service: dnsendpoint a/dns/x targets [1] -> [2]"}) {
		t.Fatalf("onRepair %v", repairs)
	}
	// The handoff of both followers and the repair; clean re-runs are not reported.
	if !slices.Equal(done, []string{"kube-service", "flaky", "kube-service"}) {
		t.Fatalf("onDone calls %v", done)
	}
	if !strings.Contains(logs.String(), `"msg":"follow.repaired","follower":"kube-service"`) {
		t.Fatalf("no follow.repaired log:\n%s", logs.String())
	}
}

// While the newest view names no active site nothing is run, re-runs
// included; a newer view naming one resumes.
func TestHandoffWritesNothingWithoutActiveSite(t *testing.T) {
	f := &scriptedFollower{name: "dns"}
	h, c := startHandoff(t, io.Discard, f)
	h.want(view.View{Group: "g", Epoch: 4, ActiveSite: ""}) // nothing yet
	c.tick(t)
	h.want(view.View{Group: "g", Epoch: 5, ActiveSite: "a"})
	c.idle(t)
	h.want(view.View{Group: "g", Epoch: 6}) // failover in flight
	for range 3 {
		c.tick(t)
	}
	h.want(view.View{Group: "g", Epoch: 5, ActiveSite: "a"}) // stale: still held
	c.tick(t)
	if got := f.seen(); len(got) != 1 || got[0].Epoch != 5 {
		t.Fatalf("runs %+v, want only epoch 5 before the failover completed", got)
	}
	h.want(view.View{Group: "g", Epoch: 7, ActiveSite: "b"})
	c.idle(t)
	if got := f.seen(); len(got) != 2 || got[1].ActiveSite != "b" {
		t.Fatalf("runs %+v, want epoch 7 followed", got)
	}
}

// An apiserver that does not answer is reported "unreachable" and retried
// with backoff; a repair it could not finish is "drifted"; recovery is "ok".
func TestHandoffReportsUnreachableAndDrifted(t *testing.T) {
	f := &scriptedFollower{name: "kube-taint"}
	h, c := startHandoff(t, io.Discard, f)
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:1/api", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	h.want(view.View{Group: "g", Epoch: 2, ActiveSite: "a"})
	c.idle(t)
	f.queue(followResult{err: fmt.Errorf("list nodes: %w", refused)})
	if d := c.tick(t); d != followFirstRetry {
		t.Fatalf("wait after a failed re-run %v, want the first retry %v", d, followFirstRetry)
	}
	st := stateOf(t, h, "kube-taint")
	if st.InSync || st.State != "unreachable" || !strings.Contains(st.Error, "connection refused") || st.Epoch != 2 {
		t.Fatalf("apiserver down: %+v", st)
	}
	f.queue(followResult{changed: []string{"node a/n1 taint added"}, err: errors.New("node n2: forbidden")})
	if d := c.tick(t); d != 2*followFirstRetry {
		t.Fatalf("second retry wait %v, want %v", d, 2*followFirstRetry)
	}
	if st := stateOf(t, h, "kube-taint"); st.State != "drifted" || st.Repairs != 1 || st.InSync {
		t.Fatalf("partial repair: %+v", st)
	}
	if d := c.tick(t); d != 30*time.Second {
		t.Fatalf("wait after recovery %v, want the interval", d)
	}
	if st := stateOf(t, h, "kube-taint"); st.State != "ok" || !st.InSync || st.Error != "" {
		t.Fatalf("recovered: %+v", st)
	}
}

// A newer view arriving in the middle of a pass stops it: no later follower
// is run with the older view, and the next pass follows the newer one.
func TestHandoffNewerViewSupersedesPass(t *testing.T) {
	first := &scriptedFollower{name: "kube-service"}
	second := &scriptedFollower{name: "dns"}
	h, c := startHandoff(t, io.Discard, first, second)
	newer := view.View{Group: "g", Epoch: 9, ActiveSite: "c"}
	first.during = func(v view.View) {
		if v.Epoch == 8 {
			h.want(newer)
		}
	}
	h.want(view.View{Group: "g", Epoch: 8, ActiveSite: "b"})
	c.idle(t) // the interrupted pass
	c.idle(t) // the pass of the newer view
	if got := second.seen(); len(got) != 1 || !reflect.DeepEqual(got[0], newer) {
		t.Fatalf("second follower ran %+v, want only the newer view", got)
	}
	if got := first.seen(); len(got) != 2 || !reflect.DeepEqual(got[1], newer) {
		t.Fatalf("first follower ran %+v", got)
	}
	for _, r := range h.report() {
		if !r.InSync || r.Epoch != 9 {
			t.Fatalf("status %+v, want in sync with epoch 9", r)
		}
	}
}

// lockedLog is a log destination read while the handoff writes.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
