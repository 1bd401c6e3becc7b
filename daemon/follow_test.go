package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

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
