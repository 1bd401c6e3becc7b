package daemon

import (
	"errors"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// The store and the decision layer must agree on every field across a whole
// failover: revoke (in flight), promote (history, promotion GTID).
func TestStateRoundTripThroughAFailover(t *testing.T) {
	st := store.GroupState{Group: "orders", Epoch: 1, ActiveSite: "a"}
	p, err := toPersisted(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	revoke := sitepair.Decision{Action: sitepair.RevokeEpoch, Epoch: 2, From: "a", Target: "b"}
	p = sitepair.Apply(p, revoke, t0)
	st = fromPersisted("orders", p, st, t0)
	if st.Epoch != 2 || st.ActiveSite != "" || st.InFlight == nil || st.InFlight.RevokedEpoch != 2 || st.InFlight.Kind != kindFailover || !st.InFlight.RevokedAt.Equal(t0) {
		t.Fatalf("after revoke: %+v in flight %+v", st, st.InFlight)
	}
	st.InFlight.Step = StepPromotionRecorded // executor bookkeeping survives a reload
	back, err := toPersisted(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if back.InFlight == nil || *back.InFlight != *p.InFlight {
		t.Fatalf("in flight after reload %+v, want %+v", back.InFlight, p.InFlight)
	}
	promo := gtid.MustParse(gtid.MariaDB, "0-1-42")
	p = sitepair.Apply(back, sitepair.Decision{Action: sitepair.Promote, Epoch: 3, From: "a", Target: "b", PromotionGTID: promo}, t0.Add(time.Second))
	st = fromPersisted("orders", p, st, t0.Add(time.Second))
	lf := st.LastFailover
	if st.Epoch != 3 || st.ActiveSite != "b" || st.InFlight != nil || lf == nil || lf.From != "a" || lf.To != "b" || lf.PromotionGTID != "0-1-42" || len(st.History) != 1 {
		t.Fatalf("after promote: %+v last %+v", st, lf)
	}
	again, err := toPersisted(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if !again.PromotionGTID.Equal(promo) || again.LastFailoverTarget != "b" || !again.LastFailoverAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("reloaded %+v", again)
	}
}

func TestStoredGTIDThatDoesNotParseIsAnError(t *testing.T) {
	st := store.GroupState{Group: "orders", Epoch: 3, ActiveSite: "b", Diverged: map[string]string{"c": "not a gtid"}}
	if _, err := toPersisted(st, gtid.MariaDB); !errors.Is(err, gtid.ErrParse) {
		t.Fatalf("toPersisted: %v, want a gtid parse error", err)
	}
}
