package dragonfly

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/test/testenv"
)

// steadyWriter SETs w<i> on one server as fast as it can, from its own
// client, and remembers which writes the server acknowledged.
type steadyWriter struct {
	stop   context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	acked  []string
	failed int
}

func startWriter(t *testing.T, r *testenv.Redis) *steadyWriter {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1, ReadTimeout: 5 * time.Second, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	w := &steadyWriter{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ctx.Err() == nil; i++ {
			key := "w" + strconv.Itoa(i)
			err := c.Set(ctx, key, i, 0).Err()
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, key)
			} else {
				w.failed++
			}
			w.mu.Unlock()
			if err != nil {
				time.Sleep(time.Millisecond) // READONLY or reconnecting: no busy loop
			}
		}
	}()
	return w
}

// wait lets the writer get n acknowledged writes in (generous deadline).
func (w *steadyWriter) wait(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		got := len(w.acked)
		w.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("writer did not get %d writes acknowledged", n)
}

// finish stops the writer and returns the acknowledged keys.
func (w *steadyWriter) finish() ([]string, int) {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.failed
}

// missing returns the keys of keys that r does not hold.
func missing(t *testing.T, r *testenv.Redis, keys []string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	c := r.Client(t)
	for start := 0; start < len(keys); start += 500 {
		batch := keys[start:min(start+500, len(keys))]
		vals, err := c.MGet(ctx, batch...).Result()
		if err != nil {
			t.Fatalf("MGET on %s: %v", r.Name, err)
		}
		for i, v := range vals {
			if v == nil {
				out = append(out, batch[i])
			}
		}
	}
	return out
}

// idleClient is an application connection left open on r.
func idleClient(t *testing.T, r *testenv.Redis, name string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1, PoolSize: 1,
		OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ClientSetName(ctx, name).Err() }})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("idle client on %s: %v", r.Name, err)
	}
}

func clientList(t *testing.T, r *testenv.Redis) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := r.Client(t).ClientList(ctx).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST on %s: %v", r.Name, err)
	}
	return s
}

func switchover(t *testing.T, f *Follower, from, to string) (SwitchoverResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return f.Switchover(ctx, from, to)
}

// deadPort is a 127.0.0.1 port where nothing listens.
func deadPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	_ = l.Close()
	return port
}

func TestRealRedisPlannedSwitchoverUnderWrites(t *testing.T) {
	caches := startCaches(t, 2)
	f, rec := newRealFollower(t, realGroup(caches, nil))
	idleClient(t, caches[0], "app-idle")
	w := startWriter(t, caches[0])
	w.wait(t, 500)

	res, err := switchover(t, f, "site0", "site1")
	acked, failed := w.finish()
	if err != nil {
		t.Fatalf("Switchover: %v", err)
	}
	t.Logf("result %+v; %d writes acknowledged, %d refused", res, len(acked), failed)
	if !res.Synced || !res.SessionsPreserved || res.AlreadyThere {
		t.Errorf("result = %+v, want synced with sessions preserved", res)
	}
	wantCommands(t, rec.take(), []string{
		fmt.Sprintf("%s FAILOVER TO 127.0.0.1 %d TIMEOUT 10000", caches[0].Addr(), caches[1].Port),
		caches[0].Addr() + " CLIENT KILL TYPE normal",
	})
	wantRole(t, caches[1], "master")
	waitReplicating(t, caches[0].Name, caches[0].Client(t), caches[1].Port)
	if lost := missing(t, caches[1], acked); len(lost) > 0 {
		t.Errorf("%d of %d acknowledged writes are not on the new master, e.g. %q", len(lost), len(acked), lost[:min(5, len(lost))])
	}
	if l := clientList(t, caches[0]); strings.Contains(l, "name=app-idle") {
		t.Errorf("the idle application client is still connected to the old master:\n%s", l)
	}

	// Idempotent: nothing sent again.
	res, err = switchover(t, f, "site0", "site1")
	if err != nil || !res.AlreadyThere || !res.SessionsPreserved {
		t.Fatalf("repeated Switchover = %+v, %v; want AlreadyThere", res, err)
	}
	if cmds := rec.take(); len(cmds) != 0 {
		t.Errorf("repeated Switchover sent %q", cmds)
	}
}

func TestRealRedisSwitchoverFailChangesNothing(t *testing.T) {
	caches := startCaches(t, 2)
	f, rec := newRealFollower(t, realGroup(caches, func(c *configs.Cache) { c.MaxSyncWait = 300 * time.Millisecond }))
	// The target lags for good: its link to the master is down.
	dead := deadPort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := caches[1].Client(t).ReplicaOf(ctx, "127.0.0.1", dead).Err(); err != nil {
		t.Fatal(err)
	}
	set(t, caches[0], "k", "v")
	idleClient(t, caches[0], "app-idle")

	if _, err := switchover(t, f, "site0", "site1"); !errors.Is(err, ErrSyncTimeout) {
		t.Fatalf("Switchover to a lagging target error = %v, want ErrSyncTimeout", err)
	}
	if cmds := rec.take(); len(cmds) != 0 {
		t.Errorf("failed Switchover sent %q", cmds)
	}
	wantRole(t, caches[0], "master")
	if got := caches[1].Info(t, "replication")["master_port"]; got != dead {
		t.Errorf("site1 master_port = %s, want unchanged %s", got, dead)
	}
	if !strings.Contains(clientList(t, caches[0]), "name=app-idle") {
		t.Errorf("a failed Switchover disconnected the old master's clients")
	}

	// An unreachable target: refused as well, with ErrUnreachable.
	if err := caches[1].Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := switchover(t, f, "site0", "site1"); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Switchover to a dead target error = %v, want ErrUnreachable", err)
	}
	if cmds := rec.take(); len(cmds) != 0 {
		t.Errorf("Switchover to a dead target sent %q", cmds)
	}
	wantRole(t, caches[0], "master")
	if v := get(t, caches[0], "k"); v != "v" {
		t.Errorf("k on site0 = %q, want v", v)
	}
}

func TestRealRedisSwitchoverProceed(t *testing.T) {
	caches := startCaches(t, 2)
	f, rec := newRealFollower(t, realGroup(caches, func(c *configs.Cache) {
		c.MaxSyncWait, c.OnSyncTimeout = 300*time.Millisecond, "proceed"
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := caches[1].Client(t).ReplicaOf(ctx, "127.0.0.1", deadPort(t)).Err(); err != nil {
		t.Fatal(err)
	}
	set(t, caches[0], "lost", "v") // site1 never gets it

	res, err := switchover(t, f, "site0", "site1")
	if err != nil {
		t.Fatalf("Switchover: %v", err)
	}
	if res.Synced || res.SessionsPreserved {
		t.Errorf("result = %+v, want neither synced nor sessions preserved", res)
	}
	wantCommands(t, rec.take(), []string{
		caches[1].Addr() + " REPLICAOF NO ONE",
		fmt.Sprintf("%s REPLICAOF 127.0.0.1 %d", caches[0].Addr(), caches[1].Port),
		caches[0].Addr() + " CLIENT KILL TYPE normal",
	})
	wantRole(t, caches[1], "master")
	waitReplicating(t, caches[0].Name, caches[0].Client(t), caches[1].Port)
}

// Follow (after a MySQL promotion) while applications still write to the
// old cache primary: no acknowledged write may be lost between the cache
// promotion and the old primary's repoint.
func TestRealRedisFollowLosesNoAcknowledgedWrite(t *testing.T) {
	caches := startCaches(t, 2)
	f, rec := newRealFollower(t, realGroup(caches, nil))
	w := startWriter(t, caches[0])
	w.wait(t, 500)
	err := follow(t, f, "site1")
	w.wait(t, 0)
	acked, failed := w.finish()
	if err != nil {
		t.Fatalf("Follow site1: %v", err)
	}
	t.Logf("%d writes acknowledged, %d refused; commands %q", len(acked), failed, rec.take())
	wantRole(t, caches[1], "master")
	waitReplicating(t, caches[0].Name, caches[0].Client(t), caches[1].Port)
	if lost := missing(t, caches[1], acked); len(lost) > 0 {
		t.Errorf("%d of %d acknowledged writes are not on the new master, e.g. %q", len(lost), len(acked), lost[:min(5, len(lost))])
	}
}
