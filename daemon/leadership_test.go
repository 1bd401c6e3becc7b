package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/store"
)

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
