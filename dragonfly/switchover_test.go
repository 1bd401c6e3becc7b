package dragonfly

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
)

func (fx *fixture) switchover(t *testing.T, from, to string) (SwitchoverResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return fx.f.Switchover(ctx, from, to)
}

func TestSwitchoverPreservesSessions(t *testing.T) {
	tests := []struct {
		name     string
		engine   string
		staysUp  bool // Dragonfly's old master stays up as a replica
		wantCmds []string
		wantDown bool // the old master is down afterwards
	}{
		{"redis", configs.CacheRedis, false, []string{
			"cache0.test:6379 FAILOVER TO cache1.test 6379 TIMEOUT 60000",
			"cache0.test:6379 CLIENT KILL TYPE normal",
		}, false},
		{"dragonfly, old master shuts down", configs.CacheDragonfly, false, []string{
			"cache1.test:6379 REPLTAKEOVER 60",
		}, true},
		{"dragonfly, old master becomes a replica", configs.CacheDragonfly, true, []string{
			"cache1.test:6379 REPLTAKEOVER 60",
			"cache0.test:6379 CLIENT KILL TYPE normal",
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, tt.engine, 3, nil)
			fx.srv[0].set(func(s *fakeServer) { s.clients, s.takeoverStaysUp = 5, tt.staysUp })
			for range 10 {
				if err := fx.srv[0].write(); err != nil {
					t.Fatal(err)
				}
			}
			fx.srv[1].lag(3) // the wait, then the takeover, carry it to the offset
			res, err := fx.switchover(t, "site0", "site1")
			if err != nil {
				t.Fatalf("Switchover: %v", err)
			}
			if !res.Synced || !res.SessionsPreserved || res.AlreadyThere {
				t.Errorf("result = %+v, want synced and sessions preserved", res)
			}
			wantCommands(t, fx.net.commands(), tt.wantCmds)
			if fx.srv[1].promotedBehind != 0 {
				t.Errorf("site1 promoted %d behind its master", fx.srv[1].promotedBehind)
			}
			if tt.wantDown {
				fx.wantTopology(t, 1)
				if fx.srv[0].write() == nil {
					t.Errorf("old Dragonfly master still acknowledges writes")
				}
			} else {
				fx.wantTopology(t, 1, 0)
				if fx.srv[0].clients != 0 {
					t.Errorf("old master keeps %d normal clients", fx.srv[0].clients)
				}
				if err := fx.srv[0].write(); err == nil || !strings.Contains(err.Error(), "READONLY") {
					t.Errorf("write on the old master = %v, want READONLY", err)
				}
			}
			if !strings.Contains(fx.logs.String(), "phase="+PhasePromotingCache) {
				t.Errorf("phase not logged:\n%s", fx.logs)
			}

			// Idempotent: the same switchover again sends nothing.
			res, err = fx.switchover(t, "site0", "site1")
			if err != nil || !res.AlreadyThere {
				t.Fatalf("repeated Switchover = %+v, %v; want AlreadyThere", res, err)
			}
			wantCommands(t, fx.net.commands(), nil)
		})
	}
}

func TestSwitchoverNotInSync(t *testing.T) {
	neverCatchesUp := func(fx *fixture) { fx.srv[1].lag(-1) }
	neverStable := func(fx *fixture) {
		fx.srv[1].set(func(s *fakeServer) { s.stuck = true; s.replicate(fx.srv[0]) })
	}
	replicaOfAnother := func(fx *fixture) { fx.srv[1].set(func(s *fakeServer) { s.replicate(fx.srv[2]) }) }
	takeoverTimesOut := func(fx *fixture) {
		// In stable sync, but behind for good: REPLTAKEOVER's own wait fails.
		fx.srv[1].set(func(s *fakeServer) { s.replOffset, s.catchUpAfter = 1, -1 })
	}
	forced := []string{
		"cache1.test:6379 REPLICAOF NO ONE",
		"cache0.test:6379 REPLICAOF cache1.test 6379",
		"cache0.test:6379 CLIENT KILL TYPE normal",
	}
	tests := []struct {
		name   string
		engine string
		setup  func(fx *fixture)
		// sent before the refusal/fallback
		tried []string
	}{
		{"redis lagging", configs.CacheRedis, neverCatchesUp, nil},
		{"redis replica of another server", configs.CacheRedis, replicaOfAnother, nil},
		{"dragonfly never in stable sync", configs.CacheDragonfly, neverStable, nil},
		{"dragonfly takeover times out", configs.CacheDragonfly, takeoverTimesOut, []string{"cache1.test:6379 REPLTAKEOVER 1"}},
	}
	for _, tt := range tests {
		for _, policy := range []string{"fail", "proceed"} {
			t.Run(tt.name+" "+policy, func(t *testing.T) {
				fx := newFixture(t, tt.engine, 3, func(c *configs.Cache) {
					c.MaxSyncWait, c.OnSyncTimeout = 20*time.Millisecond, policy
				})
				tt.setup(fx)
				_, before, _ := fx.srv[1].state()
				res, err := fx.switchover(t, "site0", "site1")
				if policy == "fail" {
					if !errors.Is(err, ErrSyncTimeout) {
						t.Fatalf("Switchover error = %v, want ErrSyncTimeout", err)
					}
					wantCommands(t, fx.net.commands(), tt.tried)
					if role, master, _ := fx.srv[1].state(); role != roleReplica || master != before {
						t.Errorf("site1 = %s of %s, want unchanged replica of %s", role, master, before)
					}
					if role, _, _ := fx.srv[0].state(); role != roleMaster {
						t.Errorf("site0 role = %s, want master (nothing changed)", role)
					}
					return
				}
				if err != nil {
					t.Fatalf("Switchover: %v", err)
				}
				if res.SessionsPreserved || res.Synced && tt.tried == nil {
					t.Errorf("result = %+v, want sessions not preserved", res)
				}
				wantCommands(t, fx.net.commands(), append(tt.tried, forced...))
				fx.wantTopology(t, 1, 0)
				if !strings.Contains(fx.logs.String(), "possible_loss=true") {
					t.Errorf("possible loss not logged:\n%s", fx.logs)
				}
			})
		}
	}
}

func TestSwitchoverUnreachable(t *testing.T) {
	for _, engine := range []string{configs.CacheRedis, configs.CacheDragonfly} {
		t.Run(engine+" target", func(t *testing.T) {
			fx := newFixture(t, engine, 2, nil)
			fx.srv[1].set(func(s *fakeServer) { s.down = true })
			if _, err := fx.switchover(t, "site0", "site1"); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "site1") {
				t.Fatalf("Switchover error = %v, want ErrUnreachable naming site1", err)
			}
			wantCommands(t, fx.net.commands(), nil)
		})
		for _, policy := range []string{"fail", "proceed"} {
			t.Run(engine+" master "+policy, func(t *testing.T) {
				fx := newFixture(t, engine, 2, func(c *configs.Cache) { c.OnSyncTimeout = policy })
				fx.srv[0].set(func(s *fakeServer) { s.down = true })
				res, err := fx.switchover(t, "site0", "site1")
				if policy == "fail" {
					if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "site0") {
						t.Fatalf("Switchover error = %v, want ErrUnreachable naming site0", err)
					}
					wantCommands(t, fx.net.commands(), nil)
					return
				}
				if err != nil || res.SessionsPreserved || res.Synced {
					t.Fatalf("Switchover = %+v, %v; want a promotion without preserved sessions", res, err)
				}
				wantCommands(t, fx.net.commands(), []string{"cache1.test:6379 REPLICAOF NO ONE"})
				fx.wantTopology(t, 1)
			})
		}
	}
}

func TestSwitchoverEdgeCases(t *testing.T) {
	fx := newFixture(t, configs.CacheRedis, 2, nil)
	if res, err := fx.switchover(t, "site1", "site0"); err != nil || !res.AlreadyThere {
		t.Errorf("Switchover to the master = %+v, %v; want AlreadyThere", res, err)
	}
	for _, sites := range [][2]string{{"nowhere", "site1"}, {"site0", "nowhere"}} {
		if _, err := fx.switchover(t, sites[0], sites[1]); !errors.Is(err, ErrUnknownSite) {
			t.Errorf("Switchover %v error = %v, want ErrUnknownSite", sites, err)
		}
	}
	if _, err := fx.switchover(t, "site1", "site1"); err == nil {
		t.Errorf("Switchover from a replica to itself succeeded")
	}
	wantCommands(t, fx.net.commands(), nil)
	var nilF *Follower
	if res, err := nilF.Switchover(context.Background(), "a", "b"); err != nil || res != (SwitchoverResult{}) {
		t.Errorf("nil Follower Switchover = %+v, %v", res, err)
	}
}
