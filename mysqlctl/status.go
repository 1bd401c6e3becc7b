package mysqlctl

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/failoverd/failoverd/gtid"
)

// ThreadState is the running state of a replication thread as the server
// reports it (Replica_IO_Running / Slave_SQL_Running ...).
type ThreadState string

// Thread states. Other values the server may report are kept verbatim.
const (
	ThreadYes        ThreadState = "Yes"
	ThreadNo         ThreadState = "No"
	ThreadConnecting ThreadState = "Connecting"
)

// Running reports whether the thread runs or tries to (anything but No/empty).
func (t ThreadState) Running() bool { return t != ThreadNo && t != "" }

// Status is one snapshot of a server, read with one SELECT and one SHOW.
type Status struct {
	Flavor     Flavor
	ServerID   uint32
	ServerUUID string // MySQL only (@@server_uuid)
	// ReadOnly is @@read_only; SuperReadOnly is @@super_read_only (MySQL only).
	ReadOnly, SuperReadOnly bool
	// Executed is MySQL @@gtid_executed or MariaDB @@gtid_binlog_state
	// (one triple per domain and server, see package gtid); ExecutedRaw is
	// the text as read.
	Executed    gtid.Set
	ExecutedRaw string
	// GTIDCurrentPos and GTIDSlavePos are MariaDB's @@gtid_current_pos and
	// @@gtid_slave_pos, raw (one triple per domain).
	GTIDCurrentPos, GTIDSlavePos string
	SemiSync                     SemiSyncStatus
	// AckWaits is what the server's sessions wait for semi-sync
	// acknowledgements; read only while the source side is enabled
	// (SemiSync.PrimaryEnabled), when nothing else can wait.
	AckWaits AckWaits
	// Replica is nil when no replication is configured.
	Replica *ReplicaStatus

	// heartbeats: MySQL's replica heartbeat figures, read with the
	// variables (performance_schema) and copied into Replica.
	heartbeats replicaHeartbeats
}

// replicaHeartbeats are MySQL's HEARTBEAT_INTERVAL (replication_connection_
// configuration) and COUNT_RECEIVED_HEARTBEATS (replication_connection_
// status) of the default channel; known is false on MariaDB, whose SHOW ALL
// SLAVES STATUS carries them, and on a server without replication.
type replicaHeartbeats struct {
	known    bool
	period   time.Duration
	received uint64
}

// withHeartbeats copies MySQL's heartbeat figures into the replica status:
// without them a hung source (SIGSTOP keeps the TCP connection open) is
// seen only when the IO thread gives up after replica_net_timeout, and a
// receiver then reconnecting makes STOP REPLICA IO_THREAD wait 2 s.
func (s *Status) withHeartbeats() {
	hb := s.heartbeats
	s.heartbeats = replicaHeartbeats{} // read once, kept in Replica only
	if s.Replica == nil || !hb.known {
		return
	}
	s.Replica.HeartbeatPeriod = hb.period
	s.Replica.ReceivedHeartbeats = hb.received
}

// AckWaits counts the sessions whose commits wait for a semi-sync
// acknowledgement (thread state "Waiting for semi-sync ACK from
// slave/replica").
type AckWaits struct {
	// Known: read. False when the source side is off (nothing waits) or
	// the read failed.
	Known bool
	// Appliers counts the replication applier threads waiting (SQL thread,
	// workers): on a replica with the source side on, its applier's
	// commits wait for acknowledgements nobody sends.
	Appliers int
	// Sessions counts the other sessions waiting: clients' commits.
	Sessions int
	// Longest is how long the longest waiting thread has been in that
	// state (MySQL: whole seconds).
	Longest time.Duration
}

// Fenced reports whether the flavor's fence is in effect: super_read_only
// on MySQL, read_only on MariaDB.
func (s Status) Fenced() bool {
	if s.Flavor.Engine == gtid.MariaDB {
		return s.ReadOnly
	}
	return s.SuperReadOnly
}

// SemiSyncStatus is the semi-sync configuration and state of a server.
type SemiSyncStatus struct {
	// Available: the semi-sync variables exist (MySQL: plugin loaded;
	// MariaDB: always).
	Available bool
	// PrimaryEnabled / ReplicaEnabled are rpl_semi_sync_{source,master}_enabled
	// and rpl_semi_sync_{replica,slave}_enabled.
	PrimaryEnabled, ReplicaEnabled bool
	// PrimaryActive / ReplicaActive are the Rpl_semi_sync_*_status counters:
	// semi-sync currently in effect (a primary falls back to async after
	// its timeout; a replica only after an IO thread restart).
	PrimaryActive, ReplicaActive bool
	// Timeout is rpl_semi_sync_{source,master}_timeout (0 when unknown).
	Timeout time.Duration
	// WaitNoReplica is rpl_semi_sync_{source_wait_no_replica,master_wait_no_slave}:
	// commits keep waiting while no replica is connected.
	WaitNoReplica bool
	// WaitPoint is rpl_semi_sync_{source,master}_wait_point, upper case
	// (AFTER_SYNC or AFTER_COMMIT; "" when unknown).
	WaitPoint string
	// WaitForReplicas is how many replicas acknowledge each commit: MySQL
	// rpl_semi_sync_{source_wait_for_replica,master_wait_for_slave}_count
	// (0 when unknown); always 1 on MariaDB, which has no such variable.
	WaitForReplicas int
}

// ReplicaStatus is the default replication channel/connection of a server,
// parsed by column name.
type ReplicaStatus struct {
	IOThread, SQLThread ThreadState
	IOState, SQLState   string // Replica_IO_State, Replica_SQL_Running_State
	SourceHost          string
	SourcePort          int
	SourceUser          string
	SourceServerID      uint32
	SourceUUID          string // MySQL only
	// Retrieved is what the IO thread received: MySQL Retrieved_Gtid_Set,
	// MariaDB Gtid_IO_Pos (one triple per domain). RetrievedRaw is the text.
	Retrieved    gtid.Set
	RetrievedRaw string
	// GTIDSlavePos is MariaDB's Gtid_Slave_Pos column.
	GTIDSlavePos string
	// AutoPosition: MySQL Auto_Position=1 or MariaDB Using_Gtid other than No.
	AutoPosition bool
	// Lag is Seconds_Behind_Source/Master; LagKnown is false when it is NULL
	// (a thread is stopped or not yet connected).
	Lag      time.Duration
	LagKnown bool
	// LastIOErrno/LastIOError and LastSQLErrno/LastSQLError are the last
	// thread errors (0 and "" when none).
	LastIOErrno, LastSQLErrno int
	LastIOError, LastSQLError string
	// HeartbeatPeriod and ReceivedHeartbeats are MariaDB's
	// Slave_heartbeat_period and Slave_received_heartbeats, or MySQL's
	// performance_schema HEARTBEAT_INTERVAL and COUNT_RECEIVED_HEARTBEATS
	// (filled by Status only: SHOW REPLICA STATUS does not carry them).
	HeartbeatPeriod    time.Duration
	ReceivedHeartbeats uint64
	ConnectRetry       time.Duration
	SSL                bool // Source_SSL_Allowed / Master_SSL_Allowed is Yes
}

// connectErrnos are client errors of an IO thread that could not reach its
// source: they say where the source is not, not that replication is broken.
var connectErrnos = map[int]bool{
	2002: true, // CR_CONNECTION_ERROR
	2003: true, // CR_CONN_HOST_ERROR (connection refused / unreachable)
	2006: true, // CR_SERVER_GONE_ERROR
	2013: true, // CR_SERVER_LOST
}

// IOError reports whether the IO (receiver) thread stopped on an error that
// breaks replication (1236 purged binlogs, 1045 access denied...). An IO
// thread stopped by someone keeps its last connection error (2003 while the
// source was down): that is not broken replication.
func (r *ReplicaStatus) IOError() bool {
	return !r.IOThread.Running() && r.LastIOErrno != 0 && !connectErrnos[r.LastIOErrno]
}

// RelayExhausted reports whether nothing more can be applied: the IO thread
// is stopped (the relay log no longer grows) and the running applier waits
// for more of it. Whatever retrieved transaction is still not executed then
// was received only in part.
func (r *ReplicaStatus) RelayExhausted() bool {
	return !r.IOThread.Running() && r.SQLThread.Running() && strings.Contains(strings.ToLower(r.SQLState), "read all relay log")
}

// AwaitingAck reports whether the SQL (applier) thread waits for a
// semi-sync acknowledgement of its own commit: the server's own semi-sync
// source side is on (MariaDB's serial applier shows it here; a
// multi-threaded applier's workers show it in AckWaits).
func (r *ReplicaStatus) AwaitingAck() bool {
	return r.SQLThread.Running() && strings.HasPrefix(r.SQLState, ackWaitState)
}

// ackWaitState begins the state of a thread whose commit waits for a
// semi-sync acknowledgement: "... from slave" (MariaDB, MySQL before
// 8.0.26), "... from replica" (MySQL 8.0.26+).
const ackWaitState = "Waiting for semi-sync ACK"

// readAckWaits fills st.AckWaits while the source side is on (otherwise
// nothing waits). Best effort: a failed read leaves them unknown, as the
// rest of the status stands.
func (i *Instance) readAckWaits(ctx context.Context, st *Status) {
	if !st.SemiSync.PrimaryEnabled || i.d.ackWaitsQuery == "" {
		return
	}
	rs, err := i.q.query(ctx, i.d.ackWaitsQuery)
	if err != nil || len(rs.rows) != 1 {
		i.log.Debug("mysqlctl: semi-sync waits not read", "addr", i.addr, "err", err)
		return
	}
	r := rs.row(0)
	ms, _ := strconv.ParseFloat(r.str("longest_ms"), 64)
	st.AckWaits = AckWaits{Known: true, Appliers: int(r.integer("appliers")), Sessions: int(r.integer("sessions")),
		Longest: time.Duration(ms * float64(time.Millisecond))}
}

// SQLError reports whether the SQL (applier) thread stopped with an error.
func (r *ReplicaStatus) SQLError() bool { return !r.SQLThread.Running() && r.LastSQLErrno != 0 }

// Status reads the server's state with one multi-variable SELECT and one
// SHOW REPLICA STATUS / SHOW ALL SLAVES STATUS: two round trips, or one on
// a StatusOnly instance (see batchStatus).
func (i *Instance) Status(ctx context.Context) (Status, error) {
	if bq, ok := i.q.(batchQuerier); ok {
		return i.batchStatus(ctx, bq)
	}
	rs, err := i.q.query(ctx, i.d.statusQuery)
	if err != nil {
		return Status{}, i.fail("status", "read variables", err)
	}
	st, err := i.parseVariables(rs)
	if err != nil {
		return Status{}, err
	}
	if st.Replica, err = i.replicaStatus(ctx); err != nil {
		return Status{}, i.fail("status", "read replica status", err)
	}
	st.withHeartbeats()
	i.readAckWaits(ctx, &st)
	return st, nil
}

// coordinatorStopped begins MySQL's Last_SQL_Error when a worker of the
// multi-threaded applier failed: the cause ("Duplicate entry …") is only in
// performance_schema.replication_applier_status_by_worker.
const coordinatorStopped = "Coordinator stopped because there were error(s) in the worker(s)"

// withWorkerError replaces a multi-threaded applier's coordinator message
// by the failed worker's own, so status, alerts and a refused drain name the
// cause. Best effort: on any failure the coordinator's message stays.
func (i *Instance) withWorkerError(ctx context.Context, rep *ReplicaStatus) {
	if rep == nil || i.d.workerErrorQuery == "" || rep.LastSQLErrno == 0 || !strings.HasPrefix(rep.LastSQLError, coordinatorStopped) {
		return
	}
	rs, err := i.q.query(ctx, i.d.workerErrorQuery)
	if err != nil || len(rs.rows) == 0 {
		return
	}
	if msg := rs.row(0).str("message"); msg != "" {
		rep.LastSQLError = causeFirst(msg)
	}
}

// causeFirst puts the cause of a worker's error first: MySQL writes "Worker
// 1 failed executing transaction '…' at source log …, end_log_pos N; Could
// not execute Write_rows event on table app.t; Duplicate entry …", and a
// status line cut to its width must still say what to repair.
func causeFirst(msg string) string {
	where, cause, ok := strings.Cut(msg, "; ")
	if !ok || !strings.HasPrefix(where, "Worker ") {
		return msg
	}
	return cause + " (" + where + ")"
}

// batchStatus is Status in one request: batchStatusQuery, semiStatusQuery
// (when the dialect has one) and replicaStatusQuery.
func (i *Instance) batchStatus(ctx context.Context, bq batchQuerier) (Status, error) {
	stmts := []string{i.d.batchStatusQuery, i.d.replicaStatusQuery}
	if i.d.semiStatusQuery != "" {
		stmts = []string{i.d.batchStatusQuery, i.d.semiStatusQuery, i.d.replicaStatusQuery}
	}
	sets, err := bq.queryBatch(ctx, stmts...)
	if len(sets) == 0 {
		return Status{}, i.fail("status", "read variables", err)
	}
	st, perr := i.parseVariables(sets[0])
	if perr != nil {
		return Status{}, perr
	}
	if err != nil || len(sets) != len(stmts) {
		step := "read replica status"
		if i.d.semiStatusQuery != "" && len(sets) < 2 {
			step = "read semi-sync status"
		}
		if err == nil {
			err = fmt.Errorf("%d result sets for %d statements", len(sets), len(stmts))
		}
		return Status{}, i.fail("status", step, err)
	}
	if i.d.semiStatusQuery != "" {
		st.SemiSync = parseSemiSync(i.d, sets[0].row(0).str("semi_sync_variables"), nameValues(sets[1]))
	}
	if st.Replica, err = parseReplicaStatus(i.flavor.Engine, i.d, sets[len(sets)-1]); err != nil {
		return Status{}, i.fail("status", "read replica status", err)
	}
	st.withHeartbeats()
	i.withWorkerError(ctx, st.Replica)
	i.readAckWaits(ctx, &st)
	return st, nil
}

// parseVariables reads the one row of the status query.
func (i *Instance) parseVariables(rs *resultSet) (Status, error) {
	if len(rs.rows) != 1 {
		return Status{}, i.fail("status", "read variables", fmt.Errorf("expected 1 row, got %d", len(rs.rows)))
	}
	st, err := parseStatus(i.flavor.Engine, i.d, rs.row(0))
	if err != nil {
		return Status{}, i.fail("status", "parse variables", err)
	}
	return st, nil
}

// nameValues renders SHOW STATUS rows (Variable_name, Value) as the
// name=value pairs the semi_sync_status column holds.
func nameValues(rs *resultSet) string {
	var b strings.Builder
	for r := range rs.rows {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		row := rs.row(r)
		b.WriteString(row.str("Variable_name") + "=" + row.str("Value"))
	}
	return b.String()
}

// replicaStatus runs the flavor's replica-status statement; nil when the
// server has no (default) replication connection.
func (i *Instance) replicaStatus(ctx context.Context) (*ReplicaStatus, error) {
	rs, err := i.q.query(ctx, i.d.replicaStatusQuery)
	if err != nil {
		return nil, err
	}
	rep, err := parseReplicaStatus(i.flavor.Engine, i.d, rs)
	if err != nil {
		return nil, err
	}
	i.withWorkerError(ctx, rep)
	return rep, nil
}

// parseStatus reads the statusQuery row.
func parseStatus(engine gtid.Flavor, d dialect, r row) (Status, error) {
	f, err := ParseFlavor(r.str("version"), r.str("version_comment"))
	if err != nil {
		return Status{}, err
	}
	if f.Engine != engine {
		return Status{}, fmt.Errorf("%w: server now reports %s, opened as %s", ErrUnsupportedVersion, f, engine)
	}
	id, _ := strconv.ParseUint(r.str("server_id"), 10, 32)
	st := Status{
		Flavor:        f,
		ServerID:      uint32(id),
		ServerUUID:    r.str("server_uuid"),
		ReadOnly:      r.boolean("read_only"),
		SuperReadOnly: r.boolean("super_read_only"),
	}
	if engine == gtid.MariaDB {
		st.ExecutedRaw = r.str("gtid_binlog_state")
		st.GTIDCurrentPos = r.str("gtid_current_pos")
		st.GTIDSlavePos = r.str("gtid_slave_pos")
	} else {
		st.ExecutedRaw = r.str("gtid_executed")
	}
	if st.Executed, err = gtid.Parse(engine, st.ExecutedRaw); err != nil {
		return Status{}, fmt.Errorf("executed GTID set: %w", err)
	}
	if engine == gtid.MariaDB {
		// The binlog state loses entries on RESET MASTER or a restore from
		// a backup; gtid_current_pos still names each domain's position.
		cur, err := gtid.Parse(engine, st.GTIDCurrentPos)
		if err != nil {
			return Status{}, fmt.Errorf("gtid_current_pos: %w", err)
		}
		st.Executed = st.Executed.Union(cur)
	}
	st.SemiSync = parseSemiSync(d, r.str("semi_sync_variables"), r.str("semi_sync_status"))
	if hb, ok := r.get("heartbeat_period"); ok && hb.Valid {
		// NULL (no replication channel) leaves them unknown.
		if secs, err := strconv.ParseFloat(hb.String, 64); err == nil {
			st.heartbeats = replicaHeartbeats{known: true, period: time.Duration(secs * float64(time.Second))}
			st.heartbeats.received, _ = strconv.ParseUint(r.str("received_heartbeats"), 10, 64)
		}
	}
	return st, nil
}

// parseSemiSync reads the semi_sync_variables / semi_sync_status columns
// (name=value pairs).
func parseSemiSync(d dialect, variables, statusCounters string) SemiSyncStatus {
	vars := pairs(variables)
	status := pairs(statusCounters)
	_, pv, okP := lookup(vars, d.semiPrimaryVars)
	_, rv, okR := lookup(vars, d.semiReplicaVars)
	_, ps, _ := lookup(status, d.semiPrimaryStatus)
	_, rsv, _ := lookup(status, d.semiReplicaStatus)
	_, timeout, _ := lookup(vars, d.semiTimeoutVars)
	_, waitNo, _ := lookup(vars, d.semiWaitNoReplicaVars)
	_, waitPoint, _ := lookup(vars, d.semiWaitPointVars)
	ms, _ := strconv.ParseUint(strings.TrimSpace(timeout), 10, 64)
	waitCount := 1 // MariaDB waits for one acknowledgement
	if d.semiWaitCountVars != nil {
		_, count, _ := lookup(vars, d.semiWaitCountVars)
		n, _ := strconv.ParseUint(strings.TrimSpace(count), 10, 16)
		waitCount = int(n)
	}
	return SemiSyncStatus{
		WaitForReplicas: waitCount,
		Available:       okP || okR,
		PrimaryEnabled:  parseBool(pv), ReplicaEnabled: parseBool(rv),
		PrimaryActive: parseBool(ps), ReplicaActive: parseBool(rsv),
		// Saturates: MariaDB allows up to 2^64-1 ms, far beyond a Duration.
		Timeout:       time.Duration(min(ms, uint64(math.MaxInt64/int64(time.Millisecond)))) * time.Millisecond,
		WaitNoReplica: parseBool(waitNo),
		WaitPoint:     strings.ToUpper(strings.TrimSpace(waitPoint)),
	}
}

// pairs parses "a=ON,b=OFF" into a map with lower-case keys.
func pairs(s string) map[string]string {
	m := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok {
			m[strings.ToLower(k)] = v
		}
	}
	return m
}

// lookup returns the lower-cased name and value of the first of names
// present in m.
func lookup(m map[string]string, names []string) (name, value string, ok bool) {
	for _, n := range names {
		n = strings.ToLower(n)
		if v, ok := m[n]; ok {
			return n, v, true
		}
	}
	return "", "", false
}

// parseReplicaStatus picks the default connection (MariaDB
// Connection_name ”, MySQL's single row or Channel_Name ”) and parses it
// by column name. It returns nil when there is none.
func parseReplicaStatus(engine gtid.Flavor, d dialect, rs *resultSet) (*ReplicaStatus, error) {
	idx := -1
	for n := range rs.rows {
		if rs.row(n).str("Connection_name", "Channel_Name") == "" {
			idx = n
			break
		}
	}
	if idx < 0 {
		return nil, nil
	}
	r := rs.row(idx)
	rep := &ReplicaStatus{
		IOThread:     ThreadState(r.str("Replica_IO_Running", "Slave_IO_Running")),
		SQLThread:    ThreadState(r.str("Replica_SQL_Running", "Slave_SQL_Running")),
		IOState:      r.str("Replica_IO_State", "Slave_IO_State"),
		SQLState:     r.str("Replica_SQL_Running_State", "Slave_SQL_Running_State"),
		SourceHost:   r.str("Source_Host", "Master_Host"),
		SourcePort:   int(r.integer("Source_Port", "Master_Port")),
		SourceUser:   r.str("Source_User", "Master_User"),
		SourceUUID:   r.str("Source_UUID", "Master_UUID"),
		RetrievedRaw: r.str(d.retrievedColumn),
		GTIDSlavePos: r.str("Gtid_Slave_Pos"),
		LastIOErrno:  int(r.integer("Last_IO_Errno")),
		LastIOError:  r.str("Last_IO_Error"),
		LastSQLErrno: int(r.integer("Last_SQL_Errno")),
		LastSQLError: r.str("Last_SQL_Error"),
		SSL:          strings.EqualFold(r.str("Source_SSL_Allowed", "Master_SSL_Allowed"), "Yes"),
		ConnectRetry: time.Duration(r.integer("Connect_Retry")) * time.Second,
	}
	sid, _ := strconv.ParseUint(r.str("Source_Server_Id", "Master_Server_Id"), 10, 32)
	rep.SourceServerID = uint32(sid)
	if lag, ok := r.get("Seconds_Behind_Source", "Seconds_Behind_Master"); ok && lag.Valid {
		if n, err := strconv.ParseInt(lag.String, 10, 64); err == nil {
			rep.Lag, rep.LagKnown = time.Duration(n)*time.Second, true
		}
	}
	if engine == gtid.MariaDB {
		rep.AutoPosition = !strings.EqualFold(r.str("Using_Gtid"), "No") && r.str("Using_Gtid") != ""
	} else {
		rep.AutoPosition = r.str("Auto_Position") == "1"
	}
	if hb, err := strconv.ParseFloat(r.str("Slave_heartbeat_period"), 64); err == nil {
		rep.HeartbeatPeriod = time.Duration(hb * float64(time.Second))
	}
	rep.ReceivedHeartbeats, _ = strconv.ParseUint(r.str("Slave_received_heartbeats"), 10, 64)
	var err error
	if rep.Retrieved, err = gtid.Parse(engine, rep.RetrievedRaw); err != nil {
		return nil, fmt.Errorf("retrieved GTIDs (%s): %w", d.retrievedColumn, err)
	}
	return rep, nil
}
