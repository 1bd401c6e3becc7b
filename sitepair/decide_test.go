package sitepair

import (
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/statemachine"
)

func ptr[T any](v T) *T { return &v }

// TestDecideTwoSites walks every row of the decision matrix (docs/decisions.md)
// for a two-site group a, b.
func TestDecideTwoSites(t *testing.T) {
	healthyPair := group(site("a", W), site("b", RO, follows("a")))
	downPair := group(site("a", UR), site("b", RO, lost("a")))
	tests := []decideCase{
		{name: "all read-only but the recorded primary is becoming writable: wait, do not re-assert again",
			obs: group(site("a", RO, bounce), site("b", RO, follows("a"))), st: active("a"),
			want: want{action: None, reason: ReasonWaitingForProbes}},
		// Healthy and degraded.
		{name: "healthy: a writable, b follows", obs: healthyPair, st: active("a"),
			want: want{action: None, reason: ReasonHealthy, epoch: 1}},
		{name: "degraded: replica unreachable", obs: group(site("a", W), site("b", UR)), st: active("a"),
			want: want{action: Alert, reason: ReasonDegradedReplicaUnreachable}},
		{name: "degraded: replica replication broken", obs: group(site("a", W), site("b", RO, follows("a"), broken)), st: active("a"),
			want: want{action: Alert, reason: ReasonDegradedReplicationBroken}},
		{name: "degraded: replica IO thread disconnected", obs: group(site("a", W), site("b", RO, lost("a"))), st: active("a"),
			want: want{action: Alert, reason: ReasonDegradedNotFollowing}},
		{name: "first start adopts the only writable site", obs: healthyPair, st: Persisted{},
			want: want{action: AdoptPrimary, reason: ReasonAdoptPrimary, target: "a", epoch: 1}},
		{name: "unexpected primary: b writable while a is recorded", obs: group(site("a", RO, follows("b")), site("b", W)), st: active("a"),
			want: want{action: Alert, reason: ReasonUnexpectedPrimary}},
		// Simulation seed 184: a hung old primary came back still writable
		// after the site we promoted died.
		{name: "unexpected primary after our failover: the writable deposed primary is fenced", obs: group(site("a", W), site("b", UR)), st: promoted("b"),
			want: want{action: FenceSites, reason: ReasonUnexpectedPrimaryFenced, fence: []string{"a"}}},
		{name: "unexpected primary after our failover, recorded primary reachable: fenced too", obs: group(site("a", W), site("b", RO)), st: promoted("b"),
			want: want{action: FenceSites, reason: ReasonUnexpectedPrimaryFenced, fence: []string{"a"}}},
		{name: "waiting for probes: replica unknown", obs: group(site("a", W), site("b", UK)), st: active("a"),
			want: want{action: None, reason: ReasonWaitingForProbes}},
		{name: "primary debouncing: failed probes below threshold", obs: group(site("a", W, bounce), site("b", RO, follows("a"))), st: active("a"),
			want: want{action: None, reason: ReasonPrimaryDebouncing}},

		// Primary down and its blockers.
		{name: "corroborated primary down: revoke epoch to fail over to b", obs: downPair, st: active("a"),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "b", fence: []string{"a"}, epoch: 2}},
		{name: "daemon-only: down even though b still streams", obs: group(site("a", UR), site("b", RO, follows("a"))), st: active("a"),
			pol:  ptr(polWith(func(p *Policy) { p.Detection = statemachine.DaemonOnly })),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "b", fence: []string{"a"}, epoch: 2}},
		{name: "partition: daemon lost a but b still streams from it", obs: group(site("a", UR), site("b", RO, follows("a"))), st: active("a"),
			want: want{action: Alert, reason: ReasonPrimaryPartitioned}},
		// b was read right after a crashed, before its receiver saw the
		// connection close: that read predates the probe that gave a up.
		{name: "awaiting witnesses: b streamed when read before a was given up", obs: group(site("a", UR, gaveUp(now)), site("b", RO, follows("a"), readAt(now.Add(-time.Millisecond)))), st: active("a"),
			want: want{action: None, reason: ReasonAwaitingWitnesses}},
		{name: "partition: b streams when read after a was given up", obs: group(site("a", UR, gaveUp(now)), site("b", RO, follows("a"), readAt(now))), st: active("a"),
			want: want{action: Alert, reason: ReasonPrimaryPartitioned}},
		{name: "uncorroborated: the only replica does not follow a", obs: group(site("a", UR), site("b", RO)), st: active("a"),
			want: want{action: Alert, reason: ReasonUncorroborated}},
		{name: "total loss", obs: group(site("a", UR), site("b", UR)), st: active("a"),
			want: want{action: Alert, reason: ReasonTotalLoss}},
		{name: "primary down inside the cooldown", obs: downPair, st: with(promoted("a"), automaticAt(now.Add(-time.Minute))),
			want: want{action: Alert, reason: ReasonCooldown}},
		{name: "primary down exactly at the end of the cooldown fails over", obs: downPair,
			st:   with(promoted("a"), automaticAt(now.Add(-DefaultPolicy().FailoverCooldown))),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "b", fence: []string{"a"}, epoch: 3}},
		// A planned switchover does not arm the cooldown: a crash minutes
		// after it must still fail over.
		{name: "primary down a minute after a planned switchover fails over", obs: downPair,
			st:   with(promoted("a"), func(p *Persisted) { p.LastFailoverAt = now.Add(-time.Minute) }),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "b", fence: []string{"a"}, epoch: 3}},
		{name: "acknowledge clears the cooldown", obs: downPair,
			st:   Acknowledge(with(promoted("a"), automaticAt(now.Add(-time.Minute)))),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "b", fence: []string{"a"}, epoch: 3}},
		{name: "primary down after three failovers in the window halts", obs: downPair,
			st: with(promoted("a"), func(p *Persisted) {
				p.FailoverHistory = []time.Time{now.Add(-50 * time.Minute), now.Add(-40 * time.Minute), now.Add(-30 * time.Minute)}
				p.LastFailoverAt = now.Add(-30 * time.Minute)
			}),
			want: want{action: HaltFailover, reason: ReasonEscalationLimit}},
		{name: "failovers older than the window do not count", obs: downPair,
			st: with(promoted("a"), func(p *Persisted) {
				p.FailoverHistory = []time.Time{now.Add(-3 * time.Hour), now.Add(-2 * time.Hour), now.Add(-30 * time.Minute)}
				p.LastFailoverAt = now.Add(-30 * time.Minute)
			}),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "b", fence: []string{"a"}}},
		{name: "primary down while escalation is halted", obs: downPair, st: with(active("a"), func(p *Persisted) { p.EscalationHalted = true }),
			want: want{action: Alert, reason: ReasonEscalationHalted}},
		{name: "primary down, only replica is dr-only", obs: group(site("a", UR), site("b", RO, lost("a"), dr)), st: active("a"),
			want: want{action: Alert, reason: ReasonNoEligibleCandidate}},
		{name: "primary down, only replica operator-fenced", obs: downPair, st: with(active("a"), func(p *Persisted) { p.OperatorFenced = []string{"b"} }),
			want: want{action: Alert, reason: ReasonNoEligibleCandidate}},
		{name: "primary down, only replica known-diverged", obs: downPair, st: with(active("a"), func(p *Persisted) { p.Diverged = map[string]gtid.Set{"b": errant("b", 1)} }),
			want: want{action: Alert, reason: ReasonNoEligibleCandidate}},
		{name: "primary down, only replica's replication broken: no corroboration", obs: group(site("a", UR), site("b", RO, lost("a"), broken)), st: active("a"),
			want: want{action: Alert, reason: ReasonUncorroborated}},
		{name: "primary down, only replica over max lag", obs: group(site("a", UR), site("b", RO, lost("a"), lag(time.Minute))), st: active("a"),
			want: want{action: Alert, reason: ReasonNoEligibleCandidate}},
		{name: "primary down, replica lag exactly at max lag is eligible", obs: group(site("a", UR), site("b", RO, lost("a"), lag(30*time.Second))), st: active("a"),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "b", fence: []string{"a"}}},

		// In flight (phase 2).
		{name: "in flight, sidecar lease not expired: wait", obs: leased(downPair, leasePending), st: revoked("a", "b", leasePending),
			want: want{action: None, reason: ReasonAwaitLeaseExpiry}},
		{name: "in flight, one nanosecond before the lease deadline: wait", obs: leased(downPair, now.Add(-DefaultPolicy().LeaseTimeout-LeaseMargin+time.Nanosecond)),
			st:   revoked("a", "b", now.Add(-DefaultPolicy().LeaseTimeout-LeaseMargin+time.Nanosecond)),
			want: want{action: None, reason: ReasonAwaitLeaseExpiry}},
		{name: "in flight, exactly at the lease deadline: promote", obs: leased(downPair, now.Add(-DefaultPolicy().LeaseTimeout-LeaseMargin)),
			st:   revoked("a", "b", now.Add(-DefaultPolicy().LeaseTimeout-LeaseMargin)),
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofLeaseExpired, epoch: 3}},
		{name: "in flight, fence read back at this epoch: promote", obs: group(site("a", UR, fencedAt(2)), site("b", RO, lost("a"))), st: revoked("a", "b", leasePending),
			want: want{action: Promote, reason: ReasonPromote, target: "b", proof: ProofFenceConfirmed}},
		{name: "in flight, fence read back at an older epoch does not count", obs: leased(group(site("a", UR, fencedAt(1)), site("b", RO, lost("a"))), leasePending), st: revoked("a", "b", leasePending),
			want: want{action: None, reason: ReasonAwaitLeaseExpiry}},
		{name: "in flight, old primary's mysqld refused: promote", obs: group(site("a", UR, down), site("b", RO, lost("a"))), st: revoked("a", "b", leasePending),
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofPrimaryDown}},
		{name: "in flight, old primary's mysqld refused but a replica read streaming before it was given up: no proof yet", obs: group(site("a", UR, down, gaveUp(now)), site("b", RO, lost("a")), site("c", RO, follows("a"), readAt(now.Add(-time.Millisecond)))), st: revoked("a", "b", leasePending),
			pol:  ptr(polWith(func(p *Policy) { p.Fencing = FencingConfirmed })),
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "in flight, confirmed fencing, old primary unreachable: blocks", obs: downPair, st: revoked("a", "b", leasePending),
			pol:  ptr(polWith(func(p *Policy) { p.Fencing = FencingConfirmed })),
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "in flight, confirmed fencing ignores an expired lease", obs: downPair, st: revoked("a", "b", leaseExpired),
			pol:  ptr(polWith(func(p *Policy) { p.Fencing = FencingConfirmed })),
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "in flight, confirmed fencing with mysqld down: promote", obs: group(site("a", UR, down), site("b", RO, lost("a"))), st: revoked("a", "b", leasePending),
			pol:  ptr(polWith(func(p *Policy) { p.Fencing = FencingConfirmed })),
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofPrimaryDown}},
		{name: "in flight, confirmed fencing, an operator confirmed the old primary dead: promote", obs: downPair, st: confirmedDead(revoked("a", "b", leasePending), "a", 2),
			pol:  ptr(polWith(func(p *Policy) { p.Fencing = FencingConfirmed })),
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofOperatorConfirmed, epoch: 3}},
		{name: "in flight, an operator confirmation made at another epoch does not count", obs: downPair, st: confirmedDead(revoked("a", "b", leasePending), "a", 1),
			pol:  ptr(polWith(func(p *Policy) { p.Fencing = FencingConfirmed })),
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "in flight, an operator confirmation of another site does not count", obs: downPair, st: confirmedDead(revoked("a", "b", leasePending), "b", 2),
			pol:  ptr(polWith(func(p *Policy) { p.Fencing = FencingConfirmed })),
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "in flight, confirmed dead but answering again read-only: fence it and read it back", obs: group(site("a", RO), site("b", RO, follows("a"))), st: confirmedDead(revoked("a", "b", leasePending), "a", 2),
			want: want{action: FenceSites, reason: ReasonFenceOldPrimary, fence: []string{"a"}}},
		{name: "in flight, confirmed dead but back writable: fence it", obs: group(site("a", W), site("b", RO, follows("a"))), st: confirmedDead(revoked("a", "b", leasePending), "a", 2),
			want: want{action: FenceSites, reason: ReasonFenceWritableDuringFailover, fence: []string{"a"}}},
		{name: "in flight, a fence read back outranks an operator confirmation", obs: group(site("a", UR, fencedAt(2)), site("b", RO, lost("a"))), st: confirmedDead(revoked("a", "b", leasePending), "a", 2),
			want: want{action: Promote, reason: ReasonPromote, target: "b", proof: ProofFenceConfirmed}},
		{name: "in flight, no fencing: promote flagged as a durability risk", obs: downPair, st: revoked("a", "b", leasePending),
			pol:  ptr(polWith(func(p *Policy) { p.Fencing = FencingNone })),
			want: want{action: Promote, reason: ReasonPromoteNoFencing, target: "b", fence: []string{"a"}, proof: ProofNoFencing}},
		{name: "in flight, old primary back writable: fence it", obs: group(site("a", W), site("b", RO, follows("a"))), st: revoked("a", "b", leaseExpired),
			want: want{action: FenceSites, reason: ReasonFenceWritableDuringFailover, fence: []string{"a"}}},
		{name: "in flight, old primary back read-only but not fenced yet: fence it", obs: group(site("a", RO), site("b", RO, follows("a"))), st: revoked("a", "b", leasePending),
			want: want{action: FenceSites, reason: ReasonFenceOldPrimary, fence: []string{"a"}}},
		{name: "in flight, fenced old primary ahead, target receiving: wait for catch-up",
			obs: group(site("a", RO, fencedAt(2), exec(upto(12))), site("b", RO, follows("a"))), st: revoked("a", "b", leasePending),
			want: want{action: None, reason: ReasonAwaitCatchUp}},
		{name: "in flight, fenced old primary ahead, target not receiving: block",
			obs: group(site("a", RO, fencedAt(2), exec(upto(12))), site("b", RO, lost("a"))), st: revoked("a", "b", leasePending),
			want: want{action: Alert, reason: ReasonCandidateLacksTransactions}},
		{name: "in flight, fenced old primary caught up: promote",
			obs: group(site("a", RO, fencedAt(2), exec(upto(12))), site("b", RO, follows("a"), retr(upto(12)))), st: revoked("a", "b", leasePending),
			want: want{action: Promote, reason: ReasonPromote, target: "b", proof: ProofFenceConfirmed}},
		{name: "in flight, target already writable with a proof: resume", obs: leased(group(site("a", UR), site("b", W)), leaseExpired), st: revoked("a", "b", leaseExpired),
			want: want{action: Promote, reason: ReasonPromoteResume, target: "b", fence: []string{"a"}, proof: ProofLeaseExpired}},
		{name: "in flight, target writable without a proof: alert", obs: group(site("a", UR), site("b", W)), st: revoked("a", "b", leasePending),
			want: want{action: Alert, reason: ReasonTargetWritableWithoutProof}},
		{name: "in flight, target writable, old primary reachable but its fence forgotten (restart): fence it again", obs: group(site("a", RO), site("b", W)), st: revoked("a", "b", leasePending),
			want: want{action: FenceSites, reason: ReasonFenceOldPrimary, fence: []string{"a"}}},
		{name: "in flight, a site still unknown: wait", obs: group(site("a", UK), site("b", RO)), st: revoked("a", "b", leaseExpired),
			want: want{action: None, reason: ReasonWaitingForProbes}},
		{name: "in flight, target unreachable and no other candidate: stay revoked", obs: leased(group(site("a", UR), site("b", UR)), leaseExpired), st: revoked("a", "b", leaseExpired),
			want: want{action: Alert, reason: ReasonNoEligibleCandidate}},

		// Split brain.
		{name: "split brain after our failover to b: fence a", obs: group(site("a", W), site("b", W)), st: promoted("b"),
			want: want{action: FenceSites, reason: ReasonSplitBrainKeepPromoted, target: "b", fence: []string{"a"}}},
		{name: "split brain without history: the recorded primary stays", obs: group(site("a", W), site("b", W, prio(9))), st: active("a"),
			want: want{action: FenceSites, reason: ReasonSplitBrainKeepWinner, target: "a", fence: []string{"b"}}},
		{name: "split brain without history or primary: preferSite stays", obs: group(site("a", W, prio(9)), site("b", W)), st: Persisted{},
			pol:  ptr(polWith(func(p *Policy) { p.PreferSite = "b" })),
			want: want{action: FenceSites, reason: ReasonSplitBrainKeepWinner, target: "b", fence: []string{"a"}}},
		{name: "split brain without history or primary: higher priority stays", obs: group(site("a", W), site("b", W, prio(2))), st: Persisted{},
			want: want{action: FenceSites, reason: ReasonSplitBrainKeepWinner, target: "b", fence: []string{"a"}}},
		{name: "split brain without history or primary: declaration order breaks ties", obs: group(site("a", W), site("b", W)), st: Persisted{},
			want: want{action: FenceSites, reason: ReasonSplitBrainKeepWinner, target: "a", fence: []string{"b"}}},
		{name: "split brain with no eligible winner: alert only", obs: group(site("a", W), site("b", W, dr)), st: with(Persisted{}, func(p *Persisted) { p.OperatorFenced = []string{"a"} }),
			want: want{action: Alert, reason: ReasonSplitBrainAlertOnly}},

		// No primary.
		{name: "no primary: re-assert the recorded primary holding everything", obs: group(site("a", RO), site("b", RO, follows("a"))), st: promoted("a"),
			want: want{action: ReassertPrimary, reason: ReasonReassertPrimary, target: "a", epoch: 3}},
		{name: "no primary: recorded primary lacks a peer's transactions", obs: group(site("a", RO), site("b", RO, follows("a"), retr(upto(11)))), st: promoted("a"),
			want: want{action: Alert, reason: ReasonNoPrimaryTargetBehind}},
		// Simulation seed 184: the deposed old primary b came back with a
		// write of its own after the failover; the recorded primary a never
		// held it.
		{name: "no primary: recorded primary lacks only a peer's own writes: marked diverged",
			obs: group(site("a", RO), site("b", RO, exec(upto(10).Union(errant("b", 2))), withID(errantUUID("b")))), st: promoted("a"),
			want: want{action: MarkDiverged, reason: ReasonMarkDiverged, target: "a"}},
		{name: "no primary: a peer's own writes that a third site received block the re-assert",
			obs: group(site("a", RO), site("b", RO, exec(upto(10).Union(errant("b", 2))), withID(errantUUID("b"))),
				site("c", RO, retr(errant("b", 1)))), st: promoted("a"),
			want: want{action: Alert, reason: ReasonNoPrimaryTargetBehind}},
		{name: "no primary: a peer's unknown identity blocks the re-assert",
			obs: group(site("a", RO), site("b", RO, exec(upto(10).Union(errant("b", 2))))), st: promoted("a"),
			want: want{action: Alert, reason: ReasonNoPrimaryTargetBehind}},
		{name: "no primary: recorded primary lacks its promotion set", obs: group(site("a", RO, exec(upto(8))), site("b", RO, exec(upto(8)))), st: promoted("a"),
			want: want{action: Alert, reason: ReasonNoPrimaryTargetBehind}},
		{name: "no primary and none recorded", obs: group(site("a", RO), site("b", RO)), st: Persisted{},
			want: want{action: Alert, reason: ReasonNoPrimaryNoActiveSite}},
		{name: "no primary: recorded primary operator-fenced", obs: group(site("a", RO), site("b", RO)), st: with(active("a"), func(p *Persisted) { p.OperatorFenced = []string{"a"} }),
			want: want{action: Alert, reason: ReasonNoPrimaryTargetIneligible}},
		// Issue 26 hole 8: an unreachable site failoverd never made writable
		// does not keep the primary read-only; one answering writable does.
		{name: "no primary: an unreachable replica never made writable does not block the re-assert", obs: group(site("a", RO), site("b", UR)), st: active("a"),
			want: want{action: ReassertPrimary, reason: ReasonReassertPrimary, target: "a", epoch: 2}},
		{name: "no primary: an unreachable replica answering writable blocks the re-assert", obs: group(site("a", RO), site("b", UR, bounce)), st: active("a"),
			want: want{action: Alert, reason: ReasonNoPrimaryNotAllReachable}},
		// Right after a promotion the new primary's writable probes are still
		// being debounced while the old primary is down: no false alarm.
		{name: "just promoted b, its writable probes accumulating, old primary down: settling, not an alarm",
			obs: group(site("a", UR), site("b", RO, bounce)), st: justPromoted("b", time.Second),
			want: want{action: None, reason: ReasonPromotionSettling}},
		{name: "just promoted b, before its first writable probe: settling",
			obs: group(site("a", UR), site("b", RO), site("c", RO, follows("b"))), st: justPromoted("b", time.Second),
			want: want{action: None, reason: ReasonPromotionSettling}},
		{name: "promoted b one nanosecond before the settle window ends: settling",
			obs: group(site("a", UR), site("b", RO, bounce)), st: justPromoted("b", DefaultPromotionSettle-time.Nanosecond),
			want: want{action: None, reason: ReasonPromotionSettling}},
		{name: "promoted b a settle window ago and still read-only: a genuine no-primary alert",
			obs: group(site("a", UR), site("b", RO, bounce)), st: justPromoted("b", DefaultPromotionSettle),
			want: want{action: Alert, reason: ReasonNoPrimaryNotAllReachable}},
		{name: "promoted b a settle window ago, every site reachable: re-assert b",
			obs: group(site("a", RO), site("b", RO)), st: justPromoted("b", DefaultPromotionSettle),
			want: want{action: ReassertPrimary, reason: ReasonReassertPrimary, target: "b", epoch: 4}},
		{name: "the settle window follows the policy",
			obs: group(site("a", UR), site("b", RO, bounce)), st: justPromoted("b", 3*time.Second),
			pol:  ptr(polWith(func(p *Policy) { p.PromotionSettle = 2 * time.Second })),
			want: want{action: Alert, reason: ReasonNoPrimaryNotAllReachable}},
		{name: "the recorded primary is not the site we promoted: no settling",
			obs: group(site("a", UR), site("b", RO, bounce)), st: with(justPromoted("b", time.Second), func(p *Persisted) { p.LastFailoverTarget = "a" }),
			want: want{action: Alert, reason: ReasonNoPrimaryNotAllReachable}},
		{name: "a promotion time in the future (clock went back): no settling",
			obs: group(site("a", UR), site("b", RO, bounce)), st: justPromoted("b", -time.Minute),
			want: want{action: Alert, reason: ReasonNoPrimaryNotAllReachable}},

		// Recovery of a former primary.
		{name: "recovery: former primary contained in the new one rejoins", obs: group(site("a", RO), site("b", W, exec(upto(12)))), st: promoted("b"),
			want: want{action: Rejoin, reason: ReasonRejoin, target: "b", repoint: []string{"a"}}},
		{name: "recovery: former primary with extra transactions is marked diverged", obs: group(site("a", RO, exec(upto(10).Union(errant("a", 2)))), site("b", W)), st: promoted("b"),
			want: want{action: MarkDiverged, reason: ReasonMarkDiverged, target: "b"}},
		{name: "recovery: known-diverged former primary is left to a human", obs: group(site("a", RO, exec(errant("a", 2))), site("b", W)),
			st:   with(promoted("b"), func(p *Persisted) { p.Diverged = map[string]gtid.Set{"a": errant("a", 2)} }),
			want: want{action: Alert, reason: ReasonDegradedNotFollowing}},
		{name: "recovery: operator-fenced former primary is left alone", obs: group(site("a", RO), site("b", W)),
			st:   with(promoted("b"), func(p *Persisted) { p.OperatorFenced = []string{"a"} }),
			want: want{action: Alert, reason: ReasonDegradedNotFollowing}},

		// Invalid input.
		{name: "invalid: a single site", obs: group(site("a", W)), st: active("a"),
			want: want{action: Alert, reason: ReasonInvalidInput}},
		{name: "invalid: duplicate site names", obs: group(site("a", W), site("a", RO)), st: active("a"),
			want: want{action: Alert, reason: ReasonInvalidInput}},
		{name: "invalid: unknown role", obs: group(site("a", W), site("b", RO, func(o *SiteObservation) { o.Role = "arbiter" })), st: active("a"),
			want: want{action: Alert, reason: ReasonInvalidInput}},
		{name: "invalid: MySQL and MariaDB sets mixed", obs: group(site("a", W), site("b", RO, exec(gtid.MustParse(gtid.MariaDB, "0-1-10")))), st: active("a"),
			want: want{action: Alert, reason: ReasonInvalidInput}},
		{name: "invalid: recorded primary not in the group", obs: healthyPair, st: active("z"),
			want: want{action: Alert, reason: ReasonInvalidInput}},
		{name: "invalid: in-flight epoch differs from the persisted one", obs: downPair, st: with(revoked("a", "b", leasePending), func(p *Persisted) { p.Epoch = 3 }),
			want: want{action: Alert, reason: ReasonInvalidInput}},
		{name: "invalid: active site recorded while in flight", obs: downPair, st: with(revoked("a", "b", leasePending), func(p *Persisted) { p.ActiveSite = "a" }),
			want: want{action: Alert, reason: ReasonInvalidInput}},
		{name: "invalid policy: unknown fencing mode", obs: healthyPair, st: active("a"),
			pol:  ptr(polWith(func(p *Policy) { p.Fencing = "stonith" })),
			want: want{action: Alert, reason: ReasonInvalidPolicy}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t) })
	}
}

func TestMarkDivergedReportsTheDivergentSet(t *testing.T) {
	extra := errant("a", 2)
	d := Decide(group(site("a", RO, exec(upto(10).Union(extra))), site("b", W)), promoted("b"), DefaultPolicy(), now)
	if len(d.Diverged) != 1 || d.Diverged[0].Site != "a" || !d.Diverged[0].Set.Equal(extra) || d.Diverged[0].Count != 2 {
		t.Fatalf("Diverged = %+v, want a with %s (2 transactions)", d.Diverged, extra)
	}
}

// A MariaDB triple d-s-n is a position, not a count: the count of a
// diverged site's transactions starts where its history forks from the
// primary's (issue 16).
func TestMarkDivergedCountsMariaDBTransactionsExactly(t *testing.T) {
	md := func(s string) gtid.Set { return gtid.MustParse(gtid.MariaDB, s) }
	ids := func(id string) so { return func(o *SiteObservation) { o.ServerID = id } }
	tests := []struct {
		name    string
		a       SiteObservation
		primary string
		want    uint64
		text    string
	}{
		// Server 2 wrote seq 4 while primary, then lost a failover to server
		// 1, which had 1..3 and went on to 10: one errant insert, not 4.
		{"old primary back with one errant insert", site("a", RO, exec(md("0-1-3,0-2-4"))), "0-1-10", 1, "a has 1 transaction b lacks (0-2-4)"},
		{"two unreplicated writes", site("a", RO, exec(md("0-1-10,0-2-12"))), "0-1-15", 2, "a has 2 transactions b lacks"},
		{"three servers in the domain", site("a", RO, exec(md("0-3-5,0-1-8,0-2-9"))), "0-3-5,0-1-12", 1, "a has 1 transaction b lacks"},
		{"a domain the primary lacks", site("a", RO, exec(md("0-1-10,1-2-7"))), "0-1-10", 7, "a has 7 transactions b lacks"},
		// An errant write on a streaming replica observed after the
		// primary's newer transactions arrived on it: the primary, observed
		// a moment earlier, lacks 0-1-11 too, but only a's own write counts.
		{"errant write on a replica ahead of the primary's observation", site("a", RO, follows("b"), ids("3"), exec(md("0-1-11,0-3-12"))), "0-1-10", 1, "a has 1 transaction b lacks (0-3-12)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := with(promoted("b"), func(p *Persisted) { p.PromotionGTID = md(tt.primary) })
			d := Decide(group(tt.a, site("b", W, exec(md(tt.primary)))), st, DefaultPolicy(), now)
			if d.Action != MarkDiverged || len(d.Diverged) != 1 || d.Diverged[0].Count != tt.want || !strings.Contains(d.Message, tt.text) {
				t.Fatalf("decision %s (%+v), want a marked diverged with %d transactions, message with %q", d, d.Diverged, tt.want, tt.text)
			}
			next := Apply(st, d, now)
			if next.DivergedCount["a"] != tt.want || !next.Diverged["a"].Equal(d.Diverged[0].Set) {
				t.Fatalf("persisted %v / %v, want a: %d", next.Diverged, next.DivergedCount, tt.want)
			}
		})
	}
}

func TestPromoteCarriesThePromotionSet(t *testing.T) {
	d := Decide(group(site("a", UR, down), site("b", RO, lost("a"), retr(upto(11)))), revoked("a", "b", leasePending), DefaultPolicy(), now)
	if d.Action != Promote || !d.PromotionGTID.Equal(upto(11)) {
		t.Fatalf("decision %s with promotion set %s, want promote with %s", d, d.PromotionGTID, upto(11))
	}
}

func TestAwaitLeaseMessageNamesTheDeadline(t *testing.T) {
	d := Decide(leased(group(site("a", UR), site("b", RO, lost("a"))), now), revoked("a", "b", now), DefaultPolicy(), now)
	if d.Reason != ReasonAwaitLeaseExpiry || !strings.Contains(d.Message, "10.8s") {
		t.Fatalf("decision %s; want the message to say the deadline is 10.8s away (10s lease + 800ms margin)", d)
	}
	// The caller decides again at the deadline, not at its next tick (issue 32).
	if want := now.Add(10*time.Second + LeaseMargin); !d.RecheckAt.Equal(want) {
		t.Fatalf("RecheckAt %s, want the lease deadline %s", d.RecheckAt, want)
	}
	if d := Decide(group(site("a", W), site("b", RO, follows("a"))), active("a"), DefaultPolicy(), now); !d.RecheckAt.IsZero() {
		t.Fatalf("a healthy group's decision asks for a recheck at %s", d.RecheckAt)
	}
}

func TestDecideSwitchover(t *testing.T) {
	healthy3 := group(site("a", W), site("b", RO, follows("a")), site("c", RO, follows("a")))
	tests := []struct {
		name   string
		obs    Observed
		st     Persisted
		target string
		want   want
	}{
		{"healthy pair: switch over to b", group(site("a", W), site("b", RO, follows("a"))), active("a"), "b",
			want{action: RevokeEpoch, reason: ReasonSwitchover, target: "b", fence: []string{"a"}, epoch: 2}},
		{"refused: inside the cooldown without force", healthy3, with(promoted("a"), automaticAt(now.Add(-time.Second))), "c",
			want{action: None, reason: ReasonSwitchoverCooldown}},
		{"right after a planned switchover: no cooldown", healthy3, with(promoted("a"), func(p *Persisted) { p.LastFailoverAt = now.Add(-time.Second) }), "c",
			want{action: RevokeEpoch, reason: ReasonSwitchover, target: "c", fence: []string{"a"}, epoch: 3}},
		{"inside the cooldown, forced", healthy3, with(promoted("a"), automaticAt(now.Add(-time.Second))), "c",
			want{action: RevokeEpoch, reason: ReasonSwitchover, target: "c", fence: []string{"a"}, epoch: 3}},
		{"after the cooldown", healthy3, promoted("a"), "c",
			want{action: RevokeEpoch, reason: ReasonSwitchover, target: "c", fence: []string{"a"}, epoch: 3}},
		{"escalation halted: manual operations bypass it", healthy3, with(active("a"), func(p *Persisted) { p.EscalationHalted = true }), "b",
			want{action: RevokeEpoch, reason: ReasonSwitchover, target: "b", fence: []string{"a"}}},
		{"manual failover when the primary is down but uncorroborated", group(site("a", UR), site("b", RO), site("c", UR)), active("a"), "b",
			want{action: RevokeEpoch, reason: ReasonSwitchover, target: "b", fence: []string{"a"}}},
		{"refused: target already primary", healthy3, active("a"), "a", want{action: None, reason: ReasonSwitchoverTargetIsPrimary}},
		{"refused: unknown target", healthy3, active("a"), "z", want{action: None, reason: ReasonSwitchoverBadTarget}},
		{"refused: dr-only target", group(site("a", W), site("b", RO, follows("a"), dr)), active("a"), "b", want{action: None, reason: ReasonSwitchoverBadTarget}},
		{"refused: unreachable target", group(site("a", W), site("b", UR)), active("a"), "b", want{action: None, reason: ReasonSwitchoverBadTarget}},
		{"refused: known-diverged target", healthy3, with(active("a"), func(p *Persisted) { p.Diverged = map[string]gtid.Set{"b": errant("b", 1)} }), "b",
			want{action: None, reason: ReasonSwitchoverBadTarget}},
		{"target behind another replica but streaming from the primary that holds it all: accepted (it catches up once the primary is fenced)",
			group(site("a", W, exec(upto(12))), site("b", RO, follows("a")), site("c", RO, follows("a"), exec(upto(11)))), active("a"), "b",
			want{action: RevokeEpoch, reason: ReasonSwitchover, target: "b", fence: []string{"a"}, epoch: 2}},
		{"refused: target behind and not streaming from the primary", group(site("a", W, exec(upto(12))), site("b", RO, lost("a")), site("c", RO, follows("a"), exec(upto(11)))), active("a"), "b",
			want{action: None, reason: ReasonSwitchoverTargetBehind}},
		{"target behind a replica probed after the primary (it holds the primary's newest): accepted",
			group(site("a", W, exec(upto(11))), site("b", RO, follows("a")), site("c", RO, follows("a"), exec(upto(12)), withID(errantUUID("c")))), active("a"), "b",
			want{action: RevokeEpoch, reason: ReasonSwitchover, target: "b", fence: []string{"a"}, epoch: 2}},
		{"refused: another replica holds a write of its own the target lacks",
			group(site("a", W, exec(upto(12))), site("b", RO, follows("a")), site("c", RO, follows("a"), exec(upto(11).Union(errant("c", 1))), withID(errantUUID("c")))), active("a"), "b",
			want{action: None, reason: ReasonSwitchoverTargetBehind}},
		{"refused: target lacks what only another replica holds (not on the primary)",
			group(site("a", W, exec(upto(12))), site("b", RO, follows("a")), site("c", RO, follows("a"), exec(upto(11).Union(errant("c", 1))))), active("a"), "b",
			want{action: None, reason: ReasonSwitchoverTargetBehind}},
		{"refused: target behind while the primary is unreachable", group(site("a", UR, exec(upto(12))), site("b", RO, follows("a")), site("c", RO, follows("a"), exec(upto(11)))), active("a"), "b",
			want{action: None, reason: ReasonSwitchoverTargetBehind}},
		{"refused: failover in flight", group(site("a", UR), site("b", RO)), revoked("a", "b", leasePending), "b", want{action: None, reason: ReasonSwitchoverInFlight}},
		{"refused: split brain", group(site("a", W), site("b", W)), active("a"), "b", want{action: None, reason: ReasonSwitchoverGroupState}},
		{"refused: no primary recorded", group(site("a", W), site("b", RO, follows("a"))), Persisted{}, "b", want{action: None, reason: ReasonSwitchoverGroupState}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forced := tc.name == "inside the cooldown, forced"
			d := DecideSwitchover(tc.obs, tc.st, DefaultPolicy(), tc.target, forced, now)
			tc.want.check(t, d)
			if d.Action == RevokeEpoch && !d.Planned {
				t.Errorf("switchover revoke not marked planned: %s", d)
			}
		})
	}
}

// TestSwitchoverPhaseTwo: a planned switchover waits for the target to catch
// up with the fenced old primary and never substitutes another target.
func TestSwitchoverPhaseTwo(t *testing.T) {
	st := with(revoked("a", "b", leasePending), func(p *Persisted) { p.InFlight.Planned = true })
	behind := group(site("a", RO, fencedAt(2), exec(upto(12))), site("b", RO, follows("a")), site("c", RO, follows("a"), prio(9), retr(upto(12))))
	want{action: None, reason: ReasonAwaitCatchUp}.check(t, Decide(behind, st, DefaultPolicy(), now))

	caught := group(site("a", RO, fencedAt(2), exec(upto(12))), site("b", RO, follows("a"), retr(upto(12))), site("c", RO, follows("a"), prio(9), retr(upto(12))))
	d := Decide(caught, st, DefaultPolicy(), now)
	want{action: Promote, reason: ReasonPromote, target: "b", proof: ProofFenceConfirmed, repoint: []string{"c"}}.check(t, d)
	if !d.Planned {
		t.Errorf("planned switchover promote not marked planned: %s", d)
	}

	gone := group(site("a", RO, fencedAt(2)), site("b", UR), site("c", RO, follows("a")))
	want{action: Alert, reason: ReasonNoEligibleCandidate}.check(t, Decide(gone, st, DefaultPolicy(), now))
}

func TestPolicyValidate(t *testing.T) {
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatalf("default policy invalid: %v", err)
	}
	bad := map[string]func(*Policy){
		"fencing":           func(p *Policy) { p.Fencing = "" },
		"detection":         func(p *Policy) { p.Detection = "quorum" },
		"sidecar lease":     func(p *Policy) { p.LeaseTimeout = 0 },
		"negative cooldown": func(p *Policy) { p.FailoverCooldown = -1 },
		"negative settle":   func(p *Policy) { p.PromotionSettle = -1 },
		"escalation count":  func(p *Policy) { p.EscalationCount = 0 },
	}
	for name, f := range bad {
		if err := polWith(f).Validate(); err == nil || !strings.Contains(err.Error(), ErrInvalidPolicy.Error()) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidPolicy", name, err)
		}
	}
	// Confirmed and none fencing need no lease.
	if err := polWith(func(p *Policy) { p.Fencing = FencingConfirmed; p.LeaseTimeout = 0 }).Validate(); err != nil {
		t.Errorf("confirmed fencing without lease: %v", err)
	}
}

func TestEveryReasonHasAnAction(t *testing.T) {
	for _, r := range Reasons() {
		if a, ok := ActionOf(r); !ok || a == "" {
			t.Errorf("reason %s has no action", r)
		}
	}
	if _, ok := ActionOf("made-up"); ok {
		t.Error("ActionOf accepted an unknown reason")
	}
}

// automaticAt records an automatic failover (promotion) at t: what arms
// the failover cooldown.
func automaticAt(t time.Time) func(*Persisted) {
	return func(p *Persisted) {
		p.LastFailoverAt = t
		p.FailoverHistory = append(p.FailoverHistory, t)
	}
}
