package mysqlctl

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
)

// mariadbAllSlavesCols are the SHOW ALL SLAVES STATUS columns of MariaDB
// 10.11.19 (captured on this machine), in server order.
var mariadbAllSlavesCols = []string{
	"Connection_name", "Slave_SQL_State", "Slave_IO_State", "Master_Host", "Master_User", "Master_Port", "Connect_Retry",
	"Master_Log_File", "Read_Master_Log_Pos", "Relay_Log_File", "Relay_Log_Pos", "Relay_Master_Log_File",
	"Slave_IO_Running", "Slave_SQL_Running", "Replicate_Do_DB", "Replicate_Ignore_DB", "Replicate_Do_Table",
	"Replicate_Ignore_Table", "Replicate_Wild_Do_Table", "Replicate_Wild_Ignore_Table", "Last_Errno", "Last_Error",
	"Skip_Counter", "Exec_Master_Log_Pos", "Relay_Log_Space", "Until_Condition", "Until_Log_File", "Until_Log_Pos",
	"Master_SSL_Allowed", "Master_SSL_CA_File", "Master_SSL_CA_Path", "Master_SSL_Cert", "Master_SSL_Cipher",
	"Master_SSL_Key", "Seconds_Behind_Master", "Master_SSL_Verify_Server_Cert", "Last_IO_Errno", "Last_IO_Error",
	"Last_SQL_Errno", "Last_SQL_Error", "Replicate_Ignore_Server_Ids", "Master_Server_Id", "Master_SSL_Crl",
	"Master_SSL_Crlpath", "Using_Gtid", "Gtid_IO_Pos", "Replicate_Do_Domain_Ids", "Replicate_Ignore_Domain_Ids",
	"Parallel_Mode", "SQL_Delay", "SQL_Remaining_Delay", "Slave_SQL_Running_State", "Slave_DDL_Groups",
	"Slave_Non_Transactional_Groups", "Slave_Transactional_Groups", "Replicate_Rewrite_DB", "Retried_transactions",
	"Max_relay_log_size", "Executed_log_entries", "Slave_received_heartbeats", "Slave_heartbeat_period", "Gtid_Slave_Pos",
}

// mysqlReplicaCols are MySQL 8.0.22+/8.4 SHOW REPLICA STATUS columns.
var mysqlReplicaCols = []string{
	"Replica_IO_State", "Source_Host", "Source_User", "Source_Port", "Connect_Retry", "Source_Log_File",
	"Read_Source_Log_Pos", "Relay_Log_File", "Relay_Log_Pos", "Relay_Source_Log_File", "Replica_IO_Running",
	"Replica_SQL_Running", "Replicate_Do_DB", "Replicate_Ignore_DB", "Replicate_Do_Table", "Replicate_Ignore_Table",
	"Replicate_Wild_Do_Table", "Replicate_Wild_Ignore_Table", "Last_Errno", "Last_Error", "Skip_Counter",
	"Exec_Source_Log_Pos", "Relay_Log_Space", "Until_Condition", "Until_Log_File", "Until_Log_Pos",
	"Source_SSL_Allowed", "Source_SSL_CA_File", "Source_SSL_CA_Path", "Source_SSL_Cert", "Source_SSL_Cipher",
	"Source_SSL_Key", "Seconds_Behind_Source", "Source_SSL_Verify_Server_Cert", "Last_IO_Errno", "Last_IO_Error",
	"Last_SQL_Errno", "Last_SQL_Error", "Replicate_Ignore_Server_Ids", "Source_Server_Id", "Source_UUID",
	"Source_Info_File", "SQL_Delay", "SQL_Remaining_Delay", "Replica_SQL_Running_State", "Source_Retry_Count",
	"Source_Bind", "Last_IO_Error_Timestamp", "Last_SQL_Error_Timestamp", "Source_SSL_Crl", "Source_SSL_Crlpath",
	"Retrieved_Gtid_Set", "Executed_Gtid_Set", "Auto_Position", "Replicate_Rewrite_DB", "Channel_Name",
	"Source_TLS_Version", "Source_public_key_path", "Get_Source_public_key", "Network_Namespace",
}

// statusRow builds a one-row result from column → value ("NULL" = NULL);
// columns not in vals are empty strings. The columns are shuffled so the
// parser cannot depend on their order.
func statusRow(t *testing.T, cols []string, vals map[string]string) *resultSet {
	t.Helper()
	for k := range vals {
		found := false
		for _, c := range cols {
			found = found || c == k
		}
		if !found {
			cols = append(append([]string{}, cols...), k)
		}
	}
	shuffled := append([]string{}, cols...)
	rand.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
	b := table(shuffled...)
	row := make([]string, len(shuffled))
	for i, c := range shuffled {
		row[i] = vals[c]
	}
	return b.row(row...).rs
}

func TestParseReplicaStatus(t *testing.T) {
	tests := []struct {
		name   string
		flavor Flavor
		cols   []string
		vals   map[string]string
		want   ReplicaStatus
	}{
		{
			name: "mariadb running", flavor: mariadb, cols: mariadbAllSlavesCols,
			vals: map[string]string{
				"Connection_name": "", "Slave_IO_State": "Waiting for master to send event", "Master_Host": "127.0.0.1",
				"Master_User": "repl", "Master_Port": "47101", "Connect_Retry": "1", "Slave_IO_Running": "Yes",
				"Slave_SQL_Running": "Yes", "Seconds_Behind_Master": "3", "Last_IO_Errno": "0", "Last_SQL_Errno": "0",
				"Master_Server_Id": "1", "Using_Gtid": "Slave_Pos", "Gtid_IO_Pos": "0-1-6", "Master_SSL_Allowed": "No",
				"Slave_SQL_Running_State":   "Slave has read all relay log; waiting for more updates",
				"Slave_received_heartbeats": "12", "Slave_heartbeat_period": "0.500", "Gtid_Slave_Pos": "0-1-6",
			},
			want: ReplicaStatus{
				IOThread: ThreadYes, SQLThread: ThreadYes, IOState: "Waiting for master to send event",
				SQLState: "Slave has read all relay log; waiting for more updates", SourceHost: "127.0.0.1", SourcePort: 47101,
				SourceUser: "repl", SourceServerID: 1, RetrievedRaw: "0-1-6", GTIDSlavePos: "0-1-6", AutoPosition: true,
				Lag: 3 * time.Second, LagKnown: true, HeartbeatPeriod: 500 * time.Millisecond, ReceivedHeartbeats: 12,
				ConnectRetry: time.Second,
			},
		},
		{
			name: "mariadb source dead, SQL error, lag NULL", flavor: mariadb, cols: mariadbAllSlavesCols,
			vals: map[string]string{
				"Connection_name": "", "Master_Host": "10.0.0.1", "Master_Port": "3306", "Slave_IO_Running": "Connecting",
				"Slave_SQL_Running": "No", "Seconds_Behind_Master": "NULL", "Last_IO_Errno": "2003",
				"Last_IO_Error": "error reconnecting to master", "Last_SQL_Errno": "1950", "Last_SQL_Error": "out-of-order GTID",
				"Using_Gtid": "No", "Gtid_IO_Pos": "", "Master_SSL_Allowed": "Yes",
			},
			want: ReplicaStatus{
				IOThread: ThreadConnecting, SQLThread: ThreadNo, SourceHost: "10.0.0.1", SourcePort: 3306,
				LastIOErrno: 2003, LastIOError: "error reconnecting to master", LastSQLErrno: 1950,
				LastSQLError: "out-of-order GTID", SSL: true,
			},
		},
		{
			name: "mysql running", flavor: mysql80, cols: mysqlReplicaCols,
			vals: map[string]string{
				"Replica_IO_State": "Waiting for source to send event", "Source_Host": "10.0.0.1", "Source_User": "repl",
				"Source_Port": "3306", "Connect_Retry": "10", "Replica_IO_Running": "Yes", "Replica_SQL_Running": "Yes",
				"Seconds_Behind_Source": "0", "Source_SSL_Allowed": "Yes", "Last_IO_Errno": "0", "Last_SQL_Errno": "0",
				"Source_Server_Id": "7", "Source_UUID": uuidA, "Replica_SQL_Running_State": "Replica has read all relay log",
				"Retrieved_Gtid_Set": uuidA + ":5-10", "Executed_Gtid_Set": uuidA + ":1-10,\n" + uuidB + ":1-2",
				"Auto_Position": "1", "Channel_Name": "",
			},
			want: ReplicaStatus{
				IOThread: ThreadYes, SQLThread: ThreadYes, IOState: "Waiting for source to send event",
				SQLState: "Replica has read all relay log", SourceHost: "10.0.0.1", SourcePort: 3306, SourceUser: "repl",
				SourceServerID: 7, SourceUUID: uuidA, RetrievedRaw: uuidA + ":5-10", AutoPosition: true,
				LagKnown: true, ConnectRetry: 10 * time.Second, SSL: true,
			},
		},
		{
			name: "mysql pre-8.0.22 column names (SHOW SLAVE STATUS) still parse", flavor: mysql80,
			cols: []string{"Slave_IO_Running", "Slave_SQL_Running", "Master_Host", "Master_Port", "Seconds_Behind_Master", "Retrieved_Gtid_Set", "Auto_Position"},
			vals: map[string]string{
				"Slave_IO_Running": "No", "Slave_SQL_Running": "Yes", "Master_Host": "h", "Master_Port": "3307",
				"Seconds_Behind_Master": "NULL", "Retrieved_Gtid_Set": "", "Auto_Position": "0",
			},
			want: ReplicaStatus{IOThread: ThreadNo, SQLThread: ThreadYes, SourceHost: "h", SourcePort: 3307},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDialect(tt.flavor)
			got, err := parseReplicaStatus(tt.flavor.Engine, d, statusRow(t, tt.cols, tt.vals))
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatal("nil replica status")
			}
			wantSet := gtid.MustParse(tt.flavor.Engine, tt.want.RetrievedRaw)
			if !got.Retrieved.Equal(wantSet) {
				t.Errorf("Retrieved = %s, want %s", got.Retrieved, wantSet)
			}
			got.Retrieved, tt.want.Retrieved = gtid.Set{}, gtid.Set{}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("parse:\n got  %+v\n want %+v", *got, tt.want)
			}
		})
	}
}

func TestParseReplicaStatusPicksDefaultConnection(t *testing.T) {
	rs := table("Connection_name", "Slave_IO_Running", "Slave_SQL_Running", "Master_Port", "Gtid_IO_Pos").
		row("a-named", "Yes", "Yes", "1111", "5-5-5").
		row("", "No", "No", "2222", "0-1-9").
		row("z-named", "Yes", "Yes", "3333", "").rs
	got, err := parseReplicaStatus(gtid.MariaDB, newDialect(mariadb), rs)
	if err != nil || got == nil || got.SourcePort != 2222 || got.RetrievedRaw != "0-1-9" {
		t.Fatalf("got %+v, %v; want the default connection (port 2222)", got, err)
	}
	none, err := parseReplicaStatus(gtid.MariaDB, newDialect(mariadb), &resultSet{cols: rs.cols})
	if err != nil || none != nil {
		t.Fatalf("empty SHOW ALL SLAVES STATUS = %+v, %v; want nil", none, err)
	}
}

func TestParseReplicaStatusBadGTID(t *testing.T) {
	rs := table("Slave_IO_Running", "Gtid_IO_Pos").row("Yes", "garbage").rs
	if _, err := parseReplicaStatus(gtid.MariaDB, newDialect(mariadb), rs); !errors.Is(err, gtid.ErrParse) {
		t.Fatalf("err = %v, want gtid.ErrParse", err)
	}
}

func TestStatusParsesVariables(t *testing.T) {
	tests := []struct {
		name    string
		flavor  Flavor
		vars    map[string]string
		replica fakeResponse
		check   func(t *testing.T, st Status)
	}{
		{
			name: "mysql fenced primary with semi-sync source", flavor: mysql80,
			vars: map[string]string{
				"version": "8.0.36", "version_comment": "MySQL Community Server - GPL", "server_id": "3",
				"server_uuid": uuidA, "read_only": "1", "super_read_only": "1",
				"gtid_executed":       uuidA + ":1-100,\n" + uuidB + ":1-5",
				"semi_sync_variables": "rpl_semi_sync_source_enabled=ON,rpl_semi_sync_replica_enabled=OFF",
				"semi_sync_status":    "rpl_semi_sync_source_status=ON,rpl_semi_sync_replica_status=OFF",
			},
			replica: noRows,
			check: func(t *testing.T, st Status) {
				want := gtid.MustParse(gtid.MySQL, uuidA+":1-100,"+uuidB+":1-5")
				if st.ServerID != 3 || st.ServerUUID != uuidA || !st.ReadOnly || !st.SuperReadOnly || !st.Fenced() ||
					!st.Executed.Equal(want) || st.Replica != nil || st.Flavor.Distribution != DistMySQL {
					t.Errorf("status = %+v", st)
				}
				if st.SemiSync != (SemiSyncStatus{Available: true, PrimaryEnabled: true, PrimaryActive: true}) {
					t.Errorf("semi-sync = %+v", st.SemiSync)
				}
			},
		},
		{
			name: "mysql read_only without super_read_only is not fenced, no semi-sync plugin", flavor: mysql80,
			vars: map[string]string{
				"version": "8.4.2", "version_comment": "MySQL", "read_only": "1", "super_read_only": "0",
				"gtid_executed": "", "semi_sync_variables": "NULL", "semi_sync_status": "NULL",
			},
			replica: noRows,
			check: func(t *testing.T, st Status) {
				if st.Fenced() || !st.Executed.IsEmpty() || st.SemiSync.Available {
					t.Errorf("status = %+v", st)
				}
			},
		},
		{
			name: "mariadb replica", flavor: mariadb,
			vars: map[string]string{
				"version": "10.11.19-MariaDB-0+deb12u1-log", "version_comment": "Debian 12", "server_id": "2",
				"read_only": "1", "gtid_binlog_state": "0-1-6,0-2-3", "gtid_current_pos": "0-1-6", "gtid_slave_pos": "0-1-6",
				"semi_sync_variables": "rpl_semi_sync_master_enabled=OFF,rpl_semi_sync_slave_enabled=ON",
				"semi_sync_status":    "rpl_semi_sync_master_status=OFF,rpl_semi_sync_slave_status=ON",
			},
			replica: mariaReplica("Yes", "Yes", "0-1-6", "0", ""),
			check: func(t *testing.T, st Status) {
				if st.ServerID != 2 || !st.ReadOnly || !st.Fenced() || st.SuperReadOnly ||
					!st.Executed.Equal(gtid.MustParse(gtid.MariaDB, "0-1-6,0-2-3")) ||
					st.GTIDCurrentPos != "0-1-6" || st.GTIDSlavePos != "0-1-6" || st.ExecutedRaw != "0-1-6,0-2-3" {
					t.Errorf("status = %+v", st)
				}
				if st.SemiSync != (SemiSyncStatus{Available: true, ReplicaEnabled: true, ReplicaActive: true, WaitForReplicas: 1}) {
					t.Errorf("semi-sync = %+v", st.SemiSync)
				}
				if st.Replica == nil || st.Replica.IOThread != ThreadYes || st.Replica.RetrievedRaw != "0-1-6" {
					t.Errorf("replica = %+v", st.Replica)
				}
			},
		},
		{
			// What the semi-sync fence proof reads, and the binlog state
			// of a server restored from a backup (its position only in
			// gtid_current_pos).
			name: "mariadb primary with infinite semi-sync, binlog state reset", flavor: mariadb,
			vars: map[string]string{
				"version": "10.11.19-MariaDB-0+deb12u1-log", "version_comment": "Debian 12", "server_id": "2",
				"read_only": "0", "gtid_binlog_state": "0-2-3", "gtid_current_pos": "0-1-50,1-2-7", "gtid_slave_pos": "0-1-50",
				"semi_sync_variables": "rpl_semi_sync_master_enabled=ON,rpl_semi_sync_slave_enabled=ON,rpl_semi_sync_master_timeout=18446744073709551615," +
					"rpl_semi_sync_master_wait_no_slave=ON,rpl_semi_sync_master_wait_point=after_sync",
				"semi_sync_status": "rpl_semi_sync_master_status=ON,rpl_semi_sync_slave_status=OFF",
			},
			replica: noRows,
			check: func(t *testing.T, st Status) {
				if !st.Executed.Equal(gtid.MustParse(gtid.MariaDB, "0-1-50,0-2-3,1-2-7")) {
					t.Errorf("executed = %s, want binlog state ∪ current pos", st.Executed)
				}
				ss := st.SemiSync
				if !ss.PrimaryEnabled || !ss.PrimaryActive || !ss.WaitNoReplica || ss.WaitPoint != "AFTER_SYNC" || ss.Timeout < 4294967295*time.Millisecond {
					t.Errorf("semi-sync = %+v", ss)
				}
			},
		},
		{
			name: "mysql source with the default 10 s timeout", flavor: mysql80,
			vars: map[string]string{
				"version": "8.0.36", "version_comment": "MySQL Community Server - GPL", "server_id": "3",
				"server_uuid": uuidA, "read_only": "0", "super_read_only": "0", "gtid_executed": uuidA + ":1-5",
				"semi_sync_variables": "rpl_semi_sync_source_enabled=ON,rpl_semi_sync_source_timeout=10000," +
					"rpl_semi_sync_source_wait_no_replica=OFF,rpl_semi_sync_source_wait_point=AFTER_COMMIT,rpl_semi_sync_source_wait_for_replica_count=2",
				"semi_sync_status": "rpl_semi_sync_source_status=ON",
			},
			replica: noRows,
			check: func(t *testing.T, st Status) {
				ss := st.SemiSync
				if ss.Timeout != 10*time.Second || ss.WaitNoReplica || ss.WaitPoint != "AFTER_COMMIT" || ss.WaitForReplicas != 2 {
					t.Errorf("semi-sync = %+v", ss)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst, db, _ := newFake(tt.flavor)
			var cols []string
			for k := range tt.vars {
				cols = append(cols, k)
			}
			db.on("SELECT @@GLOBAL.version", fakeResponse{rs: statusRow(t, cols, tt.vars)}).
				on("SHOW", tt.replica)
			st, err := inst.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, st)
		})
	}
}

func TestStatusErrors(t *testing.T) {
	tests := []struct {
		name    string
		resp    fakeResponse
		wantErr error
	}{
		{"unsupported version", table("version", "version_comment").row("10.6.1-MariaDB", "x").ok(), ErrUnsupportedVersion},
		{"engine changed", table("version", "version_comment").row("8.0.36", "MySQL").ok(), ErrUnsupportedVersion},
		{"bad gtid", table("version", "version_comment", "gtid_binlog_state").row("10.11.2-MariaDB", "x", "0-1").ok(), gtid.ErrParse},
		{"no row", noRows, errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst, db, _ := newFake(mariadb)
			db.on("SELECT @@GLOBAL.version", tt.resp)
			_, err := inst.Status(context.Background())
			if err == nil || (tt.wantErr != errAny && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// An IO thread stopped by the daemon keeps the connection error it had
// while the source was down: that is not broken replication.
func TestIOError(t *testing.T) {
	for _, c := range []struct {
		io    ThreadState
		errno int
		want  bool
	}{
		{ThreadNo, 0, false},
		{ThreadNo, 2003, false},
		{ThreadNo, 2013, false},
		{ThreadNo, 1236, true},
		{ThreadNo, 1045, true},
		{ThreadConnecting, 1045, false},
		{ThreadYes, 1236, false},
	} {
		r := &ReplicaStatus{IOThread: c.io, LastIOErrno: c.errno}
		if got := r.IOError(); got != c.want {
			t.Errorf("IO %s errno %d: IOError = %t, want %t", c.io, c.errno, got, c.want)
		}
	}
}
