package daemon

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// leadership is this daemon's right to act. Every action's context derives
// from the current term's context, so losing the Lease cancels in-flight
// work at its next step boundary instead of letting a deposed leader go on.
type leadership struct {
	mu    sync.Mutex
	ctx   context.Context // nil while not leading
	since time.Time       // when the current term started, on this daemon's clock
	guard *leaseGuard     // the term's lease; nil without election
	known string          // identity of the leader last observed ("" when unknown)
	sess  string          // the election session, for status ("" when none)
}

// setSession records the election session's description.
func (l *leadership) setSession(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sess = s
}

// session describes the election session ("" when none).
func (l *leadership) session() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sess
}

// observed records the identity of the leader the election last saw.
func (l *leadership) observed(identity string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.known = identity
}

// leader is the identity of the leader last observed.
func (l *leadership) leader() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.known
}

// begin starts a term bound to ctx (cancelled when the term ends) and, with
// election, to guard: the term is over once its lease may have expired,
// whether or not ctx was cancelled yet.
func (l *leadership) begin(ctx context.Context, since time.Time, guard *leaseGuard) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ctx, l.since, l.guard = ctx, since, guard
}

// end ends the current term.
func (l *leadership) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ctx = nil
}

// current returns the term's context and start, ok false when not leading
// (or the term's context already ended).
func (l *leadership) current() (ctx context.Context, since time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Guards against acting (deciding, serving a view) on a lease that
	// may have passed to another daemon before the watchdog ended the term.
	if l.ctx == nil || l.ctx.Err() != nil || (l.guard != nil && l.guard.left() <= 0) {
		return nil, time.Time{}, false
	}
	return l.ctx, l.since, true
}

func (l *leadership) leading() bool {
	_, _, ok := l.current()
	return ok
}

// leaseGuard ends a term before the lease it rests on can expire. A lease
// runs from when the server received a renewal, which is no earlier than
// when this daemon sent it; so the term may last limit after the send time
// of the latest renewal that succeeded, limit being the lease less a margin
// (clock rates, cancelling a step in flight). A read that still finds the
// leader record proves nothing here: renewals can stall while reads succeed.
type leaseGuard struct {
	now   func() time.Time
	limit time.Duration

	mu   sync.Mutex
	last time.Time // send time of the latest renewal that succeeded; zero: none
}

func newLeaseGuard(now func() time.Time, limit time.Duration) *leaseGuard {
	return &leaseGuard{now: now, limit: limit}
}

// renewed records a renewal that succeeded, sent at sentAt.
func (g *leaseGuard) renewed(sentAt time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sentAt.After(g.last) {
		g.last = sentAt
	}
}

// lastRenewal is the send time of the latest renewal that succeeded.
func (g *leaseGuard) lastRenewal() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last
}

// left is how long the term may still act; <= 0 once it must have ended.
func (g *leaseGuard) left() time.Duration {
	last := g.lastRenewal()
	if last.IsZero() {
		return 0
	}
	return last.Add(g.limit).Sub(g.now())
}

// watch calls expired once left reaches 0, unless ctx ends first: the term
// ends on time even while a renewal or a watchdog round hangs.
func (g *leaseGuard) watch(ctx context.Context, expired func(lastRenewal time.Time)) {
	for {
		left := g.left()
		if left <= 0 {
			expired(g.lastRenewal())
			return
		}
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Load retries when a new leader cannot read the persisted state.
const leaderLoadAttempts = 5

// leaderLoadRetry is the pause between load attempts (a variable for tests).
var leaderLoadRetry = time.Second

// startTerm begins a leadership term bound to lctx. A new leader re-reads
// what the previous one persisted before acting on anything (no restart
// amnesia); one that cannot must not sit on the Lease doing nothing, so it
// resigns.
func (d *Daemon) startTerm(lctx context.Context, resign func(), guard *leaseGuard) {
	// A reload that adds or rebuilds a group loads its state: never in the
	// middle of a term's start, so every group's state is read after the
	// previous leader's last write.
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	since := d.opts.Clock()
	if err := d.loadAll(lctx); err != nil {
		d.log.Error("leader.resigned", "identity", d.opts.Identity, "err", err)
		resign()
		return
	}
	d.lead.begin(lctx, since, guard)
	d.log.Info("leader.elected", "identity", d.opts.Identity)
}

// loadAll re-reads every group's persisted state, retrying a few times.
func (d *Daemon) loadAll(ctx context.Context) error {
	var err error
	for attempt := range leaderLoadAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(leaderLoadRetry):
			}
		}
		err = nil
		for _, g := range d.groupList() {
			if err = g.load(ctx); err != nil {
				d.log.Warn("leader.load_failed", "group", g.cfg.Name, "attempt", attempt+1, "err", err)
				break
			}
		}
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("load state after %d attempts: %w", leaderLoadAttempts, err)
}
