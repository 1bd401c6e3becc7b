package sitepair

import (
	"maps"
	"slices"
)

// Reason is the machine-readable cause of a Decision. Every Reason belongs
// to exactly one Action (see ActionOf).
type Reason string

// Reasons, grouped by situation. docs/decisions.md has the full table.
const (
	// ReasonInvalidPolicy (Alert): the Policy failed Validate.
	ReasonInvalidPolicy Reason = "invalid-policy"
	// ReasonInvalidInput (Alert): observations or persisted state are
	// inconsistent (site count, names, references, GTID flavors, in-flight).
	ReasonInvalidInput Reason = "invalid-input"

	// ReasonHealthy (None): one writable primary, every replica follows it.
	ReasonHealthy Reason = "healthy"
	// ReasonDegradedReplicaUnreachable (Alert): the primary is fine, some
	// replica is unreachable.
	ReasonDegradedReplicaUnreachable Reason = "degraded-replica-unreachable"
	// ReasonDegradedReplicationBroken (Alert): a replica's replication
	// stopped on an error.
	ReasonDegradedReplicationBroken Reason = "degraded-replication-broken"
	// ReasonDegradedNotFollowing (Alert): a replica does not follow the
	// primary and cannot be rejoined automatically (IO thread not
	// connected, operator-fenced or known-diverged).
	ReasonDegradedNotFollowing Reason = "degraded-not-following"
	// ReasonApplierBlocked (Alert): the primary is fine but a replica's
	// applier is blocked: its threads wait for semi-sync acknowledgements
	// (its own source side is on), or with both threads running it has left
	// what it received unapplied for longer than
	// Policy.ApplierStallWindow. It falls behind and, past maxCandidateLag,
	// is no failover candidate.
	ReasonApplierBlocked Reason = "degraded-applier-blocked"
	// ReasonSemiSyncSourceOnReplica (DisableSemiSyncSource): a read-only
	// replica of the primary has the semi-sync source side on (guides
	// often advise it on every site): its applier's commits wait for
	// acknowledgements nobody sends (for ever with the infinite timeout
	// fencing semisync needs), so it is switched off there. The daemon owns
	// the roles: the source side on the primary only.
	ReasonSemiSyncSourceOnReplica Reason = "semisync-source-on-replica"
	// ReasonWritesStalledAwaitingAck (Alert): commits on the primary have
	// waited for a semi-sync acknowledgement longer than
	// Policy.AckStallWindow: no replica acknowledges (all gone, IO threads
	// stopped, replica side off). With the infinite timeout fencing
	// semisync needs, every commit blocks until a replica returns: the
	// price of never acknowledging a write only one site holds.
	ReasonWritesStalledAwaitingAck Reason = "writes-stalled-awaiting-ack"
	// ReasonAdoptPrimary (AdoptPrimary): no active site recorded yet; the
	// sole writable site is adopted.
	ReasonAdoptPrimary Reason = "adopt-primary"
	// ReasonUnexpectedPrimary (Alert): the sole writable site is not the
	// recorded active site (changed outside failoverd).
	ReasonUnexpectedPrimary Reason = "unexpected-primary"
	// ReasonUnexpectedPrimaryFenced (FenceSites): the sole writable site is
	// not the recorded active site, which our last failover promoted: the
	// writable site (a deposed primary back from a hang or a partition, or
	// one promoted outside failoverd) is fenced.
	ReasonUnexpectedPrimaryFenced Reason = "unexpected-primary-fenced"
	// ReasonRejoin (Rejoin): read-only sites not replicating from the
	// primary whose sets the primary contains are repointed to it.
	ReasonRejoin Reason = "rejoin"
	// ReasonMarkDiverged (MarkDiverged): read-only sites not replicating
	// from the primary hold transactions the primary lacks.
	ReasonMarkDiverged Reason = "mark-diverged"
	// ReasonDivergenceRepaired (ClearDiverged): a known-diverged, read-only
	// site's history is now contained in the primary's (a human repaired
	// or re-seeded it): it is no longer diverged and may rejoin.
	ReasonDivergenceRepaired Reason = "divergence-repaired"
	// ReasonRecloneUnacknowledgedTail (RecloneSite): with rejoin policy
	// reclone-unacknowledged, the old primary came back holding only
	// transactions it wrote after everything the new primary has from it,
	// under semi-sync AFTER_SYNC without fallback, and no site received
	// any of them: no client saw them committed, so it is re-seeded from
	// the primary, and what it throws away is recorded.
	ReasonRecloneUnacknowledgedTail Reason = "reclone-unacknowledged-tail"

	// ReasonWaitingForProbes (None): some site has no debounced state yet.
	ReasonWaitingForProbes Reason = "waiting-for-probes"
	// ReasonPrimaryDebouncing (None): the primary fails probes but has not
	// reached the failure threshold.
	ReasonPrimaryDebouncing Reason = "primary-debouncing"
	// ReasonTotalLoss (Alert): every site is unreachable.
	ReasonTotalLoss Reason = "total-loss"
	// ReasonPrimaryPartitioned (Alert): the daemon cannot reach the primary
	// but a replica still streams from it; never fail over.
	ReasonPrimaryPartitioned Reason = "primary-partitioned"
	// ReasonUncorroborated (Alert): the primary is unreachable and no
	// reachable replica follows it to corroborate; automatic failover is
	// refused (an operator may switch over).
	ReasonUncorroborated Reason = "uncorroborated"

	// ReasonNoPrimaryNoActiveSite (Alert): nobody is writable and no active
	// site is recorded to re-assert.
	ReasonNoPrimaryNoActiveSite Reason = "no-primary-no-active-site"
	// ReasonNoPrimaryNotAllReachable (Alert): nobody is writable and some
	// unreachable site may be writable (its probes answer writable, failoverd
	// may have left it writable, or the last failover rested on no proof),
	// so re-asserting could create a second primary.
	ReasonNoPrimaryNotAllReachable Reason = "no-primary-not-all-reachable"
	// ReasonNoPrimaryTargetIneligible (Alert): the active site is dr-only,
	// operator-fenced or known-diverged.
	ReasonNoPrimaryTargetIneligible Reason = "no-primary-target-ineligible"
	// ReasonNoPrimaryTargetBehind (Alert): the active site lacks
	// transactions a peer has, or its own promotion GTID set.
	ReasonNoPrimaryTargetBehind Reason = "no-primary-target-behind"
	// ReasonPromotionSettling (None): nobody is writable yet, but the active
	// site is the one our last failover promoted, within
	// Policy.PromotionSettleWindow of the promotion, and reachable: its
	// writable probes are still being debounced. After the window the
	// no-primary rules apply.
	ReasonPromotionSettling Reason = "promotion-settling"
	// ReasonReassertPrimary (ReassertPrimary): every reachable site is
	// read-only, no unreachable one may be writable (an old primary deposed
	// with a proof, a replica never made writable) and the active site has
	// every transaction: re-enable it.
	ReasonReassertPrimary Reason = "reassert-primary"

	// ReasonSplitBrainKeepPromoted (FenceSites): several writable sites;
	// the target of our last failover stays, the others are fenced.
	ReasonSplitBrainKeepPromoted Reason = "split-brain-keep-promoted"
	// ReasonSplitBrainKeepWinner (FenceSites): several writable sites, no
	// failover history: the active site, else PreferSite, else the highest
	// priority candidate stays; the others are fenced.
	ReasonSplitBrainKeepWinner Reason = "split-brain-keep-winner"
	// ReasonSplitBrainAlertOnly (Alert): several writable sites and no safe
	// winner (our last target is not among them, or none is eligible).
	ReasonSplitBrainAlertOnly Reason = "split-brain-alert-only"

	// ReasonEscalationHalted (Alert): automatic failover is halted until a
	// human acknowledges.
	ReasonEscalationHalted Reason = "escalation-halted"
	// ReasonCooldown (Alert): the primary is down but the last failover is
	// more recent than FailoverCooldown.
	ReasonCooldown Reason = "cooldown"
	// ReasonEscalationLimit (HaltFailover): EscalationCount automatic
	// failovers happened within EscalationWindow.
	ReasonEscalationLimit Reason = "escalation-limit"
	// ReasonNoEligibleCandidate (Alert): no reachable primary-candidate
	// replica passes the candidate filters.
	ReasonNoEligibleCandidate Reason = "no-eligible-candidate"
	// ReasonIncomparableCandidates (Alert): no candidate's GTID set
	// contains every other candidate's.
	ReasonIncomparableCandidates Reason = "incomparable-candidates"
	// ReasonCandidateLacksTransactions (Alert): the best candidate lacks
	// transactions another reachable site (even an ineligible one) has.
	ReasonCandidateLacksTransactions Reason = "candidate-lacks-transactions"
	// ReasonFailoverRevoke (RevokeEpoch): corroborated primary down: phase 1.
	ReasonFailoverRevoke Reason = "failover-revoke"

	// ReasonFenceWritableDuringFailover (FenceSites): a failover is in
	// flight and some site other than its target is writable.
	ReasonFenceWritableDuringFailover Reason = "fence-writable-during-failover"
	// ReasonFenceOldPrimary (FenceSites): the old primary is reachable but
	// its fence was not read back at the revoked epoch yet.
	ReasonFenceOldPrimary Reason = "fence-old-primary"
	// ReasonAwaitLeaseExpiry (None): sidecar fencing; the old primary's
	// lease deadline has not passed yet.
	ReasonAwaitLeaseExpiry Reason = "await-lease-expiry"
	// ReasonAwaitFenceConfirmation (Alert): confirmed fencing; the old
	// primary is unreachable and not seen down: blocks until it answers or
	// a human intervenes (forever if its host is lost).
	ReasonAwaitFenceConfirmation Reason = "await-fence-confirmation"
	// ReasonAwaitCatchUp (None): the target still lacks transactions of
	// the fenced old primary and is receiving them.
	ReasonAwaitCatchUp Reason = "await-catch-up"
	// ReasonCatchUpTimeout (ReassertPrimary): the target did not receive
	// (or apply) what the reachable, fenced old primary has within the
	// deadline (MaxLagWait for a switchover, else CatchUpTimeout, after the
	// revoke), no unreachable site may be writable: the failover is
	// abandoned and the old primary, which holds everything, is made
	// writable again.
	ReasonCatchUpTimeout Reason = "catch-up-timeout"
	// ReasonTargetLost (ReassertPrimary): the failover or switchover in
	// flight has no target any more (it became unreachable, its replication
	// broke, no candidate is eligible) and its deadline (MaxLagWait for a
	// switchover, else CatchUpTimeout, after the revoke) passed; its old
	// primary is reachable and fenced, and no unreachable site may be
	// writable (never made so by failoverd, or deposed with a proof): the
	// failover is abandoned and the old primary made writable again.
	ReasonTargetLost Reason = "target-lost"
	// ReasonCatchUpTimeoutBlocked (Alert): as ReasonCatchUpTimeout or
	// ReasonTargetLost, but the old primary cannot be re-asserted (it lacks
	// a peer's transactions, may not be primary, or an unreachable site may
	// be writable): the group stays revoked until a human decides.
	ReasonCatchUpTimeoutBlocked Reason = "catch-up-timeout-blocked"
	// ReasonSemiSyncDetachReplicas (StopReplicaIO): semi-sync fencing; the
	// replicas that could still acknowledge the unreachable old primary's
	// commits stop their IO threads (then the semi-sync proof holds).
	ReasonSemiSyncDetachReplicas Reason = "semisync-detach-replicas"
	// ReasonResumeCatchUp (Rejoin): the old primary is back and fenced but
	// the target's IO thread from it was stopped (semi-sync fencing): it
	// replicates again to receive what it lacks.
	ReasonResumeCatchUp Reason = "resume-catch-up"
	// ReasonSemiSyncUnsafe (Alert): semi-sync fencing is configured but the
	// healthy primary's semi-sync settings cannot back the semi-sync proof
	// (a failover would then wait for a fence read-back or mysqld down).
	ReasonSemiSyncUnsafe Reason = "semisync-settings-unsafe"
	// ReasonAckHolderUnreachable (Alert): the old primary is unreachable and
	// more of its replicas are unreachable than its semi-sync wait count
	// allows (k acknowledgements: at most k-1 may be unaccounted for), so one
	// of them may hold an acknowledged write the target lacks; none is proven
	// to hold nothing newer or confirmed lost by an operator (confirm-fence).
	ReasonAckHolderUnreachable Reason = "ack-holder-unreachable"
	// ReasonTargetWritableWithoutProof (Alert): the in-flight target is
	// already writable but no fence proof holds for the old primary.
	ReasonTargetWritableWithoutProof Reason = "target-writable-without-proof"
	// ReasonPublishedTargetUnreachable (Alert): a view naming a target was
	// published (the target may have been made writable) and that target
	// is unreachable and not proven fenced: no other site is promoted.
	ReasonPublishedTargetUnreachable Reason = "published-target-unreachable"
	// ReasonPromote (Promote): phase 2 with a fence proof.
	ReasonPromote Reason = "promote"
	// ReasonPromoteRetarget (Promote): phase 2, the in-flight target is no
	// longer the best candidate; another one is promoted.
	ReasonPromoteRetarget Reason = "promote-retarget"
	// ReasonPromoteResume (Promote): the target is already writable (the
	// daemon stopped mid-promotion); finish the idempotent promotion.
	ReasonPromoteResume Reason = "promote-resume"
	// ReasonPromoteNoFencing (Promote): fencing "none": promoted without
	// proof; acknowledged writes on the old primary may be lost.
	ReasonPromoteNoFencing Reason = "promote-no-fencing"

	// ReasonSwitchover (RevokeEpoch): operator switchover accepted: phase 1.
	ReasonSwitchover Reason = "switchover"
	// ReasonSwitchoverInFlight (None): refused, a failover is in flight.
	ReasonSwitchoverInFlight Reason = "switchover-refused-in-flight"
	// ReasonSwitchoverGroupState (None): refused, the group has no single
	// recorded primary to switch from (split brain, no primary, unknown...).
	ReasonSwitchoverGroupState Reason = "switchover-refused-group-state"
	// ReasonSwitchoverTargetIsPrimary (None): refused, the target already is
	// the primary.
	ReasonSwitchoverTargetIsPrimary Reason = "switchover-refused-target-is-primary"
	// ReasonSwitchoverBadTarget (None): refused, the target is unknown,
	// dr-only, operator-fenced, known-diverged, not read-only or broken.
	ReasonSwitchoverBadTarget Reason = "switchover-refused-bad-target"
	// ReasonSwitchoverTargetBehind (None): refused, the target lacks
	// transactions another replica has and cannot get them from the primary
	// (it does not stream from it, or only that replica holds them).
	ReasonSwitchoverTargetBehind Reason = "switchover-refused-target-behind"
	// ReasonSwitchoverCooldown (None): refused, the last failover or
	// switchover was within failoverCooldown and the request is not forced.
	ReasonSwitchoverCooldown Reason = "switchover-refused-cooldown"
)

var reasonAction = map[Reason]Action{
	ReasonInvalidPolicy: Alert,
	ReasonInvalidInput:  Alert,

	ReasonHealthy:                    None,
	ReasonDegradedReplicaUnreachable: Alert,
	ReasonDegradedReplicationBroken:  Alert,
	ReasonDegradedNotFollowing:       Alert,
	ReasonApplierBlocked:             Alert,
	ReasonSemiSyncSourceOnReplica:    DisableSemiSyncSource,
	ReasonWritesStalledAwaitingAck:   Alert,
	ReasonAdoptPrimary:               AdoptPrimary,
	ReasonUnexpectedPrimary:          Alert,
	ReasonUnexpectedPrimaryFenced:    FenceSites,
	ReasonRejoin:                     Rejoin,
	ReasonMarkDiverged:               MarkDiverged,
	ReasonDivergenceRepaired:         ClearDiverged,
	ReasonRecloneUnacknowledgedTail:  RecloneSite,

	ReasonWaitingForProbes:   None,
	ReasonPrimaryDebouncing:  None,
	ReasonTotalLoss:          Alert,
	ReasonPrimaryPartitioned: Alert,
	ReasonUncorroborated:     Alert,

	ReasonNoPrimaryNoActiveSite:     Alert,
	ReasonNoPrimaryNotAllReachable:  Alert,
	ReasonNoPrimaryTargetIneligible: Alert,
	ReasonNoPrimaryTargetBehind:     Alert,
	ReasonPromotionSettling:         None,
	ReasonReassertPrimary:           ReassertPrimary,

	ReasonSplitBrainKeepPromoted: FenceSites,
	ReasonSplitBrainKeepWinner:   FenceSites,
	ReasonSplitBrainAlertOnly:    Alert,

	ReasonEscalationHalted:           Alert,
	ReasonCooldown:                   Alert,
	ReasonEscalationLimit:            HaltFailover,
	ReasonNoEligibleCandidate:        Alert,
	ReasonIncomparableCandidates:     Alert,
	ReasonCandidateLacksTransactions: Alert,
	ReasonFailoverRevoke:             RevokeEpoch,

	ReasonFenceWritableDuringFailover: FenceSites,
	ReasonFenceOldPrimary:             FenceSites,
	ReasonAwaitLeaseExpiry:            None,
	ReasonAwaitFenceConfirmation:      Alert,
	ReasonAwaitCatchUp:                None,
	ReasonCatchUpTimeout:              ReassertPrimary,
	ReasonTargetLost:                  ReassertPrimary,
	ReasonCatchUpTimeoutBlocked:       Alert,
	ReasonSemiSyncDetachReplicas:      StopReplicaIO,
	ReasonResumeCatchUp:               Rejoin,
	ReasonSemiSyncUnsafe:              Alert,
	ReasonAckHolderUnreachable:        Alert,
	ReasonTargetWritableWithoutProof:  Alert,
	ReasonPublishedTargetUnreachable:  Alert,
	ReasonPromote:                     Promote,
	ReasonPromoteRetarget:             Promote,
	ReasonPromoteResume:               Promote,
	ReasonPromoteNoFencing:            Promote,

	ReasonSwitchover:                RevokeEpoch,
	ReasonSwitchoverInFlight:        None,
	ReasonSwitchoverGroupState:      None,
	ReasonSwitchoverTargetIsPrimary: None,
	ReasonSwitchoverBadTarget:       None,
	ReasonSwitchoverTargetBehind:    None,
	ReasonSwitchoverCooldown:        None,
}

// ActionOf returns the Action every decision with reason r carries, and
// false for an unknown reason.
func ActionOf(r Reason) (Action, bool) {
	a, ok := reasonAction[r]
	return a, ok
}

// Reasons returns every Reason, sorted.
func Reasons() []Reason { return slices.Sorted(maps.Keys(reasonAction)) }
