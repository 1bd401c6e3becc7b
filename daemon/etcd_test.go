package daemon

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/test/testenv"
)

// pausingStore runs before() between a decision and its write: the window
// in which a leader can be deposed without knowing it.
type pausingStore struct {
	store.Store
	before func()
}

func (p pausingStore) Save(ctx context.Context, st store.GroupState) error {
	p.before()
	return p.Store.Save(ctx, st)
}

// A leader deposed between deciding and writing (its etcd session ended,
// another daemon elected and wrote) has its delayed write refused by the
// store: the fencing token no longer holds, whatever it decided.
func TestDeposedLeaderDelayedWriteIsRefused(t *testing.T) {
	ctx := context.Background()
	c := testenv.StartEtcdCluster(t, 1)
	cli := c.Client(t)
	const prefix = "/failoverd/test"
	mine := store.NewEtcd(cli, prefix, time.Now)
	s1, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	e1 := concurrency.NewElection(s1, prefix+"/leader")
	if err := e1.Campaign(ctx, "old-leader"); err != nil {
		t.Fatal(err)
	}
	mine.SetToken(store.Token{Key: e1.Key(), Rev: e1.Rev()})

	depose := func() {
		// The old leader's session ends (partition, GC pause...): another
		// daemon wins the election and writes first.
		if err := s1.Close(); err != nil {
			t.Error(err)
		}
		s2, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
		if err != nil {
			t.Fatal(err)
		}
		e2 := concurrency.NewElection(s2, prefix+"/leader")
		if err := e2.Campaign(ctx, "new-leader"); err != nil {
			t.Fatal(err)
		}
		theirs := store.NewEtcd(cli, prefix, time.Now)
		theirs.SetToken(store.Token{Key: e2.Key(), Rev: e2.Rev()})
		if _, err := theirs.Load(ctx, "g"); err != nil {
			t.Fatal(err)
		}
		if err := theirs.Save(ctx, store.GroupState{Group: "g", Epoch: 7, ActiveSite: "b", UpdatedBy: "new-leader"}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := configs.Group{Name: "g", Engine: configs.EngineMariaDB, Sites: []configs.Site{{Name: "a"}, {Name: "b"}}}
	g := &group{cfg: cfg, flavor: gtid.MariaDB, policy: sitepair.DefaultPolicy(), store: pausingStore{Store: mine, before: depose}, pub: &publisher{},
		now: time.Now, log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg), identity: "old-leader", actionTimeout: time.Minute}
	if err := g.load(ctx); err != nil {
		t.Fatal(err)
	}
	g.obs = fixedObs{o: sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Writable},
		{Name: "b", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, ReplicatingFrom: "a", IOConnected: true},
	}}}
	g.round(ctx, time.Now()) // decides adopt-primary a, pauses, writes
	if g.last.Action != sitepair.AdoptPrimary {
		t.Fatalf("decision %s (%s), want adopt-primary", g.last.Action, g.last.Message)
	}
	if !errors.Is(g.lastErr, store.ErrNotLeader) {
		t.Fatalf("the delayed write returned %v, want store.ErrNotLeader", g.lastErr)
	}
	got, err := store.NewEtcd(cli, prefix, time.Now).Load(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if got.Epoch != 7 || got.ActiveSite != "b" || got.UpdatedBy != "new-leader" {
		t.Fatalf("stored %+v, want the new leader's epoch 7 naming b", got)
	}
}
