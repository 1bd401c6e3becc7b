package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
)

// watchedStore is store.Memory (the durable stores' write rules) that
// calls onSave after every write it took: a test sees the daemon's writes,
// or has another daemon write right after one.
type watchedStore struct {
	*store.Memory
	onSave func(store.GroupState)
}

// newTestStore is a watchedStore holding states.
func newTestStore(t *testing.T, states ...store.GroupState) *watchedStore {
	t.Helper()
	ws := &watchedStore{Memory: store.NewMemory(time.Now)}
	for _, st := range states {
		ws.put(t, st)
	}
	return ws
}

func (w *watchedStore) Save(ctx context.Context, st store.GroupState) error {
	if err := w.Memory.Save(ctx, st); err != nil {
		return err
	}
	if w.onSave != nil {
		w.onSave(st)
	}
	return nil
}

// put writes st as another daemon would (onSave is not called).
func (w *watchedStore) put(t *testing.T, st store.GroupState) {
	t.Helper()
	if err := w.Memory.Save(context.Background(), st); err != nil {
		t.Fatalf("test store: %v", err)
	}
}

// fakeInstance records the operations the daemon runs on one site.
type fakeInstance struct {
	Instance // operations a test does not expect panic
	site     string
	log      *opLog
	executed gtid.Set
	// retrieved, when set, makes the site a replica that received it.
	retrieved gtid.Set
	drainErr  error
}

func (l *opLog) has(op string) bool { return contains(l.list(), op) }

func (l *opLog) String() string { return fmt.Sprint(l.list()) }

func (f fakeInstance) note(op string) { f.log.add(context.Background(), f.site+":"+op) }

func (f fakeInstance) Status(context.Context) (mysqlctl.Status, error) {
	f.note("status")
	st := mysqlctl.Status{Executed: f.executed, ReadOnly: true}
	if !f.retrieved.IsEmpty() {
		st.Replica = &mysqlctl.ReplicaStatus{IOThread: mysqlctl.ThreadNo, SQLThread: mysqlctl.ThreadYes, Retrieved: f.retrieved}
	}
	return st, nil
}
func (f fakeInstance) Fence(context.Context) error { f.note("fence"); return nil }
func (f fakeInstance) KillClientConnections(context.Context) (int, error) {
	f.note("kill")
	return 0, nil
}
func (f fakeInstance) StopReplica(context.Context) error    { f.note("stop"); return nil }
func (f fakeInstance) StopReplicaIO(context.Context) error  { f.note("stop-io"); return nil }
func (f fakeInstance) StartReplicaIO(context.Context) error { f.note("start-io"); return nil }
func (f fakeInstance) SetSemiSync(context.Context, bool, bool) error {
	f.note("semisync")
	return nil
}
func (f fakeInstance) WaitRelayDrained(context.Context, gtid.Set, time.Duration) error {
	f.note("drain")
	return f.drainErr
}
func (f fakeInstance) ResetReplicaAll(context.Context) error { f.note("reset"); return nil }
func (f fakeInstance) Promote(context.Context) error         { f.note("writable"); return nil }
func (f fakeInstance) Close() error                          { return nil }
func (f fakeInstance) ReplicateFrom(context.Context, mysqlctl.Source) error {
	f.note("repoint")
	return nil
}

// testGroup builds a 2-site MariaDB group a → b with a failover in flight
// (epoch 2 revoked, target to) on st.
func testGroup(t *testing.T, st *watchedStore, to string, clock func() time.Time) (*group, *opLog) {
	t.Helper()
	cfg := configs.Group{Name: "g", Engine: configs.EngineMariaDB, RelayDrainTimeout: time.Second,
		Sites: []configs.Site{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	ops := &opLog{}
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	dial := func(_ context.Context, s configs.Site) (Instance, error) {
		return fakeInstance{site: s.Name, log: ops, executed: exec}, nil
	}
	g := &group{cfg: cfg, flavor: gtid.MariaDB, policy: sitepair.DefaultPolicy(), store: st, pub: &publisher{}, now: clock,
		log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg)}
	g.servers = &servers{group: cfg, conns: newConnections(dial, cfg.Sites), log: g.log}
	st.put(t, store.GroupState{Group: "g", Epoch: 2, InFlight: &store.InFlight{
		ID: "g-2", Kind: kindFailover, From: "a", To: to, RevokedEpoch: 2, RevokedAt: clock(), Step: StepRevoked, StepDone: true}})
	if err := g.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return g, ops
}

func promoteDecision(target string) sitepair.Decision {
	return sitepair.Decision{Action: sitepair.Promote, Reason: sitepair.ReasonPromote, From: "a", Target: target, Epoch: 3,
		FenceProof: sitepair.ProofPrimaryDown, PromotionGTID: gtid.MustParse(gtid.MariaDB, "0-1-10")}
}

func clockAt(t time.Time) func() time.Time {
	var mu sync.Mutex
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

func contains(ops []string, op string) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

// fixedObs always observes the same group.
type fixedObs struct{ o sitepair.Observed }

func (f fixedObs) Observed() sitepair.Observed {
	o := f.o
	o.Sites = append([]sitepair.SiteObservation(nil), f.o.Sites...)
	return o
}
func (fixedObs) Settled(time.Time) bool { return true }

// A leader that lost its Lease must not go on: the loop runs every action
// under the term's context, so the promotion stops at its next step, before
// anything is made writable.
func TestPromotionStopsWhenLeadershipIsLost(t *testing.T) {
	ms := newTestStore(t)
	g, ops := testGroup(t, ms, "b", clockAt(t0))
	g.cfg.PollInterval = 200 * time.Millisecond
	g.actionTimeout = time.Minute
	g.requests = make(chan request)
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Unreachable, RefusedProbes: 2, Executed: exec},
		{Name: "b", Role: sitepair.PrimaryCandidate, Index: 1, State: statemachine.ReadOnly, ReplicatingFrom: "a", LagKnown: true, Executed: exec},
		{Name: "c", Role: sitepair.PrimaryCandidate, Index: 2, State: statemachine.ReadOnly, ReplicatingFrom: "a", LagKnown: true, Executed: exec},
	}}}
	if d := sitepair.Decide(g.observed(time.Time{}), g.rec.Persisted, g.policy, g.now()); d.Action != sitepair.Promote {
		t.Fatalf("test setup: decision %s, want promote", d)
	}
	loop, stop := context.WithCancel(context.Background())
	defer stop()
	term, lose := context.WithCancel(loop)
	drained := make(chan struct{})
	ms.onSave = func(st store.GroupState) {
		if st.InFlight != nil && st.InFlight.Step == StepRelayDrained {
			lose() // the Lease is lost right after the drain was recorded
			close(drained)
		}
	}
	lead := func() (context.Context, time.Time, bool) {
		if term.Err() != nil {
			return nil, time.Time{}, false
		}
		return term, t0, true
	}
	done := make(chan struct{})
	go func() { g.run(loop, lead); close(done) }()
	<-drained
	time.Sleep(300 * time.Millisecond) // a few loop ticks
	stop()
	<-done
	g.mu.Lock()
	defer g.mu.Unlock()
	if ops.has("b:writable") {
		t.Fatalf("a deposed leader made b writable: %v", ops)
	}
	if !errors.Is(g.lastErr, context.Canceled) {
		t.Fatalf("last action error %v, want context.Canceled", g.lastErr)
	}
}
