package daemon

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// loadCore is the core state the daemon holds after loading st.
func loadCore(st store.GroupState, flavor gtid.Flavor) (sitepair.Persisted, error) {
	r, err := toRecord(st, flavor)
	return r.Persisted, err
}

// saveCore is what the daemon writes after loading prev and moving to the
// core state p at now (a fixed-up load→advance→save cycle).
func saveCore(group string, p sitepair.Persisted, prev store.GroupState, now time.Time) store.GroupState {
	r, err := toRecord(prev, gtid.MariaDB)
	if err != nil {
		panic(err)
	}
	return toStore(group, r.advance(group, p, now))
}

// The store and the decision layer must agree on every field across a whole
// failover: revoke (in flight), promote (history, promotion GTID).
func TestStateRoundTripThroughAFailover(t *testing.T) {
	st := store.GroupState{Group: "orders", Epoch: 1, ActiveSite: "a"}
	p, err := loadCore(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	revoke := sitepair.Decision{Action: sitepair.RevokeEpoch, Epoch: 2, From: "a", Target: "b"}
	p = sitepair.Apply(p, revoke, t0)
	st = saveCore("orders", p, st, t0)
	if st.Epoch != 2 || st.ActiveSite != "" || st.InFlight == nil || st.InFlight.RevokedEpoch != 2 || st.InFlight.Kind != kindFailover || !st.InFlight.RevokedAt.Equal(t0) {
		t.Fatalf("after revoke: %+v in flight %+v", st, st.InFlight)
	}
	st.InFlight.Step = StepPromotionRecorded // executor bookkeeping survives a reload
	back, err := loadCore(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if back.InFlight == nil || !reflect.DeepEqual(*back.InFlight, *p.InFlight) {
		t.Fatalf("in flight after reload %+v, want %+v", back.InFlight, p.InFlight)
	}
	promo := gtid.MustParse(gtid.MariaDB, "0-1-42")
	p = sitepair.Apply(back, sitepair.Decision{Action: sitepair.Promote, Epoch: 3, From: "a", Target: "b", PromotionGTID: promo}, t0.Add(time.Second))
	st = saveCore("orders", p, st, t0.Add(time.Second))
	lf := st.LastFailover
	if st.Epoch != 3 || st.ActiveSite != "b" || st.InFlight != nil || lf == nil || lf.From != "a" || lf.To != "b" || lf.PromotionGTID != "0-1-42" || len(st.History) != 1 {
		t.Fatalf("after promote: %+v last %+v", st, lf)
	}
	again, err := loadCore(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if !again.PromotionGTID.Equal(promo) || again.LastFailoverTarget != "b" || !again.LastFailoverAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("reloaded %+v", again)
	}
}

// A diverged site's exact count is persisted with its divergent set and
// survives a reload; a count whose set a human removed from the document
// goes with it, and a set recorded before counts were kept loads without.
func TestStateKeepsTheDivergedCount(t *testing.T) {
	st := store.GroupState{Group: "orders", Epoch: 3, ActiveSite: "b", Diverged: map[string]string{"old": "0-2-9"}}
	p, err := loadCore(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if p.DivergedCount != nil {
		t.Fatalf("counts %v from a document without any", p.DivergedCount)
	}
	mark := sitepair.Decision{Action: sitepair.MarkDiverged, Target: "b",
		Diverged: []sitepair.Divergence{{Site: "a", Set: gtid.MustParse(gtid.MariaDB, "0-2-4"), Count: 1}}}
	p = sitepair.Apply(p, mark, t0)
	st = saveCore("orders", p, st, t0)
	if want := map[string]uint64{"a": 1}; !reflect.DeepEqual(st.DivergedCount, want) || st.Diverged["a"] != "0-2-4" || st.Diverged["old"] != "0-2-9" {
		t.Fatalf("stored diverged %v counts %v, want counts %v", st.Diverged, st.DivergedCount, want)
	}
	back, err := loadCore(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Fatalf("reloaded %+v, want %+v", back, p)
	}
	delete(st.Diverged, "a") // a human reconciled a
	back, err = loadCore(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := back.DivergedCount["a"]; ok || len(back.Diverged) != 1 {
		t.Fatalf("after clearing a: diverged %v counts %v", back.Diverged, back.DivergedCount)
	}
	if again := saveCore("orders", back, st, t0); again.DivergedCount != nil {
		t.Fatalf("saved counts %v for no counted site", again.DivergedCount)
	}
}

func TestStoredGTIDThatDoesNotParseIsAnError(t *testing.T) {
	st := store.GroupState{Group: "orders", Epoch: 3, ActiveSite: "b", Diverged: map[string]string{"c": "not a gtid"}}
	if _, err := toRecord(st, gtid.MariaDB); !errors.Is(err, gtid.ErrParse) {
		t.Fatalf("toRecord: %v, want a gtid parse error", err)
	}
}

// An operator's fence confirmation survives a reload while the failover
// waits, and the completed failover's record says which proof it rested on
// and who confirmed the old primary dead; the operator audit is carried
// through every save.
func TestStateKeepsTheFenceConfirmationAndTheAudit(t *testing.T) {
	audit := store.AppendAudit(nil, store.AuditEntry{At: t0, Action: store.AuditSwitchover, Site: "c", By: "carol", Result: "refused: a failover is in flight"})
	st := store.GroupState{Group: "orders", Epoch: 1, ActiveSite: "a", Audit: audit}
	p, err := loadCore(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	p = sitepair.Apply(p, sitepair.Decision{Action: sitepair.RevokeEpoch, Epoch: 2, From: "a", Target: "b"}, t0)
	st = saveCore("orders", p, st, t0)
	obs := sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Unreachable},
		{Name: "b", Role: sitepair.PrimaryCandidate, Index: 1, State: statemachine.ReadOnly, ReplicatingFrom: "a", LagKnown: true},
	}}
	pol := sitepair.DefaultPolicy()
	pol.Fencing = sitepair.FencingConfirmed
	at := t0.Add(time.Minute)
	p, err = sitepair.ConfirmFence(obs, p, pol, "a", at, "alice")
	if err != nil {
		t.Fatal(err)
	}
	st.Audit = store.AppendAudit(st.Audit, store.AuditEntry{At: at, Action: store.AuditConfirmFence, Site: "a", By: "alice", Result: store.AuditAccepted})
	st = saveCore("orders", p, st, at)
	want := store.FenceConfirmation{Site: "a", Epoch: 2, At: at, By: "alice"}
	if st.InFlight == nil || st.InFlight.ID != "orders-2" || st.InFlight.FenceConfirmation == nil || *st.InFlight.FenceConfirmation != want || len(st.Audit) != 2 {
		t.Fatalf("after the confirmation: %+v in flight %+v", st, st.InFlight)
	}
	back, err := loadCore(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Fatalf("reloaded %+v (in flight %+v), want %+v (in flight %+v)", back, back.InFlight, p, p.InFlight)
	}
	d := sitepair.Decide(obs, back, pol, at)
	if d.Action != sitepair.Promote || d.FenceProof != sitepair.ProofOperatorConfirmed {
		t.Fatalf("after the confirmation: %s, want a promotion on %s", d, sitepair.ProofOperatorConfirmed)
	}
	p = sitepair.Apply(back, d, at.Add(time.Second))
	st = saveCore("orders", p, st, at.Add(time.Second))
	lf := st.LastFailover
	if lf == nil || lf.From != "a" || lf.To != "b" || lf.Proof != string(sitepair.ProofOperatorConfirmed) || lf.FenceConfirmation == nil || *lf.FenceConfirmation != want ||
		st.InFlight != nil || len(st.Audit) != 2 {
		t.Fatalf("after the promotion: %+v last %+v", st, lf)
	}
	again, err := loadCore(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if again.LastFailoverProof != sitepair.ProofOperatorConfirmed || again.LastFailoverConfirmation == nil || again.LastFailoverConfirmation.By != "alice" {
		t.Fatalf("reloaded history: proof %q confirmation %+v", again.LastFailoverProof, again.LastFailoverConfirmation)
	}
	// The record is not rewritten by later saves of the same failover.
	if st2 := saveCore("orders", again, st, at.Add(time.Hour)); !reflect.DeepEqual(st2.LastFailover, lf) {
		t.Fatalf("a later save rewrote the record: %+v, want %+v", st2.LastFailover, lf)
	}
}

// A state saved before proofs and confirmations were recorded loads with
// neither, and its record keeps saying nothing about them.
func TestStateWithoutProofLoads(t *testing.T) {
	st := store.GroupState{Group: "orders", Epoch: 3, ActiveSite: "b",
		LastFailover: &store.Failover{Kind: kindFailover, From: "a", To: "b", At: t0, Epoch: 3, PromotionGTID: "0-1-42"}}
	p, err := loadCore(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if p.LastFailoverProof != "" || p.LastFailoverConfirmation != nil {
		t.Fatalf("loaded proof %q confirmation %+v, want none", p.LastFailoverProof, p.LastFailoverConfirmation)
	}
	if back := saveCore("orders", p, st, t0.Add(time.Hour)); !reflect.DeepEqual(back.LastFailover, st.LastFailover) || back.Audit != nil {
		t.Fatalf("saved back %+v audit %v", back.LastFailover, back.Audit)
	}
}

// An operator's confirmation that an unreachable replica is lost (the way
// out of ack-holder-unreachable) is persisted with the failover in flight:
// a restarted daemon still promotes on it, and the next revoke drops it.
func TestStateKeepsLostHolderConfirmations(t *testing.T) {
	st := store.GroupState{Group: "orders", Epoch: 1, ActiveSite: "a"}
	p, err := loadCore(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	p = sitepair.Apply(p, sitepair.Decision{Action: sitepair.RevokeEpoch, Epoch: 2, From: "a", Target: "b"}, t0)
	p.InFlight.LostHolders = []sitepair.FenceConfirmation{{Site: "c", Epoch: 2, At: t0.Add(time.Minute), By: "alice"}}
	st = saveCore("orders", p, st, t0.Add(time.Minute))
	if f := st.InFlight; f == nil || len(f.LostHolders) != 1 || f.LostHolders[0] != (store.FenceConfirmation{Site: "c", Epoch: 2, At: t0.Add(time.Minute), By: "alice"}) {
		t.Fatalf("stored in flight %+v", st.InFlight)
	}
	back, err := loadCore(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.InFlight.LostHolders, p.InFlight.LostHolders) {
		t.Fatalf("reloaded %+v, want %+v", back.InFlight.LostHolders, p.InFlight.LostHolders)
	}
}
