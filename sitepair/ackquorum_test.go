package sitepair

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
)

// acks is semi-sync on the old primary waiting for k acknowledgements.
func acks(k int) so {
	return func(o *SiteObservation) {
		o.SemiSync = safeSemiSync
		o.SemiSync.WaitForReplicas = k
	}
}

// seenAt: the site's last reachable probe was at t.
func seenAt(t time.Time) so { return func(o *SiteObservation) { o.LastReachableAt = t } }

// lostHolder records an operator's confirmation that site is lost in st's
// failover in flight.
func lostHolder(st Persisted, site string) Persisted {
	f := *st.InFlight
	f.LostHolders = append(slices.Clone(f.LostHolders), FenceConfirmation{Site: site, Epoch: f.Epoch, At: now.Add(-time.Second), By: "alice"})
	st.InFlight = &f
	return st
}

// asyncPrimary: the old primary was reached and runs without semi-sync.
func asyncPrimary(o *SiteObservation) {
	o.SemiSync = SemiSyncObservation{Known: true}
	o.LastReachableAt = now.Add(-time.Minute)
}

// TestAckHolderUnreachableWaits: with semi-sync waiting for k
// acknowledgements among the old primary's replicas, only k of them are sure
// to hold an acknowledged write. Covering the reachable sites is not enough
// when more than k-1 possible holders are unreachable: the one that
// acknowledged may be among them, holding a write the candidate lacks (issue
// 26, acknowledged writes under two faults).
func TestAckHolderUnreachableWaits(t *testing.T) {
	confirmed := polWith(func(p *Policy) { p.Fencing = FencingConfirmed })
	semi := polWith(func(p *Policy) { p.Fencing = FencingSemiSync; p.SemiSyncAfterSync = true })
	revokedAt := now.Add(-10 * time.Second)
	st := revoked("a", "b", revokedAt)
	promote := want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofPrimaryDown}
	wait := want{action: Alert, reason: ReasonAckHolderUnreachable}
	for _, c := range []decideCase{
		{name: "k=1: the only replica that may have acknowledged is unreachable, the reachable one may lack the write",
			obs: group(site("a", UR, down, acks(1)), site("b", RO, lost("a")), site("c", UR)), st: st, pol: &confirmed, want: wait},
		{name: "k unknown counts as 1",
			obs: group(site("a", UR, down, semiSync(safeSemiSync)), site("b", RO, lost("a")), site("c", UR)), st: st, pol: &confirmed, want: wait},
		{name: "semi-sync never observed (daemon restarted during the outage) counts as k=1",
			obs: group(site("a", UR, down), site("b", RO, lost("a")), site("c", UR)), st: st, pol: &confirmed, want: wait},
		{name: "a dr-only replica acknowledges as well",
			obs: group(site("a", UR, down, acks(1)), site("b", RO, lost("a")), site("c", UR, dr)), st: st, pol: &confirmed, want: wait},
		{name: "an unreachable replica whose mysqld is down may hold what it acknowledged before",
			obs: group(site("a", UR, down, acks(1)), site("b", RO, lost("a")), site("c", UR, refused(2))), st: st, pol: &confirmed, want: wait},
		{name: "every replica reachable: the candidate covers them all",
			obs: group(site("a", UR, down, acks(1)), site("b", RO, lost("a")), site("c", RO, lost("a"))), st: st, pol: &confirmed, want: promote},
		{name: "k=2 of 3 replicas, one unreachable: the two reachable ones hold every acknowledged write",
			obs: group(site("a", UR, down, acks(2)), site("b", RO, lost("a")), site("c", RO, lost("a")), site("d", UR)), st: st, pol: &confirmed, want: promote},
		{name: "k=2 of 3 replicas, two unreachable: both acknowledgements may be there",
			obs: group(site("a", UR, down, acks(2)), site("b", RO, lost("a")), site("c", UR), site("d", UR)), st: st, pol: &confirmed, want: wait},
		{name: "the old primary is reachable and fenced: it holds everything it acknowledged",
			obs: group(site("a", RO, fencedAt(2), acks(1)), site("b", RO, lost("a")), site("c", UR)), st: st, pol: &confirmed,
			want: want{action: Promote, reason: ReasonPromote, target: "b", proof: ProofFenceConfirmed}},
		{name: "a known-diverged replica is never pointed at the primary: it acknowledges nothing",
			obs: group(site("a", UR, down, acks(1)), site("b", RO, lost("a")), site("c", UR)), pol: &confirmed, want: promote,
			st: with(st, func(p *Persisted) { p.Diverged = map[string]gtid.Set{"c": errant("c", 1)} })},
		{name: "a recloning replica owes nothing",
			obs: group(site("a", UR, down, acks(1)), site("b", RO, lost("a")), site("c", UR)), pol: &confirmed, want: promote,
			st: with(st, func(p *Persisted) { p.Recloning = map[string]Reclone{"c": {Donor: "a"}} })},
		{name: "without semi-sync nothing is sure to be on a replica: RPO is not zero, the rule cannot help",
			obs: group(site("a", UR, down, asyncPrimary), site("b", RO, lost("a")), site("c", UR)), st: st, pol: &confirmed, want: promote},
		{name: "proven to hold nothing newer: seen after the revoke, IO stopped, semi-sync fencing (skip_replica_start), nothing the candidate lacks",
			obs: group(site("a", UR, acks(1)), site("b", RO, lost("a"), ioStopped), site("c", UR, refused(2), ioStopped, seenAt(revokedAt.Add(time.Second)))), st: st, pol: &semi,
			want: want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofSemiSync}},
		{name: "seen after the revoke with IO stopped but holding more than the candidate",
			obs: group(site("a", UR, acks(1)), site("b", RO, lost("a"), ioStopped), site("c", UR, refused(2), ioStopped, exec(upto(11)), seenAt(revokedAt.Add(time.Second)))), st: st, pol: &semi, want: wait},
		{name: "IO stopped but last seen before the revoke: it may have been started since",
			obs: group(site("a", UR, acks(1)), site("b", RO, lost("a"), ioStopped), site("c", UR, refused(2), ioStopped, seenAt(revokedAt.Add(-time.Second)))), st: st, pol: &semi, want: wait},
		{name: "IO stopped after the revoke but confirmed fencing: a restart starts replication again",
			obs: group(site("a", UR, down, acks(1)), site("b", RO, lost("a")), site("c", UR, ioStopped, seenAt(revokedAt.Add(time.Second)))), st: st, pol: &confirmed, want: wait},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.run(t)
			if c.want.reason == ReasonAckHolderUnreachable && !strings.Contains(d.Message, "confirm-fence") {
				t.Errorf("the message does not name the way out: %s", d.Message)
			}
		})
	}
}

// TestAckHolderLossAcceptedByAnOperator: confirm-fence naming the
// unreachable replica (its host is gone) is the human override: it is
// accepted only while the failover waits at ack-holder-unreachable, only for
// a site the decision waits for, and the promotion then says who accepted
// the loss of what only that site may hold.
func TestAckHolderLossAcceptedByAnOperator(t *testing.T) {
	confirmed := polWith(func(p *Policy) { p.Fencing = FencingConfirmed })
	obs := group(site("a", UR, down, acks(1)), site("b", RO, lost("a")), site("c", UR), site("d", UR))
	st := revoked("a", "b", now.Add(-10*time.Second))
	if d := Decide(obs, st, confirmed, now); d.Reason != ReasonAckHolderUnreachable {
		t.Fatalf("before: %s, want ack-holder-unreachable", d)
	}
	for _, c := range []struct {
		name, site string
		want       error
	}{
		{"a reachable replica", "b", ErrNotAckHolder},
		{"the old primary, which a proof already covers", "a", ErrNotAckHolder},
		{"unknown site", "z", ErrNotAckHolder},
	} {
		t.Run("refused: "+c.name, func(t *testing.T) {
			before := clonePersisted(st)
			got, err := ConfirmFence(obs, st, confirmed, c.site, now, "alice")
			if !errors.Is(err, c.want) {
				t.Fatalf("ConfirmFence: %v, want %v", err, c.want)
			}
			if !reflect.DeepEqual(got, before) {
				t.Errorf("a refused confirmation changed the state: %+v", got)
			}
		})
	}
	at := now.Add(time.Minute)
	one, err := ConfirmFence(obs, st, confirmed, "c", at, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if got := one.InFlight.LostHolders; len(got) != 1 || got[0] != (FenceConfirmation{Site: "c", Epoch: 2, At: at, By: "alice"}) {
		t.Fatalf("recorded %+v", got)
	}
	// One of two is not enough: d may hold it.
	d := Decide(obs, one, confirmed, at)
	want{action: Alert, reason: ReasonAckHolderUnreachable}.check(t, d)
	if strings.Contains(d.Message, "c (") || !strings.Contains(d.Message, "d") {
		t.Errorf("the wait names the wrong sites: %s", d.Message)
	}
	if _, err := ConfirmFence(obs, one, confirmed, "c", at, "bob"); !errors.Is(err, ErrNotAckHolder) {
		t.Errorf("confirming c twice: %v, want ErrNotAckHolder", err)
	}
	both, err := ConfirmFence(obs, one, confirmed, "d", at, "bob")
	if err != nil {
		t.Fatal(err)
	}
	d = Decide(obs, both, confirmed, at)
	want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofPrimaryDown}.check(t, d)
	for _, s := range []string{"alice", "bob", "c", "d"} {
		if !strings.Contains(d.Message, s) {
			t.Errorf("the promotion does not name %q: %s", s, d.Message)
		}
	}
	// A new revoke starts without them.
	if next := Apply(both, Decision{Action: RevokeEpoch, Epoch: 3, From: "b", Target: "a"}, at); next.InFlight.LostHolders != nil {
		t.Errorf("a new revoke kept %+v", next.InFlight.LostHolders)
	}
	// A confirmation made for another epoch counts for nothing.
	stale := with(both, func(p *Persisted) {
		f := *p.InFlight
		f.LostHolders = []FenceConfirmation{{Site: "c", Epoch: 1, By: "alice"}, {Site: "d", Epoch: 1, By: "bob"}}
		p.InFlight = &f
	})
	want{action: Alert, reason: ReasonAckHolderUnreachable}.check(t, Decide(obs, stale, confirmed, at))
}
