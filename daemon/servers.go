package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
)

// Instance is what the daemon does to one site's server. *mysqlctl.Instance
// implements it; tests use fakes.
type Instance interface {
	Status(ctx context.Context) (mysqlctl.Status, error)
	Fence(ctx context.Context) error
	KillClientConnections(ctx context.Context) (int, error)
	StopReplicaIO(ctx context.Context) error
	StartReplicaIO(ctx context.Context) error
	WaitRelayDrained(ctx context.Context, target gtid.Set, timeout time.Duration) error
	StopReplica(ctx context.Context) error
	ResetReplicaAll(ctx context.Context) error
	Promote(ctx context.Context) error
	ReplicateFrom(ctx context.Context, src mysqlctl.Source) error
	SetSemiSync(ctx context.Context, primary, replica bool) error
	Close() error
}

var _ Instance = (*mysqlctl.Instance)(nil)

// Dialer opens an Instance for a site's admin address.
type Dialer func(ctx context.Context, site configs.Site) (Instance, error)

// ErrDrainAborted means the candidate did not apply its relay log in time and
// the group's onDrainTimeout is abort.
var ErrDrainAborted = errors.New("relay log not drained in time; promotion aborted")

// ErrNotContained means a replica holds transactions the new primary lacks
// (errant writes, or writes an old primary acknowledged alone), so it was
// not repointed: the error names them.
var ErrNotContained = errors.New("replica has transactions the new primary lacks; not repointed")

// stepTimeout bounds one step on one server: a handful of
// statements, each also bounded by the driver's read timeout (mysqlctl
// Options), plus a dial. A drain gets RelayDrainTimeout on top. Without it a
// step would be bounded only by the whole action's context
// (group.actionTimeout), so one hung replica could use up the time of every
// later step and site.
const stepTimeout = 15 * time.Second

// servers are the per-server primitives the group's actions are made of:
// fence one site, drain and detach a candidate, make it writable, repoint
// replicas, move the semi-sync roles. Each runs on one server at a time (or
// each server in turn) under its own stepTimeout, knows nothing of the
// group's persisted state, and is idempotent, so an action interrupted by a
// crash is simply run again.
type servers struct {
	group  configs.Group
	conns  *connections
	log    *slog.Logger
	secret func() (string, error) // replication password
}

// on runs op on site's Instance under its own deadline, timeout.
func (sv *servers) on(ctx context.Context, site string, timeout time.Duration, op func(context.Context, Instance) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return sv.conns.do(ctx, site, func(in Instance) error { return op(ctx, in) })
}

// fence sets site read-only, reads it back and ends its client sessions.
func (sv *servers) fence(ctx context.Context, site string) error {
	err := sv.on(ctx, site, stepTimeout, func(ctx context.Context, in Instance) error {
		// Sessions first: setting read_only waits for commits in flight, and
		// a commit waiting for a semi-sync acknowledgement nobody will send
		// would block the fence forever. A killed session never gets its OK.
		before, err := sv.killForFence(ctx, site, in)
		if err != nil {
			return err
		}
		if err := sv.setReadOnly(ctx, site, in); err != nil {
			return err
		}
		// And whoever connected in between.
		after, err := sv.killForFence(ctx, site, in)
		if err != nil {
			return err
		}
		sv.log.Info("site.fenced", "site", site, "killed_connections", before+after)
		return nil
	})
	if err != nil {
		return fmt.Errorf("fence %s: %w", site, err)
	}
	return nil
}

// killForFence ends site's client sessions for a fence. Sessions the
// server would not let the daemon's account kill (a SYSTEM_USER account's,
// MySQL) do not fail it: super_read_only stops them writing.
func (sv *servers) killForFence(ctx context.Context, site string, in Instance) (int, error) {
	n, err := in.KillClientConnections(ctx)
	if errors.Is(err, mysqlctl.ErrSessionsNotKilled) {
		sv.log.Warn("site.sessions_not_killed", "site", site, "err", err)
		return n, nil
	}
	return n, err
}

// semiSyncFenceGrace is how long a fence of a MySQL site with the semi-sync
// primary side on may wait for the global read lock before the daemon
// concludes that killed sessions hold it (see setReadOnly).
const semiSyncFenceGrace = 500 * time.Millisecond

// setReadOnly is in.Fence, called once the client sessions are killed.
//
// On MySQL a session killed while its commit waits for a semi-sync
// acknowledgement keeps waiting (MariaDB ends the wait on KILL): with the
// infinite timeout the semisync proof requires, a hung or cut-off primary's
// commits wait forever, holding the commit lock that SET GLOBAL
// super_read_only needs, so the fence would never apply and the old primary
// would stay writable beside the new one. Their clients are gone (KILL
// CONNECTION closed their sockets, so they can never be told the commit
// succeeded), but only the semi-sync primary side switched off ends those
// waits. So when the fence is still waiting after semiSyncFenceGrace, the
// daemon kills the client sessions again and switches the primary side off;
// the killed commits complete on this site alone (unacknowledged: they make
// it diverged later, as MariaDB's do) and the fence applies. The fence
// statement is pending all along: a pending global read lock blocks every
// new writer, so no session can start a commit between the second kill and
// the switch-off and be acknowledged by it. If the fence still fails, the
// primary side is switched back on: a writable site never runs without it.
func (sv *servers) setReadOnly(ctx context.Context, site string, in Instance) error {
	if sv.group.Engine == configs.EngineMariaDB {
		return in.Fence(ctx)
	}
	st, err := in.Status(ctx)
	if err != nil {
		return err
	}
	if !st.SemiSync.PrimaryEnabled || st.Fenced() {
		return in.Fence(ctx)
	}
	done := make(chan error, 1)
	go func() { done <- in.Fence(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(semiSyncFenceGrace):
	}
	// Prevents acknowledging a commit on a deposed primary: a session the
	// daemon could not kill (a SYSTEM_USER account's) keeps its client, and
	// switching semi-sync off would tell it its waiting commit succeeded.
	killed, err := in.KillClientConnections(ctx)
	if err == nil {
		err = in.SetSemiSync(ctx, false, st.SemiSync.ReplicaEnabled)
	}
	if err != nil {
		<-done // ends with ctx at the latest
		return fmt.Errorf("release commits waiting for semi-sync acknowledgements: %w", err)
	}
	sv.log.Warn("site.semisync_waits_released", "site", site, "killed_connections", killed,
		"note", "the fence waited for commits of killed sessions blocked on semi-sync acknowledgements; the semi-sync primary side is switched off so they complete unacknowledged and the fence applies")
	if err := <-done; err != nil {
		restore, cancel := context.WithTimeout(context.WithoutCancel(ctx), stepTimeout)
		defer cancel()
		if rerr := in.SetSemiSync(restore, true, st.SemiSync.ReplicaEnabled); rerr != nil {
			sv.log.Error("site.semisync_restore_failed", "site", site, "err", rerr)
		}
		return err
	}
	return nil
}

// drainResult is what a drain learned about its target.
type drainResult struct {
	// Retrieved is the target's final retrieved set: everything its IO
	// thread had received when it was stopped (MySQL Retrieved_Gtid_Set,
	// MariaDB Gtid_IO_Pos: one triple per domain). It is empty when the
	// target has no replication any more (an earlier, interrupted run
	// already detached it) or received nothing.
	Retrieved gtid.Set
	// Incomplete is the tail of Retrieved received only in part (the
	// source died or hung mid-transaction): it can never be applied.
	Incomplete gtid.Set
	// TimedOut: the target had not applied all of Retrieved within
	// relayDrainTimeout. With a nil error (onDrainTimeout=promote) the
	// retrieved transactions it had not applied are lost by promoting it.
	TimedOut bool
}

// drain freezes what target received and waits until it applied it: stop
// the IO thread, read the final retrieved set, wait (at most timeout:
// relayDrainTimeout, or less for a switchover) until the executed set contains it. The SQL thread
// keeps running; detach stops and resets replication afterwards.
//
// On a timeout, onDrainTimeout=promote returns the result with a nil error
// (the caller decides whether the candidate may still be promoted);
// otherwise the IO thread is started again, best effort, so the candidate
// keeps receiving what the fenced old primary still has, and the error wraps
// ErrDrainAborted. Any other failure (an applier error, mysqlctl's
// ErrApplierStopped) leaves the IO thread stopped: the candidate's
// replication needs a human or a repoint. Re-running drain after a crash is
// safe: the IO thread is already stopped and the set read is the same.
func (sv *servers) drain(ctx context.Context, target string, timeout time.Duration) (drainResult, error) {
	var res drainResult
	var timedOut error // the wait's ErrDrainTimeout, with its details
	err := sv.on(ctx, target, timeout+stepTimeout, func(ctx context.Context, in Instance) error {
		// Receiving stops before the set is read: transactions that arrived
		// after the read would be discarded unapplied by RESET REPLICA ALL.
		if err := in.StopReplicaIO(ctx); err != nil {
			return fmt.Errorf("stop IO thread: %w", err)
		}
		st, err := in.Status(ctx)
		if err != nil {
			return fmt.Errorf("read retrieved set: %w", err)
		}
		if st.Replica == nil {
			return nil
		}
		// A receiver still running would make the set read a moving target.
		if st.Replica.IOThread.Running() {
			return fmt.Errorf("IO thread still %s after it was stopped", st.Replica.IOThread)
		}
		res.Retrieved = st.Replica.Retrieved
		if res.Retrieved.IsEmpty() {
			return nil
		}
		// With its own semi-sync source side on, the candidate's applier
		// waits for acknowledgements nobody sends and the drain never ends.
		if st.SemiSync.PrimaryEnabled {
			if err := in.SetSemiSync(ctx, false, st.SemiSync.ReplicaEnabled); err != nil {
				return fmt.Errorf("switch the semi-sync source side off: %w", err)
			}
			sv.log.Warn("semisync.source_disabled", "site", target, "why", "drain",
				"note", "a replica's semi-sync source side makes its applier wait for acknowledgements nobody sends; the promotion enables it again once a replica acknowledges")
		}
		err = in.WaitRelayDrained(ctx, res.Retrieved, timeout)
		if errors.Is(err, mysqlctl.ErrDrainTimeout) {
			res.TimedOut, timedOut = true, err
			return nil // the connection is fine; decided below
		}
		// A trailing transaction received only in part: no replica could
		// have acknowledged it; the caller checks no peer holds it whole.
		if inc := (*mysqlctl.IncompleteError)(nil); errors.As(err, &inc) {
			res.Incomplete = inc.Missing
			return nil
		}
		return err
	})
	switch {
	case err != nil:
		return res, fmt.Errorf("drain %s: %w", target, err)
	case res.TimedOut && sv.group.OnDrainTimeout == "promote":
		sv.log.Warn("relay.drain_timeout_promoting", "site", target, "retrieved", res.Retrieved.Compact(),
			"note", "onDrainTimeout=promote: transactions retrieved but not applied are lost")
		return res, nil
	case res.TimedOut:
		sv.log.Warn("relay.drain_timeout_aborting", "site", target, "retrieved", res.Retrieved.Compact(), "timeout", timeout)
		// The candidate stays a replica: let it receive again.
		if err := sv.on(ctx, target, stepTimeout, func(ctx context.Context, in Instance) error { return in.StartReplicaIO(ctx) }); err != nil {
			sv.log.Warn("relay.io_restart_failed", "site", target, "err", err)
		}
		return res, fmt.Errorf("drain %s: %w: %w", target, ErrDrainAborted, timedOut)
	}
	sv.log.Info("relay.drained", "site", target, "retrieved", res.Retrieved.Compact())
	return res, nil
}

// detach stops and removes replication on target and returns its executed
// GTID set: the promotion GTID.
func (sv *servers) detach(ctx context.Context, target string) (gtid.Set, error) {
	var set gtid.Set
	err := sv.on(ctx, target, stepTimeout, func(ctx context.Context, in Instance) error {
		if err := in.StopReplica(ctx); err != nil {
			return fmt.Errorf("stop replication on %s: %w", target, err)
		}
		if err := in.ResetReplicaAll(ctx); err != nil {
			return fmt.Errorf("reset replication on %s: %w", target, err)
		}
		st, err := in.Status(ctx)
		if err != nil {
			return fmt.Errorf("read promotion GTID of %s: %w", target, err)
		}
		set = st.Executed
		return nil
	})
	return set, err
}

// makeWritable clears the fences of target and confirms it is writable.
func (sv *servers) makeWritable(ctx context.Context, target string) error {
	err := sv.on(ctx, target, stepTimeout, func(ctx context.Context, in Instance) error { return in.Promote(ctx) })
	if err != nil {
		return fmt.Errorf("make %s writable: %w", target, err)
	}
	return nil
}

// repoint makes every site replicate from primary; failures are reported
// per site and retried by the next decision round (Rejoin). A site whose
// executed set is not covered by primary's is refused with ErrNotContained
// and keeps its replication settings. Each site has its own stepTimeout.
func (sv *servers) repoint(ctx context.Context, primary string, sites []string) error {
	src, err := sv.source(primary)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range sites {
		if err := sv.repointOne(ctx, primary, s, src); err != nil {
			errs = append(errs, fmt.Errorf("repoint %s to %s: %w", s, primary, err))
			continue
		}
		sv.log.Info("site.repointed", "site", s, "source", primary)
	}
	return errors.Join(errs...)
}

func (sv *servers) repointOne(ctx context.Context, primary, site string, src mysqlctl.Source) error {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	// The replica is read before the primary, so a transaction the replica
	// received from the primary in between is in both sets.
	var rst, pst mysqlctl.Status
	err := sv.conns.do(ctx, site, func(in Instance) (err error) { rst, err = in.Status(ctx); return err })
	if err != nil {
		return fmt.Errorf("status of %s: %w", site, err)
	}
	err = sv.conns.do(ctx, primary, func(in Instance) (err error) { pst, err = in.Status(ctx); return err })
	if err != nil {
		return fmt.Errorf("status of %s: %w", primary, err)
	}
	if err := gtid.CheckFlavor(pst.Executed, rst.Executed); err != nil {
		return err
	}
	// MySQL auto-positioning takes a replica that is ahead of its new source
	// and silently keeps the extra transactions (MariaDB may refuse later):
	// check before anything changes, so a refused replica keeps its settings.
	if !pst.Executed.Covers(rst.Executed) {
		missing := pst.Executed.Uncovered(rst.Executed)
		sv.log.Warn("repoint.refused", "site", site, "source", primary, "missing_on_source", missing.String())
		return fmt.Errorf("%w: %s lacks %s", ErrNotContained, primary, missing.String())
	}
	return sv.conns.do(ctx, site, func(in Instance) error {
		if err := in.StopReplica(ctx); err != nil {
			return err
		}
		return in.ReplicateFrom(ctx, src)
	})
}

// source is how replicas reach primary.
func (sv *servers) source(primary string) (mysqlctl.Source, error) {
	s, ok := sv.conns.sites[primary]
	if !ok {
		return mysqlctl.Source{}, fmt.Errorf("site %q is not configured", primary)
	}
	addr := s.MySQL.ReplicationAddress
	if addr == "" {
		addr = s.MySQL.Address
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return mysqlctl.Source{}, fmt.Errorf("replication address of %s: %w", primary, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return mysqlctl.Source{}, fmt.Errorf("replication port of %s: %w", primary, err)
	}
	pw, err := sv.secret()
	if err != nil {
		return mysqlctl.Source{}, fmt.Errorf("replication password: %w", err)
	}
	return mysqlctl.Source{
		Host: host, Port: port,
		User: sv.group.Credentials.Replication.User, Password: pw,
		TLS:             sv.group.TLS.Enabled,
		HeartbeatPeriod: heartbeatPeriod(sv.group.PollInterval),
		ConnectRetry:    time.Second,
	}, nil
}

// heartbeatPeriod keeps replica heartbeats frequent enough that a silent
// source is noticed within about two polls: half the poll interval, between
// 250 ms and 1 s (the poller's silence threshold is 2 heartbeat periods +
// 1 poll interval, 1 s at the default 500 ms poll).
func heartbeatPeriod(poll time.Duration) time.Duration {
	// Below 250 ms heartbeats would cost more than they save: the probes
	// sample them only once per poll anyway.
	return min(max(poll/2, 250*time.Millisecond), time.Second)
}
