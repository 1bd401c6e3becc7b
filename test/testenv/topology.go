package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// ReplicateFrom makes replica a GTID replica of source: SET GLOBAL
// read_only=ON, then on MariaDB CHANGE MASTER TO ...
// MASTER_USE_GTID=slave_pos, on MySQL CHANGE REPLICATION SOURCE TO ...
// SOURCE_AUTO_POSITION=1, SOURCE_SSL=1 (caching_sha2_password; mysqld makes
// its own certificates), both with connect retry 1 s and heartbeat 0.25 s
// (what failoverd sets at its default 500 ms poll interval); START
// REPLICA; then waits until the IO thread runs.
func ReplicateFrom(t T, replica, source *Server) {
	t.Helper()
	ReplicateFromAddr(t, replica, source.Host, source.Port)
}

// ReplicateFromAddr is ReplicateFrom for any address, e.g. a Proxy's
// Host()/Port() standing between the replica and its source.
func ReplicateFromAddr(t T, replica *Server, host string, port int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := replicateFrom(ctx, t, replica, host, port); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

func replicateFrom(ctx context.Context, t T, replica *Server, host string, port int) error {
	db := replica.AdminDB(t)
	_, _ = db.ExecContext(ctx, "STOP REPLICA")
	change := fmt.Sprintf("CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%d, MASTER_USER=%s, MASTER_PASSWORD=%s, "+
		"MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1, MASTER_HEARTBEAT_PERIOD=0.25",
		sqlQuote(host), port, sqlQuote(ReplUser), sqlQuote(ReplPassword))
	if replica.Engine == MySQL {
		change = fmt.Sprintf("CHANGE REPLICATION SOURCE TO SOURCE_HOST=%s, SOURCE_PORT=%d, SOURCE_USER=%s, SOURCE_PASSWORD=%s, "+
			"SOURCE_AUTO_POSITION=1, SOURCE_SSL=1, SOURCE_CONNECT_RETRY=1, SOURCE_HEARTBEAT_PERIOD=0.25, "+
			// As an operator following MySQL 8.0's default: 8.4's 10
			// attempts (1 s apart here) would end every replica's IO thread
			// 10 s into an outage.
			"SOURCE_RETRY_COUNT=86400",
			sqlQuote(host), port, sqlQuote(ReplUser), sqlQuote(ReplPassword))
	}
	stmts := []string{"SET GLOBAL read_only=ON", change, "START REPLICA"}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("replicate %s from %s:%d: %s: %w", replica.Name, host, port, q, err)
		}
	}
	var st map[string]string
	for {
		var err error
		st, err = replicaStatus(ctx, db)
		if err == nil && st["Slave_IO_Running"] == "Yes" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replicate %s from %s:%d: IO thread not running: %w (Slave_IO_Running=%q Last_IO_Error=%q, query error %v)",
				replica.Name, host, port, ctx.Err(), st["Slave_IO_Running"], st["Last_IO_Error"], err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TopologyOptions configures StartTopology.
type TopologyOptions struct {
	// Engine of every site; required (ForEachEngine gives one per subtest).
	Engine Engine
	// SemiSync enables semi-sync on every site (source and replica sides).
	SemiSync bool
}

// Topology is a failover group of one engine started by StartTopology.
type Topology struct {
	// Engine of every site.
	Engine Engine
	// Sites[0] is the source the others replicate from. Every site starts
	// read-only, Sites[0] included: the test makes the primary writable.
	// Site i is named "site<i>".
	Sites []*Server
}

// StartTopology starts n sites in parallel: Sites[0] the source, the others
// GTID replicas of it (slave_net_timeout=3, heartbeat 0.25 s, connect retry
// 1 s, so a dead primary is noticed fast). Every site is read-only, as
// production sites start (docs/design.md, "Start read-only"), so the group
// has no writable primary yet: make Sites[0] writable with mysqlctl's
// Instance.Promote — promote.Site in package test/testenv/promote — or let
// the daemon under test do it. Primary and WaitReplicated need that writable
// site.
func StartTopology(t T, n int, opts TopologyOptions) *Topology {
	t.Helper()
	if n < 1 {
		t.Fatalf("testenv: StartTopology: n must be >= 1, got %d", n)
	}
	sites, err := startServers(t, n, func(i int) ServerOptions {
		return ServerOptions{Engine: opts.Engine, Name: fmt.Sprintf("site%d", i), SemiSync: opts.SemiSync}
	})
	if err != nil {
		t.Fatalf("testenv: start topology: %v", err)
	}
	tp := &Topology{Engine: opts.Engine, Sites: sites}
	for _, r := range sites[1:] {
		ReplicateFrom(t, r, sites[0])
	}
	return tp
}

// startServers starts n instances in parallel.
func startServers(t T, n int, opts func(i int) ServerOptions) ([]*Server, error) {
	sites := make([]*Server, n)
	errs := make([]error, n)
	all := make([]ServerOptions, n)
	for i := range n {
		all[i] = opts(i)
		if all[i].ServerID == 0 {
			all[i].ServerID = serverIDs.Add(1) // in site order, not goroutine order
		}
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { sites[i], errs[i] = startServer(t, all[i]) })
	}
	wg.Wait()
	return sites, errors.Join(errs...)
}

// Primary returns the first running, not paused site with read_only=OFF, or
// nil when there is none (so right after StartTopology, before a site was
// promoted). After a failover this is the new primary.
func (tp *Topology) Primary() *Server {
	for _, s := range tp.Sites {
		if !s.Running() || s.Paused() {
			continue
		}
		ro, err := s.readOnly()
		if err == nil && !ro {
			return s
		}
	}
	return nil
}

// Replicas returns the running sites other than Primary().
func (tp *Topology) Replicas() []*Server {
	p := tp.Primary()
	var out []*Server
	for _, s := range tp.Sites {
		if s != p && s.Running() {
			out = append(out, s)
		}
	}
	return out
}

func (m *Server) readOnly() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db, err := m.adminPool()
	if err != nil {
		return false, err
	}
	var ro int
	if err := db.QueryRowContext(ctx, "SELECT @@global.read_only").Scan(&ro); err != nil {
		return false, fmt.Errorf("read_only of %s: %w", m.Name, err)
	}
	return ro != 0, nil
}

// WaitReplicated waits until every running, not paused replica has applied
// the primary's GTIDExecuted; t.Fatalf after timeout.
func (tp *Topology) WaitReplicated(t T, timeout time.Duration) {
	t.Helper()
	p := tp.Primary()
	if p == nil {
		t.Fatalf("testenv: WaitReplicated: no writable primary among %d sites (sites start read-only: promote one with mysqlctl, e.g. promote.Site)", len(tp.Sites))
	}
	pos := p.GTIDExecuted(t)
	deadline := time.Now().Add(timeout)
	for _, s := range tp.Sites {
		if s == p || !s.Running() || s.Paused() {
			continue
		}
		if err := s.waitGTID(s.AdminDB(t), pos, deadline); err != nil {
			t.Fatalf("testenv: WaitReplicated: %s did not reach %s of primary %s: %v (replica status: %s)",
				s.Name, pos, p.Name, err, summarizeStatus(s.ReplicaStatus(t)))
		}
	}
}

// GTIDExecuted returns what the server has executed, in its engine's
// syntax: MariaDB's @@gtid_binlog_pos (the last GTID per domain), MySQL's
// @@gtid_executed (the whole set).
func (m *Server) GTIDExecuted(t T) string {
	t.Helper()
	if m.Engine == MySQL {
		return m.QueryString(t, "SELECT @@global.gtid_executed")
	}
	return m.QueryString(t, "SELECT @@global.gtid_binlog_pos")
}

// WaitGTID waits until m has applied pos (a GTIDExecuted value of its
// source); t.Fatalf after timeout.
func (m *Server) WaitGTID(t T, pos string, timeout time.Duration) {
	t.Helper()
	if err := m.waitGTID(m.AdminDB(t), pos, time.Now().Add(timeout)); err != nil {
		t.Fatalf("testenv: %s: wait for GTID %s: %v (replica status: %s)", m.Name, pos, err, summarizeStatus(m.ReplicaStatus(t)))
	}
}

// waitGTID polls MASTER_GTID_WAIT (MariaDB: 0 reached, -1 timeout) or
// WAIT_FOR_EXECUTED_GTID_SET (MySQL: 0 reached, 1 timeout) in short
// slices: one long call would outlast the DSN's readTimeout.
func (m *Server) waitGTID(db *sql.DB, pos string, deadline time.Time) error {
	wait := "SELECT MASTER_GTID_WAIT(?, 1)"
	if m.Engine == MySQL {
		wait = "SELECT WAIT_FOR_EXECUTED_GTID_SET(?, 1)"
	}
	var lastErr error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var r int
		lastErr = db.QueryRowContext(ctx, wait, pos).Scan(&r)
		cancel()
		if lastErr == nil && r == 0 {
			return nil
		}
		if lastErr != nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if lastErr != nil {
		return fmt.Errorf("timed out: %w", lastErr)
	}
	return errors.New("timed out")
}

func summarizeStatus(st map[string]string) string {
	if len(st) == 0 {
		return "not a replica"
	}
	var b strings.Builder
	for _, k := range []string{"Master_Host", "Master_Port", "Slave_IO_Running", "Slave_SQL_Running", "Last_IO_Errno", "Last_IO_Error", "Last_SQL_Errno", "Last_SQL_Error", "Gtid_IO_Pos", "Retrieved_Gtid_Set"} {
		if v, ok := st[k]; ok {
			fmt.Fprintf(&b, "%s=%q ", k, v)
		}
	}
	return strings.TrimSpace(b.String())
}
