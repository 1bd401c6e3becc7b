package dragonfly

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timeouts of one cache command: short, so an unreachable cache costs a
// retry, not the whole follow deadline.
const (
	dialTimeout = 1 * time.Second
	ioTimeout   = 2 * time.Second
	// takeoverMargin is added to the REPLTAKEOVER timeout for the reply.
	takeoverMargin = 5 * time.Second
)

// Replication roles as normalised by parseReplication.
const (
	roleMaster  = "master"
	roleReplica = "replica"
)

// conn is one cache server as the follower drives it. redisConn speaks RESP
// to a real server; the tests substitute fakes (fakeRedis, fakeDragonfly).
// A method returns an error wrapping ErrUnreachable when the server did not
// answer, and the server's own error when it refused.
type conn interface {
	// Replication runs INFO replication.
	Replication(ctx context.Context) (replication, error)
	// ReplicaOf runs REPLICAOF host port.
	ReplicaOf(ctx context.Context, host, port string) error
	// ReplicaOfNoOne runs REPLICAOF NO ONE.
	ReplicaOfNoOne(ctx context.Context) error
	// TakeOver runs Dragonfly's REPLTAKEOVER seconds on a replica.
	TakeOver(ctx context.Context, seconds int) error
	// Failover runs Redis' FAILOVER TO host port TIMEOUT ms on a master.
	// The server answers once the failover started; it runs in the
	// background (see replication.FailoverState).
	Failover(ctx context.Context, host, port string, timeout time.Duration) error
	// KillNormalClients runs CLIENT KILL TYPE normal (the caller's own
	// connection is skipped).
	KillNormalClients(ctx context.Context) error
	// Close releases the connection.
	Close() error
}

// replication is the part of INFO replication the follower reads.
type replication struct {
	// Role is roleMaster or roleReplica (Redis says "slave").
	Role string
	// MasterHost and MasterPort are the master a replica follows.
	MasterHost, MasterPort string
	// LinkUp is master_link_status:up.
	LinkUp bool
	// SyncInProgress is master_sync_in_progress:1 (initial/full sync).
	SyncInProgress bool
	// MasterOffset is master_repl_offset (Redis; absent on Dragonfly).
	MasterOffset    int64
	HasMasterOffset bool
	// ReplicaOffset is slave_repl_offset (Dragonfly reports it only once
	// the replica reached stable sync).
	ReplicaOffset    int64
	HasReplicaOffset bool
	// FailoverState is master_failover_state (Redis 6.2+: no-failover,
	// waiting-for-sync, failover-in-progress); "" when not reported.
	FailoverState string
}

// failoverRunning reports whether a Redis FAILOVER is under way on r.
func (r replication) failoverRunning() bool {
	return r.FailoverState != "" && r.FailoverState != "no-failover"
}

// follows reports whether r replicates from host:port.
func (r replication) follows(host, port string) bool {
	return r.Role == roleReplica && r.MasterHost == host && r.MasterPort == port
}

// parseReplication parses the text of INFO replication.
func parseReplication(s string) (replication, error) {
	var r replication
	for line := range strings.SplitSeq(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "role":
			switch v {
			case "master":
				r.Role = roleMaster
			case "slave", "replica":
				r.Role = roleReplica
			default:
				return replication{}, fmt.Errorf("parse INFO replication: unknown role %q", v)
			}
		case "master_host":
			r.MasterHost = v
		case "master_port":
			r.MasterPort = v
		case "master_link_status":
			r.LinkUp = v == "up"
		case "master_sync_in_progress":
			r.SyncInProgress = v == "1"
		case "master_repl_offset":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				r.MasterOffset, r.HasMasterOffset = n, true
			}
		case "master_failover_state":
			r.FailoverState = v
		case "slave_repl_offset":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				r.ReplicaOffset, r.HasReplicaOffset = n, true
			}
		}
	}
	if r.Role == "" {
		return replication{}, errors.New("parse INFO replication: no role line")
	}
	return r, nil
}

// redisConn is a conn to a real Redis, Valkey or Dragonfly server.
type redisConn struct {
	addr string
	opts *redis.Options
	c    *redis.Client
}

// dialRedis returns a conn to addr; it connects on first use.
func dialRedis(addr, password string) conn {
	opts := &redis.Options{
		Addr:        addr,
		Password:    password,
		DialTimeout: dialTimeout,
		// One dial attempt: an unreachable cache is reported, not retried.
		DialerRetries: 1,
		ReadTimeout:   ioTimeout,
		WriteTimeout:  ioTimeout,
		PoolSize:      1,
		// The daemon retries the whole follow; a silent retry here would
		// only hide an unreachable cache for longer.
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		// CLIENT SETINFO is not understood by every engine.
		DisableIdentity: true,
	}
	return &redisConn{addr: addr, opts: opts, c: redis.NewClient(opts)}
}

// classify wraps a transport failure with ErrUnreachable and keeps a
// server's reply (a redis.Error: NOAUTH, ERR...) as it is.
func (r *redisConn) classify(err error) error {
	if err == nil {
		return nil
	}
	if rerr, ok := errors.AsType[redis.Error](err); ok {
		return rerr
	}
	return fmt.Errorf("%s: %w: %w", r.addr, ErrUnreachable, err)
}

func (r *redisConn) Replication(ctx context.Context) (replication, error) {
	s, err := r.c.Info(ctx, "replication").Result()
	if err != nil {
		return replication{}, r.classify(err)
	}
	return parseReplication(s)
}

func (r *redisConn) ReplicaOf(ctx context.Context, host, port string) error {
	return r.classify(r.c.ReplicaOf(ctx, host, port).Err())
}

func (r *redisConn) ReplicaOfNoOne(ctx context.Context) error {
	return r.classify(r.c.ReplicaOf(ctx, "NO", "ONE").Err())
}

// TakeOver runs REPLTAKEOVER on its own client: it blocks up to seconds,
// longer than the short read timeout of every other command.
func (r *redisConn) TakeOver(ctx context.Context, seconds int) error {
	opts := *r.opts
	opts.ReadTimeout = time.Duration(seconds)*time.Second + takeoverMargin
	c := redis.NewClient(&opts)
	defer c.Close()
	return r.classify(c.Do(ctx, "REPLTAKEOVER", seconds).Err())
}

func (r *redisConn) Failover(ctx context.Context, host, port string, timeout time.Duration) error {
	return r.classify(r.c.Do(ctx, "FAILOVER", "TO", host, port, "TIMEOUT", timeout.Milliseconds()).Err())
}

func (r *redisConn) KillNormalClients(ctx context.Context) error {
	return r.classify(r.c.Do(ctx, "CLIENT", "KILL", "TYPE", "normal").Err())
}

func (r *redisConn) Close() error { return r.c.Close() }
