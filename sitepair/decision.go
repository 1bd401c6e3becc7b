package sitepair

import (
	"fmt"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/statemachine"
)

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
	// AllowDROnly: the switchover's operator allowed a dr-only target
	// (RevokeEpoch with Planned).
	AllowDROnly bool
	// Detection is the group detection result the decision was based on.
	Detection statemachine.Result
	// Withheld is the decision a paused group did not carry out
	// (ReasonPausedWithheld); nil otherwise.
	Withheld *Decision
	// RecheckAt, when set, is the instant this decision changes by the
	// passing of time alone (the old primary's sidecar lease deadline of
	// ReasonAwaitLeaseExpiry): the caller decides again then, not at its
	// next tick.
	RecheckAt time.Time
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
