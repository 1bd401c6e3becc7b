// Package mysqlctl controls one MySQL or MariaDB server for the failover
// daemon: it reads its status and fences, drains, promotes and repoints it.
//
// # Flavors
//
// Open detects the flavor from SELECT @@version, @@version_comment and
// refuses servers older than MySQL 8.0.23 (also Percona Server) or MariaDB
// 10.11 with ErrUnsupportedVersion. Every statement a flavor sends lives in
// one place, mysqlDialect or mariadbDialect (dialect.go):
//
//   - MySQL: SHOW REPLICA STATUS, STOP/START/RESET REPLICA,
//     CHANGE REPLICATION SOURCE TO ... SOURCE_AUTO_POSITION=1,
//     WAIT_FOR_EXECUTED_GTID_SET, super_read_only, semi-sync
//     rpl_semi_sync_source/replica_* (8.0.26+, or the older
//     master/slave names when that plugin is loaded), CLONE INSTANCE.
//   - MariaDB: SHOW ALL SLAVES STATUS, STOP/START/RESET SLAVE,
//     CHANGE MASTER TO ... MASTER_USE_GTID=current_pos, MASTER_GTID_WAIT,
//     read_only only, rpl_semi_sync_master/slave_*; no clone.
//
// Replica status is parsed by column name, never by position. Every
// statement is literal text (no placeholders); every session runs with
// sql_mode=NO_BACKSLASH_ESCAPES so a doubled single quote is the complete
// string escape. Passwords (the account's own, a Source's or a Donor's)
// are redacted from every error and never logged.
//
// # Operations
//
// Each operation takes a context that bounds it, names the failed step in its
// error and wraps a sentinel for expected conditions (ErrNotReplica,
// ErrNotSupported, ErrDrainTimeout, ErrReplicationError, ...). Each is
// idempotent: running it twice, or again after a crash half-way, is safe
// (StopReplica, StopReplicaIO and ResetReplicaAll on a non-replica succeed,
// Fence on a fenced server and Promote on a writable one are no-ops,
// ReplicateFrom restarts replication with the same settings).
//
// # Deadlines
//
// No call waits on the server without a bound of its own, whatever the
// caller's context:
//
//   - every statement is bounded by Options.DialTimeout, ReadTimeout and
//     WriteTimeout (the driver's socket deadlines, defaults 2s/5s/5s); so is
//     waiting for a free pooled session, since every holder of one is;
//   - WaitRelayDrained waits at most its timeout argument, in server-side
//     slices of at most one second (below the read timeout);
//   - CloneFrom, whose CLONE session has no read timeout, is bounded by its
//     timeout argument, restart and verification included.
//
// The context may end any of them earlier.
//
// KillClientConnections spares this Instance's own sessions by the
// CONNECTION_ID() each pooled session recorded when it was opened (checked
// together with the user name, because ids restart with the server), not by
// user name alone: other sessions of the daemon's account are killed too.
//
// # Grants
//
// deploy/accounts holds the copy-paste SQL (mysql.sql, mariadb.sql) and its
// real-server test runs every operation here with exactly those grants.
// Daemon admin account (Options.User):
//
//   - MySQL: SYSTEM_VARIABLES_ADMIN (read_only, super_read_only, semi-sync,
//     clone_valid_donor_list), REPLICATION_SLAVE_ADMIN (STOP/START/RESET
//     REPLICA, CHANGE REPLICATION SOURCE), RELOAD (RESET REPLICA ALL),
//     REPLICATION CLIENT (SHOW REPLICA STATUS), CONNECTION_ADMIN (KILL other
//     accounts' sessions), PROCESS (see every session), SELECT ON
//     performance_schema.*, and CLONE_ADMIN and BACKUP_ADMIN for CloneFrom
//     (recipient and donor), GROUP_REPLICATION_ADMIN for SetAsPrimary and
//     ForceMembers (Group Replication). super_read_only also blocks this account,
//     which only changes variables and replication, never data (CloneFrom
//     alone lifts super_read_only, for the copy only: MySQL refuses CLONE
//     INSTANCE under it; read_only stays on and the fence is set again
//     afterwards). It cannot
//     kill a SYSTEM_USER account's session; KillClientConnections leaves
//     those (super_read_only stops them).
//   - MariaDB: READ_ONLY ADMIN (required to change read_only; it also lets
//     the account write through read_only), REPLICATION SLAVE ADMIN
//     (STOP/START/RESET SLAVE, CHANGE MASTER, rpl_semi_sync_slave_*),
//     RELOAD (RESET SLAVE ALL), REPLICATION MASTER ADMIN
//     (rpl_semi_sync_master_*), REPLICA MONITOR (SHOW ALL SLAVES STATUS),
//     BINLOG MONITOR, CONNECTION ADMIN and PROCESS.
//
// Application accounts must NOT hold READ_ONLY ADMIN (MariaDB), SUPER,
// CONNECTION_ADMIN or SYSTEM_VARIABLES_ADMIN (MySQL), nor ALL PRIVILEGES ON
// *.*, which includes them: on MariaDB read_only is the only fence and
// READ_ONLY ADMIN holders write through it; on MySQL these privileges
// bypass read_only or allow lifting the fence. Grant them only their
// schemas (e.g. SELECT, INSERT, UPDATE, DELETE ON app.*).
//
// Replication account (Source.User), on every site since any site may
// become the source: REPLICATION SLAVE (and REPLICATION CLIENT for
// monitoring). On MySQL with caching_sha2_password use Source.TLS, or
// ReplicateFrom asks for the source's RSA key (GET_SOURCE_PUBLIC_KEY=1).
// Clone donor account (Donor.User, MySQL): BACKUP_ADMIN on the donor.
package mysqlctl
