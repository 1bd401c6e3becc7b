package mysqlctl

import (
	"context"
	"crypto/tls"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Defaults for Options fields left zero.
const (
	DefaultDialTimeout  = 2 * time.Second
	DefaultReadTimeout  = 5 * time.Second
	DefaultWriteTimeout = 5 * time.Second
	DefaultMaxOpenConns = 2
)

// minReadTimeout keeps the driver's read timeout above the longest
// server-side wait a single statement does (WaitRelayDrained polls in
// slices of at most drainSlice).
const minReadTimeout = 2 * time.Second

// drainSlice is the longest single WAIT_FOR_EXECUTED_GTID_SET /
// MASTER_GTID_WAIT call; between slices the replica status is re-read so
// an SQL thread error ends the wait early.
const drainSlice = time.Second

// detectQuery is the only statement sent before the flavor is known; both
// flavors answer it identically.
const detectQuery = "SELECT @@GLOBAL.version AS version, @@GLOBAL.version_comment AS version_comment"

// Options configures Open. Credentials come from the caller (read from
// files by the configuration layer); they never appear in errors or logs.
type Options struct {
	// Addr is "host:port" of the server.
	Addr string
	// User and Password of the daemon's admin account (see the package doc
	// for the grants it needs).
	User, Password string
	// TLS, when set, is used for every session. Otherwise TLSConfigName
	// selects a config registered with mysql.RegisterTLSConfig or one of
	// the driver's names "true", "skip-verify", "preferred"; empty = no TLS.
	TLS           *tls.Config
	TLSConfigName string
	// DialTimeout, ReadTimeout and WriteTimeout bound each network step
	// (defaults 2s, 5s, 5s). ReadTimeout must be at least 2s because
	// WaitRelayDrained waits up to 1s per statement on the server.
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// MaxOpenConns caps the pool (default 2): the daemon needs one session
	// for its observer and one for an action.
	MaxOpenConns int
	// Logger receives operation and driver logs; default slog.Default().
	Logger *slog.Logger
	// StatusOnly opens an Instance that serves Status and GroupStatus and
	// nothing else (a poller's prober): its sessions accept multi-statement
	// text, so Status reads the variables and the replica status in one
	// round trip instead of two; every other operation fails with
	// ErrInvalidArgument.
	StatusOnly bool
}

// Instance controls one MySQL or MariaDB server through a small pool of
// admin sessions. It is safe for concurrent use.
type Instance struct {
	addr   string
	flavor Flavor
	d      dialect
	q      querier
	db     *sql.DB // nil in unit tests
	log    *slog.Logger
	ids    *connIDs
	user   string
	secret string // our own password, redacted from every error

	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	// openLong opens one session without a read timeout, for CLONE (which
	// sends nothing back until it finishes).
	openLong func(ctx context.Context) (querier, func() error, error)
}

// Open connects to the server, detects its flavor and returns an Instance.
// It returns an error wrapping ErrUnsupportedVersion for servers older than
// MySQL 8.0.23 or MariaDB 10.11. The password never appears in the error.
func Open(ctx context.Context, opts Options) (*Instance, error) {
	inst, err := open(ctx, opts)
	if err != nil {
		return nil, redact(err, opts.Password)
	}
	return inst, nil
}

func open(ctx context.Context, opts Options) (*Instance, error) {
	if opts.Addr == "" || opts.User == "" {
		return nil, fmt.Errorf("open: %w: Addr and User are required", ErrInvalidArgument)
	}
	if opts.ReadTimeout != 0 && opts.ReadTimeout < minReadTimeout {
		return nil, fmt.Errorf("open %s: %w: ReadTimeout %v is below %v", opts.Addr, ErrInvalidArgument, opts.ReadTimeout, minReadTimeout)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	cfg := driverConfig(opts, logger)

	pool, err := newPool(cfg, max(1, orDefault(opts.MaxOpenConns, DefaultMaxOpenConns)), &connIDs{})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", opts.Addr, err)
	}
	inst := &Instance{
		addr:   opts.Addr,
		q:      dbQuerier{pool.db},
		db:     pool.db,
		log:    logger,
		ids:    pool.ids,
		user:   opts.User,
		secret: opts.Password,
		now:    time.Now,
		sleep:  sleepCtx,
	}
	inst.openLong = func(ctx context.Context) (querier, func() error, error) {
		long := cfg.Clone()
		long.ReadTimeout = 0                 // bounded by ctx instead
		p, err := newPool(long, 1, pool.ids) // spared by KillClientConnections like the pool
		if err != nil {
			return nil, nil, err
		}
		conn, err := p.db.Conn(ctx)
		if err != nil {
			_ = p.db.Close()
			return nil, nil, err
		}
		return dbQuerier{conn}, func() error { _ = conn.Close(); return p.db.Close() }, nil
	}
	rs, err := inst.q.query(ctx, detectQuery)
	if err == nil && len(rs.rows) == 0 {
		err = fmt.Errorf("no row")
	}
	if err != nil {
		_ = pool.db.Close()
		return nil, fmt.Errorf("open %s: detect flavor: %w", opts.Addr, err)
	}
	r := rs.row(0)
	f, err := ParseFlavor(r.str("version"), r.str("version_comment"))
	if err != nil {
		_ = pool.db.Close()
		return nil, fmt.Errorf("open %s: %w", opts.Addr, err)
	}
	inst.flavor, inst.d = f, newDialect(f)
	if opts.StatusOnly {
		inst.q = statusOnlyQuerier{db: pool.db, allowed: statusOnlyAllowed(inst.d)}
		inst.openLong = func(context.Context) (querier, func() error, error) {
			return nil, nil, fmt.Errorf("%w: a status-only instance opens no other session", ErrInvalidArgument)
		}
	}
	logger.Debug("mysqlctl: opened", "addr", opts.Addr, "flavor", f.String())
	return inst, nil
}

// statusOnlyAllowed is every statement Status and GroupStatus may send: all
// a status-only instance runs.
func statusOnlyAllowed(d dialect) map[string]bool {
	return map[string]bool{d.batchStatusQuery: true, d.semiStatusQuery: d.semiStatusQuery != "",
		d.replicaStatusQuery: true, d.workerErrorQuery: d.workerErrorQuery != "", d.ackWaitsQuery: d.ackWaitsQuery != "",
		d.groupStatusQuery: d.groupStatusQuery != ""}
}

// driverConfig is the driver's configuration for opts.
func driverConfig(opts Options, logger *slog.Logger) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User = opts.User
	cfg.Passwd = opts.Password
	cfg.Net = "tcp"
	cfg.Addr = opts.Addr
	cfg.Timeout = orDefault(opts.DialTimeout, DefaultDialTimeout)
	cfg.ReadTimeout = orDefault(opts.ReadTimeout, DefaultReadTimeout)
	cfg.WriteTimeout = orDefault(opts.WriteTimeout, DefaultWriteTimeout)
	cfg.TLS = opts.TLS // the driver works on its own copy (see TestOpenDoesNotModifyTheCallersTLSConfig)
	if opts.TLS == nil {
		cfg.TLSConfig = opts.TLSConfigName
	}
	// Every literal this package builds relies on NO_BACKSLASH_ESCAPES (see
	// quote): without it a backslash in a password could end the literal.
	cfg.Params = map[string]string{"sql_mode": "'NO_BACKSLASH_ESCAPES'"}
	cfg.MultiStatements = opts.StatusOnly
	cfg.Logger = driverLogger{logger.With("addr", opts.Addr)}
	return cfg
}

type pool struct {
	db  *sql.DB
	ids *connIDs
}

func newPool(cfg *mysql.Config, size int, ids *connIDs) (pool, error) {
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return pool{}, err
	}
	db := sql.OpenDB(trackingConnector{Connector: connector, ids: ids})
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
	db.SetConnMaxIdleTime(time.Minute)
	return pool{db: db, ids: ids}, nil
}

// newTestInstance builds an Instance over any querier (unit tests).
func newTestInstance(f Flavor, q querier) *Instance {
	return &Instance{
		addr:   "test:3306",
		flavor: f,
		d:      newDialect(f),
		q:      q,
		log:    slog.New(slog.DiscardHandler),
		ids:    &connIDs{},
		user:   "failoverd",
		now:    time.Now,
		sleep:  sleepCtx,
		openLong: func(context.Context) (querier, func() error, error) {
			return q, func() error { return nil }, nil
		},
	}
}

// Close closes the pool.
func (i *Instance) Close() error {
	if i.db == nil {
		return nil
	}
	return i.db.Close()
}

// Flavor returns the flavor detected by Open.
func (i *Instance) Flavor() Flavor { return i.flavor }

// Addr returns the server address given to Open.
func (i *Instance) Addr() string { return i.addr }

// fail wraps err with the operation and step, redacting our password and
// any extra secrets from its text.
func (i *Instance) fail(op, step string, err error, secrets ...string) error {
	err = redact(err, append(secrets, i.secret)...)
	if step == "" {
		return fmt.Errorf("%s %s: %w", op, i.addr, err)
	}
	return fmt.Errorf("%s %s: %s: %w", op, i.addr, step, err)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// driverLogger sends go-sql-driver/mysql's own messages to slog.
type driverLogger struct{ l *slog.Logger }

// Print implements mysql.Logger.
func (d driverLogger) Print(v ...any) { d.l.Warn("mysqlctl: driver", "detail", fmt.Sprint(v...)) }
