package mysqlctl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/failoverd/failoverd/gtid"
)

// Sentinel errors for expected conditions. Operations wrap them with %w and
// the name of the failed step; test with errors.Is.
var (
	// ErrUnsupportedVersion: the server is older than MySQL 8.0.23 or
	// MariaDB 10.11, or its version string cannot be read.
	ErrUnsupportedVersion = errors.New("mysqlctl: unsupported server version")
	// ErrNotReplica: the operation needs configured replication and the
	// server has none.
	ErrNotReplica = errors.New("mysqlctl: server is not a replica")
	// ErrNotSupported: the flavor (or the server's configuration, e.g. a
	// plugin that is not loaded) does not provide the operation.
	ErrNotSupported = errors.New("mysqlctl: not supported")
	// ErrDrainTimeout: the relay log was not applied before the timeout.
	ErrDrainTimeout = errors.New("mysqlctl: relay log drain timed out")
	// ErrIncompleteTransaction: the IO thread is stopped and the applier
	// read all of the relay log, yet the retrieved set is not executed:
	// its tail is a transaction received only in part (the source died
	// or hung mid-transaction), which no replica could have acknowledged.
	// Returned wrapped in an *IncompleteError.
	ErrIncompleteTransaction = errors.New("mysqlctl: retrieved set ends in an incomplete transaction")
	// ErrReplicationError: a replication thread stopped with an error.
	ErrReplicationError = errors.New("mysqlctl: replication error")
	// ErrApplierStopped: on MariaDB both replication threads are stopped,
	// and starting either would discard the relay log (the retrieved but
	// unapplied transactions), so the operation refused to start one.
	ErrApplierStopped = errors.New("mysqlctl: both replication threads stopped; a restart would discard the relay log")
	// ErrFenceNotInEffect: after Fence the server still reports itself writable.
	ErrFenceNotInEffect = errors.New("mysqlctl: fence not in effect")
	// ErrNotWritable: after Promote the server still reports itself read-only.
	ErrNotWritable = errors.New("mysqlctl: server still read-only")
	// ErrReplicaRunning: Promote refused because replication threads still run.
	ErrReplicaRunning = errors.New("mysqlctl: replication threads still running")
	// ErrNotFenced: CloneFrom refused because the recipient is writable.
	ErrNotFenced = errors.New("mysqlctl: server is not fenced")
	// ErrSessionsNotKilled: KillClientConnections left a busy session (not
	// Sleep) the server would not let this account kill (MySQL: a
	// SYSTEM_USER account's). The count it returns is still right;
	// super_read_only stops those sessions writing, but anything that would
	// let a waiting commit return (switching semi-sync off) must not run
	// while one may be committing.
	ErrSessionsNotKilled = errors.New("mysqlctl: some sessions could not be killed")
	// ErrCloneFailed: the server reports that the clone did not complete.
	ErrCloneFailed = errors.New("mysqlctl: clone failed")
	// ErrInvalidArgument: a Source, Donor or Options field is unusable.
	ErrInvalidArgument = errors.New("mysqlctl: invalid argument")
)

// MySQL/MariaDB error numbers this package reacts to.
const (
	errNoSuchThread      = 1094 // ER_NO_SUCH_THREAD: KILL of a connection that already ended
	errKillDenied        = 1095 // ER_KILL_DENIED_ERROR: "You are not owner of thread" (MySQL: a SYSTEM_USER session)
	errBadReplica        = 1200 // ER_BAD_SLAVE: replication not configured
	errMasterInfo        = 1617 // MariaDB ER_MASTER_INFO: no such master connection
	errReplicaConfig     = 1794 // MySQL ER_REPLICA_CONFIGURATION: not configured as replica
	errChannelNotExist   = 3074 // MySQL ER_REPLICA_CHANNEL_DOES_NOT_EXIST
	errUnknownSystemVar  = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE: e.g. semi-sync/clone plugin not loaded
	errCloneRestartFails = 3707 // MySQL ER_CLONE_RESTART: clone done, mysqld not supervised
	// MySQL ER_UNABLE_TO_SET_OPTION: a group_replication_* variable set
	// while the plugin's lock is held (START/STOP GROUP_REPLICATION, another
	// option being set, the group reconfiguring); nothing was set.
	errGroupOptionBusy = 3724
)

// errNumber returns the server error number of err, or 0.
func errNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	var re *redactedError
	if errors.As(err, &re) {
		return re.number
	}
	return 0
}

// redactedError replaces an error whose text contained a secret. It keeps
// the server error number but not the original error, whose text (or
// *mysql.MySQLError.Message) would still hold the secret.
type redactedError struct {
	msg    string
	number uint16
}

func (e *redactedError) Error() string { return e.msg }

// redact returns err unchanged unless its text contains one of the non-empty
// secrets; then it returns a *redactedError with every occurrence replaced.
// Server messages can echo statement text (syntax errors quote "near ..."),
// and CHANGE REPLICATION SOURCE / CLONE statements carry passwords.
func redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	found := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "<redacted>")
			found = true
		}
	}
	if !found {
		return err
	}
	return &redactedError{msg: msg, number: errNumber(err)}
}

// IncompleteError is WaitRelayDrained's answer when the relay log is
// exhausted short of the retrieved set (see ErrIncompleteTransaction).
type IncompleteError struct {
	// Missing is what was retrieved but can never be applied.
	Missing gtid.Set
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("%v: %s never fully received", ErrIncompleteTransaction, e.Missing.Compact())
}

// Unwrap returns ErrIncompleteTransaction.
func (e *IncompleteError) Unwrap() error { return ErrIncompleteTransaction }
