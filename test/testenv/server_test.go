package testenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// mysqlErrno returns the server error number of err, or 0.
func mysqlErrno(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// writableForTestenvTest makes m writable with a raw SET GLOBAL
// read_only=OFF (after super_read_only=OFF on MySQL) as the admin account. Only testenv's own tests use it, to
// check the harness without depending on the code under test: every other
// test makes a site writable through mysqlctl's Instance.Promote (package
// test/testenv/promote), so a harness never hides a daemon that fails to
// promote. Sites start read-only (TestServerStartsReadOnly).
func writableForTestenvTest(t *testing.T, m *Server) {
	t.Helper()
	if m.Engine == MySQL {
		m.Exec(t, "SET GLOBAL super_read_only = OFF")
	}
	m.Exec(t, "SET GLOBAL read_only = OFF")
}

// readOnlyForTestenvTest is the reverse of writableForTestenvTest.
func readOnlyForTestenvTest(t *testing.T, m *Server) {
	t.Helper()
	if m.Engine == MySQL {
		m.Exec(t, "SET GLOBAL super_read_only = ON")
	}
	m.Exec(t, "SET GLOBAL read_only = ON")
}

// TestServerStartsReadOnly: a fresh server, one whose ExtraArgs ask for
// read_only=OFF, and a restarted writable one all come up read-only (on
// MySQL super_read_only too), so the application account cannot write until
// the code under test promotes.
func TestServerStartsReadOnly(t *testing.T) {
	ForEachEngine(t, testServerStartsReadOnly)
}

func testServerStartsReadOnly(t *testing.T, e Engine) {
	extra := []string{"--read-only=OFF", "--read_only=0"}
	if e == MySQL {
		extra = append(extra, "--super-read-only=OFF")
	}
	m := StartServer(t, ServerOptions{Engine: e, Name: "ro", ExtraArgs: extra})
	appWrite := func(id int) error {
		_, err := m.AppDB(t).Exec("INSERT INTO ro (id) VALUES (?)", id)
		return err
	}
	if ro := m.QueryString(t, "SELECT @@global.read_only"); ro != "1" {
		t.Fatalf("fresh server read_only = %s, want 1", ro)
	}
	if e == MySQL {
		if sro := m.QueryString(t, "SELECT @@global.super_read_only"); sro != "1" {
			t.Fatalf("fresh MySQL server super_read_only = %s, want 1", sro)
		}
		// super_read_only stops the admin account too.
		if _, err := m.AdminDB(t).Exec("CREATE TABLE app.ro (id INT PRIMARY KEY)"); mysqlErrno(err) != 1290 {
			t.Fatalf("admin DDL on a fresh MySQL server: err %v, want error 1290 (super read-only)", err)
		}
		m.Exec(t, "SET GLOBAL super_read_only = OFF") // read_only stays ON
	}
	m.Exec(t, "CREATE TABLE app.ro (id INT PRIMARY KEY)") // the admin holds READ_ONLY ADMIN / SUPER
	if err := appWrite(1); mysqlErrno(err) != 1290 {
		t.Fatalf("app write on a fresh server: err %v, want error 1290 (read-only)", err)
	}
	writableForTestenvTest(t, m)
	if err := appWrite(2); err != nil {
		t.Fatalf("app write after read_only=OFF: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := m.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if ro := m.QueryString(t, "SELECT @@global.read_only"); ro != "1" {
		t.Fatalf("restarted server read_only = %s, want 1 (a crashed primary must come back fenced)", ro)
	}
	if err := appWrite(3); mysqlErrno(err) != 1290 {
		t.Fatalf("app write after a restart: err %v, want error 1290 (read-only)", err)
	}
}

// TestTopologyReplicatesAndDetectsKilledPrimary is acceptance test 1.
func TestTopologyReplicatesAndDetectsKilledPrimary(t *testing.T) {
	ForEachEngine(t, testTopologyReplicatesAndDetectsKilledPrimary)
}

func testTopologyReplicatesAndDetectsKilledPrimary(t *testing.T, e Engine) {
	tp := StartTopology(t, 3, TopologyOptions{Engine: e})
	primary := tp.Sites[0]
	for _, s := range tp.Sites {
		if ro := s.QueryString(t, "SELECT @@global.read_only"); ro != "1" {
			t.Fatalf("%s read_only = %s, want 1: every site starts read-only", s.Name, ro)
		}
	}
	if got := tp.Primary(); got != nil {
		t.Fatalf("Primary() before any promotion = %v, want nil", got)
	}
	writableForTestenvTest(t, primary)
	if got := tp.Primary(); got != primary {
		t.Fatalf("Primary() = %v, want site0", got)
	}

	primary.Exec(t, "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20))")
	if _, err := primary.AppDB(t).Exec("INSERT INTO t VALUES (1, 'hello')"); err != nil {
		t.Fatalf("app insert on primary: %v", err)
	}
	tp.WaitReplicated(t, 10*time.Second)
	for _, r := range tp.Sites[1:] {
		if v := r.QueryString(t, "SELECT v FROM app.t WHERE id = 1"); v != "hello" {
			t.Fatalf("%s has v=%q, want hello", r.Name, v)
		}
		// read_only must stop the application account on a replica.
		_, err := r.AppDB(t).Exec("INSERT INTO t VALUES (2, 'errant')")
		if mysqlErrno(err) != 1290 {
			t.Fatalf("app insert on read-only %s: err %v, want error 1290", r.Name, err)
		}
	}

	replica := tp.Sites[1]
	if err := primary.Kill(); err != nil {
		t.Fatalf("kill primary: %v", err)
	}
	killed := time.Now()
	var st map[string]string
	for time.Since(killed) < time.Second {
		st = replica.ReplicaStatus(t)
		if st["Slave_IO_Running"] == "Connecting" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st["Slave_IO_Running"] != "Connecting" {
		t.Fatalf("1 s after SIGKILL of the primary: Slave_IO_Running=%q, want Connecting (%s)", st["Slave_IO_Running"], summarizeStatus(st))
	}
	t.Logf("replica noticed the killed primary after %v", time.Since(killed))
	if primary.Running() {
		t.Fatalf("primary still running after Kill")
	}
	if tp.Primary() != nil {
		t.Fatalf("Primary() after killing the only writable site: want nil")
	}

	// Restart brings the same datadir back on the same port: the replicas
	// reconnect (MASTER_CONNECT_RETRY=1) and the data survived the crash.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := primary.Restart(ctx); err != nil {
		t.Fatalf("restart primary: %v", err)
	}
	if v := primary.QueryString(t, "SELECT v FROM app.t WHERE id = 1"); v != "hello" {
		t.Fatalf("after crash restart: v=%q, want hello", v)
	}
	if tp.Primary() != nil {
		t.Fatalf("Primary() right after the crash restart: want nil (it comes back read-only)")
	}
	writableForTestenvTest(t, primary)
	primary.Exec(t, "INSERT INTO app.t VALUES (3, 'after')")
	tp.WaitReplicated(t, 20*time.Second)
	if v := replica.QueryString(t, "SELECT v FROM app.t WHERE id = 3"); v != "after" {
		t.Fatalf("replica after primary restart: v=%q, want after", v)
	}
}

// TestAccountsAndSignals checks the account contract other packages rely
// on, and Pause/Resume, on the shared instance (left as found).
func TestAccountsAndSignals(t *testing.T) {
	m := sharedMariaDB(t)
	m.Exec(t, "CREATE TABLE IF NOT EXISTS app.acct (id INT PRIMARY KEY)")
	app := m.AppDB(t)
	// The admin account can flip read_only (it holds READ_ONLY ADMIN); the
	// shared server is left read-only, as it started.
	writableForTestenvTest(t, m)
	_, errWritable := app.Exec("REPLACE INTO acct VALUES (1)")
	readOnlyForTestenvTest(t, m)
	if errWritable != nil {
		t.Fatalf("app write on writable server: %v", errWritable)
	}
	_, err := app.Exec("REPLACE INTO acct VALUES (2)")
	if mysqlErrno(err) != 1290 {
		t.Fatalf("app write under read_only: err %v, want error 1290", err)
	}
	if _, err := app.Exec("SELECT 1 FROM mysql.user LIMIT 1"); mysqlErrno(err) != 1142 {
		t.Fatalf("app read of mysql.user: err %v, want error 1142 (denied)", err)
	}
	for _, tc := range []struct {
		user, want, mustNot string
		hosts               []string
	}{
		{ReplUser, "REPLICATION SLAVE", "READ_ONLY ADMIN", []string{"%"}},
		{DaemonUser, "READ_ONLY ADMIN", "ALL PRIVILEGES", []string{"%"}},
		{AppUser, "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER ON `app`.*", "READ_ONLY ADMIN", []string{"127.0.0.1", "localhost"}},
		{AdminUser, "ALL PRIVILEGES ON *.*", "-", []string{"127.0.0.1", "localhost"}},
	} {
		for _, host := range tc.hosts {
			g := m.Grants(t, tc.user, host)
			if !strings.Contains(g, tc.want) || strings.Contains(g, tc.mustNot) {
				t.Errorf("grants of %s@%s = %q: want %q and not %q", tc.user, host, g, tc.want, tc.mustNot)
			}
		}
	}

	if err := m.Pause(); err != nil {
		t.Fatalf("pause: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err = m.AdminDB(t).PingContext(ctx)
	cancel()
	if resumeErr := m.Resume(); resumeErr != nil {
		t.Fatalf("resume: %v", resumeErr)
	}
	if err == nil {
		t.Fatalf("ping of a paused server succeeded")
	}
	if got := m.QueryString(t, "SELECT 42"); got != "42" {
		t.Fatalf("after resume: %q", got)
	}
}

// TestSemiSyncTopology checks that SemiSync sites really commit semi-synchronously.
func TestSemiSyncTopology(t *testing.T) {
	ForEachEngine(t, testSemiSyncTopology)
}

func testSemiSyncTopology(t *testing.T, e Engine) {
	tp := StartTopology(t, 2, TopologyOptions{Engine: e, SemiSync: true})
	p := tp.Sites[0]
	writableForTestenvTest(t, p)
	p.Exec(t, "CREATE TABLE app.s (id INT PRIMARY KEY)")
	p.Exec(t, "INSERT INTO app.s VALUES (1)")
	status := func(name string) string {
		var k, v string
		if err := p.AdminDB(t).QueryRow("SHOW GLOBAL STATUS LIKE "+sqlQuote(name)).Scan(&k, &v); err != nil {
			t.Fatalf("show status %s: %v", name, err)
		}
		return v
	}
	source, replica := "master", "slave"
	if e == MySQL {
		source, replica = "source", "replica"
	}
	if got := status("Rpl_semi_sync_" + source + "_status"); got != "ON" {
		t.Fatalf("Rpl_semi_sync_%s_status = %q, want ON", source, got)
	}
	if got := status("Rpl_semi_sync_" + source + "_yes_tx"); got == "0" {
		t.Fatalf("Rpl_semi_sync_%s_yes_tx = 0: no commit was acknowledged by the replica", source)
	}
	if got := tp.Sites[1].QueryString(t, "SELECT @@rpl_semi_sync_"+replica+"_enabled"); got != "1" {
		t.Fatalf("replica rpl_semi_sync_%s_enabled = %q, want 1", replica, got)
	}
}
