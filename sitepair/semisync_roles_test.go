package sitepair

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
)

// Issue 26, hole 9: with the semi-sync source side on on every site (as
// guides advise), a replica's applier waits for acknowledgements nobody
// sends, and the daemon said healthy.

// sourceOn: the site's semi-sync source side is on (safe settings).
func sourceOn(o *SiteObservation) { o.SemiSync = safeSemiSync }

func backlog(age time.Duration) so { return func(o *SiteObservation) { o.BacklogAge = age } }

func ackWaits(w AckWaitObservation) so { return func(o *SiteObservation) { o.AckWaits = w } }

func TestSemiSyncSourceSideIsSwitchedOffOnReplicas(t *testing.T) {
	semi := polWith(func(p *Policy) { p.Fencing = FencingSemiSync; p.SemiSyncAfterSync = true })
	for _, c := range []struct {
		decideCase
		off []string
	}{
		{decideCase: decideCase{name: "every site with the source side on: off on both replicas",
			obs: group(site("a", W, sourceOn), site("b", RO, follows("a"), sourceOn), site("c", RO, follows("a"), sourceOn)), st: active("a"), pol: &semi,
			want: want{action: DisableSemiSyncSource, reason: ReasonSemiSyncSourceOnReplica, target: "a"}}, off: []string{"b", "c"}},
		{decideCase: decideCase{name: "any fencing mode: a replica's source side stalls its applier",
			obs: group(site("a", W, sourceOn), site("b", RO, follows("a")), site("c", RO, follows("a"), sourceOn)), st: active("a"),
			want: want{action: DisableSemiSyncSource, reason: ReasonSemiSyncSourceOnReplica, target: "a"}}, off: []string{"c"}},
		{decideCase: decideCase{name: "a replica whose IO thread is lost still applies its relay log",
			obs: group(site("a", W, sourceOn), site("b", RO, lost("a"), sourceOn), site("c", RO, follows("a"))), st: active("a"), pol: &semi,
			want: want{action: DisableSemiSyncSource, reason: ReasonSemiSyncSourceOnReplica, target: "a"}}, off: []string{"b"}},
		{decideCase: decideCase{name: "the primary keeps its source side",
			obs: group(site("a", W, sourceOn), site("b", RO, follows("a"))), st: active("a"), pol: &semi,
			want: want{action: None, reason: ReasonHealthy}}},
		{decideCase: decideCase{name: "a read-only site not replicating from the primary is rejoined first (the rejoin sets its roles)",
			obs: group(site("a", W, sourceOn), site("b", RO, sourceOn), site("c", RO, follows("a"), sourceOn)), st: active("a"), pol: &semi,
			want: want{action: Rejoin, reason: ReasonRejoin, target: "a", repoint: []string{"b"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.run(t)
			if !slices.Equal(d.SemiSyncOff, c.off) {
				t.Errorf("semi-sync off %v, want %v (%s)", d.SemiSyncOff, c.off, d)
			}
		})
	}
	// Sites the daemon must not touch decide as if their source side were off.
	withErrant := exec(upto(10).Union(errant("c", 1)))
	for _, c := range []struct {
		name string
		c    SiteObservation
		st   Persisted
	}{
		{"known-diverged", site("c", RO, follows("a"), withErrant),
			with(active("a"), func(p *Persisted) { p.Diverged = map[string]gtid.Set{"c": errant("c", 1)} })},
		{"operator-fenced", site("c", RO, follows("a")), with(active("a"), func(p *Persisted) { p.OperatorFenced = []string{"c"} })},
		{"recloning", site("c", RO), with(active("a"), func(p *Persisted) { p.Recloning = map[string]Reclone{"c": {Donor: "a"}} })},
		{"unreachable", site("c", UR, follows("a")), active("a")},
	} {
		t.Run(c.name+" site left alone", func(t *testing.T) {
			on := c.c
			sourceOn(&on)
			want := Decide(group(site("a", W, sourceOn), site("b", RO, follows("a")), c.c), c.st, semi, now)
			got := Decide(group(site("a", W, sourceOn), site("b", RO, follows("a")), on), c.st, semi, now)
			if got.Action != want.Action || got.Reason != want.Reason || len(got.SemiSyncOff) > 0 {
				t.Fatalf("decision %s (off %v), want %s as with its source side off", got, got.SemiSyncOff, want)
			}
		})
	}
}

func TestBlockedApplierIsNeverHealthy(t *testing.T) {
	bound := DefaultPolicy().ApplierStallWindow()
	for _, c := range []decideCase{
		{name: "applier waiting for semi-sync acknowledgements (source side on, switch-off failing)",
			obs: group(site("a", W, sourceOn), site("b", RO, follows("a"), ackWaits(AckWaitObservation{Known: true, Appliers: 1, Longest: time.Second})),
				site("c", RO, follows("a"))), st: active("a"),
			want: want{action: Alert, reason: ReasonApplierBlocked}},
		{name: "received transactions not applied for longer than the bound while both threads run",
			obs: group(site("a", W), site("b", RO, follows("a"), backlog(bound+time.Second)), site("c", RO, follows("a"))), st: active("a"),
			want: want{action: Alert, reason: ReasonApplierBlocked}},
		{name: "a short backlog is normal",
			obs: group(site("a", W), site("b", RO, follows("a"), backlog(bound/2)), site("c", RO, follows("a"))), st: active("a"),
			want: want{action: None, reason: ReasonHealthy}},
		{name: "a stopped applier is reported as such, not as blocked",
			obs: group(site("a", W), site("b", RO, follows("a"), backlog(bound+time.Second), func(o *SiteObservation) { o.ApplierStopped = true }),
				site("c", RO, follows("a"))), st: active("a"),
			want: want{action: None, reason: ReasonHealthy}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}
}

func TestGTIDLagExcludesACandidateTheServerCallsCaughtUp(t *testing.T) {
	// b's Seconds_Behind_Master says 0 (its applier waits inside a commit),
	// but what it received long ago is still not applied.
	obs := group(site("a", UR, exec(upto(20))), site("b", RO, lost("a"), prio(5), retr(upto(20)), backlog(2*time.Minute)),
		site("c", RO, lost("a"), exec(upto(20))))
	d := Decide(obs, active("a"), DefaultPolicy(), now)
	if d.Action != RevokeEpoch || d.Target != "c" {
		t.Fatalf("decision %s, want revoke-epoch to c (b's applied set is 2m behind what it received)", d)
	}
	if d := Decide(group(obs.Sites[0], obs.Sites[1]), active("a"), DefaultPolicy(), now); d.Reason != ReasonNoEligibleCandidate || !strings.Contains(d.Message, "lag 2m0s") {
		t.Fatalf("decision %s, want no-eligible-candidate naming b's 2m GTID lag", d)
	}
}

func TestWritesStalledAwaitingAck(t *testing.T) {
	semi := polWith(func(p *Policy) { p.Fencing = FencingSemiSync; p.SemiSyncAfterSync = true })
	bound := DefaultPolicy().AckStallWindow()
	stalled := ackWaits(AckWaitObservation{Known: true, Sessions: 3, Longest: bound + time.Second})
	for _, c := range []decideCase{
		{name: "every replica gone: commits wait for acknowledgements",
			obs: group(site("a", W, sourceOn, stalled), site("b", UR), site("c", UR)), st: active("a"), pol: &semi,
			want: want{action: Alert, reason: ReasonWritesStalledAwaitingAck}},
		{name: "replicas connected but none acknowledging",
			obs: group(site("a", W, sourceOn, stalled), site("b", RO, follows("a"))), st: active("a"), pol: &semi,
			want: want{action: Alert, reason: ReasonWritesStalledAwaitingAck}},
		{name: "commits waiting a moment are normal semi-sync",
			obs: group(site("a", W, sourceOn, ackWaits(AckWaitObservation{Known: true, Sessions: 3, Longest: bound / 2})), site("b", UR)), st: active("a"), pol: &semi,
			want: want{action: Alert, reason: ReasonDegradedReplicaUnreachable}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}
	if why := semi.WritesStalled(site("a", W, sourceOn, stalled)); !strings.Contains(why, "3 sessions") {
		t.Errorf("WritesStalled = %q, want it to count the waiting sessions", why)
	}
}
