// Package metrics exports the daemon to Prometheus. Gauges are computed at
// scrape time from the published status.Snapshot by a custom collector, so
// they are never stale and the loop keeps no bookkeeping for them; counters
// and histograms are fed by the daemon's Events calls (Metrics implements
// every method of daemon.Events). Everything lives on its own registry, with
// the Go and process collectors, under the "failoverd_" prefix, in base
// units. Label values are bounded: group and site names from the
// configuration, follower names from the code, and fixed words; an
// unexpected word becomes "other" rather than a new series. docs/metrics.md
// lists every metric and the alert runbook.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/failoverd/failoverd/status"
)

// Options configures New.
type Options struct {
	// Snapshot returns the daemon's current snapshot. It is called once per
	// scrape, from the scraping goroutine, and must be safe for concurrent
	// use. Nil exports only the build info and the event metrics.
	Snapshot func() status.Snapshot
	// Version and Commit identify the build (failoverd_build_info).
	Version string
	Commit  string
}

// Metrics holds the registry and the event metrics. Its methods are safe for
// concurrent use and never block.
type Metrics struct {
	reg *prometheus.Registry

	probeDuration      *prometheus.HistogramVec
	probeFailures      *prometheus.CounterVec
	failovers          *prometheus.CounterVec
	failoverDuration   *prometheus.HistogramVec
	phaseDuration      *prometheus.HistogramVec
	writesUnavailable  *prometheus.HistogramVec
	fences             *prometheus.CounterVec
	fenceProofs        *prometheus.CounterVec
	routingOperations  *prometheus.CounterVec
	splitBrainResolved *prometheus.CounterVec
	cachePromotions    *prometheus.CounterVec
	hookRuns           *prometheus.CounterVec
	routingRepairs     *prometheus.CounterVec
	configReloads      *prometheus.CounterVec
	// Group Replication: primary changes followed, and how fast.
	groupPrimaryChanges *prometheus.CounterVec
	groupFollow         *prometheus.HistogramVec
}

// Bucket layouts, in seconds.
var (
	// Probes are a handful of queries on a LAN or between zones: 1 ms to
	// 500 ms, with room above for a probe running into its timeout.
	probeBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
	// A failover takes detection-independent seconds (revoke to writable):
	// about 1 s with a fence read back, a lease timeout with sidecars, up to
	// a relay-log drain timeout.
	failoverBuckets = []float64{0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 120, 300}
	// Phases range from a sub-millisecond publish to a lease wait.
	phaseBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// A switchover's write gap is a drain plus a promotion: tens of
	// milliseconds to seconds.
	unavailableBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30}
)

// New returns the metrics of one daemon on a fresh registry.
func New(o Options) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		probeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "failoverd_probe_duration_seconds",
			Help:    "Duration of the probes of a site that reached the server (failed probes are counted by failoverd_probe_failures_total).",
			Buckets: probeBuckets,
		}, []string{"group", "site"}),
		probeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_probe_failures_total",
			Help: "Probes of a site that did not reach the server.",
		}, []string{"group", "site"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_failovers_total",
			Help: "Failovers and switchovers (kind) that ended, by result (promoted, failed, superseded).",
		}, []string{"group", "kind", "result"}),
		failoverDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "failoverd_failover_duration_seconds",
			Help:    "Time from the revoke until the new primary was promoted, for failovers and switchovers (kind) that promoted.",
			Buckets: failoverBuckets,
		}, []string{"group", "kind"}),
		phaseDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "failoverd_failover_phase_duration_seconds",
			Help:    "Duration of one phase of a promotion (revoke, proof, drain, detach, publish, writable, repoint).",
			Buckets: phaseBuckets,
		}, []string{"group", "phase"}),
		writesUnavailable: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "failoverd_switchover_write_unavailable_seconds",
			Help:    "Time a switchover kept the group without a writable primary (revoke until the new primary was writable).",
			Buckets: unavailableBuckets,
		}, []string{"group"}),
		fences: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_fences_total",
			Help: "Sites set read-only and read back by the daemon, or reported fenced by their sidecar (by).",
		}, []string{"group", "site", "by"}),
		fenceProofs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_fence_proofs_total",
			Help: "Promotions by the fence proof they rested on.",
		}, []string{"group", "proof"}),
		routingOperations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_routing_operations_total",
			Help: "Passes of a routing follower (Service selector, taints, DNS, cache) by result (ok, error).",
		}, []string{"group", "follower", "result"}),
		splitBrainResolved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_split_brain_resolutions_total",
			Help: "Split brains resolved by fencing every site but the rightful primary.",
		}, []string{"group"}),
		cachePromotions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_cache_promotions_total",
			Help: "Times the cache primary (Dragonfly/Redis) moved to a site.",
		}, []string{"group", "site"}),
		routingRepairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_routing_repairs_total",
			Help: "Periodic re-runs of a routing follower that found its objects drifted from the active site (hand edit, recreated object, missed write) and repaired them.",
		}, []string{"group", "follower"}),
		hookRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_hook_runs_total",
			Help: "Runs of an event hook (hooks in the group's configuration) by event and result (ok, failed).",
		}, []string{"group", "hook", "event", "result"}),
		groupPrimaryChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_group_replication_primary_changes_total",
			Help: "Primary changes of a Group Replication group failoverd followed (published an epoch naming the new primary), by kind (failover-observed: elected by the group itself; switchover: asked by an operator).",
		}, []string{"group", "kind"}),
		groupFollow: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "failoverd_group_replication_follow_seconds",
			Help:    "Time from the first round whose quorate verdict named a Group Replication group's new primary until the epoch naming it was published.",
			Buckets: phaseBuckets,
		}, []string{"group"}),
		configReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_config_reloads_total",
			Help: "Reloads of the configuration file (SIGHUP or POST /v1/reload) by result (applied, refused).",
		}, []string{"result"}),
	}
	// Both series exist from the start: an alert takes increase() of them.
	// A group's counters start with the group (StartGroup).
	for _, r := range reloadResults {
		m.configReloads.WithLabelValues(r)
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.probeDuration, m.probeFailures, m.failovers, m.failoverDuration,
		m.phaseDuration, m.writesUnavailable, m.fences, m.fenceProofs,
		m.routingOperations, m.splitBrainResolved, m.cachePromotions, m.hookRuns, m.routingRepairs, m.configReloads,
		m.groupPrimaryChanges, m.groupFollow,
		newSnapshotCollector(o),
	)
	return m
}

// Handler serves the registry in the Prometheus exposition formats. A
// collector error still serves every other metric.
func (m *Metrics) Handler() http.Handler {
	return promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
	}))
}

// Gatherer is the registry, for tests and for embedding in another handler.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// ProbeDone records one probe of a site.
func (m *Metrics) ProbeDone(group, site string, d time.Duration, reached bool) {
	if !reached {
		m.probeFailures.WithLabelValues(group, site).Inc()
		return
	}
	m.probeDuration.WithLabelValues(group, site).Observe(d.Seconds())
}

// FailoverDone records a failover or switchover that ended; only promoted
// ones are timed (a failed one's duration says nothing about the next).
func (m *Metrics) FailoverDone(group, kind, result string, d time.Duration) {
	kind, result = oneOf(kind, kinds), oneOf(result, failoverResults)
	m.failovers.WithLabelValues(group, kind, result).Inc()
	if result == "promoted" {
		m.failoverDuration.WithLabelValues(group, kind).Observe(d.Seconds())
	}
}

// PhaseDone records one phase of a promotion.
func (m *Metrics) PhaseDone(group, phase string, d time.Duration) {
	m.phaseDuration.WithLabelValues(group, oneOf(phase, phases)).Observe(d.Seconds())
}

// WritesUnavailable records a switchover's write gap.
func (m *Metrics) WritesUnavailable(group string, d time.Duration) {
	m.writesUnavailable.WithLabelValues(group).Observe(d.Seconds())
}

// Fenced records a fence of a site by the daemon or its sidecar.
func (m *Metrics) Fenced(group, site, by string) {
	m.fences.WithLabelValues(group, site, oneOf(by, fencers)).Inc()
}

// ProofUsed records the fence proof a promotion rested on.
func (m *Metrics) ProofUsed(group, proof string) {
	m.fenceProofs.WithLabelValues(group, oneOf(proof, proofs)).Inc()
}

// RoutingDone records one pass of a routing follower. The error's text is
// never a label (it would be unbounded): the daemon logs it and the status
// carries it.
func (m *Metrics) RoutingDone(group, follower string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.routingOperations.WithLabelValues(group, follower, result).Inc()
}

// SplitBrainResolved records a split brain resolved by fencing.
func (m *Metrics) SplitBrainResolved(group string) {
	m.splitBrainResolved.WithLabelValues(group).Inc()
}

// CachePromoted records the cache primary moving to site.
func (m *Metrics) CachePromoted(group, site string) {
	m.cachePromotions.WithLabelValues(group, site).Inc()
}

// RoutingRepaired records a follower's repair of drifted routing.
func (m *Metrics) RoutingRepaired(group, follower string) {
	m.routingRepairs.WithLabelValues(group, follower).Inc()
}

// HookDone records one finished run of an event hook.
func (m *Metrics) HookDone(group, hook, event string, ok bool) {
	result := hookResults[0]
	if !ok {
		result = hookResults[1]
	}
	m.hookRuns.WithLabelValues(group, hook, event, result).Inc()
}

// ConfigReloaded records a reload of the configuration file.
func (m *Metrics) ConfigReloaded(result string) {
	m.configReloads.WithLabelValues(oneOf(result, reloadResults)).Inc()
}

// GroupPrimaryFollowed records a Group Replication primary change
// failoverd followed, d after the first round that saw it.
func (m *Metrics) GroupPrimaryFollowed(group, kind string, d time.Duration) {
	m.groupPrimaryChanges.WithLabelValues(group, oneOf(kind, groupKinds)).Inc()
	m.groupFollow.WithLabelValues(group).Observe(d.Seconds())
}

// StartGroup creates every counter series of group at 0, for its sites,
// its routing and reader followers (by name) and its hooks (name → the
// events each runs on), with every fixed word of the other labels. The
// daemon calls it before the group's first event and before the first
// scrape can see the group (daemon.SeriesStarter): a counter born at 1 by
// its first event shows no increase(), so an alert on it would miss that
// event, and a series created during a scrape appears a scrape late.
func (m *Metrics) StartGroup(group string, sites, followers []string, hooks map[string][]string) {
	for _, kind := range kinds {
		for _, result := range failoverResults {
			m.failovers.WithLabelValues(group, kind, result)
		}
	}
	for _, p := range proofs {
		m.fenceProofs.WithLabelValues(group, p)
	}
	m.splitBrainResolved.WithLabelValues(group)
	// Every group gets them (a group's replication mode may change on a reload).
	for _, kind := range groupKinds {
		m.groupPrimaryChanges.WithLabelValues(group, kind)
	}
	for _, s := range sites {
		m.probeFailures.WithLabelValues(group, s)
		m.cachePromotions.WithLabelValues(group, s)
		for _, by := range fencers {
			m.fences.WithLabelValues(group, s, by)
		}
	}
	for _, f := range followers {
		m.routingRepairs.WithLabelValues(group, f)
		for _, r := range routingResults {
			m.routingOperations.WithLabelValues(group, f, r)
		}
	}
	for hook, events := range hooks {
		for _, e := range events {
			for _, r := range hookResults {
				m.hookRuns.WithLabelValues(group, hook, e, r)
			}
		}
	}
}
