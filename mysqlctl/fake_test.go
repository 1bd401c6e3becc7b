package mysqlctl

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// fakeDB is a recording querier: it logs every statement and answers from
// rules matched by statement prefix. Each rule answers with its responses in
// order and repeats the last one. Unmatched execs succeed; unmatched
// queries return an empty result.
type fakeDB struct {
	stmts []string
	rules []*fakeRule
	// before runs for every statement before it is answered (e.g. to
	// advance a fake clock).
	before func(stmt string)
}

type fakeRule struct {
	prefix    string
	responses []fakeResponse
	used      int
}

type fakeResponse struct {
	rs  *resultSet
	err error
}

// on adds a rule for statements starting with prefix.
func (f *fakeDB) on(prefix string, responses ...fakeResponse) *fakeDB {
	f.rules = append(f.rules, &fakeRule{prefix: prefix, responses: responses})
	return f
}

func (f *fakeDB) answer(stmt string) fakeResponse {
	f.stmts = append(f.stmts, stmt)
	if f.before != nil {
		f.before(stmt)
	}
	for _, r := range f.rules {
		if strings.HasPrefix(stmt, r.prefix) && len(r.responses) > 0 {
			resp := r.responses[min(r.used, len(r.responses)-1)]
			r.used++
			return resp
		}
	}
	return fakeResponse{rs: &resultSet{}}
}

func (f *fakeDB) exec(_ context.Context, stmt string) error { return f.answer(stmt).err }

func (f *fakeDB) query(_ context.Context, stmt string) (*resultSet, error) {
	resp := f.answer(stmt)
	if resp.err != nil {
		return nil, resp.err
	}
	if resp.rs == nil {
		return &resultSet{}, nil
	}
	return resp.rs, nil
}

// table builds a result: cols, then rows of values where "NULL" is NULL.
func table(cols ...string) *tableBuilder { return &tableBuilder{rs: &resultSet{cols: cols}} }

type tableBuilder struct{ rs *resultSet }

func (b *tableBuilder) row(vals ...string) *tableBuilder {
	r := make([]sql.NullString, len(vals))
	for i, v := range vals {
		r[i] = sql.NullString{String: v, Valid: v != "NULL"}
	}
	b.rs.rows = append(b.rs.rows, r)
	return b
}

func (b *tableBuilder) ok() fakeResponse { return fakeResponse{rs: b.rs} }

func fails(err error) fakeResponse { return fakeResponse{err: err} }

// Flavors used across the unit tests.
var (
	mysql80 = mustFlavor("8.0.36", "MySQL Community Server - GPL")
	mysql84 = mustFlavor("8.4.2", "MySQL Community Server - GPL")
	mysql25 = mustFlavor("8.0.25", "MySQL Community Server - GPL")
	mariadb = mustFlavor("10.11.19-MariaDB-0+deb12u1-log", "Debian 12")
)

func mustFlavor(v, c string) Flavor {
	f, err := ParseFlavor(v, c)
	if err != nil {
		panic(err)
	}
	return f
}

// fakeClock is a manual clock for Instance.now.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// newFake returns an Instance over a fresh fakeDB with a fake clock and a
// sleep that only advances that clock.
func newFake(f Flavor) (*Instance, *fakeDB, *fakeClock) {
	db := &fakeDB{}
	clock := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	inst := newTestInstance(f, db)
	inst.now = clock.now
	inst.sleep = func(ctx context.Context, d time.Duration) error {
		clock.advance(d)
		return ctx.Err()
	}
	return inst, db, clock
}
