package dragonfly

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
)

// Cache-only failures, converged by the reconcile loop's repeated Follow of
// the same view (the active site's MySQL did not move).
func TestFollowConvergesAfterCacheRestart(t *testing.T) {
	tests := []struct {
		name  string
		crash func(fx *fixture) // site0 is the active master, 1 and 2 its replicas
	}{
		{"active restarted empty as a master", func(fx *fixture) {
			fx.srv[0].set(func(s *fakeServer) { s.offset = 0 })
		}},
		{"active restarted as a replica of its own replica", func(fx *fixture) {
			fx.srv[0].set(func(s *fakeServer) { s.replicate(fx.srv[1]) })
		}},
		{"active restarted as a replica of another server", func(fx *fixture) {
			other := fx.net.add("old.test:6379", fx.srv[0].dragonfly)
			fx.srv[0].set(func(s *fakeServer) { s.replicate(other) })
		}},
		{"non-active restarted as a master", func(fx *fixture) {
			fx.srv[2].set(func(s *fakeServer) { s.role, s.master, s.offset = roleMaster, "", 0 })
		}},
	}
	for _, engine := range []string{configs.CacheRedis, configs.CacheDragonfly} {
		for _, tt := range tests {
			t.Run(engine+" "+tt.name, func(t *testing.T) {
				fx := newFixture(t, engine, 3, func(c *configs.Cache) {
					c.OnSyncTimeout, c.MaxSyncWait = "fail", 20*time.Millisecond
				})
				tt.crash(fx)
				// One follow converges; the next sends nothing.
				if err := fx.follow(t, "site0"); err != nil {
					t.Fatalf("Follow: %v", err)
				}
				fx.wantTopology(t, 0, 1, 2)
				fx.net.commands()
				if err := fx.follow(t, "site0"); err != nil {
					t.Fatalf("Follow again: %v", err)
				}
				wantCommands(t, fx.net.commands(), nil)
			})
		}
	}
}

// The active site's cache is killed alone (MySQL stays), then restarted:
// the reconcile loop's Follow calls of the unchanged view converge.
func TestRealRedisActiveCacheKilledAndRestarted(t *testing.T) {
	for _, asReplica := range []bool{false, true} {
		name := "restarted empty as a master"
		if asReplica {
			name = "restarted as a replica of its own replica"
		}
		t.Run(name, func(t *testing.T) {
			caches := startCaches(t, 3)
			f, _ := newRealFollower(t, realGroup(caches, func(c *configs.Cache) { c.MaxSyncWait = time.Second }))
			if err := follow(t, f, "site0"); err != nil {
				t.Fatalf("Follow before the crash: %v", err)
			}
			if err := caches[0].Kill(); err != nil {
				t.Fatal(err)
			}
			if err := follow(t, f, "site0"); !errors.Is(err, ErrUnreachable) {
				t.Fatalf("Follow with the active cache down = %v, want ErrUnreachable", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := caches[0].Restart(ctx); err != nil {
				t.Fatal(err)
			}
			if asReplica {
				// As a supervisor with a stale replicaof setting would.
				if err := caches[0].Client(t).ReplicaOf(ctx, caches[1].Host, strconv.Itoa(caches[1].Port)).Err(); err != nil {
					t.Fatal(err)
				}
			}
			// The reconcile loop re-runs Follow; a few runs at most.
			var err error
			for range 5 {
				if err = follow(t, f, "site0"); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("Follow after the restart: %v", err)
			}
			wantRole(t, caches[0], "master")
			set(t, caches[0], "after", "restart")
			for _, i := range []int{1, 2} {
				waitReplicating(t, caches[i].Name, caches[i].Client(t), caches[0].Port)
				caches[i].WaitInSync(t, caches[0], 30*time.Second)
				if v := get(t, caches[i], "after"); v != "restart" {
					t.Errorf("after on site%d = %q, want restart", i, v)
				}
			}
		})
	}
}
