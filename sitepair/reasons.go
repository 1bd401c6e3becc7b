package sitepair

import (
	"maps"
	"slices"
)

// Reason is the machine-readable cause of a Decision. Every Reason has one
// row in the reason table (reasonTable, below): the Action every decision
// with it carries, its Class and a one-line summary.
type Reason string

// Reasons, grouped by situation. Their actions and classes are in reasonTable;
// docs/decisions.md has the rules that give them and lists the table (§10).
const (
	// ReasonInvalidPolicy: the Policy failed Validate.
	ReasonInvalidPolicy Reason = "invalid-policy"
	// ReasonInvalidInput: observations or persisted state are
	// inconsistent (site count, names, references, GTID flavors, in-flight).
	ReasonInvalidInput Reason = "invalid-input"

	// ReasonHealthy: one writable primary, every replica follows it.
	ReasonHealthy Reason = "healthy"
	// ReasonDegradedReplicaUnreachable: the primary is fine, some
	// replica is unreachable.
	ReasonDegradedReplicaUnreachable Reason = "degraded-replica-unreachable"
	// ReasonDegradedReplicationBroken: a replica's replication
	// stopped on an error.
	ReasonDegradedReplicationBroken Reason = "degraded-replication-broken"
	// ReasonDegradedNotFollowing: a replica does not follow the
	// primary and cannot be rejoined automatically (IO thread not
	// connected, operator-fenced or known-diverged).
	ReasonDegradedNotFollowing Reason = "degraded-not-following"
	// ReasonApplierBlocked: the primary is fine but a replica's
	// applier is blocked: its threads wait for semi-sync acknowledgements
	// (its own source side is on), or with both threads running it has left
	// what it received unapplied for longer than
	// Policy.ApplierStallWindow. It falls behind and, past maxCandidateLag,
	// is no failover candidate.
	ReasonApplierBlocked Reason = "degraded-applier-blocked"
	// ReasonSemiSyncSourceOnReplica: a read-only
	// replica of the primary has the semi-sync source side on (guides
	// often advise it on every site): its applier's commits wait for
	// acknowledgements nobody sends (for ever with the infinite timeout
	// fencing semisync needs), so it is switched off there. The daemon owns
	// the roles: the source side on the primary only.
	ReasonSemiSyncSourceOnReplica Reason = "semisync-source-on-replica"
	// ReasonWritesStalledAwaitingAck: commits on the primary have
	// waited for a semi-sync acknowledgement longer than
	// Policy.AckStallWindow: no replica acknowledges (all gone, IO threads
	// stopped, replica side off). With the infinite timeout fencing
	// semisync needs, every commit blocks until a replica returns: the
	// price of never acknowledging a write only one site holds.
	ReasonWritesStalledAwaitingAck Reason = "writes-stalled-awaiting-ack"
	// ReasonAdoptPrimary: no active site recorded yet; the
	// sole writable site is adopted.
	ReasonAdoptPrimary Reason = "adopt-primary"
	// ReasonUnexpectedPrimary: the sole writable site is not the
	// recorded active site (changed outside failoverd).
	ReasonUnexpectedPrimary Reason = "unexpected-primary"
	// ReasonUnexpectedPrimaryFenced: the sole writable site is
	// not the recorded active site, which our last failover promoted: the
	// writable site (a deposed primary back from a hang or a partition, or
	// one promoted outside failoverd) is fenced.
	ReasonUnexpectedPrimaryFenced Reason = "unexpected-primary-fenced"
	// ReasonRejoin: read-only sites not replicating from the
	// primary whose sets the primary contains are repointed to it.
	ReasonRejoin Reason = "rejoin"
	// ReasonMarkDiverged: read-only sites not replicating
	// from the primary hold transactions the primary lacks.
	ReasonMarkDiverged Reason = "mark-diverged"
	// ReasonDivergenceRepaired: a known-diverged, read-only
	// site's history is now contained in the primary's (a human repaired
	// or re-seeded it): it is no longer diverged and may rejoin.
	ReasonDivergenceRepaired Reason = "divergence-repaired"
	// ReasonRecloneUnacknowledgedTail: with rejoin policy
	// reclone-unacknowledged, the old primary came back holding only
	// transactions it wrote after everything the new primary has from it,
	// under semi-sync AFTER_SYNC without fallback, and no site received
	// any of them: no client saw them committed, so it is re-seeded from
	// the primary, and what it throws away is recorded.
	ReasonRecloneUnacknowledgedTail Reason = "reclone-unacknowledged-tail"

	// ReasonWaitingForProbes: some site has no debounced state yet.
	ReasonWaitingForProbes Reason = "waiting-for-probes"
	// ReasonPrimaryDebouncing: the primary fails probes but has not
	// reached the failure threshold.
	ReasonPrimaryDebouncing Reason = "primary-debouncing"
	// ReasonAwaitingWitnesses: the daemon just gave the primary up but a
	// replica read before that still streamed from it; its next probe
	// tells an outage from a partition.
	ReasonAwaitingWitnesses Reason = "awaiting-witnesses"
	// ReasonTotalLoss: every site is unreachable.
	ReasonTotalLoss Reason = "total-loss"
	// ReasonPrimaryPartitioned: the daemon cannot reach the primary
	// but a replica still streams from it; never fail over.
	ReasonPrimaryPartitioned Reason = "primary-partitioned"
	// ReasonUncorroborated: the primary is unreachable and no
	// reachable replica follows it to corroborate; automatic failover is
	// refused (an operator may switch over).
	ReasonUncorroborated Reason = "uncorroborated"

	// ReasonNoPrimaryNoActiveSite: nobody is writable and no active
	// site is recorded to re-assert.
	ReasonNoPrimaryNoActiveSite Reason = "no-primary-no-active-site"
	// ReasonNoPrimaryNotAllReachable: nobody is writable and some
	// unreachable site may be writable (its probes answer writable, failoverd
	// may have left it writable, or the last failover rested on no proof),
	// so re-asserting could create a second primary.
	ReasonNoPrimaryNotAllReachable Reason = "no-primary-not-all-reachable"
	// ReasonNoPrimaryTargetIneligible: the active site is dr-only,
	// operator-fenced or known-diverged.
	ReasonNoPrimaryTargetIneligible Reason = "no-primary-target-ineligible"
	// ReasonNoPrimaryTargetBehind: the active site lacks
	// transactions a peer has, or its own promotion GTID set.
	ReasonNoPrimaryTargetBehind Reason = "no-primary-target-behind"
	// ReasonPromotionSettling: nobody is writable yet, but the active
	// site is the one our last failover promoted, within
	// Policy.PromotionSettleWindow of the promotion, and reachable: its
	// writable probes are still being debounced. After the window the
	// no-primary rules apply.
	ReasonPromotionSettling Reason = "promotion-settling"
	// ReasonReassertPrimary: every reachable site is
	// read-only, no unreachable one may be writable (an old primary deposed
	// with a proof, a replica never made writable) and the active site has
	// every transaction: re-enable it.
	ReasonReassertPrimary Reason = "reassert-primary"

	// ReasonSplitBrainKeepPromoted: several writable sites;
	// the target of our last failover stays, the others are fenced.
	ReasonSplitBrainKeepPromoted Reason = "split-brain-keep-promoted"
	// ReasonSplitBrainKeepWinner: several writable sites, no
	// failover history: the active site, else PreferSite, else the highest
	// priority candidate stays; the others are fenced.
	ReasonSplitBrainKeepWinner Reason = "split-brain-keep-winner"
	// ReasonSplitBrainAlertOnly: several writable sites and no safe
	// winner (our last target is not among them, or none is eligible).
	ReasonSplitBrainAlertOnly Reason = "split-brain-alert-only"

	// ReasonEscalationHalted: automatic failover is halted until a
	// human acknowledges.
	ReasonEscalationHalted Reason = "escalation-halted"
	// ReasonCooldown: the primary is down but the last failover is
	// more recent than FailoverCooldown.
	ReasonCooldown Reason = "cooldown"
	// ReasonEscalationLimit: EscalationCount automatic
	// failovers happened within EscalationWindow.
	ReasonEscalationLimit Reason = "escalation-limit"
	// ReasonNoEligibleCandidate: no reachable primary-candidate
	// replica passes the candidate filters.
	ReasonNoEligibleCandidate Reason = "no-eligible-candidate"
	// ReasonIncomparableCandidates: no candidate's GTID set
	// contains every other candidate's.
	ReasonIncomparableCandidates Reason = "incomparable-candidates"
	// ReasonCandidateLacksTransactions: the best candidate lacks
	// transactions another reachable site (even an ineligible one) has.
	ReasonCandidateLacksTransactions Reason = "candidate-lacks-transactions"
	// ReasonFailoverRevoke: corroborated primary down: phase 1.
	ReasonFailoverRevoke Reason = "failover-revoke"

	// ReasonFenceWritableDuringFailover: a failover is in
	// flight and some site other than its target is writable.
	ReasonFenceWritableDuringFailover Reason = "fence-writable-during-failover"
	// ReasonFenceOldPrimary: the old primary is reachable but
	// its fence was not read back at the revoked epoch yet.
	ReasonFenceOldPrimary Reason = "fence-old-primary"
	// ReasonAwaitLeaseExpiry: sidecar fencing; the old primary's
	// lease deadline has not passed yet.
	ReasonAwaitLeaseExpiry Reason = "await-lease-expiry"
	// ReasonAwaitFenceConfirmation: confirmed fencing; the old
	// primary is unreachable and not seen down: blocks until it answers or
	// a human intervenes (forever if its host is lost).
	ReasonAwaitFenceConfirmation Reason = "await-fence-confirmation"
	// ReasonAwaitCatchUp: the target still lacks transactions of
	// the fenced old primary and is receiving them.
	ReasonAwaitCatchUp Reason = "await-catch-up"
	// ReasonCatchUpTimeout: the target did not receive
	// (or apply) what the reachable, fenced old primary has within the
	// deadline (MaxLagWait for a switchover, else CatchUpTimeout, after the
	// revoke), no unreachable site may be writable: the failover is
	// abandoned and the old primary, which holds everything, is made
	// writable again.
	ReasonCatchUpTimeout Reason = "catch-up-timeout"
	// ReasonTargetLost: the failover or switchover in
	// flight has no target any more (it became unreachable, its replication
	// broke, no candidate is eligible) and its deadline (MaxLagWait for a
	// switchover, else CatchUpTimeout, after the revoke) passed; its old
	// primary is reachable and fenced, and no unreachable site may be
	// writable (never made so by failoverd, or deposed with a proof): the
	// failover is abandoned and the old primary made writable again.
	ReasonTargetLost Reason = "target-lost"
	// ReasonCatchUpTimeoutBlocked: as ReasonCatchUpTimeout or
	// ReasonTargetLost, but the old primary cannot be re-asserted (it lacks
	// a peer's transactions, may not be primary, or an unreachable site may
	// be writable): the group stays revoked until a human decides.
	ReasonCatchUpTimeoutBlocked Reason = "catch-up-timeout-blocked"
	// ReasonSemiSyncDetachReplicas: semi-sync fencing; the
	// replicas that could still acknowledge the unreachable old primary's
	// commits stop their IO threads (then the semi-sync proof holds).
	ReasonSemiSyncDetachReplicas Reason = "semisync-detach-replicas"
	// ReasonResumeCatchUp: the old primary is back and fenced but
	// the target's IO thread from it was stopped (semi-sync fencing): it
	// replicates again to receive what it lacks.
	ReasonResumeCatchUp Reason = "resume-catch-up"
	// ReasonSemiSyncUnsafe: semi-sync fencing is configured but the
	// healthy primary's semi-sync settings cannot back the semi-sync proof
	// (a failover would then wait for a fence read-back or mysqld down).
	ReasonSemiSyncUnsafe Reason = "semisync-settings-unsafe"
	// ReasonAckHolderUnreachable: the old primary is unreachable and
	// more of its replicas are unreachable than its semi-sync wait count
	// allows (k acknowledgements: at most k-1 may be unaccounted for), so one
	// of them may hold an acknowledged write the target lacks; none is proven
	// to hold nothing newer or confirmed lost by an operator (confirm-fence).
	ReasonAckHolderUnreachable Reason = "ack-holder-unreachable"
	// ReasonTargetWritableWithoutProof: the in-flight target is
	// already writable but no fence proof holds for the old primary.
	ReasonTargetWritableWithoutProof Reason = "target-writable-without-proof"
	// ReasonPublishedTargetUnreachable: a view naming a target was
	// published (the target may have been made writable) and that target
	// is unreachable and not proven fenced: no other site is promoted.
	ReasonPublishedTargetUnreachable Reason = "published-target-unreachable"
	// ReasonPromote: phase 2 with a fence proof.
	ReasonPromote Reason = "promote"
	// ReasonPromoteRetarget: phase 2, the in-flight target is no
	// longer the best candidate; another one is promoted.
	ReasonPromoteRetarget Reason = "promote-retarget"
	// ReasonPromoteResume: the target is already writable (the
	// daemon stopped mid-promotion); finish the idempotent promotion.
	ReasonPromoteResume Reason = "promote-resume"
	// ReasonPromoteNoFencing: fencing "none": promoted without
	// proof; acknowledged writes on the old primary may be lost.
	ReasonPromoteNoFencing Reason = "promote-no-fencing"

	// ReasonSwitchover: operator switchover accepted: phase 1.
	ReasonSwitchover Reason = "switchover"
	// ReasonSwitchoverInFlight: refused, a failover is in flight.
	ReasonSwitchoverInFlight Reason = "switchover-refused-in-flight"
	// ReasonSwitchoverGroupState: refused, the group has no single
	// recorded primary to switch from (split brain, no primary, unknown...).
	ReasonSwitchoverGroupState Reason = "switchover-refused-group-state"
	// ReasonSwitchoverTargetIsPrimary: refused, the target already is
	// the primary.
	ReasonSwitchoverTargetIsPrimary Reason = "switchover-refused-target-is-primary"
	// ReasonSwitchoverBadTarget: refused, the target is unknown,
	// dr-only, operator-fenced, known-diverged, not read-only or broken.
	ReasonSwitchoverBadTarget Reason = "switchover-refused-bad-target"
	// ReasonSwitchoverTargetBehind: refused, the target lacks
	// transactions another replica has and cannot get them from the primary
	// (it does not stream from it, or only that replica holds them).
	ReasonSwitchoverTargetBehind Reason = "switchover-refused-target-behind"
	// ReasonSwitchoverCooldown: refused, the last automatic failover
	// was within failoverCooldown and the request is not forced.
	ReasonSwitchoverCooldown Reason = "switchover-refused-cooldown"
	// ReasonSwitchoverPaused: refused, the group is paused.
	ReasonSwitchoverPaused Reason = "switchover-refused-paused"

	// ReasonPausedWithheld: the group is paused and the decision it
	// would have carried out (Decision.Withheld) writes to a server: only
	// observing, reporting and routing repair go on until the pause ends.
	ReasonPausedWithheld Reason = "paused-withheld"

	// Group Replication (replication: group; DecideGroupReplication). The
	// group elects its primary; these reasons only ever follow it or wait.

	// ReasonGroupHealthy: a quorate verdict names the recorded active site
	// primary and every configured member is ONLINE in its view.
	ReasonGroupHealthy Reason = "group-healthy"
	// ReasonGroupMemberNotOnline: a quorate verdict names the recorded
	// active site primary, but a configured member is not ONLINE in the
	// view (unreached, recovering, expelled, outvoted).
	ReasonGroupMemberNotOnline Reason = "group-member-not-online"
	// ReasonGroupAdoptPrimary: no active site recorded yet: the primary a
	// quorate verdict names is adopted (new epoch naming it).
	ReasonGroupAdoptPrimary Reason = "group-adopt-primary"
	// ReasonGroupPrimaryElected: a quorate verdict names another primary
	// than the recorded active site: the group elected it, failoverd
	// follows (new epoch naming it; routing, cache, DNS, readers move).
	ReasonGroupPrimaryElected Reason = "group-primary-elected"
	// ReasonGroupNoQuorum: the group lost its majority (grview no-quorum):
	// it takes no writes; routing stays, nothing destructive is done.
	ReasonGroupNoQuorum Reason = "group-no-quorum"
	// ReasonGroupUnconfirmed: no majority of the members agrees on a view
	// (a view change under way, too few members reached): routing stays.
	ReasonGroupUnconfirmed Reason = "group-unconfirmed"
	// ReasonGroupNoPrimary: the group's quorate view has no single ONLINE
	// primary (an election under way): routing stays.
	ReasonGroupNoPrimary Reason = "group-no-primary"
	// ReasonGroupPrimaryNotConfigured: the primary the quorate view names
	// is no configured site: routing cannot name it and stays.
	ReasonGroupPrimaryNotConfigured Reason = "group-primary-not-configured"
	// ReasonGroupSwitchover: an operator's switchover of a Group
	// Replication group is accepted: the group is asked to elect the target
	// (group_replication_set_as_primary); routing follows its next quorate
	// view naming it (ReasonGroupPrimaryElected).
	ReasonGroupSwitchover Reason = "group-switchover"
	// ReasonSwitchoverGroupNoQuorum: a Group Replication switchover is
	// refused: the last verdict has no quorate view.
	ReasonSwitchoverGroupNoQuorum Reason = "switchover-refused-group-no-quorum"
	// ReasonSwitchoverTargetNotOnline: a Group Replication switchover is
	// refused: the target is not ONLINE in the group's quorate view.
	ReasonSwitchoverTargetNotOnline Reason = "switchover-refused-target-not-online"
)

// Class sorts a Reason by what it means for an operator: the status
// snapshot's group class, the metrics' class label and the alerts built on
// it.
type Class string

// Classes of reasons.
const (
	ClassHealthy       Class = "healthy"        // nothing to do
	ClassDegraded      Class = "degraded"       // the primary serves; a replica needs attention
	ClassWaiting       Class = "waiting"        // transient: probes, debouncing, a lease, catch-up
	ClassActing        Class = "acting"         // a failover, switchover, fence or rejoin is being carried out
	ClassSplitBrain    Class = "split-brain"    // more than one site may accept writes
	ClassNoPrimary     Class = "no-primary"     // no site accepts writes and none can be promoted yet
	ClassBlocked       Class = "blocked"        // a failover is needed but a rule refuses it
	ClassAwaitingHuman Class = "awaiting-human" // only an operator can move the group on
	ClassInvalid       Class = "invalid"        // configuration or state inconsistent
)

// Classes returns every Class, in the order above.
func Classes() []Class {
	return []Class{ClassHealthy, ClassDegraded, ClassWaiting, ClassActing, ClassSplitBrain,
		ClassNoPrimary, ClassBlocked, ClassAwaitingHuman, ClassInvalid}
}

// ReasonInfo is one row of the reason table: what a Reason means.
type ReasonInfo struct {
	Reason Reason
	// Action is the Action every decision with Reason carries.
	Action Action
	// Class is what such a decision means for an operator.
	Class Class
	// Summary says in one line when Reason is given.
	Summary string
}

// reasonTable is the one definition of every Reason's action, class and
// summary: the status snapshot, the metrics labels and the docs test read it
// (TestReasonTableIsComplete, TestDocsListEveryReasonWithItsActionAndClass).
var reasonTable = []ReasonInfo{
	{ReasonInvalidPolicy, Alert, ClassInvalid, "the policy failed Validate"},
	{ReasonInvalidInput, Alert, ClassInvalid, "observations or persisted state are inconsistent (sites, names, references, GTID flavors, in-flight)"},

	{ReasonHealthy, None, ClassHealthy, "one writable primary, every replica follows it"},
	{ReasonDegradedReplicaUnreachable, Alert, ClassDegraded, "the primary is fine, some replica is unreachable"},
	{ReasonDegradedReplicationBroken, Alert, ClassDegraded, "a replica's replication stopped on an error"},
	{ReasonDegradedNotFollowing, Alert, ClassDegraded, "a replica does not follow the primary and cannot be rejoined automatically"},
	{ReasonApplierBlocked, Alert, ClassDegraded, "the primary is fine but a replica's applier waits for semi-sync acknowledgements or leaves what it received unapplied"},
	{ReasonSemiSyncSourceOnReplica, DisableSemiSyncSource, ClassActing, "a read-only replica has the semi-sync source side on: it is switched off there"},
	// The primary serves reads and holds its writes until a replica
	// acknowledges: its own alert says so (FailoverdWritesStalledAwaitingAck).
	{ReasonWritesStalledAwaitingAck, Alert, ClassDegraded, "commits on the primary have waited for a semi-sync acknowledgement longer than ackStallWindow"},
	{ReasonAdoptPrimary, AdoptPrimary, ClassActing, "no active site recorded yet: the sole writable site is adopted"},
	{ReasonUnexpectedPrimary, Alert, ClassDegraded, "the sole writable site is not the recorded active site (changed outside failoverd)"},
	{ReasonUnexpectedPrimaryFenced, FenceSites, ClassActing, "the sole writable site is not the recorded active site, which our last failover promoted: it is fenced"},
	{ReasonRejoin, Rejoin, ClassActing, "read-only sites not replicating from the primary, whose sets it contains, are repointed to it"},
	{ReasonMarkDiverged, MarkDiverged, ClassActing, "read-only sites not replicating from the primary hold transactions it lacks"},
	{ReasonDivergenceRepaired, ClearDiverged, ClassActing, "a known-diverged site's history is now contained in the primary's: it may rejoin"},
	{ReasonRecloneUnacknowledgedTail, RecloneSite, ClassActing, "the old primary holds only transactions no client saw committed: it is re-seeded from the primary"},

	{ReasonWaitingForProbes, None, ClassWaiting, "some site has no debounced state yet"},
	{ReasonPrimaryDebouncing, None, ClassWaiting, "the primary fails probes but has not reached the failure threshold"},
	{ReasonAwaitingWitnesses, None, ClassWaiting, "the daemon just gave the primary up but a replica read before that still streamed from it: waiting for its next probe"},
	{ReasonTotalLoss, Alert, ClassNoPrimary, "every site is unreachable"},
	{ReasonPrimaryPartitioned, Alert, ClassDegraded, "the daemon cannot reach the primary but a replica still streams from it: never fail over"},
	{ReasonUncorroborated, Alert, ClassBlocked, "the primary is unreachable and no reachable replica corroborates it: automatic failover refused"},

	{ReasonNoPrimaryNoActiveSite, Alert, ClassNoPrimary, "nobody is writable and no active site is recorded to re-assert"},
	{ReasonNoPrimaryNotAllReachable, Alert, ClassNoPrimary, "nobody is writable and an unreachable site may be writable: re-asserting could make two primaries"},
	{ReasonNoPrimaryTargetIneligible, Alert, ClassNoPrimary, "nobody is writable and the active site is dr-only, operator-fenced or known-diverged"},
	{ReasonNoPrimaryTargetBehind, Alert, ClassNoPrimary, "nobody is writable and the active site lacks transactions a peer has, or its promotion set"},
	{ReasonPromotionSettling, None, ClassWaiting, "nobody is writable yet, but the site our last failover promoted is within the settle window"},
	{ReasonReassertPrimary, ReassertPrimary, ClassActing, "every reachable site is read-only and the active site has every transaction: it is made writable again"},

	{ReasonSplitBrainKeepPromoted, FenceSites, ClassSplitBrain, "several writable sites: the target of our last failover stays, the others are fenced"},
	{ReasonSplitBrainKeepWinner, FenceSites, ClassSplitBrain, "several writable sites, no failover history: the winner stays, the others are fenced"},
	{ReasonSplitBrainAlertOnly, Alert, ClassSplitBrain, "several writable sites and no safe winner"},

	{ReasonEscalationHalted, Alert, ClassAwaitingHuman, "automatic failover is halted until a human acknowledges"},
	{ReasonCooldown, Alert, ClassBlocked, "the primary is down but the last failover is more recent than failoverCooldown"},
	{ReasonEscalationLimit, HaltFailover, ClassBlocked, "too many automatic failovers within the escalation window: automatic failover is halted"},
	{ReasonNoEligibleCandidate, Alert, ClassBlocked, "no reachable primary-candidate replica passes the candidate filters"},
	{ReasonIncomparableCandidates, Alert, ClassBlocked, "no candidate's GTID set contains every other candidate's"},
	{ReasonCandidateLacksTransactions, Alert, ClassBlocked, "the best candidate lacks transactions another reachable site has"},
	{ReasonFailoverRevoke, RevokeEpoch, ClassActing, "corroborated primary down: the epoch is revoked (phase 1)"},

	{ReasonFenceWritableDuringFailover, FenceSites, ClassActing, "a failover is in flight and a site other than its target is writable: it is fenced"},
	{ReasonFenceOldPrimary, FenceSites, ClassActing, "the old primary is reachable but its fence was not read back at the revoked epoch yet"},
	{ReasonAwaitLeaseExpiry, None, ClassWaiting, "sidecar fencing: the old primary's lease deadline has not passed yet"},
	{ReasonAwaitFenceConfirmation, Alert, ClassAwaitingHuman, "the old primary is unreachable and not seen down: waits until it answers or a human confirms it fenced"},
	{ReasonAwaitCatchUp, None, ClassWaiting, "the target lacks transactions of the fenced old primary and is receiving them"},
	{ReasonCatchUpTimeout, ReassertPrimary, ClassActing, "the target did not catch up before the deadline: the fenced old primary is made writable again"},
	{ReasonTargetLost, ReassertPrimary, ClassActing, "the in-flight target is lost and the deadline passed: the fenced old primary is made writable again"},
	{ReasonCatchUpTimeoutBlocked, Alert, ClassBlocked, "the failover cannot go on and the old primary cannot be re-asserted: a human decides"},
	{ReasonSemiSyncDetachReplicas, StopReplicaIO, ClassActing, "semi-sync fencing: the replicas that could acknowledge the old primary stop their IO threads"},
	{ReasonResumeCatchUp, Rejoin, ClassActing, "the target's IO thread from the fenced old primary was stopped: it replicates again to catch up"},
	{ReasonSemiSyncUnsafe, Alert, ClassDegraded, "semi-sync fencing is configured but the primary's semi-sync settings cannot back the semi-sync proof"},
	{ReasonAckHolderUnreachable, Alert, ClassAwaitingHuman, "an unreachable replica may hold an acknowledged write the target lacks: waits until it answers or a human confirms it lost"},
	{ReasonTargetWritableWithoutProof, Alert, ClassBlocked, "the in-flight target is already writable but no fence proof holds for the old primary"},
	{ReasonPublishedTargetUnreachable, Alert, ClassBlocked, "a published target is unreachable and not proven fenced: no other site is promoted"},
	{ReasonPromote, Promote, ClassActing, "phase 2 with a fence proof: the target is promoted"},
	{ReasonPromoteRetarget, Promote, ClassActing, "phase 2: the in-flight target is no longer the best candidate; another one is promoted"},
	{ReasonPromoteResume, Promote, ClassActing, "the target is already writable (the daemon stopped mid-promotion): the promotion is finished"},
	{ReasonPromoteNoFencing, Promote, ClassActing, "fencing none: promoted without proof; acknowledged writes on the old primary may be lost"},

	{ReasonSwitchover, RevokeEpoch, ClassActing, "operator switchover accepted: the epoch is revoked (phase 1)"},
	// Refused switchovers answer the request; never a group's standing decision.
	{ReasonSwitchoverInFlight, None, ClassActing, "switchover refused: a failover is in flight"},
	{ReasonSwitchoverGroupState, None, ClassActing, "switchover refused: the group has no single recorded primary to switch from"},
	{ReasonSwitchoverTargetIsPrimary, None, ClassActing, "switchover refused: the target already is the primary"},
	{ReasonSwitchoverBadTarget, None, ClassActing, "switchover refused: the target is unknown, dr-only, operator-fenced, diverged, not read-only or broken"},
	{ReasonSwitchoverTargetBehind, None, ClassActing, "switchover refused: the target lacks transactions it cannot get from the primary"},
	{ReasonSwitchoverCooldown, None, ClassActing, "switchover refused: the last automatic failover is within failoverCooldown and the request is not forced"},
	{ReasonSwitchoverPaused, None, ClassActing, "switchover refused: the group is paused"},

	{ReasonPausedWithheld, Alert, ClassBlocked, "the group is paused: a decision that writes to a server (failover, fence, re-assert, rejoin...) is withheld until the pause ends"},

	{ReasonGroupHealthy, None, ClassHealthy, "Group Replication: the quorate view names the recorded primary and every member is ONLINE"},
	{ReasonGroupMemberNotOnline, Alert, ClassDegraded, "Group Replication: the quorate view names the recorded primary; a configured member is not ONLINE in it"},
	{ReasonGroupAdoptPrimary, AdoptPrimary, ClassActing, "Group Replication: no active site recorded yet: the primary of the quorate view is adopted"},
	{ReasonGroupPrimaryElected, AdoptPrimary, ClassActing, "Group Replication: the group elected another primary: a new epoch names it and routing follows"},
	{ReasonGroupNoQuorum, Alert, ClassBlocked, "Group Replication: the group lost its majority: it takes no writes, routing stays, nothing destructive is done"},
	{ReasonGroupUnconfirmed, Alert, ClassWaiting, "Group Replication: no majority of members agrees on a view (view change, members unreached): routing stays"},
	{ReasonGroupNoPrimary, Alert, ClassNoPrimary, "Group Replication: the quorate view has no single ONLINE primary (election under way): routing stays"},
	{ReasonGroupPrimaryNotConfigured, Alert, ClassBlocked, "Group Replication: the elected primary is no configured site: routing stays"},
	{ReasonGroupSwitchover, None, ClassActing, "Group Replication: switchover accepted: the group is asked to elect the target; routing follows its next quorate view"},
	{ReasonSwitchoverGroupNoQuorum, None, ClassActing, "switchover refused: the Group Replication group has no quorate view"},
	{ReasonSwitchoverTargetNotOnline, None, ClassActing, "switchover refused: the target is not ONLINE in the group's quorate view"},
}

// reasonIndex finds a reason's row in reasonTable.
var reasonIndex = func() map[Reason]ReasonInfo {
	m := make(map[Reason]ReasonInfo, len(reasonTable))
	for _, ri := range reasonTable {
		m[ri.Reason] = ri
	}
	return m
}()

// ReasonTable returns every reason's row, grouped by situation.
func ReasonTable() []ReasonInfo { return slices.Clone(reasonTable) }

// ActionOf returns the Action every decision with reason r carries, and
// false for an unknown reason.
func ActionOf(r Reason) (Action, bool) {
	ri, ok := reasonIndex[r]
	return ri.Action, ok
}

// ClassOf returns the Class of reason r; an unknown reason is
// ClassInvalid (it can only come from a bug or a newer release).
func ClassOf(r Reason) Class {
	if ri, ok := reasonIndex[r]; ok {
		return ri.Class
	}
	return ClassInvalid
}

// Reasons returns every Reason, sorted.
func Reasons() []Reason { return slices.Sorted(maps.Keys(reasonIndex)) }
