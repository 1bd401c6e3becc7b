package daemon

import "time"

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
	// "publish", "writable", "repoint".
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
