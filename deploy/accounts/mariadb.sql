-- failoverd's accounts on MariaDB 10.11+.
-- Run as an administrator on EVERY site before replication is set up: any
-- site may become the primary or a replica's source. Replace the CHANGE-ME
-- passwords; narrow '%' to the daemon's and the replicas' addresses where
-- you can. deploy/accounts' real-server test runs every daemon operation with
-- exactly these grants, and the e2e suite's daemons and replicas use these
-- accounts.

-- The daemon (credentials.admin; also the sidecar's unless it has its own):
-- read_only (READ_ONLY ADMIN: MariaDB requires it to change read_only, and
-- it lets the account write through read_only, so keep this account to
-- failoverd), STOP/START/RESET SLAVE, CHANGE MASTER and
-- rpl_semi_sync_slave_* (REPLICATION SLAVE ADMIN), rpl_semi_sync_master_*
-- (REPLICATION MASTER ADMIN), SHOW ALL SLAVES STATUS (REPLICA MONITOR), the
-- binlog position (BINLOG MONITOR), RESET SLAVE ALL (RELOAD), and killing
-- the application's sessions at a fence (CONNECTION ADMIN, PROCESS).
CREATE USER 'failoverd'@'%' IDENTIFIED BY 'CHANGE-ME-daemon';
GRANT READ_ONLY ADMIN, REPLICATION SLAVE ADMIN, REPLICATION MASTER ADMIN, REPLICA MONITOR, BINLOG MONITOR, RELOAD, CONNECTION ADMIN, PROCESS ON *.* TO 'failoverd'@'%';

-- The sidecar beside each MariaDB (credentials.sidecar; optional, the
-- sidecars use credentials.admin without it): it reads status, fences, ends
-- the application's sessions and lifts its own fence at boot, nothing else.
CREATE USER 'failoverd_sidecar'@'%' IDENTIFIED BY 'CHANGE-ME-sidecar';
GRANT READ_ONLY ADMIN, REPLICA MONITOR, CONNECTION ADMIN, PROCESS ON *.* TO 'failoverd_sidecar'@'%';

-- Replicas connect to their source with this account (credentials.replication).
CREATE USER 'repl'@'%' IDENTIFIED BY 'CHANGE-ME-replication';
GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%';

-- Application accounts get their own schemas only, never READ_ONLY ADMIN,
-- SUPER or ALL ON *.*: on MariaDB read_only is the only fence, and
-- READ_ONLY ADMIN holders write through it. For example:
--   GRANT SELECT, INSERT, UPDATE, DELETE ON app.* TO 'app'@'%';
