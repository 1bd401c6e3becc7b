package daemon

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
)

// After a total loss the replicas come back with replication stopped
// (skip_replica_start): re-asserting the primary starts again those still
// configured to it, and leaves alone a replica that runs, one stopped on an
// error and a diverged one.
func TestReassertRestartsStoppedReplicas(t *testing.T) {
	cfg := configs.Group{Name: "g", Engine: configs.EngineMySQL,
		Sites: []configs.Site{{Name: "a", MySQL: configs.MySQLEndpoint{Address: "10.0.0.1:3306"}}, {Name: "b"}, {Name: "c"}, {Name: "d"}, {Name: "e"}}}
	ops := &opLog{}
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	dial := func(_ context.Context, s configs.Site) (Instance, error) {
		return fakeInstance{site: s.Name, log: ops, executed: exec}, nil
	}
	ms := newTestStore(t, store.GroupState{Group: "g", Epoch: 2, ActiveSite: "a",
		Diverged: map[string]string{"e": "0-5-1"}})
	g := &group{cfg: cfg, flavor: gtid.MariaDB, policy: sitepair.DefaultPolicy(), store: ms, pub: &publisher{}, now: clockAt(t0),
		log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg)}
	g.servers = &servers{group: cfg, conns: newConnections(dial, cfg.Sites), log: g.log, secret: func() (string, error) { return "pw", nil }}
	if err := g.load(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", State: statemachine.ReadOnly, Executed: exec},
		{Name: "b", Index: 1, State: statemachine.ReadOnly, ReplicatingFrom: "a", IOStopped: true, Executed: exec},
		{Name: "c", Index: 2, State: statemachine.ReadOnly, ReplicatingFrom: "a", Executed: exec},
		{Name: "d", Index: 3, State: statemachine.ReadOnly, ReplicatingFrom: "a", IOStopped: true, ReplicationBroken: true, Executed: exec},
		{Name: "e", Index: 4, State: statemachine.ReadOnly, ReplicatingFrom: "a", IOStopped: true, Executed: exec},
	}}}
	d := sitepair.Decision{Action: sitepair.ReassertPrimary, Reason: sitepair.ReasonReassertPrimary, Target: "a", Epoch: 3}
	if err := g.act(t.Context(), t.Context(), d); err != nil {
		t.Fatal(err)
	}
	if !ops.has("a:writable") || !ops.has("b:repoint") {
		t.Fatalf("ops %v: want a made writable and b repointed", ops)
	}
	for _, s := range []string{"c", "d", "e"} {
		if ops.has(s + ":repoint") {
			t.Errorf("ops %v: %s repointed", ops, s)
		}
	}
}

// Every path that makes a site writable re-reads the store first: a
// re-assert (the all-read-only one, and the catch-up give-back that abandons
// a failover) decided on a state another daemon has since moved on from
// makes nothing writable, and the group reloads what the other daemon wrote.
func TestReassertRefusedWhenTheStoreMovedOn(t *testing.T) {
	for _, tc := range []struct {
		name string
		// inFlight: the failover a → b the give-back abandons.
		inFlight bool
		d        sitepair.Decision
	}{
		{"reassert-primary", false, sitepair.Decision{Action: sitepair.ReassertPrimary, Reason: sitepair.ReasonReassertPrimary, Target: "a", Epoch: 3}},
		{"catch-up give-back", true, sitepair.Decision{Action: sitepair.ReassertPrimary, Reason: sitepair.ReasonCatchUpTimeout, Target: "a", Epoch: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := newTestStore(t)
			g, ops := testGroup(t, ms, "b", clockAt(t0))
			if !tc.inFlight {
				ms = newTestStore(t, store.GroupState{Group: "g", Epoch: 2, ActiveSite: "a"})
				g.store = ms
				if err := g.load(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			g.obs = fixedObs{}
			// Another daemon (a leadership overlap) promoted b meanwhile.
			ms.put(t, store.GroupState{Group: "g", Epoch: 3, ActiveSite: "b"})
			err := g.act(t.Context(), t.Context(), tc.d)
			if !errors.Is(err, ErrSuperseded) {
				t.Errorf("re-assert: %v, want ErrSuperseded", err)
			}
			if ops.has("a:writable") {
				t.Errorf("a made writable although another daemon promoted b at epoch 3: %v", ops)
			}
			if g.rec.Epoch != 3 || g.rec.ActiveSite != "b" {
				t.Errorf("state not reloaded: %+v", g.rec.Persisted)
			}
		})
	}
}

// A re-assert may come before the replicas are back (a total loss whose
// sites return one by one: the recorded primary is re-asserted as soon as
// it answers read-only, a replica never made writable does not block it).
// Each replica is restarted once it is seen back with its replication
// stopped; one seen replicating is left alone from then on (an operator
// may stop it), and a later epoch ends the restarts. Before the fix the
// restart ran once, at the re-assert, and the replicas that came back
// later stayed stopped for ever (the e2e total-loss scenario, mysql,
// waited 45 s on degraded-not-following).
func TestReassertRestartsReplicasThatComeBackLater(t *testing.T) {
	cfg := configs.Group{Name: "g", Engine: configs.EngineMySQL,
		Sites: []configs.Site{{Name: "a", MySQL: configs.MySQLEndpoint{Address: "10.0.0.1:3306"}}, {Name: "b"}, {Name: "c"}, {Name: "d"}}}
	ops := &opLog{}
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	dial := func(_ context.Context, s configs.Site) (Instance, error) {
		return fakeInstance{site: s.Name, log: ops, executed: exec}, nil
	}
	ms := newTestStore(t, store.GroupState{Group: "g", Epoch: 2, ActiveSite: "a"})
	g := &group{cfg: cfg, flavor: gtid.MariaDB, policy: sitepair.DefaultPolicy(), store: ms, pub: &publisher{}, now: clockAt(t0),
		log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg)}
	g.servers = &servers{group: cfg, conns: newConnections(dial, cfg.Sites), log: g.log, secret: func() (string, error) { return "pw", nil }}
	if err := g.load(t.Context()); err != nil {
		t.Fatal(err)
	}
	site := func(name string, i int, st statemachine.State, ioStopped bool) sitepair.SiteObservation {
		s := sitepair.SiteObservation{Name: name, Index: i, State: st, Executed: exec}
		if st == statemachine.ReadOnly && i > 0 {
			s.ReplicatingFrom, s.IOStopped = "a", ioStopped
		}
		return s
	}
	observe := func(b, c, d sitepair.SiteObservation) {
		g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{site("a", 0, statemachine.Writable, false), b, c, d}}}
	}
	g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
		site("a", 0, statemachine.ReadOnly, false),
		site("b", 1, statemachine.Unreachable, false),
		site("c", 2, statemachine.Unreachable, false),
		site("d", 3, statemachine.Unreachable, false),
	}}}
	d := sitepair.Decision{Action: sitepair.ReassertPrimary, Reason: sitepair.ReasonReassertPrimary, Target: "a", Epoch: 3}
	if err := g.act(t.Context(), t.Context(), d); err != nil {
		t.Fatal(err)
	}
	if ops.has("b:repoint") || ops.has("c:repoint") || ops.has("d:repoint") {
		t.Fatalf("ops %v: an unreachable replica repointed", ops)
	}
	// b comes back stopped, c comes back replicating, d is still away.
	observe(site("b", 1, statemachine.ReadOnly, true), site("c", 2, statemachine.ReadOnly, false), site("d", 3, statemachine.Unreachable, false))
	g.restartPendingReplicas(t.Context())
	if !ops.has("b:repoint") {
		t.Fatalf("ops %v: b, back with its replication stopped, not restarted", ops)
	}
	// An operator stops c afterwards: that is theirs, not the loss's.
	observe(site("b", 1, statemachine.ReadOnly, false), site("c", 2, statemachine.ReadOnly, true), site("d", 3, statemachine.Unreachable, false))
	g.restartPendingReplicas(t.Context())
	if ops.has("c:repoint") {
		t.Errorf("ops %v: c, seen replicating after the re-assert, restarted after an operator stopped it", ops)
	}
	// Another epoch (a failover meanwhile): d is none of this re-assert's business.
	g.mu.Lock()
	g.rec.Epoch = 4
	g.mu.Unlock()
	observe(site("b", 1, statemachine.ReadOnly, false), site("c", 2, statemachine.ReadOnly, true), site("d", 3, statemachine.ReadOnly, true))
	g.restartPendingReplicas(t.Context())
	if ops.has("d:repoint") {
		t.Errorf("ops %v: d restarted for a re-assert a later epoch superseded", ops)
	}
}
