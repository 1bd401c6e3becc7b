package mysqlctl

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Source is where ReplicateFrom points a replica.
type Source struct {
	Host string
	// Port defaults to 3306.
	Port int
	// User and Password of the replication account on the source.
	User, Password string
	// TLS requires an encrypted replication connection (SOURCE_SSL=1 /
	// MASTER_SSL=1). Without it MySQL fetches the source's RSA key
	// (GET_SOURCE_PUBLIC_KEY=1) so caching_sha2_password works.
	TLS bool
	// HeartbeatPeriod (rounded to ms) and ConnectRetry (rounded up to whole
	// seconds) are left at the server's defaults when zero.
	HeartbeatPeriod time.Duration
	ConnectRetry    time.Duration
}

// Fence makes the server refuse writes from application accounts: MySQL
// SET GLOBAL super_read_only=ON (implies read_only), MariaDB SET GLOBAL
// read_only=ON. It reads the variables back and returns an error wrapping
// ErrFenceNotInEffect if the fence did not take. Fencing a fenced server is
// a no-op.
func (i *Instance) Fence(ctx context.Context) error {
	if err := i.fence(ctx); err != nil {
		return i.fail("fence", "", err)
	}
	i.log.Info("mysqlctl: fenced", "addr", i.addr)
	return nil
}

// fence sets and reads back the fence; errors name the step only.
func (i *Instance) fence(ctx context.Context) error {
	for _, s := range i.d.fence {
		if err := i.q.exec(ctx, s); err != nil {
			return fmt.Errorf("set read-only: %w", err)
		}
	}
	st, err := i.readOnly(ctx)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	// A fence that silently did not apply (e.g. a proxy answering for
	// another server) would let the old primary keep accepting writes.
	if !st.ReadOnly || (i.d.hasSuperReadOnly && !st.SuperReadOnly) {
		return fmt.Errorf("read back: %w: read_only=%t super_read_only=%t", ErrFenceNotInEffect, st.ReadOnly, st.SuperReadOnly)
	}
	return nil
}

// readOnlyState is the read-back of the fence variables.
type readOnlyState struct{ ReadOnly, SuperReadOnly bool }

func (i *Instance) readOnly(ctx context.Context) (readOnlyState, error) {
	rs, err := i.q.query(ctx, i.d.readOnlyQuery)
	if err != nil {
		return readOnlyState{}, err
	}
	if len(rs.rows) != 1 {
		return readOnlyState{}, fmt.Errorf("expected 1 row, got %d", len(rs.rows))
	}
	r := rs.row(0)
	return readOnlyState{ReadOnly: r.boolean("read_only"), SuperReadOnly: r.boolean("super_read_only")}, nil
}

// Promote makes the server writable: MySQL super_read_only OFF then
// read_only OFF, MariaDB read_only OFF; then it reads them back. It refuses
// (ErrReplicaRunning) while replication threads still run: stop and reset
// replication first. Promoting a writable server is a no-op.
func (i *Instance) Promote(ctx context.Context) error {
	rep, err := i.replicaStatus(ctx)
	if err != nil {
		return i.fail("promote", "read replica status", err)
	}
	// A writable server that still applies another primary's stream mixes
	// two histories (errant transactions, split brain).
	if rep != nil && (rep.IOThread.Running() || rep.SQLThread.Running()) {
		return i.fail("promote", "check replication", fmt.Errorf("%w: IO=%s SQL=%s", ErrReplicaRunning, rep.IOThread, rep.SQLThread))
	}
	for _, s := range i.d.unfence {
		if err := i.q.exec(ctx, s); err != nil {
			return i.fail("promote", "clear read-only", err)
		}
	}
	st, err := i.readOnly(ctx)
	if err != nil {
		return i.fail("promote", "read back", err)
	}
	if st.ReadOnly || st.SuperReadOnly {
		return i.fail("promote", "read back", fmt.Errorf("%w: read_only=%t super_read_only=%t", ErrNotWritable, st.ReadOnly, st.SuperReadOnly))
	}
	i.log.Info("mysqlctl: promoted", "addr", i.addr)
	return nil
}

// StopReplica stops both replication threads. On a server without
// replication it does nothing and returns nil.
func (i *Instance) StopReplica(ctx context.Context) error {
	if err := i.stopReplica(ctx); err != nil {
		return i.fail("stop replica", "", err)
	}
	i.log.Info("mysqlctl: replica stopped", "addr", i.addr)
	return nil
}

func (i *Instance) stopReplica(ctx context.Context) error {
	err := i.q.exec(ctx, i.d.stopReplica)
	if err != nil && slices.Contains(i.d.notReplicaErrnos, errNumber(err)) {
		return nil // never configured: already stopped
	}
	return err
}

// killSettle bounds the wait between killing a receiver thread and STOP;
// killPoll is how often the wait looks whether the killed receiver has
// finished (a receiver retrying a dead source finishes within milliseconds:
// a fixed pause cost every crash failover on MariaDB its whole length).
const (
	killSettle = 100 * time.Millisecond
	killPoll   = 5 * time.Millisecond
)

// StopReplicaIO stops only the IO (receiver) thread and leaves the SQL
// (applier) thread running: STOP REPLICA IO_THREAD (MySQL) or STOP SLAVE
// IO_THREAD (MariaDB). The statement returns once the thread has stopped, so
// the retrieved set read afterwards (ReplicaStatus.Retrieved) is final:
// nothing more arrives in the relay log while the applier works through it.
//
// A SQL thread that is stopped without an error is started first, while the
// IO thread still runs: MariaDB (GTID mode) discards every relay log when a
// replication thread starts while both are stopped, so starting the applier
// afterwards would throw away the retrieved transactions. Stopping a stopped
// IO thread, or calling it on a server without replication, does nothing and
// returns nil.
func (i *Instance) StopReplicaIO(ctx context.Context) error {
	const op = "stop replica IO thread"
	rep, err := i.replicaStatus(ctx)
	if err != nil {
		return i.fail(op, "read replica status", err)
	}
	if rep == nil {
		return nil // not a replica: nothing receives
	}
	// Only while the IO thread runs can the applier start without MariaDB
	// purging the relay log (see above).
	if !rep.SQLThread.Running() && !rep.SQLError() && rep.IOThread.Running() {
		if err := i.q.exec(ctx, i.d.startSQLThread); err != nil {
			return i.fail(op, "start SQL thread", err)
		}
		i.log.Warn("mysqlctl: started stopped SQL thread before stopping the IO thread", "addr", i.addr)
	}
	if i.d.ioThreadsQuery != "" && rep.IOThread.Running() {
		// A receiver blocked on a hung source makes STOP wait seconds, the
		// failover's time: interrupt it first (STOP then finds it gone).
		rs, err := i.q.query(ctx, i.d.ioThreadsQuery)
		if err != nil {
			return i.fail(op, "list receiver threads", err)
		}
		killed := 0
		for n := range rs.rows {
			id, err := strconv.ParseUint(rs.row(n).str("id"), 10, 64)
			if err != nil {
				continue
			}
			// Already gone is fine: STOP below settles it either way.
			if i.q.exec(ctx, i.d.kill(id)) == nil {
				killed++
			}
		}
		// A STOP issued while the killed receiver is still finishing waits a
		// whole 2 s retry cycle (measured: 3 of 20 hung-primary failovers on
		// MariaDB). Its processlist row goes before the thread has finished;
		// the replica status says "not running" only at the very end, so
		// that is what is waited for.
		for waited := time.Duration(0); killed > 0; waited += killPoll {
			// Looked at before the first pause: the receiver of a live
			// source (a switchover's) is usually done at once, and a fixed
			// pause cost every promotion its length (issue 32).
			if now, err := i.replicaStatus(ctx); err == nil && (now == nil || !now.IOThread.Running()) {
				break
			}
			if waited >= killSettle {
				break
			}
			if err := i.sleep(ctx, killPoll); err != nil {
				return i.fail(op, "let the receiver react", err)
			}
		}
	}
	err = i.q.exec(ctx, i.d.stopIOThread)
	if err != nil && !slices.Contains(i.d.notReplicaErrnos, errNumber(err)) {
		return i.fail(op, "", err)
	}
	i.log.Info("mysqlctl: replica IO thread stopped", "addr", i.addr)
	return nil
}

// StartReplicaIO starts the IO (receiver) thread again, e.g. after
// StopReplicaIO when a promotion was abandoned: START REPLICA IO_THREAD /
// START SLAVE IO_THREAD. Starting a running thread does nothing. On a server
// without replication it returns an error wrapping ErrNotReplica. On MariaDB
// it refuses (ErrApplierStopped) while the SQL thread is stopped too: the
// start would discard the relay log, and with it any retrieved transaction
// the source can no longer send.
func (i *Instance) StartReplicaIO(ctx context.Context) error {
	const op = "start replica IO thread"
	if i.d.startPurgesRelayLog {
		rep, err := i.replicaStatus(ctx)
		if err != nil {
			return i.fail(op, "read replica status", err)
		}
		if rep == nil {
			return i.fail(op, "read replica status", ErrNotReplica)
		}
		if !rep.IOThread.Running() && !rep.SQLThread.Running() {
			return i.fail(op, "check SQL thread", fmt.Errorf("%w: SQL thread %s", ErrApplierStopped, rep.SQLThread))
		}
	}
	err := i.q.exec(ctx, i.d.startIOThread)
	if err != nil && slices.Contains(i.d.notReplicaErrnos, errNumber(err)) {
		err = fmt.Errorf("%w: %w", ErrNotReplica, err)
	}
	if err != nil {
		return i.fail(op, "", err)
	}
	i.log.Info("mysqlctl: replica IO thread started", "addr", i.addr)
	return nil
}

// ResetReplicaAll stops replication and forgets the source (RESET REPLICA
// ALL / RESET SLAVE ALL). Running it twice, or on a non-replica, is fine.
// MariaDB keeps @@gtid_slave_pos.
func (i *Instance) ResetReplicaAll(ctx context.Context) error {
	if err := i.stopReplica(ctx); err != nil {
		return i.fail("reset replica", "stop", err)
	}
	err := i.q.exec(ctx, i.d.resetReplicaAll)
	if err != nil && !slices.Contains(i.d.notReplicaErrnos, errNumber(err)) {
		return i.fail("reset replica", "reset all", err)
	}
	i.log.Info("mysqlctl: replica reset", "addr", i.addr)
	return nil
}

// ReplicateFrom fences the server, points it at src with GTID
// auto-positioning (MySQL SOURCE_AUTO_POSITION=1, MariaDB
// MASTER_USE_GTID=current_pos, so a former primary resumes after the
// transactions it wrote itself, and a replica holding errant transactions
// is refused by the source instead of silently diverging) and starts
// replication. Calling it again with
// the same src restarts replication with the same settings.
func (i *Instance) ReplicateFrom(ctx context.Context, src Source) error {
	change, err := i.d.changeSource(src)
	if err != nil {
		return i.fail("replicate from", "build statement", err, src.Password)
	}
	// A writable replica accepts errant transactions that later make it
	// unpromotable and break GTID auto-positioning.
	if err := i.fence(ctx); err != nil {
		return i.fail("replicate from", "fence", err)
	}
	if err := i.stopReplica(ctx); err != nil {
		return i.fail("replicate from", "stop replica", err)
	}
	if err := i.q.exec(ctx, change); err != nil {
		// Never log or wrap the statement: it carries the password.
		return i.fail("replicate from", "change source", err, src.Password)
	}
	if err := i.q.exec(ctx, i.d.startReplica); err != nil {
		return i.fail("replicate from", "start replica", err)
	}
	i.log.Info("mysqlctl: replicating", "addr", i.addr, "source_host", src.Host, "source_port", orDefault(src.Port, 3306), "tls", src.TLS)
	return nil
}

// SetSemiSync enables or disables the primary and replica sides of
// semi-synchronous replication. When the replica side changes on a server
// whose IO thread runs, the IO thread is restarted so the change takes
// effect. It returns ErrNotSupported when the semi-sync variables do not
// exist (MySQL: load semisync_source/semisync_replica, or
// semisync_master/semisync_slave before 8.0.26, with plugin-load-add).
func (i *Instance) SetSemiSync(ctx context.Context, primary, replica bool) error {
	rs, err := i.q.query(ctx, i.d.semiSyncQuery)
	if err == nil && len(rs.rows) != 1 {
		err = fmt.Errorf("expected 1 row, got %d", len(rs.rows))
	}
	if err != nil {
		return i.fail("set semi-sync", "read variables", err)
	}
	vars := pairs(rs.row(0).str("semi_sync_variables"))
	pName, _, pOK := lookup(vars, i.d.semiPrimaryVars)
	rName, rValue, rOK := lookup(vars, i.d.semiReplicaVars)
	if !pOK || !rOK {
		return i.fail("set semi-sync", "find variables", fmt.Errorf("%w: semi-sync plugins not loaded", ErrNotSupported))
	}
	replicaChanged := parseBool(rValue) != replica
	for _, s := range []string{i.d.setGlobal(pName, primary), i.d.setGlobal(rName, replica)} {
		if err := i.q.exec(ctx, s); err != nil {
			return i.fail("set semi-sync", "set variable", err)
		}
	}
	if replicaChanged {
		rep, err := i.replicaStatus(ctx)
		if err != nil {
			return i.fail("set semi-sync", "read replica status", err)
		}
		// The replica side is negotiated when the IO thread connects.
		if rep != nil && rep.IOThread.Running() {
			for _, s := range []string{i.d.stopIOThread, i.d.startIOThread} {
				if err := i.q.exec(ctx, s); err != nil {
					return i.fail("set semi-sync", "restart IO thread", err)
				}
			}
		}
	}
	i.log.Info("mysqlctl: semi-sync set", "addr", i.addr, "primary", primary, "replica", replica)
	return nil
}
