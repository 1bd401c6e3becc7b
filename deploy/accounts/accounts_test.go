package accounts_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	. "github.com/failoverd/failoverd/deploy/accounts"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/test/testenv"
)

var testPasswords = Passwords{Daemon: "daemon-pw-1", Sidecar: "sidecar-pw-1", Replication: "repl-pw-1"}

func TestStatementsReplacePlaceholders(t *testing.T) {
	for _, engine := range []string{"mysql", "mariadb"} {
		stmts, err := Statements(engine, testPasswords)
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(stmts, "\n")
		for _, want := range []string{"CREATE USER 'failoverd'@'%' IDENTIFIED BY 'daemon-pw-1'", "CREATE USER 'repl'@'%' IDENTIFIED BY 'repl-pw-1'", "CREATE USER 'failoverd_sidecar'@'%' IDENTIFIED BY 'sidecar-pw-1'", "GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%'"} {
			if !strings.Contains(all, want) {
				t.Errorf("%s: no statement %q in\n%s", engine, want, all)
			}
		}
		if strings.Contains(all, "CHANGE-ME") || strings.Contains(all, "--") || strings.Contains(all, ";") {
			t.Errorf("%s: a placeholder, comment or separator is left:\n%s", engine, all)
		}
		if strings.Contains(all, "ALL PRIVILEGES") || strings.Contains(all, "SUPER") {
			t.Errorf("%s: ALL or SUPER granted:\n%s", engine, all)
		}
	}
	if _, err := Statements("postgres", testPasswords); !errors.Is(err, ErrUnknownEngine) {
		t.Errorf("unknown engine: %v", err)
	}
	if _, err := Statements("mysql", Passwords{Daemon: "it's", Sidecar: "y", Replication: "x"}); err == nil {
		t.Error("a quote in a password was accepted")
	}
}

// TestRealGrantsSufficeOnEveryDaemonOperation runs on a two-site group whose
// accounts test/testenv created from this package's SQL and runs, as the
// documented daemon account,
// every operation a failover, a switchover and a fence perform (status,
// promote, fence, kill the application's sessions, drain, stop and start
// replication, semi-sync roles, repoint with the documented replication
// account), on both engines. A grant missing from the SQL fails here, not
// at 3 a.m.
func TestRealGrantsSufficeOnEveryDaemonOperation(t *testing.T) {
	testenv.ForEachEngine(t, testRealGrants)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, m *testenv.Server) *mysqlctl.Instance {
	t.Helper()
	return openAs(t, m, testenv.DaemonUser, testenv.DaemonPassword)
}

func openAs(t *testing.T, m *testenv.Server, user, password string) *mysqlctl.Instance {
	t.Helper()
	in, err := mysqlctl.Open(ctxFor(t), mysqlctl.Options{Addr: m.Addr(), User: user, Password: password,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatalf("open %s as %s: %v", m.Name, user, err)
	}
	t.Cleanup(func() { _ = in.Close() })
	return in
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s as the documented daemon account: %v", what, err)
	}
}

func testRealGrants(t *testing.T, e testenv.Engine) {
	tp := testenv.StartTopology(t, 2, testenv.TopologyOptions{Engine: e})
	site0, site1 := tp.Sites[0], tp.Sites[1]
	if testenv.DaemonUser != DaemonUser || testenv.ReplUser != ReplicationUser {
		t.Fatalf("testenv's accounts %s/%s are not the documented %s/%s", testenv.DaemonUser, testenv.ReplUser, DaemonUser, ReplicationUser)
	}
	g := site0.Grants(t, DaemonUser, "%")
	if strings.Contains(g, "ALL PRIVILEGES") || strings.Contains(g, "SUPER") || !strings.Contains(g, "TO `failoverd`@`%`") && !strings.Contains(g, "TO 'failoverd'@'%'") {
		t.Fatalf("the daemon account on %s is not the documented one:\n%s", site0.Name, g)
	}
	// The replica follows site0 with the documented replication account.
	p0, p1 := open(t, site0), open(t, site1)
	src := func(m *testenv.Server) mysqlctl.Source {
		return mysqlctl.Source{Host: m.Host, Port: m.Port, User: testenv.ReplUser, Password: testenv.ReplPassword,
			ConnectRetry: time.Second, HeartbeatPeriod: 500 * time.Millisecond}
	}
	must(t, "stop replica", p1.StopReplica(ctxFor(t)))
	must(t, "repoint site1 to site0", p1.ReplicateFrom(ctxFor(t), src(site0)))
	must(t, "promote site0", p0.Promote(ctxFor(t)))
	must(t, "semi-sync roles on site0", p0.SetSemiSync(ctxFor(t), true, false))
	must(t, "semi-sync roles on site1", p1.SetSemiSync(ctxFor(t), false, true))

	site0.Exec(t, "CREATE TABLE app.g (id INT PRIMARY KEY)")
	app := site0.AppDB(t)
	if _, err := app.ExecContext(ctxFor(t), "INSERT INTO g VALUES (1)"); err != nil {
		t.Fatalf("application write on the promoted site0: %v", err)
	}
	st0, err := p0.Status(ctxFor(t))
	must(t, "status of site0", err)
	st1, err := p1.Status(ctxFor(t))
	must(t, "status of site1", err)
	if st1.Replica == nil || st1.Replica.SourcePort != site0.Port {
		t.Fatalf("site1's status as the daemon account shows no replication from site0: %+v", st1.Replica)
	}
	must(t, "drain site1", p1.WaitRelayDrained(ctxFor(t), st0.Executed, 20*time.Second))
	must(t, "stop site1's IO thread", p1.StopReplicaIO(ctxFor(t)))
	must(t, "start site1's IO thread", p1.StartReplicaIO(ctxFor(t)))

	// A fence: read-only, and the application's open session is killed.
	conn, err := app.Conn(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	must(t, "fence site0", p0.Fence(ctxFor(t)))
	n, err := p0.KillClientConnections(ctxFor(t))
	must(t, "kill the application's sessions on site0", err)
	if n == 0 {
		t.Fatalf("the fence killed no session; the application held one")
	}
	if _, err := conn.ExecContext(ctxFor(t), "INSERT INTO g VALUES (2)"); err == nil {
		t.Fatal("the application's session wrote after the fence")
	}
	// The application account cannot lift the fence.
	_, err = app.ExecContext(ctxFor(t), "SET GLOBAL read_only = OFF")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || (me.Number != 1227 && me.Number != 1290) {
		t.Fatalf("the application account lifting read_only: %v, want access denied", err)
	}

	// Switch over: site1 becomes the primary, site0 follows it.
	st0, err = p0.Status(ctxFor(t))
	must(t, "status of the fenced site0", err)
	must(t, "drain site1 to the fenced primary's set", p1.WaitRelayDrained(ctxFor(t), st0.Executed, 20*time.Second))
	must(t, "stop site1's replication", p1.StopReplica(ctxFor(t)))
	must(t, "reset site1's replication", p1.ResetReplicaAll(ctxFor(t)))
	must(t, "promote site1", p1.Promote(ctxFor(t)))
	must(t, "repoint site0 to site1", p0.ReplicateFrom(ctxFor(t), src(site1)))
	must(t, "semi-sync roles on site1", p1.SetSemiSync(ctxFor(t), true, false))
	must(t, "semi-sync roles on site0", p0.SetSemiSync(ctxFor(t), false, true))
	if _, err := site1.AppDB(t).ExecContext(ctxFor(t), "INSERT INTO g VALUES (3)"); err != nil {
		t.Fatalf("application write on the new primary site1: %v", err)
	}
	st1, err = p1.Status(ctxFor(t))
	must(t, "status of site1", err)
	must(t, "drain site0 from site1", p0.WaitRelayDrained(ctxFor(t), st1.Executed, 20*time.Second))
	if got := site0.QueryString(t, "SELECT COUNT(*) FROM app.g"); got != "2" {
		t.Fatalf("site0 holds %s rows after following site1, want 2", got)
	}
	st0, err = p0.Status(ctxFor(t))
	must(t, "status of site0", err)
	if st0.Replica == nil || !st0.Replica.IOThread.Running() || !st0.Replica.SQLThread.Running() {
		t.Fatalf("site0 does not replicate from site1 with the documented account: %+v", st0.Replica)
	}
	if !st0.Executed.Covers(st1.Executed) {
		t.Fatalf("site0's executed set %s does not cover site1's %s", st0.Executed, st1.Executed)
	}

	// The sidecar's account does what a sidecar does, on the primary (fence,
	// end the sessions, lift its own fence at boot) and on a replica
	// (status), and nothing more: replication is not its business.
	sc1, sc0 := openAs(t, site1, testenv.SidecarUser, testenv.SidecarPassword), openAs(t, site0, testenv.SidecarUser, testenv.SidecarPassword)
	conn1, err := site1.AppDB(t).Conn(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn1.Close()
	if _, err := conn1.ExecContext(ctxFor(t), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	sidecarMust := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s as the documented sidecar account: %v", what, err)
		}
	}
	sidecarMust("fence site1", sc1.Fence(ctxFor(t)))
	n, err = sc1.KillClientConnections(ctxFor(t))
	sidecarMust("kill site1's application sessions", err)
	if n == 0 {
		t.Fatal("the sidecar's fence killed no session; the application held one")
	}
	sidecarMust("lift site1's fence", sc1.Promote(ctxFor(t)))
	if _, err := site1.AppDB(t).ExecContext(ctxFor(t), "INSERT INTO g VALUES (4)"); err != nil {
		t.Fatalf("application write after the sidecar lifted its fence: %v", err)
	}
	st, err := sc0.Status(ctxFor(t))
	sidecarMust("status of replica site0", err)
	if st.Replica == nil || st.Replica.SourcePort != site1.Port {
		t.Fatalf("site0's status as the sidecar account shows no replication from site1: %+v", st.Replica)
	}
	if err := sc0.StopReplica(ctxFor(t)); !errors.As(err, &me) || (me.Number != 1227 && me.Number != 1142) {
		t.Fatalf("the sidecar account stopping replication: %v, want access denied", err)
	}
}
