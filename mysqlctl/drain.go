package mysqlctl

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/failoverd/failoverd/gtid"
)

// WaitRelayDrained waits until the replica has executed everything its IO
// thread retrieved (MySQL Retrieved_Gtid_Set, MariaDB Gtid_IO_Pos) plus
// target, which may be the zero Set (e.g. pass the fenced old primary's
// executed set when it is known). It waits with WAIT_FOR_EXECUTED_GTID_SET
// (MySQL) or MASTER_GTID_WAIT (MariaDB) in slices of at most a second,
// re-reading the replica status between slices, never Seconds_Behind.
//
//   - Not a replica: ErrNotReplica.
//   - SQL thread stopped with an error: ErrReplicationError (at once).
//   - SQL thread stopped without error: started once (START REPLICA
//     SQL_THREAD); if it stops again the wait runs into the timeout.
//     On MariaDB, when the IO thread is stopped too, it is not started
//     (that start would discard the relay log): the call succeeds if
//     Gtid_Slave_Pos already covers the position, else it returns
//     ErrApplierStopped. To freeze the retrieved set before a drain use
//     StopReplicaIO, which keeps the applier running.
//   - Relay log exhausted short of the retrieved set (IO thread stopped,
//     applier idle with nothing more to read, seen twice with nothing
//     applied in between, every worker of a multi-threaded applier idle): an
//     *IncompleteError naming the transactions never fully received.
//   - Not drained within timeout: ErrDrainTimeout.
//
// ctx bounds the whole call; if it ends first the error wraps ctx.Err().
func (i *Instance) WaitRelayDrained(ctx context.Context, target gtid.Set, timeout time.Duration) error {
	const op = "drain relay log"
	if !target.IsEmpty() && target.Flavor() != i.flavor.Engine {
		return i.fail(op, "check target", fmt.Errorf("%w: %s target for a %s server", ErrInvalidArgument, target.Flavor(), i.flavor.Engine))
	}
	deadline := i.now().Add(timeout)
	restarted := false
	exhaustedAt := "" // executed position when the relay log was last seen exhausted
	for {
		rep, err := i.replicaStatus(ctx)
		if err != nil {
			return i.fail(op, "read replica status", err)
		}
		if rep == nil {
			return i.fail(op, "read replica status", ErrNotReplica)
		}
		// Waiting for a failed applier only burns the failover's time budget.
		if rep.SQLError() {
			return i.fail(op, "check SQL thread", fmt.Errorf("%w: SQL thread stopped with error %d: %s", ErrReplicationError, rep.LastSQLErrno, rep.LastSQLError))
		}
		if !rep.SQLThread.Running() && !restarted {
			// MariaDB would discard the relay log, and then report the wait
			// as reached against the reset Gtid_IO_Pos: a drain that lost
			// transactions yet looked complete.
			if i.d.startPurgesRelayLog && !rep.IOThread.Running() {
				// Nothing left to apply (e.g. a run interrupted after
				// detach stopped both threads): drained, nothing to start.
				applied, err := gtid.Parse(i.flavor.Engine, rep.GTIDSlavePos)
				if err == nil && applied.Covers(rep.Retrieved.Union(target)) {
					i.log.Info("mysqlctl: relay log drained", "addr", i.addr, "position", rep.GTIDSlavePos)
					return nil
				}
				return i.fail(op, "check SQL thread", fmt.Errorf("%w: IO=%s SQL=%s, applied %q, retrieved %q",
					ErrApplierStopped, rep.IOThread, rep.SQLThread, rep.GTIDSlavePos, rep.RetrievedRaw))
			}
			if err := i.q.exec(ctx, i.d.startSQLThread); err != nil {
				return i.fail(op, "start SQL thread", err)
			}
			restarted = true
			i.log.Warn("mysqlctl: restarted stopped SQL thread", "addr", i.addr)
		}
		// A source that died mid-transaction leaves its GTID retrieved but
		// the transaction unapplicable: seen exhausted twice with nothing
		// applied in between, the wait is over.
		exhausted, applied, err := i.relayExhausted(ctx, rep)
		if err != nil {
			return i.fail(op, "read applier state", err)
		}
		if exhausted {
			if exhaustedAt != "" && exhaustedAt == applied+"|"+rep.SQLState {
				st, err := i.Status(ctx)
				if err != nil {
					return i.fail(op, "read executed set", err)
				}
				if missing := st.Executed.Uncovered(rep.Retrieved.Union(target)); !missing.IsEmpty() {
					i.log.Warn("mysqlctl: relay log exhausted short of the retrieved set", "addr", i.addr, "missing", missing.Compact())
					return &IncompleteError{Missing: missing}
				}
			}
			exhaustedAt = applied + "|" + rep.SQLState
		} else {
			exhaustedAt = ""
		}
		pos := i.d.waitPosition(rep.Retrieved.Union(target))
		remaining := deadline.Sub(i.now())
		if remaining <= 0 {
			return i.fail(op, "wait", fmt.Errorf("%w after %v: SQL thread %s, waiting for %q", ErrDrainTimeout, timeout, rep.SQLThread, pos))
		}
		slice := drainSlice
		if exhausted {
			// Confirming an exhausted relay log needs a second look soon.
			slice = drainSlice / 5
		}
		q, err := i.d.waitQuery(pos, min(remaining, slice))
		if err != nil {
			return i.fail(op, "build wait", err)
		}
		rs, err := i.q.query(ctx, q)
		if err != nil {
			return i.fail(op, "wait", err)
		}
		var v string
		if len(rs.rows) == 1 {
			v = rs.row(0).str("result")
		}
		reached, ok := i.d.waitResult(v)
		if !ok {
			return i.fail(op, "wait", fmt.Errorf("unexpected wait result %q", v))
		}
		if reached {
			i.log.Info("mysqlctl: relay log drained", "addr", i.addr, "position", pos)
			return nil
		}
	}
}

// relayExhausted reports whether nothing more can be applied (see
// ReplicaStatus.RelayExhausted) and what has been applied, the key that
// tells two exhausted looks with progress in between apart: MariaDB's
// @@gtid_slave_pos, MySQL's @@gtid_executed. The state of the SQL thread is
// not enough: a multi-threaded applier (MySQL's replica workers, the
// default; MariaDB's parallel replication) says "read all relay log" as
// soon as it has handed the last transaction to a worker, which may still
// apply it for seconds (a big transaction, a lock wait), so every worker
// must be idle too.
func (i *Instance) relayExhausted(ctx context.Context, rep *ReplicaStatus) (exhausted bool, applied string, err error) {
	if !rep.RelayExhausted() {
		return false, "", nil
	}
	rs, err := i.q.query(ctx, i.d.applierStateQuery)
	if err != nil {
		return false, "", err
	}
	if len(rs.rows) != 1 {
		return false, "", fmt.Errorf("expected 1 row, got %d", len(rs.rows))
	}
	r := rs.row(0)
	busy, err := strconv.Atoi(r.str("busy_workers"))
	if err != nil {
		return false, "", fmt.Errorf("busy_workers %q: %w", r.str("busy_workers"), err)
	}
	// A worker still applying a fully received transaction is slow, not
	// short of events: calling its GTID incomplete would let the failover
	// reset the relay log under an acknowledged write.
	if busy > 0 {
		return false, "", nil
	}
	return true, r.str("applied"), nil
}

// mariadbWaitPosition returns the MASTER_GTID_WAIT position for set: one
// domain-server-seq per domain holding the domain's highest seq_no
// (MASTER_GTID_WAIT compares seq_nos per domain, and a GTID set may hold
// several servers per domain or intervals MariaDB cannot read).
func mariadbWaitPosition(set gtid.Set) string {
	type top struct{ server, seq uint64 }
	best := map[uint64]top{}
	for _, el := range strings.Split(set.String(), ",") {
		parts := strings.SplitN(el, "-", 3)
		if len(parts) != 3 {
			continue
		}
		domain, err1 := strconv.ParseUint(parts[0], 10, 32)
		server, err2 := strconv.ParseUint(parts[1], 10, 32)
		seqText := parts[2]
		if _, hi, ok := strings.Cut(seqText, ".."); ok {
			seqText = hi
		}
		seq, err3 := strconv.ParseUint(seqText, 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		if b, ok := best[domain]; !ok || seq > b.seq {
			best[domain] = top{server, seq}
		}
	}
	domains := make([]uint64, 0, len(best))
	for d := range best {
		domains = append(domains, d)
	}
	sort.Slice(domains, func(a, b int) bool { return domains[a] < domains[b] })
	out := make([]string, len(domains))
	for n, d := range domains {
		out[n] = fmt.Sprintf("%d-%d-%d", d, best[d].server, best[d].seq)
	}
	return strings.Join(out, ",")
}
