package mysqlctl

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/failoverd/failoverd/gtid"
)

// dialect holds every statement one flavor sends. Nothing outside
// mysqlDialect and mariadbDialect spells SQL, apart from the two statements
// both flavors share: detectQuery (sent before the flavor is known) and the
// SELECT CONNECTION_ID() each new session runs once.
type dialect struct {
	// statusQuery returns one row with the columns version, version_comment,
	// server_id, read_only and semi_sync_variables / semi_sync_status
	// (GROUP_CONCAT of lower-case name=value), plus server_uuid,
	// super_read_only and gtid_executed (MySQL) or gtid_binlog_state,
	// gtid_current_pos and gtid_slave_pos (MariaDB).
	statusQuery string
	// semiSyncQuery returns only semi_sync_variables and semi_sync_status.
	semiSyncQuery string
	// batchStatusQuery is statusQuery as a StatusOnly instance sends it,
	// in one request with semiStatusQuery (when set) and replicaStatusQuery.
	batchStatusQuery string
	// semiStatusQuery, when set, lists the semi-sync status counters as
	// (Variable_name, Value) rows, and batchStatusQuery has no
	// semi_sync_status column.
	semiStatusQuery string
	// replicaStatusQuery lists the replication connection(s) by column name.
	replicaStatusQuery string
	// retrievedColumn holds the received-GTID set or position.
	retrievedColumn string

	// hasSuperReadOnly: the fence is super_read_only (MySQL) or read_only.
	hasSuperReadOnly bool
	fence            []string
	unfence          []string
	readOnlyQuery    string // columns read_only [, super_read_only]

	stopReplica     string
	resetReplicaAll string
	startReplica    string
	startSQLThread  string
	stopIOThread    string
	startIOThread   string
	// notReplicaErrnos are the errors STOP/RESET return when replication was
	// never configured: for an idempotent StopReplica they mean "done".
	notReplicaErrnos []uint16
	// startPurgesRelayLog: starting either replication thread while both
	// are stopped discards every relay log (MariaDB in GTID mode,
	// start_slave_threads), so the retrieved but unapplied transactions go.
	startPurgesRelayLog bool

	// Semi-sync variable and status names, each list in order of preference
	// (MySQL 8.0.26+ may have either the new or the old plugin loaded).
	semiPrimaryVars, semiReplicaVars     []string
	semiPrimaryStatus, semiReplicaStatus []string
	// semiTimeoutVars, semiWaitNoReplicaVars and semiWaitPointVars are the
	// primary settings the semi-sync fence proof depends on.
	semiTimeoutVars, semiWaitNoReplicaVars, semiWaitPointVars []string
	// semiWaitCountVars names how many replicas acknowledge each commit
	// (MySQL); nil where the engine always waits for one (MariaDB).
	semiWaitCountVars []string

	// workerErrorQuery returns the newest failed applier worker's error
	// (column message); "" when Last_SQL_Error already carries it.
	workerErrorQuery string

	processListQuery string
	// ackWaitsQuery returns one row: appliers and sessions (threads whose
	// commits wait for a semi-sync acknowledgement, the replication
	// appliers and the others) and longest_ms (the longest such wait).
	ackWaitsQuery string
	// ioThreadsQuery lists the replication receiver threads' ids (column
	// id); "" when StopReplicaIO need not kill them first.
	ioThreadsQuery string

	changeSource func(src Source) (string, error)
	// applierStateQuery returns one row: applied (what the applier has
	// executed) and busy_workers (applier workers of a multi-threaded
	// applier that are not idle); WaitRelayDrained reads it when the relay
	// log looks exhausted.
	applierStateQuery string
	// waitPosition turns a GTID set into waitQuery's argument.
	waitPosition func(set gtid.Set) string
	// waitQuery returns one column "result"; waitResult interprets it.
	waitQuery  func(pos string, timeout time.Duration) (string, error)
	waitResult func(v string) (reached bool, ok bool)
	kill       func(id uint64) string
	setGlobal  func(name string, on bool) string

	// clone is nil when the flavor cannot clone (MariaDB).
	clone            func(d Donor) ([]string, error)
	cloneStatusQuery string
	// cloneUnfence lifts what refuses CLONE INSTANCE on a fenced server
	// (MySQL super_read_only) while read_only stays on.
	cloneUnfence     string
	cloneUnsupported string // why clone is unsupported, naming the manual procedure

	// groupStatusQuery reads one member's Group Replication state in one
	// statement (see groupStatusMySQL); "" where the flavor has no Group
	// Replication (groupUnsupported says why).
	groupStatusQuery string
	// setAsPrimary builds the call that asks the group to elect uuid,
	// giving the old primary's running transactions timeout to finish.
	setAsPrimary func(uuid string, timeout time.Duration) (string, error)
	// forceMembers builds SET GLOBAL group_replication_force_members for a
	// comma-separated list of group communication addresses ("" clears it).
	forceMembers func(list string) (string, error)
	// groupBootstrapOn, groupStart and groupBootstrapOff bootstrap a group
	// on one member (on, start, off) or join one (start alone); "" where
	// the flavor has no Group Replication.
	groupBootstrapOn, groupStart, groupBootstrapOff string
	groupUnsupported                                string
}

// groupVariables are the Group Replication variables GroupStatus reads
// (the gr_variables column, lower-case name=value pairs).
var groupVariables = []string{
	"group_replication_group_name", "group_replication_single_primary_mode", "group_replication_local_address",
	"group_replication_consistency", "group_replication_exit_state_action", "group_replication_autorejoin_tries",
	"group_replication_unreachable_majority_timeout", "group_replication_member_expel_timeout",
}

// groupStatusMySQL returns one row per member of the server's own
// replication_group_members table, each with the member's queues from
// replication_group_member_stats, and on every row the server's own
// server_uuid, read_only, super_read_only, gtid_executed, gr_plugin (1 when
// the group_replication plugin is active), its view id (VIEW_ID of its own
// stats row) and gr_variables. The one-row derived table keeps a row (member
// columns NULL) when the member table is empty, as it is without the plugin.
// The variables are read through performance_schema, so those the plugin
// brings are missing, not an error, without it (MySQL 8.4+ has
// group_replication_consistency in the server itself).
var groupStatusMySQL = "SELECT @@GLOBAL.server_uuid AS server_uuid, @@GLOBAL.read_only AS read_only, " +
	"@@GLOBAL.super_read_only AS super_read_only, @@GLOBAL.gtid_executed AS gtid_executed, " +
	"(SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'group_replication' AND PLUGIN_STATUS = 'ACTIVE') AS gr_plugin, " +
	pairsSubquery("performance_schema.global_variables", groupVariables, "gr_variables") + ", " +
	"(SELECT VIEW_ID FROM performance_schema.replication_group_member_stats WHERE MEMBER_ID = @@GLOBAL.server_uuid LIMIT 1) AS view_id, " +
	"m.MEMBER_ID AS member_id, m.MEMBER_HOST AS member_host, m.MEMBER_PORT AS member_port, m.MEMBER_STATE AS member_state, " +
	"m.MEMBER_ROLE AS member_role, m.MEMBER_VERSION AS member_version, " +
	"s.COUNT_TRANSACTIONS_IN_QUEUE AS certify_queue, s.COUNT_TRANSACTIONS_REMOTE_IN_APPLIER_QUEUE AS applier_queue " +
	"FROM (SELECT 1 AS one) AS one_row " +
	"LEFT JOIN performance_schema.replication_group_members AS m ON TRUE " +
	"LEFT JOIN performance_schema.replication_group_member_stats AS s ON s.MEMBER_ID = m.MEMBER_ID " +
	"ORDER BY m.MEMBER_ID"

// newDialect returns the statements for f.
func newDialect(f Flavor) dialect {
	if f.Engine == gtid.MariaDB {
		return mariadbDialect(f)
	}
	return mysqlDialect(f)
}

// semiSyncColumns returns the two scalar subqueries that read semi-sync
// variables and status counters without failing when they do not exist
// (MySQL: plugin not loaded).
func semiSyncColumns(varTable, statusTable string, vars, status []string) string {
	return pairsSubquery(varTable, vars, "semi_sync_variables") + ", " + pairsSubquery(statusTable, status, "semi_sync_status")
}

// pairsSubquery returns a scalar subquery of the lower-case name=value
// pairs of the named rows of table (NULL when none exists), as alias.
func pairsSubquery(table string, names []string, alias string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return fmt.Sprintf("(SELECT GROUP_CONCAT(CONCAT(LOWER(VARIABLE_NAME), '=', VARIABLE_VALUE)) FROM %s WHERE VARIABLE_NAME IN (%s)) AS %s",
		table, strings.Join(q, ", "), alias)
}

// semiSyncAtVariables returns the semi_sync_variables column read from
// @@GLOBAL, for servers where every one of names always exists (MariaDB).
func semiSyncAtVariables(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("CONCAT('%s=', @@GLOBAL.%s)", n, n)
	}
	return "CONCAT_WS(',', " + strings.Join(q, ", ") + ") AS semi_sync_variables"
}

// The threads that apply replicated transactions: the SQL (coordinator)
// thread and the workers of a multi-threaded applier, as MySQL's
// performance_schema.threads names them (both spellings) and MariaDB's
// PROCESSLIST COMMAND says.
var (
	mysqlApplierThreads   = []string{"thread/sql/replica_sql", "thread/sql/slave_sql", "thread/sql/replica_worker", "thread/sql/slave_worker"}
	mariadbApplierThreads = []string{"Slave_SQL", "Slave_worker"}
)

// ackWaits builds the ackWaitsQuery over table: the threads in the
// semi-sync wait state (stateCol), split by kindCol into appliers and
// others, and longest (milliseconds) over them.
func ackWaits(kindCol, stateCol, longest, table string, appliers []string) string {
	q := make([]string, len(appliers))
	for i, a := range appliers {
		q[i] = "'" + a + "'"
	}
	in := kindCol + " IN (" + strings.Join(q, ", ") + ")"
	return fmt.Sprintf("SELECT COUNT(IF(%s, 1, NULL)) AS appliers, COUNT(IF(%s, NULL, 1)) AS sessions, %s AS longest_ms FROM %s WHERE %s LIKE '%s%%'",
		in, in, longest, table, stateCol, ackWaitState)
}

// waitCodes interprets a GTID wait function's result: "0" is reached,
// timeoutCode a timeout, anything else (NULL, killed) a failure. It returns
// (reached, ok).
func waitCodes(timeoutCode string) func(string) (bool, bool) {
	return func(v string) (bool, bool) {
		switch v {
		case "0":
			return true, true
		case timeoutCode:
			return false, true
		}
		return false, false
	}
}

func killConnection(id uint64) string { return fmt.Sprintf("KILL CONNECTION %d", id) }

func setGlobal(name string, on bool) string {
	return fmt.Sprintf("SET GLOBAL %s = %s", name, onOff(on))
}

func onOff(on bool) string {
	if on {
		return "ON"
	}
	return "OFF"
}

// seconds formats d as seconds with millisecond precision ("0.500").
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

// wholeSeconds rounds d up to whole seconds, at least 1.
func wholeSeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

// sourceLiterals validates and quotes the strings of src.
func sourceLiterals(src Source) (host, user, password string, port int, err error) {
	if src.Host == "" || src.User == "" {
		return "", "", "", 0, fmt.Errorf("%w: source host and user are required", ErrInvalidArgument)
	}
	port = src.Port
	if port == 0 {
		port = 3306
	}
	if port < 1 || port > 65535 {
		return "", "", "", 0, fmt.Errorf("%w: source port %d", ErrInvalidArgument, src.Port)
	}
	if src.HeartbeatPeriod < 0 || src.ConnectRetry < 0 {
		return "", "", "", 0, fmt.Errorf("%w: negative heartbeat period or connect retry", ErrInvalidArgument)
	}
	if host, err = quote(src.Host); err != nil {
		return "", "", "", 0, fmt.Errorf("source host: %w", err)
	}
	if user, err = quote(src.User); err != nil {
		return "", "", "", 0, fmt.Errorf("source user: %w", err)
	}
	if password, err = quote(src.Password); err != nil {
		return "", "", "", 0, fmt.Errorf("source password: %w", err)
	}
	return host, user, password, port, nil
}

// sourceRetryCount is SOURCE_RETRY_COUNT of every MySQL replication channel
// the daemon configures (see changeSource).
const sourceRetryCount = 86400

// mysqlDialect: MySQL 8.0.23+ / 8.4 / 9.x and Percona Server, REPLICA/SOURCE syntax.
func mysqlDialect(f Flavor) dialect {
	primaryVars := []string{"rpl_semi_sync_master_enabled"}
	replicaVars := []string{"rpl_semi_sync_slave_enabled"}
	primaryStatus := []string{"Rpl_semi_sync_master_status"}
	replicaStatus := []string{"Rpl_semi_sync_slave_status"}
	timeoutVars := []string{"rpl_semi_sync_master_timeout"}
	waitNoReplicaVars := []string{"rpl_semi_sync_master_wait_no_slave"}
	waitPointVars := []string{"rpl_semi_sync_master_wait_point"}
	waitCountVars := []string{"rpl_semi_sync_master_wait_for_slave_count"}
	if f.AtLeast(8, 0, 26) { // semisync_source/semisync_replica plugins (new names) exist from 8.0.26
		primaryVars = []string{"rpl_semi_sync_source_enabled", "rpl_semi_sync_master_enabled"}
		replicaVars = []string{"rpl_semi_sync_replica_enabled", "rpl_semi_sync_slave_enabled"}
		primaryStatus = []string{"Rpl_semi_sync_source_status", "Rpl_semi_sync_master_status"}
		replicaStatus = []string{"Rpl_semi_sync_replica_status", "Rpl_semi_sync_slave_status"}
		timeoutVars = []string{"rpl_semi_sync_source_timeout", "rpl_semi_sync_master_timeout"}
		waitNoReplicaVars = []string{"rpl_semi_sync_source_wait_no_replica", "rpl_semi_sync_master_wait_no_slave"}
		waitPointVars = []string{"rpl_semi_sync_source_wait_point", "rpl_semi_sync_master_wait_point"}
		waitCountVars = []string{"rpl_semi_sync_source_wait_for_replica_count", "rpl_semi_sync_master_wait_for_slave_count"}
	}
	semi := semiSyncColumns("performance_schema.global_variables", "performance_schema.global_status",
		slices.Concat(primaryVars, replicaVars, timeoutVars, waitNoReplicaVars, waitPointVars, waitCountVars),
		slices.Concat(primaryStatus, replicaStatus))
	status := "SELECT @@GLOBAL.version AS version, @@GLOBAL.version_comment AS version_comment, " +
		"@@GLOBAL.server_id AS server_id, @@GLOBAL.server_uuid AS server_uuid, " +
		"@@GLOBAL.read_only AS read_only, @@GLOBAL.super_read_only AS super_read_only, " +
		"@@GLOBAL.gtid_executed AS gtid_executed, " + semi + ", " +
		// Heartbeats of the default channel (NULL without one): the poller's
		// silence signal, as MariaDB's SHOW ALL SLAVES STATUS gives it.
		"(SELECT HEARTBEAT_INTERVAL FROM performance_schema.replication_connection_configuration WHERE CHANNEL_NAME = '') AS heartbeat_period, " +
		"(SELECT COUNT_RECEIVED_HEARTBEATS FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = '') AS received_heartbeats"
	return dialect{
		statusQuery:        status,
		batchStatusQuery:   status,
		semiSyncQuery:      "SELECT " + semi,
		replicaStatusQuery: "SHOW REPLICA STATUS",
		retrievedColumn:    "Retrieved_Gtid_Set",

		hasSuperReadOnly: true,
		// super_read_only=ON implies read_only=ON and also blocks SUPER and
		// CONNECTION_ADMIN holders, which plain read_only lets write.
		fence: []string{"SET GLOBAL super_read_only = ON"},
		// Order matters: read_only=OFF while super_read_only=ON is refused.
		unfence:       []string{"SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"},
		readOnlyQuery: "SELECT @@GLOBAL.read_only AS read_only, @@GLOBAL.super_read_only AS super_read_only",

		stopReplica:      "STOP REPLICA",
		resetReplicaAll:  "RESET REPLICA ALL",
		startReplica:     "START REPLICA",
		startSQLThread:   "START REPLICA SQL_THREAD",
		stopIOThread:     "STOP REPLICA IO_THREAD",
		startIOThread:    "START REPLICA IO_THREAD",
		notReplicaErrnos: []uint16{errBadReplica, errReplicaConfig, errChannelNotExist},

		semiPrimaryVars: primaryVars, semiReplicaVars: replicaVars,
		semiPrimaryStatus: primaryStatus, semiReplicaStatus: replicaStatus,
		semiTimeoutVars: timeoutVars, semiWaitNoReplicaVars: waitNoReplicaVars, semiWaitPointVars: waitPointVars,
		semiWaitCountVars: waitCountVars,

		processListQuery: "SHOW PROCESSLIST",
		// The semi-sync ack receiver thread waits in the same state for
		// ever, also on a healthy primary: it is no commit.
		ackWaitsQuery: ackWaits("NAME", "PROCESSLIST_STATE", "COALESCE(MAX(PROCESSLIST_TIME), 0) * 1000", "performance_schema.threads", mysqlApplierThreads) +
			" AND NAME NOT LIKE 'thread/semisync/%'",
		workerErrorQuery: "SELECT LAST_ERROR_MESSAGE AS message FROM performance_schema.replication_applier_status_by_worker " +
			"WHERE LAST_ERROR_NUMBER <> 0 ORDER BY LAST_ERROR_TIMESTAMP DESC LIMIT 1",

		changeSource: func(src Source) (string, error) {
			host, user, password, port, err := sourceLiterals(src)
			if err != nil {
				return "", err
			}
			ssl, pubKey := 0, 1
			if src.TLS {
				// With TLS the password travels encrypted; without it
				// caching_sha2_password needs the source's RSA key.
				ssl, pubKey = 1, 0
			}
			s := fmt.Sprintf("CHANGE REPLICATION SOURCE TO SOURCE_HOST = %s, SOURCE_PORT = %d, SOURCE_USER = %s, SOURCE_PASSWORD = %s, "+
				"SOURCE_AUTO_POSITION = 1, SOURCE_SSL = %d, GET_SOURCE_PUBLIC_KEY = %d", host, port, user, password, ssl, pubKey)
			if src.HeartbeatPeriod > 0 {
				s += ", SOURCE_HEARTBEAT_PERIOD = " + seconds(src.HeartbeatPeriod)
			}
			if src.ConnectRetry > 0 {
				s += fmt.Sprintf(", SOURCE_CONNECT_RETRY = %d", wholeSeconds(src.ConnectRetry))
			}
			// MySQL 8.4+ gives up reconnecting after 10 attempts: a replica
			// whose source stays down longer stops its IO thread on an
			// error and is no witness any more, so a failover decided
			// later (after a pause, a cooldown, a daemon restart) would be
			// uncorroborated. 86400 is 8.0's default (MariaDB's is 100000).
			s += fmt.Sprintf(", SOURCE_RETRY_COUNT = %d", sourceRetryCount)
			return s, nil
		},
		// An idle worker waits "for an event from Coordinator"; any other
		// state (applying, waiting for a lock or a commit) is work in progress.
		applierStateQuery: "SELECT @@GLOBAL.gtid_executed AS applied, (SELECT COUNT(*) FROM performance_schema.threads " +
			"WHERE NAME IN ('thread/sql/replica_worker', 'thread/sql/slave_worker') " +
			"AND COALESCE(PROCESSLIST_STATE, '') NOT LIKE 'Waiting for an event from Coordinator%') AS busy_workers",
		waitPosition: gtid.Set.String,
		waitQuery: func(set string, timeout time.Duration) (string, error) {
			q, err := quote(set)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %d) AS result", q, wholeSeconds(timeout)), nil
		},
		// 0 = reached, 1 = timeout; anything else (NULL, 2 = killed) is a failure.
		waitResult: waitCodes("1"),
		kill:       killConnection,
		setGlobal:  setGlobal,

		clone: func(d Donor) ([]string, error) {
			host, user, password, port, err := sourceLiterals(Source{Host: d.Host, Port: d.Port, User: d.User, Password: d.Password})
			if err != nil {
				return nil, err
			}
			list, err := quote(fmt.Sprintf("%s:%d", d.Host, port))
			if err != nil {
				return nil, err
			}
			require := "REQUIRE NO SSL"
			if d.TLS {
				require = "REQUIRE SSL"
			}
			return []string{
				"SET GLOBAL clone_valid_donor_list = " + list,
				fmt.Sprintf("CLONE INSTANCE FROM %s@%s:%d IDENTIFIED BY %s %s", user, host, port, password, require),
			}, nil
		},
		cloneStatusQuery: "SELECT STATE AS state, ERROR_NO AS error_no, ERROR_MESSAGE AS error_message FROM performance_schema.clone_status",
		cloneUnfence:     "SET GLOBAL super_read_only = OFF",

		groupStatusQuery: groupStatusMySQL,
		setAsPrimary: func(uuid string, timeout time.Duration) (string, error) {
			q, err := quote(uuid)
			if err != nil {
				return "", err
			}
			if !f.AtLeast(8, 0, 29) { // the running-transactions timeout argument came in 8.0.29
				return fmt.Sprintf("SELECT group_replication_set_as_primary(%s) AS result", q), nil
			}
			return fmt.Sprintf("SELECT group_replication_set_as_primary(%s, %d) AS result", q, min(wholeSeconds(timeout), maxSetAsPrimaryWait)), nil
		},
		forceMembers: func(list string) (string, error) {
			q, err := quote(list)
			if err != nil {
				return "", err
			}
			return "SET GLOBAL group_replication_force_members = " + q, nil
		},
		groupBootstrapOn:  "SET GLOBAL group_replication_bootstrap_group = ON",
		groupStart:        "START GROUP_REPLICATION",
		groupBootstrapOff: "SET GLOBAL group_replication_bootstrap_group = OFF",
	}
}

// mariadbDialect: MariaDB 10.11+, SLAVE/MASTER syntax, domain-server-seq GTIDs.
func mariadbDialect(Flavor) dialect {
	primaryVars := []string{"rpl_semi_sync_master_enabled"}
	replicaVars := []string{"rpl_semi_sync_slave_enabled"}
	primaryStatus := []string{"Rpl_semi_sync_master_status"}
	replicaStatus := []string{"Rpl_semi_sync_slave_status"}
	timeoutVars := []string{"rpl_semi_sync_master_timeout"}
	waitNoReplicaVars := []string{"rpl_semi_sync_master_wait_no_slave"}
	waitPointVars := []string{"rpl_semi_sync_master_wait_point"}
	// Semi-sync is built into MariaDB (10.3+), so its variables always
	// exist: read from @@GLOBAL they cost the server as little as any other
	// (information_schema.GLOBAL_VARIABLES materialises all of them, about
	// 0.3-0.7 ms of server CPU a probe). information_schema works with
	// performance_schema=OFF.
	semiVars := semiSyncAtVariables(slices.Concat(primaryVars, replicaVars, timeoutVars, waitNoReplicaVars, waitPointVars))
	semiStatus := pairsSubquery("information_schema.GLOBAL_STATUS", slices.Concat(primaryStatus, replicaStatus), "semi_sync_status")
	vars := "SELECT @@GLOBAL.version AS version, @@GLOBAL.version_comment AS version_comment, " +
		"@@GLOBAL.server_id AS server_id, @@GLOBAL.read_only AS read_only, " +
		"@@GLOBAL.gtid_binlog_state AS gtid_binlog_state, @@GLOBAL.gtid_current_pos AS gtid_current_pos, " +
		"@@GLOBAL.gtid_slave_pos AS gtid_slave_pos, " + semiVars
	return dialect{
		statusQuery:      vars + ", " + semiStatus,
		semiSyncQuery:    "SELECT " + semiVars + ", " + semiStatus,
		batchStatusQuery: vars,
		// SHOW STATUS LIKE costs the server about a quarter of the
		// information_schema.GLOBAL_STATUS read (0.13 against 0.4-0.6 ms).
		// Only the two *_status counters match the pattern.
		semiStatusQuery: "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_%_status'",
		// SHOW ALL SLAVES STATUS adds Gtid_Slave_Pos and the heartbeat
		// columns; the default connection is the row with Connection_name ''.
		replicaStatusQuery: "SHOW ALL SLAVES STATUS",
		retrievedColumn:    "Gtid_IO_Pos",

		// There is no super_read_only: read_only blocks every account
		// without READ_ONLY ADMIN (which the daemon's own account needs).
		fence:         []string{"SET GLOBAL read_only = ON"},
		unfence:       []string{"SET GLOBAL read_only = OFF"},
		readOnlyQuery: "SELECT @@GLOBAL.read_only AS read_only",

		stopReplica:      "STOP SLAVE",
		resetReplicaAll:  "RESET SLAVE ALL",
		startReplica:     "START SLAVE",
		startSQLThread:   "START SLAVE SQL_THREAD",
		stopIOThread:     "STOP SLAVE IO_THREAD",
		startIOThread:    "START SLAVE IO_THREAD",
		notReplicaErrnos: []uint16{errBadReplica, errMasterInfo},
		// Every replica ReplicateFrom configures uses GTID (MASTER_USE_GTID).
		startPurgesRelayLog: true,
		// STOP SLAVE IO_THREAD waits about 2 s for a receiver blocked on a
		// hung source; KILL interrupts it at once.
		ioThreadsQuery: "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE COMMAND = 'Slave_IO'",

		semiPrimaryVars: primaryVars, semiReplicaVars: replicaVars,
		semiPrimaryStatus: primaryStatus, semiReplicaStatus: replicaStatus,
		semiTimeoutVars: timeoutVars, semiWaitNoReplicaVars: waitNoReplicaVars, semiWaitPointVars: waitPointVars,

		processListQuery: "SHOW PROCESSLIST",
		ackWaitsQuery:    ackWaits("COMMAND", "STATE", "COALESCE(MAX(TIME_MS), 0)", "information_schema.PROCESSLIST", mariadbApplierThreads),

		changeSource: func(src Source) (string, error) {
			host, user, password, port, err := sourceLiterals(src)
			if err != nil {
				return "", err
			}
			ssl := 0
			if src.TLS {
				ssl = 1
			}
			s := fmt.Sprintf("CHANGE MASTER TO MASTER_HOST = %s, MASTER_PORT = %d, MASTER_USER = %s, MASTER_PASSWORD = %s, "+
				"MASTER_USE_GTID = current_pos, MASTER_SSL = %d", host, port, user, password, ssl)
			if src.HeartbeatPeriod > 0 {
				s += ", MASTER_HEARTBEAT_PERIOD = " + seconds(src.HeartbeatPeriod)
			}
			if src.ConnectRetry > 0 {
				s += fmt.Sprintf(", MASTER_CONNECT_RETRY = %d", wholeSeconds(src.ConnectRetry))
			}
			return s, nil
		},
		// Parallel replication (slave_parallel_threads > 0): an idle worker
		// waits "for work from SQL thread"; any other state is work in progress.
		applierStateQuery: "SELECT @@GLOBAL.gtid_slave_pos AS applied, (SELECT COUNT(*) FROM information_schema.PROCESSLIST " +
			"WHERE COMMAND = 'Slave_worker' AND COALESCE(STATE, '') NOT LIKE 'Waiting for work from SQL thread%') AS busy_workers",
		waitPosition: mariadbWaitPosition,
		waitQuery: func(pos string, timeout time.Duration) (string, error) {
			q, err := quote(pos)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("SELECT MASTER_GTID_WAIT(%s, %s) AS result", q, seconds(timeout)), nil
		},
		// 0 = reached, -1 = timeout; NULL is a failure.
		waitResult: waitCodes("-1"),
		kill:       killConnection,
		setGlobal:  setGlobal,

		groupUnsupported: "Group Replication does not exist in MariaDB (a group of MariaDB servers uses replication: async)",
		cloneUnsupported: "MariaDB has no CLONE; provision the replica manually: " +
			"mariadb-backup --backup on the donor, mariadb-backup --prepare, restore the datadir on the recipient, " +
			"SET GLOBAL gtid_slave_pos to the GTID position mariadb-backup recorded (xtrabackup_binlog_info), " +
			"then CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos (ReplicateFrom)",
	}
}
