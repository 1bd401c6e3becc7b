package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/failoverd/failoverd/sitepair"
)

// Events receives what happened, as it happens, for the counters and
// histograms of the metrics package; gauges are computed from the published
// status.Snapshot instead. Implementations must be cheap and never block:
// they are called from the failover path. Label values are bounded: group
// and site names from the configuration and the fixed words listed here.
type Events interface {
	// ProbeDone: one probe of a site finished after d; reached tells
	// whether it reached the server.
	ProbeDone(group, site string, d time.Duration, reached bool)
	// FailoverDone: a failover or switchover (kind "failover" |
	// "switchover") ended with result "promoted" | "failed" | "superseded",
	// d after its revoke.
	FailoverDone(group, kind, result string, d time.Duration)
	// PhaseDone: one phase of a promotion took d. Phases: "revoke",
	// "proof" (revoke until a fence proof held), "drain", "detach",
	// "publish", "writable", "repoint"; "cache-sync" and "cache-promote"
	// for a planned switchover's cache move.
	PhaseDone(group, phase string, d time.Duration)
	// WritesUnavailable: a switchover kept the group without a writable
	// primary for d (revoke until the new primary was writable).
	WritesUnavailable(group string, d time.Duration)
	// Fenced: a site was set read-only and read back by "daemon", or
	// reported fenced by its "sidecar".
	Fenced(group, site, by string)
	// ProofUsed: a promotion rested on this fence proof (sitepair.FenceProof).
	ProofUsed(group, proof string)
	// RoutingDone: a follower ("kube", "dns", "cache", ...) pass ended;
	// err nil on success.
	RoutingDone(group, follower string, err error)
	// SplitBrainResolved: a split brain was resolved by fencing.
	SplitBrainResolved(group string)
	// CachePromoted: the cache primary moved to site.
	CachePromoted(group, site string)
	// RoutingRepaired: a follower's periodic re-run found its objects
	// drifted from the active site (hand edit, recreated object, missed
	// write) and repaired them.
	RoutingRepaired(group, follower string)
	// HookDone: an event hook (configs.Hook) finished a run for event.
	HookDone(group, hook, event string, ok bool)
	// ConfigReloaded: a reload of the configuration file (SIGHUP or the
	// API) was "applied" or "refused".
	ConfigReloaded(result string)
	// GroupPrimaryFollowed: a Group Replication group's primary changed
	// (kind "failover-observed" by the group itself, "switchover" asked
	// by an operator) and failoverd published the epoch naming it, d after
	// the first round that saw the new primary's quorate view.
	GroupPrimaryFollowed(group, kind string, d time.Duration)
}

// SeriesStarter is implemented by Events that keep counters (the metrics
// package): StartGroup creates every counter series of a group at 0 — its
// sites, its routing and reader followers by name, its hooks (name → the
// events each runs on) — before the group's first event and before a
// scrape can see it, so the first event shows as an increase and no series
// appears a scrape late. The daemon calls it for each group New builds and
// each group a reload starts.
type SeriesStarter interface {
	StartGroup(group string, sites, followers []string, hooks map[string][]string)
}

// startSeries hands g's label values to the Events' counters.
func (d *Daemon) startSeries(g *group) {
	ss, ok := d.opts.Events.(SeriesStarter)
	if !ok {
		return
	}
	var sites, followers []string
	for _, s := range g.cfg.Sites {
		sites = append(sites, s.Name)
	}
	for _, h := range []*handoff{g.follow, g.readFollow} {
		if h == nil {
			continue
		}
		for _, f := range h.followers {
			followers = append(followers, f.Name())
		}
	}
	hooks := map[string][]string{}
	for _, h := range g.cfg.Hooks {
		hooks[h.Name] = h.Events
	}
	ss.StartGroup(g.cfg.Name, sites, followers, hooks)
}

// noEvents is the Events of a daemon without metrics.
type noEvents struct{}

func (noEvents) ProbeDone(string, string, time.Duration, bool)      {}
func (noEvents) FailoverDone(string, string, string, time.Duration) {}
func (noEvents) PhaseDone(string, string, time.Duration)            {}
func (noEvents) WritesUnavailable(string, time.Duration)            {}
func (noEvents) Fenced(string, string, string)                      {}
func (noEvents) ProofUsed(string, string)                           {}
func (noEvents) RoutingDone(string, string, error)                  {}
func (noEvents) SplitBrainResolved(string)                          {}
func (noEvents) CachePromoted(string, string)                       {}
func (noEvents) HookDone(string, string, string, bool)              {}
func (noEvents) RoutingRepaired(string, string)                     {}
func (noEvents) ConfigReloaded(string)                              {}
func (noEvents) GroupPrimaryFollowed(string, string, time.Duration) {}

// ev is the group's Events (none in tests that build a bare group).
func (g *group) ev() Events {
	if g.events == nil {
		return noEvents{}
	}
	return g.events
}

// phase reports one promotion phase that began at start.
func (g *group) phase(name string, start time.Time) {
	took := g.now().Sub(start)
	g.ev().PhaseDone(g.cfg.Name, name, took)
	// Where a failover's time went, beside what clients saw (issue 32).
	g.log.Info("failover.phase", "phase", name, "ms", float64(took.Microseconds())/1000)
}

// promotionStarted reports the wait for a fence proof: from the revoke to
// the promotion's first step.
func (g *group) promotionStarted() {
	g.mu.Lock()
	f := g.rec.InFlight
	g.mu.Unlock()
	if f != nil && !f.RevokedAt.IsZero() {
		g.phase("proof", f.RevokedAt)
	}
}

// promoted reports a promotion that made its target writable (before the
// state naming it is committed).
func (g *group) promoted(d sitepair.Decision) {
	g.ev().ProofUsed(g.cfg.Name, string(d.FenceProof))
	g.failoverDone(d, nil)
}

// failoverDone reports the end of a failover attempt: promoted, failed,
// or superseded by another daemon.
func (g *group) failoverDone(d sitepair.Decision, err error) {
	g.mu.Lock()
	started := g.rec.progress
	g.mu.Unlock()
	kind := "failover"
	if d.Planned {
		kind = "switchover"
	}
	var took time.Duration
	if started != nil && !started.startedAt.IsZero() {
		took = g.now().Sub(started.startedAt)
	}
	result := "promoted"
	switch {
	case errors.Is(err, ErrSuperseded), errors.Is(err, context.Canceled):
		result = "superseded"
	case err != nil:
		result = "failed"
	}
	g.ev().FailoverDone(g.cfg.Name, kind, result, took)
	if err == nil && d.Planned {
		g.ev().WritesUnavailable(g.cfg.Name, took)
	}
}
