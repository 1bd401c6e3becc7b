package dragonfly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/test/testenv"
	"github.com/failoverd/failoverd/view"
)

// These tests run the Redis path against real redis-server 7 processes on
// 127.0.0.1 (Dragonfly cannot be installed here; its path is covered by
// fakeDragonfly only).

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// recorder wraps real conns and records every command that changes
// replication.
type recorder struct {
	mu   sync.Mutex
	cmds []string
}

type recordingConn struct {
	conn
	addr string
	rec  *recorder
}

func (r *recorder) wrap(c conn, addr string) conn { return recordingConn{conn: c, addr: addr, rec: r} }

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, s)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.cmds
	r.cmds = nil
	return out
}

func (c recordingConn) ReplicaOf(ctx context.Context, host, port string) error {
	c.rec.add(c.addr + " REPLICAOF " + host + " " + port)
	return c.conn.ReplicaOf(ctx, host, port)
}

func (c recordingConn) ReplicaOfNoOne(ctx context.Context) error {
	c.rec.add(c.addr + " REPLICAOF NO ONE")
	return c.conn.ReplicaOfNoOne(ctx)
}

func (c recordingConn) TakeOver(ctx context.Context, seconds int) error {
	c.rec.add(fmt.Sprintf("%s REPLTAKEOVER %d", c.addr, seconds))
	return c.conn.TakeOver(ctx, seconds)
}

func (c recordingConn) Failover(ctx context.Context, host, port string, timeout time.Duration) error {
	c.rec.add(fmt.Sprintf("%s FAILOVER TO %s %s TIMEOUT %d", c.addr, host, port, timeout.Milliseconds()))
	return c.conn.Failover(ctx, host, port, timeout)
}

func (c recordingConn) KillNormalClients(ctx context.Context) error {
	c.rec.add(c.addr + " CLIENT KILL TYPE normal")
	return c.conn.KillNormalClients(ctx)
}

// realGroup is a redis group over caches, site i on caches[i].
func realGroup(caches []*testenv.Redis, cache func(*configs.Cache)) configs.Group {
	g := configs.Group{Name: "g1", Cache: &configs.Cache{Engine: configs.CacheRedis, MaxSyncWait: 10 * time.Second, OnSyncTimeout: "fail"}}
	for i, c := range caches {
		g.Sites = append(g.Sites, configs.Site{Name: fmt.Sprintf("site%d", i), Cache: &configs.Endpoint{Address: c.Addr()}})
	}
	if cache != nil {
		cache(g.Cache)
	}
	return g
}

// newRealFollower builds the follower of g, recording its commands.
func newRealFollower(t *testing.T, g configs.Group) (*Follower, *recorder) {
	t.Helper()
	f, err := NewFollower(g, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatalf("NewFollower: %v", err)
	}
	rec := &recorder{}
	dial := f.dial
	f.dial = func(addr string) conn { return rec.wrap(dial(addr), addr) }
	return f, rec
}

// startCaches starts n redis-servers: site0 the primary, the others its
// replicas in sync.
func startCaches(t *testing.T, n int) []*testenv.Redis {
	t.Helper()
	var caches []*testenv.Redis
	for i := range n {
		caches = append(caches, testenv.StartRedis(t, testenv.RedisOptions{Name: fmt.Sprintf("cache-site%d", i)}))
	}
	for _, r := range caches[1:] {
		r.ReplicaOf(t, caches[0].Host, caches[0].Port)
	}
	return caches
}

func follow(t *testing.T, f *Follower, site string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return f.Follow(ctx, view.View{Group: "g1", Epoch: 7, ActiveSite: site})
}

// waitReplicating waits until c replicates from port with the link up and
// no sync in progress (generous deadline: real servers).
func waitReplicating(t *testing.T, name string, c *redis.Client, port int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		s, err := c.Info(ctx, "replication").Result()
		cancel()
		if err == nil {
			rep, perr := parseReplication(s)
			if perr == nil && rep.follows("127.0.0.1", strconv.Itoa(port)) && rep.LinkUp && !rep.SyncInProgress {
				return
			}
			last = s
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s does not replicate from port %d:\n%s", name, port, last)
}

func wantRole(t *testing.T, r *testenv.Redis, role string) {
	t.Helper()
	if got := r.Info(t, "replication")["role"]; got != role {
		t.Fatalf("%s role = %q, want %q", r.Name, got, role)
	}
}

func get(t *testing.T, r *testenv.Redis, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := r.Client(t).Get(ctx, key).Result()
	if err != nil {
		t.Fatalf("GET %s on %s: %v", key, r.Name, err)
	}
	return v
}

func set(t *testing.T, r *testenv.Redis, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Client(t).Set(ctx, key, value, 0).Err(); err != nil {
		t.Fatalf("SET %s on %s: %v", key, r.Name, err)
	}
}

func TestRealRedisSwitchover(t *testing.T) {
	caches := startCaches(t, 3)
	f, rec := newRealFollower(t, realGroup(caches, nil))
	// Written just before the switch, without waiting for the replicas:
	// the follower's catch-up wait is what must carry it to site1.
	for i := range 200 {
		set(t, caches[0], fmt.Sprintf("k%d", i), "before")
	}

	if err := follow(t, f, "site1"); err != nil {
		t.Fatalf("Follow site1: %v", err)
	}
	wantRole(t, caches[1], "master")
	for _, i := range []int{0, 2} {
		waitReplicating(t, caches[i].Name, caches[i].Client(t), caches[1].Port)
	}
	for _, k := range []string{"k0", "k199"} {
		if v := get(t, caches[1], k); v != "before" {
			t.Errorf("%s on site1 = %q, want %q", k, v, "before")
		}
	}
	// Writes on the new primary reach both replicas.
	set(t, caches[1], "after", "switch")
	for _, i := range []int{0, 2} {
		caches[i].WaitInSync(t, caches[1], 30*time.Second)
		if v := get(t, caches[i], "after"); v != "switch" {
			t.Errorf("after on site%d = %q, want switch", i, v)
		}
	}
	if cmds := rec.take(); len(cmds) != 3 {
		t.Errorf("first follow sent %q, want one promotion and two repoints", cmds)
	}

	// Following the same view again changes nothing: no command, no resync.
	syncs := caches[1].Info(t, "stats")["sync_full"]
	for range 2 {
		if err := follow(t, f, "site1"); err != nil {
			t.Fatalf("Follow site1 again: %v", err)
		}
	}
	if cmds := rec.take(); len(cmds) != 0 {
		t.Errorf("repeated follow sent %q, want nothing", cmds)
	}
	if got := caches[1].Info(t, "stats")["sync_full"]; got != syncs {
		t.Errorf("site1 sync_full went from %s to %s on a repeated follow", syncs, got)
	}
	wantRole(t, caches[1], "master")
}

func TestRealRedisOldPrimaryKilled(t *testing.T) {
	caches := startCaches(t, 3)
	f, _ := newRealFollower(t, realGroup(caches, nil))
	set(t, caches[0], "k", "v")
	for _, r := range caches[1:] {
		r.WaitInSync(t, caches[0], 30*time.Second)
	}
	if err := caches[0].Kill(); err != nil {
		t.Fatalf("kill site0: %v", err)
	}

	err := follow(t, f, "site2")
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "site0") {
		t.Fatalf("Follow site2 error = %v, want ErrUnreachable naming site0", err)
	}
	wantRole(t, caches[2], "master")
	waitReplicating(t, caches[1].Name, caches[1].Client(t), caches[2].Port)
	if v := get(t, caches[2], "k"); v != "v" {
		t.Errorf("k on site2 = %q, want v", v)
	}
	set(t, caches[2], "k2", "v2")
	caches[1].WaitInSync(t, caches[2], 30*time.Second)
	if v := get(t, caches[1], "k2"); v != "v2" {
		t.Errorf("k2 on site1 = %q, want v2", v)
	}

	// Site0 comes back empty, as a master: the retry makes it a replica.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := caches[0].Restart(ctx); err != nil {
		t.Fatalf("restart site0: %v", err)
	}
	if err := follow(t, f, "site2"); err != nil {
		t.Fatalf("Follow site2 after site0 restart: %v", err)
	}
	waitReplicating(t, caches[0].Name, caches[0].Client(t), caches[2].Port)
	if v := get(t, caches[0], "k2"); v != "v2" {
		t.Errorf("k2 on restarted site0 = %q, want v2", v)
	}
	wantRole(t, caches[2], "master")
}

func TestRealRedisAuth(t *testing.T) {
	const pw = "cache-pw"
	pwFile := filepath.Join(t.TempDir(), "cache-password")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var caches []*testenv.Redis
	var clients []*redis.Client
	for i := range 2 {
		// testenv's readiness check has no password: set it once running.
		r := testenv.StartRedis(t, testenv.RedisOptions{Name: fmt.Sprintf("cache-auth%d", i)})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := r.Client(t).ConfigSet(ctx, "masterauth", pw).Err()
		if err == nil {
			err = r.Client(t).ConfigSet(ctx, "requirepass", pw).Err()
		}
		cancel()
		if err != nil {
			t.Fatalf("CONFIG SET on %s: %v", r.Name, err)
		}
		c := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: pw, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		caches, clients = append(caches, r), append(clients, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := clients[1].ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(caches[0].Port)).Err(); err != nil {
		t.Fatalf("REPLICAOF: %v", err)
	}
	waitReplicating(t, "cache-auth1", clients[1], caches[0].Port)

	// Without the password every cache refuses: the error says so.
	noPw, _ := newRealFollower(t, realGroup(caches, nil))
	if err := follow(t, noPw, "site1"); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("Follow without password error = %v, want NOAUTH", err)
	}

	f, _ := newRealFollower(t, realGroup(caches, func(c *configs.Cache) { c.PasswordFile = pwFile }))
	if err := follow(t, f, "site1"); err != nil {
		t.Fatalf("Follow site1 with password: %v", err)
	}
	waitReplicating(t, "cache-auth0", clients[0], caches[1].Port)
	if role, err := clients[1].Do(ctx, "ROLE").Slice(); err != nil || role[0] != "master" {
		t.Fatalf("site1 ROLE = %v, %v; want master", role, err)
	}
}
