package daemon

import (
	"context"
	"database/sql"
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
	"github.com/failoverd/failoverd/test/testenv"
)

// scripted is a fake Instance for the executor's unit tests: it records
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

// scriptedExecutor returns an executor over the given fake sites (named by
// their site field), each reachable at 10.0.0.<i>:3306.
func scriptedExecutor(t *testing.T, onDrainTimeout string, sites ...*scripted) (*executor, *opLog) {
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
	return &executor{group: cfg, conns: newConnections(dial, cfg.Sites), log: slog.New(slog.DiscardHandler),
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
			e, log := scriptedExecutor(t, tt.onDrainTimeout, &site)
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
			e, log := scriptedExecutor(t, "", a, b, c)
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
	e, log := scriptedExecutor(t, "", a, b, c)
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
			e, log := scriptedExecutor(t, "", a, b, c)
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
	e, log := scriptedExecutor(t, "", a, b)
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

// Real servers: the executor against sites of test/testenv, on both engines.

// realExecutor returns an executor on tp's sites that dials mysqlctl as the
// admin account.
func realExecutor(t *testing.T, tp *testenv.Topology) *executor {
	t.Helper()
	engine := configs.EngineMariaDB
	if tp.Engine == testenv.MySQL {
		engine = configs.EngineMySQL
	}
	cfg := configs.Group{Name: "g", Engine: engine, RelayDrainTimeout: 20 * time.Second, OnDrainTimeout: "abort"}
	cfg.Credentials.Replication.User = testenv.ReplUser
	for _, s := range tp.Sites {
		cfg.Sites = append(cfg.Sites, configs.Site{Name: s.Name, MySQL: configs.MySQLEndpoint{Address: s.Addr()}})
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	dial := func(ctx context.Context, s configs.Site) (Instance, error) {
		in, err := mysqlctl.Open(ctx, mysqlctl.Options{Addr: s.MySQL.Address, User: testenv.AdminUser, Password: testenv.AdminPassword, Logger: logger})
		if err != nil {
			return nil, err
		}
		return in, nil
	}
	e := &executor{group: cfg, conns: newConnections(dial, cfg.Sites), log: logger,
		secret: func() (string, error) { return testenv.ReplPassword, nil }}
	t.Cleanup(e.conns.closeAll)
	return e
}

func realCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// realGroup starts site0 (made writable by the executor) → site1, site2
// with table app.t holding rows 1-3 everywhere.
func realGroup(t *testing.T, engine testenv.Engine) (*testenv.Topology, *executor) {
	t.Helper()
	tp := testenv.StartTopology(t, 3, testenv.TopologyOptions{Engine: engine})
	e := realExecutor(t, tp)
	if err := e.makeWritable(realCtx(t), "site0"); err != nil {
		t.Fatal(err)
	}
	realExec(t, tp.Sites[0].AppDB(t), "CREATE TABLE app.t (id INT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO app.t VALUES (1, 0), (2, 0), (3, 0)")
	tp.WaitReplicated(t, 30*time.Second)
	return tp, e
}

func realExec(t *testing.T, db interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.ExecContext(realCtx(t), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// realFailover moves the primary from one site to another the way a
// promotion does: fence, drain, detach, make writable.
func realFailover(t *testing.T, e *executor, from, to string) drainResult {
	t.Helper()
	ctx := realCtx(t)
	if err := e.fence(ctx, from); err != nil {
		t.Fatal(err)
	}
	res, err := e.drain(ctx, to, e.group.RelayDrainTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.detach(ctx, to); err != nil {
		t.Fatal(err)
	}
	if err := e.makeWritable(ctx, to); err != nil {
		t.Fatal(err)
	}
	return res
}

// waitReal polls cond every 50ms until it holds or 30s passed.
func waitReal(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// executedSet parses m's GTIDExecuted in its engine's syntax.
func executedSet(t *testing.T, m *testenv.Server) gtid.Set {
	t.Helper()
	if m.Engine == testenv.MySQL {
		return gtid.MustParse(gtid.MySQL, m.GTIDExecuted(t))
	}
	return maria(m.GTIDExecuted(t))
}

// errantWrite writes on read-only replica m as an operator's mistake would
// (the admin account; on MySQL after lifting super_read_only, which stops
// it too) and returns the text that marks m's own GTIDs: "0-<server_id>-"
// on MariaDB, the server_uuid on MySQL.
func errantWrite(t *testing.T, m *testenv.Server, stmt string) string {
	t.Helper()
	if m.Engine == testenv.MySQL {
		m.Exec(t, "SET GLOBAL super_read_only = OFF")
		m.Exec(t, stmt)
		m.Exec(t, "SET GLOBAL super_read_only = ON")
		return m.QueryString(t, "SELECT @@GLOBAL.server_uuid")
	}
	m.Exec(t, stmt) // the admin account writes through read_only
	return fmt.Sprintf("0-%d-", m.ServerID)
}

// A replica with an errant write is not repointed (MySQL auto-positioning
// would take it silently) and keeps replicating from where it did; the
// other replica follows the new primary.
func TestRealRepointRefusesAnErrantReplica(t *testing.T) {
	testenv.ForEachEngine(t, testRealRepointRefusesAnErrantReplica)
}

func testRealRepointRefusesAnErrantReplica(t *testing.T, engine testenv.Engine) {
	tp, e := realGroup(t, engine)
	site0, site1, site2 := tp.Sites[0], tp.Sites[1], tp.Sites[2]
	errant := errantWrite(t, site2, "INSERT INTO app.t VALUES (100, 0)")
	if !strings.Contains(site2.GTIDExecuted(t), errant) {
		t.Fatalf("test setup: site2 has no transaction of its own: %s", site2.GTIDExecuted(t))
	}

	res := realFailover(t, e, "site0", "site1")
	if old := executedSet(t, site0); res.TimedOut || !res.Retrieved.Covers(old) {
		t.Fatalf("drain result {%s %t}; want everything site0 wrote (%s)", res.Retrieved, res.TimedOut, old)
	}
	realExec(t, site1.AppDB(t), "INSERT INTO app.t VALUES (4, 0)")

	err := e.repoint(realCtx(t), "site1", []string{"site0", "site2"})
	if !errors.Is(err, ErrNotContained) || !strings.Contains(err.Error(), "repoint site2 to site1") || !strings.Contains(err.Error(), errant) {
		t.Fatalf("repoint = %v; want ErrNotContained for site2 naming its %s… transaction", err, errant)
	}
	if st := site2.ReplicaStatus(t); st["Master_Port"] != fmt.Sprint(site0.Port) || st["Slave_IO_Running"] != "Yes" {
		t.Fatalf("refused site2 changed its replication: Master_Port=%s IO=%s, want %d and Yes", st["Master_Port"], st["Slave_IO_Running"], site0.Port)
	}
	if st := site0.ReplicaStatus(t); st["Master_Port"] != fmt.Sprint(site1.Port) {
		t.Fatalf("site0 replicates from port %s, want site1's %d", st["Master_Port"], site1.Port)
	}
	waitReal(t, "row 4 on site0", func() (bool, string) {
		n := site0.QueryString(t, "SELECT COUNT(*) FROM app.t WHERE id = 4")
		return n == "1", site0.GTIDExecuted(t)
	})
}

// After a promotion in an asymmetric semi-sync group (primary side on the
// old primary, replica side on the replicas) the new primary runs
// semi-sync with the repointed replicas acknowledging.
func TestRealSemiSyncFollowsThePromotion(t *testing.T) {
	testenv.ForEachEngine(t, testRealSemiSyncFollowsThePromotion)
}

func testRealSemiSyncFollowsThePromotion(t *testing.T, engine testenv.Engine) {
	tp, e := realGroup(t, engine)
	site0, site1 := tp.Sites[0], tp.Sites[1]
	// MariaDB's names (master/slave, information_schema) or MySQL's
	// (source/replica, performance_schema).
	source, replica, statusTable := "master", "slave", "information_schema.GLOBAL_STATUS"
	if engine == testenv.MySQL {
		source, replica, statusTable = "source", "replica", "performance_schema.global_status"
	}
	semiStatus := func(m *testenv.Server, name string) string {
		return m.QueryString(t, "SELECT VARIABLE_VALUE FROM "+statusTable+" WHERE VARIABLE_NAME = 'Rpl_semi_sync_"+source+"_"+name+"'")
	}
	site0.Exec(t, "SET GLOBAL rpl_semi_sync_"+source+"_enabled = ON")
	for _, r := range tp.Sites[1:] {
		for _, q := range []string{"SET GLOBAL rpl_semi_sync_" + replica + "_enabled = ON", "STOP REPLICA IO_THREAD", "START REPLICA IO_THREAD"} {
			r.Exec(t, q)
		}
	}
	waitReal(t, "two semi-sync replicas on site0", func() (bool, string) {
		n := semiStatus(site0, "clients")
		return n == "2", n
	})

	realFailover(t, e, "site0", "site1")
	if err := e.repoint(realCtx(t), "site1", []string{"site0", "site2"}); err != nil {
		t.Fatal(err)
	}
	if got := semiStatus(site1, "status"); got == "ON" {
		t.Fatalf("test setup: site1 ran semi-sync as a primary before semiSync")
	}
	for round := 1; round <= 2; round++ { // the second call finds everything done
		if err := e.semiSync(realCtx(t), "site1", []string{"site0", "site2"}); err != nil {
			t.Fatalf("semiSync #%d: %v", round, err)
		}
	}
	waitReal(t, "site1 semi-sync primary with both replicas", func() (bool, string) {
		status, clients := semiStatus(site1, "status"), semiStatus(site1, "clients")
		return status == "ON" && clients == "2", "status " + status + " clients " + clients
	})
	realExec(t, site1.AppDB(t), "INSERT INTO app.t VALUES (5, 0)")
	if yes := semiStatus(site1, "yes_tx"); yes == "0" || yes == "" {
		t.Fatalf("site1's commit was not acknowledged by a semi-sync replica (yes_tx %q, no_tx %q)", yes, semiStatus(site1, "no_tx"))
	}
	if v := site0.QueryString(t, "SELECT @@GLOBAL.rpl_semi_sync_"+replica+"_enabled"); v != "1" {
		t.Fatalf("old primary site0 has rpl_semi_sync_%s_enabled=%s, want 1", replica, v)
	}
}
