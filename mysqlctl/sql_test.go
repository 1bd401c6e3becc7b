package mysqlctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/go-sql-driver/mysql"
)

// The exact statements each flavor sends, spelled out once here so a
// change in any of them fails a test.
const (
	mysqlReadOnly = "SELECT @@GLOBAL.read_only AS read_only, @@GLOBAL.super_read_only AS super_read_only"
	mariaReadOnly = "SELECT @@GLOBAL.read_only AS read_only"

	mysqlSemi80 = "(SELECT GROUP_CONCAT(CONCAT(LOWER(VARIABLE_NAME), '=', VARIABLE_VALUE)) FROM performance_schema.global_variables " +
		"WHERE VARIABLE_NAME IN ('rpl_semi_sync_source_enabled', 'rpl_semi_sync_master_enabled', 'rpl_semi_sync_replica_enabled', 'rpl_semi_sync_slave_enabled', " +
		"'rpl_semi_sync_source_timeout', 'rpl_semi_sync_master_timeout', 'rpl_semi_sync_source_wait_no_replica', 'rpl_semi_sync_master_wait_no_slave', " +
		"'rpl_semi_sync_source_wait_point', 'rpl_semi_sync_master_wait_point', " +
		"'rpl_semi_sync_source_wait_for_replica_count', 'rpl_semi_sync_master_wait_for_slave_count')) AS semi_sync_variables, " +
		"(SELECT GROUP_CONCAT(CONCAT(LOWER(VARIABLE_NAME), '=', VARIABLE_VALUE)) FROM performance_schema.global_status " +
		"WHERE VARIABLE_NAME IN ('Rpl_semi_sync_source_status', 'Rpl_semi_sync_master_status', 'Rpl_semi_sync_replica_status', 'Rpl_semi_sync_slave_status')) AS semi_sync_status"
	mysqlSemi25 = "(SELECT GROUP_CONCAT(CONCAT(LOWER(VARIABLE_NAME), '=', VARIABLE_VALUE)) FROM performance_schema.global_variables " +
		"WHERE VARIABLE_NAME IN ('rpl_semi_sync_master_enabled', 'rpl_semi_sync_slave_enabled', " +
		"'rpl_semi_sync_master_timeout', 'rpl_semi_sync_master_wait_no_slave', 'rpl_semi_sync_master_wait_point', " +
		"'rpl_semi_sync_master_wait_for_slave_count')) AS semi_sync_variables, " +
		"(SELECT GROUP_CONCAT(CONCAT(LOWER(VARIABLE_NAME), '=', VARIABLE_VALUE)) FROM performance_schema.global_status " +
		"WHERE VARIABLE_NAME IN ('Rpl_semi_sync_master_status', 'Rpl_semi_sync_slave_status')) AS semi_sync_status"
	mariaSemiVars = "CONCAT_WS(',', CONCAT('rpl_semi_sync_master_enabled=', @@GLOBAL.rpl_semi_sync_master_enabled), " +
		"CONCAT('rpl_semi_sync_slave_enabled=', @@GLOBAL.rpl_semi_sync_slave_enabled), " +
		"CONCAT('rpl_semi_sync_master_timeout=', @@GLOBAL.rpl_semi_sync_master_timeout), " +
		"CONCAT('rpl_semi_sync_master_wait_no_slave=', @@GLOBAL.rpl_semi_sync_master_wait_no_slave), " +
		"CONCAT('rpl_semi_sync_master_wait_point=', @@GLOBAL.rpl_semi_sync_master_wait_point)) AS semi_sync_variables"
	mariaSemi = mariaSemiVars + ", (SELECT GROUP_CONCAT(CONCAT(LOWER(VARIABLE_NAME), '=', VARIABLE_VALUE)) FROM information_schema.GLOBAL_STATUS " +
		"WHERE VARIABLE_NAME IN ('Rpl_semi_sync_master_status', 'Rpl_semi_sync_slave_status')) AS semi_sync_status"
	mariaSemiStatus = "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_%_status'"

	mysqlStatus = "SELECT @@GLOBAL.version AS version, @@GLOBAL.version_comment AS version_comment, " +
		"@@GLOBAL.server_id AS server_id, @@GLOBAL.server_uuid AS server_uuid, " +
		"@@GLOBAL.read_only AS read_only, @@GLOBAL.super_read_only AS super_read_only, " +
		"@@GLOBAL.gtid_executed AS gtid_executed, " + mysqlSemi80 + ", " +
		"(SELECT HEARTBEAT_INTERVAL FROM performance_schema.replication_connection_configuration WHERE CHANNEL_NAME = '') AS heartbeat_period, " +
		"(SELECT COUNT_RECEIVED_HEARTBEATS FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = '') AS received_heartbeats"
	mariaStatus = "SELECT @@GLOBAL.version AS version, @@GLOBAL.version_comment AS version_comment, " +
		"@@GLOBAL.server_id AS server_id, @@GLOBAL.read_only AS read_only, " +
		"@@GLOBAL.gtid_binlog_state AS gtid_binlog_state, @@GLOBAL.gtid_current_pos AS gtid_current_pos, " +
		"@@GLOBAL.gtid_slave_pos AS gtid_slave_pos, " + mariaSemi
	// mariaBatchStatus is mariaStatus as a StatusOnly instance sends it,
	// with mariaSemiStatus, in one request.
	mariaBatchStatus = "SELECT @@GLOBAL.version AS version, @@GLOBAL.version_comment AS version_comment, " +
		"@@GLOBAL.server_id AS server_id, @@GLOBAL.read_only AS read_only, " +
		"@@GLOBAL.gtid_binlog_state AS gtid_binlog_state, @@GLOBAL.gtid_current_pos AS gtid_current_pos, " +
		"@@GLOBAL.gtid_slave_pos AS gtid_slave_pos, " + mariaSemiVars

	uuidA = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	uuidB = "4d8b2e3a-0f1c-11ef-8b2a-0242ac120002"
)

func serverErr(n uint16, msg string) error { return &mysql.MySQLError{Number: n, Message: msg} }

var (
	mysqlFenced   = table("read_only", "super_read_only").row("1", "1").ok()
	mysqlRO       = table("read_only", "super_read_only").row("1", "0").ok()
	mysqlWritable = table("read_only", "super_read_only").row("0", "0").ok()
	mariaFenced   = table("read_only").row("1").ok()
	mariaWritable = table("read_only").row("0").ok()
	noRows        = fakeResponse{rs: &resultSet{}}
)

// replicaRow is a replica status row with the columns the code reads.
func mysqlReplica(io, sqlThread, retrieved, sqlErrno, sqlError string) fakeResponse {
	return table("Channel_Name", "Replica_IO_Running", "Replica_SQL_Running", "Retrieved_Gtid_Set", "Last_SQL_Errno", "Last_SQL_Error").
		row("", io, sqlThread, retrieved, sqlErrno, sqlError).ok()
}

func mariaReplica(io, sqlThread, ioPos, sqlErrno, sqlError string) fakeResponse {
	return table("Connection_name", "Slave_IO_Running", "Slave_SQL_Running", "Gtid_IO_Pos", "Last_SQL_Errno", "Last_SQL_Error").
		row("", io, sqlThread, ioPos, sqlErrno, sqlError).ok()
}

// mariaReplicaPos is a MariaDB replica row with Gtid_Slave_Pos (what the
// applier executed) beside Gtid_IO_Pos.
func mariaReplicaPos(io, sqlThread, ioPos, slavePos string) fakeResponse {
	return table("Connection_name", "Slave_IO_Running", "Slave_SQL_Running", "Gtid_IO_Pos", "Gtid_Slave_Pos", "Last_SQL_Errno", "Last_SQL_Error").
		row("", io, sqlThread, ioPos, slavePos, "0", "").ok()
}

func waitResult(v string) fakeResponse { return table("result").row(v).ok() }

type sqlCase struct {
	name    string
	flavor  Flavor
	setup   func(db *fakeDB)
	run     func(ctx context.Context, i *Instance) error
	want    []string
	wantErr error // nil: success expected
}

func runSQLCases(t *testing.T, cases []sqlCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inst, db, clock := newFake(tc.flavor)
			db.before = func(stmt string) {
				// Every wait "takes" its slice.
				if strings.HasPrefix(stmt, "SELECT WAIT_FOR_EXECUTED_GTID_SET") || strings.HasPrefix(stmt, "SELECT MASTER_GTID_WAIT") {
					clock.advance(time.Second)
				}
			}
			if tc.setup != nil {
				tc.setup(db)
			}
			err := tc.run(context.Background(), inst)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr == errAny && err == nil:
				t.Fatalf("no error, want one")
			case tc.wantErr != nil && tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(db.stmts, tc.want) {
				t.Fatalf("statements:\n got  %q\n want %q", db.stmts, tc.want)
			}
		})
	}
}

func fence(ctx context.Context, i *Instance) error        { return i.Fence(ctx) }
func promote(ctx context.Context, i *Instance) error      { return i.Promote(ctx) }
func stopReplica(ctx context.Context, i *Instance) error  { return i.StopReplica(ctx) }
func resetReplica(ctx context.Context, i *Instance) error { return i.ResetReplicaAll(ctx) }
func stopIO(ctx context.Context, i *Instance) error       { return i.StopReplicaIO(ctx) }
func startIO(ctx context.Context, i *Instance) error      { return i.StartReplicaIO(ctx) }

func TestFenceSQL(t *testing.T) {
	runSQLCases(t, []sqlCase{
		{name: "mysql", flavor: mysql80, run: fence,
			setup: func(db *fakeDB) { db.on(mysqlReadOnly, mysqlFenced) },
			want:  []string{"SET GLOBAL super_read_only = ON", mysqlReadOnly}},
		{name: "mysql read_only but not super_read_only", flavor: mysql80, run: fence,
			setup:   func(db *fakeDB) { db.on(mysqlReadOnly, mysqlRO) },
			want:    []string{"SET GLOBAL super_read_only = ON", mysqlReadOnly},
			wantErr: ErrFenceNotInEffect},
		{name: "mariadb", flavor: mariadb, run: fence,
			setup: func(db *fakeDB) { db.on(mariaReadOnly, mariaFenced) },
			want:  []string{"SET GLOBAL read_only = ON", mariaReadOnly}},
		{name: "mariadb not in effect", flavor: mariadb, run: fence,
			setup:   func(db *fakeDB) { db.on(mariaReadOnly, mariaWritable) },
			want:    []string{"SET GLOBAL read_only = ON", mariaReadOnly},
			wantErr: ErrFenceNotInEffect},
		{name: "mariadb missing READ_ONLY ADMIN", flavor: mariadb, run: fence,
			setup: func(db *fakeDB) {
				db.on("SET GLOBAL read_only", fails(serverErr(1227, "Access denied; you need (at least one of) the READ_ONLY ADMIN privilege(s)")))
			},
			want:    []string{"SET GLOBAL read_only = ON"},
			wantErr: &mysql.MySQLError{Number: 1227}},
	})
}

func TestPromoteSQL(t *testing.T) {
	runSQLCases(t, []sqlCase{
		{name: "mysql", flavor: mysql80, run: promote,
			setup: func(db *fakeDB) { db.on(mysqlReadOnly, mysqlWritable) },
			want:  []string{"SHOW REPLICA STATUS", "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF", mysqlReadOnly}},
		{name: "mysql after reset: stopped replica row", flavor: mysql80, run: promote,
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlReplica("No", "No", "", "0", "")).on(mysqlReadOnly, mysqlWritable)
			},
			want: []string{"SHOW REPLICA STATUS", "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF", mysqlReadOnly}},
		{name: "mysql still replicating", flavor: mysql80, run: promote,
			setup:   func(db *fakeDB) { db.on("SHOW REPLICA STATUS", mysqlReplica("Connecting", "No", "", "0", "")) },
			want:    []string{"SHOW REPLICA STATUS"},
			wantErr: ErrReplicaRunning},
		{name: "mysql still read-only", flavor: mysql80, run: promote,
			setup:   func(db *fakeDB) { db.on(mysqlReadOnly, mysqlRO) },
			want:    []string{"SHOW REPLICA STATUS", "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF", mysqlReadOnly},
			wantErr: ErrNotWritable},
		{name: "mariadb", flavor: mariadb, run: promote,
			setup: func(db *fakeDB) { db.on(mariaReadOnly, mariaWritable) },
			want:  []string{"SHOW ALL SLAVES STATUS", "SET GLOBAL read_only = OFF", mariaReadOnly}},
		{name: "mariadb still replicating", flavor: mariadb, run: promote,
			setup:   func(db *fakeDB) { db.on("SHOW ALL SLAVES STATUS", mariaReplica("Yes", "Yes", "0-1-5", "0", "")) },
			want:    []string{"SHOW ALL SLAVES STATUS"},
			wantErr: ErrReplicaRunning},
	})
}

func TestStopAndResetSQL(t *testing.T) {
	runSQLCases(t, []sqlCase{
		{name: "mysql stop", flavor: mysql80, run: stopReplica, want: []string{"STOP REPLICA"}},
		{name: "mysql stop unconfigured", flavor: mysql80, run: stopReplica,
			setup: func(db *fakeDB) { db.on("STOP REPLICA", fails(serverErr(1794, "not configured as replica"))) },
			want:  []string{"STOP REPLICA"}},
		{name: "mysql stop other error", flavor: mysql80, run: stopReplica,
			setup:   func(db *fakeDB) { db.on("STOP REPLICA", fails(serverErr(1227, "Access denied"))) },
			want:    []string{"STOP REPLICA"},
			wantErr: &mysql.MySQLError{Number: 1227}},
		{name: "mysql reset", flavor: mysql80, run: resetReplica, want: []string{"STOP REPLICA", "RESET REPLICA ALL"}},
		{name: "mysql reset unconfigured", flavor: mysql80, run: resetReplica,
			setup: func(db *fakeDB) {
				db.on("STOP REPLICA", fails(serverErr(1200, "not configured"))).on("RESET REPLICA ALL", fails(serverErr(1200, "not configured")))
			},
			want: []string{"STOP REPLICA", "RESET REPLICA ALL"}},
		{name: "mariadb stop", flavor: mariadb, run: stopReplica, want: []string{"STOP SLAVE"}},
		{name: "mariadb stop no connection", flavor: mariadb, run: stopReplica,
			setup: func(db *fakeDB) { db.on("STOP SLAVE", fails(serverErr(1617, "There is no master connection ''"))) },
			want:  []string{"STOP SLAVE"}},
		{name: "mariadb reset", flavor: mariadb, run: resetReplica, want: []string{"STOP SLAVE", "RESET SLAVE ALL"}},
		{name: "mariadb reset fails", flavor: mariadb, run: resetReplica,
			setup:   func(db *fakeDB) { db.on("RESET SLAVE ALL", fails(serverErr(1198, "running slave"))) },
			want:    []string{"STOP SLAVE", "RESET SLAVE ALL"},
			wantErr: &mysql.MySQLError{Number: 1198}},
	})
}

func TestReplicaIOThreadSQL(t *testing.T) {
	mysqlRunning := mysqlReplica("Yes", "Yes", uuidA+":1-10", "0", "")
	mariaRunning := mariaReplica("Yes", "Yes", "0-1-17", "0", "")
	runSQLCases(t, []sqlCase{
		{name: "mysql stop", flavor: mysql80, run: stopIO,
			setup: func(db *fakeDB) { db.on("SHOW REPLICA STATUS", mysqlRunning) },
			want:  []string{"SHOW REPLICA STATUS", "STOP REPLICA IO_THREAD"}},
		{name: "mysql stop starts a stopped applier first", flavor: mysql80, run: stopIO,
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlReplica("Connecting", "No", uuidA+":1-10", "0", ""))
			},
			want: []string{"SHOW REPLICA STATUS", "START REPLICA SQL_THREAD", "STOP REPLICA IO_THREAD"}},
		{name: "mysql stop leaves a failed applier alone", flavor: mysql80, run: stopIO,
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlReplica("Yes", "No", uuidA+":1-10", "1062", "Duplicate entry"))
			},
			want: []string{"SHOW REPLICA STATUS", "STOP REPLICA IO_THREAD"}},
		{name: "mysql stop not a replica", flavor: mysql80, run: stopIO, want: []string{"SHOW REPLICA STATUS"}},
		{name: "mysql stop reset meanwhile", flavor: mysql84, run: stopIO,
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlRunning).on("STOP REPLICA IO_THREAD", fails(serverErr(3074, "channel does not exist")))
			},
			want: []string{"SHOW REPLICA STATUS", "STOP REPLICA IO_THREAD"}},
		{name: "mysql stop other error", flavor: mysql80, run: stopIO,
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlRunning).on("STOP REPLICA IO_THREAD", fails(serverErr(1227, "Access denied")))
			},
			want:    []string{"SHOW REPLICA STATUS", "STOP REPLICA IO_THREAD"},
			wantErr: &mysql.MySQLError{Number: 1227}},
		{name: "mysql start", flavor: mysql80, run: startIO, want: []string{"START REPLICA IO_THREAD"}},
		{name: "mysql start unconfigured", flavor: mysql80, run: startIO,
			setup:   func(db *fakeDB) { db.on("START REPLICA IO_THREAD", fails(serverErr(1200, "not configured"))) },
			want:    []string{"START REPLICA IO_THREAD"},
			wantErr: ErrNotReplica},
		{name: "mariadb stop", flavor: mariadb, run: stopIO,
			setup: func(db *fakeDB) { db.on("SHOW ALL SLAVES STATUS", mariaRunning) },
			want:  []string{"SHOW ALL SLAVES STATUS", "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE COMMAND = 'Slave_IO'", "STOP SLAVE IO_THREAD"}},
		{name: "mariadb stop kills the receiver first (STOP waits seconds for one blocked on a hung source), then STOPs once it has finished", flavor: mariadb, run: stopIO,
			setup: func(db *fakeDB) {
				db.on("SHOW ALL SLAVES STATUS", mariaRunning, mariaReplica("No", "Yes", "0-1-17", "0", "")).on("SELECT ID AS id FROM information_schema.PROCESSLIST", table("id").row("42").ok())
			},
			want: []string{"SHOW ALL SLAVES STATUS", "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE COMMAND = 'Slave_IO'", "KILL CONNECTION 42",
				"SHOW ALL SLAVES STATUS", "STOP SLAVE IO_THREAD"}},
		{name: "mariadb stop waits at most killSettle for a killed receiver that keeps running, then STOPs", flavor: mariadb, run: stopIO,
			setup: func(db *fakeDB) {
				db.on("SHOW ALL SLAVES STATUS", mariaRunning).on("SELECT ID AS id FROM information_schema.PROCESSLIST", table("id").row("42").ok())
			},
			want: slices.Concat([]string{"SHOW ALL SLAVES STATUS", "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE COMMAND = 'Slave_IO'", "KILL CONNECTION 42"},
				slices.Repeat([]string{"SHOW ALL SLAVES STATUS"}, int(killSettle/killPoll)+1),
				[]string{"STOP SLAVE IO_THREAD"})},
		{name: "mariadb stop starts a stopped applier while the IO thread runs", flavor: mariadb, run: stopIO,
			setup: func(db *fakeDB) { db.on("SHOW ALL SLAVES STATUS", mariaReplica("Yes", "No", "0-1-17", "0", "")) },
			want:  []string{"SHOW ALL SLAVES STATUS", "START SLAVE SQL_THREAD", "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE COMMAND = 'Slave_IO'", "STOP SLAVE IO_THREAD"}},
		{name: "mariadb stop with both threads stopped starts nothing", flavor: mariadb, run: stopIO,
			setup: func(db *fakeDB) { db.on("SHOW ALL SLAVES STATUS", mariaReplica("No", "No", "0-1-17", "0", "")) },
			want:  []string{"SHOW ALL SLAVES STATUS", "STOP SLAVE IO_THREAD"}},
		{name: "mariadb stop not a replica", flavor: mariadb, run: stopIO, want: []string{"SHOW ALL SLAVES STATUS"}},
		{name: "mariadb stop reset meanwhile", flavor: mariadb, run: stopIO,
			setup: func(db *fakeDB) {
				db.on("SHOW ALL SLAVES STATUS", mariaRunning).on("STOP SLAVE IO_THREAD", fails(serverErr(1617, "There is no master connection ''")))
			},
			want: []string{"SHOW ALL SLAVES STATUS", "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE COMMAND = 'Slave_IO'", "STOP SLAVE IO_THREAD"}},
		{name: "mariadb start", flavor: mariadb, run: startIO,
			setup: func(db *fakeDB) { db.on("SHOW ALL SLAVES STATUS", mariaReplica("No", "Yes", "0-1-17", "0", "")) },
			want:  []string{"SHOW ALL SLAVES STATUS", "START SLAVE IO_THREAD"}},
		{name: "mariadb start refused while the applier is stopped too", flavor: mariadb, run: startIO,
			setup:   func(db *fakeDB) { db.on("SHOW ALL SLAVES STATUS", mariaReplica("No", "No", "0-1-17", "0", "")) },
			want:    []string{"SHOW ALL SLAVES STATUS"},
			wantErr: ErrApplierStopped},
		{name: "mariadb start not a replica", flavor: mariadb, run: startIO,
			want: []string{"SHOW ALL SLAVES STATUS"}, wantErr: ErrNotReplica},
	})
}

// TestStopReplicaIOWithoutPauseWhenTheKilledReceiverIsGone: a receiver
// that has finished right after its KILL (a live source's, as in a
// switchover) is stopped without any pause; one that keeps running is
// waited for at most killSettle. Finished means the replica status says so,
// not that its processlist row is gone (the row goes first, and a STOP in
// between waits a 2 s retry cycle).
func TestStopReplicaIOWithoutPauseWhenTheKilledReceiverIsGone(t *testing.T) {
	running := mariaReplica("Yes", "Yes", "0-1-17", "0", "")
	stopped := mariaReplica("No", "Yes", "0-1-17", "0", "")
	for _, c := range []struct {
		name  string
		after []fakeResponse
		want  time.Duration
	}{
		{"finished at once", []fakeResponse{stopped}, 0},
		{"finished after two pauses", []fakeResponse{running, running, stopped}, 2 * killPoll},
		{"keeps running", nil, killSettle},
	} {
		t.Run(c.name, func(t *testing.T) {
			inst, db, clock := newFake(mariadb)
			start := clock.now()
			// The last answer repeats: a receiver that keeps running. The
			// processlist row is gone at once in every case.
			answers := append([]fakeResponse{running}, c.after...)
			db.on("SHOW ALL SLAVES STATUS", answers...).on("SELECT ID AS id FROM information_schema.PROCESSLIST", table("id").row("42").ok(), table("id").ok())
			if err := inst.StopReplicaIO(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := clock.now().Sub(start); got != c.want {
				t.Fatalf("paused %v before STOP, want %v", got, c.want)
			}
		})
	}
}

func TestReplicateFromSQL(t *testing.T) {
	src := Source{Host: "10.0.0.2", Port: 3307, User: "repl", Password: `p'w\d`, HeartbeatPeriod: 500 * time.Millisecond, ConnectRetry: 1500 * time.Millisecond}
	tlsSrc := Source{Host: "db-1.example", User: "repl", Password: "pw", TLS: true}
	replicate := func(s Source) func(ctx context.Context, i *Instance) error {
		return func(ctx context.Context, i *Instance) error { return i.ReplicateFrom(ctx, s) }
	}
	runSQLCases(t, []sqlCase{
		{name: "mysql", flavor: mysql80, run: replicate(src),
			setup: func(db *fakeDB) { db.on(mysqlReadOnly, mysqlFenced) },
			want: []string{
				"SET GLOBAL super_read_only = ON", mysqlReadOnly, "STOP REPLICA",
				`CHANGE REPLICATION SOURCE TO SOURCE_HOST = '10.0.0.2', SOURCE_PORT = 3307, SOURCE_USER = 'repl', SOURCE_PASSWORD = 'p''w\d', ` +
					"SOURCE_AUTO_POSITION = 1, SOURCE_SSL = 0, GET_SOURCE_PUBLIC_KEY = 1, SOURCE_HEARTBEAT_PERIOD = 0.500, SOURCE_CONNECT_RETRY = 2, SOURCE_RETRY_COUNT = 86400",
				"START REPLICA",
			}},
		{name: "mysql tls default port", flavor: mysql84, run: replicate(tlsSrc),
			setup: func(db *fakeDB) { db.on(mysqlReadOnly, mysqlFenced) },
			want: []string{
				"SET GLOBAL super_read_only = ON", mysqlReadOnly, "STOP REPLICA",
				"CHANGE REPLICATION SOURCE TO SOURCE_HOST = 'db-1.example', SOURCE_PORT = 3306, SOURCE_USER = 'repl', SOURCE_PASSWORD = 'pw', " +
					"SOURCE_AUTO_POSITION = 1, SOURCE_SSL = 1, GET_SOURCE_PUBLIC_KEY = 0, SOURCE_RETRY_COUNT = 86400",
				"START REPLICA",
			}},
		{name: "mysql never replicated", flavor: mysql80, run: replicate(tlsSrc),
			setup: func(db *fakeDB) {
				db.on(mysqlReadOnly, mysqlFenced).on("STOP REPLICA", fails(serverErr(1794, "not configured")))
			},
			want: []string{
				"SET GLOBAL super_read_only = ON", mysqlReadOnly, "STOP REPLICA",
				"CHANGE REPLICATION SOURCE TO SOURCE_HOST = 'db-1.example', SOURCE_PORT = 3306, SOURCE_USER = 'repl', SOURCE_PASSWORD = 'pw', " +
					"SOURCE_AUTO_POSITION = 1, SOURCE_SSL = 1, GET_SOURCE_PUBLIC_KEY = 0, SOURCE_RETRY_COUNT = 86400",
				"START REPLICA",
			}},
		{name: "mariadb", flavor: mariadb, run: replicate(src),
			setup: func(db *fakeDB) { db.on(mariaReadOnly, mariaFenced) },
			want: []string{
				"SET GLOBAL read_only = ON", mariaReadOnly, "STOP SLAVE",
				`CHANGE MASTER TO MASTER_HOST = '10.0.0.2', MASTER_PORT = 3307, MASTER_USER = 'repl', MASTER_PASSWORD = 'p''w\d', ` +
					"MASTER_USE_GTID = current_pos, MASTER_SSL = 0, MASTER_HEARTBEAT_PERIOD = 0.500, MASTER_CONNECT_RETRY = 2",
				"START SLAVE",
			}},
		{name: "mariadb tls", flavor: mariadb, run: replicate(tlsSrc),
			setup: func(db *fakeDB) { db.on(mariaReadOnly, mariaFenced) },
			want: []string{
				"SET GLOBAL read_only = ON", mariaReadOnly, "STOP SLAVE",
				"CHANGE MASTER TO MASTER_HOST = 'db-1.example', MASTER_PORT = 3306, MASTER_USER = 'repl', MASTER_PASSWORD = 'pw', " +
					"MASTER_USE_GTID = current_pos, MASTER_SSL = 1",
				"START SLAVE",
			}},
		{name: "fence fails: nothing changed", flavor: mariadb, run: replicate(src),
			setup:   func(db *fakeDB) { db.on(mariaReadOnly, mariaWritable) },
			want:    []string{"SET GLOBAL read_only = ON", mariaReadOnly},
			wantErr: ErrFenceNotInEffect},
		{name: "missing host", flavor: mariadb, run: replicate(Source{User: "repl"}), wantErr: ErrInvalidArgument},
		{name: "bad port", flavor: mysql80, run: replicate(Source{Host: "h", User: "u", Port: 70000}), wantErr: ErrInvalidArgument},
		{name: "NUL in password", flavor: mysql80, run: replicate(Source{Host: "h", User: "u", Password: "a\x00b"}), wantErr: ErrInvalidArgument},
	})
}

func TestSetSemiSyncSQL(t *testing.T) {
	semi := func(primary, replica bool) func(ctx context.Context, i *Instance) error {
		return func(ctx context.Context, i *Instance) error { return i.SetSemiSync(ctx, primary, replica) }
	}
	vars := func(v string) fakeResponse {
		return table("semi_sync_variables", "semi_sync_status").row(v, "NULL").ok()
	}
	runSQLCases(t, []sqlCase{
		{name: "mysql 8.0.26+ new plugins, replica unchanged", flavor: mysql80, run: semi(true, false),
			setup: func(db *fakeDB) {
				db.on("SELECT (", vars("rpl_semi_sync_source_enabled=OFF,rpl_semi_sync_replica_enabled=OFF"))
			},
			want: []string{"SELECT " + mysqlSemi80, "SET GLOBAL rpl_semi_sync_source_enabled = ON", "SET GLOBAL rpl_semi_sync_replica_enabled = OFF"}},
		{name: "mysql 8.0.26+ old plugins loaded", flavor: mysql80, run: semi(false, true),
			setup: func(db *fakeDB) {
				db.on("SELECT (", vars("rpl_semi_sync_master_enabled=ON,rpl_semi_sync_slave_enabled=ON"))
			},
			want: []string{"SELECT " + mysqlSemi80, "SET GLOBAL rpl_semi_sync_master_enabled = OFF", "SET GLOBAL rpl_semi_sync_slave_enabled = ON"}},
		{name: "mysql 8.0.25 replica enabled restarts running IO thread", flavor: mysql25, run: semi(false, true),
			setup: func(db *fakeDB) {
				db.on("SELECT (", vars("rpl_semi_sync_master_enabled=OFF,rpl_semi_sync_slave_enabled=OFF")).
					on("SHOW REPLICA STATUS", mysqlReplica("Yes", "Yes", "", "0", ""))
			},
			want: []string{"SELECT " + mysqlSemi25, "SET GLOBAL rpl_semi_sync_master_enabled = OFF", "SET GLOBAL rpl_semi_sync_slave_enabled = ON",
				"SHOW REPLICA STATUS", "STOP REPLICA IO_THREAD", "START REPLICA IO_THREAD"}},
		{name: "mysql plugins not loaded", flavor: mysql80, run: semi(true, true),
			setup:   func(db *fakeDB) { db.on("SELECT (", vars("NULL")) },
			want:    []string{"SELECT " + mysqlSemi80},
			wantErr: ErrNotSupported},
		{name: "mariadb replica changed on a replica", flavor: mariadb, run: semi(false, true),
			setup: func(db *fakeDB) {
				db.on("SELECT CONCAT_WS(", vars("rpl_semi_sync_master_enabled=OFF,rpl_semi_sync_slave_enabled=OFF")).
					on("SHOW ALL SLAVES STATUS", mariaReplica("Yes", "Yes", "0-1-3", "0", ""))
			},
			want: []string{"SELECT " + mariaSemi, "SET GLOBAL rpl_semi_sync_master_enabled = OFF", "SET GLOBAL rpl_semi_sync_slave_enabled = ON",
				"SHOW ALL SLAVES STATUS", "STOP SLAVE IO_THREAD", "START SLAVE IO_THREAD"}},
		{name: "mariadb replica changed on a non-replica", flavor: mariadb, run: semi(true, false),
			setup: func(db *fakeDB) {
				db.on("SELECT CONCAT_WS(", vars("rpl_semi_sync_master_enabled=OFF,rpl_semi_sync_slave_enabled=ON"))
			},
			want: []string{"SELECT " + mariaSemi, "SET GLOBAL rpl_semi_sync_master_enabled = ON", "SET GLOBAL rpl_semi_sync_slave_enabled = OFF",
				"SHOW ALL SLAVES STATUS"}},
		{name: "mariadb second call changes nothing", flavor: mariadb, run: semi(true, true),
			setup: func(db *fakeDB) {
				db.on("SELECT CONCAT_WS(", vars("rpl_semi_sync_master_enabled=ON,rpl_semi_sync_slave_enabled=ON"))
			},
			want: []string{"SELECT " + mariaSemi, "SET GLOBAL rpl_semi_sync_master_enabled = ON", "SET GLOBAL rpl_semi_sync_slave_enabled = ON"}},
	})
}

func TestKillClientConnectionsSQL(t *testing.T) {
	processes := table("Id", "User", "Host", "db", "Command", "Time", "State", "Info").
		row("1", "system user", "", "NULL", "Daemon", "10", "InnoDB purge coordinator", "NULL").
		row("5", "event_scheduler", "localhost", "NULL", "Daemon", "10", "Waiting on empty queue", "NULL").
		row("7", "repl", "10.0.0.3:4000", "NULL", "Binlog Dump GTID", "10", "Source has sent all binlog", "NULL").
		row("8", "system user", "", "NULL", "Connect", "10", "Waiting for source to send event", "NULL").
		row("9", "system user", "", "NULL", "Slave_SQL", "10", "Slave has read all relay log", "NULL").
		row("10", "failoverd", "10.0.0.9:5000", "NULL", "Query", "0", "starting", "SHOW PROCESSLIST").
		row("11", "failoverd", "10.0.0.9:5001", "NULL", "Sleep", "3", "", "NULL").
		row("12", "app", "10.0.1.1:6000", "app", "Sleep", "1", "", "NULL").
		row("13", "app", "10.0.1.1:6001", "app", "Query", "0", "updating", "UPDATE t SET v=1").
		row("14", "unauthenticated user", "10.0.1.2:6002", "NULL", "Connect", "0", "login", "NULL").
		row("15", "failoverd", "10.0.0.8:5000", "NULL", "Sleep", "30", "", "NULL"). // another daemon/admin: killed
		row("16", "app", "10.0.1.1:6003", "app", "Killed", "0", "", "NULL").
		row("17", "app", "10.0.1.1:6004", "app", "Sleep", "0", "", "NULL").
		ok()
	for _, f := range []Flavor{mysql80, mariadb} {
		t.Run(f.Distribution, func(t *testing.T) {
			inst, db, _ := newFake(f)
			inst.ids.add(10)
			inst.ids.add(11)
			inst.ids.add(12) // a stale id of ours, now reused by the server for "app"
			db.on("SHOW PROCESSLIST", processes).on("KILL CONNECTION 17", fails(serverErr(1094, "Unknown thread id: 17")))
			killed, err := inst.KillClientConnections(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"SHOW PROCESSLIST", "KILL CONNECTION 12", "KILL CONNECTION 13", "KILL CONNECTION 14", "KILL CONNECTION 15", "KILL CONNECTION 17"}
			if !slices.Equal(db.stmts, want) {
				t.Fatalf("statements:\n got  %q\n want %q", db.stmts, want)
			}
			if killed != 4 {
				t.Fatalf("killed = %d, want 4 (17 had already gone)", killed)
			}
		})
	}
}

func TestKillClientConnectionsError(t *testing.T) {
	inst, db, _ := newFake(mariadb)
	db.on("SHOW PROCESSLIST", table("Id", "User", "Command").row("3", "app", "Sleep").row("4", "app", "Sleep").ok()).
		on("KILL CONNECTION 4", fails(serverErr(1095, "You are not owner of thread 4")))
	killed, err := inst.KillClientConnections(context.Background())
	if err == nil || killed != 1 || !strings.Contains(err.Error(), "kill 4") {
		t.Fatalf("KillClientConnections = %d, %v; want 1 and an error naming kill 4", killed, err)
	}
}

// On MySQL a session the account may not kill (a SYSTEM_USER account's,
// error 1095) is spared and the others still killed; a busy one (not Sleep)
// is reported with ErrSessionsNotKilled (super_read_only stops it, but a
// semi-sync wait must not be released while it may be committing). On MariaDB, whose only fence read_only such a session
// might write through, it stays an error (TestKillClientConnectionsError).
func TestKillClientConnectionsSparesWhatItMayNotKillOnMySQL(t *testing.T) {
	processes := func(rootCommand string) fakeResponse {
		return table("Id", "User", "Command").row("2", "root", "Sleep").row("3", "root", rootCommand).row("4", "app", "Sleep").ok()
	}
	denied := fails(serverErr(1095, "You are not owner of thread"))
	inst, db, _ := newFake(mysql84)
	db.on("SHOW PROCESSLIST", processes("Query")).on("KILL CONNECTION 2", denied).on("KILL CONNECTION 3", denied)
	killed, err := inst.KillClientConnections(context.Background())
	if !errors.Is(err, ErrSessionsNotKilled) || killed != 1 || !strings.Contains(err.Error(), "3 (root, Query)") || strings.Contains(err.Error(), "2 (root") {
		t.Fatalf("KillClientConnections = %d, %v; want 1 killed and ErrSessionsNotKilled naming the busy 3 only", killed, err)
	}
	if want := []string{"SHOW PROCESSLIST", "KILL CONNECTION 2", "KILL CONNECTION 3", "KILL CONNECTION 4"}; !slices.Equal(db.stmts, want) {
		t.Fatalf("statements %q, want %q", db.stmts, want)
	}
	// Idle privileged sessions only: nothing can be committing there.
	inst, db, _ = newFake(mysql84)
	db.on("SHOW PROCESSLIST", processes("Sleep")).on("KILL CONNECTION 2", denied).on("KILL CONNECTION 3", denied)
	if killed, err := inst.KillClientConnections(context.Background()); err != nil || killed != 1 {
		t.Fatalf("KillClientConnections with idle privileged sessions = %d, %v; want 1, nil", killed, err)
	}
}

func TestWaitRelayDrainedSQL(t *testing.T) {
	drain := func(target gtid.Set, timeout time.Duration) func(ctx context.Context, i *Instance) error {
		return func(ctx context.Context, i *Instance) error { return i.WaitRelayDrained(ctx, target, timeout) }
	}
	mysqlTarget := gtid.MustParse(gtid.MySQL, uuidB+":1-3")
	mariaTarget := gtid.MustParse(gtid.MariaDB, "0-1-12,0-2-9,1-5-4")
	runSQLCases(t, []sqlCase{
		{name: "mysql reached", flavor: mysql80, run: drain(gtid.Set{}, 30*time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlReplica("Yes", "Yes", uuidA+":1-10", "0", "")).on("SELECT WAIT", waitResult("0"))
			},
			want: []string{"SHOW REPLICA STATUS", "SELECT WAIT_FOR_EXECUTED_GTID_SET('" + uuidA + ":1-10', 1) AS result"}},
		{name: "mysql target joins retrieved", flavor: mysql80, run: drain(mysqlTarget, 30*time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlReplica("No", "Yes", uuidA+":1-10,\n"+uuidB+":1", "0", "")).on("SELECT WAIT", waitResult("0"))
			},
			want: []string{"SHOW REPLICA STATUS", "SELECT WAIT_FOR_EXECUTED_GTID_SET('" + uuidA + ":1-10," + uuidB + ":1-3', 1) AS result"}},
		{name: "mysql stopped SQL thread restarted once", flavor: mysql80, run: drain(gtid.Set{}, 30*time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlReplica("Yes", "No", uuidA+":1-10", "0", ""), mysqlReplica("Yes", "No", uuidA+":1-10", "0", "")).
					on("SELECT WAIT", waitResult("1"), waitResult("0"))
			},
			want: []string{"SHOW REPLICA STATUS", "START REPLICA SQL_THREAD", "SELECT WAIT_FOR_EXECUTED_GTID_SET('" + uuidA + ":1-10', 1) AS result",
				"SHOW REPLICA STATUS", "SELECT WAIT_FOR_EXECUTED_GTID_SET('" + uuidA + ":1-10', 1) AS result"}},
		{name: "mysql SQL error", flavor: mysql80, run: drain(gtid.Set{}, 30*time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlReplica("Yes", "No", uuidA+":1-10", "1062", "Duplicate entry"))
			},
			want:    []string{"SHOW REPLICA STATUS"},
			wantErr: ErrReplicationError},
		{name: "mysql SQL error of a worker: its own message is read", flavor: mysql80,
			run: func(ctx context.Context, i *Instance) error {
				err := i.WaitRelayDrained(ctx, gtid.Set{}, 30*time.Second)
				if err != nil && !strings.Contains(err.Error(), "Duplicate entry '7' for key 't.PRIMARY' (Worker 1 failed executing transaction 'x:2'") {
					return fmt.Errorf("error names the coordinator, not the worker's cause: %w", err)
				}
				return err
			},
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlReplica("Yes", "No", uuidA+":1-10", "1062",
					"Coordinator stopped because there were error(s) in the worker(s). The most recent failure being: Worker 1 failed executing transaction")).
					on("SELECT LAST_ERROR_MESSAGE", table("message").row("Worker 1 failed executing transaction 'x:2' at source log binlog.000001, end_log_pos 601; Duplicate entry '7' for key 't.PRIMARY'").ok())
			},
			want: []string{"SHOW REPLICA STATUS", "SELECT LAST_ERROR_MESSAGE AS message FROM performance_schema.replication_applier_status_by_worker " +
				"WHERE LAST_ERROR_NUMBER <> 0 ORDER BY LAST_ERROR_TIMESTAMP DESC LIMIT 1"},
			wantErr: ErrReplicationError},
		{name: "mysql SQL error of a worker, its table unreadable: the coordinator's message stays", flavor: mysql80, run: drain(gtid.Set{}, 30*time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlReplica("Yes", "No", uuidA+":1-10", "1062", "Coordinator stopped because there were error(s) in the worker(s).")).
					on("SELECT LAST_ERROR_MESSAGE", fakeResponse{err: serverErr(1142, "SELECT command denied")})
			},
			want: []string{"SHOW REPLICA STATUS", "SELECT LAST_ERROR_MESSAGE AS message FROM performance_schema.replication_applier_status_by_worker " +
				"WHERE LAST_ERROR_NUMBER <> 0 ORDER BY LAST_ERROR_TIMESTAMP DESC LIMIT 1"},
			wantErr: ErrReplicationError},
		{name: "mysql SQL error appears while waiting", flavor: mysql80, run: drain(gtid.Set{}, 30*time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlReplica("Yes", "Yes", uuidA+":1-10", "0", ""), mysqlReplica("Yes", "No", uuidA+":1-10", "1062", "Duplicate entry")).
					on("SELECT WAIT", waitResult("1"))
			},
			want:    []string{"SHOW REPLICA STATUS", "SELECT WAIT_FOR_EXECUTED_GTID_SET('" + uuidA + ":1-10', 1) AS result", "SHOW REPLICA STATUS"},
			wantErr: ErrReplicationError},
		{name: "mysql timeout: slices shrink, SQL thread restarted only once", flavor: mysql80, run: drain(gtid.Set{}, 2500*time.Millisecond),
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlReplica("Yes", "No", uuidA+":1-10", "0", "")).on("SELECT WAIT", waitResult("1"))
			},
			want: []string{
				"SHOW REPLICA STATUS", "START REPLICA SQL_THREAD", "SELECT WAIT_FOR_EXECUTED_GTID_SET('" + uuidA + ":1-10', 1) AS result",
				"SHOW REPLICA STATUS", "SELECT WAIT_FOR_EXECUTED_GTID_SET('" + uuidA + ":1-10', 1) AS result",
				"SHOW REPLICA STATUS", "SELECT WAIT_FOR_EXECUTED_GTID_SET('" + uuidA + ":1-10', 1) AS result",
				"SHOW REPLICA STATUS",
			},
			wantErr: ErrDrainTimeout},
		{name: "mysql not a replica", flavor: mysql80, run: drain(gtid.Set{}, time.Second),
			want: []string{"SHOW REPLICA STATUS"}, wantErr: ErrNotReplica},
		{name: "mysql NULL wait result", flavor: mysql80, run: drain(gtid.Set{}, time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlReplica("Yes", "Yes", "", "0", "")).on("SELECT WAIT", waitResult("NULL"))
			},
			want:    []string{"SHOW REPLICA STATUS", "SELECT WAIT_FOR_EXECUTED_GTID_SET('', 1) AS result"},
			wantErr: errAny},
		{name: "mariadb reached", flavor: mariadb, run: drain(gtid.Set{}, 30*time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW ALL SLAVES STATUS", mariaReplica("Yes", "Yes", "0-1-17", "0", "")).on("SELECT MASTER_GTID_WAIT", waitResult("0"))
			},
			want: []string{"SHOW ALL SLAVES STATUS", "SELECT MASTER_GTID_WAIT('0-1-17', 1.000) AS result"}},
		{name: "mariadb target: one triple per domain, highest seq", flavor: mariadb, run: drain(mariaTarget, 30*time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW ALL SLAVES STATUS", mariaReplica("Connecting", "Yes", "0-1-10,2-3-7", "0", "")).on("SELECT MASTER_GTID_WAIT", waitResult("0"))
			},
			want: []string{"SHOW ALL SLAVES STATUS", "SELECT MASTER_GTID_WAIT('0-1-12,1-5-4,2-3-7', 1.000) AS result"}},
		{name: "mariadb timeout", flavor: mariadb, run: drain(gtid.Set{}, 1500*time.Millisecond),
			setup: func(db *fakeDB) {
				db.on("SHOW ALL SLAVES STATUS", mariaReplica("Yes", "Yes", "0-1-17", "0", "")).on("SELECT MASTER_GTID_WAIT", waitResult("-1"))
			},
			want: []string{
				"SHOW ALL SLAVES STATUS", "SELECT MASTER_GTID_WAIT('0-1-17', 1.000) AS result",
				"SHOW ALL SLAVES STATUS", "SELECT MASTER_GTID_WAIT('0-1-17', 0.500) AS result",
				"SHOW ALL SLAVES STATUS",
			},
			wantErr: ErrDrainTimeout},
		{name: "mariadb SQL error", flavor: mariadb, run: drain(gtid.Set{}, 30*time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW ALL SLAVES STATUS", mariaReplica("Yes", "No", "0-1-17", "1950", "An attempt was made to binlog GTID 0-2-5"))
			},
			want:    []string{"SHOW ALL SLAVES STATUS"},
			wantErr: ErrReplicationError},
		{name: "mariadb named connection only: not a replica", flavor: mariadb, run: drain(gtid.Set{}, time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW ALL SLAVES STATUS", table("Connection_name", "Slave_IO_Running", "Slave_SQL_Running").row("other", "Yes", "Yes").ok())
			},
			want: []string{"SHOW ALL SLAVES STATUS"}, wantErr: ErrNotReplica},
		{name: "mariadb both threads stopped: the applier is not started", flavor: mariadb, run: drain(gtid.Set{}, 30*time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW ALL SLAVES STATUS", mariaReplicaPos("No", "No", "0-1-17", "0-1-12"))
			},
			want:    []string{"SHOW ALL SLAVES STATUS"},
			wantErr: ErrApplierStopped},
		{name: "mariadb both threads stopped after everything was applied", flavor: mariadb, run: drain(gtid.MustParse(gtid.MariaDB, "0-1-15"), 30*time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW ALL SLAVES STATUS", mariaReplicaPos("No", "No", "0-1-17", "0-1-17"))
			},
			want: []string{"SHOW ALL SLAVES STATUS"}},
		{name: "mariadb both stopped, target beyond what was applied", flavor: mariadb, run: drain(gtid.MustParse(gtid.MariaDB, "0-1-20"), 30*time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW ALL SLAVES STATUS", mariaReplicaPos("No", "No", "0-1-17", "0-1-17"))
			},
			want:    []string{"SHOW ALL SLAVES STATUS"},
			wantErr: ErrApplierStopped},
		{name: "mysql both threads stopped: the applier is started (relay log kept)", flavor: mysql80, run: drain(gtid.Set{}, 30*time.Second),
			setup: func(db *fakeDB) {
				db.on("SHOW REPLICA STATUS", mysqlReplica("No", "No", uuidA+":1-10", "0", "")).on("SELECT WAIT", waitResult("0"))
			},
			want: []string{"SHOW REPLICA STATUS", "START REPLICA SQL_THREAD", "SELECT WAIT_FOR_EXECUTED_GTID_SET('" + uuidA + ":1-10', 1) AS result"}},
		{name: "wrong target flavor", flavor: mariadb, run: drain(mysqlTarget, time.Second), wantErr: ErrInvalidArgument},
	})
}

// errAny as sqlCase.wantErr accepts any non-nil error.
var errAny = errors.New("any error")

func TestCloneFromSQL(t *testing.T) {
	donor := Donor{Host: "10.0.0.1", User: "clone", Password: "clone-pw", TLS: true}
	clone := func(d Donor) func(ctx context.Context, i *Instance) error {
		return func(ctx context.Context, i *Instance) error { return i.CloneFrom(ctx, d, time.Hour) }
	}
	const cloneStatus = "SELECT STATE AS state, ERROR_NO AS error_no, ERROR_MESSAGE AS error_message FROM performance_schema.clone_status"
	const list = "SET GLOBAL clone_valid_donor_list = '10.0.0.1:3306'"
	cloneStmts := []string{mysqlReadOnly, "SHOW REPLICA STATUS", list, "SET GLOBAL super_read_only = OFF",
		"CLONE INSTANCE FROM 'clone'@'10.0.0.1':3306 IDENTIFIED BY 'clone-pw' REQUIRE SSL"}
	// refence is what sets super_read_only again, read back.
	refence := []string{"SET GLOBAL super_read_only = ON", mysqlReadOnly}
	halfFenced := table("read_only", "super_read_only").row("1", "0").ok()
	runSQLCases(t, []sqlCase{
		{name: "mysql 3707 is success, fenced again", flavor: mysql80, run: clone(donor),
			setup: func(db *fakeDB) {
				db.on(mysqlReadOnly, mysqlFenced).on("CLONE INSTANCE", fails(serverErr(3707, "Restart server failed (mysqld is not managed by supervisor process).")))
			},
			want: slices.Concat(cloneStmts, refence)},
		{name: "mysql 3707 with the server already gone is success", flavor: mysql80, run: clone(donor),
			setup: func(db *fakeDB) {
				db.on(mysqlReadOnly, mysqlFenced).on("CLONE INSTANCE", fails(serverErr(3707, "Restart server failed (mysqld is not managed by supervisor process).")))
				db.on("SET GLOBAL super_read_only = ON", fails(mysql.ErrInvalidConn))
			},
			want: slices.Concat(cloneStmts, refence[:1])},
		{name: "mysql session lost, restarted, completed, fenced", flavor: mysql80, run: clone(donor),
			setup: func(db *fakeDB) {
				db.on(mysqlReadOnly, mysqlFenced).on("CLONE INSTANCE", fails(mysql.ErrInvalidConn)).
					on(cloneStatus, fails(errors.New("dial tcp: connection refused")),
						table("state", "error_no", "error_message").row("In Progress", "0", "").ok(),
						table("state", "error_no", "error_message").row("Completed", "0", "").ok())
			},
			want: slices.Concat(cloneStmts, []string{cloneStatus, cloneStatus, cloneStatus}, refence)},
		{name: "mysql session lost, clone failed, fenced again", flavor: mysql80, run: clone(donor),
			setup: func(db *fakeDB) {
				db.on(mysqlReadOnly, mysqlFenced).on("CLONE INSTANCE", fails(mysql.ErrInvalidConn)).
					on(cloneStatus, table("state", "error_no", "error_message").row("Failed", "3862", "Clone Donor Error").ok())
			},
			want:    slices.Concat(cloneStmts, []string{cloneStatus}, refence),
			wantErr: ErrCloneFailed},
		{name: "mysql CLONE refused: super_read_only set again", flavor: mysql80, run: clone(donor),
			setup: func(db *fakeDB) {
				db.on(mysqlReadOnly, mysqlFenced).on("CLONE INSTANCE", fails(serverErr(3869, "Clone system configuration: donor unreachable")))
			},
			want:    slices.Concat(cloneStmts, refence),
			wantErr: errAny},
		{name: "mysql read_only without super_read_only: nothing to lift", flavor: mysql80, run: clone(donor),
			setup: func(db *fakeDB) {
				db.on(mysqlReadOnly, halfFenced).on("CLONE INSTANCE", fails(mysql.ErrInvalidConn)).
					on(cloneStatus, table("state", "error_no", "error_message").row("Completed", "0", "").ok())
			},
			// The fence is read back after the restart: the fake still answers half-fenced.
			want:    slices.Concat([]string{mysqlReadOnly, "SHOW REPLICA STATUS", list, cloneStmts[4], cloneStatus}, refence),
			wantErr: ErrFenceNotInEffect},
		{name: "mysql no plugin", flavor: mysql80, run: clone(Donor{Host: "10.0.0.1", Port: 3310, User: "clone", Password: "pw"}),
			setup: func(db *fakeDB) {
				db.on(mysqlReadOnly, mysqlFenced).on("SET GLOBAL clone_valid_donor_list", fails(serverErr(1193, "Unknown system variable 'clone_valid_donor_list'")))
			},
			want:    []string{mysqlReadOnly, "SHOW REPLICA STATUS", "SET GLOBAL clone_valid_donor_list = '10.0.0.1:3310'"},
			wantErr: ErrNotSupported},
		{name: "mysql writable recipient refused", flavor: mysql80, run: clone(donor),
			setup:   func(db *fakeDB) { db.on(mysqlReadOnly, mysqlWritable) },
			want:    []string{mysqlReadOnly},
			wantErr: ErrNotFenced},
		{name: "mysql replicating recipient refused", flavor: mysql80, run: clone(donor),
			setup: func(db *fakeDB) {
				db.on(mysqlReadOnly, mysqlFenced).on("SHOW REPLICA STATUS", mysqlReplica("No", "Yes", "", "0", ""))
			},
			want:    []string{mysqlReadOnly, "SHOW REPLICA STATUS"},
			wantErr: ErrReplicaRunning},
		{name: "mariadb not supported", flavor: mariadb, run: clone(donor), wantErr: ErrNotSupported},
	})
}

// A clone that never reports an outcome (a donor or recipient that stopped
// answering) ends at CloneFrom's own timeout even under a context without a
// deadline.
func TestCloneFromGivesUpAtItsTimeout(t *testing.T) {
	inst, db, _ := newFake(mysql80)
	db.on(mysqlReadOnly, mysqlFenced).on("CLONE INSTANCE", fails(mysql.ErrInvalidConn)).
		on("SELECT STATE", table("state", "error_no", "error_message").row("In Progress", "0", "").ok())
	inst.sleep = func(ctx context.Context, _ time.Duration) error { <-ctx.Done(); return ctx.Err() }
	err := inst.CloneFrom(context.Background(), Donor{Host: "h", User: "clone", Password: "pw"}, time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CloneFrom = %v; want an error wrapping context.DeadlineExceeded", err)
	}
	for _, timeout := range []time.Duration{0, -time.Second} {
		if err := inst.CloneFrom(context.Background(), Donor{Host: "h", User: "clone"}, timeout); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CloneFrom with timeout %v = %v; want ErrInvalidArgument", timeout, err)
		}
	}
}

func TestCloneFromMariaDBNamesManualProcedure(t *testing.T) {
	inst, _, _ := newFake(mariadb)
	err := inst.CloneFrom(context.Background(), Donor{Host: "h", User: "u"}, time.Hour)
	for _, want := range []string{"mariadb-backup --backup", "--prepare", "MASTER_USE_GTID=slave_pos"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CloneFrom error %v does not mention %q", err, want)
		}
	}
}

func TestStatusSQL(t *testing.T) {
	for _, tc := range []struct {
		f    Flavor
		want []string
	}{
		{mysql80, []string{mysqlStatus, "SHOW REPLICA STATUS"}},
		{mariadb, []string{mariaStatus, "SHOW ALL SLAVES STATUS"}},
	} {
		t.Run(tc.f.Distribution, func(t *testing.T) {
			inst, db, _ := newFake(tc.f)
			db.on("SELECT @@GLOBAL.version", table("version", "version_comment").row(tc.f.Version, tc.f.VersionComment).ok())
			if _, err := inst.Status(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(db.stmts, tc.want) {
				t.Fatalf("statements:\n got  %q\n want %q", db.stmts, tc.want)
			}
		})
	}
}

// MySQL's SHOW REPLICA STATUS has no heartbeat columns: Status takes them
// from performance_schema (read with the variables) into Replica, so the
// poller can see a hung source before replica_net_timeout; without a
// channel (NULL) they stay zero and silence stays unknown.
func TestStatusMySQLHeartbeats(t *testing.T) {
	for _, tc := range []struct {
		name             string
		period, received string
		replica          bool
		wantPeriod       time.Duration
		wantReceived     uint64
	}{
		{"replica", "0.500", "41", true, 500 * time.Millisecond, 41},
		{"heartbeats off", "0.000", "0", true, 0, 0},
		{"not a replica", "NULL", "NULL", false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, db, _ := newFake(mysql84)
			db.on("SELECT @@GLOBAL.version", table("version", "version_comment", "heartbeat_period", "received_heartbeats").
				row(mysql84.Version, mysql84.VersionComment, tc.period, tc.received).ok())
			rep := table("Replica_IO_Running", "Replica_SQL_Running", "Source_Host", "Source_Port", "Retrieved_Gtid_Set")
			if tc.replica {
				rep = rep.row("Yes", "Yes", "10.0.0.1", "3306", "")
			}
			db.on("SHOW REPLICA STATUS", rep.ok())
			st, err := inst.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !tc.replica {
				if st.Replica != nil {
					t.Fatalf("Replica = %+v, want nil", st.Replica)
				}
				return
			}
			if st.Replica.HeartbeatPeriod != tc.wantPeriod || st.Replica.ReceivedHeartbeats != tc.wantReceived {
				t.Errorf("heartbeats = %v, %d; want %v, %d", st.Replica.HeartbeatPeriod, st.Replica.ReceivedHeartbeats, tc.wantPeriod, tc.wantReceived)
			}
		})
	}
}

// fakeBatch is a fakeDB that also answers queryBatch the way a server runs
// a multi-statement request: in order, stopping at the first error.
type fakeBatch struct {
	*fakeDB
	batches [][]string
}

func (b *fakeBatch) queryBatch(ctx context.Context, stmts ...string) ([]*resultSet, error) {
	b.batches = append(b.batches, stmts)
	var out []*resultSet
	for _, s := range stmts {
		rs, err := b.query(ctx, s)
		if err != nil {
			return out, err
		}
		out = append(out, rs)
	}
	return out, nil
}

// On a querier that batches (a StatusOnly instance), Status sends its
// statements in one request (MariaDB: the semi-sync counters through SHOW
// STATUS, the variables from @@GLOBAL), reads the semi-sync state from
// them, and an error names the step that failed.
func TestStatusOneRoundTrip(t *testing.T) {
	version := table("version", "version_comment", "semi_sync_variables").row(mariadb.Version, mariadb.VersionComment,
		"rpl_semi_sync_master_enabled=1,rpl_semi_sync_slave_enabled=0,rpl_semi_sync_master_timeout=30000,"+
			"rpl_semi_sync_master_wait_no_slave=1,rpl_semi_sync_master_wait_point=AFTER_SYNC").ok()
	counters := table("Variable_name", "Value").row("Rpl_semi_sync_master_status", "ON").row("Rpl_semi_sync_slave_status", "OFF").ok()
	for _, tc := range []struct {
		name     string
		failing  string // statement prefix answering an error
		wantStep string // "" = no error
	}{
		{"all answer", "", ""},
		{"variables fail", "SELECT @@GLOBAL.version", "read variables"},
		{"semi-sync status fails", "SHOW GLOBAL STATUS", "read semi-sync status"},
		{"replica status fails", "SHOW ALL SLAVES STATUS", "read replica status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := &fakeBatch{fakeDB: &fakeDB{}}
			if tc.failing != "" {
				fb.on(tc.failing, fakeResponse{err: serverErr(1227, "denied")})
			}
			fb.on("SELECT @@GLOBAL.version", version).on("SHOW GLOBAL STATUS", counters)
			inst := newTestInstance(mariadb, fb)
			st, err := inst.Status(context.Background())
			if len(fb.batches) != 1 || !slices.Equal(fb.batches[0], []string{mariaBatchStatus, mariaSemiStatus, "SHOW ALL SLAVES STATUS"}) {
				t.Fatalf("batches %q", fb.batches)
			}
			switch {
			case tc.wantStep == "" && err != nil:
				t.Fatal(err)
			case tc.wantStep != "" && (err == nil || !strings.Contains(err.Error(), ": "+tc.wantStep+": ")):
				t.Fatalf("error %v, want the step %q", err, tc.wantStep)
			}
			want := SemiSyncStatus{Available: true, PrimaryEnabled: true, PrimaryActive: true, Timeout: 30 * time.Second,
				WaitNoReplica: true, WaitPoint: "AFTER_SYNC", WaitForReplicas: 1}
			if tc.wantStep == "" && st.SemiSync != want {
				t.Errorf("semi-sync %+v, want %+v", st.SemiSync, want)
			}
		})
	}
}

// A relay log seen exhausted twice with nothing applied in between ends the
// drain with an IncompleteError naming what can never be applied, only when
// every applier worker is idle: a worker still applying a fully received
// transaction (the coordinator already says "read all relay log") is slow,
// and the drain keeps waiting.
func TestDrainExhaustedRelayLog(t *testing.T) {
	const (
		readAll     = "Replica has read all relay log; waiting for more updates"
		mysqlState  = "SELECT @@GLOBAL.gtid_executed AS applied"
		mysqlWait10 = "SELECT WAIT_FOR_EXECUTED_GTID_SET('" + uuidA + ":1-10', 1) AS result"
	)
	mysqlRep := table("Channel_Name", "Replica_IO_Running", "Replica_SQL_Running", "Retrieved_Gtid_Set", "Replica_SQL_Running_State", "Last_SQL_Errno").
		row("", "No", "Yes", uuidA+":1-10", readAll, "0").ok()
	mysqlVars := func(db *fakeDB) {
		db.on("SELECT @@GLOBAL.version", table("version", "version_comment", "gtid_executed").row(mysql80.Version, mysql80.VersionComment, uuidA+":1-9").ok())
	}
	// newWaitingFake is newFake where every wait takes a second.
	newWaitingFake := func(f Flavor) (*Instance, *fakeDB) {
		inst, db, clock := newFake(f)
		db.before = func(stmt string) {
			if strings.HasPrefix(stmt, "SELECT WAIT") || strings.HasPrefix(stmt, "SELECT MASTER_GTID_WAIT") {
				clock.advance(time.Second)
			}
		}
		return inst, db
	}
	applier := func(busy string) fakeResponse {
		return table("applied", "busy_workers").row(uuidA+":1-9", busy).ok()
	}
	t.Run("mysql workers idle: incomplete", func(t *testing.T) {
		inst, db := newWaitingFake(mysql80)
		db.on("SHOW REPLICA STATUS", mysqlRep).on(mysqlState, applier("0")).on("SELECT WAIT", waitResult("1"))
		mysqlVars(db)
		err := inst.WaitRelayDrained(context.Background(), gtid.Set{}, 30*time.Second)
		var inc *IncompleteError
		if !errors.As(err, &inc) || !inc.Missing.Equal(gtid.MustParse(gtid.MySQL, uuidA+":10")) {
			t.Fatalf("WaitRelayDrained = %v; want an IncompleteError missing %s:10", err, uuidA)
		}
		want := []string{"SHOW REPLICA STATUS", mysqlState, mysqlWait10, "SHOW REPLICA STATUS", mysqlState}
		if got := db.stmts[:5]; !slices.Equal(prefixes(got, want), want) {
			t.Fatalf("statements %q, want them to start with %q", db.stmts, want)
		}
	})
	t.Run("mysql worker busy: still waiting, then drained", func(t *testing.T) {
		inst, db := newWaitingFake(mysql80)
		db.on("SHOW REPLICA STATUS", mysqlRep).on(mysqlState, applier("1")).on("SELECT WAIT", waitResult("1"), waitResult("1"), waitResult("1"), waitResult("0"))
		mysqlVars(db)
		if err := inst.WaitRelayDrained(context.Background(), gtid.Set{}, 30*time.Second); err != nil {
			t.Fatalf("WaitRelayDrained with a busy worker = %v; want drained once the worker is done", err)
		}
		if n := strings.Count(strings.Join(db.stmts, "\n"), "SELECT @@GLOBAL.version"); n != 0 {
			t.Fatalf("the executed set was read for an incompleteness check %d times while a worker was busy", n)
		}
	})
	t.Run("mysql workers idle but something applied in between: not yet", func(t *testing.T) {
		inst, db := newWaitingFake(mysql80)
		db.on("SHOW REPLICA STATUS", mysqlRep).
			on(mysqlState, table("applied", "busy_workers").row(uuidA+":1-8", "0").ok(), applier("0"), applier("0")).
			on("SELECT WAIT", waitResult("1"))
		mysqlVars(db)
		err := inst.WaitRelayDrained(context.Background(), gtid.Set{}, 30*time.Second)
		if !errors.Is(err, ErrIncompleteTransaction) || strings.Count(strings.Join(db.stmts, "\n"), mysqlState) != 3 {
			t.Fatalf("WaitRelayDrained = %v after %q; want incomplete on the third look", err, db.stmts)
		}
	})
	mariaRep := table("Connection_name", "Slave_IO_Running", "Slave_SQL_Running", "Gtid_IO_Pos", "Gtid_Slave_Pos", "Slave_SQL_Running_State", "Last_SQL_Errno").
		row("", "No", "Yes", "0-1-17", "0-1-16", "Slave has read all relay log; waiting for more updates", "0").ok()
	const mariaState = "SELECT @@GLOBAL.gtid_slave_pos AS applied"
	mariaVars := table("version", "version_comment", "gtid_binlog_state", "gtid_current_pos").row(mariadb.Version, mariadb.VersionComment, "0-1-16", "0-1-16").ok()
	t.Run("mariadb workers idle, gtid_slave_pos unchanged: incomplete", func(t *testing.T) {
		inst, db := newWaitingFake(mariadb)
		db.on("SHOW ALL SLAVES STATUS", mariaRep).on(mariaState, table("applied", "busy_workers").row("0-1-16", "0").ok()).
			on("SELECT MASTER_GTID_WAIT", waitResult("-1")).on("SELECT @@GLOBAL.version", mariaVars)
		err := inst.WaitRelayDrained(context.Background(), gtid.Set{}, 30*time.Second)
		var inc *IncompleteError
		if !errors.As(err, &inc) || !inc.Missing.Equal(gtid.MustParse(gtid.MariaDB, "0-1-17..17")) {
			t.Fatalf("WaitRelayDrained = %v; want an IncompleteError missing 0-1-17..17", err)
		}
	})
	t.Run("mariadb parallel worker busy: still waiting, then drained", func(t *testing.T) {
		inst, db := newWaitingFake(mariadb)
		db.on("SHOW ALL SLAVES STATUS", mariaRep).on(mariaState, table("applied", "busy_workers").row("0-1-16", "1").ok()).
			on("SELECT MASTER_GTID_WAIT", waitResult("-1"), waitResult("-1"), waitResult("-1"), waitResult("0")).on("SELECT @@GLOBAL.version", mariaVars)
		if err := inst.WaitRelayDrained(context.Background(), gtid.Set{}, 30*time.Second); err != nil {
			t.Fatalf("WaitRelayDrained with a busy worker = %v; want drained once the worker is done", err)
		}
	})
}

// prefixes returns got[i] cut to len(want[i]) (statements compared by prefix).
func prefixes(got, want []string) []string {
	out := make([]string, len(got))
	for i, g := range got {
		if i < len(want) && len(g) > len(want[i]) {
			g = g[:len(want[i])]
		}
		out[i] = g
	}
	return out
}
