package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
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

// Failover steps, persisted in store.InFlight.Step and used as failpoint
// names (FAILOVERD_FAILPOINT) by the crash tests.
const (
	StepRevoked           = "revoked"
	StepOldPrimaryFenced  = "old-primary-fenced"
	StepRelayDrained      = "relay-drained"
	StepReplicationReset  = "replication-reset"
	StepPromotionRecorded = "promotion-recorded"
	StepPublished         = "published"
	StepWritable          = "writable"
	StepPromoted          = "promoted"
	StepRepointed         = "repointed"
)

// ErrDrainAborted means the candidate did not apply its relay log in time and
// the group's onDrainTimeout is abort.
var ErrDrainAborted = errors.New("relay log not drained in time; promotion aborted")

// ErrNotContained means a replica holds transactions the new primary lacks
// (errant writes, or writes an old primary acknowledged alone), so it was
// not repointed: the error names them.
var ErrNotContained = errors.New("replica has transactions the new primary lacks; not repointed")

// stepTimeout bounds one executor step on one server: a handful of
// statements, each also bounded by the driver's read timeout (mysqlctl
// Options), plus a dial. A drain gets RelayDrainTimeout on top. Without it a
// step would be bounded only by the whole action's context
// (group.actionTimeout), so one hung replica could use up the time of every
// later step and site.
const stepTimeout = 15 * time.Second

// connections keeps one admin Instance per site, opened on demand and
// dropped after an error so the next action redials.
type connections struct {
	dial  Dialer
	sites map[string]configs.Site

	mu    sync.Mutex
	conns map[string]Instance
}

func newConnections(dial Dialer, sites []configs.Site) *connections {
	m := make(map[string]configs.Site, len(sites))
	for _, s := range sites {
		m[s.Name] = s
	}
	return &connections{dial: dial, sites: m, conns: map[string]Instance{}}
}

func (c *connections) get(ctx context.Context, site string) (Instance, error) {
	c.mu.Lock()
	in, ok := c.conns[site]
	s, known := c.sites[site]
	c.mu.Unlock()
	if ok {
		return in, nil
	}
	if !known {
		return nil, fmt.Errorf("site %q is not configured", site)
	}
	// Dial without the lock: a hung site must not hold up the others
	// (a failover fences one and detaches the rest at the same time).
	in, err := c.dial(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", site, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.conns[site]; ok {
		_ = in.Close() // lost a race with another dial: keep one
		return cur, nil
	}
	c.conns[site] = in
	return in, nil
}

// drop closes and forgets site's connection after a failed operation.
func (c *connections) drop(site string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in, ok := c.conns[site]; ok {
		_ = in.Close() // the connection is suspect; nothing to do with its error
		delete(c.conns, site)
	}
}

func (c *connections) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, in := range c.conns {
		_ = in.Close() // shutting down
		delete(c.conns, name)
	}
}

// do runs op on site's Instance, dropping the connection when op fails.
func (c *connections) do(ctx context.Context, site string, op func(Instance) error) error {
	in, err := c.get(ctx, site)
	if err != nil {
		return err
	}
	if err := op(in); err != nil {
		c.drop(site)
		return err
	}
	return nil
}

// executor carries out decisions on the group's servers. Every method is
// idempotent, so an action interrupted by a crash is simply run again.
type executor struct {
	group  configs.Group
	conns  *connections
	log    *slog.Logger
	secret func() (string, error) // replication password
	// failpoint is called after each persisted step; the crash tests make it
	// SIGKILL the process.
	failpoint func(step string)
}

// on runs op on site's Instance under its own deadline, timeout.
func (e *executor) on(ctx context.Context, site string, timeout time.Duration, op func(context.Context, Instance) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return e.conns.do(ctx, site, func(in Instance) error { return op(ctx, in) })
}

// fence sets site read-only, reads it back and ends its client sessions.
func (e *executor) fence(ctx context.Context, site string) error {
	err := e.on(ctx, site, stepTimeout, func(ctx context.Context, in Instance) error {
		// Sessions first: setting read_only waits for commits in flight, and
		// a commit waiting for a semi-sync acknowledgement nobody will send
		// would block the fence forever. A killed session never gets its OK.
		before, err := e.killForFence(ctx, site, in)
		if err != nil {
			return err
		}
		if err := e.setReadOnly(ctx, site, in); err != nil {
			return err
		}
		// And whoever connected in between.
		after, err := e.killForFence(ctx, site, in)
		if err != nil {
			return err
		}
		e.log.Info("site.fenced", "site", site, "killed_connections", before+after)
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
func (e *executor) killForFence(ctx context.Context, site string, in Instance) (int, error) {
	n, err := in.KillClientConnections(ctx)
	if errors.Is(err, mysqlctl.ErrSessionsNotKilled) {
		e.log.Warn("site.sessions_not_killed", "site", site, "err", err)
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
func (e *executor) setReadOnly(ctx context.Context, site string, in Instance) error {
	if e.group.Engine == configs.EngineMariaDB {
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
	e.log.Warn("site.semisync_waits_released", "site", site, "killed_connections", killed,
		"note", "the fence waited for commits of killed sessions blocked on semi-sync acknowledgements; the semi-sync primary side is switched off so they complete unacknowledged and the fence applies")
	if err := <-done; err != nil {
		restore, cancel := context.WithTimeout(context.WithoutCancel(ctx), stepTimeout)
		defer cancel()
		if rerr := in.SetSemiSync(restore, true, st.SemiSync.ReplicaEnabled); rerr != nil {
			e.log.Error("site.semisync_restore_failed", "site", site, "err", rerr)
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
func (e *executor) drain(ctx context.Context, target string, timeout time.Duration) (drainResult, error) {
	var res drainResult
	var timedOut error // the wait's ErrDrainTimeout, with its details
	err := e.on(ctx, target, timeout+stepTimeout, func(ctx context.Context, in Instance) error {
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
			e.log.Warn("semisync.source_disabled", "site", target, "why", "drain",
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
	case res.TimedOut && e.group.OnDrainTimeout == "promote":
		e.log.Warn("relay.drain_timeout_promoting", "site", target, "retrieved", res.Retrieved.Compact(),
			"note", "onDrainTimeout=promote: transactions retrieved but not applied are lost")
		return res, nil
	case res.TimedOut:
		e.log.Warn("relay.drain_timeout_aborting", "site", target, "retrieved", res.Retrieved.Compact(), "timeout", timeout)
		// The candidate stays a replica: let it receive again.
		if err := e.on(ctx, target, stepTimeout, func(ctx context.Context, in Instance) error { return in.StartReplicaIO(ctx) }); err != nil {
			e.log.Warn("relay.io_restart_failed", "site", target, "err", err)
		}
		return res, fmt.Errorf("drain %s: %w: %w", target, ErrDrainAborted, timedOut)
	}
	e.log.Info("relay.drained", "site", target, "retrieved", res.Retrieved.Compact())
	return res, nil
}

// detach stops and removes replication on target and returns its executed
// GTID set: the promotion GTID.
func (e *executor) detach(ctx context.Context, target string) (gtid.Set, error) {
	var set gtid.Set
	err := e.on(ctx, target, stepTimeout, func(ctx context.Context, in Instance) error {
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
func (e *executor) makeWritable(ctx context.Context, target string) error {
	err := e.on(ctx, target, stepTimeout, func(ctx context.Context, in Instance) error { return in.Promote(ctx) })
	if err != nil {
		return fmt.Errorf("make %s writable: %w", target, err)
	}
	return nil
}

// repoint makes every site replicate from primary; failures are reported
// per site and retried by the next decision round (Rejoin). A site whose
// executed set is not covered by primary's is refused with ErrNotContained
// and keeps its replication settings. Each site has its own stepTimeout.
func (e *executor) repoint(ctx context.Context, primary string, sites []string) error {
	src, err := e.source(primary)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range sites {
		if err := e.repointOne(ctx, primary, s, src); err != nil {
			errs = append(errs, fmt.Errorf("repoint %s to %s: %w", s, primary, err))
			continue
		}
		e.log.Info("site.repointed", "site", s, "source", primary)
	}
	return errors.Join(errs...)
}

func (e *executor) repointOne(ctx context.Context, primary, site string, src mysqlctl.Source) error {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	// The replica is read before the primary, so a transaction the replica
	// received from the primary in between is in both sets.
	var rst, pst mysqlctl.Status
	err := e.conns.do(ctx, site, func(in Instance) (err error) { rst, err = in.Status(ctx); return err })
	if err != nil {
		return fmt.Errorf("status of %s: %w", site, err)
	}
	err = e.conns.do(ctx, primary, func(in Instance) (err error) { pst, err = in.Status(ctx); return err })
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
		e.log.Warn("repoint.refused", "site", site, "source", primary, "missing_on_source", missing.String())
		return fmt.Errorf("%w: %s lacks %s", ErrNotContained, primary, missing.String())
	}
	return e.conns.do(ctx, site, func(in Instance) error {
		if err := in.StopReplica(ctx); err != nil {
			return err
		}
		return in.ReplicateFrom(ctx, src)
	})
}

// sourceOff switches the semi-sync source side off on each of sites that
// still has it on (re-read first), leaving its replica side as it is (so a
// running IO thread is not restarted): on a replica the source side makes
// the applier's commits wait for acknowledgements nobody sends. Every site
// is tried; the errors are joined.
func (e *executor) sourceOff(ctx context.Context, sites []string) error {
	var errs []error
	for _, s := range sites {
		err := e.on(ctx, s, stepTimeout, func(ctx context.Context, in Instance) error {
			st, err := in.Status(ctx)
			if err != nil {
				return fmt.Errorf("read semi-sync settings: %w", err)
			}
			if !st.SemiSync.PrimaryEnabled {
				return nil
			}
			if err := in.SetSemiSync(ctx, false, st.SemiSync.ReplicaEnabled); err != nil {
				return err
			}
			e.log.Warn("semisync.source_disabled", "site", s, "why", "replica", "waiting_appliers", st.AckWaits.Appliers,
				"note", "the semi-sync source side belongs on the primary only: on a replica its applier waits for acknowledgements nobody sends")
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("switch the semi-sync source side off on %s: %w", s, err))
		}
	}
	return errors.Join(errs...)
}

// semiSync carries semi-synchronous replication over to the topology that a
// promotion made, best effort: every site is tried and the errors joined.
//
// Semi-sync counts as in use when the new primary supports it
// (Status.SemiSync.Available) and either one of primary and replicas has
// the primary side enabled (configurations that let any site become primary
// enable it everywhere) or the new primary had its replica side enabled (it
// acknowledged the old primary's commits; with the old primary gone that is
// the trace an asymmetric configuration leaves). Otherwise nothing changes:
// an asynchronous group stays asynchronous.
//
// When in use, each replica gets the replica side (its primary side left as
// is; SetSemiSync restarts a running IO thread so it takes effect), then the
// new primary gets the primary side (its replica side left as is) if at
// least one replica has the replica side: with nobody to acknowledge, the
// first commit would only stall for rpl_semi_sync_master_timeout. A primary
// side that is already on stays on.
func (e *executor) semiSync(ctx context.Context, primary string, replicas []string) error {
	status := func(site string) (mysqlctl.Status, error) {
		var st mysqlctl.Status
		err := e.on(ctx, site, stepTimeout, func(ctx context.Context, in Instance) (err error) { st, err = in.Status(ctx); return err })
		return st, err
	}
	pst, err := status(primary)
	if err != nil {
		return fmt.Errorf("semi-sync: status of %s: %w", primary, err)
	}
	var errs []error
	used := pst.SemiSync.PrimaryEnabled || pst.SemiSync.ReplicaEnabled
	rsts := map[string]mysqlctl.SemiSyncStatus{}
	for _, r := range replicas {
		st, err := status(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("semi-sync: status of %s: %w", r, err))
			continue
		}
		rsts[r] = st.SemiSync
		used = used || st.SemiSync.PrimaryEnabled
	}
	if !pst.SemiSync.Available || !used {
		e.log.Info("semisync.not_in_use", "primary", primary, "available", pst.SemiSync.Available)
		return errors.Join(errs...)
	}
	acks := 0
	for _, r := range replicas {
		rs, ok := rsts[r]
		if !ok {
			continue
		}
		if rs.ReplicaEnabled && !rs.PrimaryEnabled {
			acks++
			continue
		}
		// Replica side on; primary side off: on a replica it would make the
		// applier wait for acknowledgements nobody sends (forever with the
		// infinite timeout the semisync proof needs).
		err := e.on(ctx, r, stepTimeout, func(ctx context.Context, in Instance) error { return in.SetSemiSync(ctx, false, true) })
		if err != nil {
			errs = append(errs, fmt.Errorf("semi-sync: replica side on %s: %w", r, err))
			continue
		}
		acks++
		e.log.Info("semisync.replica_enabled", "site", r)
	}
	switch {
	case pst.SemiSync.PrimaryEnabled:
	case acks == 0:
		e.log.Warn("semisync.primary_not_enabled", "site", primary, "reason", "no replica acknowledges")
	default:
		err := e.on(ctx, primary, stepTimeout, func(ctx context.Context, in Instance) error {
			return in.SetSemiSync(ctx, true, pst.SemiSync.ReplicaEnabled)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("semi-sync: primary side on %s: %w", primary, err))
		} else {
			e.log.Info("semisync.primary_enabled", "site", primary, "replicas", acks)
		}
	}
	return errors.Join(errs...)
}

// source is how replicas reach primary.
func (e *executor) source(primary string) (mysqlctl.Source, error) {
	s, ok := e.conns.sites[primary]
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
	pw, err := e.secret()
	if err != nil {
		return mysqlctl.Source{}, fmt.Errorf("replication password: %w", err)
	}
	return mysqlctl.Source{
		Host: host, Port: port,
		User: e.group.Credentials.Replication.User, Password: pw,
		TLS:             e.group.TLS.Enabled,
		HeartbeatPeriod: heartbeatPeriod(e.group.PollInterval),
		ConnectRetry:    time.Second,
	}, nil
}

// heartbeatPeriod keeps replica heartbeats frequent enough that a silent
// source is noticed within a few polls.
func heartbeatPeriod(poll time.Duration) time.Duration {
	return min(max(poll, 250*time.Millisecond), time.Second)
}
