package sidecar

// Real-server tests, on both engines (MariaDB 10.11 and MySQL 9.7 from
// test/testenv, 127.0.0.1), the real
// mysqlctl wiring (DialMySQL), real HTTP to a stand-in daemon (see
// standInDaemon: the daemon's own POST /v1/sidecar/report lives in package
// daemon) and the real clock with short timings (lease 2s, check 200ms).

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/test/testenv"
)

const (
	realLease = 2 * time.Second
	realCheck = 200 * time.Millisecond
)

// startSite starts a read-only server of engine e (as production sites
// start) with an application table; pidFile, when set, is where the server
// writes its pid.
func startSite(t *testing.T, e testenv.Engine, pidFile string) *testenv.Server {
	t.Helper()
	var args []string
	if pidFile != "" {
		args = append(args, "--pid-file="+pidFile) // later flags win over testenv's own
	}
	m := testenv.StartServer(t, testenv.ServerOptions{Engine: e, Name: "east", ExtraArgs: args})
	if e == testenv.MySQL {
		// super_read_only stops the admin account too; read_only stays on.
		m.Exec(t, "SET GLOBAL super_read_only = OFF")
	}
	m.Exec(t, "CREATE TABLE app.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)") // the admin account writes through read_only
	if e == testenv.MySQL {
		m.Exec(t, "SET GLOBAL super_read_only = ON")
	}
	return m
}

// closedURL is an http URL on which nothing listens (connection refused).
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr
}

// realSidecar runs site east's sidecar for m, its daemon d, one unreachable
// peer and the given killer (nil: no pid file).
func realSidecar(t *testing.T, m *testenv.Server, d *standInDaemon, killer Killer) *Sidecar {
	t.Helper()
	cfg := Config{
		Group: testGroup, Site: "east", Key: testKey, LeaseTimeout: realLease, CheckInterval: realCheck,
		DaemonURLs: []string{d.URL()},
		Peers:      []Peer{{Site: "west", URL: closedURL(t)}},
	}
	log := slog.New(slog.NewJSONHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	my := DialMySQL(mysqlctl.Options{Addr: m.Addr(), User: testenv.AdminUser, Password: testenv.AdminPassword,
		DialTimeout: cfg.fenceTimeout(), Logger: log})
	t.Cleanup(func() { _ = CloseMySQL(my) })
	return startReal(t, cfg, Options{MySQL: my, Killer: killer, Logger: log}, listen(t))
}

// query reads one value as the admin account; ok is false on an error (a
// fence also kills the admin pool's idle sessions: the next try reconnects).
func query(t *testing.T, m *testenv.Server, q string, args ...any) (v string, ok bool) {
	t.Helper()
	err := m.AdminDB(t).QueryRowContext(ctxFor(t), q, args...).Scan(&v)
	return v, err == nil
}

// readOnlyIs polls @@read_only until it is want (errors count as "not yet").
func readOnlyIs(t *testing.T, m *testenv.Server, want bool) bool {
	t.Helper()
	v, ok := query(t, m, "SELECT @@GLOBAL.read_only")
	return ok && (v == "1") == want
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// appWriteRefused asserts a fresh application-account write fails with
// ER_OPTION_PREVENTS_STATEMENT (read_only).
func appWriteRefused(t *testing.T, m *testenv.Server) {
	t.Helper()
	_, err := m.AppDB(t).ExecContext(ctxFor(t), "INSERT INTO t (v) VALUES (2)")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1290 {
		t.Fatalf("application write on a fenced site: %v, want error 1290 (read-only)", err)
	}
}

func TestRealFenceWhenTheViewNamesAnotherSite(t *testing.T) {
	testenv.ForEachEngine(t, testRealFenceWhenTheViewNamesAnotherSite)
}

func testRealFenceWhenTheViewNamesAnotherSite(t *testing.T, e testenv.Engine) {
	m := startSite(t, e, "")
	d := newStandInDaemon(t)
	d.set(sign(t, 1, "east"))
	s := realSidecar(t, m, d, nil)
	waitFor(t, "the boot unfence (daemon names east)", func() bool { return readOnlyIs(t, m, false) })

	ctx := ctxFor(t)
	conn, err := m.AppDB(t).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO t (v) VALUES (1)"); err != nil {
		t.Fatalf("application write on the active site: %v", err)
	}

	d.set(sign(t, 2, "west"))
	waitFor(t, "the fence", func() bool { return readOnlyIs(t, m, true) })
	waitFor(t, "the application session to be killed", func() bool {
		v, ok := query(t, m, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id)
		return ok && v == "0"
	})
	if _, err := conn.ExecContext(ctx, "INSERT INTO t (v) VALUES (1)"); err == nil {
		t.Fatal("the killed application session still wrote")
	}
	// Counted once KillClientConnections returned: a session opened before
	// that may still be killed, which is no read-only refusal.
	waitFor(t, "the fence to be counted", func() bool {
		return metric(t, s, `failoverd_sidecar_fences_total{reason="view-names-other"}`) == "1"
	})
	appWriteRefused(t, m)
	waitFor(t, "a report of the fence", func() bool {
		r, ok := d.lastReport()
		return ok && r.Fenced && r.FencedEpoch == 2 && r.MySQLdUp && !r.Writable && r.Executed != ""
	})
}

func TestRealFenceWhenCutOffForTheLease(t *testing.T) {
	testenv.ForEachEngine(t, testRealFenceWhenCutOffForTheLease)
}

func testRealFenceWhenCutOffForTheLease(t *testing.T, e testenv.Engine) {
	m := startSite(t, e, "")
	d := newStandInDaemon(t)
	d.set(sign(t, 1, "east"))
	s := realSidecar(t, m, d, nil)
	waitFor(t, "the boot unfence", func() bool { return readOnlyIs(t, m, false) })

	d.srv.Close() // daemon gone; the only peer never answered
	waitFor(t, "the lease-expiry fence", func() bool { return readOnlyIs(t, m, true) })
	// read_only is on before KillClientConnections runs: write only once the
	// whole fence is done, or the session may be killed mid-write.
	waitFor(t, "the fence to be counted", func() bool {
		return metric(t, s, `failoverd_sidecar_fences_total{reason="lease-expired"}`) == "1"
	})
	appWriteRefused(t, m)
	if got := metric(t, s, `failoverd_sidecar_fences_total{reason="view-names-other"}`); got != "0" {
		t.Errorf("fences{view-names-other} = %s", got)
	}
	if r := s.Report(); !r.Fenced || r.FencedEpoch != 1 || r.LeaseRemainingMs >= 0 {
		t.Errorf("report %+v", r)
	}
}

func TestRealHungMySQLDIsKilledThroughThePIDFile(t *testing.T) {
	testenv.ForEachEngine(t, testRealHungMySQLDIsKilledThroughThePIDFile)
}

func testRealHungMySQLDIsKilledThroughThePIDFile(t *testing.T, e testenv.Engine) {
	pidFile := filepath.Join(t.TempDir(), "server.pid")
	m := startSite(t, e, pidFile)
	d := newStandInDaemon(t)
	d.set(sign(t, 1, "east"))
	killer := &PIDFileKiller{Path: pidFile}
	if !killer.CanKill() {
		t.Fatalf("the server wrote no pid file at %s (or its process is not named mysqld/mariadbd)", pidFile)
	}
	s := realSidecar(t, m, d, killer)
	waitFor(t, "the boot unfence", func() bool { return readOnlyIs(t, m, false) })
	waitFor(t, "canKill in a report", func() bool { r, ok := d.lastReport(); return ok && r.CanKill })

	if err := m.Pause(); err != nil { // SIGSTOP: hung, connections open
		t.Fatal(err)
	}
	d.srv.Close()
	waitFor(t, "the sidecar to SIGKILL mysqld", func() bool { return !m.Running() })
	waitFor(t, "the kill to be counted", func() bool {
		return metric(t, s, `failoverd_sidecar_fences_total{reason="killed-mysqld"}`) == "1"
	})
	if r := s.Report(); !r.Fenced || r.MySQLdUp || r.FencedEpoch != 1 {
		t.Errorf("report after the kill %+v", r)
	}

	if err := m.Restart(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a read-only answer after the restart", func() bool { return readOnlyIs(t, m, true) })
	appWriteRefused(t, m)
	// The sidecar sees it up and read-only, and neither kills nor unfences it.
	waitFor(t, "the sidecar to see mysqld again", func() bool { r := s.Report(); return r.MySQLdUp && !r.Writable })
	if !m.Running() || !readOnlyIs(t, m, true) {
		t.Fatal("the restarted server was killed or unfenced")
	}
	if got := metric(t, s, `failoverd_sidecar_fences_total{reason="killed-mysqld"}`); got != "1" {
		t.Errorf("fences{killed-mysqld} = %s after the restart", got)
	}
}
