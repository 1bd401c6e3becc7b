package mysqlctl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/test/testenv"
	"github.com/go-sql-driver/mysql"
)

// mysqlBasedirEnv names a MySQL 8.0.26+/8.4/9.x basedir (bin/mysqld,
// lib/plugin) for the MySQL real-server tests. Oracle MySQL cannot be
// installed on the project's machines, so this factory is kept minimal.
const mysqlBasedirEnv = "FAILOVERD_TEST_MYSQL_BASEDIR"

// TestRealMySQL runs the real-server suite against MySQL when
// FAILOVERD_TEST_MYSQL_BASEDIR is set.
func TestRealMySQL(t *testing.T) {
	basedir := os.Getenv(mysqlBasedirEnv)
	if basedir == "" {
		t.Skip("SKIP MySQL real-server tests: FAILOVERD_TEST_MYSQL_BASEDIR not set " +
			"(point it at a MySQL 8.0.26+/8.4/9.x basedir with bin/mysqld and lib/plugin)")
	}
	runSuite(t, serverFactory{
		flavor:  gtid.MySQL,
		replTLS: true, // caching_sha2_password; mysqld generates its certificates at startup
		clone:   true,
		start:   func(t *testing.T, name string) *realServer { return startMySQL(t, basedir, name) },
		raw: rawSQL{
			executed:       "SELECT @@GLOBAL.gtid_executed",
			replicaStatus:  "SHOW REPLICA STATUS",
			ioRunning:      "Replica_IO_Running",
			sqlRunning:     "Replica_SQL_Running",
			sourcePort:     "Source_Port",
			retrieved:      "Retrieved_Gtid_Set",
			stopSQLThread:  "STOP REPLICA SQL_THREAD",
			startSQLThread: "START REPLICA SQL_THREAD",
			adminWriteOn:   []string{"SET GLOBAL super_read_only = OFF"},
			adminWriteOff:  []string{"SET GLOBAL super_read_only = ON"},
		},
	})
}

var mysqlServerIDs atomic.Uint32

// startMySQL initialises a datadir with mysqld --initialize-insecure, starts
// mysqld on a free 127.0.0.1 port with GTIDs on, and creates the testenv
// accounts through the unix socket without binlogging them.
func startMySQL(t *testing.T, basedir, name string) *realServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "mysqlctl-") // short: unix socket paths are limited to ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	mysqld := filepath.Join(basedir, "bin", "mysqld")
	socket := filepath.Join(dir, "mysqld.sock")
	base := []string{"--no-defaults", "--basedir=" + basedir, "--datadir=" + filepath.Join(dir, "data")}
	if os.Geteuid() == 0 {
		base = append(base, "--user=root")
	}
	if out, err := exec.Command(mysqld, append(base, "--initialize-insecure")...).CombinedOutput(); err != nil {
		t.Fatalf("%s: mysqld --initialize-insecure: %v\n%s", name, err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	args := append(base,
		fmt.Sprintf("--port=%d", port), "--bind-address=127.0.0.1", "--socket="+socket, "--mysqlx=OFF",
		fmt.Sprintf("--server-id=%d", 100+mysqlServerIDs.Add(1)), "--log-bin=binlog",
		"--gtid-mode=ON", "--enforce-gtid-consistency=ON", "--skip-name-resolve",
		"--pid-file="+filepath.Join(dir, "mysqld.pid"), "--log-error="+filepath.Join(dir, "mysqld.err"),
		"--innodb-buffer-pool-size=64M")
	for _, p := range []string{"semisync_source.so", "semisync_replica.so", "mysql_clone.so"} {
		if _, err := os.Stat(filepath.Join(basedir, "lib", "plugin", p)); err == nil {
			args = append(args, "--plugin-load-add="+p)
		}
	}

	var mu sync.Mutex
	var done chan struct{} // closed when the current mysqld exits
	var proc *os.Process
	stop := func() {
		mu.Lock()
		p, d := proc, done
		mu.Unlock()
		if p == nil {
			return
		}
		_ = p.Signal(syscall.SIGTERM)
		select {
		case <-d:
		case <-time.After(60 * time.Second):
			_ = p.Kill()
			<-d
		}
	}
	start := func(ctx context.Context) error {
		cmd := exec.Command(mysqld, args...)
		if err := cmd.Start(); err != nil {
			return err
		}
		d := make(chan struct{})
		go func() { _ = cmd.Wait(); close(d) }()
		mu.Lock()
		proc, done = cmd.Process, d
		mu.Unlock()
		return waitMySQLSocket(ctx, socket, d)
	}
	restart := func(ctx context.Context) error { stop(); return start(ctx) }
	t.Cleanup(stop)
	if err := start(ctxFor(t, 120*time.Second)); err != nil {
		t.Fatalf("%s: start mysqld: %v (see %s)", name, err, filepath.Join(dir, "mysqld.err"))
	}
	root := rootDB(socket)
	defer root.Close()
	conn, err := root.Conn(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q := func(s string) string { r, _ := quote(s); return r }
	for _, s := range []string{
		"SET sql_log_bin = 0", // no instance starts with GTIDs of its own
		"CREATE DATABASE " + testenv.AppDatabase,
		fmt.Sprintf("CREATE USER %s@'127.0.0.1' IDENTIFIED BY %s", q(testenv.AdminUser), q(testenv.AdminPassword)),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO %s@'127.0.0.1' WITH GRANT OPTION", q(testenv.AdminUser)),
		fmt.Sprintf("CREATE USER %s@'127.0.0.1' IDENTIFIED BY %s", q(testenv.ReplUser), q(testenv.ReplPassword)),
		fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO %s@'127.0.0.1'", q(testenv.ReplUser)),
		fmt.Sprintf("CREATE USER %s@'127.0.0.1' IDENTIFIED BY %s", q(testenv.AppUser), q(testenv.AppPassword)),
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER ON %s.* TO %s@'127.0.0.1'", testenv.AppDatabase, q(testenv.AppUser)),
	} {
		if _, err := conn.ExecContext(ctxFor(t, 30*time.Second), s); err != nil {
			t.Fatalf("%s: %s: %v", name, s, err)
		}
	}
	return &realServer{name: name, host: "127.0.0.1", port: port, restart: restart}
}

// rootDB is root@localhost over the unix socket (no password after --initialize-insecure).
func rootDB(socket string) *sql.DB {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.Timeout = "root", "unix", socket, 2*time.Second
	connector, _ := mysql.NewConnector(cfg)
	return sql.OpenDB(connector)
}

// waitMySQLSocket pings root over the socket until it answers, mysqld exits or ctx ends.
func waitMySQLSocket(ctx context.Context, socket string, exited <-chan struct{}) error {
	db := rootDB(socket)
	defer db.Close()
	for {
		if err := db.PingContext(ctx); err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("mysqld exited before it was ready")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
