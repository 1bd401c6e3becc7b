package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/store"
)

// stallingLock is a Lease lock in memory whose API server, once stalled,
// answers nothing: every call hangs until its context ends (a black-holed
// link, unlike a refused connection that fails at once).
type stallingLock struct {
	identity string
	mu       sync.Mutex
	rec      *resourcelock.LeaderElectionRecord
	stalled  bool
	written  time.Time // when the latest write of identity's record was applied
}

func (l *stallingLock) hang(ctx context.Context) (bool, error) {
	l.mu.Lock()
	stalled := l.stalled
	l.mu.Unlock()
	if !stalled {
		return false, nil
	}
	<-ctx.Done()
	return true, ctx.Err()
}

func (l *stallingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if hung, err := l.hang(ctx); hung {
		return nil, nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return nil, nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "failoverd-leader")
	}
	r := *l.rec
	raw, _ := json.Marshal(r)
	return &r, raw, nil
}

func (l *stallingLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.Update(ctx, r)
}

func (l *stallingLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	if hung, err := l.hang(ctx); hung {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec = &r
	if r.HolderIdentity == l.identity {
		l.written = time.Now()
	}
	return nil
}

func (l *stallingLock) RecordEvent(string)   {}
func (l *stallingLock) Identity() string     { return l.identity }
func (l *stallingLock) Describe() string     { return "memory/lease" }
func (l *stallingLock) stall()               { l.mu.Lock(); l.stalled = true; l.mu.Unlock() }
func (l *stallingLock) lastWrite() time.Time { l.mu.Lock(); defer l.mu.Unlock(); return l.written }

// A Lease leader whose API server stops answering stops acting before
// another daemon can take the Lease (leaseDuration after its last renewal
// was written), even though client-go cancels the term's context only after
// it also tried, for up to renewDeadline, to release the Lease.
func TestLeaseLeaderStopsBeforeTheLeaseCanPass(t *testing.T) {
	le := configs.LeaderElection{Enabled: true, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}
	cfg := &configs.Config{}
	cfg.Daemon.LeaderElection = le
	d := &Daemon{cfg: cfg, log: slog.New(slog.DiscardHandler), opts: Options{Identity: "me", Clock: time.Now}}
	lock := &stallingLock{identity: "me"}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = d.electLease(ctx, lock); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for !d.isLeader() {
		if time.Now().After(deadline) {
			t.Fatal("never elected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second) // a few renewals
	lock.stall()
	last := lock.lastWrite()
	expiry := last.Add(le.HeldLease()) // another daemon may take the Lease from here
	for d.isLeader() {
		if time.Now().After(expiry.Add(3 * time.Second)) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped := time.Now()
	t.Logf("stopped acting %v after the last renewal was written (the Lease may pass after %v)", stopped.Sub(last).Round(time.Millisecond), le.HeldLease())
	if !stopped.Before(expiry) {
		t.Fatalf("the leader still acted %v after the Lease could pass to another daemon", stopped.Sub(expiry).Round(time.Millisecond))
	}
}

// A Lease leader claims the next term in the ConfigMap store before it
// loads anything, and its writes stop with its term.
func TestLeaseLeaderClaimsTheConfigMap(t *testing.T) {
	le := configs.LeaderElection{Enabled: true, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}
	cfg := &configs.Config{}
	cfg.Daemon.LeaderElection = le
	client := fake.NewClientset()
	cm := store.NewConfigMap(client, "ns", "state", time.Now)
	d := &Daemon{cfg: cfg, log: slog.New(slog.DiscardHandler), opts: Options{Identity: "me", Clock: time.Now}, cmStore: cm, store: cm}
	lock := &stallingLock{identity: "me"}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = d.electLease(ctx, lock); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for !d.isLeader() {
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("never elected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	obj, err := client.CoreV1().ConfigMaps("ns").Get(t.Context(), "state", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.Annotations[store.TermAnnotation]; got != "1 me" {
		t.Fatalf("term annotation %q, want \"1 me\"", got)
	}
	if err := cm.Save(t.Context(), store.GroupState{Group: "g", Epoch: 1}); err != nil {
		t.Fatalf("leader's write: %v", err)
	}
	cancel()
	<-done
	// The term's end ends the claim (context.AfterFunc, its own goroutine;
	// the term's own writes carry its cancelled context meanwhile).
	for wait := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := cm.Save(context.Background(), store.GroupState{Group: "g", Epoch: 1})
		if errors.Is(err, store.ErrNotLeader) {
			break
		}
		if time.Now().After(wait) {
			t.Fatalf("write after the term: %v, want store.ErrNotLeader", err)
		}
	}
}
