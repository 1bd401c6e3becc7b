package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/dragonfly"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/view"
)

// fakeCache is a cache follower that records switchovers.
type fakeCache struct {
	err   error
	moves []string
}

func (f *fakeCache) Name() string                            { return dragonfly.FollowerName }
func (f *fakeCache) Follow(context.Context, view.View) error { return nil }
func (f *fakeCache) Switchover(_ context.Context, from, to string) (dragonfly.SwitchoverResult, error) {
	f.moves = append(f.moves, from+"->"+to)
	if f.err != nil {
		return dragonfly.SwitchoverResult{}, f.err
	}
	return dragonfly.SwitchoverResult{Synced: true, SessionsPreserved: true, SyncWait: time.Millisecond}, nil
}

// A planned switchover moves the cache before MySQL is touched; a cache
// that cannot follow (onSyncTimeout=fail) refuses the switchover with
// nothing changed: no revoke, no fence.
func TestSwitchoverMovesTheCacheFirst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		taken bool
	}{
		{"cache follows: switchover goes on", nil, true},
		{"cache cannot follow: refused, nothing touched", fmt.Errorf("promote cache b: %w", dragonfly.ErrSyncTimeout), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := newTestStore(t, store.GroupState{Group: "g", Epoch: 1, ActiveSite: "a"})
			cfg := configs.Group{Name: "g", Engine: configs.EngineMariaDB, RelayDrainTimeout: time.Second,
				Cache: &configs.Cache{MaxSyncWait: time.Second}, Sites: []configs.Site{{Name: "a"}, {Name: "b"}}}
			ops := &opLog{}
			exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
			dial := func(_ context.Context, s configs.Site) (Instance, error) {
				return fakeInstance{site: s.Name, log: ops, executed: exec}, nil
			}
			g := &group{cfg: cfg, flavor: gtid.MariaDB, policy: sitepair.DefaultPolicy(), store: ms, pub: &publisher{}, now: clockAt(t0),
				log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg), actionTimeout: time.Minute}
			g.servers = &servers{group: cfg, conns: newConnections(dial, cfg.Sites), log: g.log}
			cache := &fakeCache{err: tc.err}
			g.follow = newHandoff([]Follower{cache}, g.log)
			if err := g.load(context.Background()); err != nil {
				t.Fatal(err)
			}
			g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
				{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Writable, Executed: exec},
				{Name: "b", Role: sitepair.PrimaryCandidate, Index: 1, State: statemachine.ReadOnly, ReplicatingFrom: "a", IOConnected: true, LagKnown: true, Executed: exec},
			}}}
			lead := func() (context.Context, time.Time, bool) { return context.Background(), t0, true }
			err := g.handle(request{kind: kindSwitchover, target: "b", by: "ann"}, lead)
			if len(cache.moves) != 1 || cache.moves[0] != "a->b" {
				t.Fatalf("cache moves %v, want [a->b]", cache.moves)
			}
			st, _ := ms.Load(context.Background(), "g")
			if !tc.taken {
				if !errors.Is(err, ErrRefused) || !errors.Is(err, dragonfly.ErrSyncTimeout) {
					t.Fatalf("err %v, want a refusal wrapping ErrSyncTimeout", err)
				}
				if st.Epoch != 1 || st.ActiveSite != "a" || st.InFlight != nil || ops.has("a:fence") {
					t.Fatalf("a refused switchover changed something: %+v, ops %v", st, ops)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.InFlight == nil || st.InFlight.To != "b" {
				t.Fatalf("no revoke after the cache moved: %+v", st)
			}
			if m := g.snapshot(g.now()).CacheSwitchover; m == nil || !m.SessionsPreserved || m.To != "b" {
				t.Fatalf("status of the cache move: %+v", m)
			}
		})
	}
}
