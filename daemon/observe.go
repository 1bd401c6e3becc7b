package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/poller"
	"github.com/failoverd/failoverd/sitepair"
)

// tracked is Observations read from a tracker: what the daemon decides on,
// whoever feeds the tracker.
type tracked struct {
	cfg     configs.Group
	tracker *poller.Tracker
}

// TrackerObservations is the daemon's Observations of group g read from tr,
// which the caller feeds. The deterministic simulation (test/sim) feeds it
// simulated probes; the daemon feeds it its poller.
func TrackerObservations(g configs.Group, tr *poller.Tracker) Observations {
	return &tracked{cfg: g, tracker: tr}
}

// polled is the production Observations: a poller feeding a tracker.
type polled struct {
	*tracked
	poller *poller.Poller
	// wake is signalled after every observation (the group decides on it).
	wake chan struct{}
	// events carries the watch sessions' reports of a replication: group
	// group's members (a new view, a broken session); nil for an async
	// group.
	events chan poller.WatchEvent
}

// Kick implements kicker: probe every site now.
func (p *polled) Kick() { p.poller.Kick() }

// MysqldExited implements exitNotifier: probe the other sites now (never
// site itself, see poller.KickOthers) and decide at once.
func (p *polled) MysqldExited(site string) {
	p.poller.KickOthers(site)
	select {
	case p.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// SidecarChanged implements reportWaker: decide now. The old primary's
// sidecar's report of its fence (or of mysqld down) at the revoked epoch is
// a promotion's proof, and waiting for the next tick would add up to a
// quarter poll interval to every failover that rests on it (issue 32).
func (p *polled) SidecarChanged() {
	select {
	case p.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// Woken implements waker.
func (p *polled) Woken() <-chan struct{} { return p.wake }

// WatchEvents implements watchEventer.
func (p *polled) WatchEvents() <-chan poller.WatchEvent { return p.events }

// pollerObservations starts polling every site of g until ctx ends.
func pollerObservations(ctx context.Context, g configs.Group, log *slog.Logger, events Events) (Observations, error) {
	opts := poller.GroupOptions{Logger: log}
	var watched chan poller.WatchEvent
	if g.Replication == configs.ReplicationGroup {
		// A member's new view or broken session runs the group's round at
		// once (group.run); the poll is the backstop.
		watched = make(chan poller.WatchEvent, len(g.Sites)+1)
		opts.OnWatch = func(ev poller.WatchEvent) {
			select {
			case watched <- ev:
			default: // the loop has rounds pending: one will read the change
			}
		}
	}
	p, err := poller.NewFromGroup(g, opts)
	if err != nil {
		return nil, err
	}
	tr, err := poller.NewGroupTracker(g, time.Now)
	if err != nil {
		return nil, err
	}
	pl := &polled{tracked: &tracked{cfg: g, tracker: tr}, poller: p, wake: make(chan struct{}, 1), events: watched}
	go func() {
		err := p.Run(ctx, func(o poller.Observation) {
			events.ProbeDone(g.Name, o.Site, o.Duration, o.Reachable)
			if ev, changed, err := tr.Observe(o); err != nil {
				log.Error("observe.failed", "site", o.Site, "err", err)
			} else if changed {
				log.Info("site.state", "site", ev.Site, "from", ev.From.String(), "to", ev.To.String(), "reason", string(ev.Reason))
			}
			select {
			case pl.wake <- struct{}{}:
			default: // a wake-up is already pending
			}
		})
		if err != nil {
			log.Error("poller.stopped", "err", err)
		}
	}()
	return pl, nil
}

// Observed implements Observations (the interpretation lives in poller,
// beside the probes and their tests).
func (p *tracked) Observed() sitepair.Observed { return p.tracker.Observed(p.cfg) }

// SiteView implements siteViewer.
func (p *tracked) SiteView(name string) (poller.SiteView, bool) { return p.tracker.Site(name) }

// Settled implements Observations.
func (p *tracked) Settled(t time.Time) bool { return p.tracker.Settled(t) }
