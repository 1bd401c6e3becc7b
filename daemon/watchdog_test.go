package daemon

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/test/testenv"
)

// The etcd leader's term ends — and with it every action, which derives
// from the term's context — when its election key is gone, when its session
// ends, and when the quorum stops answering for a third of the TTL: before
// the server could expire the session and elect another daemon.
func TestEtcdWatchdogEndsTheTerm(t *testing.T) {
	const ttl = 3 * time.Second
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, m *testenv.EtcdMember, s *concurrency.Session, tok store.Token)
	}{
		{"election key deleted", func(t *testing.T, m *testenv.EtcdMember, _ *concurrency.Session, tok store.Token) {
			if _, err := m.Client(t).Delete(context.Background(), tok.Key); err != nil {
				t.Fatal(err)
			}
		}},
		{"session ended", func(t *testing.T, _ *testenv.EtcdMember, s *concurrency.Session, _ store.Token) {
			_ = s.Close()
		}},
		{"quorum not answering", func(t *testing.T, m *testenv.EtcdMember, _ *concurrency.Session, _ store.Token) {
			if err := m.Pause(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Resume() })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testenv.StartEtcdCluster(t, 1)
			m := c.Members[0]
			cli := m.Client(t)
			sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttl/time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			e := concurrency.NewElection(sess, "/t/leader")
			if err := e.Campaign(context.Background(), "me"); err != nil {
				t.Fatal(err)
			}
			tok := store.Token{Key: e.Key(), Rev: e.Rev()}
			d := &Daemon{etcd: cli, log: slog.New(slog.DiscardHandler), opts: Options{Identity: "me"}}
			term, resign := context.WithCancel(context.Background())
			defer resign()
			done := make(chan struct{})
			w := newEtcdWatch(cli, tok, sess.Lease(), ttl, time.Now)
			go func() { d.etcdWatchdog(term, resign, sess.Done(), w); close(done) }()
			select {
			case <-term.Done():
				t.Fatal("the term ended while the leader was fine")
			case <-time.After(ttl / 2):
			}
			faulted := time.Now()
			tc.fault(t, m, sess, tok)
			select {
			case <-term.Done():
			case <-time.After(ttl):
				t.Fatalf("the term still runs %v after the fault: another daemon could lead by now", ttl)
			}
			t.Logf("term ended %v after the fault", time.Since(faulted))
			<-done
		})
	}
}

// manualClock is a clock a test moves by hand.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// stallingEtcd finds the leader key on every read (reads are served by a
// member that still answers) while keep-alives, once stalled, time out
// (the member they go through cannot reach the leader), each one taking
// its whole timeout on the clock.
type stallingEtcd struct {
	clock   *manualClock
	tok     store.Token
	stalled bool
	renewed []time.Time // when each keep-alive that succeeded was sent
}

func (f *stallingEtcd) Get(_ context.Context, key string, _ ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	return &clientv3.GetResponse{Kvs: []*mvccpb.KeyValue{{Key: []byte(key), CreateRevision: f.tok.Rev}}}, nil
}

func (f *stallingEtcd) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	if f.stalled {
		if dl, ok := ctx.Deadline(); ok {
			f.clock.advance(time.Until(dl))
		}
		return nil, context.DeadlineExceeded
	}
	f.renewed = append(f.renewed, f.clock.now())
	return &clientv3.LeaseKeepAliveResponse{ID: id, TTL: 15}, nil
}

// Keep-alives that stall while reads of the leader key still succeed end
// the term before the lease can expire: the leader counts from the last
// keep-alive that succeeded (from when it was sent), not from the last time
// it saw its key.
func TestEtcdLeaderStopsWhenKeepAlivesStall(t *testing.T) {
	const ttl = 15 * time.Second
	clock := &manualClock{t: t0}
	tok := store.Token{Key: "/t/leader/1", Rev: 42}
	f := &stallingEtcd{clock: clock, tok: tok}
	w := newEtcdWatch(f, tok, 7, ttl, clock.now)
	// Healthy rounds, then the keep-alives stall.
	for range 5 {
		clock.advance(w.every)
		if s := w.round(t.Context()); s != nil {
			t.Fatalf("term ended while healthy: %s %v", s.msg, s.attrs)
		}
	}
	f.stalled = true
	last := t0
	if n := len(f.renewed); n > 0 {
		last = f.renewed[n-1]
	}
	expiry := last.Add(ttl) // the earliest the server can expire the lease
	for clock.now().Before(expiry) {
		clock.advance(w.every)
		if s := w.round(t.Context()); s != nil {
			t.Logf("term ended %v after the last renewal was sent (%s %v)", clock.now().Sub(last), s.msg, s.attrs)
			if left := expiry.Sub(clock.now()); left < ttl/2 {
				t.Fatalf("term ended only %v before the lease could expire", left)
			}
			// Between rounds too: no decision is acted on once the
			// renewal is older than the limit.
			var l leadership
			l.begin(t.Context(), t0, w.renew)
			if l.leading() {
				t.Fatalf("still leading with the last renewal %v old", clock.now().Sub(w.renew.lastRenewal()))
			}
			return
		}
	}
	t.Fatalf("the leader still acts %v after its last renewal was sent: the lease may have expired and another daemon lead", clock.now().Sub(last))
}
