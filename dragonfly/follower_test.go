package dragonfly

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/view"
)

// logBuffer collects the follower's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fixture is n fake caches, site0 the master and the others its replicas
// in sync, and a Follower that dials them.
type fixture struct {
	net  *fakeNet
	srv  []*fakeServer
	f    *Follower
	logs *logBuffer
}

// cacheAddr is site i's fake cache address.
func cacheAddr(i int) string { return fmt.Sprintf("cache%d.test:6379", i) }

// groupConfig is a group of n sites with caches.
func groupConfig(engine string, n int, cache func(*configs.Cache)) configs.Group {
	g := configs.Group{Name: "g1", Cache: &configs.Cache{Engine: engine, MaxSyncWait: time.Minute, OnSyncTimeout: "proceed"}}
	for i := range n {
		g.Sites = append(g.Sites, configs.Site{Name: fmt.Sprintf("site%d", i), Cache: &configs.Endpoint{Address: cacheAddr(i)}})
	}
	if cache != nil {
		cache(g.Cache)
	}
	return g
}

func newFixture(t *testing.T, engine string, n int, cache func(*configs.Cache)) *fixture {
	t.Helper()
	fx := &fixture{net: newFakeNet(), logs: &logBuffer{}}
	for i := range n {
		fx.srv = append(fx.srv, fx.net.add(cacheAddr(i), engine == configs.CacheDragonfly))
	}
	for _, s := range fx.srv[1:] {
		s.set(func(s *fakeServer) { s.replicate(fx.srv[0]) })
	}
	f, err := NewFollower(groupConfig(engine, n, cache), slog.New(slog.NewTextHandler(fx.logs, nil)))
	if err != nil {
		t.Fatalf("NewFollower: %v", err)
	}
	f.dial = fx.net.dial
	f.pollInterval = time.Millisecond
	fx.f = f
	return fx
}

func (fx *fixture) follow(t *testing.T, site string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return fx.f.Follow(ctx, view.View{Group: "g1", Epoch: 2, ActiveSite: site})
}

// wantTopology checks that site primary is a master and every other listed
// site replicates from it.
func (fx *fixture) wantTopology(t *testing.T, primary int, replicas ...int) {
	t.Helper()
	if role, _, _ := fx.srv[primary].state(); role != roleMaster {
		t.Errorf("site%d role = %s, want master", primary, role)
	}
	for _, i := range replicas {
		role, master, _ := fx.srv[i].state()
		if role != roleReplica || master != cacheAddr(primary) {
			t.Errorf("site%d = %s of %q, want replica of %s", i, role, master, cacheAddr(primary))
		}
	}
}

func wantCommands(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("commands:\n got %q\nwant %q", got, want)
	}
}

func TestFollowSwitchesPrimary(t *testing.T) {
	tests := []struct {
		engine   string
		wantCmds []string
		// wantDown is a site the switch leaves unreachable (reported).
		wantDown string
	}{
		{
			engine: configs.CacheRedis,
			// The old master answers: FAILOVER TO hands over without
			// losing a write it acknowledged, and it becomes a replica.
			wantCmds: []string{
				"cache0.test:6379 FAILOVER TO cache1.test 6379 TIMEOUT 60000",
				"cache0.test:6379 CLIENT KILL TYPE normal",
				"cache2.test:6379 REPLICAOF cache1.test 6379",
			},
		},
		{
			// REPLTAKEOVER gets ceil(maxSyncWait)=60 s; the old Dragonfly
			// master shuts down after the takeover, so repointing it fails
			// until it is back.
			engine: configs.CacheDragonfly,
			wantCmds: []string{
				"cache1.test:6379 REPLTAKEOVER 60",
				"cache2.test:6379 REPLICAOF cache1.test 6379",
			},
			wantDown: "site0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.engine, func(t *testing.T) {
			fx := newFixture(t, tt.engine, 3, nil)
			err := fx.follow(t, "site1")
			if tt.wantDown == "" && err != nil {
				t.Fatalf("Follow: %v", err)
			}
			if tt.wantDown != "" && (!errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), tt.wantDown)) {
				t.Fatalf("Follow error = %v, want ErrUnreachable naming %s", err, tt.wantDown)
			}
			wantCommands(t, fx.net.commands(), tt.wantCmds)
			if fx.srv[1].promotedBehind != 0 {
				t.Errorf("site1 promoted %d behind its master", fx.srv[1].promotedBehind)
			}
			if tt.wantDown == "" {
				fx.wantTopology(t, 1, 0, 2)
				return
			}
			fx.wantTopology(t, 1, 2)
			// The old master comes back empty, as a master: the retry
			// repoints it and nothing else.
			fx.srv[0].set(func(s *fakeServer) { s.down, s.role, s.master = false, roleMaster, "" })
			if err := fx.follow(t, "site1"); err != nil {
				t.Fatalf("Follow after restart: %v", err)
			}
			wantCommands(t, fx.net.commands(), []string{"cache0.test:6379 REPLICAOF cache1.test 6379"})
			fx.wantTopology(t, 1, 0, 2)
		})
	}
}

func TestFollowIsIdempotent(t *testing.T) {
	for _, engine := range []string{configs.CacheRedis, configs.CacheDragonfly} {
		t.Run(engine, func(t *testing.T) {
			fx := newFixture(t, engine, 3, nil)
			// Site0 already is the primary: nothing to do at all.
			if err := fx.follow(t, "site0"); err != nil {
				t.Fatalf("Follow site0: %v", err)
			}
			wantCommands(t, fx.net.commands(), nil)

			_ = fx.follow(t, "site2")
			fx.srv[0].set(func(s *fakeServer) { s.down = false }) // Dragonfly's old master restarts
			if err := fx.follow(t, "site2"); err != nil {
				t.Fatalf("Follow site2: %v", err)
			}
			fx.net.commands()
			for range 2 {
				if err := fx.follow(t, "site2"); err != nil {
					t.Fatalf("Follow site2 again: %v", err)
				}
				wantCommands(t, fx.net.commands(), nil)
			}
			fx.wantTopology(t, 2, 0, 1)
		})
	}
}

func TestFollowRepointsOnlyWhatIsOff(t *testing.T) {
	tests := []struct {
		name  string
		setup func(fx *fixture) // on site2, with site1 already the primary
		want  []string
	}{
		{"replica of the active, link up", func(fx *fixture) {}, nil},
		{"replica of the active, full sync in progress", func(fx *fixture) {
			fx.srv[2].set(func(s *fakeServer) { s.stuck = true; s.replicate(fx.srv[1]) })
		}, nil},
		{"replica of the active, link broken", func(fx *fixture) {
			fx.srv[2].set(func(s *fakeServer) { s.broken, s.linkUp = true, false })
		}, []string{"cache2.test:6379 REPLICAOF cache1.test 6379"}},
		{"a second master", func(fx *fixture) {
			fx.srv[2].set(func(s *fakeServer) { s.role, s.master = roleMaster, "" })
		}, []string{"cache2.test:6379 REPLICAOF cache1.test 6379"}},
		{"replica of another site", func(fx *fixture) {
			fx.srv[2].set(func(s *fakeServer) { s.replicate(fx.srv[0]) })
		}, []string{"cache2.test:6379 REPLICAOF cache1.test 6379"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, configs.CacheRedis, 3, nil)
			if err := fx.follow(t, "site1"); err != nil {
				t.Fatalf("Follow: %v", err)
			}
			fx.net.commands()
			tt.setup(fx)
			if err := fx.follow(t, "site1"); err != nil {
				t.Fatalf("Follow again: %v", err)
			}
			wantCommands(t, fx.net.commands(), tt.want)
		})
	}
}

func TestFollowWaitsForCatchUp(t *testing.T) {
	fx := newFixture(t, configs.CacheRedis, 3, nil)
	fx.srv[1].lag(3) // behind site0 for three more INFO reads
	if err := fx.follow(t, "site1"); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	if fx.srv[1].promotedBehind != 0 {
		t.Errorf("site1 promoted %d bytes behind: the follower did not wait", fx.srv[1].promotedBehind)
	}
	if strings.Contains(fx.logs.String(), "cache.sync_timeout") {
		t.Errorf("sync timeout logged although site1 caught up:\n%s", fx.logs)
	}
	fx.wantTopology(t, 1, 0, 2)
}

func TestFollowSyncTimeout(t *testing.T) {
	notCatchingUp := func(fx *fixture) {
		if fx.srv[1].dragonfly {
			fx.srv[1].set(func(s *fakeServer) { s.stuck = true; s.replicate(fx.srv[0]) }) // never reaches stable sync
		} else {
			fx.srv[1].lag(-1)
		}
	}
	takeoverRefused := func(fx *fixture) {
		fx.srv[1].set(func(s *fakeServer) { s.takeoverErr = fakeReplyError("ERR Couldn't execute takeover") })
	}
	repointed := []string{"cache0.test:6379 REPLICAOF cache1.test 6379", "cache2.test:6379 REPLICAOF cache1.test 6379"}
	tests := []struct {
		name          string
		engine        string
		onSyncTimeout string
		setup         func(fx *fixture)
		wantCmds      []string
		wantLog       string // "" with a fail policy
	}{
		{"redis proceed", configs.CacheRedis, "proceed", notCatchingUp,
			append([]string{"cache1.test:6379 REPLICAOF NO ONE"}, repointed...), "cache.sync_timeout"},
		{"redis fail", configs.CacheRedis, "fail", notCatchingUp, nil, ""},
		{"dragonfly proceed, never in stable sync", configs.CacheDragonfly, "proceed", notCatchingUp,
			append([]string{"cache1.test:6379 REPLICAOF NO ONE"}, repointed...), "cache.sync_timeout"},
		{"dragonfly fail, never in stable sync", configs.CacheDragonfly, "fail", notCatchingUp, nil, ""},
		{"dragonfly proceed, takeover refused", configs.CacheDragonfly, "proceed", takeoverRefused,
			append([]string{"cache1.test:6379 REPLTAKEOVER 1", "cache1.test:6379 REPLICAOF NO ONE"}, repointed...), "cache.takeover_failed"},
		{"dragonfly fail, takeover refused", configs.CacheDragonfly, "fail", takeoverRefused,
			[]string{"cache1.test:6379 REPLTAKEOVER 1"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, tt.engine, 3, func(c *configs.Cache) {
				c.MaxSyncWait = 20 * time.Millisecond
				c.OnSyncTimeout = tt.onSyncTimeout
			})
			tt.setup(fx)
			err := fx.follow(t, "site1")
			wantCommands(t, fx.net.commands(), tt.wantCmds)
			if tt.onSyncTimeout == "fail" {
				if !errors.Is(err, ErrSyncTimeout) {
					t.Fatalf("Follow error = %v, want ErrSyncTimeout", err)
				}
				fx.wantTopology(t, 0, 1, 2) // nothing moved
				return
			}
			if err != nil {
				t.Fatalf("Follow: %v", err)
			}
			fx.wantTopology(t, 1, 0, 2)
			logs := fx.logs.String()
			if !strings.Contains(logs, "msg="+tt.wantLog) || !strings.Contains(logs, "possible_loss=true") {
				t.Errorf("log lacks %s with possible_loss=true:\n%s", tt.wantLog, logs)
			}
		})
	}
}

func TestFollowUnreachableReplica(t *testing.T) {
	for _, engine := range []string{configs.CacheRedis, configs.CacheDragonfly} {
		t.Run(engine, func(t *testing.T) {
			fx := newFixture(t, engine, 3, nil)
			fx.srv[2].set(func(s *fakeServer) { s.down = true })
			err := fx.follow(t, "site1")
			if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "site2") {
				t.Fatalf("Follow error = %v, want ErrUnreachable naming site2", err)
			}
			// The promotion went through regardless.
			if role, _, _ := fx.srv[1].state(); role != roleMaster {
				t.Errorf("site1 role = %s, want master", role)
			}
			if !strings.Contains(fx.logs.String(), "msg=cache.unreachable") {
				t.Errorf("unreachable site2 not logged:\n%s", fx.logs)
			}
			// Once it answers, the retry brings it in.
			fx.srv[2].set(func(s *fakeServer) { s.down = false })
			fx.srv[0].set(func(s *fakeServer) { s.down = false })
			if err := fx.follow(t, "site1"); err != nil {
				t.Fatalf("Follow retry: %v", err)
			}
			fx.wantTopology(t, 1, 0, 2)
		})
	}
}

func TestFollowOldPrimaryUnreachable(t *testing.T) {
	for _, engine := range []string{configs.CacheRedis, configs.CacheDragonfly} {
		t.Run(engine, func(t *testing.T) {
			fx := newFixture(t, engine, 3, func(c *configs.Cache) { c.OnSyncTimeout = "fail" })
			fx.srv[0].set(func(s *fakeServer) { s.down = true })
			err := fx.follow(t, "site2")
			if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "site0") || errors.Is(err, ErrSyncTimeout) {
				t.Fatalf("Follow error = %v, want ErrUnreachable naming site0 only", err)
			}
			// No wait and no takeover without a master: REPLICAOF NO ONE.
			wantCommands(t, fx.net.commands(), []string{
				"cache2.test:6379 REPLICAOF NO ONE",
				"cache1.test:6379 REPLICAOF cache2.test 6379",
			})
			fx.wantTopology(t, 2, 1)
			if !strings.Contains(fx.logs.String(), "msg=cache.master_unreachable") {
				t.Errorf("promotion without the master not logged:\n%s", fx.logs)
			}
		})
	}
}

func TestFollowActiveUnreachableChangesNothing(t *testing.T) {
	fx := newFixture(t, configs.CacheRedis, 3, nil)
	fx.srv[1].set(func(s *fakeServer) { s.down = true })
	err := fx.follow(t, "site1")
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "site1") {
		t.Fatalf("Follow error = %v, want ErrUnreachable naming site1", err)
	}
	wantCommands(t, fx.net.commands(), nil)
}

func TestFollowUnknownSite(t *testing.T) {
	fx := newFixture(t, configs.CacheRedis, 2, nil)
	for _, site := range []string{"nowhere", ""} {
		if err := fx.follow(t, site); !errors.Is(err, ErrUnknownSite) {
			t.Errorf("Follow(%q) error = %v, want ErrUnknownSite", site, err)
		}
	}
	wantCommands(t, fx.net.commands(), nil)
}

func TestFollowMasterOutsideTheGroup(t *testing.T) {
	// Site1 replicates from a server no site names: it is still waited for.
	fx := newFixture(t, configs.CacheRedis, 2, nil)
	outside := fx.net.add("outside.test:6379", false)
	fx.srv[1].set(func(s *fakeServer) { s.replicate(outside) })
	fx.srv[1].lag(2)
	if err := fx.follow(t, "site1"); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	if fx.srv[1].promotedBehind != 0 {
		t.Errorf("site1 promoted %d behind its master", fx.srv[1].promotedBehind)
	}
	fx.wantTopology(t, 1, 0)
}

func TestNewFollower(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	noCache := groupConfig(configs.CacheRedis, 2, nil)
	noCache.Cache = nil
	f, err := NewFollower(noCache, nil)
	if f != nil || err != nil {
		t.Fatalf("NewFollower without cache = %v, %v; want nil, nil", f, err)
	}
	if f.Name() != "cache" || f.Follow(context.Background(), view.View{ActiveSite: "site0"}) != nil {
		t.Errorf("nil Follower is not a no-op")
	}

	tests := []struct {
		name    string
		mutate  func(g *configs.Group)
		wantErr error // nil: must succeed
		errText string
	}{
		{"redis with password", func(g *configs.Group) { g.Cache.PasswordFile = pwFile }, nil, ""},
		{"dragonfly, a site without cache", func(g *configs.Group) {
			g.Cache.Engine = configs.CacheDragonfly
			g.Sites[1].Cache = nil
		}, nil, ""},
		{"unknown engine", func(g *configs.Group) { g.Cache.Engine = "memcached" }, ErrUnknownEngine, "memcached"},
		{"missing password file", func(g *configs.Group) { g.Cache.PasswordFile = filepath.Join(dir, "nope") }, os.ErrNotExist, "password"},
		{"address without port", func(g *configs.Group) { g.Sites[0].Cache.Address = "cache0.test" }, nil, "site0 cache address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := groupConfig(configs.CacheRedis, 2, nil)
			tt.mutate(&g)
			f, err := NewFollower(g, nil)
			if tt.wantErr == nil && tt.errText == "" {
				if err != nil || f == nil || f.Name() != "cache" {
					t.Fatalf("NewFollower = %v, %v", f, err)
				}
				return
			}
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) || !strings.Contains(err.Error(), tt.errText) {
				t.Fatalf("NewFollower error = %v, want %v mentioning %q", err, tt.wantErr, tt.errText)
			}
		})
	}
}

func TestFollowSkipsSitesWithoutCache(t *testing.T) {
	fx := newFixture(t, configs.CacheRedis, 3, nil)
	g := groupConfig(configs.CacheRedis, 3, nil)
	g.Sites[2].Cache = nil
	f, err := NewFollower(g, slog.New(slog.NewTextHandler(fx.logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	f.dial, f.pollInterval = fx.net.dial, time.Millisecond
	if err := f.Follow(context.Background(), view.View{ActiveSite: "site1"}); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	wantCommands(t, fx.net.commands(), []string{"cache0.test:6379 FAILOVER TO cache1.test 6379 TIMEOUT 60000", "cache0.test:6379 CLIENT KILL TYPE normal"})
	if err := f.Follow(context.Background(), view.View{ActiveSite: "site2"}); !errors.Is(err, ErrUnknownSite) {
		t.Errorf("Follow(site2 without cache) error = %v, want ErrUnknownSite", err)
	}
}

func TestFollowFailoverRefusedFallsBack(t *testing.T) {
	for _, policy := range []string{"fail", "proceed"} {
		t.Run(policy, func(t *testing.T) {
			fx := newFixture(t, configs.CacheRedis, 2, func(c *configs.Cache) { c.OnSyncTimeout = policy })
			fx.srv[0].set(func(s *fakeServer) {
				s.failoverErr = fakeReplyError("ERR FAILOVER target HOST and PORT is not a replica.")
			})
			if err := fx.follow(t, "site1"); err != nil {
				t.Fatalf("Follow: %v", err)
			}
			// The replica had caught up: the refusal only costs the pause.
			wantCommands(t, fx.net.commands(), []string{
				"cache0.test:6379 FAILOVER TO cache1.test 6379 TIMEOUT 60000",
				"cache1.test:6379 REPLICAOF NO ONE",
				"cache0.test:6379 REPLICAOF cache1.test 6379",
			})
			fx.wantTopology(t, 1, 0)
			if !strings.Contains(fx.logs.String(), "msg=cache.failover_refused") {
				t.Errorf("refused failover not logged:\n%s", fx.logs)
			}
		})
	}
}
