package sitepair

import (
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
)

// Tests of the safety hardening (issue 11): what counts as proof, who
// corroborates, lag that is unknown, waits with deadlines, MariaDB per-domain
// comparisons. Each case failed (or did not compile) before its fix.

func refused(n int) so              { return func(o *SiteObservation) { o.RefusedProbes = n } }
func ioStopped(o *SiteObservation)  { o.IOStopped = true }
func lagUnknown(o *SiteObservation) { o.LagKnown = false }

func sidecar(sc SidecarObservation) so {
	return func(o *SiteObservation) { o.Sidecar = sc }
}

func TestHardeningDecisions(t *testing.T) {
	pending := revoked("a", "b", leasePending)
	sidecarOnly := polWith(func(p *Policy) { p.Fencing = FencingSidecar })
	confirmed := polWith(func(p *Policy) { p.Fencing = FencingConfirmed })
	daemonOnly := polWith(func(p *Policy) { p.Fencing = FencingConfirmed; p.Detection = "daemon-only" })
	revokedAt := now.Add(-time.Minute)
	long := revoked("a", "b", revokedAt)
	seen := SidecarObservation{Configured: true, LastReport: revokedAt, Epoch: 1, CanKill: true}
	acked := SidecarObservation{Configured: true, LastReport: now, Epoch: 2, CanKill: true, AliveAt: now}
	for _, c := range []decideCase{
		// ECONNREFUSED is proof only on consecutive probes and corroborated.
		{name: "one refused probe is no proof", obs: group(site("a", UR, refused(1)), site("b", RO, lost("a"))), st: pending, pol: &confirmed,
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "two refused probes, replica lost it: primary-down", obs: group(site("a", UR, refused(2)), site("b", RO, lost("a"))), st: pending, pol: &confirmed,
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofPrimaryDown}},
		{name: "refused but a replica still streams from it: no proof", obs: group(site("a", UR, refused(5)), site("b", RO, lost("a")), site("c", RO, follows("a"))),
			st: revoked("a", "b", leasePending), pol: &confirmed, want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "refused, only witness has its IO thread stopped: no proof", obs: group(site("a", UR, refused(5)), site("b", RO, lost("a"), ioStopped)), st: pending, pol: &confirmed,
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "refused, daemon-only detection: nothing corroborates, no proof", obs: group(site("a", UR, refused(5)), site("b", RO, lost("a"))), st: pending, pol: &daemonOnly,
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		// The lease proof rests on sidecar reports the daemon really saw.
		{name: "lease: sidecar never seen is no proof", obs: group(site("a", UR), site("b", RO, lost("a"))), st: long, pol: &sidecarOnly,
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		// Issue 26 hole 1: a sidecar that cannot SIGKILL a hung mysqld at
		// expiry leaves it writable when it resumes: its lease proves nothing.
		{name: "lease: the old primary's sidecar cannot kill: no lease proof", obs: group(site("a", UR, sidecar(func() SidecarObservation { s := seen; s.CanKill = false; return s }())), site("b", RO, lost("a"), sidecar(acked))), st: long, pol: &sidecarOnly,
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		// Issue 26 hole 2: a peer last known running before the deadline
		// may have restarted, adopted the old epoch from the old primary's
		// sidecar and served it back.
		{name: "lease: a peer not known running in the same boot at the deadline: wait", obs: group(site("a", UR, sidecar(seen)), site("b", RO, lost("a"), sidecar(func() SidecarObservation { s := acked; s.AliveAt = revokedAt; return s }()))), st: long, pol: &sidecarOnly,
			want: want{action: None, reason: ReasonAwaitLeaseExpiry}},
		{name: "lease: sidecar seen, peers hold the revoked epoch: lease-expired", obs: group(site("a", UR, sidecar(seen)), site("b", RO, lost("a"), sidecar(acked))), st: long, pol: &sidecarOnly,
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofLeaseExpired}},
		{name: "lease: sidecar silent long before the revoke may be dead", obs: group(site("a", UR, sidecar(SidecarObservation{Configured: true, LastReport: revokedAt.Add(-21 * time.Second), Epoch: 1})), site("b", RO, lost("a"), sidecar(acked))),
			st: long, pol: &sidecarOnly, want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "lease: sidecar silent since detection started is fine", obs: group(site("a", UR, sidecar(SidecarObservation{Configured: true, LastReport: revokedAt.Add(-12 * time.Second), Epoch: 1, CanKill: true})), site("b", RO, lost("a"), sidecar(acked))),
			st: long, pol: &sidecarOnly, want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofLeaseExpired}},
		{name: "lease: a peer sidecar still holding the old epoch can renew it", obs: group(site("a", UR, sidecar(seen)), site("b", RO, lost("a"), sidecar(SidecarObservation{Configured: true, LastReport: now, Epoch: 1}))),
			st: long, pol: &sidecarOnly, want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "lease: a peer holding the old epoch, the old primary confirmed dead by an operator: promote", obs: group(site("a", UR, sidecar(seen)), site("b", RO, lost("a"), sidecar(SidecarObservation{Configured: true, LastReport: now, Epoch: 1}))),
			st: confirmedDead(long, "a", 2), pol: &sidecarOnly, want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofOperatorConfirmed}},
		{name: "lease: a peer served it the old view recently: wait", obs: group(site("a", UR, sidecar(seen)), site("b", RO, lost("a"), sidecar(SidecarObservation{Configured: true, LastReport: now, Epoch: 2, Served: map[string]Served{"a": {At: now.Add(-5 * time.Second), Epoch: 1}}}))),
			st: long, pol: &sidecarOnly, want: want{action: None, reason: ReasonAwaitLeaseExpiry}},
		{name: "lease: a peer keeps serving it the revoking view: it does not renew", obs: group(site("a", UR, sidecar(seen)), site("b", RO, lost("a"), sidecar(SidecarObservation{Configured: true, LastReport: now, Epoch: 2, EpochSince: revokedAt, AliveAt: now, Served: map[string]Served{"a": {At: now, Epoch: 2}}}))),
			st: long, pol: &sidecarOnly, want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofLeaseExpired}},
		{name: "lease: this daemon serves views only since recently: wait", obs: func() Observed {
			o := group(site("a", UR, sidecar(seen)), site("b", RO, lost("a"), sidecar(acked)))
			o.ServingSince = now.Add(-5 * time.Second)
			return o
		}(), st: long, pol: &sidecarOnly, want: want{action: None, reason: ReasonAwaitLeaseExpiry}},
		{name: "lease: confirmed mode never uses it", obs: group(site("a", UR, sidecar(seen)), site("b", RO, lost("a"), sidecar(acked))), st: long, pol: &confirmed,
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "sidecar reported it fenced at the revoked epoch", obs: group(site("a", UR, sidecar(SidecarObservation{Configured: true, LastReport: now, Epoch: 2, FencedEpoch: 2})), site("b", RO, lost("a"))),
			st: pending, pol: &sidecarOnly, want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofSidecarFenced}},
		{name: "sidecar fenced at an older epoch is no proof", obs: group(site("a", UR, sidecar(SidecarObservation{Configured: true, LastReport: now, Epoch: 2, FencedEpoch: 1, CanKill: true})), site("b", RO, lost("a"))),
			st: pending, pol: &sidecarOnly, want: want{action: None, reason: ReasonAwaitLeaseExpiry}},
		{name: "sidecar reported mysqld down holding the revoked epoch", obs: group(site("a", UR, sidecar(SidecarObservation{Configured: true, LastReport: now, Epoch: 2, MysqldDown: true})), site("b", RO, lost("a"))),
			st: pending, pol: &sidecarOnly, want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofSidecarFenced}},
		// Seconds_Behind_Master NULL is unknown, not 0.
		{name: "only candidate's lag unknown: not eligible", obs: group(site("a", UR), site("b", RO, lost("a"), lagUnknown)), st: active("a"),
			want: want{action: Alert, reason: ReasonNoEligibleCandidate}},
		{name: "lag unknown is fine without a max lag", obs: group(site("a", UR), site("b", RO, lost("a"), lagUnknown)), st: active("a"), pol: func() *Policy { p := polWith(func(p *Policy) { p.MaxLag = 0 }); return &p }(),
			want: want{action: RevokeEpoch, reason: ReasonFailoverRevoke, target: "b", fence: []string{"a"}}},
		// Every wait has a deadline.
		{name: "catch-up within its deadline: wait", obs: group(site("a", RO, fencedAt(2), exec(upto(12))), site("b", RO, follows("a"))), st: revoked("a", "b", now.Add(-29*time.Second)),
			want: want{action: None, reason: ReasonAwaitCatchUp}},
		{name: "catch-up past its deadline: re-assert the old primary", obs: group(site("a", RO, fencedAt(2), exec(upto(12))), site("b", RO, follows("a"))), st: revoked("a", "b", now.Add(-30*time.Second)),
			want: want{action: ReassertPrimary, reason: ReasonCatchUpTimeout, target: "a", epoch: 3}},
		// Issue 26 hole 7: an unrelated unreachable replica no longer blocks
		// the give-back; an unreachable site that may be writable does.
		{name: "catch-up past its deadline with an unrelated replica unreachable: re-assert the old primary", obs: group(site("a", RO, fencedAt(2), exec(upto(12))), site("b", RO, follows("a")), site("c", UR)), st: revoked("a", "b", now.Add(-time.Hour)),
			want: want{action: ReassertPrimary, reason: ReasonCatchUpTimeout, target: "a", epoch: 3}},
		{name: "catch-up past its deadline with an unreachable old primary deposed without proof: alert", obs: group(site("a", RO, fencedAt(2), exec(upto(12))), site("b", RO, follows("a")), site("c", UR)),
			st:   deposed(revoked("a", "b", now.Add(-time.Hour)), "c", "a", ProofNoFencing),
			want: want{action: Alert, reason: ReasonCatchUpTimeoutBlocked}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}
}

func TestCatchUpTimeoutClearsTheFailover(t *testing.T) {
	st := revoked("a", "b", now.Add(-time.Hour))
	d := Decide(group(site("a", RO, fencedAt(2), exec(upto(12))), site("b", RO, follows("a"))), st, DefaultPolicy(), now)
	next := Apply(st, d, now)
	if next.InFlight != nil || next.ActiveSite != "a" || next.Epoch != 3 {
		t.Fatalf("after %s: %+v, want a active at epoch 3 with nothing in flight", d, next)
	}
}

// TestMariaDBPerDomain: MariaDB histories are compared per domain (gtid
// package Covers): a candidate restored from a backup, whose binlog state
// lost an old server's entry, is not blocked as "incomparable", while an old
// primary's unreplicated transaction is still divergence.
func TestMariaDBPerDomain(t *testing.T) {
	md := func(s string) gtid.Set { return gtid.MustParse(gtid.MariaDB, s) }
	// b was restored from a backup at 0-1-50 and replicated 0-2-51..100
	// since; c has the whole binlog state.
	obs := group(
		site("a", UR, exec(md("0-1-50,0-2-100"))),
		site("b", RO, lost("a"), exec(md("0-2-100")), prio(1)),
		site("c", RO, lost("a"), exec(md("0-1-50,0-2-100"))),
	)
	d := Decide(obs, active("a"), DefaultPolicy(), now)
	if d.Action != RevokeEpoch || d.Target != "b" {
		t.Fatalf("decision %s, want revoke-epoch to b (b and c hold the same position)", d)
	}
	// a comes back read-only holding 0-1-51 it wrote but never replicated;
	// b was promoted at 0-1-50 and wrote 0-2-51..60: a is diverged even
	// though its seq_no is below the primary's.
	obs = group(site("a", RO, exec(md("0-1-51"))), site("b", W, exec(md("0-1-50,0-2-60"))))
	st := with(promoted("b"), func(p *Persisted) { p.PromotionGTID = md("0-1-50") })
	d = Decide(obs, st, DefaultPolicy(), now)
	if d.Action != MarkDiverged || len(d.Diverged) != 1 || d.Diverged[0].Set.String() != "0-1-51..51" {
		t.Fatalf("decision %s (%+v), want a marked diverged with 0-1-51..51", d, d.Diverged)
	}
	// Two domains: c lags in domain 1 only; it is not the candidate.
	obs = group(
		site("a", UR, exec(md("0-1-50,1-1-20"))),
		site("b", RO, lost("a"), exec(md("0-1-50,1-1-20"))),
		site("c", RO, lost("a"), exec(md("0-1-50,1-1-15")), prio(5)),
	)
	d = Decide(obs, active("a"), DefaultPolicy(), now)
	if d.Action != RevokeEpoch || d.Target != "b" {
		t.Fatalf("decision %s, want revoke-epoch to b (c lags in domain 1)", d)
	}
}

func semiSync(ss SemiSyncObservation) so { return func(o *SiteObservation) { o.SemiSync = ss } }

var safeSemiSync = SemiSyncObservation{Known: true, Enabled: true, Active: true, Timeout: MinSemiSyncTimeout, WaitNoReplica: true, WaitPoint: "AFTER_SYNC"}

func TestSemiSyncFencing(t *testing.T) {
	pol := polWith(func(p *Policy) { p.Fencing = FencingSemiSync; p.SemiSyncAfterSync = true })
	both := polWith(func(p *Policy) { p.Fencing = FencingSemiSyncSidecar; p.SemiSyncAfterSync = true })
	defaultTimeout := safeSemiSync
	defaultTimeout.Timeout = 10 * time.Second
	afterCommit := safeSemiSync
	afterCommit.WaitPoint = "AFTER_COMMIT"
	st := revoked("a", "b", leasePending)
	for _, c := range []decideCase{
		{name: "replicas still connected to the hung primary: stop their IO threads",
			obs: group(site("a", UR, semiSync(safeSemiSync)), site("b", RO, lost("a")), site("c", RO, follows("a"))), st: st, pol: &pol,
			want: want{action: StopReplicaIO, reason: ReasonSemiSyncDetachReplicas}},
		{name: "every IO thread stopped: semisync proof",
			obs: group(site("a", UR, semiSync(safeSemiSync)), site("b", RO, lost("a"), ioStopped), site("c", RO, lost("a"), ioStopped)), st: st, pol: &pol,
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofSemiSync}},
		{name: "a replica pointed at another known site cannot acknowledge",
			obs: group(site("a", UR, semiSync(safeSemiSync)), site("b", RO, lost("a"), ioStopped), site("c", RO, follows("b"))), st: st, pol: &pol,
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofSemiSync}},
		{name: "a replica the daemon cannot reach may still acknowledge: blocks",
			obs: group(site("a", UR, semiSync(safeSemiSync)), site("b", RO, lost("a"), ioStopped), site("c", UR)), st: st, pol: &pol,
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "a replica the daemon cannot reach, the old primary confirmed dead by an operator: the replica may still hold the only acknowledgement",
			obs: group(site("a", UR, semiSync(safeSemiSync)), site("b", RO, lost("a"), ioStopped), site("c", UR)), st: confirmedDead(st, "a", 2), pol: &pol,
			want: want{action: Alert, reason: ReasonAckHolderUnreachable}},
		{name: "a replica the daemon cannot reach, the old primary confirmed dead, the replica confirmed lost: promote",
			obs: group(site("a", UR, semiSync(safeSemiSync)), site("b", RO, lost("a"), ioStopped), site("c", UR)), st: lostHolder(confirmedDead(st, "a", 2), "c"), pol: &pol,
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofOperatorConfirmed}},
		{name: "an unreachable replica whose mysqld is down cannot acknowledge (detached after the revoke: it holds nothing newer)",
			obs: group(site("a", UR, semiSync(safeSemiSync)), site("b", RO, lost("a"), ioStopped), site("c", UR, refused(2), ioStopped, seenAt(leasePending))), st: st, pol: &pol,
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofSemiSync}},
		{name: "an unreachable replica whose mysqld is down cannot acknowledge, but may hold what it acknowledged before",
			obs: group(site("a", UR, semiSync(safeSemiSync)), site("b", RO, lost("a"), ioStopped), site("c", UR, refused(2))), st: st, pol: &pol,
			want: want{action: Alert, reason: ReasonAckHolderUnreachable}},
		{name: "the default 10 s timeout is no proof",
			obs: group(site("a", UR, semiSync(defaultTimeout)), site("b", RO, lost("a"), ioStopped)), st: st, pol: &pol,
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "AFTER_COMMIT is no proof where AFTER_SYNC is required",
			obs: group(site("a", UR, semiSync(afterCommit)), site("b", RO, lost("a"), ioStopped)), st: st, pol: &pol,
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "confirmed mode never uses the semisync proof",
			obs: group(site("a", UR, semiSync(safeSemiSync)), site("b", RO, lost("a"), ioStopped)), st: st,
			pol:  func() *Policy { p := polWith(func(p *Policy) { p.Fencing = FencingConfirmed }); return &p }(),
			want: want{action: Alert, reason: ReasonAwaitFenceConfirmation}},
		{name: "semisync+sidecar: either proof suffices (semi-sync here)",
			obs: group(site("a", UR, semiSync(safeSemiSync)), site("b", RO, lost("a"), ioStopped)), st: st, pol: &both,
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofSemiSync}},
		{name: "semisync+sidecar: either proof suffices (sidecar here)",
			obs: leased(group(site("a", UR), site("b", RO, lost("a"))), leaseExpired), st: revoked("a", "b", leaseExpired), pol: &both,
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofLeaseExpired}},
		{name: "old primary back and fenced after its replicas were detached: resume catch-up",
			obs: group(site("a", RO, fencedAt(2), exec(upto(12)), semiSync(safeSemiSync)), site("b", RO, lost("a"), ioStopped)), st: st, pol: &pol,
			want: want{action: Rejoin, reason: ReasonResumeCatchUp, target: "a", repoint: []string{"b"}}},
		{name: "healthy group whose primary has the default timeout is reported",
			obs: group(site("a", W, semiSync(defaultTimeout)), site("b", RO, follows("a"))), st: active("a"), pol: &pol,
			want: want{action: Alert, reason: ReasonSemiSyncUnsafe}},
		{name: "healthy group with safe semi-sync",
			obs: group(site("a", W, semiSync(safeSemiSync)), site("b", RO, follows("a"))), st: active("a"), pol: &pol,
			want: want{action: None, reason: ReasonHealthy}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.run(t)
			if c.want.action == StopReplicaIO && (len(d.Detach) != 2 || d.Detach[0] != "b" || d.Detach[1] != "c") {
				t.Errorf("detach %v, want [b c]", d.Detach)
			}
		})
	}
}

// A view naming the target is published before it is made writable; a
// promotion of another site, or abandoning the failover, must outrank it.
func TestPublishedViewIsOutranked(t *testing.T) {
	st := revoked("a", "b", now.Add(-time.Hour))
	st.InFlight.PublishedEpoch, st.InFlight.PublishedTo = 3, "b"
	// b is gone, fenced at the published epoch before it went (an unfenced
	// one may be writable: TestRetargetAwayFromAnUnreachablePublishedTargetWaits);
	// c is promoted: epoch 4, not 3.
	// (a ran without semi-sync: no unreachable replica is owed, ack-holder
	// rule aside.)
	d := Decide(group(site("a", UR, down, asyncPrimary), site("b", UR, fencedAt(3)), site("c", RO, lost("a"))), st, DefaultPolicy(), now)
	if d.Action != Promote || d.Target != "c" || d.Epoch != 4 {
		t.Fatalf("decision %s epoch %d, want promote c at epoch 4", d, d.Epoch)
	}
	// Same target: the published epoch is the promotion's.
	d = Decide(group(site("a", UR, down), site("b", RO, lost("a"))), st, DefaultPolicy(), now)
	if d.Action != Promote || d.Target != "b" || d.Epoch != 3 {
		t.Fatalf("decision %s epoch %d, want promote b at epoch 3", d, d.Epoch)
	}
	// Abandoning re-asserts the old primary above the published epoch.
	d = Decide(group(site("a", RO, fencedAt(2), exec(upto(12))), site("b", RO, follows("a"))), st, DefaultPolicy(), now)
	if d.Reason != ReasonCatchUpTimeout || d.Epoch != 4 {
		t.Fatalf("decision %s epoch %d, want catch-up-timeout at epoch 4", d, d.Epoch)
	}
	if next := Apply(st, d, now); next.Epoch != 4 || next.InFlight != nil {
		t.Fatalf("after %s: %+v", d, next)
	}
}

// The revoke detaches the replicas only under semi-sync fencing: elsewhere
// their running IO threads are the witnesses the primary-down proof needs.
func TestRevokeDetachesOnlyUnderSemiSync(t *testing.T) {
	obs := group(site("a", UR, semiSync(safeSemiSync)), site("b", RO, lost("a")), site("c", RO, lost("a")))
	semi := polWith(func(p *Policy) { p.Fencing = FencingSemiSync })
	if d := Decide(obs, active("a"), semi, now); d.Action != RevokeEpoch || len(d.Detach) != 2 {
		t.Fatalf("semisync: %s detach %v, want a revoke detaching b and c", d, d.Detach)
	}
	conf := polWith(func(p *Policy) { p.Fencing = FencingConfirmed })
	if d := Decide(obs, active("a"), conf, now); d.Action != RevokeEpoch || len(d.Detach) != 0 {
		t.Fatalf("confirmed: %s detach %v, want a revoke detaching nothing", d, d.Detach)
	}
}

// Found by the simulation (seed 1810): a hung old primary whose probes
// answer writable again is still counted unreachable until the recovery
// threshold; it may be taking writes and hold one it acknowledged, so it is
// fenced before anything is promoted, whatever proof the failover had.
func TestAnsweringOldPrimaryIsFencedBeforePromotion(t *testing.T) {
	for _, pol := range []Policy{DefaultPolicy(), polWith(func(p *Policy) { p.Fencing = FencingNone })} {
		obs := group(site("a", UR, bounce, down, exec(upto(11))), site("b", RO, lost("a")), site("c", RO, lost("a")))
		d := Decide(obs, revoked("a", "b", now.Add(-time.Minute)), pol, now)
		want{action: FenceSites, reason: ReasonFenceWritableDuringFailover, fence: []string{"a"}}.check(t, d)
	}
	// Still failing its probes (not answering): the failover goes on.
	obs := group(site("a", UR, down, exec(upto(11))), site("b", RO, lost("a")), site("c", RO, lost("a")))
	if d := Decide(obs, revoked("a", "b", now.Add(-time.Minute)), DefaultPolicy(), now); d.Action != Promote {
		t.Fatalf("decision %s, want the promotion of a failover from a dead primary", d)
	}
}

// Found by the simulation (seed 1013, once a commit on an asynchronous
// primary counted as acknowledged): the daemon published epoch 3 naming b,
// made b writable and crashed before recording it; b was then cut off (its
// clients still reach it) and the restarted daemon promoted c at epoch 4:
// two writable sites. A published target that is not seen read-only may be
// writable: another promotion waits for it.
func TestRetargetAwayFromAnUnreachablePublishedTargetWaits(t *testing.T) {
	published := func(to string) Persisted {
		p := revoked("a", "b", now.Add(-time.Minute))
		p.InFlight.PublishedEpoch, p.InFlight.PublishedTo = 3, to
		return p
	}
	for _, c := range []decideCase{
		{name: "published b unreachable: no promotion of c", obs: group(site("a", RO, fencedAt(2)), site("b", UR), site("c", RO, follows("a"))), st: published("b"),
			want: want{action: Alert, reason: ReasonPublishedTargetUnreachable}},
		{name: "published b read-only again: c may be promoted", obs: group(site("a", RO, fencedAt(2)), site("b", RO, broken), site("c", RO, follows("a"))), st: published("b"),
			want: want{action: Promote, reason: ReasonPromoteRetarget, target: "c", proof: ProofFenceConfirmed, epoch: 4}},
		{name: "published b fenced at its epoch and unreachable: c may be promoted", obs: group(site("a", RO, fencedAt(2)), site("b", UR, fencedAt(3)), site("c", RO, follows("a"))), st: published("b"),
			want: want{action: Promote, reason: ReasonPromoteRetarget, target: "c", proof: ProofFenceConfirmed, epoch: 4}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}
}
