package daemon

import (
	"context"
	"time"

	"github.com/failoverd/failoverd/dragonfly"
	"github.com/failoverd/failoverd/status"
)

// cacheSwitcher moves the cache primary for a planned switchover
// (*dragonfly.Follower).
type cacheSwitcher interface {
	Switchover(ctx context.Context, from, to string) (dragonfly.SwitchoverResult, error)
}

// switchCache moves the cache primary from from to to before a planned
// switchover touches MySQL (WaitingForCacheSync, then PromotingCache). An
// error means nothing changed (onSyncTimeout=fail, or a cache that did not
// answer): the switchover must be refused. A group without a cache does
// nothing.
func (g *group) switchCache(ctx context.Context, from, to string) error {
	var c cacheSwitcher
	if g.follow != nil {
		for _, f := range g.follow.followers {
			if s, ok := f.(cacheSwitcher); ok && f.Name() == dragonfly.FollowerName {
				c = s
			}
		}
	}
	if c == nil || g.cfg.Cache == nil {
		return nil
	}
	wait := g.cfg.Cache.MaxSyncWait
	if wait <= 0 {
		wait = 5 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, 2*wait+5*time.Second)
	defer cancel()
	// A cache sync that waits until its deadline is not a wedged loop.
	g.progress.within(g.now().Add(2*wait + 5*time.Second))
	start := g.now()
	res, err := c.Switchover(cctx, from, to)
	if err != nil {
		return err
	}
	g.ev().PhaseDone(g.cfg.Name, "cache-sync", res.SyncWait)
	g.ev().PhaseDone(g.cfg.Name, "cache-promote", res.Promote)
	g.log.Warn("switchover.cache_moved", "from", from, "to", to, "synced", res.Synced, "sessions_preserved", res.SessionsPreserved,
		"already_there", res.AlreadyThere, "sync_wait", res.SyncWait.String(), "promote", res.Promote.String())
	g.mu.Lock()
	g.cacheMove = &status.CacheSwitchover{At: start, From: from, To: to, Synced: res.Synced, SessionsPreserved: res.SessionsPreserved,
		AlreadyThere: res.AlreadyThere, SyncWaitSeconds: res.SyncWait.Seconds(), PromoteSeconds: res.Promote.Seconds()}
	g.mu.Unlock()
	return nil
}
