-- failoverd's accounts on MySQL 8.0.23+, 8.4 and 9.x (and Percona Server).
-- Run as an administrator on EVERY site before replication is set up: any
-- site may become the primary, a replica's source or a clone donor.
-- Replace the CHANGE-ME passwords; narrow '%' to the daemon's and the
-- replicas' addresses where you can. deploy/accounts' real-server test runs
-- every daemon operation with exactly these grants, and the e2e suite's
-- daemons and replicas use these accounts.

-- The daemon (credentials.admin; also the sidecar's unless it has its own):
-- read_only/super_read_only and semi-sync (SYSTEM_VARIABLES_ADMIN),
-- STOP/START/RESET REPLICA and CHANGE REPLICATION SOURCE
-- (REPLICATION_SLAVE_ADMIN; RESET REPLICA ALL also wants RELOAD), SHOW
-- REPLICA STATUS (REPLICATION CLIENT),
-- killing the application's sessions at a fence (CONNECTION_ADMIN, PROCESS),
-- semi-sync and applier state (performance_schema), CLONE as recipient
-- (CLONE_ADMIN) and donor (BACKUP_ADMIN), and in a Group Replication group
-- (replication: group) group_replication_set_as_primary and
-- group_replication_force_members (GROUP_REPLICATION_ADMIN; the group's own
-- state is in performance_schema). It never needs to write data:
-- super_read_only stops it too.
CREATE USER 'failoverd'@'%' IDENTIFIED BY 'CHANGE-ME-daemon';
GRANT SYSTEM_VARIABLES_ADMIN, REPLICATION_SLAVE_ADMIN, CONNECTION_ADMIN, CLONE_ADMIN, BACKUP_ADMIN, GROUP_REPLICATION_ADMIN ON *.* TO 'failoverd'@'%';
GRANT RELOAD, REPLICATION CLIENT, PROCESS ON *.* TO 'failoverd'@'%';
GRANT SELECT ON performance_schema.* TO 'failoverd'@'%';

-- The sidecar beside each MySQL (credentials.sidecar; optional, the sidecars
-- use credentials.admin without it): it reads status, fences, ends the
-- application's sessions and lifts its own fence at boot, nothing else.
CREATE USER 'failoverd_sidecar'@'%' IDENTIFIED BY 'CHANGE-ME-sidecar';
GRANT SYSTEM_VARIABLES_ADMIN, CONNECTION_ADMIN ON *.* TO 'failoverd_sidecar'@'%';
GRANT REPLICATION CLIENT, PROCESS ON *.* TO 'failoverd_sidecar'@'%';
GRANT SELECT ON performance_schema.* TO 'failoverd_sidecar'@'%';

-- Replicas connect to their source with this account
-- (credentials.replication). With caching_sha2_password (the default) the
-- link uses TLS (tls.enabled) or fetches the source's RSA key.
CREATE USER 'repl'@'%' IDENTIFIED BY 'CHANGE-ME-replication';
GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%';

-- Application accounts get their own schemas only, never SUPER,
-- CONNECTION_ADMIN, SYSTEM_VARIABLES_ADMIN or ALL ON *.*: those bypass
-- read_only or can lift the fence. For example:
--   GRANT SELECT, INSERT, UPDATE, DELETE ON app.* TO 'app'@'%';
