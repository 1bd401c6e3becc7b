package sidecar

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/view"
)

// watchingDaemon is fakeDaemon with a held watch the test answers.
type watchingDaemon struct {
	*fakeDaemon
	mu      sync.Mutex
	watches []view.Watch
	sigs    []string
	answers chan watchReply
}

type watchReply struct {
	a   view.WatchAnswer
	err error
}

func (d *watchingDaemon) Watch(ctx context.Context, body []byte, sig string) (view.WatchAnswer, error) {
	var w view.Watch
	if err := json.Unmarshal(body, &w); err != nil {
		return view.WatchAnswer{}, err
	}
	d.mu.Lock()
	d.watches, d.sigs = append(d.watches, w), append(d.sigs, sig)
	d.mu.Unlock()
	select {
	case r := <-d.answers:
		return r.a, r.err
	case <-ctx.Done():
		return view.WatchAnswer{}, ctx.Err()
	}
}

func (d *watchingDaemon) seen() []view.Watch {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]view.Watch(nil), d.watches...)
}

// TestDaemonWatchAnswerStartsARoundAtOnce (issue 32): the sidecar holds a
// signed watch at the daemon naming the view it holds; when the daemon
// answers that it published a newer one, a round starts at once (not at
// checkInterval) and fetches it; the next watch asks past the announced
// view, so an answer is never taken twice; a daemon without watches is
// asked again only after watchUnsupported.
func TestDaemonWatchAnswerStartsARoundAtOnce(t *testing.T) {
	d := &watchingDaemon{fakeDaemon: &fakeDaemon{}, answers: make(chan watchReply)}
	h := newHarness(t, func(c *Config, o *Options) {
		c.CheckInterval = time.Hour // only the watch can start a round
		c.LeaseTimeout = 2 * time.Hour
		o.Daemon = d
	})
	h.daemon = d.fakeDaemon
	h.daemon.answer(sign(t, 1, "west"))
	runHarness(t, h)
	waitFor(t, "the first round and the immediate one after its adoption", func() bool { return h.daemon.count() >= 2 })
	// The first watch went out before any view was held: the daemon
	// answers it with its view at once.
	waitFor(t, "the first watch", func() bool { return len(d.seen()) == 1 })
	d.answers <- watchReply{a: view.WatchAnswer{Epoch: 1, Seq: 0, Newer: true}}
	waitFor(t, "a watch naming epoch 1", func() bool {
		ws := d.seen()
		return len(ws) > 0 && ws[len(ws)-1].Epoch == 1
	})
	w := d.seen()[len(d.seen())-1]
	if w.Group != testGroup || w.Site != "east" || w.WaitMs != view.MaxWatchWait {
		t.Fatalf("watch %+v", w)
	}
	d.mu.Lock()
	body, _ := json.Marshal(w)
	sig := d.sigs[len(d.sigs)-1]
	d.mu.Unlock()
	if !view.VerifyBytes(body, sig, testKey) {
		t.Fatal("the watch is not signed with the view key")
	}

	n := h.daemon.count()
	h.daemon.answer(sign(t, 2, "")) // the daemon revokes
	d.answers <- watchReply{a: view.WatchAnswer{Epoch: 2, Seq: 0, Newer: true}}
	waitFor(t, "a round started by the watch's answer", func() bool { return h.daemon.count() > n })
	waitFor(t, "the next watch", func() bool {
		ws := d.seen()
		return len(ws) > 0 && ws[len(ws)-1].Epoch == 2
	})
	if got := metric(t, h.s, "failoverd_sidecar_watch_wakeups_total"); got != "2" {
		t.Errorf("failoverd_sidecar_watch_wakeups_total = %s, want 2", got)
	}

	// Announced but not fetched yet: the next watch waits past it.
	before := len(d.seen())
	d.answers <- watchReply{a: view.WatchAnswer{Epoch: 3, Seq: 7, Newer: true}}
	waitFor(t, "the watch after an announced epoch 3", func() bool { return len(d.seen()) > before })
	if w := d.seen()[before]; w.Epoch < 3 || (w.Epoch == 3 && w.Seq < 7) {
		t.Fatalf("watch after epoch 3 seq 7 was announced: %+v, want at least (3, 7)", w)
	}

	// A daemon without watches: the next watch only after watchUnsupported.
	before = len(d.seen())
	d.answers <- watchReply{err: ErrWatchUnsupported}
	at := h.clock.Now().Add(watchUnsupported)
	waitFor(t, "the pause after an unsupported watch", func() bool { return h.clock.armedAt(at) })
	if len(d.seen()) != before {
		t.Fatalf("watched again at once after ErrWatchUnsupported")
	}
	h.clock.Advance(watchUnsupported)
	waitFor(t, "a watch after the pause", func() bool { return len(d.seen()) > before })
}
