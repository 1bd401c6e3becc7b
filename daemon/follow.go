package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/dns"
	"github.com/failoverd/failoverd/dragonfly"
	"github.com/failoverd/failoverd/kube"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/view"
)

// Follower moves something that must follow the MySQL primary (Kubernetes
// Service selector, node taints, the DNS record, Dragonfly/Redis) to the
// site a view names. Follow must be idempotent: it is called again for the
// same view after a failure, and after a daemon restart.
type Follower interface {
	// Name identifies the follower in logs and status ("kube", "dns", "cache").
	Name() string
	// Follow makes what it manages point at v.ActiveSite (v.ActiveSite is
	// never empty here).
	Follow(ctx context.Context, v view.View) error
}

// Reconciler is a Follower that also says what a pass had to change. The
// handoff re-runs every follower on an interval; a change made by a re-run
// of a view the follower had already completed is drift, logged as
// follow.repaired and counted. The kube and dns followers implement it; a
// plain Follower is re-run all the same, its drift unknown.
type Reconciler interface {
	Follower
	// Reconcile is Follow returning what it changed (empty: nothing).
	Reconcile(ctx context.Context, v view.View) ([]string, error)
}

// ReaderFollower moves something that must follow the reader set (the
// reader Service's pods, the reader DNS record) to the eligible sites.
// FollowReaders must be idempotent and return what it changed (empty when
// everything already matched s); it must refuse a set older than the one
// an object records (kube.GuardReaders).
type ReaderFollower interface {
	// Name identifies the follower in logs and status ("kube-reader-service", "dns-readers").
	Name() string
	// FollowReaders makes what it manages list exactly s.Sites.
	FollowReaders(ctx context.Context, s kube.ReaderSet) ([]string, error)
}

// named is what a handoff runs: a Follower or a ReaderFollower.
type named interface{ Name() string }

// Retry bounds of the handoff.
const (
	followFirstRetry = 500 * time.Millisecond
	followMaxRetry   = 30 * time.Second
	followTimeout    = 30 * time.Second
	// followReconcileInterval is configs.Group.RoutingReconcileInterval's default.
	followReconcileInterval = 30 * time.Second
)

// Follower states in status.Follower.State.
const (
	followOK          = "ok"
	followPending     = "pending"
	followDrifted     = "drifted"
	followUnreachable = "unreachable"
	followError       = "error"
)

// followState is what the handoff knows of one follower.
type followState struct {
	seq        uint64 // the wanted target it last completed (handoff.seq)
	epoch      uint64 // epoch of the view it last completed
	site       string // active site of that view
	state      string // outcome of its last run ("" before any)
	err        string
	lastCheck  time.Time // last run without error
	lastRepair time.Time
	lastDrift  []string
	repairs    uint64
	doneAt     time.Time // when it first completed epoch (the history's routed step)
}

// handoff runs every follower of a group in the background: the MySQL
// promotion never waits on them, a failure is retried with backoff until it
// succeeds or a newer view replaces the one being followed, and every
// interval all followers are run again against the wanted view so that an
// object edited by hand or recreated by a deploy is put back.
type handoff struct {
	followers []named
	log       *slog.Logger
	// firstRetry and maxRetry bound the backoff between failed passes.
	firstRetry, maxRetry time.Duration
	// interval is how often every follower is re-run against the wanted
	// view (configs.Group.RoutingReconcileInterval); set before run.
	interval time.Duration
	// after and now are the clock (time.After, time.Now; tests inject theirs).
	after func(time.Duration) <-chan time.Time
	now   func() time.Time

	// onDone is told the outcome of each pass that follows a view the
	// follower had not completed, and of each failed or repairing re-run
	// (metrics); may be nil. A clean re-run is not reported.
	onDone func(follower string, v view.View, err error)
	// onRepair is told each repair (drift: what a re-run changed); may be nil.
	onRepair func(follower string, v view.View, drift []string)

	mu     sync.Mutex
	wanted view.View // newest view naming an active site
	// readers: this handoff runs ReaderFollowers against wantedSet, the
	// newest reader set (its epoch and group in wanted); held is unused.
	readers   bool
	wantedSet kube.ReaderSet
	// seq counts the targets accepted (views, reader sets): a follower is
	// in step when it completed the current one.
	seq uint64
	// held: a newer view names no active site (a failover in flight), so
	// nothing is written until a view at least as new names one.
	held      bool
	heldEpoch uint64
	states    map[string]*followState
	kick      chan struct{}
}

func newHandoff(followers []Follower, log *slog.Logger) *handoff {
	fs := make([]named, len(followers))
	for i, f := range followers {
		fs[i] = f
	}
	return newHandoffOf(fs, log)
}

// newReaderHandoff runs reader followers against the sets given to
// wantReaders, with the same retries, re-runs and status as the writer's.
func newReaderHandoff(followers []ReaderFollower, log *slog.Logger) *handoff {
	fs := make([]named, len(followers))
	for i, f := range followers {
		fs[i] = f
	}
	h := newHandoffOf(fs, log)
	h.readers = true
	return h
}

func newHandoffOf(followers []named, log *slog.Logger) *handoff {
	h := &handoff{followers: followers, log: log, firstRetry: followFirstRetry, maxRetry: followMaxRetry,
		interval: followReconcileInterval, after: time.After, now: time.Now,
		states: map[string]*followState{}, kick: make(chan struct{}, 1)}
	for _, f := range followers {
		h.states[f.Name()] = &followState{}
	}
	return h
}

// wantReaders records a new reader set; one not newer than the wanted set
// (an older epoch, or computed earlier) is ignored.
func (h *handoff) wantReaders(s kube.ReaderSet) {
	if h == nil || len(h.followers) == 0 || !h.readers {
		return
	}
	h.mu.Lock()
	// Following an older set after a newer one would put back a replica
	// the newer set took out.
	if h.seq > 0 && !s.Newer(h.wantedSet) {
		h.mu.Unlock()
		return
	}
	s.Sites = slices.Clone(s.Sites)
	h.wantedSet = s
	h.wanted = view.View{Group: s.Group, Epoch: s.Epoch}
	h.seq++
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// want records a new view. A view without an active site (a failover in
// flight) holds routing where it is, re-runs included, until a view at
// least as new names the new primary.
func (h *handoff) want(v view.View) {
	if h == nil || len(h.followers) == 0 || h.readers {
		return
	}
	h.mu.Lock()
	if v.ActiveSite == "" {
		// Re-asserting the old primary's routing while it is being fenced
		// would send writers to a site that is losing its role.
		if v.Epoch > h.wanted.Epoch && (!h.held || v.Epoch > h.heldEpoch) {
			h.held, h.heldEpoch = true, v.Epoch
		}
		h.mu.Unlock()
		return
	}
	if v.Epoch <= h.wanted.Epoch && h.wanted.ActiveSite != "" {
		h.mu.Unlock()
		return
	}
	h.wanted = v
	h.seq++
	if h.held && v.Epoch >= h.heldEpoch {
		h.held = false
	}
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// report is each follower's state for the status snapshot.
func (h *handoff) report() []status.Follower {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []status.Follower
	for _, f := range h.followers {
		st := h.states[f.Name()]
		r := status.Follower{Name: f.Name(), State: st.state, Error: st.err, Epoch: st.epoch,
			LastCheckAt: st.lastCheck, LastRepairAt: st.lastRepair, LastDrift: slices.Clone(st.lastDrift), Repairs: st.repairs}
		r.InSync = h.seq > 0 && st.seq == h.seq && st.state == followOK
		if st.state == "" || (st.state == followOK && !r.InSync) {
			r.State = followPending
		}
		out = append(out, r)
	}
	return out
}

// run follows the wanted view until ctx ends; only the leader moves routing.
// A pass runs the followers not in step with the wanted view (on a new
// view, then with backoff while one fails); every interval a full pass
// re-runs them all.
func (h *handoff) run(ctx context.Context, isLeader func() bool) {
	if h == nil || len(h.followers) == 0 {
		return
	}
	interval := h.interval
	if interval <= 0 {
		interval = followReconcileInterval
	}
	backoff := h.firstRetry
	failing := false // the last pass did not bring every follower in step
	wasLeader := true
	for {
		wait := interval
		if failing {
			wait = min(backoff, interval)
		}
		fire := h.after(wait)
		full := false
		select {
		case <-ctx.Done():
			return
		case <-h.kick:
			backoff = h.firstRetry
		case <-fire:
			full = !failing
		}
		leader := isLeader()
		if !leader {
			wasLeader = false
			failing, backoff = true, min(2*backoff, h.maxRetry)
			continue
		}
		// A new leader re-checks everything: the previous one may have
		// left objects half-moved.
		full = full || !wasLeader
		wasLeader = true
		if h.pass(ctx, full) {
			failing, backoff = false, h.firstRetry
			continue
		}
		if failing {
			backoff = min(2*backoff, h.maxRetry)
		}
		failing = true
	}
}

// pass runs the followers against the wanted view: all of them when full,
// else those that have not completed it or whose last run failed. It
// reports whether all are in step; it stops early (false) when a newer view
// arrives, which has kicked run.
func (h *handoff) pass(ctx context.Context, full bool) bool {
	h.mu.Lock()
	v, held, set, seq := h.wanted, h.held, h.wantedSet, h.seq
	h.mu.Unlock()
	if seq == 0 || (!h.readers && (v.ActiveSite == "" || held)) {
		return true
	}
	all := true
	for _, f := range h.followers {
		name := f.Name()
		h.mu.Lock()
		st := h.states[name]
		superseded := h.seq != seq || h.held
		completed := st.seq == seq
		inStep := completed && st.state == followOK
		h.mu.Unlock()
		// A newer view (or a failover in flight) must not be undone by the
		// rest of a pass over an older one.
		if superseded {
			return false
		}
		if inStep && !full {
			continue
		}
		fctx, cancel := context.WithTimeout(ctx, followTimeout)
		changed, err := runFollower(fctx, f, v, set)
		cancel()
		repaired := completed && len(changed) > 0
		now := h.now()
		h.mu.Lock()
		switch {
		case err == nil:
			if !completed {
				st.doneAt = now
			}
			st.seq, st.epoch, st.site, st.state, st.err, st.lastCheck = seq, v.Epoch, v.ActiveSite, followOK, "", now
		case kube.Unreachable(err):
			st.state, st.err = followUnreachable, err.Error()
		case len(changed) > 0:
			st.state, st.err = followDrifted, err.Error()
		default:
			st.state, st.err = followError, err.Error()
		}
		if repaired {
			st.repairs++
			st.lastRepair, st.lastDrift = now, changed
		}
		h.mu.Unlock()
		switch {
		case err != nil:
			all = false
			h.log.Warn("follow.failed", "follower", name, "epoch", v.Epoch, "active_site", v.ActiveSite, "state", st.state, "err", err)
		case !completed:
			h.log.Info("follow.done", "follower", name, "epoch", v.Epoch, "active_site", v.ActiveSite)
		}
		if repaired {
			h.log.Warn("follow.repaired", "follower", name, "epoch", v.Epoch, "active_site", v.ActiveSite, "drift", changed)
			if h.onRepair != nil {
				h.onRepair(name, v, changed)
			}
		}
		if h.onDone != nil && (!completed || err != nil || repaired) {
			h.onDone(name, v, err)
		}
	}
	return all
}

// runFollower runs f for v (a ReaderFollower for set) and returns what it
// changed when it can tell.
func runFollower(ctx context.Context, f named, v view.View, set kube.ReaderSet) ([]string, error) {
	switch f := f.(type) {
	case ReaderFollower:
		return f.FollowReaders(ctx, set)
	case Reconciler:
		return f.Reconcile(ctx, v)
	case Follower:
		return nil, f.Follow(ctx, v)
	}
	return nil, fmt.Errorf("follower %s: %T follows nothing", f.Name(), f)
}

// routedAt is when the last follower first completed the view of epoch;
// false while one has not, or without followers.
func (h *handoff) routedAt(epoch uint64) (time.Time, bool) {
	if h == nil || len(h.followers) == 0 {
		return time.Time{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var at time.Time
	for _, f := range h.followers {
		st := h.states[f.Name()]
		if st.epoch != epoch {
			return time.Time{}, false
		}
		at = later(at, st.doneAt)
	}
	return at, true
}

// followed is the active site follower name last completed ("" if none).
func (h *handoff) followed(name string) string {
	if h == nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.states[name]; st != nil {
		return st.site
	}
	return ""
}

// defaultFollowers builds the followers a group's configuration asks for:
// Kubernetes Service selectors and node taints, the DNS record, the cache.
func defaultFollowers(g configs.Group, c *kube.Clusters, log *slog.Logger) ([]Follower, error) {
	var out []Follower
	for _, f := range kube.Followers(g, c, log) {
		out = append(out, f)
	}
	if f := dns.NewFollower(g, c, log); f != nil {
		out = append(out, f)
	}
	cache, err := dragonfly.NewFollower(g, log)
	if err != nil {
		return nil, fmt.Errorf("cache follower: %w", err)
	}
	if cache != nil {
		out = append(out, cache)
	}
	return out, nil
}

// defaultReaderFollowers builds the reader followers a group's
// configuration asks for: the reader Service (readers.kubernetes) and the
// reader DNS record (readers.dns).
func defaultReaderFollowers(g configs.Group, c *kube.Clusters, log *slog.Logger) []ReaderFollower {
	var out []ReaderFollower
	if f := kube.NewReaderServiceFollower(g, c, log); f != nil {
		out = append(out, f)
	}
	if f := dns.NewReaderFollower(g, c, log); f != nil {
		out = append(out, f)
	}
	return out
}
