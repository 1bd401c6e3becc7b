package sitepair

import (
	"errors"
	"fmt"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/statemachine"
)

// MinSites and MaxSites bound the size of a group.
const (
	MinSites = 2
	MaxSites = 16
)

// Role says whether a site may be promoted.
type Role string

// Site roles.
const (
	// PrimaryCandidate sites may become the primary.
	PrimaryCandidate Role = "primary-candidate"
	// DROnly sites replicate but are never promoted by failoverd.
	DROnly Role = "dr-only"
)

// SiteObservation is everything the daemon observed about one site in one
// round of probes.
type SiteObservation struct {
	// Name is the site's unique name.
	Name string
	// Role is PrimaryCandidate or DROnly.
	Role Role
	// Priority breaks ties between equally up-to-date candidates; higher
	// wins.
	Priority int
	// Index is the site's declaration order in the configuration (0-based);
	// the final tie-breaker, lower wins.
	Index int
	// State is the site's debounced state (statemachine.Machine.State).
	State statemachine.State
	// Debouncing is statemachine.Machine.Debouncing: failed or writable
	// probes are accumulating but have not reached their threshold.
	Debouncing bool
	// Executed is @@gtid_executed (MariaDB: @@gtid_binlog_state).
	Executed gtid.Set
	// Retrieved is the replication channel's received set
	// (Retrieved_Gtid_Set); empty when not a replica or unknown. What a
	// replica "has" is Executed ∪ Retrieved: retrieved transactions are
	// applied when its relay log is drained before promotion.
	Retrieved gtid.Set
	// ReplicatingFrom names the site this server's replication channel
	// points at; "" when it has none.
	ReplicatingFrom string
	// IOConnected: the replication IO (receiver) thread is connected.
	IOConnected bool
	// SourceSilent: no events or heartbeats from the source for longer than
	// the observer's silence threshold (measured by the replica itself).
	SourceSilent bool
	// LastHeartbeatAge is the age of the last event or heartbeat received
	// from the source, computed on the replica against its own clock; 0
	// means unknown. Compared with Policy.SilenceAfter.
	LastHeartbeatAge time.Duration
	// ReplicationBroken: the IO or SQL thread stopped on an error.
	ReplicationBroken bool
	// Lag is the replica's apply lag as last measured (kept at its last
	// value while the source is unreachable); meaningful only with LagKnown.
	Lag time.Duration
	// LagKnown: Lag was measured (Seconds_Behind_Master NULL is unknown,
	// never lag 0).
	LagKnown bool
	// BacklogAge is the replica's lag measured from GTID sets across
	// probes: how long transactions it had retrieved but not applied have
	// stayed unapplied (the retrieved set ahead of the executed one and the
	// older part of that backlog not drained), as of its last reachable
	// probe; 0 when it applied everything it received. A partially received
	// tail (the source died mid-transaction) is not backlog. Decisions use
	// the larger of Lag and BacklogAge: an applier blocked inside a commit
	// may show Seconds_Behind_Master 0.
	BacklogAge time.Duration
	// ApplierStopped: the replication SQL (applier) thread is not running.
	ApplierStopped bool
	// AckWaits is what the site's sessions waited for semi-sync
	// acknowledgements at its last reachable probe (read only while its
	// semi-sync source side is on).
	AckWaits AckWaitObservation
	// IOStopped: no replication IO thread runs (stopped by someone, on an
	// error, or no replication configured), as opposed to running or
	// reconnecting.
	IOStopped bool
	// LastStreamingAt is the daemon-clock time of the last probe that saw
	// this replica streaming from ReplicatingFrom; zero when never.
	LastStreamingAt time.Time
	// LastReachableAt is the daemon-clock time of the last probe that
	// reached this site; zero when never.
	LastReachableAt time.Time
	// RefusedProbes counts the consecutive latest probes that were refused
	// (TCP connection refused: the host answered, nothing listens). One
	// refusal proves little (a Service without endpoints, a proxy, a pod
	// restarting); see Policy.RefusedProbes.
	RefusedProbes int
	// Sidecar is what this site's sidecar last reported.
	Sidecar SidecarObservation
	// SemiSync is the site's semi-sync configuration at its last reachable
	// probe (what an old primary could still do while it hangs).
	SemiSync SemiSyncObservation
	// ServerID is the server's own identity as GTIDs name it: MySQL
	// @@server_uuid, MariaDB @@server_id in decimal; "" when unknown. With it
	// a replica's errant transactions (ones it originated that the primary
	// lacks) are found even while it replicates.
	ServerID string
	// FencedEpoch is the epoch under which read_only=ON was last read back
	// from this site after a fence by the daemon; 0 = never.
	FencedEpoch uint64
}

// SidecarObservation is what the daemon learned from a site's sidecar
// reports. Every time is the daemon's own clock at receipt.
type SidecarObservation struct {
	// Configured: the site declares a sidecar.
	Configured bool
	// LastReport is when its latest report arrived; zero when this daemon
	// never received one (since it started or became leader).
	LastReport time.Time
	// Epoch is the view epoch the sidecar held in its latest report, and
	// EpochSince when a report first held it.
	Epoch      uint64
	EpochSince time.Time
	// FencedEpoch is the epoch under which the sidecar last fenced its
	// MySQL (read back) or killed it; 0 = never.
	FencedEpoch uint64
	// MysqldDown: the latest report said the local mysqld provably does
	// not run (its process is gone); a failed status read is not down.
	MysqldDown bool
	// AliveAt is the latest daemon-clock instant at which the sidecar
	// provably still ran the boot of its latest report (it echoed a token
	// this daemon issued then to that boot); zero when unknown. A sidecar
	// that restarts holds no view and may adopt, and serve, an older epoch:
	// what it said counts only up to AliveAt.
	AliveAt time.Time
	// CanKill: the latest report said the sidecar can SIGKILL mysqld, so
	// a hung one is killed when its lease runs out (lease-expired needs it).
	CanKill bool
	// Served is, per peer site, the last view this sidecar served that
	// peer: until then the peer could renew its lease through it.
	Served map[string]Served
}

// Served is the last view a sidecar served one peer.
type Served struct {
	// At bounds when (receipt of the report minus the age it stated).
	At time.Time
	// Epoch is the epoch of the view served.
	Epoch uint64
}

// Observed is one round of observations of a group.
//
// Group detection (statemachine.Detect) is computed inside Decide from
// these same fields, so the detection code can never disagree with the
// observations it is based on; it is returned in Decision.Detection.
type Observed struct {
	// Sites lists every site of the group, each exactly once.
	Sites []SiteObservation
	// ServingSince is when this daemon became the only one serving views
	// (its start, or when it won leader election), on its own clock. A view
	// another daemon served before it is unknown to it, so no lease it
	// measures starts earlier.
	ServingSince time.Time
}

// InFlight is a failover between its two phases: the epoch was revoked,
// the promotion has not been recorded yet.
type InFlight struct {
	// Epoch is the revoked epoch N (equal to Persisted.Epoch).
	Epoch uint64
	// RevokedAt is when the revocation was persisted, on the daemon's clock.
	RevokedAt time.Time
	// From is the old primary ("" if there was none).
	From string
	// To is the chosen target.
	To string
	// Planned marks an operator's switchover (no re-targeting).
	Planned bool
	// PublishedEpoch and PublishedTo are the view published right before
	// the target was made writable (so its sidecar holds a view naming it
	// first). Sidecars never flip on an equal epoch: promoting another site
	// needs a newer one. 0 and "" until then.
	PublishedEpoch uint64
	PublishedTo    string
	// OperatorConfirmed is a human's assertion that From is dead (see
	// ConfirmFence); nil until one is recorded. It backs the
	// operator-confirmed proof only for this failover: its Site must be From
	// and its Epoch this Epoch, and a new revoke starts without one.
	OperatorConfirmed *FenceConfirmation
	// LostHolders are operators' confirmations, recorded by ConfirmFence
	// while the failover waited at ack-holder-unreachable, that an
	// unreachable replica is lost: what only it may hold is given up. Each
	// counts for this failover's epoch only (a new revoke starts without).
	LostHolders []FenceConfirmation
}

// FenceConfirmation is an operator's assertion, recorded by ConfirmFence,
// that the old primary of a failover in flight is dead: it can no longer
// acknowledge writes.
type FenceConfirmation struct {
	// Site is the old primary confirmed dead (InFlight.From).
	Site string
	// Epoch is the revoked epoch the confirmation was made in
	// (InFlight.Epoch); it counts for no other.
	Epoch uint64
	// At is when the daemon accepted it (its own clock); for the record only.
	At time.Time
	// By names who confirmed it (for the record and the audit).
	By string
}

// Persisted is the group state the daemon stores durably between decisions.
// The zero value is a fresh group: epoch 0, no active site, no history.
type Persisted struct {
	// Epoch is the monotonic term number; it only ever grows.
	Epoch uint64
	// ActiveSite is the recorded primary; "" while a failover is in flight
	// (revoked) or before the first primary was adopted.
	ActiveSite string
	// LastFailoverAt is when the last failover or switchover was promoted
	// (zero if never).
	LastFailoverAt time.Time
	// LastFailoverTarget is the site promoted by the last failover or
	// switchover ("" if never).
	LastFailoverTarget string
	// LastFailoverFrom is the old primary of the last failover or
	// switchover ("" if never, or not recorded).
	LastFailoverFrom string
	// PromotionGTID is the target's GTID set when it was promoted.
	PromotionGTID gtid.Set
	// LastFailoverProof is the fence proof the last failover's promotion
	// rested on ("" if never, or if recorded before proofs were kept).
	LastFailoverProof FenceProof
	// LastFailoverConfirmation is the operator confirmation the last
	// promotion rested on when LastFailoverProof is ProofOperatorConfirmed,
	// else nil.
	LastFailoverConfirmation *FenceConfirmation
	// Diverged maps known-diverged sites to their divergent transactions
	// (their set minus the primary's). Only a human clears an entry.
	Diverged map[string]gtid.Set
	// DivergedCount maps known-diverged sites to how many transactions
	// they held that the primary lacked when marked (Divergence.Count).
	// It is kept and cleared with the site's Diverged entry; a site with
	// no entry here (recorded before counts were kept) has only its
	// Diverged set, whose Count() is an upper bound for MariaDB.
	DivergedCount map[string]uint64
	// OperatorFenced lists sites an operator fenced: never promoted,
	// rejoined or chosen as split-brain winner.
	OperatorFenced []string
	// Recloning maps sites a human asked to re-seed from the primary
	// (StartReclone) to that request, until FinishReclone records its
	// success; a failed one stays, with its Failed reason, until retried.
	// A recloning site is never promoted, rejoined, marked diverged or
	// found repaired, and nothing it holds is required of a candidate.
	Recloning map[string]Reclone
	// FailoverHistory holds the times of automatic failovers, for the
	// escalation limit.
	FailoverHistory []time.Time
	// EscalationHalted stops automatic failover until a human acknowledges
	// (see Acknowledge).
	EscalationHalted bool
	// InFlight is the failover between RevokeEpoch and Promote, or nil.
	InFlight *InFlight
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

// SemiSyncObservation is a primary's semi-sync configuration, as read by
// the last probe that reached it.
type SemiSyncObservation struct {
	// Known: the probe read the semi-sync variables.
	Known bool
	// Enabled and Active are rpl_semi_sync_{source,master}_enabled and its
	// status counter (a primary falls back to async after its timeout).
	Enabled, Active bool
	// Timeout is rpl_semi_sync_{source,master}_timeout.
	Timeout time.Duration
	// WaitNoReplica is rpl_semi_sync_{source,master}_wait_no_{replica,slave}:
	// keep waiting when no replica is connected.
	WaitNoReplica bool
	// WaitPoint is rpl_semi_sync_{source,master}_wait_point (AFTER_SYNC or
	// AFTER_COMMIT).
	WaitPoint string
	// WaitForReplicas is how many replicas must acknowledge each commit:
	// MySQL rpl_semi_sync_{source_wait_for_replica,master_wait_for_slave}_count;
	// MariaDB has no such variable and waits for one. 0 = unknown, taken as 1
	// (the fewest holders: the most replicas must be accounted for).
	WaitForReplicas int
}

// AckWaitObservation is what a site's sessions waited for semi-sync
// acknowledgements (the thread state "Waiting for semi-sync ACK from
// slave/replica") at one probe.
type AckWaitObservation struct {
	// Known: read (the probe found the semi-sync source side on; otherwise
	// nothing waits).
	Known bool
	// Appliers counts replication applier threads (SQL thread, workers)
	// waiting: the site's own source side makes its applier's commits wait
	// for acknowledgements its own replicas (none) would send.
	Appliers int
	// Sessions counts the other sessions (clients' commits) waiting.
	Sessions int
	// Longest is how long the longest of those waits had lasted.
	Longest time.Duration
}

// LeaseMargin is added to the sidecar lease before the daemon treats it as
// expired: it covers the sidecar's bounded fence (a timer fires at lease
// expiry; a fence that does not finish within its timeout ends in SIGKILL of
// mysqld) and the rate difference between two monotonic clocks over a lease.
const LeaseMargin = time.Second

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

// ErrInvalidPolicy is wrapped by Policy.Validate errors.
var ErrInvalidPolicy = errors.New("sitepair: invalid policy")

// ErrInvalidInput is wrapped by errors about inconsistent observations or
// persisted state.
var ErrInvalidInput = errors.New("sitepair: invalid input")

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
	if p.LeaseTimeout < 0 || p.FailoverCooldown < 0 || p.EscalationWindow < 0 || p.MaxLag < 0 || p.SilenceAfter < 0 || p.CorroborationWindow < 0 || p.PromotionSettle < 0 ||
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

// Action is what a decision asks the daemon to do.
type Action string

// Actions.
const (
	// None: nothing to do (Reason says why).
	None Action = "none"
	// Alert: nothing automatic; a human should look (Reason says why).
	Alert Action = "alert"
	// AdoptPrimary: record the sole writable site Target as the active site
	// (first start); bumps the epoch.
	AdoptPrimary Action = "adopt-primary"
	// RevokeEpoch: failover phase 1. Persist Epoch (the old one + 1), no
	// active site, and InFlight{From, Target}; best-effort fence Fence.
	RevokeEpoch Action = "revoke-epoch"
	// Promote: failover phase 2. Fence Fence (best effort), drain Target's
	// relay log, make Target writable, repoint Repoint to it.
	Promote Action = "promote"
	// FenceSites: set read_only=ON on every site in Fence and read it back.
	FenceSites Action = "fence-sites"
	// StopReplicaIO: stop the replication IO thread of every site in
	// Detach, so none can acknowledge the old primary's commits any more.
	StopReplicaIO Action = "stop-replica-io"
	// ReassertPrimary: make the recorded active site Target writable again;
	// bumps the epoch.
	ReassertPrimary Action = "reassert-primary"
	// Rejoin: repoint every site in Repoint to replicate from Target.
	Rejoin Action = "rejoin"
	// MarkDiverged: record every Diverged entry in Persisted.Diverged (and
	// its Count in Persisted.DivergedCount).
	MarkDiverged Action = "mark-diverged"
	// RecloneSite records that Target's data is to be replaced by a copy
	// of the active site (Diverged names it and what it throws away) and
	// starts the copy; see ReasonRecloneUnacknowledgedTail.
	RecloneSite Action = "reclone-site"
	// ClearDiverged: drop the Persisted.Diverged entry of every site in
	// Repaired (its history is now contained in the primary's).
	ClearDiverged Action = "clear-diverged"
	// HaltFailover: set Persisted.EscalationHalted.
	HaltFailover Action = "halt-failover"
	// DisableSemiSyncSource: switch the semi-sync source side off on every
	// site in SemiSyncOff (replicas of Target): on a replica it makes the
	// applier's commits wait for acknowledgements nobody sends.
	DisableSemiSyncSource Action = "disable-semisync-source"
)

// FenceProof says why a Promote is safe with respect to the old primary.
type FenceProof string

// Fence proofs.
const (
	// ProofFenceConfirmed: read_only=ON read back from the old primary at
	// the revoked epoch.
	ProofFenceConfirmed FenceProof = "fence-confirmed"
	// ProofPrimaryDown: the old primary's mysqld refused Policy.RefusedProbes
	// consecutive probes while every replica witness lost it too.
	ProofPrimaryDown FenceProof = "primary-down"
	// ProofSidecarFenced: the old primary's sidecar reported, after the
	// revoke, that it fenced (read back) or killed its mysqld, or that its
	// mysqld is down.
	ProofSidecarFenced FenceProof = "sidecar-fenced"
	// ProofLeaseExpired: the old primary's sidecar lease provably expired.
	ProofLeaseExpired FenceProof = "lease-expired"
	// ProofSemiSync: the old primary ran semi-sync that never falls back to
	// async, and every replica that could acknowledge its commits stopped
	// its IO thread (or its mysqld is down): nothing it commits from now on
	// can be acknowledged.
	ProofSemiSync FenceProof = "semisync"
	// ProofOperatorConfirmed: a human confirmed the unreachable old primary
	// dead (ConfirmFence) in this failover's revoked epoch, after the daemon
	// had found no other proof (await-fence-confirmation). Never while the
	// old primary answers probes.
	ProofOperatorConfirmed FenceProof = "operator-confirmed"
	// ProofNoFencing: fencing "none": no proof (durability risk).
	ProofNoFencing FenceProof = "no-fencing"
)

// FenceProofs returns every FenceProof, strongest evidence first (the order
// Decide checks them in, no-fencing last).
func FenceProofs() []FenceProof {
	return []FenceProof{ProofFenceConfirmed, ProofPrimaryDown, ProofSidecarFenced, ProofSemiSync,
		ProofLeaseExpired, ProofOperatorConfirmed, ProofNoFencing}
}

// Divergence is a site holding transactions the primary does not have.
type Divergence struct {
	// Site is the diverged site.
	Site string
	// Set is its GTID set minus the primary's (MariaDB: the part of its
	// heads the primary lacks, see gtid.Set.Uncovered).
	Set gtid.Set
	// Count is how many transactions the site holds that the primary
	// lacks, gtid.DivergentCount of the two executed sets: exact for MySQL
	// and, under gtid_strict_mode, for MariaDB (where Set.Count() is only
	// an upper bound: a seq_no is not a count).
	Count uint64
}

// Decision is the outcome of Decide or DecideSwitchover.
type Decision struct {
	// Action is what to do.
	Action Action
	// Reason is the machine-readable cause; never empty.
	Reason Reason
	// Message explains the decision to a human; never empty.
	Message string
	// Target is the site to promote, re-assert or adopt (RevokeEpoch,
	// Promote, ReassertPrimary, AdoptPrimary) or the primary to rejoin to
	// (Rejoin).
	Target string
	// From is the old primary of a failover (RevokeEpoch, Promote).
	From string
	// Epoch is the group epoch once the decision is carried out: Persisted
	// Epoch + 1 for RevokeEpoch, Promote, ReassertPrimary and AdoptPrimary
	// (a failover thus moves N → N+1 with no active site → N+2 naming the
	// new primary), the persisted epoch otherwise.
	Epoch uint64
	// Fence lists the sites to set read-only (FenceSites; best effort for
	// RevokeEpoch and Promote).
	Fence []string
	// Repoint lists the sites to replicate from Target (Promote, Rejoin).
	Repoint []string
	// Detach lists the sites whose IO thread to stop (StopReplicaIO; with
	// RevokeEpoch under semi-sync fencing, right after the revoke).
	Detach []string
	// Diverged lists the divergences to record (MarkDiverged).
	Diverged []Divergence
	// Repaired lists the known-diverged sites found repaired (ClearDiverged).
	Repaired []string
	// SemiSyncOff lists the sites whose semi-sync source side to switch off
	// (DisableSemiSyncSource).
	SemiSyncOff []string
	// FenceProof says why a Promote is safe; "" for every other action.
	FenceProof FenceProof
	// PromotionGTID is Target's GTID set at promotion (Promote).
	PromotionGTID gtid.Set
	// Planned marks an operator's switchover (RevokeEpoch, Promote).
	Planned bool
	// Detection is the group detection result the decision was based on.
	Detection statemachine.Result
}

// MakesWritable returns the site the decision makes writable ("" if none).
func (d Decision) MakesWritable() string {
	if d.Action == Promote || d.Action == ReassertPrimary {
		return d.Target
	}
	return ""
}

// String renders the decision for logs.
func (d Decision) String() string {
	s := fmt.Sprintf("%s (%s)", d.Action, d.Reason)
	if d.Target != "" {
		s += " target=" + d.Target
	}
	if len(d.Fence) > 0 {
		s += fmt.Sprintf(" fence=%v", d.Fence)
	}
	if d.FenceProof != "" {
		s += " proof=" + string(d.FenceProof)
	}
	return s + ": " + d.Message
}
