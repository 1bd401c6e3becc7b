package sitepair

import (
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
	// StateSince is the daemon-clock completion time of the probe that gave
	// the site its debounced State; zero when unknown.
	StateSince time.Time
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
	// Exit is the mysqld exit its latest report carried (zero when none):
	// the process it watched exited and it has seen no new one since.
	Exit MysqldExit
}

// MysqldExit is a mysqld process exit a sidecar saw (a pidfd of the process
// named by its pid file became readable).
type MysqldExit struct {
	// PID and Start (the process's start time in clock ticks after boot,
	// /proc/PID/stat) identify the process that exited.
	PID   int
	Start uint64
	// At bounds the exit on the daemon's clock from above: the receipt of
	// the first report naming this exit, minus the age it stated (the
	// exit happened at least that long before the report was sent, which
	// is before it arrived). Zero: no exit reported.
	At time.Time
}

// Served is the last view a sidecar served one peer.
type Served struct {
	// At bounds when (receipt of the report minus the age it stated).
	At time.Time
	// Epoch is the epoch of the view served.
	Epoch uint64
}

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
