package mysqlctl

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// The sessions waiting for semi-sync acknowledgements, per engine: the
// exact statements, spelled out once so a change fails a test.
const (
	mariaAckWaits = "SELECT COUNT(IF(COMMAND IN ('Slave_SQL', 'Slave_worker'), 1, NULL)) AS appliers, " +
		"COUNT(IF(COMMAND IN ('Slave_SQL', 'Slave_worker'), NULL, 1)) AS sessions, " +
		"COALESCE(MAX(TIME_MS), 0) AS longest_ms FROM information_schema.PROCESSLIST WHERE STATE LIKE 'Waiting for semi-sync ACK%'"
	mysqlAckWaits = "SELECT COUNT(IF(NAME IN ('thread/sql/replica_sql', 'thread/sql/slave_sql', 'thread/sql/replica_worker', 'thread/sql/slave_worker'), 1, NULL)) AS appliers, " +
		"COUNT(IF(NAME IN ('thread/sql/replica_sql', 'thread/sql/slave_sql', 'thread/sql/replica_worker', 'thread/sql/slave_worker'), NULL, 1)) AS sessions, " +
		"COALESCE(MAX(PROCESSLIST_TIME), 0) * 1000 AS longest_ms FROM performance_schema.threads WHERE PROCESSLIST_STATE LIKE 'Waiting for semi-sync ACK%' " +
		"AND NAME NOT LIKE 'thread/semisync/%'"
)

// A server whose semi-sync source side is on reports the sessions whose
// commits wait for an acknowledgement (issue 26: a replica's applier, or a
// primary's clients once no replica acknowledges); with the source side off
// nothing can wait and nothing more is read. A failed read leaves them
// unknown without failing the status.
func TestStatusReadsAckWaits(t *testing.T) {
	mariaVars := func(on string) map[string]string {
		return map[string]string{"version": mariadb.Version, "version_comment": mariadb.VersionComment, "read_only": "1",
			"gtid_binlog_state": "0-1-6", "gtid_current_pos": "0-1-6",
			"semi_sync_variables": "rpl_semi_sync_master_enabled=" + on + ",rpl_semi_sync_slave_enabled=ON"}
	}
	mysqlVars := func(on string) map[string]string {
		return map[string]string{"version": mysql80.Version, "version_comment": mysql80.VersionComment, "read_only": "1", "super_read_only": "1",
			"gtid_executed": uuidA + ":1-5", "semi_sync_variables": "rpl_semi_sync_source_enabled=" + on + ",rpl_semi_sync_replica_enabled=ON"}
	}
	waits := table("appliers", "sessions", "longest_ms").row("1", "2", "7500.250").ok()
	for _, tc := range []struct {
		name   string
		flavor Flavor
		vars   map[string]string
		answer fakeResponse
		query  string // "" = none sent
		want   AckWaits
	}{
		{"mariadb source side on", mariadb, mariaVars("ON"), waits, mariaAckWaits, AckWaits{Known: true, Appliers: 1, Sessions: 2, Longest: 7500250 * time.Microsecond}},
		{"mysql source side on", mysql80, mysqlVars("ON"), waits, mysqlAckWaits, AckWaits{Known: true, Appliers: 1, Sessions: 2, Longest: 7500250 * time.Microsecond}},
		{"nothing waits", mariadb, mariaVars("ON"), table("appliers", "sessions", "longest_ms").row("0", "0", "0").ok(), mariaAckWaits, AckWaits{Known: true}},
		{"source side off: nothing can wait", mariadb, mariaVars("OFF"), waits, "", AckWaits{}},
		{"read refused: unknown, the status stands", mysql80, mysqlVars("ON"), fails(serverErr(1227, "denied")), mysqlAckWaits, AckWaits{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, db, _ := newFake(tc.flavor)
			var cols []string
			for k := range tc.vars {
				cols = append(cols, k)
			}
			db.on("SELECT @@GLOBAL.version", fakeResponse{rs: statusRow(t, cols, tc.vars)}).on("SHOW", noRows).on("SELECT COUNT(", tc.answer)
			st, err := inst.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.AckWaits != tc.want {
				t.Errorf("ack waits %+v, want %+v", st.AckWaits, tc.want)
			}
			sent := slices.ContainsFunc(db.stmts, func(s string) bool { return strings.HasPrefix(s, "SELECT COUNT(") })
			if sent != (tc.query != "") || (sent && !slices.Contains(db.stmts, tc.query)) {
				t.Errorf("statements %q, want the ack-wait query %q", db.stmts, tc.query)
			}
		})
	}
}

// A status-only instance (the poller's) may send the ack-wait query.
func TestStatusOnlyInstanceMayReadAckWaits(t *testing.T) {
	for _, f := range []Flavor{mariadb, mysql80} {
		d := newDialect(f)
		if d.ackWaitsQuery == "" || strings.Contains(d.ackWaitsQuery, ";") {
			t.Fatalf("%s: ack-wait query %q", f, d.ackWaitsQuery)
		}
		if !statusOnlyAllowed(d)[d.ackWaitsQuery] {
			t.Errorf("%s: a status-only instance refuses the ack-wait query", f)
		}
	}
}

// A replica's SQL thread blocked in its own semi-sync wait says so.
func TestReplicaAwaitingAck(t *testing.T) {
	for state, want := range map[string]bool{
		"Waiting for semi-sync ACK from slave":                   true,
		"Waiting for semi-sync ACK from replica":                 true,
		"Slave has read all relay log; waiting for more updates": false,
		"Waiting for dependent transaction to commit":            false,
		"": false,
	} {
		r := &ReplicaStatus{SQLThread: ThreadYes, SQLState: state}
		if got := r.AwaitingAck(); got != want {
			t.Errorf("AwaitingAck(%q) = %t, want %t", state, got, want)
		}
	}
}
