package daemon

import (
	"fmt"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/grview"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/hooks"
	"github.com/failoverd/failoverd/kube"
	"github.com/failoverd/failoverd/readers"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/status"
)

// readerPolicy is the group's read-routing policy for the readers package;
// a round is one poll interval (the daemon decides several times per
// interval, on the same probes).
func readerPolicy(gc configs.Group) readers.Config {
	r := gc.Readers
	return readers.Config{MaxLag: r.MaxLag, UpAfter: r.UpAfter, DownAfter: r.DownAfter,
		IncludePrimary: readers.IncludePrimary(r.IncludePrimary), Round: gc.PollInterval}
}

// updateReaders recomputes the reader set from a round's observations and
// the record as it stands after the round's action, then logs, and fires
// the hook events of, each change. The state lives in this group only: a
// rebuilt group or a restarted daemon starts with no readers and fills them
// after readers.upAfter rounds (docs/routing.md, "Readers").
func (g *group) updateReaders(o sitepair.Observed) {
	g.refreshReaders(func(st sitepair.Persisted, pol readers.Config, prev readers.State, now time.Time) (readers.State, []readers.Event) {
		return readers.Compute(o.Sites, st, pol, prev, now)
	})
}

// updateGroupReaders is updateReaders for a Group Replication group: the
// reader set from the round's verdict and each member's gtid_executed
// (readers.ComputeGroup), fed to the same reader targets, status, health
// checks and hooks.
func (g *group) updateGroupReaders(v grview.Verdict, reports []grview.Report) {
	executed := make(map[string]gtid.Set, len(reports))
	for _, r := range reports {
		executed[r.Site] = r.Executed
	}
	g.refreshReaders(func(st sitepair.Persisted, pol readers.Config, prev readers.State, now time.Time) (readers.State, []readers.Event) {
		return readers.ComputeGroup(readers.GroupRound{Verdict: v, Executed: executed}, st, pol, prev, now)
	})
}

// refreshReaders runs one reader round with compute, hands the set to the
// reader targets and logs and fires each change.
func (g *group) refreshReaders(compute func(sitepair.Persisted, readers.Config, readers.State, time.Time) (readers.State, []readers.Event)) {
	if !g.cfg.Readers.Enabled {
		return
	}
	st := g.decisionState()
	now := g.now()
	pol := readerPolicy(g.cfg)
	g.mu.Lock()
	prev := g.readers
	var events []readers.Event
	// Prevents hysteresis counted before a gap (leadership lost and
	// regained, stalled rounds) from vouching for sites nobody watched.
	if prev.Stale(now, readerStaleAfter(g.cfg)) {
		prev, events = readers.Reset(prev, pol, now, fmt.Sprintf("no reader round since %s: starting over", prev.At.UTC().Format(time.RFC3339)))
		// The set handed on next must be stamped anew, after warming up.
		g.readerRounds, g.readerSetAt = 0, time.Time{}
	}
	next, more := compute(st, pol, prev, now)
	g.readers = next
	if !next.At.Equal(prev.At) {
		g.readerRounds++
	}
	events = append(events, more...)
	target, publish := g.readerTarget(next, st.Epoch, len(events) > 0, now)
	g.mu.Unlock()
	if publish {
		g.readFollow.wantReaders(target)
	}
	if len(events) == 0 {
		return
	}
	set := next.Readers()
	if set == nil {
		set = []string{} // the payload says "no readers", not "not a reader event"
	}
	for _, e := range events {
		key, event := "reader.removed", configs.HookReaderRemoved
		if e.Added {
			key, event = "reader.added", configs.HookReaderAdded
		}
		g.log.Info(key, "site", e.Site, "why", e.Why, "readers", set, "epoch", st.Epoch)
		// An observing group changes nothing outside: no hook runs.
		if g.hooks != nil && !g.observing() {
			g.hooks.Fire(hooks.Event{Type: event, Group: g.cfg.Name, Epoch: st.Epoch, To: st.ActiveSite, Site: e.Site,
				Reason: event, Message: e.Site + ": " + e.Why, Readers: set, At: now})
		}
	}
}

// readerTarget is the reader set the reader targets should list after a
// round (g.mu held), and whether to hand it to them: not before the state
// has counted readers.upAfter rounds since it started over. A new leader
// (or a rebuilt group) starts with no readers; handing that empty set on
// would empty the reader Service and record on every leader change, so
// the targets keep the previous leader's set until this one has had the
// rounds to vouch for its own (docs/routing.md, "Reader targets").
func (g *group) readerTarget(rs readers.State, epoch uint64, changed bool, now time.Time) (kube.ReaderSet, bool) {
	if g.readFollow == nil || g.readerRounds < max(g.cfg.Readers.UpAfter, 1) {
		return kube.ReaderSet{}, false
	}
	// The first set handed on, and each change, is stamped with its time:
	// that orders it after every set an earlier leader wrote.
	if changed || g.readerSetAt.IsZero() {
		g.readerSetAt = now
	}
	return kube.ReaderSet{Group: g.cfg.Name, Epoch: epoch, Sites: rs.Readers(), At: g.readerSetAt}, true
}

// readerStaleAfter is how long without a counted round the reader state is
// no longer trusted: five poll rounds.
func readerStaleAfter(gc configs.Group) time.Duration { return 5 * gc.PollInterval }

// readerStatus is the site's reader eligibility for the status; nil while
// read routing is off or before the site's first round; never eligible once
// stale.
func (g *group) readerStatus(site string, now time.Time) *status.Reader {
	if !g.cfg.Readers.Enabled {
		return nil
	}
	g.mu.Lock()
	rs := g.readers
	g.mu.Unlock()
	s, ok := rs.Sites[site]
	if !ok {
		return nil
	}
	r := &status.Reader{Eligible: s.Eligible, Why: s.Why, Since: s.Since, LagSeconds: s.LagSeconds}
	// Prevents a daemon that stopped leading (or whose rounds stalled) from
	// publishing readers it no longer checks.
	if rs.Stale(now, readerStaleAfter(g.cfg)) {
		r.Eligible, r.LagSeconds = false, -1
		r.Why = fmt.Sprintf("no reader round since %s (this daemon is not leading, or its rounds stalled)", rs.At.UTC().Format(time.RFC3339))
	}
	return r
}
