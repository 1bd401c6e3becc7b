// Package reclone re-seeds a diverged site from the group's current primary
// when the engine has no CLONE INSTANCE (MariaDB).
//
// A site that holds errant transactions the primary lacks stays fenced until
// a human asks for a reclone (POST /v1/groups/{g}/reclone). On MySQL the
// daemon clones with mysqlctl's CloneFrom. On MariaDB it runs the operator's
// command, reclone.command, through Hook.Run: the command gets the recipient
// and donor site names as its last two arguments and their MySQL addresses in
// FAILOVERD_SITE_ADDRESS and FAILOVERD_DONOR_ADDRESS (plus FAILOVERD_GROUP,
// FAILOVERD_SITE, FAILOVERD_DONOR). Credentials never travel on the command
// line: the command reads them from its own files.
//
// The command must leave the recipient running, read_only=ON, with an empty
// gtid_binlog_state and gtid_slave_pos set to the donor position its data
// holds, so that its gtid_current_pos is contained in the donor's. It does
// not start replication: the daemon checks those conditions afterwards and
// rejoins the site itself (CHANGE MASTER ... MASTER_USE_GTID=current_pos).
//
// Run logs every output line ("reclone.output"), bounds the run by
// Hook.Timeout and, when it ends (timeout, cancellation or plain exit), kills
// whatever the command left running in its process group, so no child
// outlives the run. deploy/reclone/mariadb-backup.sh is a documented
// production example (mariadb-backup over ssh);
// test/e2e/testdata/reclone-mariadb-dump.sh is the mariadb-dump hook the
// tests run against real servers.
package reclone
