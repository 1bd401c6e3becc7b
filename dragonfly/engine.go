package dragonfly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/failoverd/failoverd/configs"
)

// engine is what differs between Redis/Valkey and Dragonfly: when a replica
// counts as caught up, and how it becomes the primary.
type engine interface {
	// name is the engine as configured ("redis", "dragonfly").
	name() string
	// caughtUp reports whether replica holds everything master held when
	// master was read.
	caughtUp(replica, master replication) bool
	// promote makes p.conn the primary.
	promote(ctx context.Context, p promotion) error
	// handover promotes h.to while its master h.from is alive, so that
	// nothing acknowledged by h.from is lost. An error wrapping errRefused
	// means the servers refused or gave up and nothing changed; any other
	// error leaves the outcome unknown (a server did not answer).
	handover(ctx context.Context, h handover) error
}

// errRefused marks a planned promotion the servers refused or abandoned,
// leaving the roles as they were.
var errRefused = errors.New("planned promotion refused")

// handover is one planned promotion: to replicates from from, both answer.
type handover struct {
	from, to     cacheSite
	fc, tc       conn
	maxSyncWait  time.Duration
	pollInterval time.Duration
}

// promotion is one promotion of the active site's cache.
type promotion struct {
	site string
	conn conn
	// masterUp: its master answered INFO.
	masterUp bool
	// synced: caughtUp held before the MaxSyncWait deadline.
	synced bool
	// proceed is OnSyncTimeout == "proceed".
	proceed bool
	// maxSyncWait bounds Dragonfly's REPLTAKEOVER.
	maxSyncWait time.Duration
	log         *slog.Logger
	// handover, when set, is the caught-up replica's live master, a site
	// cache: Redis then promotes with FAILOVER rather than REPLICAOF NO ONE.
	handover *handover
}

func engineFor(name string) (engine, error) {
	switch name {
	case configs.CacheRedis:
		return redisEngine{}, nil
	case configs.CacheDragonfly, "":
		return dragonflyEngine{}, nil
	}
	return nil, fmt.Errorf("cache engine %q: %w", name, ErrUnknownEngine)
}

// redisEngine drives Redis and Valkey.
type redisEngine struct{}

func (redisEngine) name() string { return configs.CacheRedis }

// caughtUp compares the replica's processed offset with the master's
// offset read before the wait started.
func (redisEngine) caughtUp(replica, master replication) bool {
	return replica.LinkUp && replica.HasReplicaOffset && master.HasMasterOffset &&
		replica.ReplicaOffset >= master.MasterOffset
}

// promote runs FAILOVER TO on the live master when p.handover is set, so no
// write the master acknowledged is lost (it pauses writes until the replica
// has them, then turns into its replica); REPLICAOF NO ONE otherwise, or
// when the master refused or abandoned the failover.
func (e redisEngine) promote(ctx context.Context, p promotion) error {
	if p.handover != nil {
		err := e.handover(ctx, *p.handover)
		switch {
		case err == nil:
			p.log.Info("cache.failover", "site", p.site, "old_master", p.handover.from.name)
			return nil
		case !errors.Is(err, errRefused):
			return fmt.Errorf("promote cache %s: %w", p.site, err)
		}
		p.log.Warn("cache.failover_refused", "site", p.site, "err", err, "fallback", "REPLICAOF NO ONE", "possible_loss", true)
	}
	if err := p.conn.ReplicaOfNoOne(ctx); err != nil {
		return fmt.Errorf("promote cache %s: REPLICAOF NO ONE: %w", p.site, err)
	}
	return nil
}

// handover runs FAILOVER TO <to> TIMEOUT <maxSyncWait> on the master, which
// pauses its clients' writes, waits for the replica's offset and swaps the
// roles, then waits until the failover ended.
func (redisEngine) handover(ctx context.Context, h handover) error {
	step := fmt.Sprintf("FAILOVER TO %s %s TIMEOUT %d on %s", h.to.host, h.to.port, h.maxSyncWait.Milliseconds(), h.from.name)
	err := h.fc.Failover(ctx, h.to.host, h.to.port, h.maxSyncWait)
	switch {
	case errors.Is(err, ErrUnreachable):
		return fmt.Errorf("%s: %w", step, err)
	case err != nil && !strings.Contains(err.Error(), "already in progress"):
		// A retry finds its earlier FAILOVER still running: wait for it
		// rather than report a refusal.
		return fmt.Errorf("%s: %w: %w", step, errRefused, err)
	}
	// Redis ends the failover by itself at TIMEOUT (aborted) at the latest.
	wctx, cancel := context.WithTimeout(ctx, h.maxSyncWait+takeoverMargin)
	defer cancel()
	for {
		rep, err := h.fc.Replication(wctx)
		switch {
		case err != nil:
			return fmt.Errorf("%s: wait for the end of the failover: %w", step, err)
		case rep.failoverRunning():
		case rep.follows(h.to.host, h.to.port):
			return nil
		default:
			return fmt.Errorf("%s: failover aborted, %s still is %s: %w", step, h.from.name, rep.Role, errRefused)
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("%s: wait for the end of the failover: %w: %w", step, ErrUnreachable, wctx.Err())
		case <-time.After(h.pollInterval):
		}
	}
}

// dragonflyEngine drives Dragonfly.
type dragonflyEngine struct{}

func (dragonflyEngine) name() string { return configs.CacheDragonfly }

// caughtUp is stable sync: Dragonfly's offsets are per shard and not
// comparable with the master's, so REPLTAKEOVER does the exact catch-up.
func (dragonflyEngine) caughtUp(replica, _ replication) bool {
	return replica.LinkUp && !replica.SyncInProgress && replica.HasReplicaOffset
}

// handover runs REPLTAKEOVER <ceil(maxSyncWait) s> on the replica: the
// master blocks writes until the replica has everything, then the replica
// becomes master (and the old master shuts down, non-cluster mode).
func (dragonflyEngine) handover(ctx context.Context, h handover) error {
	secs := max(1, int(math.Ceil(h.maxSyncWait.Seconds())))
	err := h.tc.TakeOver(ctx, secs)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnreachable):
		return fmt.Errorf("REPLTAKEOVER %d on %s: %w", secs, h.to.name, err)
	}
	return fmt.Errorf("REPLTAKEOVER %d on %s: %w: %w", secs, h.to.name, errRefused, err)
}

func (dragonflyEngine) promote(ctx context.Context, p promotion) error {
	if p.masterUp && p.synced {
		secs := max(1, int(math.Ceil(p.maxSyncWait.Seconds())))
		err := p.conn.TakeOver(ctx, secs)
		switch {
		case err == nil:
			p.log.Info("cache.takeover", "site", p.site, "timeout_seconds", secs)
			return nil
		case errors.Is(err, ErrUnreachable):
			// The replica itself did not answer: nothing to fall back on.
			return fmt.Errorf("promote cache %s: REPLTAKEOVER %d: %w", p.site, secs, err)
		case !p.proceed:
			return fmt.Errorf("promote cache %s: REPLTAKEOVER %d: %w: %w", p.site, secs, ErrSyncTimeout, err)
		}
		p.log.Warn("cache.takeover_failed", "site", p.site, "timeout_seconds", secs, "err", err,
			"fallback", "REPLICAOF NO ONE", "possible_loss", true)
	}
	if err := p.conn.ReplicaOfNoOne(ctx); err != nil {
		return fmt.Errorf("promote cache %s: REPLICAOF NO ONE: %w", p.site, err)
	}
	return nil
}
