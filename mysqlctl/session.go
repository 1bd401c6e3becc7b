package mysqlctl

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// querier is the whole SQL surface of this package: every statement an
// Instance sends goes through exec or query as literal text (no
// placeholders), so tests can record and compare the exact SQL.
type querier interface {
	exec(ctx context.Context, stmt string) error
	query(ctx context.Context, stmt string) (*resultSet, error)
}

// resultSet is a fully read result: column names and rows of nullable text.
type resultSet struct {
	cols []string
	rows [][]sql.NullString
}

// col returns the index of the column named name (case-insensitive), or -1.
func (r *resultSet) col(name string) int {
	for i, c := range r.cols {
		if strings.EqualFold(c, name) {
			return i
		}
	}
	return -1
}

// row returns row i as a name → value view.
func (r *resultSet) row(i int) row { return row{rs: r, i: i} }

// row is one row of a resultSet, addressed by column name.
type row struct {
	rs *resultSet
	i  int
}

// get returns the first of the named columns present in the row (columns
// are renamed between flavors and versions: pass every known alias).
func (w row) get(names ...string) (sql.NullString, bool) {
	for _, n := range names {
		if c := w.rs.col(n); c >= 0 {
			return w.rs.rows[w.i][c], true
		}
	}
	return sql.NullString{}, false
}

// str returns the named column as a string ("" for NULL or missing).
func (w row) str(names ...string) string {
	v, _ := w.get(names...)
	return v.String
}

// boolean reads 1/0, ON/OFF, Yes/No; MariaDB 11's read_only enum values
// other than OFF also count as true.
func (w row) boolean(names ...string) bool { return parseBool(w.str(names...)) }

func parseBool(s string) bool {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "", "0", "OFF", "NO", "FALSE":
		return false
	}
	return true
}

// integer returns the named column as int64 (0 for NULL, missing or junk).
func (w row) integer(names ...string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(w.str(names...)), 10, 64)
	return n
}

// dbQuerier runs statements on a *sql.DB or *sql.Conn.
type dbQuerier struct {
	db interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	}
}

func (q dbQuerier) exec(ctx context.Context, stmt string) error {
	_, err := q.db.ExecContext(ctx, stmt)
	return err
}

func (q dbQuerier) query(ctx context.Context, stmt string) (*resultSet, error) {
	rows, err := q.db.QueryContext(ctx, stmt)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return readResultSet(rows)
}

// readResultSet reads the current result set of rows to its end.
func readResultSet(rows *sql.Rows) (*resultSet, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	rs := &resultSet{cols: cols}
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		rs.rows = append(rs.rows, vals)
	}
	return rs, rows.Err()
}

// batchQuerier is a querier that can also send several queries in one
// request (one round trip) and read one result set per statement.
type batchQuerier interface {
	querier
	// queryBatch returns the result sets read before the first error: a
	// failing statement returns as many as the statements before it.
	queryBatch(ctx context.Context, stmts ...string) ([]*resultSet, error)
}

// statusOnlyQuerier runs on sessions opened with multi-statement text
// allowed (Options.StatusOnly) and sends nothing but the fixed statements
// in allowed: no exec, no statement built from data. Guard: on such a
// session a quoting mistake in a built statement could smuggle in a
// second statement; here no built statement is ever sent.
type statusOnlyQuerier struct {
	db      *sql.DB
	allowed map[string]bool
}

func (q statusOnlyQuerier) check(stmt string) error {
	if !q.allowed[stmt] {
		verb, _, _ := strings.Cut(stmt, " ")
		return fmt.Errorf("%w: a status-only instance runs only its status statements, not this %s", ErrInvalidArgument, verb)
	}
	return nil
}

func (q statusOnlyQuerier) exec(ctx context.Context, stmt string) error {
	if err := q.check(stmt); err != nil {
		return err
	}
	return dbQuerier{q.db}.exec(ctx, stmt)
}

func (q statusOnlyQuerier) query(ctx context.Context, stmt string) (*resultSet, error) {
	if err := q.check(stmt); err != nil {
		return nil, err
	}
	return dbQuerier{q.db}.query(ctx, stmt)
}

func (q statusOnlyQuerier) queryBatch(ctx context.Context, stmts ...string) ([]*resultSet, error) {
	for _, s := range stmts {
		if err := q.check(s); err != nil {
			return nil, err
		}
		if strings.Contains(s, ";") {
			// It would shift every result set after it.
			return nil, fmt.Errorf("%w: a batched statement holds a semicolon", ErrInvalidArgument)
		}
	}
	rows, err := q.db.QueryContext(ctx, strings.Join(stmts, "; "))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*resultSet
	for {
		rs, err := readResultSet(rows)
		if err != nil {
			return out, err
		}
		out = append(out, rs)
		if len(out) == len(stmts) {
			return out, nil
		}
		if !rows.NextResultSet() {
			if err := rows.Err(); err != nil {
				return out, err
			}
			return out, fmt.Errorf("%d result sets for %d statements", len(out), len(stmts))
		}
	}
}

// quote returns s as an SQL string literal. Every session of an Instance
// runs with sql_mode=NO_BACKSLASH_ESCAPES (set by Open), so doubling the
// single quote is the complete escape and a backslash is an ordinary
// character. NUL bytes and invalid UTF-8 are refused.
func quote(s string) (string, error) {
	if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
		return "", fmt.Errorf("%w: string is not valid UTF-8 text", ErrInvalidArgument)
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'", nil
}

// connIDs remembers the server connection ids (CONNECTION_ID()) of every
// session this Instance's pool opened, so KillClientConnections spares them.
type connIDs struct {
	mu  sync.Mutex
	ids map[uint64]struct{}
}

func (c *connIDs) add(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[uint64]struct{}{}
	}
	c.ids[id] = struct{}{}
}

func (c *connIDs) has(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.ids[id]
	return ok
}

// trackingConnector wraps the driver's connector and records the
// connection id of each new session.
type trackingConnector struct {
	driver.Connector
	ids *connIDs
}

// Connect opens a session and records its CONNECTION_ID().
func (c trackingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	id, err := sessionID(ctx, conn)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("read connection id: %w", err)
	}
	c.ids.add(id)
	return conn, nil
}

// sessionID runs SELECT CONNECTION_ID() on a raw driver connection.
func sessionID(ctx context.Context, conn driver.Conn) (uint64, error) {
	qc, ok := conn.(driver.QueryerContext)
	if !ok {
		return 0, errors.New("driver connection cannot run queries")
	}
	rows, err := qc.QueryContext(ctx, "SELECT CONNECTION_ID()", nil)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if err == io.EOF {
			return 0, errors.New("no row")
		}
		return 0, err
	}
	switch v := dest[0].(type) {
	case int64:
		return uint64(v), nil
	case uint64:
		return v, nil
	case []byte:
		return strconv.ParseUint(string(v), 10, 64)
	case string:
		return strconv.ParseUint(v, 10, 64)
	}
	return 0, fmt.Errorf("unexpected CONNECTION_ID() type %T", dest[0])
}
