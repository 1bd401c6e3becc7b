package dragonfly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
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

func (redisEngine) promote(ctx context.Context, p promotion) error {
	if err := p.conn.ReplicaOfNoOne(ctx); err != nil {
		return fmt.Errorf("promote cache %s: REPLICAOF NO ONE: %w", p.site, err)
	}
	return nil
}

// dragonflyEngine drives Dragonfly.
type dragonflyEngine struct{}

func (dragonflyEngine) name() string { return configs.CacheDragonfly }

// caughtUp is stable sync: Dragonfly's offsets are per shard and not
// comparable with the master's, so REPLTAKEOVER does the exact catch-up.
func (dragonflyEngine) caughtUp(replica, _ replication) bool {
	return replica.LinkUp && !replica.SyncInProgress && replica.HasReplicaOffset
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
