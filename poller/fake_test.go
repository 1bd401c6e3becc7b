package poller

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
)

// fakeServer is a fake site behind the Prober interface. Its behaviour can
// change while the poller runs. Time inside it is the synctest bubble's.
type fakeServer struct {
	mu sync.Mutex
	// status is returned by Status when err is nil.
	status mysqlctl.Status
	// err is returned by Status.
	err error
	// dialErr is returned by the dialer.
	dialErr error
	// delay is how long Status takes; it honours ctx.
	delay time.Duration
	// stuck makes Status block, ignoring ctx, until release is closed.
	stuck   bool
	release chan struct{}

	calls, dials, closes int
	active, maxActive    int
}

func newFakeServer(st mysqlctl.Status) *fakeServer {
	return &fakeServer{status: st, release: make(chan struct{})}
}

func (f *fakeServer) set(fn func(f *fakeServer)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeServer) counts() (calls, dials, closes, maxActive int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.dials, f.closes, f.maxActive
}

// Status implements Prober.
func (f *fakeServer) Status(ctx context.Context) (mysqlctl.Status, error) {
	f.mu.Lock()
	f.calls++
	f.active++
	f.maxActive = max(f.maxActive, f.active)
	st, err, delay, stuck, release := f.status, f.err, f.delay, f.stuck, f.release
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.active--
		f.mu.Unlock()
	}()
	if stuck {
		<-release // a prober that ignores its context
		return mysqlctl.Status{}, context.DeadlineExceeded
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return mysqlctl.Status{}, ctx.Err()
		}
	}
	return st, err
}

// fakeConn is the Prober handed out by fakeNet: closing it is counted.
type fakeConn struct{ *fakeServer }

func (c fakeConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closes++
	return nil
}

// fakeNet maps site names to fake servers.
type fakeNet map[string]*fakeServer

func (n fakeNet) dial(_ context.Context, s Site) (Prober, error) {
	f := n[s.Name]
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials++
	if f.dialErr != nil {
		return nil, f.dialErr
	}
	return fakeConn{f}, nil
}

// primaryStatus is a writable MariaDB primary.
func primaryStatus() mysqlctl.Status {
	return mysqlctl.Status{Flavor: mysqlctl.Flavor{Engine: gtid.MariaDB, Distribution: mysqlctl.DistMariaDB, Major: 10, Minor: 11}}
}

// replicaStatus is a read-only MariaDB replica of host:port with a
// heartbeat period hb and hbs received heartbeats.
func replicaStatus(host string, port int, io mysqlctl.ThreadState, hb time.Duration, hbs uint64) mysqlctl.Status {
	st := primaryStatus()
	st.ReadOnly = true
	st.Replica = &mysqlctl.ReplicaStatus{
		IOThread: io, SQLThread: mysqlctl.ThreadYes,
		SourceHost: host, SourcePort: port,
		HeartbeatPeriod: hb, ReceivedHeartbeats: hbs,
		RetrievedRaw: "0-1-5",
	}
	return st
}

// recorder collects observations from a sink.
type recorder struct {
	mu  sync.Mutex
	obs []Observation
}

func (r *recorder) sink(o Observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs = append(r.obs, o)
}

// site returns the observations of one site, in order.
func (r *recorder) site(name string) []Observation {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Observation
	for _, o := range r.obs {
		if o.Site == name {
			out = append(out, o)
		}
	}
	return out
}

// startedAt is when each probe of site began, from start.
func (r *recorder) startedAt(site string, start time.Time) []time.Duration {
	var out []time.Duration
	for _, o := range r.site(site) {
		out = append(out, o.Started.Sub(start))
	}
	return out
}

// testConfig is a valid Config over net with round numbers: interval 1s,
// timeout 400ms, failure threshold 2.
// testGroup is the group name of testConfig: its ticks start on the first
// step of the grid.
const testGroup = "group"

func testConfig(net fakeNet, sites ...Site) Config {
	return Config{
		// The tests' tick times assume the group's first step is 0
		// (firstTick); TestTestGroupStartsOnStepZero says so if that changes.
		Group:            testGroup,
		Sites:            sites,
		PollInterval:     time.Second,
		ProbeTimeout:     400 * time.Millisecond,
		FailureThreshold: 2,
		Dial:             net.dial,
		Logger:           slog.New(slog.DiscardHandler),
	}
}

// running starts p.Run in the bubble and returns a stop function that
// cancels it and waits for Run to return.
func running(t *testing.T, p *Poller, rec *recorder) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, rec.sink) }()
	synctest.Wait()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// offsetClock is the (bubble's) system clock shifted by off, to prove the
// poller stamps observations with the injected clock.
type offsetClock struct{ off time.Duration }

func (c offsetClock) Now() time.Time                 { return time.Now().Add(c.off) }
func (c offsetClock) NewTimer(d time.Duration) Timer { return SystemClock{}.NewTimer(d) }
