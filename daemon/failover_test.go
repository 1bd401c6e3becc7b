package daemon

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/view"
)

// Another daemon wrote a newer state: the next step notices and stops.
func TestPromotionStopsWhenTheStoreMovedOn(t *testing.T) {
	ms := newTestStore(t)
	g, ops := testGroup(t, ms, "b", clockAt(t0))
	ms.onSave = func(st store.GroupState) {
		if st.InFlight != nil && st.InFlight.Step == StepRelayDrained {
			ms.put(t, store.GroupState{Group: "g", Epoch: 3, ActiveSite: "c"})
		}
	}
	err := g.failover(promoteDecision("b")).promote(context.Background())
	if !errors.Is(err, ErrSuperseded) {
		t.Fatalf("promote: %v, want ErrSuperseded", err)
	}
	if ops.has("b:writable") {
		t.Fatalf("b made writable although another daemon promoted c: %v", ops)
	}
	if g.rec.Epoch != 3 || g.rec.ActiveSite != "c" {
		t.Fatalf("state not reloaded: %+v", g.rec.Persisted)
	}
}

// The store is re-read right before the target is made writable, after the
// promotion was published and its sidecar awaited: a write by another daemon
// in that window (leaderships overlapping) stops the promotion.
func TestPromotionRereadsTheStoreRightBeforeWritable(t *testing.T) {
	ms := newTestStore(t)
	g, ops := testGroup(t, ms, "b", clockAt(t0))
	ms.onSave = func(st store.GroupState) {
		if st.InFlight != nil && st.InFlight.Step == StepPublished {
			ms.put(t, store.GroupState{Group: "g", Epoch: 4, ActiveSite: "c"})
		}
	}
	err := g.failover(promoteDecision("b")).promote(context.Background())
	if !errors.Is(err, ErrSuperseded) {
		t.Fatalf("promote: %v, want ErrSuperseded", err)
	}
	if ops.has("b:writable") {
		t.Fatalf("b made writable although another daemon promoted c: %v", ops)
	}
}

// A retargeted failover is persisted before the new target is touched.
func TestRetargetIsPersistedFirst(t *testing.T) {
	ms := newTestStore(t)
	g, ops := testGroup(t, ms, "b", clockAt(t0))
	var toAtFirstOp string
	ms.onSave = func(st store.GroupState) {
		if toAtFirstOp == "" && st.InFlight != nil {
			toAtFirstOp = st.InFlight.To
			if ops.String() != "[]" {
				t.Errorf("operations before the new target was recorded: %v", ops)
			}
		}
	}
	if err := g.failover(promoteDecision("c")).promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	if toAtFirstOp != "c" {
		t.Fatalf("first save recorded target %q, want c", toAtFirstOp)
	}
}

// The revoke time is taken after the durable write, and a daemon that
// loads a failover in flight measures from its own clock.
func TestRevokeTimeIsTakenAfterTheDurableWrite(t *testing.T) {
	ms := newTestStore(t)
	clock := clockAt(t0)
	cfg := configs.Group{Name: "g", Engine: configs.EngineMariaDB, Sites: []configs.Site{{Name: "a"}, {Name: "b"}}}
	g := &group{cfg: cfg, flavor: gtid.MariaDB, policy: sitepair.DefaultPolicy(), store: ms, pub: &publisher{}, now: clock,
		log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg)}
	g.servers = &servers{group: cfg, conns: newConnections(func(context.Context, configs.Site) (Instance, error) {
		return nil, errors.New("unreachable")
	}, cfg.Sites), log: g.log}
	g.rec.Persisted = sitepair.Persisted{Epoch: 1, ActiveSite: "a"}
	g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", State: statemachine.ReadOnly}, {Name: "b", Index: 1, State: statemachine.ReadOnly},
	}}}
	var savedAt time.Time
	ms.onSave = func(store.GroupState) { savedAt = clock() }
	d := sitepair.Decision{Action: sitepair.RevokeEpoch, Reason: sitepair.ReasonFailoverRevoke, From: "a", Target: "b", Epoch: 2, Fence: []string{"a"}}
	if err := g.failover(d).revoke(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ra := g.rec.InFlight.RevokedAt; !ra.After(savedAt) {
		t.Fatalf("RevokedAt %v is not after the durable write at %v", ra, savedAt)
	}
	// A new leader (or a restarted daemon) loading it: its own clock.
	loadedAt := clock()
	if err := g.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ra := g.rec.InFlight.RevokedAt; ra.Before(loadedAt) {
		t.Fatalf("after load RevokedAt %v is before the load at %v", ra, loadedAt)
	}
}

// onDrainTimeout=promote may give up what only the candidate received, never
// what another reachable replica also holds (acknowledged under semi-sync).
func TestDrainTimeoutPromoteKeepsWhatAPeerHolds(t *testing.T) {
	ms := newTestStore(t)
	g, ops := testGroup(t, ms, "b", clockAt(t0))
	g.cfg.OnDrainTimeout, g.servers.group.OnDrainTimeout = "promote", "promote"
	md := func(s string) gtid.Set { return gtid.MustParse(gtid.MariaDB, s) }
	g.servers.conns.dial = func(_ context.Context, s configs.Site) (Instance, error) {
		f := fakeInstance{site: s.Name, log: ops, executed: md("0-1-10")}
		if s.Name == "b" {
			f.retrieved, f.drainErr = md("0-1-12"), mysqlctl.ErrDrainTimeout
		}
		return f, nil
	}
	observe := func(cHas string) fixedObs {
		return fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
			{Name: "a", State: statemachine.Unreachable},
			{Name: "b", State: statemachine.ReadOnly, Executed: md("0-1-10"), Retrieved: md("0-1-12")},
			{Name: "c", State: statemachine.ReadOnly, Executed: md(cHas)},
		}}}
	}
	g.obs = observe("0-1-11") // c received 0-1-11, which b has not applied
	err := g.failover(promoteDecision("b")).promote(context.Background())
	if !errors.Is(err, ErrDrainAborted) {
		t.Fatalf("promote: %v, want ErrDrainAborted (c holds 0-1-11)", err)
	}
	if ops.has("b:writable") || !ops.has("b:start-io") {
		t.Fatalf("b made writable, or its IO thread not restarted: %v", ops)
	}
	ops.mu.Lock()
	ops.ops = nil
	ops.mu.Unlock()
	g.obs = observe("0-1-10") // nobody else has more: the loss is accepted
	if err := g.failover(promoteDecision("b")).promote(context.Background()); err != nil {
		t.Fatalf("promote accepting the loss of what only b received: %v", err)
	}
	if !ops.has("b:writable") {
		t.Fatalf("b not made writable: %v", ops)
	}
}

// The view naming the target is persisted and served before the target is
// made writable, and the promotion waits until the target's sidecar holds
// it: a sidecar still holding the revoking view would fence the new primary.
func TestPromotionPublishesBeforeWritable(t *testing.T) {
	ms := newTestStore(t)
	g, ops := testGroup(t, ms, "b", clockAt(t0))
	g.cfg.Sites[1].Sidecar = &configs.Endpoint{Address: "127.0.0.1:1"}
	g.cfg.Sidecar.CheckInterval = time.Minute // the wait ends by the report, not the bound
	g.sidecars = newSidecars(g.cfg)
	g.pub = &publisher{key: []byte("k")}
	published := make(chan struct{})
	ms.onSave = func(st store.GroupState) {
		if st.InFlight != nil && st.InFlight.Step == StepPublished {
			if st.InFlight.PublishedTo != "b" || st.InFlight.PublishedEpoch != 3 {
				t.Errorf("published %q at %d, want b at 3", st.InFlight.PublishedTo, st.InFlight.PublishedEpoch)
			}
			close(published)
		}
	}
	done := make(chan error, 1)
	go func() { done <- g.failover(promoteDecision("b")).promote(context.Background()) }()
	<-published
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s, ok := g.pub.get("g"); ok && s.View.Epoch == 3 && s.View.ActiveSite == "b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the view naming b at epoch 3 was not served before b became writable")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ops.has("b:writable") {
		t.Fatalf("b made writable before its sidecar held the view: %v", ops)
	}
	g.sidecars.record(view.Report{Site: "b", Epoch: 3, MySQLdUp: true}, t0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !ops.has("b:writable") || g.rec.ActiveSite != "b" || g.rec.Epoch != 3 {
		t.Fatalf("after the sidecar caught up: ops %v, state %+v", ops, g.rec.Persisted)
	}
}
