// Package sitepair is failoverd's pure group decision core: given what the
// daemon observed about every site of a group ([Observed]), what it persisted
// ([Persisted]) and the group's [Policy], [Decide] returns exactly one
// [Decision]: a typed [Action] with its targets, a machine-readable [Reason]
// and a human message. [DecideSwitchover] is the same for an operator's
// planned switchover, and [Apply] computes the persisted state after a
// decision was carried out.
//
// The package performs no I/O and never reads the clock: "now" is a
// parameter, and every instant it compares (now, InFlight.RevokedAt,
// LastFailoverAt, FailoverHistory) comes from the daemon's own clock. No
// decision compares timestamps taken on different machines; replica-side
// ages (lag, heartbeat age) are durations measured by the replica itself.
//
// # Fence before promote
//
// A failover is two decisions. Phase 1, [RevokeEpoch], bumps the epoch and
// clears the active site so that no sidecar lease can be renewed and every
// site is told to stay read-only. Phase 2, [Promote], is returned by a later
// Decide call only while the revoked state is persisted and a [FenceProof]
// shows the old primary cannot accept writes any more:
//
//   - [ProofFenceConfirmed]: read_only=ON was read back from it at the
//     revoked epoch;
//   - [ProofPrimaryDown]: its mysqld refused Policy.RefusedProbes
//     consecutive probes and the replicas corroborate (host up, server
//     down; sites must start with read_only=ON in their configuration);
//   - [ProofSidecarFenced] (fencing "sidecar"): its sidecar reported, at the
//     revoked epoch, that it fenced or killed mysqld or found it down;
//   - [ProofLeaseExpired] (fencing "sidecar"): the sidecar's lease, bounded
//     by every renewal the daemon can account for (its reports, the peers'
//     served views, the daemon's own start), has passed
//     [Policy.LeaseDeadline];
//   - [ProofSemiSync] (fencing "semisync"): its semi-sync never falls back
//     to async and no replica can acknowledge its commits any more;
//   - [ProofOperatorConfirmed]: the failover waited at
//     await-fence-confirmation and a human confirmed the unreachable old
//     primary dead ([ConfirmFence]), for this failover and epoch only;
//   - [ProofNoFencing] (fencing "none" only): no proof at all, a durability
//     risk spelled out in the reason.
//
// The full detection and decision tables and the invariants checked by the
// exhaustive model test are in docs/decisions.md.
//
// # Where things are
//
// Inputs and outputs:
//   - observation.go: [Observed], [SiteObservation] and what sidecars and
//     semi-sync report;
//   - persisted.go: [Persisted], [InFlight], [FenceConfirmation];
//   - policy.go: [Policy], fencing modes, defaults, [Policy.Validate];
//   - decision.go: [Decision], [Action], [FenceProof], [Divergence];
//   - reasons.go: every [Reason] and the action it belongs to.
//
// The rules [Decide] applies:
//   - decide.go: [Decide] itself (validate the input, run the group
//     detection, dispatch on it) and the helpers every rule uses;
//   - failover.go: phase 1 (the revoke) and phase 2 (the failover in
//     flight, up to [Promote]);
//   - proofs.go: the fence proofs;
//   - candidates.go: which sites may be promoted, what one holds that
//     another lacks, and which candidate is chosen;
//   - catchup.go: what a target must hold before it is promoted (catch-up,
//     the holders of semi-sync acknowledged writes);
//   - recovery.go: a primary back without a failover (the old primary given
//     back at the catch-up deadline, the recorded primary re-asserted);
//   - splitbrain.go: several writable sites, or one that is not the
//     recorded primary;
//   - healthy.go: the recorded primary writable (adoption, rejoin,
//     divergence, degraded and stalled replicas);
//   - rejoin.go: the rejoin policy (recloning an old primary whose extra
//     transactions no client saw committed).
//
// Outside Decide: switchover.go ([DecideSwitchover]), apply.go ([Apply],
// [Acknowledge]), confirm.go ([ConfirmFence]) and reclone.go
// ([StartReclone], [FinishReclone]).
package sitepair
