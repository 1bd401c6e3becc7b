package dragonfly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Phases of a planned switchover, as logged (cache.switchover.phase).
const (
	PhaseWaitingForCacheSync = "WaitingForCacheSync"
	PhasePromotingCache      = "PromotingCache"
)

// SwitchoverResult says how the cache moved for a planned switchover.
type SwitchoverResult struct {
	Synced            bool          // the target had the master's offset before promotion
	SessionsPreserved bool          // nothing written to the old master was lost
	SyncWait, Promote time.Duration // time spent in each phase
	AlreadyThere      bool          // the target's cache already was the master: nothing done
}

// Switchover moves the cache primary from site from to site to before MySQL
// is touched:
//
//  1. WaitingForCacheSync: reads the master's offset (from's cache) and waits
//     at most maxSyncWait until to's cache, its replica, reaches it (for
//     Dragonfly: stable sync).
//  2. PromotingCache: Redis/Valkey run FAILOVER TO <to> TIMEOUT <maxSyncWait>
//     on the master (writes paused until the replica has its offset, then
//     the roles swap); Dragonfly runs REPLTAKEOVER on the replica. The old
//     master's normal clients are then killed (CLIENT KILL TYPE normal) so
//     they reconnect through the active endpoint.
//
// When the target does not catch up, or the servers refuse or abandon the
// promotion, onSyncTimeout "fail" returns ErrSyncTimeout with nothing
// changed; "proceed" promotes the target with REPLICAOF NO ONE, repoints
// the old master with REPLICAOF and kills its clients (SessionsPreserved
// false). An unreachable target is ErrUnreachable; an unreachable master is
// ErrUnreachable with "fail" (nothing changed) and a REPLICAOF NO ONE of the
// target with "proceed". The other sites' caches are left to Follow.
//
// It is idempotent: when to's cache already is a master nothing is sent
// (AlreadyThere). A nil *Follower returns a zero result and nil.
func (f *Follower) Switchover(ctx context.Context, from, to string) (SwitchoverResult, error) {
	var res SwitchoverResult
	if f == nil {
		return res, nil
	}
	fi, ti := f.siteIndex(from), f.siteIndex(to)
	for _, s := range []struct {
		name string
		i    int
	}{{from, fi}, {to, ti}} {
		if s.i < 0 {
			return res, fmt.Errorf("cache switchover of group %s: site %q: %w", f.group, s.name, ErrUnknownSite)
		}
	}
	fs, ts := f.sites[fi], f.sites[ti]
	log := f.log.With("from", fs.name, "to", ts.name)
	fc, tc := f.dial(fs.addr), f.dial(ts.addr)
	defer fc.Close()
	defer tc.Close()
	var fp, tp probe
	var wg sync.WaitGroup
	wg.Go(func() { fp.rep, fp.err = fc.Replication(ctx) })
	wg.Go(func() { tp.rep, tp.err = tc.Replication(ctx) })
	wg.Wait()

	if tp.err != nil {
		// Nothing can be promoted: leave the master serving.
		return res, fmt.Errorf("cache switchover of group %s: read target cache %s: %w", f.group, ts.name, tp.err)
	}
	if tp.rep.Role == roleMaster {
		// A retry after a switchover that completed, or a target that
		// already was the primary: promoting again could demote nothing
		// useful and REPLTAKEOVER must not be sent to a master.
		res.AlreadyThere = true
		res.Synced = fp.err == nil && fp.rep.follows(ts.host, ts.port)
		res.SessionsPreserved = res.Synced
		log.Info("cache.switchover.already_there", "old_master_follows", res.Synced)
		return res, nil
	}
	if fi == ti {
		return res, fmt.Errorf("cache switchover of group %s: from and to are both %s, a replica", f.group, fs.name)
	}
	if fp.err != nil {
		// Only a server that does not answer may be passed over; a refusal
		// (NOAUTH...) is a configuration error to fix, not to promote past.
		if !errors.Is(fp.err, ErrUnreachable) || !f.proceed {
			return res, fmt.Errorf("cache switchover of group %s: read cache primary %s: %w", f.group, fs.name, fp.err)
		}
		log.Warn("cache.switchover.master_unreachable", "err", fp.err, "possible_loss", true)
		start := time.Now()
		err := tc.ReplicaOfNoOne(ctx)
		res.Promote = time.Since(start)
		if err != nil {
			return res, fmt.Errorf("cache switchover of group %s: promote %s: REPLICAOF NO ONE: %w", f.group, ts.name, err)
		}
		log.Info("cache.promoted", "site", ts.name, "synced", false, "sessions_preserved", false)
		return res, nil
	}

	log.Info("cache.switchover.phase", "phase", PhaseWaitingForCacheSync)
	start := time.Now()
	var reason string
	switch {
	case fp.rep.Role != roleMaster:
		reason = fs.name + " is not a master"
	case !tp.rep.follows(fs.host, fs.port):
		reason = ts.name + " does not replicate from " + fs.name
	default:
		synced, err := f.waitCaughtUp(ctx, ts, tc, fp.rep)
		if err != nil {
			res.SyncWait = time.Since(start)
			return res, fmt.Errorf("cache switchover of group %s: %w", f.group, err)
		}
		res.Synced = synced
		if !synced {
			reason = fmt.Sprintf("%s did not catch up within %s", ts.name, f.maxSyncWait)
		}
	}
	res.SyncWait = time.Since(start)

	var refused error
	if res.Synced {
		log.Info("cache.switchover.phase", "phase", PhasePromotingCache)
		start = time.Now()
		err := f.eng.handover(ctx, handover{from: fs, to: ts, fc: fc, tc: tc, maxSyncWait: f.maxSyncWait, pollInterval: f.pollInterval})
		res.Promote = time.Since(start)
		switch {
		case err == nil:
			res.SessionsPreserved = true
			log.Info("cache.promoted", "site", ts.name, "synced", true, "sessions_preserved", true)
			f.settleOldMaster(ctx, log, fs, fc, ts)
			return res, nil
		case !errors.Is(err, errRefused):
			return res, fmt.Errorf("cache switchover of group %s: %w", f.group, err)
		}
		refused = err
		reason = err.Error()
	}
	if !f.proceed {
		// Nothing was changed: the master keeps serving with all its data.
		if refused != nil {
			return res, fmt.Errorf("cache switchover of group %s: %w: %w", f.group, ErrSyncTimeout, refused)
		}
		return res, fmt.Errorf("cache switchover of group %s: %s: %w", f.group, reason, ErrSyncTimeout)
	}
	log.Warn("cache.sync_timeout", "site", ts.name, "reason", reason, "waited", res.SyncWait, "possible_loss", true)
	log.Info("cache.switchover.phase", "phase", PhasePromotingCache)
	start = time.Now()
	err := tc.ReplicaOfNoOne(ctx)
	res.Promote += time.Since(start)
	if err != nil {
		return res, fmt.Errorf("cache switchover of group %s: promote %s: REPLICAOF NO ONE: %w", f.group, ts.name, err)
	}
	log.Info("cache.promoted", "site", ts.name, "synced", res.Synced, "sessions_preserved", false)
	f.settleOldMaster(ctx, log, fs, fc, ts)
	return res, nil
}

// settleOldMaster makes the old master a replica of the new one, unless it
// already is or is down (Dragonfly shuts it down after REPLTAKEOVER), and
// disconnects its normal clients. Failures are logged only: the target is
// the primary now, and Follow repoints the old master on its next run.
func (f *Follower) settleOldMaster(ctx context.Context, log *slog.Logger, old cacheSite, c conn, active cacheSite) {
	rep, err := c.Replication(ctx)
	if err != nil {
		log.Info("cache.switchover.old_master_gone", "site", old.name, "err", err)
		return
	}
	if !rep.follows(active.host, active.port) {
		if err := c.ReplicaOf(ctx, active.host, active.port); err != nil {
			log.Warn("cache.switchover.old_master_not_repointed", "site", old.name, "err", err)
			return
		}
		log.Info("cache.repointed", "site", old.name, "to", active.name, "was", rep.Role)
	}
	// Clients still connected to the old primary would read stale data or
	// get READONLY: dropping them makes them reconnect through the active
	// endpoint.
	if err := c.KillNormalClients(ctx); err != nil {
		log.Warn("cache.switchover.clients_not_killed", "site", old.name, "err", err)
		return
	}
	log.Info("cache.switchover.clients_killed", "site", old.name)
}

// siteIndex is the index of site name in f.sites, or -1.
func (f *Follower) siteIndex(name string) int {
	for i, s := range f.sites {
		if s.name == name {
			return i
		}
	}
	return -1
}
