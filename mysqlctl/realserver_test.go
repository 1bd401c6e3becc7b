package mysqlctl

// Real-server tests shared by both engines: runSuite takes a serverFactory
// (MariaDB 10.11 in mariadb_real_test.go, MySQL 9.7 in mysql_real_test.go,
// both started by test/testenv). Servers listen on 127.0.0.1 only.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/test/testenv"
	"github.com/go-sql-driver/mysql"
)

// realServer is one fresh server with the testenv accounts (AdminUser,
// ReplUser, AppUser) and the empty AppDatabase, not yet replicating.
type realServer struct {
	name string
	host string
	port int
	srv  *testenv.Server
}

func newRealServer(m *testenv.Server) *realServer {
	return &realServer{name: m.Name, host: m.Host, port: m.Port, srv: m}
}

// restart starts the server again on the same datadir (stopping it first
// if it still runs).
func (s *realServer) restart(ctx context.Context) error { return s.srv.Restart(ctx) }

func (s *realServer) addr() string { return fmt.Sprintf("%s:%d", s.host, s.port) }

// rawSQL is the flavor-specific SQL the tests use to check or disturb a
// server behind mysqlctl's back.
type rawSQL struct {
	executed       string // the executed GTID set
	replicaStatus  string
	ioRunning      string // replica status columns
	sqlRunning     string
	sourcePort     string
	retrieved      string
	stopSQLThread  string
	startSQLThread string
	// adminWriteOn/Off let the admin account write on a fenced server
	// (MySQL super_read_only blocks it; MariaDB READ_ONLY ADMIN does not).
	adminWriteOn, adminWriteOff []string
}

// serverFactory starts servers of one flavor.
type serverFactory struct {
	engine testenv.Engine
	flavor gtid.Flavor
	// replTLS: replication must use TLS (MySQL's caching_sha2_password).
	replTLS bool
	// clone: the servers have the clone plugin loaded.
	clone bool
	// start starts a server named name with extra server flags.
	start func(t *testing.T, name string, extra ...string) *realServer
	// parallelApplier are the flags of a multi-threaded applier (MariaDB's
	// parallel replication, MySQL's replica workers).
	parallelApplier []string
	raw             rawSQL
}

const errReadOnly = 1290 // ER_OPTION_PREVENTS_STATEMENT: --read-only / --super-read-only

// suite carries the factory through the tests.
type suite struct{ f serverFactory }

func runSuite(t *testing.T, f serverFactory) {
	engines, err := testenv.Engines()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(engines, f.engine) {
		t.Skipf("SKIP %s real-server tests: %s=%s does not select %s", f.engine, testenv.EngineEnv, os.Getenv(testenv.EngineEnv), f.engine)
	}
	s := suite{f}
	t.Run("OpenDetectsFlavorAndHidesPassword", s.testOpen)
	t.Run("StatusPrimaryAndReplica", s.testStatus)
	t.Run("FenceBlocksAppWritesAndPromoteLiftsIt", s.testFence)
	t.Run("KillClientConnections", s.testKill)
	t.Run("WaitRelayDrained", s.testDrain)
	t.Run("StopReplicaIOFreezesRetrievedSet", s.testStopReplicaIO)
	t.Run("SlowParallelApplierIsNotAnIncompleteTransaction", s.testSlowParallelApplier)
	t.Run("SemiSync", s.testSemiSync)
	t.Run("SemiSyncWaitsAreSeen", s.testSemiSyncWaits)
	t.Run("ManualFailoverThreeSites", s.testFailover)
	t.Run("IdempotentReplicationControl", s.testIdempotency)
	t.Run("CloneFrom", s.testClone)
	t.Run("TaggedGTIDs", s.testTaggedGTIDs)
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// startN starts n servers named site<i> with extra server flags.
func (s suite) startN(t *testing.T, n int, extra ...string) []*realServer {
	t.Helper()
	out := make([]*realServer, n)
	for i := range out {
		out[i] = s.f.start(t, fmt.Sprintf("site%d", i), extra...)
	}
	return out
}

// open returns a mysqlctl Instance on srv as the admin account.
func (s suite) open(t *testing.T, srv *realServer) *Instance {
	t.Helper()
	inst, err := Open(ctxFor(t, 30*time.Second), Options{Addr: srv.addr(), User: testenv.AdminUser, Password: testenv.AdminPassword,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatalf("open %s: %v", srv.name, err)
	}
	t.Cleanup(func() { _ = inst.Close() })
	return inst
}

// openPrimary opens srv and makes it writable with Promote: testenv starts
// every server read-only, as production sites start.
func (s suite) openPrimary(t *testing.T, srv *realServer) *Instance {
	t.Helper()
	inst := s.open(t, srv)
	if err := inst.Promote(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("promote %s: %v", srv.name, err)
	}
	return inst
}

// rawDB opens a plain driver pool on srv (not through mysqlctl).
func rawDB(t *testing.T, srv *realServer, user, password string) *sql.DB {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = user, password, "tcp", srv.addr()
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 5*time.Second, 30*time.Second, 30*time.Second
	if user == testenv.AppUser {
		cfg.DBName = testenv.AppDatabase
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func admin(t *testing.T, srv *realServer) *sql.DB {
	return rawDB(t, srv, testenv.AdminUser, testenv.AdminPassword)
}

func app(t *testing.T, srv *realServer) *sql.DB {
	return rawDB(t, srv, testenv.AppUser, testenv.AppPassword)
}

func mustExec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.ExecContext(ctxFor(t, 30*time.Second), q); err != nil {
			t.Fatalf("exec %q: %v", q, err)
		}
	}
}

func queryString(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	var v sql.NullString
	if err := db.QueryRowContext(ctxFor(t, 30*time.Second), q).Scan(&v); err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	return v.String
}

// showStatus reads the replica status statement into column → value.
func showStatus(t *testing.T, db *sql.DB, q string) map[string]string {
	t.Helper()
	rs, err := dbQuerier{db}.query(ctxFor(t, 30*time.Second), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	out := map[string]string{}
	if len(rs.rows) > 0 {
		for i, c := range rs.cols {
			out[c] = rs.rows[0][i].String
		}
	}
	return out
}

// waitFor polls cond until it holds; t.Fatalf with its last message after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replicate points replica at source through mysqlctl and waits for the IO thread.
func (s suite) replicate(t *testing.T, replica *Instance, rdb *sql.DB, source *realServer) {
	t.Helper()
	err := replica.ReplicateFrom(ctxFor(t, 30*time.Second), Source{
		Host: source.host, Port: source.port, User: testenv.ReplUser, Password: testenv.ReplPassword,
		TLS: s.f.replTLS, HeartbeatPeriod: 500 * time.Millisecond, ConnectRetry: time.Second,
	})
	if err != nil {
		t.Fatalf("ReplicateFrom %s: %v", source.name, err)
	}
	waitFor(t, 30*time.Second, "IO thread running", func() (bool, string) {
		st := showStatus(t, rdb, s.f.raw.replicaStatus)
		return st[s.f.raw.ioRunning] == "Yes", fmt.Sprint(st)
	})
}

// executed reads the server's executed GTID set behind mysqlctl's back.
func (s suite) executed(t *testing.T, db *sql.DB) gtid.Set {
	t.Helper()
	set, err := gtid.Parse(s.f.flavor, queryString(t, db, s.f.raw.executed))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// waitReplicated waits until replica has executed everything primary has.
func (s suite) waitReplicated(t *testing.T, replica, primary *sql.DB) {
	t.Helper()
	want := s.executed(t, primary)
	waitFor(t, 30*time.Second, "replica caught up", func() (bool, string) {
		got := s.executed(t, replica)
		return got.Contains(want), fmt.Sprintf("replica has %s, primary %s", got, want)
	})
}

// lockTable holds LOCK TABLES app.t READ in a session of db until the
// returned release runs (at the latest at t's cleanup): the applier waits for
// the table while reads go on. A locking read (SELECT ... FOR UPDATE) is no
// option: MySQL refuses it on a super_read_only replica (error 1290). The
// session is closed, never returned to the pool holding the lock.
func lockTable(t *testing.T, db *sql.DB) (release func()) {
	t.Helper()
	conn, err := db.Conn(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_, _ = conn.ExecContext(context.Background(), "UNLOCK TABLES")
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // discard the session
			_ = conn.Close()
		})
	}
	t.Cleanup(release)
	if _, err := conn.ExecContext(ctxFor(t, 30*time.Second), "LOCK TABLES app.t READ"); err != nil {
		t.Fatalf("LOCK TABLES app.t READ: %v", err)
	}
	return release
}

func countRows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(ctxFor(t, 30*time.Second), "SELECT COUNT(*) FROM app.t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// pair starts a primary with table app.t (ids 1-3) and a replica of it,
// both with extra server flags.
func (s suite) pair(t *testing.T, extra ...string) (p, r *realServer, ip, ir *Instance, pdb, rdb *sql.DB) {
	t.Helper()
	srv := s.startN(t, 2, extra...)
	p, r = srv[0], srv[1]
	ip, ir = s.openPrimary(t, p), s.open(t, r)
	pdb, rdb = admin(t, p), admin(t, r)
	mustExec(t, app(t, p), "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO t VALUES (1, 0), (2, 0), (3, 0)")
	s.replicate(t, ir, rdb, p)
	s.waitReplicated(t, rdb, pdb)
	return p, r, ip, ir, pdb, rdb
}

func (s suite) testOpen(t *testing.T) {
	srv := s.f.start(t, "open")
	inst := s.open(t, srv)
	if inst.Flavor().Engine != s.f.flavor {
		t.Fatalf("flavor = %v, want %v", inst.Flavor(), s.f.flavor)
	}
	const wrong = "definitely-wrong-pw-7731"
	_, err := Open(ctxFor(t, 30*time.Second), Options{Addr: srv.addr(), User: testenv.AdminUser, Password: wrong})
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1045 {
		t.Fatalf("Open with a wrong password = %v; want access denied (1045)", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Fatalf("auth error leaks the password: %v", err)
	}
}

func (s suite) testStatus(t *testing.T) {
	p, r, ip, ir, pdb, rdb := s.pair(t)
	mustExec(t, app(t, p), "INSERT INTO t VALUES (4, 0)")
	s.waitReplicated(t, rdb, pdb)

	stP, err := ip.Status(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !stP.Executed.Equal(s.executed(t, pdb)) || stP.Executed.IsEmpty() {
		t.Errorf("primary Executed = %s, server says %s", stP.Executed, s.executed(t, pdb))
	}
	if stP.Replica != nil || stP.ReadOnly || stP.Fenced() {
		t.Errorf("primary status = %+v, want writable non-replica", stP)
	}
	if fmt.Sprint(stP.ServerID) != queryString(t, pdb, "SELECT @@GLOBAL.server_id") {
		t.Errorf("primary ServerID = %d", stP.ServerID)
	}

	stR, err := ir.Status(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	raw := showStatus(t, rdb, s.f.raw.replicaStatus)
	if !stR.Executed.Equal(s.executed(t, rdb)) {
		t.Errorf("replica Executed = %s, server says %s", stR.Executed, s.executed(t, rdb))
	}
	if !stR.ReadOnly || !stR.Fenced() {
		t.Errorf("replica not fenced: %+v", stR)
	}
	rep := stR.Replica
	if rep == nil {
		t.Fatal("replica status missing")
	}
	wantRetrieved := gtid.MustParse(s.f.flavor, raw[s.f.raw.retrieved])
	if string(rep.IOThread) != raw[s.f.raw.ioRunning] || string(rep.SQLThread) != raw[s.f.raw.sqlRunning] ||
		rep.IOThread != ThreadYes || rep.SQLThread != ThreadYes {
		t.Errorf("threads IO=%s SQL=%s, server says %q/%q", rep.IOThread, rep.SQLThread, raw[s.f.raw.ioRunning], raw[s.f.raw.sqlRunning])
	}
	if rep.SourceHost != p.host || rep.SourcePort != p.port || fmt.Sprint(rep.SourcePort) != raw[s.f.raw.sourcePort] {
		t.Errorf("source = %s:%d, want %s (server says port %s)", rep.SourceHost, rep.SourcePort, p.addr(), raw[s.f.raw.sourcePort])
	}
	if !rep.Retrieved.Equal(wantRetrieved) || !rep.Retrieved.Contains(gtid.MustParse(s.f.flavor, raw[s.f.raw.retrieved])) || rep.Retrieved.IsEmpty() {
		t.Errorf("Retrieved = %s, server says %q", rep.Retrieved, raw[s.f.raw.retrieved])
	}
	if rep.LastIOErrno != 0 || rep.LastSQLErrno != 0 || !rep.LagKnown || !rep.AutoPosition || rep.SourceServerID != stP.ServerID {
		t.Errorf("replica status = %+v", rep)
	}
	if s.f.flavor == gtid.MariaDB {
		if stR.GTIDSlavePos != queryString(t, rdb, "SELECT @@GLOBAL.gtid_slave_pos") || stR.GTIDCurrentPos != queryString(t, rdb, "SELECT @@GLOBAL.gtid_current_pos") {
			t.Errorf("MariaDB positions: slave %q current %q", stR.GTIDSlavePos, stR.GTIDCurrentPos)
		}
		if rep.GTIDSlavePos != stR.GTIDSlavePos {
			t.Errorf("MariaDB Gtid_Slave_Pos %q", rep.GTIDSlavePos)
		}
	} else if stR.ServerUUID != queryString(t, rdb, "SELECT @@GLOBAL.server_uuid") || rep.SourceUUID != stP.ServerUUID {
		t.Errorf("MySQL uuids: %q, source %q", stR.ServerUUID, rep.SourceUUID)
	}
	// The poller's silence signal on both engines (MySQL: performance_schema):
	// the configured period, and a counter an idle link keeps moving.
	if rep.HeartbeatPeriod != 500*time.Millisecond {
		t.Errorf("heartbeat period %v, want the configured 500ms", rep.HeartbeatPeriod)
	}
	waitFor(t, 30*time.Second, "heartbeats counted on an idle link", func() (bool, string) {
		st, err := ir.Status(ctxFor(t, 10*time.Second))
		if err != nil || st.Replica == nil {
			return false, fmt.Sprint(err)
		}
		return st.Replica.ReceivedHeartbeats > rep.ReceivedHeartbeats, fmt.Sprintf("%d, first read %d", st.Replica.ReceivedHeartbeats, rep.ReceivedHeartbeats)
	})
	s.checkStatusOnly(t, p, stP)
	s.checkStatusOnly(t, r, stR)
}

// checkStatusOnly opens srv StatusOnly (the poller's probers): its Status,
// read in one round trip, equals want (read in two, the counters that move
// by themselves aside), and it refuses every other operation.
func (s suite) checkStatusOnly(t *testing.T, srv *realServer, want Status) {
	t.Helper()
	inst, err := Open(ctxFor(t, 30*time.Second), Options{Addr: srv.addr(), User: testenv.AdminUser, Password: testenv.AdminPassword,
		StatusOnly: true, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatalf("open %s status-only: %v", srv.name, err)
	}
	defer inst.Close()
	got, err := inst.Status(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatalf("status-only Status of %s: %v", srv.name, err)
	}
	settle := func(st Status) Status {
		if st.Replica != nil {
			r := *st.Replica
			r.ReceivedHeartbeats, r.Lag, r.IOState, r.SQLState = 0, 0, "", ""
			st.Replica = &r
		}
		return st
	}
	if g, w := settle(got), settle(want); !reflect.DeepEqual(g, w) {
		t.Errorf("status-only Status of %s:\n%+v %+v\nwant\n%+v %+v", srv.name, g, g.Replica, w, w.Replica)
	}
	if err := inst.Fence(ctxFor(t, 30*time.Second)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a status-only instance fenced: %v", err)
	}
	if err := inst.StopReplica(ctxFor(t, 30*time.Second)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a status-only instance stopped replication: %v", err)
	}
}

func (s suite) testFence(t *testing.T) {
	srv := s.f.start(t, "fence")
	inst := s.openPrimary(t, srv)
	adb := app(t, srv)
	mustExec(t, adb, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO t VALUES (1, 0)")
	for round := 1; round <= 2; round++ { // the second Fence hits a fenced server
		if err := inst.Fence(ctxFor(t, 30*time.Second)); err != nil {
			t.Fatalf("Fence #%d: %v", round, err)
		}
	}
	_, err := adb.ExecContext(ctxFor(t, 30*time.Second), "INSERT INTO t VALUES (2, 0)")
	if errNumber(err) != errReadOnly {
		t.Fatalf("app write on a fenced server = %v; want error %d", err, errReadOnly)
	}
	st, err := inst.Status(ctxFor(t, 30*time.Second))
	if err != nil || !st.Fenced() {
		t.Fatalf("Status after Fence = %+v, %v", st, err)
	}
	for round := 1; round <= 2; round++ {
		if err := inst.Promote(ctxFor(t, 30*time.Second)); err != nil {
			t.Fatalf("Promote #%d: %v", round, err)
		}
	}
	mustExec(t, adb, "INSERT INTO t VALUES (3, 0)")
	if st, err := inst.Status(ctxFor(t, 30*time.Second)); err != nil || st.ReadOnly || st.SuperReadOnly {
		t.Fatalf("Status after Promote = %+v, %v", st, err)
	}
}

// processIDs lists SHOW PROCESSLIST as id → command.
func processIDs(t *testing.T, db *sql.DB) map[uint64]string {
	t.Helper()
	rs, err := dbQuerier{db}.query(ctxFor(t, 30*time.Second), "SHOW PROCESSLIST")
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]string{}
	for n := range rs.rows {
		var id uint64
		fmt.Sscan(rs.row(n).str("Id"), &id)
		out[id] = rs.row(n).str("Command")
	}
	return out
}

func (s suite) testKill(t *testing.T) {
	p, r, ip, _, pdb, rdb := s.pair(t)
	ctx := ctxFor(t, 60*time.Second)

	// Two pooled sessions of ours, both held at once so both exist.
	c1, err := ip.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ip.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = c1.Close()
	_ = c2.Close()
	before := processIDs(t, pdb)
	var ours []uint64
	for id := range before {
		if ip.ids.has(id) {
			ours = append(ours, id)
		}
	}
	if len(ours) != 2 {
		t.Fatalf("expected 2 pooled sessions of ours in the processlist, found %v", ours)
	}
	appConn, err := app(t, p).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer appConn.Close()
	if _, err := appConn.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}

	killed, err := ip.KillClientConnections(ctx)
	if err != nil || killed < 2 { // the app session and the test's admin pool session
		t.Fatalf("KillClientConnections = %d, %v; want >= 2", killed, err)
	}
	again, err := ip.KillClientConnections(ctx)
	if err != nil || again != 0 {
		t.Fatalf("second KillClientConnections = %d, %v; want 0", again, err)
	}
	if _, err := appConn.ExecContext(ctx, "SELECT 1"); err == nil {
		t.Fatal("the app session survived KillClientConnections")
	}
	after := processIDs(t, admin(t, p))
	for _, id := range ours {
		if _, ok := after[id]; !ok {
			t.Errorf("our pooled session %d was killed", id)
		}
	}
	dump := false
	for _, cmd := range after {
		dump = dump || strings.HasPrefix(cmd, "Binlog Dump")
	}
	if !dump {
		t.Errorf("the replica's binlog dump thread is gone: %v", after)
	}
	// Replication still flows.
	mustExec(t, app(t, p), "INSERT INTO t VALUES (10, 0)")
	s.waitReplicated(t, admin(t, r), admin(t, p))
	_ = rdb

	// On the replica: its IO/SQL threads are spared.
	ir := s.open(t, r)
	if _, err := ir.KillClientConnections(ctx); err != nil {
		t.Fatal(err)
	}
	st := showStatus(t, admin(t, r), s.f.raw.replicaStatus)
	if st[s.f.raw.ioRunning] != "Yes" || st[s.f.raw.sqlRunning] != "Yes" {
		t.Fatalf("replication threads after KillClientConnections on the replica: %v", st)
	}
}

func (s suite) testDrain(t *testing.T) {
	p, _, ip, ir, pdb, rdb := s.pair(t)
	pApp := app(t, p)

	if err := ip.WaitRelayDrained(ctxFor(t, 30*time.Second), gtid.Set{}, 5*time.Second); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("WaitRelayDrained on the primary = %v; want ErrNotReplica", err)
	}

	// waitRetrieved waits until the replica's IO thread holds all of the primary's transactions.
	waitRetrieved := func() gtid.Set {
		want := s.executed(t, pdb)
		waitFor(t, 30*time.Second, "IO thread retrieved everything", func() (bool, string) {
			st, err := ir.Status(ctxFor(t, 30*time.Second))
			if err != nil || st.Replica == nil {
				return false, fmt.Sprint(err)
			}
			if s.f.flavor == gtid.MariaDB { // Gtid_IO_Pos is one triple per domain: compare with the primary's position
				pos := gtid.MustParse(gtid.MariaDB, queryString(t, pdb, "SELECT @@GLOBAL.gtid_binlog_pos"))
				return st.Replica.Retrieved.Contains(pos), st.Replica.RetrievedRaw
			}
			return st.Replica.Retrieved.Union(st.Executed).Contains(want), st.Replica.RetrievedRaw
		})
		return want
	}

	t.Run("StoppedSQLThreadIsRestartedAndDrains", func(t *testing.T) {
		mustExec(t, rdb, s.f.raw.stopSQLThread)
		for id := 20; id < 25; id++ {
			mustExec(t, pApp, fmt.Sprintf("INSERT INTO t VALUES (%d, 0)", id))
		}
		waitRetrieved()
		if n := countRows(t, rdb); n != 3 {
			t.Fatalf("replica applied %d rows while its SQL thread was stopped", n)
		}
		for round := 1; round <= 2; round++ {
			if err := ir.WaitRelayDrained(ctxFor(t, 60*time.Second), gtid.Set{}, 30*time.Second); err != nil {
				t.Fatalf("WaitRelayDrained #%d: %v", round, err)
			}
		}
		if n := countRows(t, rdb); n != 8 {
			t.Fatalf("replica has %d rows after the drain, want 8", n)
		}
		if st := showStatus(t, rdb, s.f.raw.replicaStatus); st[s.f.raw.sqlRunning] != "Yes" {
			t.Fatalf("SQL thread not running after the drain: %v", st)
		}
	})

	t.Run("PausedSQLThreadCatchesUpAfterStart", func(t *testing.T) {
		mustExec(t, rdb, s.f.raw.stopSQLThread)
		for id := 30; id < 35; id++ {
			mustExec(t, pApp, fmt.Sprintf("INSERT INTO t VALUES (%d, 0)", id))
		}
		target := waitRetrieved()
		before := countRows(t, rdb)
		mustExec(t, rdb, s.f.raw.startSQLThread)
		if err := ir.WaitRelayDrained(ctxFor(t, 60*time.Second), target, 30*time.Second); err != nil {
			t.Fatalf("WaitRelayDrained after START SQL_THREAD: %v", err)
		}
		if n := countRows(t, rdb); n != before+5 {
			t.Fatalf("replica has %d rows after the drain, want %d", n, before+5)
		}
	})

	t.Run("BlockedApplierTimesOutThenCatchesUp", func(t *testing.T) {
		// A table lock held on the replica stops the applier.
		unlock := lockTable(t, rdb)
		ctx := ctxFor(t, 120*time.Second)
		mustExec(t, pApp, "UPDATE t SET v = 42 WHERE id = 1")
		target := waitRetrieved()
		err := ir.WaitRelayDrained(ctx, gtid.Set{}, 2*time.Second)
		if !errors.Is(err, ErrDrainTimeout) {
			t.Fatalf("WaitRelayDrained with a blocked applier = %v; want ErrDrainTimeout", err)
		}
		var wg sync.WaitGroup
		var drainErr error
		wg.Go(func() { drainErr = ir.WaitRelayDrained(ctx, target, 60*time.Second) })
		time.Sleep(time.Second) // the drain is waiting while the applier is blocked
		unlock()
		wg.Wait()
		if drainErr != nil {
			t.Fatalf("WaitRelayDrained after the lock was released: %v", drainErr)
		}
		if v := queryString(t, rdb, "SELECT v FROM app.t WHERE id = 1"); v != "42" {
			t.Fatalf("replica row v = %s after the drain, want 42", v)
		}
	})

	t.Run("SQLThreadErrorIsReported", func(t *testing.T) {
		// An errant row on the replica makes the primary's insert of the same key fail there.
		mustExec(t, rdb, s.f.raw.adminWriteOn...)
		mustExec(t, rdb, "INSERT INTO app.t VALUES (100, 0)")
		mustExec(t, rdb, s.f.raw.adminWriteOff...)
		mustExec(t, pApp, "INSERT INTO t VALUES (100, 1)")
		waitRetrieved() // else the drain could finish before the failing transaction arrives
		err := ir.WaitRelayDrained(ctxFor(t, 60*time.Second), gtid.Set{}, 30*time.Second)
		if !errors.Is(err, ErrReplicationError) {
			t.Fatalf("WaitRelayDrained with a failed applier = %v; want ErrReplicationError", err)
		}
		// The cause, not MySQL's multi-threaded coordinator's "error(s) in
		// the worker(s)": status and alerts must say what to repair. MySQL
		// fails on the duplicate key; MariaDB's strict GTID mode first
		// refuses the primary's transaction as out of order (error 1950).
		cause := "Duplicate entry"
		if s.f.flavor == gtid.MariaDB {
			cause = "out-of-order sequence number"
		}
		if !strings.Contains(err.Error(), cause) {
			t.Errorf("the drain's error does not name the cause (%q): %v", cause, err)
		}
		st, err := ir.Status(ctxFor(t, 10*time.Second))
		if err != nil || st.Replica == nil || !strings.Contains(st.Replica.LastSQLError, cause) {
			t.Errorf("Status after the failed applier: %+v, %v; want its error to name the cause (%q)", st.Replica, err, cause)
		}
	})
}

// testStopReplicaIO: after StopReplicaIO the retrieved set stays as read
// while the primary keeps writing, the drain applies exactly that set, and
// no step discards the relay log (MariaDB purges it when a replication
// thread starts while both are stopped).
func (s suite) testStopReplicaIO(t *testing.T) {
	p, _, ip, ir, pdb, rdb := s.pair(t)
	pApp := app(t, p)
	ctx := ctxFor(t, 180*time.Second)
	insert := func(from, to int) {
		t.Helper()
		for id := from; id < to; id++ {
			mustExec(t, pApp, fmt.Sprintf("INSERT INTO t VALUES (%d, 0)", id))
		}
	}
	// retrievedAll waits until the replica received everything the primary wrote.
	retrievedAll := func() {
		t.Helper()
		sent := s.executed(t, pdb)
		waitFor(t, 30*time.Second, "IO thread retrieved everything", func() (bool, string) {
			st, err := ir.Status(ctx)
			if err != nil || st.Replica == nil {
				return false, fmt.Sprint(err)
			}
			return st.Replica.Retrieved.Union(st.Executed).Covers(sent), st.Replica.RetrievedRaw
		})
	}
	status := func() *ReplicaStatus {
		t.Helper()
		st, err := ir.Status(ctx)
		if err != nil || st.Replica == nil {
			t.Fatalf("replica status: %+v, %v", st, err)
		}
		return st.Replica
	}
	restartIO := func() {
		t.Helper()
		for round := 1; round <= 2; round++ { // the second call finds the thread running
			if err := ir.StartReplicaIO(ctx); err != nil {
				t.Fatalf("StartReplicaIO #%d: %v", round, err)
			}
		}
		s.waitReplicated(t, rdb, pdb)
	}

	t.Run("DrainAppliesExactlyTheFrozenSet", func(t *testing.T) {
		// A table lock on the replica holds the applier.
		unlock := lockTable(t, rdb)
		mustExec(t, pApp, "UPDATE t SET v = 1 WHERE id = 1")
		insert(10, 15)
		retrievedAll()
		for round := 1; round <= 2; round++ { // the second call finds the thread stopped
			if err := ir.StopReplicaIO(ctx); err != nil {
				t.Fatalf("StopReplicaIO #%d: %v", round, err)
			}
		}
		rep := status()
		if rep.IOThread.Running() || !rep.SQLThread.Running() {
			t.Fatalf("after StopReplicaIO: IO=%s SQL=%s; want IO stopped, applier running", rep.IOThread, rep.SQLThread)
		}
		final := rep.Retrieved
		insert(20, 25) // the primary keeps writing
		later := s.executed(t, pdb)
		if final.Covers(later) {
			t.Fatalf("retrieved %s already covers the primary's later writes %s", final, later)
		}
		var wg sync.WaitGroup
		var drainErr error
		wg.Go(func() { drainErr = ir.WaitRelayDrained(ctx, final, 60*time.Second) })
		time.Sleep(time.Second) // two heartbeat periods: ample time for a running IO thread to fetch the later writes
		unlock()
		wg.Wait()
		if drainErr != nil {
			t.Fatalf("WaitRelayDrained: %v", drainErr)
		}
		st, err := ir.Status(ctx)
		if err != nil || st.Replica == nil {
			t.Fatalf("status after the drain: %v", err)
		}
		if !st.Replica.Retrieved.Equal(final) {
			t.Fatalf("retrieved set changed after StopReplicaIO: %s, was %s", st.Replica.Retrieved, final)
		}
		if !st.Executed.Covers(final) || st.Executed.Covers(later) {
			t.Fatalf("replica executed %s; want the retrieved %s and not the primary's %s", st.Executed, final, later)
		}
		if n, v := countRows(t, rdb), queryString(t, rdb, "SELECT v FROM app.t WHERE id = 1"); n != 8 || v != "1" {
			t.Fatalf("replica has %d rows and v=%s after the drain, want 8 and 1", n, v)
		}
		restartIO()
		if n := countRows(t, rdb); n != 13 {
			t.Fatalf("replica has %d rows after StartReplicaIO, want 13", n)
		}
	})

	t.Run("StoppedApplierIsStartedBeforeTheIOThreadStops", func(t *testing.T) {
		mustExec(t, rdb, s.f.raw.stopSQLThread)
		insert(30, 35)
		retrievedAll()
		if err := ir.StopReplicaIO(ctx); err != nil {
			t.Fatalf("StopReplicaIO: %v", err)
		}
		rep := status()
		if rep.IOThread.Running() || !rep.SQLThread.Running() {
			t.Fatalf("after StopReplicaIO: IO=%s SQL=%s; want IO stopped, applier running", rep.IOThread, rep.SQLThread)
		}
		if err := ir.WaitRelayDrained(ctx, rep.Retrieved, 30*time.Second); err != nil {
			t.Fatalf("WaitRelayDrained: %v", err)
		}
		// The primary wrote nothing since retrievedAll: the replica must have all of it.
		if n, want := countRows(t, rdb), countRows(t, pdb); n != want {
			t.Fatalf("replica has %d rows after the drain, the primary %d (the relay log was discarded?)", n, want)
		}
		restartIO()
	})

	t.Run("SlowApplierIsNotAnIncompleteTransaction", func(t *testing.T) {
		s.checkSlowApplierDrains(t, p, ir, pdb, rdb)
	})

	t.Run("BothThreadsStopped", func(t *testing.T) {
		mustExec(t, rdb, s.f.raw.stopSQLThread)
		insert(40, 45)
		retrievedAll()
		mustExec(t, rdb, ir.d.stopIOThread) // behind mysqlctl's back: both threads stopped
		before := status().Retrieved
		err := ir.WaitRelayDrained(ctx, gtid.Set{}, 30*time.Second)
		if s.f.flavor != gtid.MariaDB { // MySQL keeps the relay log: the applier is started
			if err != nil {
				t.Fatalf("WaitRelayDrained: %v", err)
			}
			if n, want := countRows(t, rdb), countRows(t, pdb); n != want {
				t.Fatalf("replica has %d rows after the drain, the primary %d", n, want)
			}
			restartIO()
			return
		}
		if !errors.Is(err, ErrApplierStopped) {
			t.Fatalf("WaitRelayDrained with both threads stopped = %v; want ErrApplierStopped", err)
		}
		if err := ir.StartReplicaIO(ctx); !errors.Is(err, ErrApplierStopped) {
			t.Fatalf("StartReplicaIO with both threads stopped = %v; want ErrApplierStopped", err)
		}
		if after := status().Retrieved; !after.Equal(before) {
			t.Fatalf("retrieved set %s changed to %s: the relay log was discarded", before, after)
		}
		mustExec(t, rdb, ir.d.startReplica) // the test's own recovery: the primary is alive and resends
		s.waitReplicated(t, rdb, pdb)
		if n, want := countRows(t, rdb), countRows(t, pdb); n != want {
			t.Fatalf("replica has %d rows after the restart, the primary %d", n, want)
		}
	})

	t.Run("NotAReplica", func(t *testing.T) {
		if err := ip.StopReplicaIO(ctx); err != nil {
			t.Fatalf("StopReplicaIO on the primary: %v", err)
		}
		if err := ip.StartReplicaIO(ctx); !errors.Is(err, ErrNotReplica) {
			t.Fatalf("StartReplicaIO on the primary = %v; want ErrNotReplica", err)
		}
	})
}

// checkSlowApplierDrains holds the replica's applier for several drain
// slices on one fully received transaction, with the IO thread stopped as a
// failover stops it: the drain must wait for it (slow), not call it
// incomplete. A multi-threaded applier (MySQL's default, MariaDB's parallel
// replication) then says "read all relay log" while its worker still
// applies; the drain took that for a transaction never fully received, and
// a failover would have reset the relay log under an acknowledged write.
func (s suite) checkSlowApplierDrains(t *testing.T, p *realServer, ir *Instance, pdb, rdb *sql.DB) {
	t.Helper()
	ctx := ctxFor(t, 120*time.Second)
	unlock := lockTable(t, rdb)
	next := queryString(t, pdb, "SELECT MAX(id) + 1 FROM app.t")
	mustExec(t, app(t, p), "INSERT INTO t VALUES ("+next+", 0)") // one transaction: nothing else for the applier to wait on
	sent := s.executed(t, pdb)
	var final gtid.Set
	waitFor(t, 30*time.Second, "IO thread retrieved everything", func() (bool, string) {
		st, err := ir.Status(ctx)
		if err != nil || st.Replica == nil {
			return false, fmt.Sprint(err)
		}
		final = st.Replica.Retrieved
		return st.Replica.Retrieved.Union(st.Executed).Covers(sent), st.Replica.RetrievedRaw
	})
	if err := ir.StopReplicaIO(ctx); err != nil {
		t.Fatalf("StopReplicaIO: %v", err)
	}
	var wg sync.WaitGroup
	var drainErr error
	wg.Go(func() { drainErr = ir.WaitRelayDrained(ctx, final, 60*time.Second) })
	time.Sleep(2 * time.Second)
	if st, err := ir.Status(ctx); err == nil && st.Replica != nil {
		t.Logf("applier held: SQL state %q", st.Replica.SQLState)
	}
	time.Sleep(2 * time.Second)
	unlock()
	wg.Wait()
	if drainErr != nil {
		t.Fatalf("WaitRelayDrained with an applier held 4 s: %v", drainErr)
	}
	if n, want := countRows(t, rdb), countRows(t, pdb); n != want {
		t.Fatalf("replica has %d rows after the drain, the primary %d", n, want)
	}
	if err := ir.StartReplicaIO(ctx); err != nil {
		t.Fatalf("StartReplicaIO: %v", err)
	}
}

// testSlowParallelApplier is checkSlowApplierDrains with the engine's
// multi-threaded applier.
func (s suite) testSlowParallelApplier(t *testing.T) {
	p, _, _, ir, pdb, rdb := s.pair(t, s.f.parallelApplier...)
	s.checkSlowApplierDrains(t, p, ir, pdb, rdb)
}

func (s suite) testSemiSync(t *testing.T) {
	p, r, ip, ir, _, _ := s.pair(t)
	for round := 1; round <= 2; round++ {
		if err := ip.SetSemiSync(ctxFor(t, 30*time.Second), true, false); err != nil {
			t.Fatalf("SetSemiSync primary #%d: %v", round, err)
		}
		if err := ir.SetSemiSync(ctxFor(t, 30*time.Second), false, true); err != nil {
			t.Fatalf("SetSemiSync replica #%d: %v", round, err)
		}
	}
	waitFor(t, 30*time.Second, "semi-sync active on both sides", func() (bool, string) {
		sp, err1 := ip.Status(ctxFor(t, 30*time.Second))
		sr, err2 := ir.Status(ctxFor(t, 30*time.Second))
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		ok := sp.SemiSync.PrimaryEnabled && !sp.SemiSync.ReplicaEnabled && sp.SemiSync.PrimaryActive &&
			sr.SemiSync.ReplicaEnabled && !sr.SemiSync.PrimaryEnabled && sr.SemiSync.ReplicaActive
		// SetSemiSync restarted the IO thread: MySQL reports the replica side
		// active while the thread still says Connecting, and the reads below
		// must not race its connection.
		ok = ok && sr.Replica != nil && sr.Replica.IOThread == ThreadYes
		return ok, fmt.Sprintf("primary %+v replica %+v", sp.SemiSync, sr.SemiSync)
	})
	// The poller's one-request Status reads the same semi-sync state.
	for _, side := range []struct {
		srv  *realServer
		inst *Instance
	}{{p, ip}, {r, ir}} {
		st, err := side.inst.Status(ctxFor(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		s.checkStatusOnly(t, side.srv, st)
	}
	mustExec(t, app(t, p), "INSERT INTO t VALUES (50, 0)") // acknowledged by the replica
	for _, inst := range []*Instance{ip, ir} {
		if err := inst.SetSemiSync(ctxFor(t, 30*time.Second), false, false); err != nil {
			t.Fatal(err)
		}
		st, err := inst.Status(ctxFor(t, 30*time.Second))
		if err != nil || st.SemiSync.PrimaryEnabled || st.SemiSync.ReplicaEnabled {
			t.Fatalf("semi-sync after disabling: %+v, %v", st.SemiSync, err)
		}
	}
}

// Issue 26: the sessions whose commits wait for a semi-sync
// acknowledgement are seen. A replica whose own source side is on (guides
// advise it everywhere) has its applier's commits wait for acknowledgements
// nobody sends; switched off, it applies again. A primary nobody
// acknowledges (infinite timeout) has its clients' commits wait.
func (s suite) testSemiSyncWaits(t *testing.T) {
	p, _, ip, ir, pdb, rdb := s.pair(t)
	src := "rpl_semi_sync_master_"
	if s.f.engine == testenv.MySQL {
		src = "rpl_semi_sync_source_"
	}
	const infinite = "4294967295"
	mustExec(t, rdb, "SET GLOBAL "+src+"timeout = "+infinite, "SET GLOBAL "+src+"enabled = ON")
	mustExec(t, app(t, p), "INSERT INTO t VALUES (60, 0)")
	var rst Status
	waitFor(t, 30*time.Second, "the replica's applier waiting for an acknowledgement", func() (bool, string) {
		st, err := ir.Status(ctxFor(t, 30*time.Second))
		if err != nil || st.Replica == nil {
			return false, fmt.Sprint(err)
		}
		rst = st
		return st.AckWaits.Known && st.AckWaits.Appliers > 0 && st.AckWaits.Sessions == 0,
			fmt.Sprintf("%+v, SQL thread state %q", st.AckWaits, st.Replica.SQLState)
	})
	t.Logf("replica: %+v, SQL thread state %q, awaiting ack %t", rst.AckWaits, rst.Replica.SQLState, rst.Replica.AwaitingAck())
	if err := ir.SetSemiSync(ctxFor(t, 30*time.Second), false, rst.SemiSync.ReplicaEnabled); err != nil {
		t.Fatal(err)
	}
	s.waitReplicated(t, rdb, pdb)
	if st, err := ir.Status(ctxFor(t, 30*time.Second)); err != nil || st.AckWaits.Known {
		t.Fatalf("source side off: ack waits %+v (%v), want not read", st.AckWaits, err)
	}

	// Healthy semi-sync: nothing waits, whatever the server's own threads
	// do (MySQL's ack receiver sits in the same state for ever).
	mustExec(t, pdb, "SET GLOBAL "+src+"timeout = "+infinite, "SET GLOBAL "+src+"enabled = ON")
	if err := ir.SetSemiSync(ctxFor(t, 30*time.Second), false, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the replica acknowledging", func() (bool, string) {
		st, err := ir.Status(ctxFor(t, 30*time.Second))
		return err == nil && st.SemiSync.ReplicaActive && st.Replica != nil && st.Replica.IOThread == ThreadYes, fmt.Sprintf("%+v %v", st.SemiSync, err)
	})
	mustExec(t, app(t, p), "INSERT INTO t VALUES (62, 0)") // acknowledged
	time.Sleep(1500 * time.Millisecond)
	if st, err := ip.Status(ctxFor(t, 30*time.Second)); err != nil || !st.AckWaits.Known || st.AckWaits.Sessions != 0 || st.AckWaits.Appliers != 0 {
		t.Fatalf("healthy semi-sync primary: ack waits %+v (%v), want nothing waiting", st.AckWaits, err)
	}
	// Its IO thread stopped, nobody acknowledges the primary.
	if err := ir.StopReplicaIO(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := app(t, p).ExecContext(ctxFor(t, time.Minute), "INSERT INTO t VALUES (61, 0)")
		done <- err
	}()
	waitFor(t, 30*time.Second, "a client's commit waiting for an acknowledgement", func() (bool, string) {
		st, err := ip.Status(ctxFor(t, 30*time.Second))
		return err == nil && st.AckWaits.Sessions == 1 && st.AckWaits.Appliers == 0 && st.AckWaits.Longest >= time.Second,
			fmt.Sprintf("%+v %v", st.AckWaits, err)
	})
	if err := ip.SetSemiSync(ctxFor(t, 30*time.Second), false, false); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the waiting commit, released: %v", err)
	}
}

func (s suite) testFailover(t *testing.T) {
	srv := s.startN(t, 3)
	a, b, c := srv[0], srv[1], srv[2]
	ia, ib, ic := s.openPrimary(t, a), s.open(t, b), s.open(t, c)
	adb, bdb, cdb := admin(t, a), admin(t, b), admin(t, c)
	aApp := app(t, a)
	mustExec(t, aApp, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO t VALUES (1, 0), (2, 0)")
	s.replicate(t, ib, bdb, a)
	s.replicate(t, ic, cdb, a)
	mustExec(t, aApp, "INSERT INTO t VALUES (3, 0)")
	s.waitReplicated(t, bdb, adb)
	s.waitReplicated(t, cdb, adb)

	twice := func(step string, fn func(ctx context.Context) error) {
		t.Helper()
		for round := 1; round <= 2; round++ {
			if err := fn(ctxFor(t, 60*time.Second)); err != nil {
				t.Fatalf("%s #%d: %v", step, round, err)
			}
		}
	}
	// 1. Fence the old primary and end its client sessions.
	twice("fence a", ia.Fence)
	if _, err := aApp.ExecContext(ctxFor(t, 30*time.Second), "INSERT INTO t VALUES (4, 0)"); errNumber(err) != errReadOnly {
		t.Fatalf("app write on the fenced old primary = %v; want %d", err, errReadOnly)
	}
	if _, err := ia.KillClientConnections(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	stA, err := ia.Status(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// 2. Drain the candidate up to the old primary's executed set.
	twice("drain b", func(ctx context.Context) error { return ib.WaitRelayDrained(ctx, stA.Executed, 30*time.Second) })
	// 3. Detach and promote the candidate.
	twice("stop replica b", ib.StopReplica)
	twice("reset replica b", ib.ResetReplicaAll)
	twice("promote b", ib.Promote)
	stB, err := ib.Status(ctxFor(t, 30*time.Second))
	if err != nil || stB.Replica != nil || stB.ReadOnly || !stB.Executed.Contains(stA.Executed) {
		t.Fatalf("new primary status = %+v, %v (old primary executed %s)", stB, err, stA.Executed)
	}
	// 4. Repoint the third site.
	twice("repoint c", func(ctx context.Context) error {
		return ic.ReplicateFrom(ctx, Source{Host: b.host, Port: b.port, User: testenv.ReplUser, Password: testenv.ReplPassword,
			TLS: s.f.replTLS, HeartbeatPeriod: 500 * time.Millisecond, ConnectRetry: time.Second})
	})
	// 5. A write on the new primary reaches the repointed replica.
	mustExec(t, app(t, b), "INSERT INTO t VALUES (5, 5)")
	waitFor(t, 30*time.Second, "row 5 on c", func() (bool, string) {
		var v sql.NullString
		err := cdb.QueryRowContext(ctxFor(t, 30*time.Second), "SELECT v FROM app.t WHERE id = 5").Scan(&v)
		return err == nil && v.String == "5", fmt.Sprint(err)
	})
	stC, err := ic.Status(ctxFor(t, 30*time.Second))
	if err != nil || stC.Replica == nil || stC.Replica.SourcePort != b.port || stC.Replica.IOThread != ThreadYes ||
		stC.Replica.SQLThread != ThreadYes || !stC.Fenced() {
		t.Fatalf("repointed replica status = %+v, %v", stC, err)
	}
	if n := countRows(t, cdb); n != 4 {
		t.Fatalf("c has %d rows, want 4", n)
	}
}

func (s suite) testIdempotency(t *testing.T) {
	p, _, ip, ir, pdb, rdb := s.pair(t)
	ctx := ctxFor(t, 120*time.Second)
	src := Source{Host: p.host, Port: p.port, User: testenv.ReplUser, Password: testenv.ReplPassword,
		TLS: s.f.replTLS, HeartbeatPeriod: 500 * time.Millisecond, ConnectRetry: time.Second}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"StopReplica on a primary", func() error { return ip.StopReplica(ctx) }},
		{"ResetReplicaAll on a primary", func() error { return ip.ResetReplicaAll(ctx) }},
		{"StopReplica on a replica", func() error { return ir.StopReplica(ctx) }},
		{"ReplicateFrom", func() error { return ir.ReplicateFrom(ctx, src) }},
		{"WaitRelayDrained", func() error { return ir.WaitRelayDrained(ctx, gtid.Set{}, 30*time.Second) }},
		{"ResetReplicaAll on a replica", func() error { return ir.ResetReplicaAll(ctx) }},
		{"StopReplica after reset", func() error { return ir.StopReplica(ctx) }},
		{"ReplicateFrom after reset", func() error { return ir.ReplicateFrom(ctx, src) }},
	}
	for _, st := range steps {
		for round := 1; round <= 2; round++ {
			if err := st.fn(); err != nil {
				t.Fatalf("%s #%d: %v", st.name, round, err)
			}
		}
	}
	if stP, err := ip.Status(ctx); err != nil || stP.Replica != nil {
		t.Fatalf("primary after StopReplica/ResetReplicaAll: %+v, %v", stP, err)
	}
	mustExec(t, app(t, p), "INSERT INTO t VALUES (60, 0)")
	s.waitReplicated(t, rdb, pdb)
	if n := countRows(t, rdb); n != 4 {
		t.Fatalf("replica has %d rows, want 4", n)
	}
}

func (s suite) testClone(t *testing.T) {
	if !s.f.clone {
		srv := s.f.start(t, "clone")
		inst := s.open(t, srv)
		err := inst.CloneFrom(ctxFor(t, 30*time.Second), Donor{Host: srv.host, Port: srv.port, User: testenv.AdminUser, Password: testenv.AdminPassword}, 30*time.Second)
		if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "mariadb-backup") {
			t.Fatalf("CloneFrom = %v; want ErrNotSupported naming mariadb-backup", err)
		}
		return
	}
	srv := s.startN(t, 2)
	donor, recipient := srv[0], srv[1]
	s.openPrimary(t, donor)
	ddb := admin(t, donor)
	mustExec(t, app(t, donor), "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO t VALUES (1, 7)", "INSERT INTO t VALUES (2, 8)")
	// The recipient has a history of its own, which the clone must replace.
	inst := s.openPrimary(t, recipient)
	mustExec(t, app(t, recipient), "CREATE TABLE own (id INT PRIMARY KEY)", "INSERT INTO own VALUES (1)")
	d := Donor{Host: donor.host, Port: donor.port, User: testenv.AdminUser, Password: testenv.AdminPassword, TLS: s.f.replTLS}
	if err := inst.CloneFrom(ctxFor(t, 30*time.Second), d, 30*time.Second); !errors.Is(err, ErrNotFenced) {
		t.Fatalf("CloneFrom on a writable server = %v; want ErrNotFenced", err)
	}
	if n := queryString(t, admin(t, recipient), "SELECT COUNT(*) FROM app.own"); n != "1" {
		t.Fatalf("the refused clone touched the recipient: %s rows in app.own", n)
	}
	s.replicate(t, inst, admin(t, recipient), donor) // fences the recipient
	if err := inst.CloneFrom(ctxFor(t, 30*time.Second), d, 30*time.Second); !errors.Is(err, ErrReplicaRunning) {
		t.Fatalf("CloneFrom on a replicating server = %v; want ErrReplicaRunning", err)
	}
	if err := inst.ResetReplicaAll(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := inst.Fence(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	want := s.executed(t, ddb)
	if err := inst.CloneFrom(ctxFor(t, 300*time.Second), d, 240*time.Second); err != nil {
		t.Fatalf("CloneFrom: %v", err)
	}
	// testenv's mysqld has no supervisor: CLONE cannot restart it (3707).
	if err := recipient.restart(ctxFor(t, 120*time.Second)); err != nil {
		t.Fatal(err)
	}
	rdb := admin(t, recipient)
	if v := queryString(t, rdb, "SELECT GROUP_CONCAT(v ORDER BY id) FROM app.t"); v != "7,8" {
		t.Fatalf("cloned rows v = %q, want 7,8", v)
	}
	if n := queryString(t, rdb, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'own'"); n != "0" {
		t.Fatalf("the recipient's own table survived the clone")
	}
	ir := s.open(t, recipient)
	st, err := ir.Status(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Executed.Equal(want) || !st.Fenced() || st.Replica != nil {
		t.Fatalf("cloned recipient: executed %s (donor %s), fenced %t, replica %+v", st.Executed, want, st.Fenced(), st.Replica)
	}
	// The copy replicates from its donor with GTID auto-positioning.
	s.replicate(t, ir, rdb, donor)
	mustExec(t, app(t, donor), "INSERT INTO t VALUES (3, 9)")
	s.waitReplicated(t, rdb, ddb)
	if n := countRows(t, rdb); n != 3 {
		t.Fatalf("the cloned recipient has %d rows after replicating, want 3", n)
	}
}

// testTaggedGTIDs: tagged GTIDs written by a real MySQL server
// (gtid_next='AUTOMATIC:tag', 8.4+) flow through Status, the retrieved set,
// the drain's wait position and package gtid's comparisons, and a tagged
// errant transaction on a replica is found errant.
func (s suite) testTaggedGTIDs(t *testing.T) {
	if s.f.flavor != gtid.MySQL {
		t.Skip("SKIP tagged GTIDs: a MySQL 8.4+ feature; MariaDB's domain-server-seq GTIDs have no tags")
	}
	p, r, ip, ir, pdb, rdb := s.pair(t)
	ctx := ctxFor(t, 120*time.Second)
	// tagged runs stmts in one session of db under gtid_next='AUTOMATIC:tag'.
	tagged := func(db *sql.DB, tag string, stmts ...string) {
		t.Helper()
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, q := range slices.Concat([]string{"SET gtid_next = 'AUTOMATIC:" + tag + "'"}, stmts, []string{"SET gtid_next = 'AUTOMATIC'"}) {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	status := func(inst *Instance) Status {
		t.Helper()
		st, err := inst.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	// The applier is stopped, so the replica first holds the tagged
	// transactions in its relay log only and the drain waits for a tagged set.
	mustExec(t, rdb, s.f.raw.stopSQLThread)
	tagged(pdb, "Failover_A", "INSERT INTO app.t VALUES (70, 0)", "INSERT INTO app.t VALUES (71, 0)")
	tagged(pdb, "failover_b", "UPDATE app.t SET v = 1 WHERE id = 70")
	mustExec(t, app(t, p), "INSERT INTO t VALUES (72, 0)") // untagged again
	stP := status(ip)
	wantTagged := gtid.MustParse(gtid.MySQL, stP.ServerUUID+":failover_a:1-2:failover_b:1")
	if !stP.Executed.Contains(wantTagged) || !stP.Executed.Equal(s.executed(t, pdb)) {
		t.Fatalf("primary Executed %s (raw %q): want it to hold %s and equal the server's %s", stP.Executed, stP.ExecutedRaw, wantTagged, s.executed(t, pdb))
	}
	t.Logf("primary gtid_executed with tags: %q", stP.ExecutedRaw)
	waitFor(t, 30*time.Second, "tagged transactions retrieved", func() (bool, string) {
		st := status(ir)
		return st.Replica != nil && st.Replica.Retrieved.Contains(stP.Executed), st.Replica.RetrievedRaw
	})
	if st := status(ir); st.Executed.Contains(wantTagged) {
		t.Fatalf("replica executed %s with its applier stopped", st.Executed)
	}
	if err := ir.WaitRelayDrained(ctx, stP.Executed, 30*time.Second); err != nil {
		t.Fatalf("WaitRelayDrained to a tagged set: %v", err)
	}
	stR := status(ir)
	if !stR.Executed.Covers(stP.Executed) || !stR.Replica.Retrieved.Contains(wantTagged) {
		t.Fatalf("replica executed %s, retrieved %s; want the primary's %s", stR.Executed, stR.Replica.Retrieved, stP.Executed)
	}
	if v := queryString(t, rdb, "SELECT v FROM app.t WHERE id = 70"); v != "1" {
		t.Fatalf("replica row 70 v = %s, want 1", v)
	}
	// Replicated tagged transactions carry the primary's UUID: not errant.
	errant := func(replica, primary Status) gtid.Set {
		t.Helper()
		own, err := primary.Executed.Uncovered(replica.Executed).OriginatedBy(replica.ServerUUID)
		if err != nil {
			t.Fatal(err)
		}
		return own
	}
	if e := errant(stR, stP); !e.IsEmpty() || gtid.DivergentCount(stR.Executed, stP.Executed) != 0 {
		t.Fatalf("a replica holding only replicated tagged transactions looks errant: %s", e)
	}

	// A tagged write on the replica is an errant transaction.
	mustExec(t, rdb, s.f.raw.adminWriteOn...)
	tagged(rdb, "errant_x", "INSERT INTO app.t VALUES (90, 0)")
	mustExec(t, rdb, s.f.raw.adminWriteOff...)
	stR, stP = status(ir), status(ip)
	want := gtid.MustParse(gtid.MySQL, stR.ServerUUID+":errant_x:1")
	if e := errant(stR, stP); !e.Equal(want) {
		t.Fatalf("errant transactions of the replica = %s, want %s (replica %s, primary %s)", e, want, stR.Executed, stP.Executed)
	}
	if n := gtid.DivergentCount(stR.Executed, stP.Executed); n != 1 || stP.Executed.Covers(stR.Executed) {
		t.Fatalf("DivergentCount = %d, primary covers the replica: %t; want 1, false", n, stP.Executed.Covers(stR.Executed))
	}
	if !stR.Executed.Equal(s.executed(t, rdb)) {
		t.Fatalf("replica Executed %s, server says %s", stR.Executed, s.executed(t, rdb))
	}
	// The poller's one-request status reads the same tagged sets.
	s.checkStatusOnly(t, r, stR)
	s.checkStatusOnly(t, p, stP)
}
