// Package status holds the snapshot the daemon publishes of itself and its
// groups: what the HTTP API serves (GET /v1/groups), what `failoverd status`
// prints and what the Prometheus metrics are computed from at scrape time.
// It is plain data with JSON tags, so every reader sees the same facts and
// none of them reaches into the daemon's loop.
package status

import (
	"time"

	"github.com/failoverd/failoverd/sitepair"
)

// Snapshot is the daemon and every group it runs, as of At.
type Snapshot struct {
	// At is when the snapshot was taken (daemon clock).
	At     time.Time `json:"at"`
	Daemon Daemon    `json:"daemon"`
	Groups []Group   `json:"groups"`
}

// Group returns the group named name, if any.
func (s Snapshot) Group(name string) (Group, bool) {
	for _, g := range s.Groups {
		if g.Name == name {
			return g, true
		}
	}
	return Group{}, false
}

// Daemon describes the process answering.
type Daemon struct {
	// Identity names this daemon in leader election.
	Identity string `json:"identity"`
	// Version and Commit identify the build.
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// StartedAt is when the process started.
	StartedAt time.Time `json:"startedAt"`
	// LeaderElection tells whether several daemons elect a leader; without
	// it this daemon always leads.
	LeaderElection bool `json:"leaderElection"`
	// Leader: this daemon acts and serves views now.
	Leader bool `json:"leader"`
	// LeaderSince is when its current term began (zero when not leading).
	LeaderSince time.Time `json:"leaderSince,omitzero"`
	// LeaderIdentity is the leader this daemon knows of ("" when none).
	LeaderIdentity string `json:"leaderIdentity,omitempty"`
	// Session describes this daemon's election session (etcd: its lease
	// and TTL); "" without one.
	Session string `json:"session,omitempty"`
	// Store describes the state store ("file /var/lib/...").
	Store string `json:"store"`
	// StoreType is the store's backend: file, kubernetes or etcd.
	StoreType string `json:"storeType"`
	// Ready is /readyz: state loaded, leadership known and first probes of
	// every site done. NotReady says what is missing when it is false.
	Ready    bool   `json:"ready"`
	NotReady string `json:"notReady,omitempty"`
	// Config is the configuration file the daemon runs.
	Config Config `json:"config"`
}

// Config is the configuration file a daemon runs: loaded at its start and
// by every reload it applied (SIGHUP, failoverd reload).
type Config struct {
	// File is the file's path ("" when the daemon was not started from one).
	File string `json:"file,omitempty"`
	// Digest is the SHA-256 (hex) of the file as last applied.
	Digest string `json:"digest,omitempty"`
	// LoadedAt is when it was applied: the start, or the last reload that
	// was not refused.
	LoadedAt time.Time `json:"loadedAt,omitzero"`
	// LastRefusedAt and LastRefused tell when and why the last reload was
	// refused, while no reload was applied since (the daemon runs an older
	// file than the one on disk).
	LastRefusedAt time.Time `json:"lastRefusedAt,omitzero"`
	LastRefused   string    `json:"lastRefused,omitempty"`
	// Pending are the groups still running their previous configuration:
	// a failover in flight defers their rebuild until it ends.
	Pending []PendingGroup `json:"pending,omitempty"`
}

// PendingGroup is a group whose new configuration waits, and why.
type PendingGroup struct {
	Group  string `json:"group"`
	Reason string `json:"reason"`
}

// Decision classes (Group.Class): what a decision means for an operator.
// They are sitepair's reason classes (its reason table gives every reason
// one), as the plain strings the JSON carries.
const (
	ClassHealthy       = string(sitepair.ClassHealthy)       // nothing to do
	ClassDegraded      = string(sitepair.ClassDegraded)      // the primary serves; a replica needs attention
	ClassWaiting       = string(sitepair.ClassWaiting)       // transient: probes, debouncing, a lease, catch-up
	ClassActing        = string(sitepair.ClassActing)        // a failover, switchover, fence or rejoin is being carried out
	ClassSplitBrain    = string(sitepair.ClassSplitBrain)    // more than one site may accept writes
	ClassNoPrimary     = string(sitepair.ClassNoPrimary)     // no site accepts writes and none can be promoted yet
	ClassBlocked       = string(sitepair.ClassBlocked)       // a failover is needed but a rule refuses it
	ClassAwaitingHuman = string(sitepair.ClassAwaitingHuman) // only an operator can move the group on
	ClassInvalid       = string(sitepair.ClassInvalid)       // configuration or state inconsistent
)

// Group modes (Group.Mode), as configs.Group.Mode spells them.
const (
	ModeActive  = "active"
	ModeObserve = "observe"
)

// Group is one failover group.
type Group struct {
	Name string `json:"name"`
	// GroupReplication is the group's Group Replication verdict
	// (replication: group only; nil for an async group).
	GroupReplication *GroupReplication `json:"groupReplication,omitempty"`
	Engine           string            `json:"engine"`
	Fencing          string            `json:"fencing"`
	// Mode is ModeActive or ModeObserve (configs.Group.Mode): an observing
	// group's decision below is what it would do; it changes nothing and
	// its epoch and active site stay as they were persisted.
	Mode string `json:"mode"`
	// Epoch only grows; ActiveSite is the site allowed to accept writes
	// ("" while a failover is in flight or before one was adopted).
	Epoch      uint64 `json:"epoch"`
	ActiveSite string `json:"activeSite"`
	// Action, Reason and Message are the latest decision; Class sorts its
	// reason into one of the Class* constants; Detection is the group
	// detection code it rested on.
	Action    string `json:"action"`
	Reason    string `json:"reason"`
	Class     string `json:"class"`
	Message   string `json:"message"`
	Detection string `json:"detection"`
	// DecidedAt is when the latest decision was made (zero before the first).
	DecidedAt time.Time `json:"decidedAt,omitzero"`
	// CooldownRemaining is how long automatic failover stays refused after
	// the last one (0 when none).
	CooldownRemainingSeconds float64 `json:"cooldownRemainingSeconds"`
	// EscalationHalted: automatic failover is stopped until acknowledged.
	EscalationHalted bool `json:"escalationHalted"`
	// LastFailover is the latest completed failover or switchover.
	LastFailover *Failover `json:"lastFailover,omitempty"`
	// InFlight is the failover or switchover under way.
	InFlight *InFlight `json:"inFlight,omitempty"`
	// Diverged lists sites known to hold transactions the primary lacks.
	Diverged []Divergence `json:"diverged,omitempty"`
	// OperatorFenced lists sites an operator excluded from promotion.
	OperatorFenced []string `json:"operatorFenced,omitempty"`
	// Sites lists every site in declaration order.
	Sites []Site `json:"sites"`
	// Routing is each follower (Service selector, taints, DNS, cache).
	Routing []Follower `json:"routing,omitempty"`
	// Hooks is the latest run of each event hook that ran since this
	// daemon started.
	Hooks []HookRun `json:"hooks,omitempty"`
	// CacheSwitchover is how the cache moved for the last planned
	// switchover this daemon ran (nil without a cache or before one).
	CacheSwitchover *CacheSwitchover `json:"cacheSwitchover,omitempty"`
	// Audit is the latest operator commands, oldest first (at most 10).
	Audit []AuditEntry `json:"audit,omitempty"`
	// RPO says whether acknowledged writes survive the loss of the
	// primary, as its last probe found it: RPOZero when semi-sync is on and
	// in effect there (each acknowledged write is on a replica as well; a
	// failover waits for the replicas that may hold one: reason
	// ack-holder-unreachable), RPONotZero without it; "" when unknown (no
	// primary recorded or never reached). RPONote says why, in words.
	RPO     string `json:"rpo,omitempty"`
	RPONote string `json:"rpoNote,omitempty"`
	// FenceConfirmedBy names the operator who confirmed the in-flight
	// failover's old primary dead ("" when none did).
	FenceConfirmedBy string `json:"fenceConfirmedBy,omitempty"`
	// LastError is the latest action's error ("" when it succeeded).
	LastError string `json:"lastError,omitempty"`
	// Pause is the operator's pause in effect (nil when not paused).
	Pause *Pause `json:"pause,omitempty"`
	// Withheld is what the paused group would have done but did not (the
	// latest decision withheld it; nil otherwise).
	Withheld *Withheld `json:"withheld,omitempty"`
	// Readiness answers, per supposed fault, what would happen if the
	// primary were lost now (empty before the first decision).
	Readiness []Readiness `json:"readiness,omitempty"`
}

// Pause is an operator's pause of a group or hold on a site: who, why,
// since and until when (Kind is the hold's kind; "" for a pause).
type Pause struct {
	Kind   string    `json:"kind,omitempty"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until"`
}

// Withheld is a decision a paused group did not carry out.
type Withheld struct {
	Action  string `json:"action"`
	Reason  string `json:"reason"`
	Target  string `json:"target,omitempty"`
	Message string `json:"message"`
}

// Readiness is what would happen if the primary were lost now by Fault
// ("crash": its mysqld exits; "lost": it answers nothing, host or network
// lost or mysqld hung), computed each status read by the decision rules.
type Readiness struct {
	Fault string `json:"fault"`
	// Ready: the group would promote Candidate on its own, on Proof.
	Ready     bool   `json:"ready"`
	Candidate string `json:"candidate,omitempty"`
	Proof     string `json:"proof,omitempty"`
	// ExpectedWritableSeconds estimates fault → Candidate writable:
	// detection (failureThreshold poll intervals) plus the wait for the
	// proof (the sidecar lease for lease-expired). Ready only.
	ExpectedWritableSeconds float64 `json:"expectedWritableSeconds,omitempty"`
	// Reason and Message are the blocking decision (not ready) or the
	// promotion (ready).
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Site returns the site named name, if any.
func (g Group) Site(name string) (Site, bool) {
	for _, s := range g.Sites {
		if s.Name == name {
			return s, true
		}
	}
	return Site{}, false
}

// Failover is a completed failover or switchover.
type Failover struct {
	Kind  string    `json:"kind"` // "failover" or "switchover"
	From  string    `json:"from"`
	To    string    `json:"to"`
	At    time.Time `json:"at"`
	Epoch uint64    `json:"epoch"`
	// PromotionGTID is To's executed set right before it became writable.
	PromotionGTID string `json:"promotionGTID,omitempty"`
	// Proof is the fence proof the promotion rested on; ConfirmedBy names
	// the operator when it was operator-confirmed.
	Proof       string `json:"proof,omitempty"`
	ConfirmedBy string `json:"confirmedBy,omitempty"`
}

// AuditEntry is one operator command the daemon handled.
type AuditEntry struct {
	At     time.Time `json:"at"`
	Action string    `json:"action"` // switchover, acknowledge, confirm-fence
	Site   string    `json:"site,omitempty"`
	By     string    `json:"by,omitempty"`
	// Result is "accepted" or "refused: " and why.
	Result string `json:"result"`
}

// InFlight is a failover or switchover under way.
type InFlight struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Step      string    `json:"step"`
	StepDone  bool      `json:"stepDone"`
	StartedAt time.Time `json:"startedAt"`
}

// Divergence is a site holding transactions the primary lacks.
type Divergence struct {
	Site string `json:"site"`
	GTID string `json:"gtid"`
	// Transactions counts them (exact under gtid_strict_mode; an upper bound
	// for MariaDB sites marked before counts were kept).
	Transactions uint64 `json:"transactions"`
}

// Recovery point objectives (Group.RPO).
const (
	// RPOZero: no acknowledged write is lost to one failure.
	RPOZero = "zero"
	// RPONotZero: a write acknowledged by the primary alone is lost when it
	// is: the group runs asynchronously.
	RPONotZero = "not-zero"
)

// Recovery states (Site.Recovery).
const (
	RecoveryInProgress = "in-progress"
	RecoveryBlocked    = "blocked"
	// RecoveryRecloning: a human-requested reclone runs (Site.Reclone).
	RecoveryRecloning = "recloning"
	// RecoveryRecloneFailed: the last reclone failed (Site.Reclone.Failed
	// says why); the site stays out of every decision until it is retried.
	RecoveryRecloneFailed = "reclone-failed"
)

// Reclone is a human-requested re-seed of a site from the primary.
type Reclone struct {
	// Donor is the primary it is copied from.
	Donor string `json:"donor"`
	// StartedAt is when the request was accepted; By who made it.
	StartedAt time.Time `json:"startedAt"`
	By        string    `json:"by,omitempty"`
	// Failed says why it failed; "" while it runs.
	Failed string `json:"failed,omitempty"`
}

// Site states (Site.State), as debounced by the state machine.
const (
	StateUnknown     = "unknown"
	StateWritable    = "writable"
	StateReadOnly    = "read-only"
	StateUnreachable = "unreachable"
)

// Site is one site of a group.
type Site struct {
	Name string `json:"name"`
	// Hold is the operator's hold on the site in effect (nil when none).
	Hold *Pause `json:"hold,omitempty"`
	// Reader is whether the site serves reads (read routing), and why; nil
	// when the group routes no readers or before the first round.
	Reader *Reader `json:"reader,omitempty"`
	// ReadsWithheld is why the daemon's view withholds the site from reads
	// for a safety reason (diverged, fenced, held, recloning, another
	// source; the view's noReads), "" when it does not. Kept whether or not
	// the group routes readers.
	ReadsWithheld string `json:"readsWithheld,omitempty"`
	// Role is "primary-candidate" or "dr-only".
	Role string `json:"role"`
	// State is one of the State* constants.
	State string `json:"state"`
	// Active: the group's recorded primary.
	Active bool `json:"active"`
	// Executed is the executed GTID set; Retrieved the received one.
	Executed  string `json:"executed,omitempty"`
	Retrieved string `json:"retrieved,omitempty"`
	// ReplicatingFrom names the site this one replicates from.
	ReplicatingFrom string `json:"replicatingFrom,omitempty"`
	// Replica threads: nil when the site has no replication channel.
	Replication *Replication `json:"replication,omitempty"`
	// ApplierBlocked says why the site's replication applier is blocked
	// (sitepair.Policy.ApplierBlocked: its threads wait for semi-sync
	// acknowledgements, or what it received stays unapplied while its
	// threads run); "" when it is not.
	ApplierBlocked string `json:"applierBlocked,omitempty"`
	// WritesStalled says why commits on the site are stalled waiting for
	// semi-sync acknowledgements (sitepair.Policy.WritesStalled); "" when
	// they are not.
	WritesStalled string `json:"writesStalled,omitempty"`
	// SemiSync is the site's semi-sync source side as last read; nil when
	// unknown.
	SemiSync *SemiSync `json:"semiSync,omitempty"`
	// LastProbeAt is when the latest probe finished; LastReachableAt when
	// one last reached the server; ProbeError the latest failure.
	LastProbeAt     time.Time `json:"lastProbeAt,omitzero"`
	LastReachableAt time.Time `json:"lastReachableAt,omitzero"`
	ProbeError      string    `json:"probeError,omitempty"`
	// Diverged is the GTID set it holds that the primary lacks.
	Diverged string `json:"diverged,omitempty"`
	// Reclone is the reclone a human asked for, running or failed; nil
	// otherwise.
	Reclone *Reclone `json:"reclone,omitempty"`
	// Sidecar is what its sidecar last reported; nil without one.
	Sidecar *Sidecar `json:"sidecar,omitempty"`
	// Recovery is RecoveryInProgress for the last failover's old primary
	// until it replicates from the active site with both threads running
	// and no lag, RecoveryBlocked for a site known to be diverged (it stays
	// fenced until a human repairs or reclones it), RecoveryRecloning or
	// RecoveryRecloneFailed while a reclone runs or after it failed, ""
	// otherwise.
	Recovery string `json:"recovery,omitempty"`
	// CacheRole is the role failoverd last gave the site's Dragonfly/Redis
	// ("master" or "replica"); "" without a cache or before the first.
	CacheRole string `json:"cacheRole,omitempty"`
}

// Replication is a replica's channel as last observed.
type Replication struct {
	IORunning  bool `json:"ioRunning"`
	SQLRunning bool `json:"sqlRunning"`
	// Broken: a thread stopped on an error, LastError says which.
	Broken    bool   `json:"broken"`
	LastError string `json:"lastError,omitempty"`
	// LagSeconds is meaningful only with LagKnown (NULL lag is unknown,
	// never 0).
	LagSeconds float64 `json:"lagSeconds"`
	LagKnown   bool    `json:"lagKnown"`
	// GTIDLagSeconds is the lag measured from GTID sets: how long what the
	// replica retrieved has stayed unapplied (0 when none). Decisions use
	// the larger of the two.
	GTIDLagSeconds float64 `json:"gtidLagSeconds"`
}

// SemiSync is a site's semi-sync source side and what waits on it.
type SemiSync struct {
	// SourceEnabled: rpl_semi_sync_{master,source}_enabled is on (on the
	// primary only: the daemon switches it off on replicas).
	SourceEnabled bool `json:"sourceEnabled"`
	// WaitingSessions and WaitingAppliers count the client sessions and the
	// replication applier threads whose commits wait for an
	// acknowledgement; LongestWaitSeconds is the longest such wait.
	WaitingSessions    int     `json:"waitingSessions,omitempty"`
	WaitingAppliers    int     `json:"waitingAppliers,omitempty"`
	LongestWaitSeconds float64 `json:"longestWaitSeconds,omitempty"`
}

// Sidecar is a site's sidecar as last reported.
type Sidecar struct {
	// LastReportAt is when its latest report arrived (daemon clock); zero
	// when none arrived since this daemon started leading.
	LastReportAt time.Time `json:"lastReportAt,omitzero"`
	// LeaseAgeSeconds is the time since that report (-1 when never).
	LeaseAgeSeconds float64 `json:"leaseAgeSeconds"`
	// Epoch is the view epoch it holds; FencedEpoch the epoch under which
	// it last fenced its MySQL (0 = never).
	Epoch       uint64 `json:"epoch"`
	FencedEpoch uint64 `json:"fencedEpoch,omitempty"`
	MysqldDown  bool   `json:"mysqldDown,omitempty"`
	// CanKill: its latest report said it can SIGKILL a hung mysqld; without
	// it the site's lease backs no failover (docs/design.md, lease-expired).
	CanKill bool `json:"canKill"`
}

// Follower is one thing that follows the primary.
type Follower struct {
	// Name is "kube", "dns", "cache", ...
	Name string `json:"name"`
	// InSync: it points at the active site of the newest view.
	InSync bool `json:"inSync"`
	// State is "ok" (in sync), "pending" (a newer view not followed yet),
	// "drifted" (a re-check found objects not pointing at the active site
	// and could not repair them all), "unreachable" (its API or server did
	// not answer) or "error"; Error is the last error.
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Epoch is the epoch of the view it last completed (0: none yet).
	Epoch uint64 `json:"epoch,omitempty"`
	// LastCheckAt is when it last ran against the wanted view without error
	// (it re-runs every routingReconcileInterval).
	LastCheckAt time.Time `json:"lastCheckAt,omitzero"`
	// LastRepairAt is when a re-run last found drift and repaired it;
	// LastDrift what it repaired then; Repairs how many re-runs repaired
	// something since the daemon started.
	LastRepairAt time.Time `json:"lastRepairAt,omitzero"`
	LastDrift    []string  `json:"lastDrift,omitempty"`
	Repairs      uint64    `json:"repairs,omitempty"`
}

// HookRun is the latest run of one event hook.
type HookRun struct {
	// Hook is its name; Event the event it ran for, at Epoch.
	Hook  string `json:"hook"`
	Event string `json:"event"`
	Epoch uint64 `json:"epoch"`
	// At is when it started; DurationSeconds how long it took.
	At              time.Time `json:"at"`
	DurationSeconds float64   `json:"durationSeconds"`
	// Attempts counts webhook calls (1 for a command).
	Attempts int `json:"attempts"`
	// State is "ok", "failed" or "running"; Error says why it failed.
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// CacheSwitchover is how the cache primary moved for a planned switchover,
// before MySQL was touched (WaitingForCacheSync, then PromotingCache).
type CacheSwitchover struct {
	At   time.Time `json:"at"`
	From string    `json:"from"`
	To   string    `json:"to"`
	// Synced: the target had the master's offset before its promotion;
	// SessionsPreserved: nothing written to the old master was lost
	// (false when onSyncTimeout=proceed promoted a lagging target).
	Synced            bool `json:"synced"`
	SessionsPreserved bool `json:"sessionsPreserved"`
	// AlreadyThere: the target's cache already was the master.
	AlreadyThere    bool    `json:"alreadyThere,omitempty"`
	SyncWaitSeconds float64 `json:"syncWaitSeconds"`
	PromoteSeconds  float64 `json:"promoteSeconds"`
}

// Reader is a site's read-routing eligibility, with hysteresis: Eligible
// changes only after readers.upAfter good or readers.downAfter bad rounds.
type Reader struct {
	// Eligible: the site is in the reader set now.
	Eligible bool `json:"eligible"`
	// Why says why it is in or out, in words (e.g. "lag 12s over maxLag
	// 5s", "diverged", "replicating from site0, lag 0s").
	Why string `json:"why"`
	// Since is when Eligible last changed (daemon clock).
	Since time.Time `json:"since,omitzero"`
	// LagSeconds is the lag the decision used (the larger of
	// Seconds_Behind and the GTID-measured backlog); -1 when unknown.
	LagSeconds float64 `json:"lagSeconds"`
}

// GroupReplication is a replication: group group's cross-checked view of
// itself (package grview), as of the daemon's last round.
type GroupReplication struct {
	// Verdict is grview's reason: quorate, no-primary, no-quorum,
	// unconfirmed ("" before the first round).
	Verdict string `json:"verdict"`
	// HasQuorum: a majority of Denominator members, each ONLINE in a view
	// it sees quorate, report the same view.
	HasQuorum bool `json:"hasQuorum"`
	// GroupName, ViewID and ViewSize are the winning view's ("" and 0
	// without one).
	GroupName string `json:"groupName,omitempty"`
	ViewID    string `json:"viewId,omitempty"`
	ViewSize  int    `json:"viewSize"`
	// Denominator is the member count the majority was taken of: the
	// sticky largest quorate view (MaxViewSize), at least the configured
	// members before the first verdict.
	Denominator int `json:"denominator"`
	MaxViewSize int `json:"maxViewSize"`
	// Primary (server_uuid) and PrimarySite are the winning view's primary.
	Primary     string `json:"primary,omitempty"`
	PrimarySite string `json:"primarySite,omitempty"`
	// Members counts the winning view's members per MEMBER_STATE.
	Members map[string]int `json:"members"`
	// Sites is each configured member's own report and how it counted.
	Sites []GroupReplicationSite `json:"sites"`
	// GroupNames lists the group names the members report; TwoGroups is
	// set when there is more than one (a second bootstrap).
	GroupNames []string `json:"groupNames,omitempty"`
	TwoGroups  bool     `json:"twoGroups,omitempty"`
	// Warnings need a human's attention (two groups, multi-primary, a
	// member that is no configured site).
	Warnings []string `json:"warnings,omitempty"`
	// SwitchoverTo is the target of a switchover asked of the group that
	// routing has not followed yet.
	SwitchoverTo string `json:"switchoverTo,omitempty"`
	// EvaluatedAt is when the verdict was computed.
	EvaluatedAt time.Time `json:"evaluatedAt,omitzero"`
}

// GroupReplicationSite is one configured member's report.
type GroupReplicationSite struct {
	Site string `json:"site"`
	UUID string `json:"uuid,omitempty"`
	// State and Role are its own row of its own member table.
	State    string `json:"state,omitempty"`
	Role     string `json:"role,omitempty"`
	ViewID   string `json:"viewId,omitempty"`
	ViewSize int    `json:"viewSize"`
	Quorate  bool   `json:"quorate"`
	// Standing is how its report counted (grview.Standing: agrees,
	// stale-view, minority, unreached, ...).
	Standing string `json:"standing"`
	// Error is why its report could not be read this round.
	Error string `json:"error,omitempty"`
	// UnsafeSettings are its Group Replication settings failoverd's
	// following relies on that do not hold.
	UnsafeSettings []string `json:"unsafeSettings,omitempty"`
}
