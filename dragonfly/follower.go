package dragonfly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/view"
)

// Sentinel errors.
var (
	// ErrUnreachable means a cache server did not answer (refused, timed
	// out, connection lost). The daemon retries the follow.
	ErrUnreachable = errors.New("cache server unreachable")
	// ErrSyncTimeout means the new cache primary had not caught up with its
	// master within maxSyncWait (or Dragonfly refused the takeover) and
	// onSyncTimeout is "fail": nothing was promoted or repointed.
	ErrSyncTimeout = errors.New("new cache primary did not catch up in time")
	// ErrUnknownSite means the view names a site that has no cache in the
	// group's configuration.
	ErrUnknownSite = errors.New("site has no cache in this group")
	// ErrUnknownEngine means cache.engine is neither "dragonfly" nor "redis".
	ErrUnknownEngine = errors.New("unknown cache engine")
)

// errCycle marks an active cache whose master replicates from it.
var errCycle = errors.New("replication cycle")

// FollowerName is the follower's name in logs and status.
const FollowerName = "cache"

// defaultPollInterval is how often the catch-up wait reads INFO.
const defaultPollInterval = 50 * time.Millisecond

// cacheSite is a site's cache server.
type cacheSite struct {
	name, addr, host, port string
}

// Follower makes a group's caches follow the MySQL primary (see the package
// doc). Its methods are safe on a nil *Follower (a group without cache):
// Follow then does nothing.
type Follower struct {
	group        string
	eng          engine
	sites        []cacheSite
	maxSyncWait  time.Duration
	proceed      bool
	log          *slog.Logger
	dial         func(addr string) conn
	pollInterval time.Duration
}

// NewFollower builds the cache follower of g. It returns nil, nil when g has
// no cache section. The AUTH password is read from cache.passwordFile once,
// here. Sites without a cache address are left alone.
func NewFollower(g configs.Group, log *slog.Logger) (*Follower, error) {
	if g.Cache == nil {
		return nil, nil
	}
	eng, err := engineFor(g.Cache.Engine)
	if err != nil {
		return nil, fmt.Errorf("cache follower of group %s: %w", g.Name, err)
	}
	var password string
	if g.Cache.PasswordFile != "" {
		if password, err = configs.ReadSecret(g.Cache.PasswordFile); err != nil {
			return nil, fmt.Errorf("cache follower of group %s: password: %w", g.Name, err)
		}
	}
	if log == nil {
		log = slog.Default()
	}
	f := &Follower{
		group:       g.Name,
		eng:         eng,
		maxSyncWait: g.Cache.MaxSyncWait,
		proceed:     g.Cache.OnSyncTimeout != "fail",
		// The caller's logger names the group (the daemon's does): naming
		// it again would write the key twice in every line.
		log:          log.With("follower", FollowerName, "engine", eng.name()),
		dial:         func(addr string) conn { return dialRedis(addr, password) },
		pollInterval: defaultPollInterval,
	}
	if f.maxSyncWait <= 0 {
		f.maxSyncWait = 5 * time.Second
	}
	for _, s := range g.Sites {
		if s.Cache == nil || s.Cache.Address == "" {
			continue
		}
		host, port, err := net.SplitHostPort(s.Cache.Address)
		if err != nil {
			return nil, fmt.Errorf("cache follower of group %s: site %s cache address: %w", g.Name, s.Name, err)
		}
		f.sites = append(f.sites, cacheSite{name: s.Name, addr: s.Cache.Address, host: host, port: port})
	}
	return f, nil
}

// Name returns "cache".
func (f *Follower) Name() string { return FollowerName }

// probe is one cache's INFO replication at the start of a follow.
type probe struct {
	rep replication
	err error
}

// Follow makes the cache of v.ActiveSite the cache primary and every other
// site's cache its replica. It is idempotent. The error joins every site
// that could not be brought in step; an unreachable non-active cache
// (ErrUnreachable) does not stop the others.
func (f *Follower) Follow(ctx context.Context, v view.View) error {
	if f == nil {
		return nil
	}
	ai := -1
	for i, s := range f.sites {
		if s.name == v.ActiveSite {
			ai = i
		}
	}
	if ai < 0 {
		return fmt.Errorf("cache follow of group %s: active site %q: %w", f.group, v.ActiveSite, ErrUnknownSite)
	}
	conns := make([]conn, len(f.sites))
	for i, s := range f.sites {
		conns[i] = f.dial(s.addr)
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	probes := make([]probe, len(f.sites))
	var wg sync.WaitGroup
	for i := range f.sites {
		wg.Go(func() { probes[i].rep, probes[i].err = conns[i].Replication(ctx) })
	}
	wg.Wait()

	active := f.sites[ai]
	if err := probes[ai].err; err != nil {
		// Repointing the others at a cache we cannot see could leave them
		// following a dead server: change nothing until it answers.
		return fmt.Errorf("cache follow of group %s: read active cache %s: %w", f.group, active.name, err)
	}
	if err := f.promote(ctx, ai, conns, probes); err != nil {
		return err
	}
	f.settleHandedOver(ctx, ai, conns, probes)
	var errs []error
	for i, s := range f.sites {
		if i == ai {
			continue
		}
		if err := f.repoint(ctx, s, conns[i], probes[i], active); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cache follow of group %s: %w", f.group, errors.Join(errs...))
	}
	return nil
}

// promote makes the active cache the primary unless it already is.
func (f *Follower) promote(ctx context.Context, ai int, conns []conn, probes []probe) error {
	s, c, rep := f.sites[ai], conns[ai], probes[ai].rep
	// Already the primary (a retry, or a restart): promoting again would
	// be a no-op at best, and REPLTAKEOVER must not be sent to a master.
	if rep.Role == roleMaster {
		return nil
	}
	master := net.JoinHostPort(rep.MasterHost, rep.MasterPort)
	mrep, merr := f.masterInfo(ctx, rep, probes)
	synced := false
	switch {
	case merr == nil && mrep.follows(s.host, s.port):
		// A cache restarted with a stale replicaof naming its own replica:
		// nothing feeds either of them, so a catch-up wait could only time
		// out (and, with "fail", never converge). Promote it as it is.
		f.log.Warn("cache.replication_cycle", "site", s.name, "master", master, "possible_loss", true)
		merr = fmt.Errorf("%s replicates from %s: %w", master, s.name, errCycle)
	case merr != nil:
		f.log.Warn("cache.master_unreachable", "site", s.name, "master", master, "err", merr, "possible_loss", true)
	default:
		var err error
		if synced, err = f.waitCaughtUp(ctx, s, c, mrep); err != nil {
			return err
		}
		if !synced {
			// A replica that has not caught up loses the master's latest
			// writes when promoted: only onSyncTimeout=proceed accepts that.
			if !f.proceed {
				return fmt.Errorf("promote cache %s (replica of %s): waited %s: %w", s.name, master, f.maxSyncWait, ErrSyncTimeout)
			}
			f.log.Warn("cache.sync_timeout", "site", s.name, "master", master, "waited", f.maxSyncWait, "possible_loss", true)
		}
	}
	p := promotion{
		site: s.name, conn: c, masterUp: merr == nil, synced: synced, proceed: f.proceed,
		maxSyncWait: f.maxSyncWait, log: f.log,
	}
	if mi := f.indexOf(rep.MasterHost, rep.MasterPort); synced && mi >= 0 && mrep.Role == roleMaster {
		p.handover = &handover{from: f.sites[mi], to: s, fc: conns[mi], tc: c, maxSyncWait: f.maxSyncWait, pollInterval: f.pollInterval}
	}
	err := f.eng.promote(ctx, p)
	if err != nil {
		return fmt.Errorf("cache follow of group %s: %w", f.group, err)
	}
	f.log.Info("cache.promoted", "site", s.name, "old_master", master, "synced", synced)
	return nil
}

// settleHandedOver re-reads every cache that was a master at the start of
// this follow, so repoint sees a FAILOVER that already made it a replica of
// the active cache; such a cache's normal clients are killed so that they
// reconnect through the active endpoint (failures are logged only).
func (f *Follower) settleHandedOver(ctx context.Context, ai int, conns []conn, probes []probe) {
	active := f.sites[ai]
	for i, p := range probes {
		if i == ai || p.err != nil || p.rep.Role != roleMaster {
			continue
		}
		rep, err := conns[i].Replication(ctx)
		if err != nil || !rep.follows(active.host, active.port) {
			continue
		}
		probes[i].rep = rep
		if err := conns[i].KillNormalClients(ctx); err != nil {
			f.log.Warn("cache.clients_not_killed", "site", f.sites[i].name, "err", err)
			continue
		}
		f.log.Info("cache.clients_killed", "site", f.sites[i].name)
	}
}

// indexOf is the index of the site whose cache is host:port, or -1.
func (f *Follower) indexOf(host, port string) int {
	for i, s := range f.sites {
		if s.host == host && s.port == port {
			return i
		}
	}
	return -1
}

// masterInfo reads INFO replication of the master rep follows: from this
// follow's probes when it is a site's cache, else by dialing it.
func (f *Follower) masterInfo(ctx context.Context, rep replication, probes []probe) (replication, error) {
	for i, s := range f.sites {
		if s.host == rep.MasterHost && s.port == rep.MasterPort {
			return probes[i].rep, probes[i].err
		}
	}
	c := f.dial(net.JoinHostPort(rep.MasterHost, rep.MasterPort))
	defer c.Close()
	return c.Replication(ctx)
}

// waitCaughtUp polls the replica until the engine says it caught up with
// master (as read before the wait) or maxSyncWait passes (false, nil).
func (f *Follower) waitCaughtUp(ctx context.Context, s cacheSite, c conn, master replication) (bool, error) {
	wctx, cancel := context.WithTimeout(ctx, f.maxSyncWait)
	defer cancel()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-wctx.Done():
			if err := ctx.Err(); err != nil {
				return false, fmt.Errorf("wait for cache %s to catch up: %w", s.name, err)
			}
			return false, nil
		case <-timer.C:
		}
		rep, err := c.Replication(wctx)
		switch {
		case err == nil && f.eng.caughtUp(rep, master):
			return true, nil
		case err != nil && wctx.Err() == nil:
			return false, fmt.Errorf("wait for cache %s to catch up: %w", s.name, err)
		}
		timer.Reset(f.pollInterval)
	}
}

// repoint makes a non-active cache replicate from the active one.
func (f *Follower) repoint(ctx context.Context, s cacheSite, c conn, p probe, active cacheSite) error {
	if p.err != nil {
		f.log.Warn("cache.unreachable", "site", s.name, "err", p.err)
		return fmt.Errorf("repoint cache %s: %w", s.name, p.err)
	}
	// Re-issuing REPLICAOF to the same master restarts a Dragonfly full
	// sync: skipping a working or syncing link keeps a long sync from being
	// restarted at every retry.
	if p.rep.follows(active.host, active.port) && (p.rep.LinkUp || p.rep.SyncInProgress) {
		return nil
	}
	if err := c.ReplicaOf(ctx, active.host, active.port); err != nil {
		return fmt.Errorf("repoint cache %s to %s (%s): %w", s.name, active.name, active.addr, err)
	}
	was := p.rep.Role
	if p.rep.Role == roleReplica {
		was = "replica of " + net.JoinHostPort(p.rep.MasterHost, p.rep.MasterPort)
	}
	f.log.Info("cache.repointed", "site", s.name, "to", active.name, "was", was)
	return nil
}
