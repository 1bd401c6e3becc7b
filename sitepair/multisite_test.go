package sitepair

import (
	"fmt"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
)

func TestDecideThreeSites(t *testing.T) {
	// c's own server identity, matching the errant() helper's UUID for "c".
	cID := func(o *SiteObservation) { o.ServerID = fmt.Sprintf("00000000-0000-0000-0000-%012x", []byte("c")[0]) }
	tests := []decideCase{
		{name: "replica streaming from the primary with an errant transaction of its own is marked diverged",
			obs: group(site("a", W, exec(upto(12))), site("b", RO, follows("a")), site("c", RO, follows("a"), cID, exec(upto(10).Union(errant("c", 1))))), st: active("a"),
			want: want{action: MarkDiverged, reason: ReasonMarkDiverged, target: "a"}},
		{name: "replica observed ahead of an older primary snapshot is not errant (only its own transactions count)",
			obs: group(site("a", W, exec(upto(10))), site("b", RO, follows("a")), site("c", RO, follows("a"), cID, exec(upto(12)))), st: active("a"),
			want: want{action: None, reason: ReasonHealthy}},
		{name: "errant transactions a former primary wrote and the primary holds are not errant",
			obs: group(site("a", W, exec(upto(10).Union(errant("c", 3)))), site("b", RO, follows("a")), site("c", RO, follows("a"), cID, exec(upto(10).Union(errant("c", 3))))), st: active("a"),
			want: want{action: None, reason: ReasonHealthy}},
		{name: "failover picks the replica holding every other candidate's transactions",
			obs: group(site("a", UR), site("b", RO, lost("a"), prio(9)), site("c", RO, lost("a"), exec(upto(12)))), st: active("a"),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "c", fence: []string{"a"}}},
		{name: "retrieved transactions count: b received more than it applied",
			obs: group(site("a", UR), site("b", RO, lost("a"), retr(upto(13))), site("c", RO, lost("a"), exec(upto(12)))), st: active("a"),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "b", fence: []string{"a"}}},
		{name: "equal sets: higher priority wins",
			obs: group(site("a", UR), site("b", RO, lost("a")), site("c", RO, lost("a"), prio(5))), st: active("a"),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "c", fence: []string{"a"}}},
		{name: "equal sets and priorities: declaration order wins",
			obs: group(site("a", UR), site("b", RO, lost("a")), site("c", RO, lost("a"))), st: active("a"),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "b", fence: []string{"a"}}},
		{name: "equal sets: preferSite wins over priority",
			obs: group(site("a", UR), site("b", RO, lost("a"), prio(5)), site("c", RO, lost("a"))), st: active("a"),
			pol:  ptr(polWith(func(p *Policy) { p.PreferSite = "c" })),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "c", fence: []string{"a"}}},
		{name: "preferSite does not beat a more advanced candidate",
			obs: group(site("a", UR), site("b", RO, lost("a"), exec(upto(11))), site("c", RO, lost("a"))), st: active("a"),
			pol:  ptr(polWith(func(p *Policy) { p.PreferSite = "c" })),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "b", fence: []string{"a"}}},
		{name: "incomparable candidates block the failover",
			obs: group(site("a", UR), site("b", RO, lost("a"), exec(upto(10).Union(errant("b", 1)))), site("c", RO, lost("a"), exec(upto(11)))), st: active("a"),
			want: want{action: Alert, reason: ReasonIncomparableCandidates}},
		{name: "best candidate lacks what the dr-only replica has: block",
			obs: group(site("a", UR), site("b", RO, lost("a")), site("c", RO, lost("a"), dr, exec(upto(11)))), st: active("a"),
			want: want{action: Alert, reason: ReasonCandidateLacksTransactions}},
		{name: "best candidate lacks what the lagging replica received: block",
			obs: group(site("a", UR), site("b", RO, lost("a")), site("c", RO, lost("a"), lag(time.Hour), retr(upto(12)))), st: active("a"),
			want: want{action: Alert, reason: ReasonCandidateLacksTransactions}},
		{name: "lagging replica excluded, the other holds everything",
			obs: group(site("a", UR), site("b", RO, lost("a"), lag(time.Hour)), site("c", RO, lost("a"))), st: active("a"),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "c", fence: []string{"a"}}},
		{name: "a known-diverged replica's extra transactions do not block",
			obs:  group(site("a", UR), site("b", RO, lost("a")), site("c", RO, lost("a"), exec(upto(10).Union(errant("c", 3))))),
			st:   with(active("a"), func(p *Persisted) { p.Diverged = map[string]gtid.Set{"c": errant("c", 3)} }),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "b", fence: []string{"a"}}},
		{name: "one replica unreachable, the other lost the primary: fail over",
			obs: group(site("a", UR), site("b", UR), site("c", RO, lost("a"))), st: active("a"),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "c", fence: []string{"a"}}},
		{name: "partition: one replica still streams from the primary",
			obs: group(site("a", UR), site("b", RO, lost("a")), site("c", RO, follows("a"))), st: active("a"),
			want: want{action: Alert, reason: ReasonPrimaryPartitioned}},
		{name: "uncorroborated: the only reachable replica points elsewhere",
			obs: group(site("a", UR), site("b", UR), site("c", RO, follows("b"))), st: active("a"),
			want: want{action: Alert, reason: ReasonUncorroborated}},
		{name: "split brain after our failover to b: fence a and c",
			obs: group(site("a", W), site("b", W), site("c", W)), st: promoted("b"),
			want: want{action: FenceSites, reason: ReasonSplitBrainKeepPromoted, target: "b", fence: []string{"a", "c"}}},
		{name: "split brain, our target not writable: alert only",
			obs: group(site("a", W), site("b", RO), site("c", W)), st: promoted("b"),
			want: want{action: Alert, reason: ReasonSplitBrainAlertOnly}},
		{name: "split brain without history: dr-only never wins",
			obs: group(site("a", RO), site("b", W), site("c", W, dr, prio(9))), st: Persisted{},
			want: want{action: FenceSites, reason: ReasonSplitBrainKeepWinner, target: "b", fence: []string{"c"}}},
		{name: "in flight: unreachable target is replaced by the best candidate (semi-sync waited for 2 acknowledgements: c has them all)",
			obs: group(site("a", UR, down, acks(2)), site("b", UR), site("c", RO, lost("a")), site("d", RO, lost("a"))), st: revoked("a", "b", leasePending),
			want: want{action: Promote, reason: ReasonPromoteRetarget, target: "c", fence: []string{"a"}, proof: ProofPrimaryDown}},
		{name: "in flight: an unreachable target may hold the only acknowledgement of a write c lacks",
			obs: group(site("a", UR, down), site("b", UR), site("c", RO, lost("a"))), st: revoked("a", "b", leasePending),
			want: want{action: Alert, reason: ReasonAckHolderUnreachable}},
		{name: "in flight: the target wins ties",
			obs: group(site("a", UR, down), site("b", RO, lost("a")), site("c", RO, lost("a"), prio(9))), st: revoked("a", "b", leasePending),
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofPrimaryDown, repoint: []string{"c"}}},
		{name: "in flight: a more advanced replica replaces the target",
			obs: group(site("a", UR, down), site("b", RO, lost("a")), site("c", RO, lost("a"), exec(upto(11)))), st: revoked("a", "b", leasePending),
			want: want{action: Promote, reason: ReasonPromoteRetarget, target: "c", fence: []string{"a"}, proof: ProofPrimaryDown, repoint: []string{"b"}}},
		{name: "in flight: a second writable site is fenced, the target is kept",
			obs: group(site("a", UR), site("b", W), site("c", W)), st: revoked("a", "b", leaseExpired),
			want: want{action: FenceSites, reason: ReasonFenceWritableDuringFailover, fence: []string{"c"}}},
		{name: "in flight: promote repoints read-only replicas but not diverged or fenced ones",
			obs:  group(site("a", UR, down), site("b", RO, lost("a")), site("c", RO, lost("a"))),
			st:   with(revoked("a", "b", leasePending), func(p *Persisted) { p.OperatorFenced = []string{"c"} }),
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofPrimaryDown, repoint: []string{}}},
		{name: "no primary, a replica unreachable: no re-assert",
			obs: group(site("a", RO), site("b", RO), site("c", UR)), st: promoted("a"),
			want: want{action: Alert, reason: ReasonNoPrimaryNotAllReachable}},
		{name: "no primary, all read-only, recorded primary holds everything: re-assert",
			obs: group(site("a", RO, exec(upto(12))), site("b", RO, follows("a")), site("c", RO, follows("a"), retr(upto(12)))), st: promoted("a"),
			want: want{action: ReassertPrimary, reason: ReasonReassertPrimary, target: "a"}},
		{name: "recovery: two stray read-only sites rejoin together",
			obs: group(site("a", RO), site("b", W, exec(upto(12))), site("c", RO, follows("a"))), st: promoted("b"),
			want: want{action: Rejoin, reason: ReasonRejoin, target: "b", repoint: []string{"a", "c"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t) })
	}
}

func TestDecideFiveSites(t *testing.T) {
	five := func(sites ...SiteObservation) Observed { return group(sites...) }
	tests := []decideCase{
		{name: "healthy five-site group", obs: five(site("a", W), site("b", RO, follows("a")), site("c", RO, follows("a")), site("d", RO, follows("a"), dr), site("e", RO, follows("a"))),
			st: active("a"), want: want{action: None, reason: ReasonHealthy}},
		{name: "five sites: failover to the highest-priority most advanced candidate",
			obs: five(site("a", UR), site("b", RO, lost("a"), exec(upto(12)), prio(1)), site("c", RO, lost("a"), exec(upto(12)), prio(3)),
				site("d", RO, lost("a"), dr, exec(upto(11))), site("e", RO, lost("a"), exec(upto(9)), prio(9))),
			st: active("a"), want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "c", fence: []string{"a"}}},
		{name: "five sites: the dr-only replica is ahead of every candidate: block",
			obs: five(site("a", UR), site("b", RO, lost("a")), site("c", RO, lost("a")), site("d", RO, lost("a"), dr, exec(upto(15))), site("e", UR)),
			st:  active("a"), want: want{action: Alert, reason: ReasonCandidateLacksTransactions}},
		{name: "five sites: one of four replicas still streams: partition",
			obs: five(site("a", UR), site("b", RO, lost("a")), site("c", RO, lost("a")), site("d", RO, lost("a")), site("e", RO, follows("a"))),
			st:  active("a"), want: want{action: Alert, reason: ReasonPrimaryPartitioned}},
		{name: "five sites: split brain of three after our failover to d",
			obs: five(site("a", W), site("b", RO), site("c", W), site("d", W), site("e", RO)),
			st:  promoted("d"), want: want{action: FenceSites, reason: ReasonSplitBrainKeepPromoted, target: "d", fence: []string{"a", "c"}}},
		{name: "five sites: total loss", obs: five(site("a", UR), site("b", UR), site("c", UR), site("d", UR), site("e", UR)),
			st: active("a"), want: want{action: Alert, reason: ReasonTotalLoss}},
		{name: "five sites: divergence is recorded before rejoins",
			obs: five(site("a", RO), site("b", W, exec(upto(12))), site("c", RO, exec(upto(10).Union(errant("c", 1)))), site("d", RO, follows("b")), site("e", RO)),
			st:  promoted("b"), want: want{action: MarkDiverged, reason: ReasonMarkDiverged, target: "b"}},
		{name: "five sites: uncorroborated when every replica is unreachable but one that does not follow",
			obs: five(site("a", UR), site("b", UR), site("c", UR), site("d", UR), site("e", RO)),
			st:  active("a"), want: want{action: Alert, reason: ReasonUncorroborated}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t) })
	}
}
