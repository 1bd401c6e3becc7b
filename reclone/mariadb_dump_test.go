package reclone

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/testenv"
	"github.com/failoverd/failoverd/test/testenv/promote"
)

// testLog writes log lines to t.Log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// dataOf is every non-system database of m with each table's rows, for
// comparing two servers' data.
func dataOf(t *testing.T, m *testenv.Server) string {
	t.Helper()
	dbs := m.QueryString(t, "SELECT GROUP_CONCAT(schema_name ORDER BY schema_name) FROM information_schema.schemata "+
		"WHERE schema_name NOT IN ('mysql','information_schema','performance_schema','sys')")
	var b strings.Builder
	fmt.Fprintf(&b, "databases=%s\n", dbs)
	for _, tbl := range []string{"app.orders", "shop.items"} {
		fmt.Fprintf(&b, "%s=%s\n", tbl, m.QueryString(t, "SELECT GROUP_CONCAT(id, ':', HEX(v) ORDER BY id SEPARATOR ',') FROM "+tbl))
	}
	return b.String()
}

// divergedPair starts a writable donor with data in two databases and an
// event, and a recipient that replicated from it, then stopped and took
// errant writes (the admin holds READ_ONLY ADMIN) while the donor went on.
func divergedPair(t *testing.T) (donor, recipient *testenv.Server) {
	t.Helper()
	donor = testenv.StartMariaDB(t, testenv.ServerOptions{Name: "donor"})
	recipient = testenv.StartMariaDB(t, testenv.ServerOptions{Name: "recipient"})
	promote.Site(t, donor)

	donor.Exec(t, "CREATE TABLE app.orders (id INT PRIMARY KEY, v VARCHAR(40)) ENGINE=InnoDB")
	donor.Exec(t, "CREATE DATABASE shop")
	donor.Exec(t, "CREATE TABLE shop.items (id INT PRIMARY KEY, v VARBINARY(40)) ENGINE=InnoDB")
	for i := 1; i <= 5; i++ {
		donor.Exec(t, "INSERT INTO app.orders VALUES (?, ?)", i, fmt.Sprintf("order-%d", i))
		donor.Exec(t, "INSERT INTO shop.items VALUES (?, ?)", i, []byte{0, byte(i), 0xff})
	}
	// An enabled event: restored as is it would run on the replica and
	// write errant GTIDs, so the hook must leave it SLAVESIDE_DISABLED.
	donor.Exec(t, "CREATE EVENT app.purge ON SCHEDULE EVERY 1 HOUR DO DELETE FROM app.orders WHERE id < 0")
	testenv.ReplicateFrom(t, recipient, donor)
	recipient.WaitGTID(t, donor.QueryString(t, "SELECT @@gtid_binlog_pos"), 30*time.Second)

	// Diverge: the recipient stops replicating and takes errant writes (the
	// admin holds READ_ONLY ADMIN) while the donor goes on.
	recipient.Exec(t, "STOP SLAVE")
	recipient.Exec(t, "INSERT INTO app.orders VALUES (100, 'errant')")
	recipient.Exec(t, "UPDATE app.orders SET v='errant-update' WHERE id=1")
	recipient.Exec(t, "CREATE DATABASE errant_only")
	recipient.Exec(t, "CREATE TABLE errant_only.t (id INT PRIMARY KEY)")
	for i := 6; i <= 8; i++ {
		donor.Exec(t, "INSERT INTO app.orders VALUES (?, ?)", i, fmt.Sprintf("order-%d", i))
	}
	errant := recipient.QueryString(t, "SELECT @@gtid_binlog_state")
	if !strings.Contains(errant, fmt.Sprintf("-%d-", recipient.ServerID)) {
		t.Fatalf("setup: the recipient has no errant GTID of its own: gtid_binlog_state=%s", errant)
	}
	return donor, recipient
}

// runDumpHook runs test/e2e/testdata/reclone-mariadb-dump.sh through Hook
// as the admin account, its password in a file.
func runDumpHook(t *testing.T, donor, recipient *testenv.Server) {
	t.Helper()
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(testenv.AdminPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// root@localhost logs in only over the unix socket; the hook uses TCP.
	t.Setenv("RECLONE_USER", testenv.AdminUser)
	t.Setenv("RECLONE_PASSWORD_FILE", pwFile)
	hook := Hook{
		Command: []string{"bash", "../test/e2e/testdata/reclone-mariadb-dump.sh"},
		Timeout: 2 * time.Minute,
		Logger:  slog.New(slog.NewTextHandler(testLog{t}, nil)),
	}
	j := Job{Group: "orders", Site: recipient.Name, SiteAddr: recipient.Addr(), Donor: donor.Name, DonorAddr: donor.Addr()}
	if err := hook.Run(context.Background(), j); err != nil {
		t.Fatalf("reclone hook: %v", err)
	}
}

// rejoin makes recipient a replica of donor as the daemon does after a
// reclone (MASTER_USE_GTID=current_pos).
func rejoin(t *testing.T, donor, recipient *testenv.Server) {
	t.Helper()
	recipient.Exec(t, fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', "+
		"MASTER_USE_GTID=current_pos, MASTER_CONNECT_RETRY=1", donor.Host, donor.Port, testenv.ReplUser, testenv.ReplPassword))
	recipient.Exec(t, "START SLAVE")
}

// requireReplicating fails unless both replication threads of m run.
func requireReplicating(t *testing.T, m *testenv.Server) {
	t.Helper()
	if st := m.ReplicaStatus(t); st["Slave_SQL_Running"] != "Yes" || st["Slave_IO_Running"] != "Yes" {
		t.Fatalf("%s replication after rejoin: io=%s sql=%s last errors %q %q",
			m.Name, st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Last_IO_Error"], st["Last_SQL_Error"])
	}
}

// TestMariaDBDumpHookReseedsDivergedSite runs the mariadb-dump reclone hook
// against two real MariaDB servers: a recipient that diverged from the donor
// (errant writes, a database of its own) must end with the donor's data,
// read-only, no binlog GTIDs of its own and gtid_current_pos = the donor's
// position, and then rejoin as a GTID replica with MASTER_USE_GTID=current_pos.
func TestMariaDBDumpHookReseedsDivergedSite(t *testing.T) {
	donor, recipient := divergedPair(t)
	runDumpHook(t, donor, recipient)

	if got, want := dataOf(t, recipient), dataOf(t, donor); got != want {
		t.Fatalf("recipient data after reclone:\n%s\nwant the donor's:\n%s", got, want)
	}
	if ro := recipient.QueryString(t, "SELECT @@read_only"); ro != "1" {
		t.Errorf("recipient read_only=%s after reclone, want 1", ro)
	}
	if st := recipient.QueryString(t, "SELECT @@gtid_binlog_state"); st != "" {
		t.Errorf("recipient gtid_binlog_state=%q after reclone, want empty", st)
	}
	donorPos := donor.QueryString(t, "SELECT @@gtid_binlog_pos")
	if cur := recipient.QueryString(t, "SELECT @@gtid_current_pos"); cur != donorPos {
		t.Errorf("recipient gtid_current_pos=%q after reclone, want the donor's gtid_binlog_pos %q", cur, donorPos)
	}
	if st := recipient.QueryString(t, "SELECT status FROM information_schema.events WHERE event_schema='app' AND event_name='purge'"); st != "SLAVESIDE_DISABLED" {
		t.Errorf("recipient event app.purge status %q after reclone, want SLAVESIDE_DISABLED", st)
	}
	if st := recipient.ReplicaStatus(t); len(st) != 0 {
		t.Errorf("the hook left replication configured (the daemon's job): %v", st)
	}

	// Rejoin as the daemon does, then a new donor row must arrive.
	rejoin(t, donor, recipient)
	donor.Exec(t, "INSERT INTO app.orders VALUES (9, 'after-reclone')")
	recipient.WaitGTID(t, donor.QueryString(t, "SELECT @@gtid_binlog_pos"), 30*time.Second)
	if v := recipient.QueryString(t, "SELECT v FROM app.orders WHERE id=9"); v != "after-reclone" {
		t.Fatalf("row written on the donor after the reclone: recipient has %q", v)
	}
	requireReplicating(t, recipient)
	if got, want := dataOf(t, recipient), dataOf(t, donor); got != want {
		t.Fatalf("recipient data after rejoin:\n%s\nwant the donor's:\n%s", got, want)
	}
}

// TestMariaDBDumpHookUnderWriteLoad reclones while the application keeps
// writing to the donor: the dump's snapshot and its gtid_slave_pos must
// match, or the rejoined replica would miss rows or apply some twice
// (duplicate key, SQL thread stopped).
func TestMariaDBDumpHookUnderWriteLoad(t *testing.T) {
	donor, recipient := divergedPair(t)
	wl := testenv.StartWriteLoad(t, testenv.AppDSNs(donor), testenv.WriteLoadOptions{Workers: 2, Interval: time.Millisecond})
	wl.WaitForAcks(t, 50, 30*time.Second)
	runDumpHook(t, donor, recipient)
	if st := recipient.QueryString(t, "SELECT @@gtid_binlog_state"); st != "" {
		t.Errorf("recipient gtid_binlog_state=%q after reclone, want empty", st)
	}
	wl.WaitForAcks(t, len(wl.Acked())+50, 30*time.Second)
	rejoin(t, donor, recipient)
	wl.WaitForAcks(t, len(wl.Acked())+50, 30*time.Second)
	wl.Stop()
	recipient.WaitGTID(t, donor.QueryString(t, "SELECT @@gtid_binlog_pos"), 30*time.Second)
	requireReplicating(t, recipient)
	if m := wl.Missing(t, recipient.AdminDB(t)); len(m) > 0 {
		t.Fatalf("%d acknowledged writes missing on the recipient after reclone and rejoin, e.g. %v", len(m), m[:min(len(m), 10)])
	}
	load := "SELECT CONCAT(COUNT(*), '/', COALESCE(SUM(id), 0)) FROM " + testenv.WriteLoadTable
	if got, want := recipient.QueryString(t, load), donor.QueryString(t, load); got != want {
		t.Fatalf("recipient %s count/sum %s, donor %s", testenv.WriteLoadTable, got, want)
	}
	if got, want := dataOf(t, recipient), dataOf(t, donor); got != want {
		t.Fatalf("recipient data:\n%s\nwant the donor's:\n%s", got, want)
	}
}
