package daemon

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/hooks"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
)

// recordedHooks is a notifier that records the events fired.
type recordedHooks struct {
	mu     sync.Mutex
	events []hooks.Event
}

func (r *recordedHooks) Fire(ev hooks.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recordedHooks) Results() []hooks.Result { return nil }

func (r *recordedHooks) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		out = append(out, ev.Type+":"+ev.Site)
	}
	return out
}

// The group fires its hooks around a promotion (before, then after with the
// promotion GTID), on a failed promotion, once per split brain and on every
// site marked diverged; a standing alert does not fire again.
func TestHooksFireOnGroupEvents(t *testing.T) {
	ms := newTestStore(t)
	g, _ := testGroup(t, ms, "b", clockAt(t0))
	rec := &recordedHooks{}
	g.hooks = rec
	g.actionTimeout = time.Minute
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Unreachable, RefusedProbes: 2, Executed: exec},
		{Name: "b", Role: sitepair.PrimaryCandidate, Index: 1, State: statemachine.ReadOnly, ReplicatingFrom: "a", LagKnown: true, Executed: exec},
	}}}
	ctx := context.Background()
	g.carryOut(ctx, promoteDecision("b"))
	if got, want := rec.types(), []string{configs.HookBeforePromote + ":b", configs.HookAfterPromote + ":b"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if ev := rec.events[1]; ev.GTID != "0-1-10" || ev.From != "a" || ev.To != "b" || ev.Group != "g" || ev.Reason != string(sitepair.ReasonPromote) {
		t.Fatalf("after-promote payload %+v", ev)
	}

	rec.events = nil
	split := sitepair.Decision{Action: sitepair.Alert, Reason: sitepair.ReasonSplitBrainAlertOnly, Message: "a, b are writable"}
	g.carryOut(ctx, split)
	g.carryOut(ctx, split) // the same alert again: no second event
	div := sitepair.Decision{Action: sitepair.MarkDiverged, Reason: sitepair.ReasonMarkDiverged, Target: "b",
		Diverged: []sitepair.Divergence{{Site: "a", Set: gtid.MustParse(gtid.MariaDB, "0-9-1"), Count: 1}}}
	g.carryOut(ctx, div)
	if got, want := rec.types(), []string{configs.HookSplitBrain + ":", configs.HookRecoveryBlocked + ":a"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// A promotion that fails fires failover-failed (after before-promote).
func TestHooksFireOnFailedPromotion(t *testing.T) {
	ms := newTestStore(t)
	g, ops := testGroup(t, ms, "b", clockAt(t0))
	rec := &recordedHooks{}
	g.hooks = rec
	g.actionTimeout = time.Minute
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	g.servers.conns = newConnections(func(_ context.Context, s configs.Site) (Instance, error) {
		return fakeInstance{site: s.Name, log: ops, executed: exec, retrieved: exec, drainErr: errDrainFailedForTest}, nil
	}, g.cfg.Sites)
	g.carryOut(context.Background(), promoteDecision("b"))
	if got, want := rec.types(), []string{configs.HookBeforePromote + ":b", configs.HookFailoverFailed + ":b"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

var errDrainFailedForTest = errors.New("applier stopped")

// A switchover whose target is lost before it was published gives the
// fenced source back at its deadline (issue 26 hole 7), even with another
// site unreachable: the daemon makes the source writable, stores it as the
// active site with nothing in flight, and fires failover-failed.
func TestLostSwitchoverTargetGivesTheSourceBack(t *testing.T) {
	ms := newTestStore(t)
	base := clockAt(t0)
	g, ops := testGroup(t, ms, "b", base)
	rec := &recordedHooks{}
	g.hooks = rec
	g.actionTimeout = time.Minute
	g.mu.Lock()
	g.rec.InFlight.Planned = true
	g.fenced["a"] = 2 // the source's fence was read back at the revoked epoch
	g.mu.Unlock()
	// Past the deadline (maxLagWait, else the catch-up timeout).
	g.now = func() time.Time { return base().Add(time.Minute) }
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, Executed: exec, LagKnown: true},
		{Name: "b", Role: sitepair.PrimaryCandidate, Index: 1, State: statemachine.Unreachable, Executed: exec},
		{Name: "c", Role: sitepair.PrimaryCandidate, Index: 2, State: statemachine.Unreachable, Executed: exec},
	}}}
	ctx := context.Background()
	r, ok := g.decide(ctx, time.Time{})
	if !ok || r.Decision.Reason != sitepair.ReasonTargetLost || r.Decision.Target != "a" {
		t.Fatalf("decision %s, want target-lost re-asserting a", r.Decision)
	}
	g.carryOut(ctx, r.Decision)
	if !ops.has("a:writable") {
		t.Fatalf("ops %v: a not made writable", ops)
	}
	st, err := ms.Load(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if st.ActiveSite != "a" || st.InFlight != nil || st.Epoch != 3 {
		t.Fatalf("stored %+v, want a active at epoch 3 with nothing in flight", st)
	}
	if got, want := rec.types(), []string{configs.HookFailoverFailed + ":a"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}
