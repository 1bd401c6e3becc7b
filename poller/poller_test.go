package poller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/go-sql-driver/mysql"
)

func TestNewValidatesConfig(t *testing.T) {
	net := fakeNet{"a": newFakeServer(primaryStatus())}
	valid := testConfig(net, Site{Name: "a", Addr: "h:1"})
	tests := []struct {
		name   string
		mutate func(c *Config)
	}{
		{"zero interval", func(c *Config) { c.PollInterval = 0 }},
		{"timeout equal to interval", func(c *Config) { c.ProbeTimeout = c.PollInterval }},
		{"zero timeout", func(c *Config) { c.ProbeTimeout = 0 }},
		{"zero threshold", func(c *Config) { c.FailureThreshold = 0 }},
		{"backoff below interval", func(c *Config) { c.MaxBackoff = c.PollInterval / 2 }},
		{"negative silence", func(c *Config) { c.SilenceAfter = -time.Second }},
		{"no dial", func(c *Config) { c.Dial = nil }},
		{"no sites", func(c *Config) { c.Sites = nil }},
		{"unnamed site", func(c *Config) { c.Sites = []Site{{Addr: "h:1"}} }},
		{"site without address", func(c *Config) { c.Sites = []Site{{Name: "a"}} }},
		{"duplicate site", func(c *Config) { c.Sites = []Site{{Name: "a", Addr: "h:1"}, {Name: "a", Addr: "h:2"}} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid
			tt.mutate(&c)
			if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New: err = %v, want ErrInvalidConfig", err)
			}
		})
	}
	p, err := New(valid)
	if err != nil {
		t.Fatalf("New(valid): %v", err)
	}
	if got := p.Config().MaxBackoff; got != DefaultBackoffFactor*valid.PollInterval {
		t.Errorf("default MaxBackoff = %v, want %v", got, DefaultBackoffFactor*valid.PollInterval)
	}
}

func TestRunRefusesNilSinkAndSecondRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := fakeNet{"a": newFakeServer(primaryStatus())}
		p, err := New(testConfig(net, Site{Name: "a", Addr: "h:1"}))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(t.Context(), nil); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Run(nil sink) = %v, want ErrInvalidConfig", err)
		}
		rec := &recorder{}
		stop := running(t, p, rec)
		if err := p.Run(t.Context(), rec.sink); !errors.Is(err, ErrRunning) {
			t.Errorf("second Run = %v, want ErrRunning", err)
		}
		stop()
	})
}

// TestTickTiming: ticks follow a fixed cadence from the (staggered) first
// tick, a slow probe does not shift later ticks, observations are stamped
// with the injected clock and numbered per site.
func TestTickTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newFakeServer(primaryStatus()), newFakeServer(primaryStatus())
		a.delay = 300 * time.Millisecond // slow but within the timeout
		cfg := testConfig(fakeNet{"a": a, "b": b}, Site{Name: "a", Addr: "h:1"}, Site{Name: "b", Addr: "h:2"})
		const skew = 1000 * time.Hour
		_, rec, start, stop := runSkewed(t, cfg, skew)
		time.Sleep(5*time.Second + 700*time.Millisecond)
		stop()

		for _, tt := range []struct {
			site     string
			offset   time.Duration // staggered first tick: i × interval / n
			duration time.Duration
		}{
			{"a", 0, 300 * time.Millisecond},
			{"b", 500 * time.Millisecond, 0},
		} {
			obs := rec.site(tt.site)
			if len(obs) != 6 {
				t.Fatalf("site %s: %d observations in 5.7s at 1s, want 6", tt.site, len(obs))
			}
			for i, o := range obs {
				wantStart := start.Add(tt.offset + time.Duration(i)*time.Second)
				if !o.Started.Equal(wantStart) || o.Duration != tt.duration || !o.At.Equal(wantStart.Add(tt.duration)) {
					t.Errorf("site %s probe %d: started %v after start, took %v, at %v; want started %v, took %v",
						tt.site, i, o.Started.Sub(start), o.Duration, o.At.Sub(start), wantStart.Sub(start), tt.duration)
				}
				if o.Seq != uint64(i+1) || o.Site != tt.site || o.Group != testGroup || !o.Reachable || o.Class != ClassNone {
					t.Errorf("site %s probe %d: %+v", tt.site, i, o)
				}
			}
		}
		if _, dials, closes, maxActive := a.counts(); dials != 1 || closes != 1 || maxActive != 1 {
			t.Errorf("site a: %d dials, %d closes, %d concurrent probes; want one connection reused and closed, one probe at a time", dials, closes, maxActive)
		}
	})
}

func TestClassify(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name string
		err  error
		want ErrorClass
	}{
		{"nil", nil, ClassNone},
		{"connection refused", fmt.Errorf("dial a: %w", refused), ClassRefused},
		{"context deadline", fmt.Errorf("status a: %w", context.DeadlineExceeded), ClassTimeout},
		{"net timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, ClassTimeout},
		{"probe timeout sentinel", ErrProbeTimeout, ClassTimeout},
		{"stuck probe", ErrProbeStuck, ClassTimeout},
		{"access denied", fmt.Errorf("open: %w", &mysql.MySQLError{Number: 1045, Message: "Access denied"}), ClassAuth},
		{"missing privilege", &mysql.MySQLError{Number: 1227, Message: "Access denied; you need REPLICA MONITOR"}, ClassAuth},
		{"auth plugin", mysql.ErrNativePassword, ClassAuth},
		{"redacted access denied", errors.New("status h:1: Error 1045 (28000): Access denied for user"), ClassAuth},
		{"other server error", &mysql.MySQLError{Number: 1040, Message: "Too many connections"}, ClassOther},
		{"connection reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, ClassOther},
		{"invalid connection", mysql.ErrInvalidConn, ClassOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

// TestProbeFailureClassification runs real probes against fakes and checks
// the class, the error and how long a failing probe may take.
func TestProbeFailureClassification(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name         string
		setup        func(f *fakeServer)
		want         ErrorClass
		wantErr      error
		wantDuration time.Duration
	}{
		{"hang honouring ctx", func(f *fakeServer) { f.delay = time.Hour }, ClassTimeout, ErrProbeTimeout, 400 * time.Millisecond},
		{"hang ignoring ctx", func(f *fakeServer) { f.stuck = true }, ClassTimeout, ErrProbeTimeout, 400 * time.Millisecond},
		{"refused at dial", func(f *fakeServer) { f.dialErr = refused }, ClassRefused, syscall.ECONNREFUSED, 0},
		{"access denied", func(f *fakeServer) { f.err = &mysql.MySQLError{Number: 1045} }, ClassAuth, nil, 0},
		{"other", func(f *fakeServer) { f.err = mysql.ErrInvalidConn }, ClassOther, mysql.ErrInvalidConn, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeServer(primaryStatus())
				tt.setup(f)
				p, err := New(testConfig(fakeNet{"a": f}, Site{Name: "a", Addr: "h:1"}))
				if err != nil {
					t.Fatal(err)
				}
				rec := &recorder{}
				stop := running(t, p, rec)
				time.Sleep(500 * time.Millisecond)
				close(f.release)
				stop()
				obs := rec.site("a")
				if len(obs) != 1 {
					t.Fatalf("%d observations, want 1", len(obs))
				}
				o := obs[0]
				if o.Reachable || o.Class != tt.want || o.Duration != tt.wantDuration {
					t.Errorf("observation: reachable %v class %q duration %v; want unreachable, %q, %v", o.Reachable, o.Class, o.Duration, tt.want, tt.wantDuration)
				}
				if tt.wantErr != nil && !errors.Is(o.Err, tt.wantErr) {
					t.Errorf("err = %v, want it to wrap %v", o.Err, tt.wantErr)
				}
			})
		})
	}
}

// TestAuthErrorReopensProber: after an auth error the prober is closed and
// dialled again (a rotated password file is re-read); other errors keep it.
func TestAuthErrorReopensProber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(primaryStatus())
		f.err = &mysql.MySQLError{Number: 1045}
		p, err := New(testConfig(fakeNet{"a": f}, Site{Name: "a", Addr: "h:1"}))
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		stop := running(t, p, rec) // probe at 0: auth error
		time.Sleep(500 * time.Millisecond)
		f.set(func(f *fakeServer) { f.err = mysql.ErrInvalidConn })
		time.Sleep(time.Second) // probe at 1s: other error
		f.set(func(f *fakeServer) { f.err = nil })
		time.Sleep(3 * time.Second) // probe at 3s (backed off): success
		stop()
		_, dials, closes, _ := f.counts()
		if dials != 2 || closes != 2 {
			t.Errorf("%d dials and %d closes; want 2 and 2 (reopen after the auth error, close at the end)", dials, closes)
		}
		obs := rec.site("a")
		if last := obs[len(obs)-1]; !last.Reachable {
			t.Errorf("last observation unreachable: %v", last.Err)
		}
	})
}

// TestNoPileUpOnHungSite: a prober that ignores its context blocks one
// probe; the site keeps producing timely timeout observations without
// starting another probe or goroutine, and recovers once it returns.
func TestNoPileUpOnHungSite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(primaryStatus())
		f.stuck = true
		cfg := testConfig(fakeNet{"a": f}, Site{Name: "a", Addr: "h:1"})
		cfg.MaxBackoff = cfg.PollInterval // no backoff: the most ticks
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		stop := running(t, p, rec)
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		early := runtime.NumGoroutine()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		late := runtime.NumGoroutine()
		if late != early {
			t.Errorf("goroutines grew from %d to %d over 20 ticks on a hung site", early, late)
		}
		calls, _, _, maxActive := f.counts()
		if calls != 1 || maxActive != 1 {
			t.Errorf("%d probes started, %d at once; want exactly 1 while it hangs", calls, maxActive)
		}
		obs := rec.site("a")
		if len(obs) != 23 {
			t.Errorf("%d observations in 22.5s at 1s, want 23 (a hung probe must not skip ticks)", len(obs))
		}
		for i, o := range obs {
			want := ErrProbeStuck
			if i == 0 {
				want = ErrProbeTimeout
			}
			if o.Reachable || o.Class != ClassTimeout || !errors.Is(o.Err, want) || o.Duration > cfg.ProbeTimeout {
				t.Fatalf("observation %d: reachable %v class %q err %v duration %v; want a prompt timeout wrapping %v", i, o.Reachable, o.Class, o.Err, o.Duration, want)
			}
		}

		f.set(func(f *fakeServer) { f.stuck = false })
		close(f.release)
		time.Sleep(2 * time.Second)
		stop()
		if calls, _, _, _ := f.counts(); calls < 2 {
			t.Errorf("no new probe after the hung one returned")
		}
		obs = rec.site("a")
		if last := obs[len(obs)-1]; !last.Reachable {
			t.Errorf("site not reachable after the hang ended: %v", last.Err)
		}
	})
}

// TestBackoffOnlyAfterThreshold: an unreachable site is polled at the base
// interval until FailureThreshold + BackoffGrace consecutive failures, then at a doubling
// interval capped at MaxBackoff, and at the base interval again after one
// success.
func TestBackoffOnlyAfterThreshold(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		threshold int
		max       time.Duration
		// gaps between the starts of consecutive probes, in seconds: the
		// first eight fail, the rest succeed.
		want []int
	}{
		{1, 4 * time.Second, []int{1, 1, 1, 1, 2, 4, 4, 4, 1, 1}},
		{2, 4 * time.Second, []int{1, 1, 1, 1, 1, 2, 4, 4, 1, 1}},
		{3, 4 * time.Second, []int{1, 1, 1, 1, 1, 1, 2, 4, 1, 1}},
		{2, 8 * time.Second, []int{1, 1, 1, 1, 1, 2, 4, 8, 1, 1}},
		{2, time.Second, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("threshold %d max %v", tt.threshold, tt.max), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeServer(primaryStatus())
				f.dialErr = refused
				cfg := testConfig(fakeNet{"a": f}, Site{Name: "a", Addr: "h:1"})
				cfg.FailureThreshold, cfg.MaxBackoff = tt.threshold, tt.max
				p, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				rec := &recorder{}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				n := 0
				go func() {
					done <- p.Run(ctx, func(o Observation) {
						rec.sink(o)
						n++
						if n == 8 {
							f.set(func(f *fakeServer) { f.dialErr = nil })
						}
						if n == len(tt.want)+1 {
							cancel()
						}
					})
				}()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				obs := rec.site("a")
				var gaps []int
				for i := 1; i < len(obs); i++ {
					gaps = append(gaps, int(obs[i].Started.Sub(obs[i-1].Started)/time.Second))
				}
				if fmt.Sprint(gaps) != fmt.Sprint(tt.want) {
					t.Errorf("gaps between probes = %v s, want %v s", gaps, tt.want)
				}
			})
		})
	}
}

// TestSilenceDetection runs a replica whose heartbeat counter stops and
// starts again and checks SilentFor / SourceSilent on the daemon's clock.
func TestSilenceDetection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := newFakeServer(primaryStatus())
		replica := newFakeServer(replicaStatus("db-a.example", 3306, mysqlctl.ThreadYes, 500*time.Millisecond, 0))
		cfg := testConfig(fakeNet{"a": primary, "b": replica},
			Site{Name: "a", Addr: "proxy:1", ReplicationAddr: "db-a.example:3306"}, Site{Name: "b", Addr: "proxy:2"})
		cfg.PollInterval = 500 * time.Millisecond
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		stop := running(t, p, rec)
		// b's probes run at 0.25s + k×0.5s. Heartbeats arrive until 2s.
		var beats uint64
		for range 4 {
			time.Sleep(500 * time.Millisecond)
			beats++
			replica.set(func(f *fakeServer) {
				f.status = replicaStatus("db-a.example", 3306, mysqlctl.ThreadYes, 500*time.Millisecond, beats)
			})
		}
		time.Sleep(3500 * time.Millisecond) // no heartbeat from 2s until 5.5s
		beats++
		replica.set(func(f *fakeServer) {
			f.status = replicaStatus("db-a.example", 3306, mysqlctl.ThreadYes, 500*time.Millisecond, beats)
		})
		time.Sleep(500 * time.Millisecond)
		stop()

		// Threshold: 2 × 0.5s heartbeat + 1 × 0.5s poll = 1.5s.
		var silentAt, backAt time.Duration
		start := rec.site("b")[0].At
		for _, o := range rec.site("b") {
			if !o.SilenceKnown || o.SilenceThreshold != 1500*time.Millisecond {
				t.Fatalf("probe %d: silence known %v threshold %v, want known, 1.5s", o.Seq, o.SilenceKnown, o.SilenceThreshold)
			}
			if o.Follows != "a" || !o.IOConnected || o.SourceAddr != "db-a.example:3306" {
				t.Fatalf("probe %d: follows %q (source %q) connected %v; want a, db-a.example:3306, connected", o.Seq, o.Follows, o.SourceAddr, o.IOConnected)
			}
			switch {
			case o.SourceSilent && silentAt == 0:
				silentAt = o.At.Sub(start)
			case !o.SourceSilent && silentAt != 0 && backAt == 0:
				backAt = o.At.Sub(start)
			}
		}
		// The last change is seen by the probe at 2.25s; the 2.75s probe
		// sees none, so the next one runs 1 ms after the threshold is
		// crossed, at 3.751s (3.501s after the first probe) instead of at
		// the 4.25s tick, and the rhythm restarts from it: 4.251s ...
		// 5.751s, held to the 25 ms grid (5.775s), sees the heartbeat of
		// 5.5s.
		if silentAt != 3501*time.Millisecond {
			t.Errorf("source reported silent %v after the first probe, want 3.501s", silentAt)
		}
		if backAt != 5525*time.Millisecond {
			t.Errorf("source reported alive again %v after the first probe, want 5.525s", backAt)
		}
	})
}

// TestNoSilenceCrossingProbeOnAHealthyIdleLink: a replica whose heartbeats
// arrive less often than it is probed (heartbeat 1s, poll 0.5s: every other
// probe sees no news) is probed on its regular ticks only; the probe at a
// silence crossing is for a link that really went quiet.
func TestNoSilenceCrossingProbeOnAHealthyIdleLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := newFakeServer(primaryStatus())
		replica := newFakeServer(replicaStatus("db-a.example", 3306, mysqlctl.ThreadYes, time.Second, 0))
		cfg := testConfig(fakeNet{"a": primary, "b": replica},
			Site{Name: "a", Addr: "proxy:1", ReplicationAddr: "db-a.example:3306"}, Site{Name: "b", Addr: "proxy:2"})
		cfg.PollInterval = 500 * time.Millisecond
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		start := time.Now()
		stop := running(t, p, rec)
		for beats := uint64(1); beats <= 5; beats++ {
			time.Sleep(time.Second)
			replica.set(func(f *fakeServer) {
				f.status = replicaStatus("db-a.example", 3306, mysqlctl.ThreadYes, time.Second, beats)
			})
		}
		stop()
		got := rec.startedAt("b", start)
		want := []time.Duration{250 * time.Millisecond}
		for at := 750 * time.Millisecond; at < 5*time.Second; at += 500 * time.Millisecond {
			want = append(want, at)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("replica probed at %v, want the regular ticks %v", got, want)
		}
		for _, o := range rec.site("b") {
			if o.SourceSilent {
				t.Errorf("probe %d: healthy idle link reported silent (silent for %v)", o.Seq, o.SilentFor)
			}
		}
	})
}

func TestSilenceTracker(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	rs := func(hb time.Duration, beats uint64, pos string) *mysqlctl.ReplicaStatus {
		return &mysqlctl.ReplicaStatus{HeartbeatPeriod: hb, ReceivedHeartbeats: beats, RetrievedRaw: pos}
	}
	type step struct {
		r          *mysqlctl.ReplicaStatus
		source     string
		at         time.Duration
		wantKnown  bool
		wantSilent time.Duration
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"counter stops", []step{
			{rs(time.Second, 1, "0-1-1"), "a:1", 0, true, 0},
			{rs(time.Second, 2, "0-1-1"), "a:1", time.Second, true, 0},
			{rs(time.Second, 2, "0-1-1"), "a:1", 2 * time.Second, true, time.Second},
			{rs(time.Second, 2, "0-1-1"), "a:1", 5 * time.Second, true, 4 * time.Second},
		}},
		{"events without heartbeats are progress", []step{
			{rs(time.Second, 7, "0-1-1"), "a:1", 0, true, 0},
			{rs(time.Second, 7, "0-1-2"), "a:1", 3 * time.Second, true, 0},
			{rs(time.Second, 7, "0-1-2"), "a:1", 4 * time.Second, true, time.Second},
		}},
		{"new source starts over", []step{
			{rs(time.Second, 3, "0-1-1"), "a:1", 0, true, 0},
			{rs(time.Second, 3, "0-1-1"), "b:1", 5 * time.Second, true, 0},
		}},
		{"no heartbeat period: unknown, never silent", []step{
			{rs(0, 0, "0-1-1"), "a:1", 0, false, 0},
			{rs(0, 0, "0-1-1"), "a:1", time.Hour, false, 0},
		}},
		{"not a replica any more resets", []step{
			{rs(time.Second, 1, "0-1-1"), "a:1", 0, true, 0},
			{nil, "", 10 * time.Second, false, 0},
			{rs(time.Second, 1, "0-1-1"), "a:1", 20 * time.Second, true, 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s silenceTracker
			for i, st := range tt.steps {
				known, silent := s.observe(st.r, st.source, t0.Add(st.at))
				if known != st.wantKnown || silent != st.wantSilent {
					t.Errorf("step %d: known %v silent for %v, want %v, %v", i, known, silent, st.wantKnown, st.wantSilent)
				}
			}
		})
	}
	if got := silenceThreshold(0, 500*time.Millisecond, time.Second); got != 2*time.Second {
		t.Errorf("threshold floor = %v, want 2 heartbeats + 1 poll = 2s", got)
	}
	if got := silenceThreshold(10*time.Second, 500*time.Millisecond, time.Second); got != 10*time.Second {
		t.Errorf("configured threshold = %v, want 10s", got)
	}
}

// TestReplicationView checks what an observation says about a replica's
// link in each IO/SQL thread situation.
func TestReplicationView(t *testing.T) {
	tests := []struct {
		name                    string
		mutate                  func(r *mysqlctl.ReplicaStatus)
		wantConnected, wantBrkn bool
	}{
		{"streaming", func(r *mysqlctl.ReplicaStatus) {}, true, false},
		{"reconnecting after source loss", func(r *mysqlctl.ReplicaStatus) {
			r.IOThread, r.LastIOErrno = mysqlctl.ThreadConnecting, 2003
		}, false, false},
		{"io thread stopped on error", func(r *mysqlctl.ReplicaStatus) { r.IOThread, r.LastIOErrno = mysqlctl.ThreadNo, 1236 }, false, true},
		{"io thread stopped by hand", func(r *mysqlctl.ReplicaStatus) { r.IOThread = mysqlctl.ThreadNo }, false, false},
		{"sql thread stopped on error", func(r *mysqlctl.ReplicaStatus) { r.SQLThread, r.LastSQLErrno = mysqlctl.ThreadNo, 1950 }, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := replicaStatus("10.0.0.1", 3306, mysqlctl.ThreadYes, time.Second, 1)
			tt.mutate(st.Replica)
			p, err := New(testConfig(fakeNet{}, Site{Name: "a", Addr: "10.0.0.1:3306"}, Site{Name: "b", Addr: "10.0.0.2:3306"}))
			if err != nil {
				t.Fatal(err)
			}
			s := &siteLoop{cfg: &p.cfg, book: p.book, site: p.cfg.Sites[1], log: p.cfg.Logger}
			o := s.finish(Observation{Site: "b"}, st, nil)
			if o.IOConnected != tt.wantConnected || o.ReplicationBroken != tt.wantBrkn || o.Follows != "a" {
				t.Errorf("connected %v broken %v follows %q; want %v, %v, a", o.IOConnected, o.ReplicationBroken, o.Follows, tt.wantConnected, tt.wantBrkn)
			}
		})
	}
}

func TestAddressBook(t *testing.T) {
	book := newAddressBook([]Site{
		{Name: "a", Addr: "proxy-a:6000", ReplicationAddr: "DB-A.example:3306"},
		{Name: "b", Addr: "[2001:db8::b]:3306"},
		{Name: "c", Addr: "10.0.0.3:3306", ReplicationAddr: "10.0.0.3:3306"},
		{Name: "d", Addr: "shared:3306"},
		{Name: "e", Addr: "shared:3306"},
	})
	tests := []struct {
		host string
		port int
		want string
	}{
		{"db-a.example", 3306, "a"},   // by replication address, case-insensitive
		{"proxy-a", 6000, "a"},        // by daemon address
		{"2001:db8::b", 3306, "b"},    // IPv6 without brackets
		{"[2001:db8::b]", 3306, "b"},  // IPv6 with brackets
		{"10.0.0.3", 3306, "c"},       // same address twice for one site
		{"10.0.0.3", 3307, ""},        // other port
		{"unknown.example", 3306, ""}, // nobody
		{"shared", 3306, ""},          // two sites: ambiguous, nobody
		{"", 0, ""},                   // not a replica
	}
	for _, tt := range tests {
		if got := book.lookup(tt.host, tt.port); got != tt.want {
			t.Errorf("lookup(%q, %d) = %q, want %q", tt.host, tt.port, got, tt.want)
		}
	}
}

// A failed probe's log line names the group once: the caller's logger
// carries it (JSON with a duplicate key is read differently by every tool).
func TestProbeFailureLogHasNoDuplicateKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(primaryStatus())
		f.err = mysql.ErrInvalidConn
		cfg := testConfig(fakeNet{"a": f}, Site{Name: "a", Addr: "h:1"})
		var buf syncBuffer
		cfg.Logger = slog.New(slog.NewJSONHandler(&buf, nil)).With("group", cfg.Group)
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		stop := running(t, p, &recorder{})
		time.Sleep(500 * time.Millisecond)
		close(f.release)
		stop()
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) == 0 || !strings.Contains(buf.String(), "probe failed") {
			t.Fatalf("no probe failure logged: %q", buf.String())
		}
		for _, l := range lines {
			if k := duplicateKey(t, l); k != "" {
				t.Errorf("key %q twice in %s", k, l)
			}
		}
	})
}

// duplicateKey returns a top-level key that appears twice in a JSON object.
func duplicateKey(t *testing.T, line string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if _, err := dec.Token(); err != nil {
		t.Fatalf("not JSON: %q", line)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		k := tok.(string)
		if seen[k] {
			return k
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return ""
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Kick probes a site at once and restarts its rhythm from there; a site
// whose probe is stuck in flight (hung server) is not probed early.
func TestKick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, hung := newFakeServer(primaryStatus()), newFakeServer(primaryStatus())
		hung.stuck = true
		p, err := New(testConfig(fakeNet{"a": a, "hung": hung}, Site{Name: "a", Addr: "h:1"}, Site{Name: "hung", Addr: "h:2"}))
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		start := time.Now()
		stop := running(t, p, rec)
		// a: probe at 0, early at 0.9s (hung's probe at 0.5s timed out:
		// its first failure asks the other sites for a probe); hung: at
		// 0.5s, stuck.
		time.Sleep(1200 * time.Millisecond)
		p.Kick()
		synctest.Wait()
		time.Sleep(1500 * time.Millisecond) // a: next regular probe 1s after the kicked one
		close(hung.release)
		stop()
		got := rec.startedAt("a", start)
		want := []time.Duration{0, 900 * time.Millisecond, 1200 * time.Millisecond, 2200 * time.Millisecond}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("site a probed at %v, want %v", got, want)
		}
		// hung: its 0.5s probe times out; the kick at 1.2s finds it still
		// stuck and does not add a probe; the regular 1.5s and 2.5s ticks report it stuck.
		hungAt := rec.startedAt("hung", start)
		if want := []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 2500 * time.Millisecond}; fmt.Sprint(hungAt) != fmt.Sprint(want) {
			t.Errorf("hung site probed at %v, want %v (no early probe while one is stuck)", hungAt, want)
		}
	})
}

// TestKickOthersSparesTheNamedSite: a sidecar's exit report asks for fresh
// probes of the other sites (the corroboration) but never an early probe of
// the exited site itself: a second failure sooner than the failure window
// would detect it on the probes' count, with no guard of the report's.
func TestKickOthersSparesTheNamedSite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newFakeServer(primaryStatus()), newFakeServer(primaryStatus())
		p, err := New(testConfig(fakeNet{"a": a, "b": b}, Site{Name: "a", Addr: "h:1"}, Site{Name: "b", Addr: "h:2"}))
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		start := time.Now()
		stop := running(t, p, rec)
		time.Sleep(1200 * time.Millisecond) // a: probes at 0 and 1s; b: at 0.5s
		p.KickOthers("a")
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		stop()
		if got, want := rec.startedAt("a", start), []time.Duration{0, time.Second}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("site a probed at %v, want %v (no early probe of the spared site)", got, want)
		}
		if got, want := rec.startedAt("b", start), []time.Duration{500 * time.Millisecond, 1200 * time.Millisecond}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("site b probed at %v, want %v (kicked at 1.2s)", got, want)
		}
	})
}

// TestFailureRunAsksOtherSitesForAnEarlyProbe: a site's first failed probe
// asks every other site for a probe at once (the replicas' view of a hung or
// isolated primary, their source gone silent, is read from then on rather
// than up to a PollInterval later), once per failure run, and never of a
// site whose own failure run is counting (its next failure must not come
// sooner than the failure window allows).
func TestFailureRunAsksOtherSitesForAnEarlyProbe(t *testing.T) {
	// Two sites: a probes at 0s, 1s, 2s ...; b at 0.5s, 1.5s ...
	t.Run("once per failure run", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a, b := newFakeServer(primaryStatus()), newFakeServer(primaryStatus())
			p, err := New(testConfig(fakeNet{"a": a, "b": b}, Site{Name: "a", Addr: "h:1"}, Site{Name: "b", Addr: "h:2"}))
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			start := time.Now()
			stop := running(t, p, rec)
			time.Sleep(1700 * time.Millisecond)
			// a's 2s probe fails after 300 ms; its later ones fail at once.
			a.set(func(f *fakeServer) { f.err, f.delay = errors.New("a is down"), 300*time.Millisecond })
			time.Sleep(800 * time.Millisecond)
			a.set(func(f *fakeServer) { f.delay = 0 })
			time.Sleep(2000 * time.Millisecond)
			stop()
			if got, want := rec.startedAt("b", start), []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 2300 * time.Millisecond, 3300 * time.Millisecond, 4300 * time.Millisecond}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("site b probed at %v, want %v (early at a's first failure, 2.3s, not at its later ones, 3s and 4s)", got, want)
			}
		})
	})
	t.Run("not of a site whose failure run is counting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a, b := newFakeServer(primaryStatus()), newFakeServer(primaryStatus())
			b.err = errors.New("b is down")
			p, err := New(testConfig(fakeNet{"a": a, "b": b}, Site{Name: "a", Addr: "h:1"}, Site{Name: "b", Addr: "h:2"}))
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			start := time.Now()
			stop := running(t, p, rec)
			// b's first failure, at 0.5s, asks a for a probe then; a's rhythm
			// restarts there (1.5s, 2.5s).
			time.Sleep(1200 * time.Millisecond)
			a.set(func(f *fakeServer) { f.err, f.delay = errors.New("a is down"), 300*time.Millisecond })
			time.Sleep(1700 * time.Millisecond)
			stop()
			if got, want := rec.startedAt("a", start), []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond, 2500 * time.Millisecond}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("site a probed at %v, want %v (early at b's first failure)", got, want)
			}
			if got, want := rec.startedAt("b", start), []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 2500 * time.Millisecond}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("failing site b probed at %v, want %v (a's failure at 1.8s must not probe it early)", got, want)
			}
		})
	})
}

func TestTestGroupStartsOnStepZero(t *testing.T) {
	if off := firstTick(testGroup, 0, 2, time.Second, tickGrid(time.Second)); off != 0 {
		t.Fatalf("testConfig's group %q starts %v into the interval; the tick-timing tests assume 0: pick another name", testGroup, off)
	}
}

// Regular ticks fire on the grid of the clock's time (at most a step late,
// the cadence kept on the exact times); an early probe is not held back,
// and the rhythm restarts from it.
func TestTicksFireOnTheGrid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFakeServer(primaryStatus())
		cfg := testConfig(fakeNet{"a": a}, Site{Name: "a", Addr: "h:1"})
		const skew = 1000*time.Hour + 7*time.Millisecond // the clock starts 7 ms past a step
		p, rec, start, stop := runSkewed(t, cfg, skew)
		time.Sleep(1200 * time.Millisecond)
		p.Kick() // at 1.2 s: 7 ms past a step
		synctest.Wait()
		time.Sleep(1100 * time.Millisecond)
		stop()
		got := rec.startedAt("a", start)
		want := []time.Duration{43 * time.Millisecond, 1043 * time.Millisecond, 1200 * time.Millisecond, 2243 * time.Millisecond}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("site a probed at %v after start, want %v", got, want)
		}
	})
}

// Many groups of three sites (the daemon runs a poller per group) spread
// their ticks over the grid's steps; a group's own sites are spread over
// the interval.
func TestFirstTickSpreadsGroups(t *testing.T) {
	const interval = time.Second
	grid := tickGrid(interval)
	steps := int(interval / grid)
	count := make([]int, steps)
	for g := range 334 {
		name := fmt.Sprintf("orders-%d", g)
		var offs []time.Duration
		for i := range 3 {
			off := firstTick(name, i, 3, interval, grid)
			if off%grid != 0 || off < 0 || off >= interval {
				t.Fatalf("group %s site %d: first tick at %v, not a step of %v within the interval", name, i, off, grid)
			}
			count[off/grid]++
			offs = append(offs, off)
		}
		for i := 1; i < 3; i++ {
			if d := (offs[i] - offs[i-1] + interval) % interval; d < interval/3-grid || d > interval/3+grid {
				t.Fatalf("group %s: sites %d and %d tick %v apart, want about a third of %v", name, i-1, i, d, interval)
			}
		}
	}
	for step, c := range count {
		if c < 20 || c > 90 { // 50 on average
			t.Errorf("step %d: %d of 1,002 sites tick there (all steps: %v)", step, c, count)
		}
	}
}

// A failure run ticks on exact times from its first probe (an early one
// here, off the grid): the grid neither delays detection nor shortens the
// failure window; once the site answers again its ticks return to the grid.
func TestFailureRunTicksOnExactTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFakeServer(primaryStatus())
		cfg := testConfig(fakeNet{"a": a}, Site{Name: "a", Addr: "h:1"})
		const skew = 1000*time.Hour + 7*time.Millisecond // the clock starts 7 ms past a step
		w := fakeWatch{lost: make(chan struct{})}
		cfg.Watch = w.watch
		_, rec, start, stop := runSkewed(t, cfg, skew)
		time.Sleep(1200 * time.Millisecond) // probes on the grid at 43 ms and 1.043 s
		a.set(func(f *fakeServer) { f.err = errors.New("connection refused") })
		close(w.lost) // at 1.2 s: probed at once, the failure run starts
		synctest.Wait()
		time.Sleep(1300 * time.Millisecond) // 2.2 s: the second failure, exactly an interval later
		a.set(func(f *fakeServer) { f.err = nil })
		time.Sleep(2 * time.Second) // 3.2 s answers; the next tick is on the grid again
		stop()
		got := rec.startedAt("a", start)
		want := []time.Duration{43 * time.Millisecond, 1043 * time.Millisecond, 1200 * time.Millisecond,
			2200 * time.Millisecond, 3200 * time.Millisecond, 4243 * time.Millisecond}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("site a probed at %v after start, want %v", got, want)
		}
	})
}

// runSkewed runs a poller of cfg, in the caller's bubble, on a clock skew
// ahead of the bubble's; start is that clock's time at the start.
func runSkewed(t *testing.T, cfg Config, skew time.Duration) (p *Poller, rec *recorder, start time.Time, stop func()) {
	t.Helper()
	cfg.Clock = offsetClock{off: skew}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec = &recorder{}
	start = time.Now().Add(skew)
	return p, rec, start, running(t, p, rec)
}
