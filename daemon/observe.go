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
)

// polled is the production Observations: a poller feeding a tracker.
type polled struct {
	cfg     configs.Group
	tracker *poller.Tracker
}

// pollerObservations starts polling every site of g until ctx ends.
func pollerObservations(ctx context.Context, g configs.Group, log *slog.Logger) (Observations, error) {
	p, err := poller.NewFromGroup(g, poller.GroupOptions{Logger: log})
	if err != nil {
		return nil, err
	}
	tr, err := poller.NewGroupTracker(g, time.Now)
	if err != nil {
		return nil, err
	}
	go func() {
		err := p.Run(ctx, func(o poller.Observation) {
			if ev, changed, err := tr.Observe(o); err != nil {
				log.Error("observe.failed", "site", o.Site, "err", err)
			} else if changed {
				log.Info("site.state", "site", ev.Site, "from", ev.From.String(), "to", ev.To.String(), "reason", string(ev.Reason))
			}
		})
		if err != nil {
			log.Error("poller.stopped", "err", err)
		}
	}()
	return &polled{cfg: g, tracker: tr}, nil
}

// Observed implements Observations.
func (p *polled) Observed() sitepair.Observed {
	out := sitepair.Observed{Sites: make([]sitepair.SiteObservation, 0, len(p.cfg.Sites))}
	for i, s := range p.cfg.Sites {
		v, _ := p.tracker.Site(s.Name)
		out.Sites = append(out.Sites, siteObservation(i, s, v))
	}
	return out
}

// siteObservation turns the poller's view of one site into decision input.
func siteObservation(index int, s configs.Site, v poller.SiteView) sitepair.SiteObservation {
	o := sitepair.SiteObservation{
		Name: s.Name, Role: sitepair.Role(s.Role), Priority: s.Priority, Index: index,
		State: v.State, Debouncing: v.Debouncing,
	}
	if v.HasLatest && !v.Latest.Reachable {
		o.MysqldDown = v.Latest.Class == poller.ClassRefused
	}
	if !v.HasReachable {
		return o
	}
	r := v.LastReachable
	st := r.Status
	o.Executed = st.Executed
	o.ReplicatingFrom = r.Follows
	o.IOConnected = r.IOConnected
	o.SourceSilent = r.SourceSilent
	o.ReplicationBroken = r.ReplicationBroken
	if st.Executed.Flavor() == gtid.MariaDB {
		o.ServerID = strconv.FormatUint(uint64(st.ServerID), 10)
	} else {
		o.ServerID = st.ServerUUID
	}
	if rep := st.Replica; rep != nil {
		o.Retrieved = rep.Retrieved
		o.Lag = rep.Lag
	}
	return o
}

// Settled implements Observations.
func (p *polled) Settled(t time.Time) bool {
	for _, s := range p.cfg.Sites {
		v, ok := p.tracker.Site(s.Name)
		if !ok || !v.HasLatest || v.Latest.Started.Before(t) {
			return false
		}
	}
	return true
}
