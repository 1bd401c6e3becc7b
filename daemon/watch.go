package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/view"
)

var _ api.SidecarWatcher = (*Daemon)(nil)

// SidecarWatch implements api.SidecarWatcher: it holds a sidecar's signed
// watch until the group publishes a view newer than the one the sidecar
// holds, the watch's wait ends, ctx ends or the daemon stops. Its answer
// only wakes the sidecar (see view.Watch); nothing is recorded.
func (d *Daemon) SidecarWatch(ctx context.Context, body []byte, sig string) (view.WatchAnswer, error) {
	// A follower publishes nothing a sidecar may act on.
	if !d.isLeader() {
		return view.WatchAnswer{}, fmt.Errorf("%w: this daemon does not take sidecar watches", api.ErrNotLeader)
	}
	w, err := d.pub.verifyWatch(body, sig)
	if err != nil {
		return view.WatchAnswer{}, err
	}
	g := d.group(w.Group)
	if g == nil || !g.sidecars.known(w.Site) {
		return view.WatchAnswer{}, fmt.Errorf("%w: unknown group or site without a sidecar: %s/%s", api.ErrNotFound, w.Group, w.Site)
	}
	d.mu.RLock()
	stop := d.runCtx
	d.mu.RUnlock()
	if stop == nil {
		stop = ctx // not running yet: held until the wait ends at most
	}
	return holdWatch(ctx, stop.Done(), d.pub, w)
}

// holdWatch answers w once the group's published view is newer than w's,
// or when w's wait (at most view.MaxWatchWait), ctx or stop end.
func holdWatch(ctx context.Context, stop <-chan struct{}, pub *publisher, w view.Watch) (view.WatchAnswer, error) {
	wait := time.NewTimer(time.Duration(min(max(w.WaitMs, 0), view.MaxWatchWait)) * time.Millisecond)
	defer wait.Stop()
	for {
		s, ok, next := pub.watch(w.Group)
		a := view.WatchAnswer{}
		if ok {
			a = view.WatchAnswer{Epoch: s.View.Epoch, Seq: s.View.Seq, Newer: view.NewerThan(s.View.Epoch, s.View.Seq, w.Epoch, w.Seq)}
		}
		if a.Newer {
			return a, nil
		}
		select {
		case <-next:
		case <-wait.C:
			return a, nil
		case <-ctx.Done():
			return a, nil // the sidecar left: nothing to tell it
		case <-stop:
			return a, nil
		}
	}
}

// verifyWatch checks a sidecar watch's signature and decodes it.
func (p *publisher) verifyWatch(body []byte, sig string) (view.Watch, error) {
	var w view.Watch
	// Unsigned, anyone could hold connections open on the daemon.
	if err := p.verifySigned(body, sig, "watch", &w); err != nil {
		return view.Watch{}, err
	}
	return w, nil
}
