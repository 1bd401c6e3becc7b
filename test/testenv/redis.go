package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisOptions configures StartRedis.
type RedisOptions struct {
	// Name labels the instance in logs and errors; defaults to "redis".
	Name string
	// ExtraArgs are appended to the redis-server command line.
	ExtraArgs []string
}

// Redis is one redis-server started by StartRedis without persistence (no
// RDB snapshots, no AOF): a restart comes back empty and as a master.
type Redis struct {
	Name string // from RedisOptions.Name
	Host string // always "127.0.0.1"
	Port int    // TCP port, kept across Restart
	Dir  string // working dir (--dir)

	dir  string
	log  string
	args []string

	mu   sync.Mutex
	proc *process
}

// StartRedis starts redis-server on a free 127.0.0.1 port with
// --repl-diskless-sync-delay 0; removed at t's cleanup.
func StartRedis(t T, opts RedisOptions) *Redis {
	t.Helper()
	skipIfShort(t)
	r, err := startRedis(t, opts)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return r
}

func startRedis(t T, opts RedisOptions) (*Redis, error) {
	if opts.Name == "" {
		opts.Name = "redis"
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("start redis %s: redis-server not found (%v): run scripts/deps", opts.Name, err)
	}
	dir, err := newRunDir()
	if err != nil {
		return nil, fmt.Errorf("start redis %s: %w", opts.Name, err)
	}
	r := &Redis{Name: opts.Name, Host: "127.0.0.1", Dir: filepath.Join(dir, "data"), dir: dir, log: filepath.Join(dir, "redis.log")}
	t.Cleanup(r.cleanup)
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("start redis %s: %w", opts.Name, err)
	}
	for attempt := 1; ; attempt++ {
		port, err := pickPort()
		if err != nil {
			return nil, fmt.Errorf("start redis %s: %w", opts.Name, err)
		}
		r.Port = port
		r.args = append([]string{
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", r.Dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no",
			"--repl-diskless-sync-delay", "0", "--logfile", "",
		}, opts.ExtraArgs...)
		err = r.start(context.Background())
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			return nil, fmt.Errorf("start redis %s: %w", opts.Name, err)
		}
	}
}

func (r *Redis) start(ctx context.Context) error {
	_ = os.Truncate(r.log, 0)
	p, err := startProcess("redis-server "+r.Name, r.log, "redis-server", r.args...)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := r.newClient()
	defer c.Close()
	var lastErr error
	for {
		if !p.running() {
			log := tailFile(r.log, 20)
			if isPortInUseLog(log) {
				return fmt.Errorf("%w: port %d", errPortTaken, r.Port)
			}
			return fmt.Errorf("redis-server on port %d exited before it was ready: %s\n--- tail of %s ---\n%s", r.Port, p.exitDescription(), r.log, log)
		}
		// Short: the port may belong to whoever won a port race.
		pctx, pcancel := context.WithTimeout(ctx, 250*time.Millisecond)
		lastErr = c.Ping(pctx).Err()
		pcancel()
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			_ = p.cleanup()
			return fmt.Errorf("redis-server on port %d not ready: %w (last error %v)\n%s", r.Port, ctx.Err(), lastErr, tailFile(r.log, 20))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (r *Redis) newClient() *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:         r.Addr(),
		DialTimeout:  2 * time.Second,
		ReadTimeout:  3 * time.Second,
		WriteTimeout: 3 * time.Second,
		MaxRetries:   -1, // a test sees each failure; no silent retry
		// Context deadlines bound every call, so a test's deadline is honoured.
		ContextTimeoutEnabled: true,
	})
}

func (r *Redis) cleanup() { removeDirOnceStopped(r.dir, r.current()) }

func (r *Redis) current() *process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// Addr returns "127.0.0.1:PORT".
func (r *Redis) Addr() string { return fmt.Sprintf("%s:%d", r.Host, r.Port) }

// Client returns a new client for this server (no retries, 2 s dial and 3 s
// read/write timeouts, context deadlines honoured), closed at t's cleanup.
func (r *Redis) Client(t T) *redis.Client {
	t.Helper()
	c := r.newClient()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop sends SIGTERM and waits for the exit.
func (r *Redis) Stop() error { return r.current().terminate(30 * time.Second) }

// Kill sends SIGKILL and waits for the exit.
func (r *Redis) Kill() error { return r.current().kill() }

// Pause sends SIGSTOP.
func (r *Redis) Pause() error { return r.current().pause() }

// Resume sends SIGCONT.
func (r *Redis) Resume() error { return r.current().resume() }

// Running reports whether redis-server runs (paused counts as running).
func (r *Redis) Running() bool { return r.current().running() }

// Restart stops the server if it runs and starts it again on the same port
// and dir; it comes back empty and as a master.
func (r *Redis) Restart(ctx context.Context) error {
	if p := r.current(); p.running() {
		if err := p.terminate(30 * time.Second); err != nil && !errors.Is(err, ErrNotRunning) {
			return fmt.Errorf("restart %s: %w", r.Name, err)
		}
	}
	if err := r.start(ctx); err != nil {
		return fmt.Errorf("restart %s: %w", r.Name, err)
	}
	return nil
}

// Info returns INFO <section> as key → value; t.Fatalf on error.
func (r *Redis) Info(t T, section string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := r.info(ctx, section)
	if err != nil {
		t.Fatalf("testenv: %s: %v", r.Name, err)
	}
	return m
}

func (r *Redis) info(ctx context.Context, section string) (map[string]string, error) {
	c := r.newClient()
	defer c.Close()
	s, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("info %s: %w", section, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// ReplicaOf runs REPLICAOF host port and waits until the link is up and
// the initial sync is done; t.Fatalf after 30 s.
func (r *Redis) ReplicaOf(t T, host string, port int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := r.newClient()
	defer c.Close()
	if err := c.ReplicaOf(ctx, host, strconv.Itoa(port)).Err(); err != nil {
		t.Fatalf("testenv: %s: REPLICAOF %s %d: %v", r.Name, host, port, err)
	}
	for {
		info, err := r.info(ctx, "replication")
		if err == nil && info["master_link_status"] == "up" && info["master_sync_in_progress"] == "0" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: %s: replica of %s:%d not in sync: %v (info %v)", r.Name, host, port, err, info)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitInSync waits until r (a replica) has processed primary's current
// master_repl_offset; t.Fatalf after timeout.
func (r *Redis) WaitInSync(t T, primary *Redis, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pinfo, err := primary.info(ctx, "replication")
	if err != nil {
		t.Fatalf("testenv: %s: %v", primary.Name, err)
	}
	want, _ := strconv.ParseInt(pinfo["master_repl_offset"], 10, 64)
	var info map[string]string
	for {
		info, err = r.info(ctx, "replication")
		if err == nil && info["master_link_status"] == "up" {
			got, _ := strconv.ParseInt(info["slave_repl_offset"], 10, 64)
			if got >= want {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: %s: not in sync with %s (want offset %d): %v (info %v)", r.Name, primary.Name, want, err, info)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// StartRedisPair starts two servers, the second a replica of the first, in
// sync when it returns.
func StartRedisPair(t T) (primary, replica *Redis) {
	t.Helper()
	skipIfShort(t)
	var errP, errR error
	var wg sync.WaitGroup
	wg.Go(func() { primary, errP = startRedis(t, RedisOptions{Name: "redis-primary"}) })
	wg.Go(func() { replica, errR = startRedis(t, RedisOptions{Name: "redis-replica"}) })
	wg.Wait()
	if err := errors.Join(errP, errR); err != nil {
		t.Fatalf("testenv: start redis pair: %v", err)
	}
	replica.ReplicaOf(t, primary.Host, primary.Port)
	replica.WaitInSync(t, primary, 30*time.Second)
	return primary, replica
}
