package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
)

// leading is a lead func for a daemon that leads since t0.
func leading() (context.Context, time.Time, bool) { return context.Background(), t0, true }

// The human's way out of await-fence-confirmation: refused while nothing
// awaits it, accepted for the old primary of a failover that does, and
// every request lands in the persisted history with who asked.
func TestConfirmFenceAndAudit(t *testing.T) {
	ms := newTestStore(t)
	g, _ := testGroup(t, ms, "b", clockAt(t0))
	g.policy.Fencing = sitepair.FencingConfirmed
	g.obs = fixedObs{o: sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Unreachable},
		{Name: "b", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, LagKnown: true, IOStopped: true},
		{Name: "c", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, LagKnown: true, IOStopped: true},
	}}}
	if d := sitepair.Decide(g.observed(t0), g.rec.Persisted, g.policy, g.now()); d.Reason != sitepair.ReasonAwaitFenceConfirmation {
		t.Fatalf("setup: decision %s (%s), want await-fence-confirmation", d.Reason, d.Message)
	}

	err := g.handle(request{kind: kindConfirmFence, target: "b", by: "ann@ops"}, leading)
	if !errors.Is(err, ErrRefused) || !errors.Is(err, sitepair.ErrNotOldPrimary) {
		t.Fatalf("confirming the target dead: %v, want refused (not the old primary)", err)
	}
	if err := g.handle(request{kind: kindConfirmFence, target: "a", by: "ann@ops"}, leading); err != nil {
		t.Fatalf("confirming the old primary dead: %v", err)
	}
	st, _ := ms.Load(context.Background(), "g")
	if st.InFlight == nil || st.InFlight.FenceConfirmation == nil || st.InFlight.FenceConfirmation.By != "ann@ops" || st.InFlight.FenceConfirmation.Site != "a" {
		t.Fatalf("confirmation not persisted: %+v", st.InFlight)
	}
	d := sitepair.Decide(g.observed(t0), g.rec.Persisted, g.policy, g.now())
	if d.Action != sitepair.Promote || d.FenceProof != sitepair.ProofOperatorConfirmed {
		t.Fatalf("after the confirmation: %s %s proof %q, want promote on operator-confirmed", d.Action, d.Reason, d.FenceProof)
	}
	if err := g.handle(request{kind: kindAcknowledge, by: "bob@ops"}, leading); err != nil {
		t.Fatal(err)
	}
	st, _ = ms.Load(context.Background(), "g")
	if len(st.Audit) != 3 {
		t.Fatalf("audit %+v, want 3 entries", st.Audit)
	}
	want := []struct{ action, site, by, result string }{
		{store.AuditConfirmFence, "b", "ann@ops", "refused: "},
		{store.AuditConfirmFence, "a", "ann@ops", store.AuditAccepted},
		{store.AuditAcknowledge, "", "bob@ops", store.AuditAccepted},
	}
	for i, w := range want {
		e := st.Audit[i]
		if e.Action != w.action || e.Site != w.site || e.By != w.by || !strings.HasPrefix(e.Result, w.result) {
			t.Errorf("audit[%d] = %+v, want %+v", i, e, w)
		}
	}
	snap := g.snapshot(t0)
	if snap.FenceConfirmedBy != "ann@ops" || len(snap.Audit) != 3 {
		t.Fatalf("snapshot: confirmed by %q, audit %+v", snap.FenceConfirmedBy, snap.Audit)
	}
}

// With no failover in flight there is nothing to confirm.
func TestConfirmFenceRefusedWhenNothingAwaits(t *testing.T) {
	ms := newTestStore(t, store.GroupState{Group: "g", Epoch: 3, ActiveSite: "a"})
	cfg := configs.Group{Name: "g", Engine: configs.EngineMariaDB, Sites: []configs.Site{{Name: "a"}, {Name: "b"}}}
	g := &group{cfg: cfg, flavor: flavorOf(cfg.Engine), policy: sitepair.DefaultPolicy(), store: ms, pub: &publisher{}, now: clockAt(t0),
		log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg)}
	if err := g.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.obs = fixedObs{o: sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Writable},
		{Name: "b", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, ReplicatingFrom: "a", IOConnected: true},
	}}}
	err := g.handle(request{kind: kindConfirmFence, target: "a", by: "ann"}, leading)
	if !errors.Is(err, ErrRefused) || !errors.Is(err, sitepair.ErrNothingToConfirm) {
		t.Fatalf("confirm with nothing in flight: %v", err)
	}
	if st, _ := ms.Load(context.Background(), "g"); st.Epoch != 3 || st.ActiveSite != "a" || len(st.Audit) != 1 {
		t.Fatalf("state after a refusal: %+v", st)
	}
}
