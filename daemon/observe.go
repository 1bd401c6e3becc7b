package daemon

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/poller"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
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
}

// Kick implements kicker: probe every site now.
func (p *polled) Kick() { p.poller.Kick() }

// Woken implements waker.
func (p *polled) Woken() <-chan struct{} { return p.wake }

// pollerObservations starts polling every site of g until ctx ends.
func pollerObservations(ctx context.Context, g configs.Group, log *slog.Logger, events Events) (Observations, error) {
	p, err := poller.NewFromGroup(g, poller.GroupOptions{Logger: log})
	if err != nil {
		return nil, err
	}
	tr, err := poller.NewGroupTracker(g, time.Now)
	if err != nil {
		return nil, err
	}
	pl := &polled{tracked: &tracked{cfg: g, tracker: tr}, poller: p, wake: make(chan struct{}, 1)}
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

// Observed implements Observations.
func (p *tracked) Observed() sitepair.Observed {
	out := sitepair.Observed{Sites: make([]sitepair.SiteObservation, 0, len(p.cfg.Sites))}
	for i, s := range p.cfg.Sites {
		v, _ := p.tracker.Site(s.Name)
		out.Sites = append(out.Sites, siteObservation(i, s, v))
	}
	return out
}

// siteObservation turns the poller's view of one site (the index-th of its
// group's configuration) into decision input.
func siteObservation(index int, s configs.Site, v poller.SiteView) sitepair.SiteObservation {
	o := sitepair.SiteObservation{
		Name: s.Name, Role: sitepair.Role(s.Role), Priority: s.Priority, Index: index,
		State: v.State, Debouncing: v.Debouncing, RefusedProbes: v.RefusedInARow,
	}
	if !v.HasReachable {
		return o
	}
	r := v.LastReachable
	st := r.Status
	o.LastReachableAt = r.At
	o.Executed = st.Executed
	o.ReplicatingFrom = r.Follows
	o.IOConnected = r.IOConnected
	o.SourceSilent = r.SourceSilent
	o.ReplicationBroken = r.ReplicationBroken
	if ss := st.SemiSync; ss.Available {
		o.SemiSync = sitepair.SemiSyncObservation{Known: true, Enabled: ss.PrimaryEnabled, Active: ss.PrimaryActive,
			Timeout: ss.Timeout, WaitNoReplica: ss.WaitNoReplica, WaitPoint: ss.WaitPoint, WaitForReplicas: ss.WaitForReplicas}
	}
	if w := st.AckWaits; w.Known {
		o.AckWaits = sitepair.AckWaitObservation{Known: true, Appliers: w.Appliers, Sessions: w.Sessions, Longest: w.Longest}
	}
	o.BacklogAge = v.BacklogAge
	if v.StreamingFrom != "" && v.StreamingFrom == r.Follows {
		o.LastStreamingAt = v.StreamingAt
	}
	if st.Executed.Flavor() == gtid.MariaDB {
		o.ServerID = strconv.FormatUint(uint64(st.ServerID), 10)
	} else {
		o.ServerID = st.ServerUUID
	}
	// No replication channel: no IO thread runs (semi-sync fencing need not
	// stop one) and nothing is left to apply (a target whose replication a
	// promotion already reset, a former primary): lag 0 is known.
	o.IOStopped = st.Replica == nil
	o.LagKnown = st.Replica == nil
	if rep := st.Replica; rep != nil {
		o.Retrieved = rep.Retrieved
		if rep.RelayExhausted() && !st.Executed.Covers(rep.Retrieved) {
			// The unapplied tail was received only in part (the source
			// died mid-transaction): it is not something this site has.
			o.Retrieved = gtid.Set{}
		}
		o.IOStopped = !rep.IOThread.Running()
		o.ApplierStopped = !rep.SQLThread.Running()
		// MariaDB's serial applier shows its own semi-sync wait in its
		// state: that counts even when the processlist was not read.
		if rep.AwaitingAck() && o.AckWaits.Appliers == 0 {
			o.AckWaits.Known, o.AckWaits.Appliers = true, 1
		}
		// The last KNOWN lag: Seconds_Behind_Master turns NULL once the
		// source is gone, which is not "no lag".
		o.Lag, o.LagKnown = v.Lag, v.LagKnown
		if !o.LagKnown && rep.SQLThread.Running() && st.Executed.Covers(rep.Retrieved) {
			// NULL while the source is gone, but nothing is left to apply.
			o.Lag, o.LagKnown = 0, true
		}
	}
	return o
}

// SiteView implements siteViewer.
func (p *tracked) SiteView(name string) (poller.SiteView, bool) { return p.tracker.Site(name) }

// Settled implements Observations.
//
// A site debounced unreachable whose latest probe failed is exempt: the
// poller backs off from it, and waiting for its next probe would delay every
// step of a failover by seconds. Nothing a decision concludes from "still
// unreachable" needs a fresher probe (a site that came back is handled by
// the next rounds: fenced, or found writable and fenced as split brain).
func (p *tracked) Settled(t time.Time) bool {
	for _, s := range p.cfg.Sites {
		v, ok := p.tracker.Site(s.Name)
		if !ok || !v.HasLatest {
			return false
		}
		if v.Latest.Started.Before(t) && !(v.State == statemachine.Unreachable && !v.Latest.Reachable) {
			return false
		}
	}
	return true
}
