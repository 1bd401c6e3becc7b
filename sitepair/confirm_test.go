package sitepair

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestConfirmFence: a human's confirmation that the old primary is dead is
// the only way out of await-fence-confirmation, accepted only there, for
// that failover's old primary.
func TestConfirmFence(t *testing.T) {
	confirmed := polWith(func(p *Policy) { p.Fencing = FencingConfirmed })
	gone := group(site("a", UR), site("b", RO, lost("a")))
	pending := revoked("a", "b", leasePending)
	for _, c := range []struct {
		name string
		obs  Observed
		st   Persisted
		pol  Policy
		site string
		by   string
		want error
	}{
		{"no failover in flight", gone, active("a"), confirmed, "a", "alice", ErrNothingToConfirm},
		{"not the old primary", gone, pending, confirmed, "b", "alice", ErrNotOldPrimary},
		{"unknown site", gone, pending, confirmed, "z", "alice", ErrNotOldPrimary},
		{"nobody named", gone, pending, confirmed, "a", "", ErrNoOperator},
		{"a sidecar lease is still running: the proof comes by itself", leased(gone, leasePending), pending, DefaultPolicy(), "a", "alice", ErrNothingToConfirm},
		{"the old primary answers: it is fenced and read back instead", group(site("a", RO), site("b", RO, follows("a"))), pending, confirmed, "a", "alice", ErrNothingToConfirm},
		{"a proof already holds", group(site("a", UR, down), site("b", RO, lost("a"))), pending, confirmed, "a", "alice", ErrNothingToConfirm},
		{"already confirmed: the failover is promoting", gone, confirmedDead(pending, "a", 2), confirmed, "a", "bob", ErrNothingToConfirm},
		{"invalid state", gone, with(pending, func(p *Persisted) { p.Epoch = 3 }), confirmed, "a", "alice", ErrNothingToConfirm},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := clonePersisted(c.st)
			got, err := ConfirmFence(c.obs, c.st, c.pol, c.site, now, c.by)
			if !errors.Is(err, c.want) {
				t.Fatalf("ConfirmFence: %v, want %v", err, c.want)
			}
			if !reflect.DeepEqual(got, before) || !reflect.DeepEqual(c.st, before) {
				t.Errorf("a refused confirmation changed the state: %+v", got)
			}
		})
	}

	for name, pol := range map[string]Policy{
		"confirmed":                  confirmed,
		"sidecar never seen":         DefaultPolicy(),
		"semisync, settings unknown": polWith(func(p *Policy) { p.Fencing = FencingSemiSync }),
	} {
		t.Run("accepted: "+name, func(t *testing.T) {
			if d := Decide(gone, pending, pol, now); d.Reason != ReasonAwaitFenceConfirmation {
				t.Fatalf("before: %s, want await-fence-confirmation", d)
			}
			before := clonePersisted(pending)
			at := now.Add(time.Minute)
			got, err := ConfirmFence(gone, pending, pol, "a", at, "alice")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pending, before) {
				t.Errorf("ConfirmFence modified its input: %+v", pending)
			}
			wantC := FenceConfirmation{Site: "a", Epoch: 2, At: at, By: "alice"}
			if got.InFlight == nil || got.InFlight.OperatorConfirmed == nil || *got.InFlight.OperatorConfirmed != wantC {
				t.Fatalf("recorded %+v, want %+v", got.InFlight, wantC)
			}
			d := Decide(gone, got, pol, at)
			want{action: Promote, reason: ReasonPromote, target: "b", fence: []string{"a"}, proof: ProofOperatorConfirmed, epoch: 3}.check(t, d)
			after := Apply(got, d, at.Add(time.Second))
			if after.LastFailoverProof != ProofOperatorConfirmed || after.LastFailoverConfirmation == nil || *after.LastFailoverConfirmation != wantC {
				t.Fatalf("history after the promotion: proof %q confirmation %+v, want %q %+v", after.LastFailoverProof, after.LastFailoverConfirmation, ProofOperatorConfirmed, wantC)
			}
		})
	}
}

// A confirmation counts for its failover only: a new revoke starts without
// one, and an old primary that answers again (fenced) voids it.
func TestFenceConfirmationIsClearedWhenItsPremiseGoes(t *testing.T) {
	confirmed := polWith(func(p *Policy) { p.Fencing = FencingConfirmed })
	gone := group(site("a", UR), site("b", RO, lost("a")))
	st, err := ConfirmFence(gone, revoked("a", "b", leasePending), confirmed, "a", now, "alice")
	if err != nil {
		t.Fatal(err)
	}
	// a comes back writable: fenced, and the confirmation is dropped.
	back := group(site("a", W), site("b", RO, follows("a")))
	d := Decide(back, st, confirmed, now)
	want{action: FenceSites, reason: ReasonFenceWritableDuringFailover, fence: []string{"a"}}.check(t, d)
	st = Apply(st, d, now)
	if st.InFlight == nil || st.InFlight.OperatorConfirmed != nil {
		t.Fatalf("after fencing the old primary: in flight %+v, want the confirmation dropped", st.InFlight)
	}
	// Its fence was never read back and it is gone again: a human must
	// confirm again, the old confirmation does not promote.
	want{action: Alert, reason: ReasonAwaitFenceConfirmation}.check(t, Decide(gone, st, confirmed, now))

	// A promotion resting on another proof records no confirmation.
	st, err = ConfirmFence(gone, revoked("a", "b", leasePending), confirmed, "a", now, "alice")
	if err != nil {
		t.Fatal(err)
	}
	d = Decide(group(site("a", UR, fencedAt(2)), site("b", RO, lost("a"))), st, confirmed, now)
	next := Apply(st, d, now)
	if d.FenceProof != ProofFenceConfirmed || next.LastFailoverProof != ProofFenceConfirmed || next.LastFailoverConfirmation != nil {
		t.Fatalf("%s: history proof %q confirmation %+v", d, next.LastFailoverProof, next.LastFailoverConfirmation)
	}

	// A new failover (a new revoke) starts without a confirmation.
	st = Apply(next, Decision{Action: RevokeEpoch, Epoch: next.Epoch + 1, From: "b", Target: "a"}, now)
	if st.InFlight.OperatorConfirmed != nil {
		t.Fatalf("a new revoke kept the confirmation: %+v", st.InFlight)
	}
}
