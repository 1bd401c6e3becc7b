package sitepair

import (
	"time"

	"github.com/failoverd/failoverd/gtid"
)

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
	// Pause is an operator's pause of the group, or nil (see Pause).
	Pause *Pause
	// Holds maps sites to an operator's hold (see Hold); expired entries
	// are ignored and dropped by ExpireModes.
	Holds map[string]Hold
}

// CooldownFrom returns when the failover cooldown started: the last
// automatic failover (FailoverHistory's newest entry); false when none is
// recorded (never, or an operator acknowledged since). Planned switchovers
// do not arm it.
func (p Persisted) CooldownFrom() (time.Time, bool) {
	if n := len(p.FailoverHistory); n > 0 {
		return p.FailoverHistory[n-1], true
	}
	return time.Time{}, false
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
	// AllowDROnly: the operator's switchover explicitly allowed a dr-only
	// target (SwitchoverOptions.AllowDROnly).
	AllowDROnly bool
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
