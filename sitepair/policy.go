package sitepair

import (
	"errors"
	"fmt"
	"time"

	"github.com/failoverd/failoverd/statemachine"
)

// Policy is a group's decision policy.
type Policy struct {
	// Fencing is the fencing mode.
	Fencing FencingMode
	// LeaseTimeout is the sidecar's self-fence lease: how long it keeps its
	// site writable without a fresh view saying the site is active.
	LeaseTimeout time.Duration
	// FailoverCooldown is the minimum time between the last failover or
	// switchover and a new automatic failover.
	FailoverCooldown time.Duration
	// EscalationCount automatic failovers within EscalationWindow halt
	// automatic failover until a human acknowledges.
	EscalationCount int
	// EscalationWindow is the sliding window for EscalationCount.
	EscalationWindow time.Duration
	// MaxLag excludes candidates lagging more than this; 0 = no limit.
	MaxLag time.Duration
	// PreferSite wins ties between equal candidates and split brains
	// without history; "" = priority, then declaration order.
	PreferSite string
	// Detection is the corroboration policy.
	Detection statemachine.Detection
	// SilenceAfter: a replica whose LastHeartbeatAge exceeds it has lost its
	// source; 0 disables the age check.
	SilenceAfter time.Duration
	// CorroborationWindow: a replica corroborates an outage only if it was
	// seen streaming from the primary at most this long before the daemon
	// last reached the primary; 0 disables the window.
	CorroborationWindow time.Duration
	// RefusedProbes is how many consecutive refused probes, corroborated by
	// the replicas, prove mysqld down (at least 1).
	RefusedProbes int
	// SemiSyncAfterSync requires the AFTER_SYNC wait point for the semi-sync
	// proof (MySQL: with AFTER_COMMIT other sessions read transactions that
	// no replica has).
	SemiSyncAfterSync bool
	// CatchUpTimeout bounds waiting, after the revoke, for the target to
	// receive what the reachable old primary has; then the failover is
	// abandoned and the old primary re-asserted.
	CatchUpTimeout time.Duration
	// MaxLagWait replaces CatchUpTimeout for a planned switchover: how long
	// the fenced source may stay unwritable while the target catches up
	// before the switchover is abandoned and the source made writable
	// again; 0 = CatchUpTimeout.
	MaxLagWait time.Duration
	// Rejoin says what happens to an old primary that comes back holding
	// transactions the new primary lacks: "" or RejoinManual marks it
	// diverged for a human; RejoinRecloneUnacknowledged reclones it from
	// the primary when those transactions are provably unacknowledged (see
	// UnacknowledgedTail).
	Rejoin RejoinPolicy
	// ApplierStallAfter is how long a replica whose threads run may leave
	// what it received unapplied (SiteObservation.BacklogAge) before its
	// applier is reported blocked; 0 = DefaultApplierStallAfter.
	ApplierStallAfter time.Duration
	// AckStallAfter is how long a commit may wait for a semi-sync
	// acknowledgement before the site's writes are reported stalled; 0 =
	// DefaultAckStallAfter.
	AckStallAfter time.Duration
	// PromotionSettle is how long after a promotion the new primary may
	// still be seen read-only (its writable probes are being debounced)
	// before the no-primary rules apply to it; 0 = DefaultPromotionSettle.
	// The daemon derives it from its probing: a few times RecoveryThreshold
	// poll intervals plus a probe timeout.
	PromotionSettle time.Duration
	// ExitWindow is how long after a mysqld exit its sidecar reported the
	// report may shorten detection (statemachine.PrimaryExited); 0 never.
	// The daemon sets the failure window (FailureThreshold poll
	// intervals): past it the probes alone decide as they always did.
	ExitWindow time.Duration
}

// DefaultPolicy returns the defaults of the configuration: sidecar fencing
// with a 10 s lease, 10 min cooldown, 3 failovers per
// hour, 30 s max lag, corroborated detection.
func DefaultPolicy() Policy {
	return Policy{
		Fencing:          FencingSidecar,
		LeaseTimeout:     10 * time.Second,
		FailoverCooldown: 10 * time.Minute,
		EscalationCount:  3,
		EscalationWindow: time.Hour,
		MaxLag:           30 * time.Second,
		Detection:        statemachine.Corroborated,
		RefusedProbes:    2,
		CatchUpTimeout:   30 * time.Second,
	}
}

// ErrInvalidPolicy is wrapped by Policy.Validate errors.
var ErrInvalidPolicy = errors.New("sitepair: invalid policy")

// Validate checks the policy.
func (p Policy) Validate() error {
	switch p.Fencing {
	case FencingSidecar, FencingConfirmed, FencingNone, FencingSemiSync, FencingSemiSyncSidecar:
	default:
		return fmt.Errorf("fencing %q: %w", p.Fencing, ErrInvalidPolicy)
	}
	if _, err := statemachine.ParseDetection(string(p.Detection)); err != nil {
		return fmt.Errorf("detection: %w: %w", ErrInvalidPolicy, err)
	}
	if p.Fencing.UsesSidecar() && p.LeaseTimeout <= 0 {
		return fmt.Errorf("lease timeout %v must be positive with sidecar fencing: %w", p.LeaseTimeout, ErrInvalidPolicy)
	}
	if p.LeaseTimeout < 0 || p.FailoverCooldown < 0 || p.EscalationWindow < 0 || p.MaxLag < 0 || p.SilenceAfter < 0 || p.CorroborationWindow < 0 || p.PromotionSettle < 0 || p.ExitWindow < 0 ||
		p.ApplierStallAfter < 0 || p.AckStallAfter < 0 {
		return fmt.Errorf("durations must not be negative: %w", ErrInvalidPolicy)
	}
	if p.RefusedProbes < 1 {
		return fmt.Errorf("refused probes %d must be at least 1: %w", p.RefusedProbes, ErrInvalidPolicy)
	}
	if p.CatchUpTimeout <= 0 {
		return fmt.Errorf("catch-up timeout %v must be positive (every wait has a deadline): %w", p.CatchUpTimeout, ErrInvalidPolicy)
	}
	if p.EscalationCount < 1 {
		return fmt.Errorf("escalation count %d must be at least 1: %w", p.EscalationCount, ErrInvalidPolicy)
	}
	return p.validateRejoin()
}

// FencingMode says what proves the old primary can no longer write.
type FencingMode string

// Fencing modes.
const (
	// FencingSidecar accepts a read-back fence, a refused mysqld, or the
	// provable expiry of the old primary's sidecar lease.
	FencingSidecar FencingMode = "sidecar"
	// FencingConfirmed accepts only a read-back fence or a refused mysqld;
	// it blocks forever when the old primary's host is lost.
	FencingConfirmed FencingMode = "confirmed"
	// FencingNone promotes without proof: acknowledged writes can be lost.
	FencingNone FencingMode = "none"
	// FencingSemiSync also accepts the semi-sync proof: the old primary's
	// (infinite-timeout) semi-sync can no longer be acknowledged because
	// every replica that could has stopped its IO thread.
	FencingSemiSync FencingMode = "semisync"
	// FencingSemiSyncSidecar accepts either the semi-sync or the sidecar
	// proofs.
	FencingSemiSyncSidecar FencingMode = "semisync+sidecar"
)

// UsesSidecar reports whether the mode accepts the sidecar proofs.
func (m FencingMode) UsesSidecar() bool { return m == FencingSidecar || m == FencingSemiSyncSidecar }

// UsesSemiSync reports whether the mode accepts the semi-sync proof.
func (m FencingMode) UsesSemiSync() bool { return m == FencingSemiSync || m == FencingSemiSyncSidecar }

// MinSemiSyncTimeout is the smallest rpl_semi_sync_{source,master}_timeout
// the semi-sync proof accepts (MySQL's maximum, about 49.7 days): with any
// shorter timeout a hung primary that resumes later falls back to
// asynchronous commits and acknowledges writes nobody received.
const MinSemiSyncTimeout = 4294967295 * time.Millisecond

// LeaseMargin is added to the sidecar lease before the daemon treats it as
// expired: it covers the sidecar's bounded fence (a timer fires at lease
// expiry; a fence that does not finish within its timeout, at most 400 ms,
// ends in SIGKILL of mysqld) and leaves 400 ms for timer and scheduling
// latency and the rate difference between two monotonic clocks over a
// lease (under 2 ms for 3 s even at NTP's 500 ppm slew limit). The sidecar
// package's tests hold its fence bound below this margin.
const LeaseMargin = 800 * time.Millisecond

// SidecarSilenceLimit is how long before a revoke a sidecar may have gone
// silent and still back the lease proof: 2 × leaseTimeout, at least 10 s
// more than one lease (detection of the failure plus a report interval).
// A sidecar silent for longer may have died rather than fenced.
func SidecarSilenceLimit(lease time.Duration) time.Duration {
	return max(2*lease, lease+10*time.Second)
}

// LeaseDeadline is the first instant (daemon clock) at which a sidecar
// whose lease was last renewed no later than lastRenewal has provably
// fenced: lastRenewal + LeaseTimeout + LeaseMargin. It relies on the
// sidecar measuring its lease from the moment it sent the request whose
// answer renewed it, and fencing by a timer at expiry.
func (p Policy) LeaseDeadline(lastRenewal time.Time) time.Time {
	return lastRenewal.Add(p.LeaseTimeout + LeaseMargin)
}

// DefaultPromotionSettle is Policy.PromotionSettle when it is 0: ample for
// the default probing (3 writable probes 500 ms apart) and still short
// enough that a promotion that did not take is alerted on quickly.
const DefaultPromotionSettle = 10 * time.Second

// DefaultApplierStallAfter is Policy.ApplierStallAfter when it is 0: as long
// as the default maxCandidateLag, so a replica reported blocked is one a
// failover would no longer choose.
const DefaultApplierStallAfter = 30 * time.Second

// DefaultAckStallAfter is Policy.AckStallAfter when it is 0: a semi-sync
// acknowledgement takes a round trip to the nearest replica (milliseconds);
// a commit still waiting after seconds waits for a replica that is gone.
const DefaultAckStallAfter = 5 * time.Second

// ApplierStallWindow is ApplierStallAfter, or DefaultApplierStallAfter.
func (p Policy) ApplierStallWindow() time.Duration {
	if p.ApplierStallAfter > 0 {
		return p.ApplierStallAfter
	}
	return DefaultApplierStallAfter
}

// AckStallWindow is AckStallAfter, or DefaultAckStallAfter.
func (p Policy) AckStallWindow() time.Duration {
	if p.AckStallAfter > 0 {
		return p.AckStallAfter
	}
	return DefaultAckStallAfter
}

// PromotionSettleWindow is PromotionSettle, or DefaultPromotionSettle when
// it is 0.
func (p Policy) PromotionSettleWindow() time.Duration {
	if p.PromotionSettle > 0 {
		return p.PromotionSettle
	}
	return DefaultPromotionSettle
}
