package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
)

// scripted is a fake Instance for the servers' unit tests: it records
// every call as "site:op" in a shared log and answers from its fields.
type scripted struct {
	site string
	log  *opLog

	status    mysqlctl.Status
	statusErr error
	// afterStopIO replaces status once StopReplicaIO ran (nil: unchanged).
	afterStopIO *mysqlctl.Status
	waitErr     error
	semiErr     error
	stoppedIO   bool
}

// opLog is the ordered record of the calls made on every scripted site,
// with the deadline each call's context carried.
type opLog struct {
	mu        sync.Mutex
	ops       []string
	deadlines map[string]time.Time // op → deadline of its context (zero: none)
}

func (l *opLog) add(ctx context.Context, op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, op)
	if l.deadlines == nil {
		l.deadlines = map[string]time.Time{}
	}
	dl, _ := ctx.Deadline()
	l.deadlines[op] = dl
}

func (l *opLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ops)
}

func (f *scripted) note(ctx context.Context, op string) { f.log.add(ctx, f.site+":"+op) }

func (f *scripted) Status(ctx context.Context) (mysqlctl.Status, error) {
	f.note(ctx, "status")
	if f.stoppedIO && f.afterStopIO != nil {
		return *f.afterStopIO, f.statusErr
	}
	return f.status, f.statusErr
}
func (f *scripted) Fence(ctx context.Context) error { f.note(ctx, "fence"); return nil }
func (f *scripted) KillClientConnections(ctx context.Context) (int, error) {
	f.note(ctx, "kill")
	return 0, nil
}
func (f *scripted) StopReplicaIO(ctx context.Context) error {
	f.note(ctx, "stop-io")
	f.stoppedIO = true
	return nil
}
func (f *scripted) StartReplicaIO(ctx context.Context) error { f.note(ctx, "start-io"); return nil }
func (f *scripted) WaitRelayDrained(ctx context.Context, target gtid.Set, _ time.Duration) error {
	f.note(ctx, "wait "+target.String())
	return f.waitErr
}
func (f *scripted) StopReplica(ctx context.Context) error     { f.note(ctx, "stop"); return nil }
func (f *scripted) ResetReplicaAll(ctx context.Context) error { f.note(ctx, "reset"); return nil }
func (f *scripted) Promote(ctx context.Context) error         { f.note(ctx, "writable"); return nil }
func (f *scripted) ReplicateFrom(ctx context.Context, src mysqlctl.Source) error {
	f.note(ctx, fmt.Sprintf("replicate %s:%d", src.Host, src.Port))
	return nil
}
func (f *scripted) SetSemiSync(ctx context.Context, primary, replica bool) error {
	f.note(ctx, fmt.Sprintf("semisync primary=%t replica=%t", primary, replica))
	return f.semiErr
}
func (f *scripted) Close() error { return nil }

// scriptedServers returns the servers primitives over the given fake sites (named by
// their site field), each reachable at 10.0.0.<i>:3306.
func scriptedServers(t *testing.T, onDrainTimeout string, sites ...*scripted) (*servers, *opLog) {
	t.Helper()
	log := &opLog{}
	cfg := configs.Group{Name: "g", Engine: configs.EngineMariaDB, RelayDrainTimeout: 30 * time.Second, OnDrainTimeout: onDrainTimeout}
	cfg.Credentials.Replication.User = "repl"
	byName := map[string]*scripted{}
	for i, s := range sites {
		s.log = log
		byName[s.site] = s
		cfg.Sites = append(cfg.Sites, configs.Site{Name: s.site, MySQL: configs.MySQLEndpoint{Address: fmt.Sprintf("10.0.0.%d:3306", i+1)}})
	}
	dial := func(_ context.Context, s configs.Site) (Instance, error) { return byName[s.Name], nil }
	return &servers{group: cfg, conns: newConnections(dial, cfg.Sites), log: slog.New(slog.DiscardHandler),
		secret: func() (string, error) { return "pw", nil }}, log
}

func maria(s string) gtid.Set { return gtid.MustParse(gtid.MariaDB, s) }

// replicaStatus is a MariaDB replica's status with the given threads,
// retrieved and executed sets.
func replicaStatus(io mysqlctl.ThreadState, retrieved, executed string) mysqlctl.Status {
	return mysqlctl.Status{ReadOnly: true, Executed: maria(executed),
		Replica: &mysqlctl.ReplicaStatus{IOThread: io, SQLThread: mysqlctl.ThreadYes, Retrieved: maria(retrieved)}}
}

func TestDrainFreezesTheRetrievedSetFirst(t *testing.T) {
	before := replicaStatus(mysqlctl.ThreadYes, "0-1-10", "0-1-8")
	after := replicaStatus(mysqlctl.ThreadNo, "0-1-12", "0-1-8") // what arrived until the IO thread stopped
	timeout := fmt.Errorf("wait: %w", mysqlctl.ErrDrainTimeout)
	tests := []struct {
		name           string
		site           scripted
		onDrainTimeout string
		wantOps        []string
		wantRes        drainResult
		wantErr        []error // each must match with errors.Is; nil: success
	}{
		{name: "drained", site: scripted{status: before, afterStopIO: &after},
			wantOps: []string{"b:stop-io", "b:status", "b:wait 0-1-12"}, wantRes: drainResult{Retrieved: maria("0-1-12")}},
		{name: "re-run after a crash: already stopped", site: scripted{status: after},
			wantOps: []string{"b:stop-io", "b:status", "b:wait 0-1-12"}, wantRes: drainResult{Retrieved: maria("0-1-12")}},
		{name: "already detached", site: scripted{status: mysqlctl.Status{Executed: maria("0-1-12")}},
			wantOps: []string{"b:stop-io", "b:status"}},
		{name: "nothing retrieved", site: scripted{status: replicaStatus(mysqlctl.ThreadNo, "", "")},
			wantOps: []string{"b:stop-io", "b:status"}},
		{name: "timeout, onDrainTimeout=promote", onDrainTimeout: "promote", site: scripted{status: after, waitErr: timeout},
			wantOps: []string{"b:stop-io", "b:status", "b:wait 0-1-12"}, wantRes: drainResult{Retrieved: maria("0-1-12"), TimedOut: true}},
		{name: "timeout, onDrainTimeout=abort: receiving again", onDrainTimeout: "abort", site: scripted{status: after, waitErr: timeout},
			wantOps: []string{"b:stop-io", "b:status", "b:wait 0-1-12", "b:start-io"}, wantRes: drainResult{Retrieved: maria("0-1-12"), TimedOut: true},
			wantErr: []error{ErrDrainAborted, mysqlctl.ErrDrainTimeout}},
		{name: "applier failed", site: scripted{status: after, waitErr: mysqlctl.ErrReplicationError},
			wantOps: []string{"b:stop-io", "b:status", "b:wait 0-1-12"}, wantRes: drainResult{Retrieved: maria("0-1-12")},
			wantErr: []error{mysqlctl.ErrReplicationError}},
		{name: "IO thread still running: no moving target", site: scripted{status: before},
			wantOps: []string{"b:stop-io", "b:status"}, wantErr: []error{errAnyDrain}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			site := tt.site
			site.site = "b"
			e, log := scriptedServers(t, tt.onDrainTimeout, &site)
			res, err := e.drain(context.Background(), "b", e.group.RelayDrainTimeout)
			if tt.wantErr == nil && err != nil {
				t.Fatalf("drain: %v", err)
			}
			for _, want := range tt.wantErr {
				if err == nil || (want != errAnyDrain && !errors.Is(err, want)) {
					t.Fatalf("drain error = %v; want %v", err, want)
				}
			}
			if !res.Retrieved.Equal(tt.wantRes.Retrieved) || res.TimedOut != tt.wantRes.TimedOut {
				t.Errorf("drain result = {%s %t}; want {%s %t}", res.Retrieved, res.TimedOut, tt.wantRes.Retrieved, tt.wantRes.TimedOut)
			}
			if got := log.list(); !slices.Equal(got, tt.wantOps) {
				t.Errorf("operations:\n got  %q\n want %q", got, tt.wantOps)
			}
		})
	}
}

// errAnyDrain as a wanted error accepts any non-nil error.
var errAnyDrain = errors.New("any error")

func TestRepointRefusesAReplicaAheadOfTheNewPrimary(t *testing.T) {
	for _, tc := range []struct {
		name            string
		primary         string
		errant, healthy string // replica executed sets
		missing         string
	}{
		{"mariadb", "0-1-10,0-2-15", "0-1-10,0-2-14,0-3-15", "0-1-10,0-2-15", "0-3-15"},
		{"mariadb same seq_no, other server", "0-2-15", "0-3-15", "0-2-12", "0-3-15"},
		// MySQL auto-positioning would take the errant replica and keep 3e11…:1-2 silently.
		{"mysql", "4d8b2e3a-0f1c-11ef-8b2a-0242ac120002:1-20", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-2,4d8b2e3a-0f1c-11ef-8b2a-0242ac120002:1-20",
			"4d8b2e3a-0f1c-11ef-8b2a-0242ac120002:1-19", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := gtid.MariaDB
			if tc.name == "mysql" {
				f = gtid.MySQL
			}
			set := func(s string) mysqlctl.Status { return mysqlctl.Status{ReadOnly: true, Executed: gtid.MustParse(f, s)} }
			b := &scripted{site: "b", status: set(tc.primary)}
			b.status.ReadOnly = false
			a := &scripted{site: "a", status: set(tc.errant)}
			c := &scripted{site: "c", status: set(tc.healthy)}
			e, log := scriptedServers(t, "", a, b, c)
			err := e.repoint(context.Background(), "b", []string{"a", "c"})
			if !errors.Is(err, ErrNotContained) || !strings.Contains(err.Error(), tc.missing) || !strings.Contains(err.Error(), "repoint a to b") {
				t.Fatalf("repoint = %v; want ErrNotContained for a naming %s", err, tc.missing)
			}
			want := []string{"a:status", "b:status", // the replica first, then the new primary
				"c:status", "b:status", "c:stop", "c:replicate 10.0.0.2:3306"}
			if got := log.list(); !slices.Equal(got, want) {
				t.Fatalf("operations:\n got  %q\n want %q", got, want)
			}
		})
	}
}

func TestRepointReportsAnUnreadableSiteAndGoesOn(t *testing.T) {
	b := &scripted{site: "b", status: mysqlctl.Status{Executed: maria("0-2-15")}}
	a := &scripted{site: "a", statusErr: errors.New("connection refused")}
	c := &scripted{site: "c", status: mysqlctl.Status{ReadOnly: true, Executed: maria("0-2-15")}}
	e, log := scriptedServers(t, "", a, b, c)
	err := e.repoint(context.Background(), "b", []string{"a", "c"})
	if err == nil || errors.Is(err, ErrNotContained) || !strings.Contains(err.Error(), "status of a") {
		t.Fatalf("repoint = %v; want a status error for a", err)
	}
	if got := log.list(); !slices.Contains(got, "c:replicate 10.0.0.2:3306") || slices.Contains(got, "a:stop") {
		t.Fatalf("operations %q: want c repointed and a untouched", got)
	}
}

func TestSemiSyncAfterPromotion(t *testing.T) {
	semi := func(avail, primary, replica bool) mysqlctl.Status {
		return mysqlctl.Status{SemiSync: mysqlctl.SemiSyncStatus{Available: avail, PrimaryEnabled: primary, ReplicaEnabled: replica}}
	}
	tests := []struct {
		name           string
		b, a, c        mysqlctl.Status // b is the new primary
		aSemiErr       error
		replicas       []string
		wantOps        []string
		wantErrContain string
	}{
		{name: "asynchronous group stays asynchronous",
			b: semi(true, false, false), a: semi(true, false, false), c: semi(true, false, false), replicas: []string{"a", "c"},
			wantOps: []string{"b:status", "a:status", "c:status"}},
		{name: "asymmetric: the promoted replica acknowledged its primary",
			b: semi(true, false, true), a: semi(true, true, false), c: semi(true, false, true), replicas: []string{"a", "c"},
			wantOps: []string{"b:status", "a:status", "c:status", "a:semisync primary=false replica=true", "b:semisync primary=true replica=true"}},
		{name: "old primary gone, only replica sides were on",
			b: semi(true, false, true), c: semi(true, false, false), replicas: []string{"c"},
			wantOps: []string{"b:status", "c:status", "c:semisync primary=false replica=true", "b:semisync primary=true replica=true"}},
		{name: "symmetric: the replicas' primary sides are turned off (their appliers would wait for acks)",
			b: semi(true, true, true), a: semi(true, true, true), c: semi(true, true, true), replicas: []string{"a", "c"},
			wantOps: []string{"b:status", "a:status", "c:status", "a:semisync primary=false replica=true", "c:semisync primary=false replica=true"}},
		{name: "a replica's primary side is the evidence",
			b: semi(true, false, false), c: semi(true, true, false), replicas: []string{"c"},
			wantOps: []string{"b:status", "c:status", "c:semisync primary=false replica=true", "b:semisync primary=true replica=false"}},
		{name: "new primary cannot (MySQL without the plugin)",
			b: semi(false, false, false), c: semi(true, true, true), replicas: []string{"c"},
			wantOps: []string{"b:status", "c:status"}},
		{name: "no replica to acknowledge: primary side not enabled",
			b: semi(true, false, true), replicas: nil,
			wantOps: []string{"b:status"}},
		{name: "a replica fails: reported, the others still done",
			b: semi(true, false, true), a: semi(true, false, false), c: semi(true, false, false), aSemiErr: mysqlctl.ErrNotSupported, replicas: []string{"a", "c"},
			wantOps: []string{"b:status", "a:status", "c:status", "a:semisync primary=false replica=true",
				"c:semisync primary=false replica=true", "b:semisync primary=true replica=true"},
			wantErrContain: "replica side on a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &scripted{site: "b", status: tt.b}
			a := &scripted{site: "a", status: tt.a, semiErr: tt.aSemiErr}
			c := &scripted{site: "c", status: tt.c}
			e, log := scriptedServers(t, "", a, b, c)
			err := e.semiSync(context.Background(), "b", tt.replicas)
			switch {
			case tt.wantErrContain == "" && err != nil:
				t.Fatalf("semiSync: %v", err)
			case tt.wantErrContain != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErrContain)):
				t.Fatalf("semiSync = %v; want an error containing %q", err, tt.wantErrContain)
			}
			if got := log.list(); !slices.Equal(got, tt.wantOps) {
				t.Fatalf("operations:\n got  %q\n want %q", got, tt.wantOps)
			}
		})
	}
}

// Every server step carries its own deadline, even under a caller's context
// without one.
func TestEveryStepHasADeadline(t *testing.T) {
	b := &scripted{site: "b", status: replicaStatus(mysqlctl.ThreadNo, "0-1-12", "0-1-12")}
	a := &scripted{site: "a", status: mysqlctl.Status{ReadOnly: true, Executed: maria("0-1-12"),
		SemiSync: mysqlctl.SemiSyncStatus{Available: true, PrimaryEnabled: true}}}
	e, log := scriptedServers(t, "", a, b)
	ctx := context.Background()
	steps := []struct {
		name string
		run  func() error
	}{
		{"fence", func() error { return e.fence(ctx, "a") }},
		{"drain", func() error { _, err := e.drain(ctx, "b", time.Second); return err }},
		{"detach", func() error { _, err := e.detach(ctx, "b"); return err }},
		{"makeWritable", func() error { return e.makeWritable(ctx, "b") }},
		{"repoint", func() error { return e.repoint(ctx, "b", []string{"a"}) }},
		{"semiSync", func() error { return e.semiSync(ctx, "b", []string{"a"}) }},
	}
	for _, st := range steps {
		if err := st.run(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.deadlines) < 10 {
		t.Fatalf("only %d operations recorded: %v", len(log.deadlines), log.ops)
	}
	for op, dl := range log.deadlines {
		limit := stepTimeout
		if strings.HasPrefix(op, "b:wait") || op == "b:stop-io" {
			limit = e.group.RelayDrainTimeout + stepTimeout
		}
		if dl.IsZero() || time.Until(dl) > limit {
			t.Errorf("%s ran with deadline %v; want one within %v", op, dl, limit)
		}
	}
}

// TestHeartbeatPeriodIsHalfThePollInterval: the heartbeats failoverd sets
// when it repoints a replica are half the poll interval, between 250 ms and
// 1 s, so the replicas' silence threshold (2 heartbeats + 1 poll interval)
// is 1 s at the default 500 ms poll and a hung or isolated primary is
// corroborated about when its own probes detect it.
func TestHeartbeatPeriodIsHalfThePollInterval(t *testing.T) {
	for _, tc := range []struct{ poll, want time.Duration }{
		{100 * time.Millisecond, 250 * time.Millisecond},
		{500 * time.Millisecond, 250 * time.Millisecond},
		{time.Second, 500 * time.Millisecond},
		{2 * time.Second, time.Second},
		{10 * time.Second, time.Second},
	} {
		if got := heartbeatPeriod(tc.poll); got != tc.want {
			t.Errorf("heartbeatPeriod(%v) = %v, want %v", tc.poll, got, tc.want)
		}
	}
}
