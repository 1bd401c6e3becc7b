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
	"github.com/failoverd/failoverd/view"
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
	if d := sitepair.Decide(g.observed(time.Time{}), g.state, g.policy, g.now()); d.Action != sitepair.Promote {
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

// Another daemon wrote a newer state: the next step notices and stops.
func TestPromotionStopsWhenTheStoreMovedOn(t *testing.T) {
	ms := newTestStore(t)
	g, ops := testGroup(t, ms, "b", clockAt(t0))
	ms.onSave = func(st store.GroupState) {
		if st.InFlight != nil && st.InFlight.Step == StepRelayDrained {
			ms.put(t, store.GroupState{Group: "g", Epoch: 3, ActiveSite: "c"})
		}
	}
	err := g.promote(context.Background(), promoteDecision("b"))
	if !errors.Is(err, ErrSuperseded) {
		t.Fatalf("promote: %v, want ErrSuperseded", err)
	}
	if ops.has("b:writable") {
		t.Fatalf("b made writable although another daemon promoted c: %v", ops)
	}
	if g.state.Epoch != 3 || g.state.ActiveSite != "c" {
		t.Fatalf("state not reloaded: %+v", g.state)
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
	err := g.promote(context.Background(), promoteDecision("b"))
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
	if err := g.promote(context.Background(), promoteDecision("c")); err != nil {
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
	g.state = sitepair.Persisted{Epoch: 1, ActiveSite: "a"}
	g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", State: statemachine.ReadOnly}, {Name: "b", Index: 1, State: statemachine.ReadOnly},
	}}}
	var savedAt time.Time
	ms.onSave = func(store.GroupState) { savedAt = clock() }
	d := sitepair.Decision{Action: sitepair.RevokeEpoch, Reason: sitepair.ReasonFailoverRevoke, From: "a", Target: "b", Epoch: 2, Fence: []string{"a"}}
	if err := g.revoke(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if ra := g.state.InFlight.RevokedAt; !ra.After(savedAt) {
		t.Fatalf("RevokedAt %v is not after the durable write at %v", ra, savedAt)
	}
	// A new leader (or a restarted daemon) loading it: its own clock.
	loadedAt := clock()
	if err := g.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ra := g.state.InFlight.RevokedAt; ra.Before(loadedAt) {
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
	err := g.promote(context.Background(), promoteDecision("b"))
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
	if err := g.promote(context.Background(), promoteDecision("b")); err != nil {
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
	go func() { done <- g.promote(context.Background(), promoteDecision("b")) }()
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
	if !ops.has("b:writable") || g.state.ActiveSite != "b" || g.state.Epoch != 3 {
		t.Fatalf("after the sidecar caught up: ops %v, state %+v", ops, g.state)
	}
}

// flakyStore fails the first fails Loads, then answers from store.Memory.
type flakyStore struct {
	*store.Memory
	mu    sync.Mutex
	fails int
}

func (f *flakyStore) Load(ctx context.Context, g string) (store.GroupState, error) {
	f.mu.Lock()
	if f.fails > 0 {
		f.fails--
		f.mu.Unlock()
		return store.GroupState{}, errors.New("apiserver unavailable")
	}
	f.mu.Unlock()
	return f.Memory.Load(ctx, g)
}

// A new leader that cannot read the persisted state retries, and if it
// still cannot, gives the Lease up instead of leading without acting.
func TestNewLeaderRetriesLoadThenResigns(t *testing.T) {
	defer func(d time.Duration) { leaderLoadRetry = d }(leaderLoadRetry)
	leaderLoadRetry = time.Millisecond
	for _, c := range []struct {
		fails   int
		leading bool
	}{{fails: leaderLoadAttempts - 1, leading: true}, {fails: leaderLoadAttempts, leading: false}} {
		fs := &flakyStore{Memory: store.NewMemory(time.Now), fails: c.fails}
		cfg := configs.Group{Name: "g", Engine: configs.EngineMariaDB, Sites: []configs.Site{{Name: "a"}, {Name: "b"}}}
		g := &group{cfg: cfg, flavor: gtid.MariaDB, store: fs, pub: &publisher{}, now: time.Now, log: slog.New(slog.DiscardHandler), sidecars: newSidecars(cfg)}
		d := &Daemon{log: slog.New(slog.DiscardHandler), groups: []*group{g}, opts: Options{Clock: time.Now}}
		resigned := false
		d.startTerm(context.Background(), func() { resigned = true }, nil)
		if d.isLeader() != c.leading || resigned == c.leading {
			t.Errorf("%d failed loads: leading %t resigned %t, want leading %t", c.fails, d.isLeader(), resigned, c.leading)
		}
	}
}
