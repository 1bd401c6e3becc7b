package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/failoverd/failoverd/deploy/accounts"
)

// Accounts every server instance gets, on both engines (created through the
// unix socket; AdminUser and AppUser as 'user'@'127.0.0.1' and
// 'user'@'localhost', DaemonUser and ReplUser as 'user'@'%' exactly as
// deploy/accounts documents them for users).
const (
	// AdminUser is the harness's own administrator, never the code under
	// test's: ALL PRIVILEGES ON *.* WITH GRANT OPTION (incl. READ_ONLY ADMIN
	// on MariaDB, SYSTEM_VARIABLES_ADMIN, CLONE_ADMIN and BACKUP_ADMIN on
	// MySQL). Tests use it to set up and inspect sites behind the product's back.
	AdminUser, AdminPassword = "harness", "harness-admin-pw"
	// DaemonUser is failoverd's account with exactly the least privileges
	// deploy/accounts grants (the daemon's and the sidecar's
	// credentials.admin in the e2e suite).
	DaemonUser, DaemonPassword = accounts.DaemonUser, "failoverd-daemon-pw"
	// SidecarUser is the documented sidecar account (credentials.sidecar
	// in the e2e suite): status, fence, kill sessions, lift its own fence.
	SidecarUser, SidecarPassword = accounts.SidecarUser, "failoverd-sidecar-pw"
	// ReplUser is the documented replication account (REPLICATION SLAVE only).
	ReplUser, ReplPassword = accounts.ReplicationUser, "repl-pw"
	// AppUser holds SELECT,INSERT,UPDATE,DELETE,CREATE,DROP,INDEX,ALTER ON app.* only:
	// no READ_ONLY ADMIN (MariaDB) or SUPER/CONNECTION_ADMIN (MySQL), so read_only=ON blocks it.
	AppUser, AppPassword = "app", "app-pw"
	// AppDatabase is the application schema AppUser works in.
	AppDatabase = "app"
)

// ServerOptions configures StartServer, StartMariaDB and StartMySQL.
type ServerOptions struct {
	// Engine is the server to start; StartServer requires it (StartMariaDB
	// and StartMySQL set it).
	Engine Engine
	// Name labels the instance in logs and errors; defaults to the engine's name.
	Name string
	// ServerID is the server_id; 0 allocates one unique in this process.
	ServerID uint32
	// SemiSync starts with both semi-sync sides enabled: MariaDB's built-in
	// rpl_semi_sync_master_enabled / rpl_semi_sync_slave_enabled, MySQL's
	// rpl_semi_sync_source_enabled / rpl_semi_sync_replica_enabled (its
	// semisync plugins are always loaded).
	SemiSync bool
	// ExtraArgs are appended to the server's command line (later flags win),
	// except that read-only cannot be changed: --read-only=ON (and on MySQL
	// --super-read-only=ON) always comes last (see StartServer).
	ExtraArgs []string

	// netns starts the server in that network namespace (nil: the
	// machine's); its SQL port is then linked to the same port on the
	// machine's 127.0.0.1, for good (sqlLink), so Addr works unchanged.
	netns *netns
}

// Server is one running (or stopped) mariadbd or mysqld started by
// StartServer. Its helpers (Exec, QueryString, ReplicaStatus, GTIDExecuted,
// WaitGTID, ReplicateFrom) speak the engine's own SQL.
type Server struct {
	Engine   Engine // MariaDB or MySQL
	Name     string // from ServerOptions.Name
	ServerID uint32 // server_id, unique in this process
	Host     string // always "127.0.0.1"
	Port     int    // TCP port, kept across Restart
	Socket   string // unix socket; root@localhost logs in here without a password
	DataDir  string // datadir, kept across Restart, removed at cleanup

	dir    string
	errLog string
	bin    string // the executable: mariadbd, or the MySQL root's loader named mysqld
	args   []string

	ns      *netns // the network namespace it runs in (nil: the machine's)
	sqlLink *link  // Addr on the machine's loopback → the server in ns

	mu    sync.Mutex
	proc  *process
	pools map[string]*sql.DB
}

// serverIDs allocates server ids unique within this process.
var serverIDs atomic.Uint32

// mariadbBaseArgs are the mariadbd flags shared by the template build and
// every instance. --no-defaults must come first.
func mariadbBaseArgs(datadir string) []string {
	return []string{
		"--no-defaults",
		"--datadir=" + datadir,
		"--user=root",
		"--innodb-buffer-pool-size=32M",
		"--innodb-log-file-size=8M",
		"--performance-schema=OFF",
		"--skip-name-resolve",
	}
}

// StartServer starts a fresh server of opts.Engine on a free 127.0.0.1
// port: its own datadir (copied from a cached per-engine template that
// already holds the accounts), its own tmpdir, binlog with GTIDs (MariaDB:
// gtid_strict_mode; MySQL: gtid_mode=ON, enforce_gtid_consistency,
// skip_replica_start), replica updates logged, a replica net timeout of 3 s,
// a server id unique in this process. Everything is removed at t's cleanup
// and the process is recorded for scripts/leftovers.
//
// The server starts read-only (--read-only=ON, and --super-read-only=ON on
// MySQL), on every start including Restart, like a production site must
// (docs/design.md, "Start read-only"): the code under test makes a site
// writable, never the harness. A test that needs a writable site calls
// mysqlctl's Instance.Promote, e.g. through package test/testenv/promote.
// AdminUser can still write on MariaDB (READ_ONLY ADMIN) but not on MySQL
// (super_read_only blocks it too); AppUser cannot until the site is promoted.
func StartServer(t T, opts ServerOptions) *Server {
	t.Helper()
	skipIfShort(t)
	m, err := startServer(t, opts)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return m
}

// StartMariaDB is StartServer with Engine MariaDB.
func StartMariaDB(t T, opts ServerOptions) *Server {
	t.Helper()
	opts.Engine = MariaDB
	return StartServer(t, opts)
}

// StartMySQL is StartServer with Engine MySQL.
func StartMySQL(t T, opts ServerOptions) *Server {
	t.Helper()
	opts.Engine = MySQL
	return StartServer(t, opts)
}

// startServer is StartServer without Fatalf, safe from any goroutine.
func startServer(t T, opts ServerOptions) (*Server, error) {
	if !opts.Engine.Valid() {
		return nil, fmt.Errorf("start server %q: ServerOptions.Engine is %q: set testenv.MariaDB or testenv.MySQL (ForEachEngine runs a test on each)", opts.Name, opts.Engine)
	}
	if opts.Name == "" {
		opts.Name = string(opts.Engine)
	}
	if opts.ServerID == 0 {
		opts.ServerID = serverIDs.Add(1)
	}
	what := fmt.Sprintf("start %s %s", opts.Engine, opts.Name)
	var (
		tmpl string
		bin  string
		err  error
	)
	switch opts.Engine {
	case MySQL:
		tmpl, err = mysqlTemplate()
		if err == nil {
			bin, err = mysqldLauncher()
		}
	default:
		tmpl, err = mariadbTemplate()
		bin = "mariadbd"
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	dir, err := newRunDir()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	m := &Server{
		Engine:   opts.Engine,
		Name:     opts.Name,
		ServerID: opts.ServerID,
		Host:     "127.0.0.1",
		Socket:   filepath.Join(dir, "mysqld.sock"),
		DataDir:  filepath.Join(dir, "data"),
		dir:      dir,
		errLog:   filepath.Join(dir, programName(opts.Engine)+".err"),
		bin:      bin,
		ns:       opts.netns,
		pools:    map[string]*sql.DB{},
	}
	t.Cleanup(m.cleanup)
	if err := copyTree(tmpl, m.DataDir); err != nil {
		return nil, fmt.Errorf("%s: copy template: %w", what, err)
	}
	// A tmpdir of its own: servers sharing /tmp were seen failing each
	// other's status reads mid-query ("Error on delete of
	// '/tmp/#sql-temptable…'") while another server started.
	tmpDir := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmpDir, 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	for attempt := 1; ; attempt++ {
		port, err := pickPort()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		m.Port = port
		common := []string{
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--port=%d", port),
			"--socket=" + m.Socket,
			"--tmpdir=" + tmpDir,
			"--pid-file=" + m.PidFile(),
			"--log-error=" + m.errLog,
			fmt.Sprintf("--server-id=%d", m.ServerID),
			"--log-bin=" + filepath.Join(m.DataDir, "binlog"),
			"--relay-log=" + filepath.Join(m.DataDir, "relay-bin"),
			// Durable against a killed process (the OS keeps the writes), not
			// against a machine crash, which these tests never simulate.
			"--innodb-flush-log-at-trx-commit=2",
			"--sync-binlog=0",
			"--open-files-limit=4096",
		}
		if opts.Engine == MySQL {
			m.args = slices.Concat(mysqlBaseArgs(m.DataDir), common, mysqlInstanceArgs(opts.SemiSync))
		} else {
			m.args = slices.Concat(mariadbBaseArgs(m.DataDir), common, mariadbInstanceArgs(opts.SemiSync))
		}
		m.args = append(m.args, opts.ExtraArgs...)
		// Last, so no ExtraArgs can start a site writable: a harness-made
		// primary would hide a daemon that never promotes.
		m.args = append(m.args, readOnlyArgs(opts.Engine)...)
		var sqlListener net.Listener
		if m.ns != nil {
			// The port is free in the fresh namespace; on the machine's
			// loopback another process may hold it: a port race as below.
			if sqlListener, err = net.Listen("tcp", m.Addr()); err != nil {
				if attempt == startAttempts {
					return nil, fmt.Errorf("%s: listen on %s for the server in its network namespace: %w", what, m.Addr(), err)
				}
				continue
			}
		}
		err = m.start(context.Background())
		if err == nil {
			if sqlListener != nil {
				addr := m.Addr()
				m.sqlLink = newLink(m.Name+" sql", sqlListener, func() (net.Conn, error) { return m.ns.dial(addr) })
				t.Cleanup(m.sqlLink.close)
			}
			return m, nil
		}
		if sqlListener != nil {
			_ = sqlListener.Close()
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		// Port race: another process bound the port between freePort and the server.
		_ = os.Remove(m.errLog)
	}
}

// programName is the engine's server program name (mariadbd, mysqld), used for the
// files in the instance's dir.
func programName(e Engine) string {
	if e == MySQL {
		return "mysqld"
	}
	return "mariadbd"
}

// mariadbInstanceArgs are MariaDB's replication flags for one instance.
func mariadbInstanceArgs(semiSync bool) []string {
	a := []string{
		"--log-slave-updates=ON",
		"--binlog-format=ROW",
		"--gtid-strict-mode=ON",
		"--slave-net-timeout=3",
	}
	if semiSync {
		a = append(a, "--rpl-semi-sync-master-enabled=ON", "--rpl-semi-sync-slave-enabled=ON")
	}
	return a
}

// readOnlyArgs start a server read-only: on MySQL super_read_only too, so
// not even the admin account writes before the code under test promotes.
func readOnlyArgs(e Engine) []string {
	if e == MySQL {
		return []string{"--read-only=ON", "--super-read-only=ON"}
	}
	return []string{"--read-only=ON"}
}

// start launches the server with m.args and waits until it answers on its socket.
func (m *Server) start(ctx context.Context) error {
	p, err := startProcessIn(m.ns, programName(m.Engine)+" "+m.Name, filepath.Join(m.dir, programName(m.Engine)+".out"), m.bin, m.args...)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := waitSocketReady(ctx, p, m.Socket); err != nil {
		_ = p.cleanup()
		log := tailFile(m.errLog, 20)
		if isPortInUseLog(log) {
			return fmt.Errorf("%w: port %d: %v", errPortTaken, m.Port, err)
		}
		return fmt.Errorf("%s on port %d: %w\n--- tail of %s ---\n%s", programName(m.Engine), m.Port, err, m.errLog, log)
	}
	return nil
}

// waitSocketReady pings root over the unix socket until it answers, the
// process exits, or ctx ends.
func waitSocketReady(ctx context.Context, p *process, socket string) error {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "unix"
	cfg.Addr = socket
	cfg.Timeout = time.Second
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return fmt.Errorf("wait ready: %w", err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	var lastErr error
	for {
		if !p.running() {
			return fmt.Errorf("exited before it was ready: %s", p.exitDescription())
		}
		if _, err := os.Stat(socket); err == nil {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			lastErr = db.PingContext(pctx)
			cancel()
			if lastErr == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last ping error: %v)", ctx.Err(), lastErr)
		case <-time.After(30 * time.Millisecond):
		}
	}
}

// cleanup kills the server, closes the pools and removes the temp dir.
func (m *Server) cleanup() {
	m.mu.Lock()
	p := m.proc
	for _, db := range m.pools {
		_ = db.Close()
	}
	m.pools = map[string]*sql.DB{}
	m.mu.Unlock()
	removeDirOnceStopped(m.dir, p)
}

// Addr returns "127.0.0.1:PORT".
func (m *Server) Addr() string { return fmt.Sprintf("%s:%d", m.Host, m.Port) }

// PidFile is the server's pid file (what a sidecar's --mysqld-pid-file
// names to SIGKILL a hung server).
func (m *Server) PidFile() string { return filepath.Join(m.dir, programName(m.Engine)+".pid") }

// ErrorLog returns the path of the server's error log.
func (m *Server) ErrorLog() string { return m.errLog }

// DSN returns a go-sql-driver/mysql DSN over TCP with timeout=2s,
// readTimeout=5s and writeTimeout=5s; database "app" for AppUser.
func (m *Server) DSN(user, password string) string {
	return SiteDSN(m.Addr(), user, password)
}

// SiteDSN is DSN for any address, e.g. a Proxy in front of a site. It serves
// both engines: on MySQL the driver fetches the server's RSA key for
// caching_sha2_password over plain TCP.
func SiteDSN(addr, user, password string) string {
	cfg := mysql.NewConfig()
	cfg.User = user
	cfg.Passwd = password
	cfg.Net = "tcp"
	cfg.Addr = addr
	cfg.Timeout = 2 * time.Second
	cfg.ReadTimeout = 5 * time.Second
	cfg.WriteTimeout = 5 * time.Second
	if user == AppUser {
		cfg.DBName = AppDatabase
	}
	return cfg.FormatDSN()
}

// AdminDB returns the instance's admin pool (one per instance, closed at the
// cleanup of the test that started it).
func (m *Server) AdminDB(t T) *sql.DB {
	t.Helper()
	return m.pool(t, AdminUser, AdminPassword)
}

// AppDB returns the instance's pool for the application account.
func (m *Server) AppDB(t T) *sql.DB {
	t.Helper()
	return m.pool(t, AppUser, AppPassword)
}

func (m *Server) pool(t T, user, password string) *sql.DB {
	t.Helper()
	db, err := m.openPool(user, password)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return db
}

func (m *Server) adminPool() (*sql.DB, error) { return m.openPool(AdminUser, AdminPassword) }

func (m *Server) openPool(user, password string) (*sql.DB, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if db, ok := m.pools[user]; ok {
		return db, nil
	}
	db, err := sql.Open("mysql", m.DSN(user, password))
	if err != nil {
		return nil, fmt.Errorf("open %s pool on %s: %w", user, m.Name, err)
	}
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(30 * time.Second)
	m.pools[user] = db
	return db, nil
}

// Exec runs query as admin; t.Fatalf on error.
func (m *Server) Exec(t T, query string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.AdminDB(t).ExecContext(ctx, query, args...); err != nil {
		t.Fatalf("testenv: %s: exec %q: %v", m.Name, query, err)
	}
}

// QueryString returns a single value as admin (e.g. "SELECT @@gtid_binlog_pos");
// NULL is returned as "". t.Fatalf on error or when there is no row.
func (m *Server) QueryString(t T, query string, args ...any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var v sql.NullString
	if err := m.AdminDB(t).QueryRowContext(ctx, query, args...).Scan(&v); err != nil {
		t.Fatalf("testenv: %s: query %q: %v", m.Name, query, err)
	}
	return v.String
}

// Grants returns every SHOW GRANTS line of user@host, joined by newlines;
// t.Fatalf on error.
func (m *Server) Grants(t T, user, host string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := m.AdminDB(t).QueryContext(ctx, "SHOW GRANTS FOR "+sqlQuote(user)+"@"+sqlQuote(host))
	if err != nil {
		t.Fatalf("testenv: %s: show grants for %s@%s: %v", m.Name, user, host, err)
	}
	defer rows.Close()
	var all []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			t.Fatalf("testenv: %s: show grants for %s@%s: %v", m.Name, user, host, err)
		}
		all = append(all, g)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("testenv: %s: show grants for %s@%s: %v", m.Name, user, host, err)
	}
	return strings.Join(all, "\n")
}

// ReplicaStatus returns SHOW REPLICA STATUS as column → value (empty when
// the instance is not a replica); t.Fatalf on error. MariaDB names the
// columns the old way (Slave_IO_Running, Master_Port, ...); on MySQL every
// Replica_*/Source_* column is also given under that old name, so a test
// reads Slave_IO_Running, Slave_SQL_Running, Master_Host, Master_Port and
// Seconds_Behind_Master on both engines.
func (m *Server) ReplicaStatus(t T) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := replicaStatus(ctx, m.AdminDB(t))
	if err != nil {
		t.Fatalf("testenv: %s: show replica status: %v", m.Name, err)
	}
	return st
}

// replicaStatus reads SHOW REPLICA STATUS (both engines accept it) into a
// map, adding MariaDB's old column names to MySQL's new ones.
func replicaStatus(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW REPLICA STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if !rows.Next() {
		return out, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	for i, c := range cols {
		out[c] = vals[i].String
	}
	for c, v := range out {
		if old := oldColumnName(c); old != c {
			if _, ok := out[old]; !ok {
				out[old] = v
			}
		}
	}
	return out, rows.Err()
}

func (m *Server) current() *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

// oldColumnName maps MySQL's SHOW REPLICA STATUS column names to MariaDB's
// (Replica_IO_Running → Slave_IO_Running, Source_Port → Master_Port,
// Seconds_Behind_Source → Seconds_Behind_Master); others are returned as is.
func oldColumnName(c string) string {
	c = strings.Replace(c, "Replica_", "Slave_", 1)
	c = strings.Replace(c, "Source_", "Master_", 1)
	return strings.Replace(c, "_Source", "_Master", 1)
}

// Stop sends SIGTERM and waits for the exit (SIGKILL after 60 s).
func (m *Server) Stop() error { return m.current().terminate(60 * time.Second) }

// Kill sends SIGKILL and waits for the exit.
func (m *Server) Kill() error { return m.current().kill() }

// Pause sends SIGSTOP: the server hangs with its connections open.
func (m *Server) Pause() error { return m.current().pause() }

// Resume sends SIGCONT after Pause.
func (m *Server) Resume() error { return m.current().resume() }

// Running reports whether the server is running (paused counts as running).
func (m *Server) Running() bool { return m.current().running() }

// Paused reports whether the server is SIGSTOPped by Pause.
func (m *Server) Paused() bool {
	p := m.current()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused && p.running()
}

// Restart stops the server if it runs (SIGTERM) and starts it again on the
// same datadir, port and server id; it returns once the server answers.
// Replication settings persist in the datadir; a replica resumes on its own.
func (m *Server) Restart(ctx context.Context) error {
	if p := m.current(); p.running() {
		if err := p.terminate(60 * time.Second); err != nil && !errors.Is(err, ErrNotRunning) {
			return fmt.Errorf("restart %s: %w", m.Name, err)
		}
	}
	if err := m.start(ctx); err != nil {
		return fmt.Errorf("restart %s: %w", m.Name, err)
	}
	return nil
}

// String returns "name(127.0.0.1:port)".
func (m *Server) String() string { return fmt.Sprintf("%s(%s)", m.Name, m.Addr()) }

// sqlQuote quotes s as a SQL string literal (only for our own constants).
func sqlQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
