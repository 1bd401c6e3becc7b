package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// WriteLoadTable is the table StartWriteLoad creates (as AppUser, on the
// first target that accepts it) and inserts into.
const WriteLoadTable = AppDatabase + ".load"

// WriteLoadOptions configures StartWriteLoad. Zero values pick the defaults.
type WriteLoadOptions struct {
	// Workers is the number of concurrent writers; default 1.
	Workers int
	// Interval is each worker's pause after an acknowledged insert; default 5 ms.
	Interval time.Duration
	// Timeout bounds one insert; default 2 s.
	Timeout time.Duration
	// RetryInterval is the pause after every target refused in turn; default 20 ms.
	RetryInterval time.Duration
}

// Ack is one acknowledged commit.
type Ack struct {
	ID     int64
	At     time.Time // when the commit was acknowledged to the client
	Target int       // index into the DSN list of the site that acknowledged it
}

// WriteLoad continuously inserts rows into app.load with the application
// account and records every acknowledged commit. It follows whichever
// target accepts writes: on any error (read_only's 1290, a refused or cut
// connection, a timeout) it moves to the next DSN in the list. Each attempt
// uses a fresh id, so an unacknowledged attempt that did commit is harmless.
type WriteLoad struct {
	run  string // this generator's rows in app.load
	dbs  []*sql.DB
	opts WriteLoadOptions

	nextID  atomic.Int64
	current atomic.Int64 // index of the target being written to
	errs    atomic.Int64
	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup

	mu      sync.Mutex
	acks    []Ack
	lastErr error
}

// AppDSNs returns AppUser DSNs of the sites, in order, for StartWriteLoad.
func AppDSNs(sites ...*Server) []string {
	out := make([]string, len(sites))
	for i, s := range sites {
		out[i] = s.DSN(AppUser, AppPassword)
	}
	return out
}

// StartWriteLoad creates app.load if needed on the first DSN that accepts
// it (within 30 s) and starts writing; it is stopped at t's cleanup.
func StartWriteLoad(t T, dsns []string, opts WriteLoadOptions) *WriteLoad {
	t.Helper()
	if len(dsns) == 0 {
		t.Fatalf("testenv: StartWriteLoad: no DSN")
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = 20 * time.Millisecond
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	w := &WriteLoad{run: hex.EncodeToString(rnd[:]), opts: opts, stop: make(chan struct{})}
	for _, dsn := range dsns {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatalf("testenv: StartWriteLoad: open %q: %v", dsn, err)
		}
		db.SetMaxOpenConns(opts.Workers + 1)
		w.dbs = append(w.dbs, db)
	}
	t.Cleanup(w.Stop)
	if err := w.createTable(30 * time.Second); err != nil {
		t.Fatalf("testenv: StartWriteLoad: %v", err)
	}
	for i := range opts.Workers {
		w.wg.Go(func() { w.work(i) })
	}
	return w
}

func (w *WriteLoad) createTable(timeout time.Duration) error {
	const ddl = "CREATE TABLE IF NOT EXISTS " + WriteLoadTable + ` (
		run CHAR(16) NOT NULL,
		id BIGINT NOT NULL,
		worker INT NOT NULL,
		created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
		origin INT UNSIGNED NULL,
		PRIMARY KEY (run, id)) ENGINE=InnoDB`
	deadline := time.Now().Add(timeout)
	var errs []error
	for time.Now().Before(deadline) {
		errs = errs[:0]
		for i, db := range w.dbs {
			ctx, cancel := context.WithTimeout(context.Background(), w.opts.Timeout)
			_, err := db.ExecContext(ctx, ddl)
			cancel()
			if err == nil {
				w.current.Store(int64(i))
				return nil
			}
			errs = append(errs, fmt.Errorf("target %d: %w", i, err))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("create %s: no target accepted it: %w", WriteLoadTable, errors.Join(errs...))
}

func (w *WriteLoad) work(worker int) {
	refusedInARow := 0
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		target := w.current.Load()
		id := w.nextID.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), w.opts.Timeout)
		// origin: the server_id of the server that commits the row (row
		// events carry the primary's value to the replicas), so a load
		// behind a proxy still knows which site acknowledged each write.
		_, err := w.dbs[target].ExecContext(ctx, fmt.Sprintf(
			"INSERT INTO %s (run, id, worker, origin) VALUES ('%s', %d, %d, @@server_id)", WriteLoadTable, w.run, id, worker))
		cancel()
		if err == nil {
			// Timed under the lock: two workers acknowledged at once must
			// still be recorded in the order of their timestamps.
			w.mu.Lock()
			w.acks = append(w.acks, Ack{ID: id, At: time.Now(), Target: int(target)})
			w.mu.Unlock()
			refusedInARow = 0
			w.sleep(w.opts.Interval)
			continue
		}
		w.errs.Add(1)
		w.mu.Lock()
		w.lastErr = fmt.Errorf("target %d: %w", target, err)
		w.mu.Unlock()
		// Only the first worker to see the failure moves everyone on.
		w.current.CompareAndSwap(target, (target+1)%int64(len(w.dbs)))
		refusedInARow++
		if refusedInARow >= len(w.dbs) {
			refusedInARow = 0
			w.sleep(w.opts.RetryInterval)
		}
	}
}

func (w *WriteLoad) sleep(d time.Duration) {
	select {
	case <-w.stop:
	case <-time.After(d):
	}
}

// Stop stops the writers, waits for in-flight inserts and closes the pools.
// Idempotent; also run at cleanup.
func (w *WriteLoad) Stop() {
	w.stopped.Do(func() {
		close(w.stop)
		w.wg.Wait()
		for _, db := range w.dbs {
			_ = db.Close()
		}
	})
}

// Run is this generator's value of app.load.run (several may share a table).
func (w *WriteLoad) Run() string { return w.run }

// Acked returns the ids of every acknowledged insert, ascending.
func (w *WriteLoad) Acked() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int64, len(w.acks))
	for i, a := range w.acks {
		ids[i] = a.ID
	}
	slices.Sort(ids)
	return ids
}

// Acks returns every acknowledged insert in acknowledgement order.
func (w *WriteLoad) Acks() []Ack {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acks)
}

// Errors returns how many inserts failed (refused, cut, timed out).
func (w *WriteLoad) Errors() int64 { return w.errs.Load() }

// LastError returns the most recent insert error, or nil.
func (w *WriteLoad) LastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// Target returns the index of the DSN currently written to.
func (w *WriteLoad) Target() int { return int(w.current.Load()) }

// WaitForAcks waits until at least n inserts were acknowledged in total;
// t.Fatalf after timeout.
func (w *WriteLoad) WaitForAcks(t T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		got := len(w.acks)
		w.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: write load: %d acks after %v, want %d (errors %d, last %v)", got, timeout, n, w.Errors(), w.LastError())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Missing returns the acknowledged ids absent from app.load on db (any
// account that can read app.load, e.g. a site's AdminDB), ascending.
// Call Stop first, or ids acknowledged after the query count as missing.
func (w *WriteLoad) Missing(t T, db *sql.DB) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT id FROM "+WriteLoadTable+" WHERE run = ?", w.run)
	if err != nil {
		t.Fatalf("testenv: write load: read %s: %v", WriteLoadTable, err)
	}
	defer rows.Close()
	present := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatalf("testenv: write load: scan: %v", err)
		}
		present[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("testenv: write load: read %s: %v", WriteLoadTable, err)
	}
	var missing []int64
	for _, id := range w.Acked() {
		if !present[id] {
			missing = append(missing, id)
		}
	}
	return missing
}

// Origins returns, for every row of this generator on db, the server_id
// of the server that committed it (app.load.origin): behind a proxy, where
// every Ack's Target is the proxy, it says which site acknowledged a write.
func (w *WriteLoad) Origins(t T, db *sql.DB) map[int64]uint32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT id, COALESCE(origin, 0) FROM "+WriteLoadTable+" WHERE run = ?", w.run)
	if err != nil {
		t.Fatalf("testenv: write load: read %s origins: %v", WriteLoadTable, err)
	}
	defer rows.Close()
	out := map[int64]uint32{}
	for rows.Next() {
		var id int64
		var origin uint32
		if err := rows.Scan(&id, &origin); err != nil {
			t.Fatalf("testenv: write load: scan: %v", err)
		}
		out[id] = origin
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("testenv: write load: read %s origins: %v", WriteLoadTable, err)
	}
	return out
}
