package testenv

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"
)

// openVia opens an admin pool to m through addr; closed at t's cleanup.
func openVia(t *testing.T, addr string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", SiteDSN(addr, AdminUser, AdminPassword))
	if err != nil {
		t.Fatalf("open via %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// pingFresh opens a brand-new connection through addr and pings it.
func pingFresh(t *testing.T, addr string, timeout time.Duration) error {
	t.Helper()
	db := openVia(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return db.PingContext(ctx)
}

// TestProxyCutAndRestore is acceptance test 3, first part.
func TestProxyCutAndRestore(t *testing.T) {
	m := sharedMariaDB(t)
	p := NewProxy(t, "daemon-to-site", m.Addr())
	if p.Addr() == m.Addr() || p.Host() != "127.0.0.1" || p.Port() == 0 {
		t.Fatalf("proxy address %q (host %q port %d) for upstream %s", p.Addr(), p.Host(), p.Port(), m.Addr())
	}
	db := openVia(t, p.Addr())
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("connect through proxy: %v", err)
	}
	defer conn.Close()
	if err := conn.PingContext(ctx); err != nil {
		t.Fatalf("ping through proxy: %v", err)
	}

	p.Cut()
	if err := conn.PingContext(ctx); err == nil {
		t.Fatalf("existing connection still works after Cut")
	}
	start := time.Now()
	if err := pingFresh(t, p.Addr(), 5*time.Second); err == nil {
		t.Fatalf("new connection succeeded after Cut")
	}
	// A cut link fails fast (refused), unlike a blackhole.
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("new connection after Cut failed only after %v, want a prompt refusal", d)
	}

	p.Restore()
	if err := pingFresh(t, p.Addr(), 5*time.Second); err != nil {
		t.Fatalf("new connection after Restore: %v", err)
	}
}

// TestProxyBlackholeAndLatency is acceptance test 3, second part.
func TestProxyBlackholeAndLatency(t *testing.T) {
	m := sharedMariaDB(t)
	p := NewProxy(t, "sidecar-to-site", m.Addr())
	db := openVia(t, p.Addr())
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("connect through proxy: %v", err)
	}
	defer conn.Close()

	p.Blackhole()
	const wait = 700 * time.Millisecond
	qctx, cancel := context.WithTimeout(ctx, wait)
	start := time.Now()
	var one int
	err = conn.QueryRowContext(qctx, "SELECT 1").Scan(&one)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read through blackhole: err %v, want context.DeadlineExceeded", err)
	}
	// A blackhole hangs instead of failing: the error came from our deadline.
	if d := time.Since(start); d < wait-50*time.Millisecond {
		t.Fatalf("read through blackhole failed after %v, before the %v deadline", d, wait)
	}
	// New connections are accepted but the server greeting never arrives.
	if err := pingFresh(t, p.Addr(), wait); err == nil {
		t.Fatalf("new connection through blackhole succeeded")
	}

	p.Restore()
	if err := pingFresh(t, p.Addr(), 5*time.Second); err != nil {
		t.Fatalf("after Restore: %v", err)
	}

	const lat = 100 * time.Millisecond
	p.Latency(lat)
	db2 := openVia(t, p.Addr())
	if err := db2.Ping(); err != nil { // connect outside the measurement
		t.Fatalf("ping with latency: %v", err)
	}
	start = time.Now()
	if err := db2.QueryRow("SELECT 1").Scan(&one); err != nil {
		t.Fatalf("query with latency: %v", err)
	}
	// Lower bound only: the toxic guarantees at least lat each way.
	if d := time.Since(start); d < 2*lat {
		t.Fatalf("round trip with %v latency each way took %v, want >= %v", lat, d, 2*lat)
	}
	p.Restore()
	if err := pingFresh(t, p.Addr(), 5*time.Second); err != nil {
		t.Fatalf("after Restore from latency: %v", err)
	}
}

// TestReplicationThroughProxy is acceptance test 3, third part: a cut
// replica→primary link stops replication, Restore resumes it.
func TestReplicationThroughProxy(t *testing.T) {
	ForEachEngine(t, testReplicationThroughProxy)
}

func testReplicationThroughProxy(t *testing.T, e Engine) {
	sites, err := startServers(t, 2, func(i int) ServerOptions { return ServerOptions{Engine: e, Name: []string{"source", "replica"}[i]} })
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	source, replica := sites[0], sites[1]
	link := NewProxy(t, "replica-to-primary", source.Addr())
	ReplicateFromAddr(t, replica, link.Host(), link.Port())
	writableForTestenvTest(t, source) // super_read_only stops the admin on MySQL

	source.Exec(t, "CREATE TABLE app.r (id INT PRIMARY KEY)")
	source.Exec(t, "INSERT INTO app.r VALUES (1)")
	replica.WaitGTID(t, source.GTIDExecuted(t), 10*time.Second)
	if got := replica.QueryString(t, "SELECT COUNT(*) FROM app.r"); got != "1" {
		t.Fatalf("replica has %s rows before the cut, want 1", got)
	}

	link.Cut()
	waitIOState(t, replica, "Connecting", 10*time.Second)
	source.Exec(t, "INSERT INTO app.r VALUES (2)")
	time.Sleep(300 * time.Millisecond) // long enough for a row to cross an open link
	if got := replica.QueryString(t, "SELECT COUNT(*) FROM app.r"); got != "1" {
		t.Fatalf("replica has %s rows while its link is cut, want 1", got)
	}

	link.Restore()
	replica.WaitGTID(t, source.GTIDExecuted(t), 20*time.Second)
	if got := replica.QueryString(t, "SELECT COUNT(*) FROM app.r"); got != "2" {
		t.Fatalf("replica has %s rows after Restore, want 2", got)
	}
	waitIOState(t, replica, "Yes", 10*time.Second)
}

func waitIOState(t *testing.T, m *Server, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := m.ReplicaStatus(t)
		if st["Slave_IO_Running"] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Slave_IO_Running never became %q in %v (%s)", m.Name, want, timeout, summarizeStatus(st))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
