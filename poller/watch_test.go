package poller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// fakeWatch is a Watcher whose session stands until lost is closed; after
// that no session can be established (the server is gone).
type fakeWatch struct{ lost chan struct{} }

func (w fakeWatch) watch(ctx context.Context, _ Site, established func(), _ func(string, string)) error {
	select {
	case <-w.lost:
		return errors.New("connect: connection refused")
	default:
	}
	established()
	select {
	case <-w.lost:
		return errors.New("session ended: EOF")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchedSite runs a poller of one site "a" with a fakeWatch, in the
// caller's bubble.
func watchedSite(t *testing.T) (a *fakeServer, w fakeWatch, rec *recorder, start time.Time, stop func()) {
	t.Helper()
	a = newFakeServer(primaryStatus())
	cfg := testConfig(fakeNet{"a": a}, Site{Name: "a", Addr: "h:1"})
	w = fakeWatch{lost: make(chan struct{})}
	cfg.Watch = w.watch
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec = &recorder{}
	start = time.Now()
	return a, w, rec, start, running(t, p, rec)
}

// A broken watch session probes its site at once: the failure window of a
// killed mysqld starts at the crash, not at the next tick.
func TestWatchLostProbesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, w, rec, start, stop := watchedSite(t)
		time.Sleep(1300 * time.Millisecond) // probes at 0 and 1s
		a.set(func(f *fakeServer) { f.err = errors.New("connection refused") })
		close(w.lost)
		synctest.Wait()
		time.Sleep(1500 * time.Millisecond) // the next regular probe is 1s after the early one
		stop()
		got := rec.startedAt("a", start)
		want := []time.Duration{0, time.Second, 1300 * time.Millisecond, 2300 * time.Millisecond}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("site a probed at %v, want %v", got, want)
		}
	})
}

// A broken watch does not shorten a run of failures below the threshold:
// a blip shorter than the failure window must not count two failures.
func TestBrokenWatchDoesNotShortenTheFailureWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, w, rec, start, stop := watchedSite(t)
		time.Sleep(500 * time.Millisecond) // probe at 0 answers
		a.set(func(f *fakeServer) { f.err = errors.New("connection refused") })
		time.Sleep(700 * time.Millisecond) // the 1s probe fails
		close(w.lost)                      // at 1.2s: no early probe, the run is counting
		synctest.Wait()
		time.Sleep(1300 * time.Millisecond)
		stop()
		if got, want := rec.startedAt("a", start), []time.Duration{0, time.Second, 2 * time.Second}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("site a probed at %v, want %v (no early probe within the failure window)", got, want)
		}
	})
}

// A watch session's reports reach Config.OnWatch: every change its Watcher
// saw (a Group Replication member's new view), then, once the session
// breaks, watch-lost with the session's error. The daemon runs a Group
// Replication group's round on each.
func TestWatchEventsReachOnWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFakeServer(primaryStatus())
		cfg := testConfig(fakeNet{"a": a}, Site{Name: "a", Addr: "h:1"})
		lost, view := make(chan struct{}), make(chan struct{})
		cfg.Watch = func(ctx context.Context, _ Site, established func(), changed func(string, string)) error {
			select {
			case <-lost:
				return errors.New("connect: connection refused")
			default:
			}
			established()
			<-view
			changed("view-change", "view 2 (was 1)")
			select {
			case <-lost:
				return errors.New("session ended: EOF")
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var events []WatchEvent
		cfg.OnWatch = func(ev WatchEvent) { events = append(events, ev) }
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		stop := running(t, p, &recorder{})
		close(view)
		synctest.Wait()
		close(lost)
		synctest.Wait()
		time.Sleep(3 * time.Second) // reconnects are refused: no further event
		stop()
		want := []WatchEvent{{Site: "a", Trigger: "view-change", Detail: "view 2 (was 1)"}, {Site: "a", Trigger: TriggerWatchLost, Detail: "session ended: EOF"}}
		if fmt.Sprint(events) != fmt.Sprint(want) {
			t.Errorf("OnWatch got %v, want %v", events, want)
		}
	})
}
