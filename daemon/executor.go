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
	WaitRelayDrained(ctx context.Context, target gtid.Set, timeout time.Duration) error
	StopReplica(ctx context.Context) error
	ResetReplicaAll(ctx context.Context) error
	Promote(ctx context.Context) error
	ReplicateFrom(ctx context.Context, src mysqlctl.Source) error
	Close() error
}

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
	StepWritable          = "writable"
	StepPromoted          = "promoted"
	StepRepointed         = "repointed"
)

// ErrDrainAborted means the candidate did not apply its relay log in time and
// the group's onDrainTimeout is abort.
var ErrDrainAborted = errors.New("relay log not drained in time; promotion aborted")

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
	defer c.mu.Unlock()
	if in, ok := c.conns[site]; ok {
		return in, nil
	}
	s, ok := c.sites[site]
	if !ok {
		return nil, fmt.Errorf("site %q is not configured", site)
	}
	in, err := c.dial(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", site, err)
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

// fence sets site read-only, reads it back and ends its client sessions.
func (e *executor) fence(ctx context.Context, site string) error {
	err := e.conns.do(ctx, site, func(in Instance) error {
		if err := in.Fence(ctx); err != nil {
			return err
		}
		n, err := in.KillClientConnections(ctx)
		if err != nil {
			return err
		}
		e.log.Info("site.fenced", "site", site, "killed_connections", n)
		return nil
	})
	if err != nil {
		return fmt.Errorf("fence %s: %w", site, err)
	}
	return nil
}

// drain waits until target applied everything it retrieved. A target without
// replication (already reset by an earlier, interrupted run) has nothing to
// drain.
func (e *executor) drain(ctx context.Context, target string) error {
	return e.conns.do(ctx, target, func(in Instance) error {
		st, err := in.Status(ctx)
		if err != nil {
			return fmt.Errorf("drain %s: status: %w", target, err)
		}
		if st.Replica == nil || st.Replica.Retrieved.IsEmpty() {
			return nil
		}
		err = in.WaitRelayDrained(ctx, st.Replica.Retrieved, e.group.RelayDrainTimeout)
		switch {
		case errors.Is(err, mysqlctl.ErrDrainTimeout) && e.group.OnDrainTimeout == "promote":
			e.log.Warn("relay.drain_timeout_promoting", "site", target, "retrieved", st.Replica.Retrieved.Compact(),
				"note", "onDrainTimeout=promote: transactions retrieved but not applied are lost")
			return nil
		case errors.Is(err, mysqlctl.ErrDrainTimeout):
			return fmt.Errorf("drain %s: %w: %w", target, ErrDrainAborted, err)
		case err != nil:
			return fmt.Errorf("drain %s: %w", target, err)
		}
		return nil
	})
}

// detach stops and removes replication on target and returns its executed
// GTID set: the promotion GTID.
func (e *executor) detach(ctx context.Context, target string) (gtid.Set, error) {
	var set gtid.Set
	err := e.conns.do(ctx, target, func(in Instance) error {
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
	err := e.conns.do(ctx, target, func(in Instance) error { return in.Promote(ctx) })
	if err != nil {
		return fmt.Errorf("make %s writable: %w", target, err)
	}
	return nil
}

// repoint makes every site replicate from primary; failures are reported
// per site and retried by the next decision round (Rejoin).
func (e *executor) repoint(ctx context.Context, primary string, sites []string) error {
	src, err := e.source(primary)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range sites {
		err := e.conns.do(ctx, s, func(in Instance) error {
			if err := in.StopReplica(ctx); err != nil {
				return err
			}
			return in.ReplicateFrom(ctx, src)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("repoint %s to %s: %w", s, primary, err))
			continue
		}
		e.log.Info("site.repointed", "site", s, "source", primary)
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
