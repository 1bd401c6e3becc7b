package daemon

// The per-server primitives against real servers of test/testenv, on both
// engines.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/test/testenv"
)

// realServers returns the servers primitives on tp's sites that dials mysqlctl as the
// admin account.
func realServers(t *testing.T, tp *testenv.Topology) *servers {
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
	e := &servers{group: cfg, conns: newConnections(dial, cfg.Sites), log: logger,
		secret: func() (string, error) { return testenv.ReplPassword, nil }}
	t.Cleanup(e.conns.closeAll)
	return e
}

func realCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// realGroup starts site0 (made writable by makeWritable) → site1, site2
// with table app.t holding rows 1-3 everywhere.
func realGroup(t *testing.T, engine testenv.Engine) (*testenv.Topology, *servers) {
	t.Helper()
	tp := testenv.StartTopology(t, 3, testenv.TopologyOptions{Engine: engine})
	e := realServers(t, tp)
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
func realFailover(t *testing.T, e *servers, from, to string) drainResult {
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
