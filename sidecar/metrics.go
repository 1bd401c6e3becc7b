package sidecar

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Fence reasons (label reason of failoverd_sidecar_fences_total).
const (
	ReasonViewNamesOther = "view-names-other"
	ReasonLeaseExpired   = "lease-expired"
	ReasonKilledMySQLD   = "killed-mysqld"
)

// Rejection causes (label why of failoverd_sidecar_rejected_views_total).
const (
	WhyBadSignature    = "bad-signature"
	WhyOtherGroup      = "other-group"
	WhyOlderEpoch      = "older-epoch"
	WhyConflictingView = "conflicting-epoch" // same epoch, another active site
	WhyEpochZero       = "epoch-zero"        // the daemon has adopted no primary yet
	WhyMalformed       = "malformed"
)

// Why an answer renewed nothing (label why of
// failoverd_sidecar_unbound_answers_total).
const (
	// WhyUnbound: no binding (a daemon or peer of an older version, or a
	// peer that does not list this site among its peers).
	WhyUnbound = "unbound"
	// WhyBadBinding: bound to another request (replayed), by another
	// answerer, or with another key.
	WhyBadBinding = "bad-binding"
)

// The label values of each counter: every series exists at 0 from New on,
// so an alert's increase() sees the first event and no series appears a
// scrape late.
var (
	fenceReasons = []string{ReasonViewNamesOther, ReasonLeaseExpired, ReasonKilledMySQLD}
	rejectWhys   = []string{WhyBadSignature, WhyOtherGroup, WhyOlderEpoch, WhyConflictingView, WhyEpochZero, WhyMalformed}
	unboundWhys  = []string{WhyUnbound, WhyBadBinding}
)

type metrics struct {
	reg      *prometheus.Registry
	fences   *prometheus.CounterVec
	rejected *prometheus.CounterVec
	unbound  *prometheus.CounterVec
	exits    prometheus.Counter
	// watchWakes counts rounds the daemon's watch answer started.
	watchWakes prometheus.Counter
}

// newMetrics registers the sidecar's metrics on their own registry; lease and
// epoch are read from s at scrape time.
func newMetrics(s *Sidecar) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		fences: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_sidecar_fences_total",
			Help: "Fences done by the sidecar, by reason (killed-mysqld: the fence failed or timed out and mysqld was SIGKILLed).",
		}, []string{"reason"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_sidecar_rejected_views_total",
			Help: "Views received from the daemon or a peer that changed nothing, by cause.",
		}, []string{"why"}),
		unbound: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "failoverd_sidecar_unbound_answers_total",
			Help: "Answers from the daemon or a peer not bound to their request: they never renew the lease (a newer view in them is still adopted), by cause.",
		}, []string{"why"}),
		exits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "failoverd_sidecar_mysqld_exits_total",
			Help: "Exits of the watched mysqld process the sidecar saw (its pidfd became readable) and reported to the daemon at once.",
		}),
		watchWakes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "failoverd_sidecar_watch_wakeups_total",
			Help: "Rounds started at once because the daemon answered the sidecar's held watch with a newer view (a failover's revoke or promotion reaching the sidecar without waiting for its next round).",
		}),
	}
	lease := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "failoverd_sidecar_lease_remaining_seconds",
		Help: "Time left on the sidecar's lease (negative once expired; the site is fenced then).",
	}, func() float64 { return s.leaseRemaining(s.clock.Now()).Seconds() })
	epoch := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "failoverd_sidecar_view_epoch",
		Help: "Epoch of the newest trusted view (0 without one).",
	}, func() float64 { return float64(s.epoch()) })
	m.reg.MustRegister(m.fences, m.rejected, m.unbound, m.exits, m.watchWakes, lease, epoch)
	// Zero series for every label value, so alerts see them before the first event.
	for _, r := range fenceReasons {
		m.fences.WithLabelValues(r)
	}
	for _, w := range rejectWhys {
		m.rejected.WithLabelValues(w)
	}
	for _, w := range unboundWhys {
		m.unbound.WithLabelValues(w)
	}
	return m
}
