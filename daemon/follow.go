package daemon

import (
	"context"
	"fmt"
	"log/slog"
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

// Retry bounds of the handoff.
const (
	followFirstRetry = 500 * time.Millisecond
	followMaxRetry   = 30 * time.Second
	followTimeout    = 30 * time.Second
)

// handoff runs every follower of a group in the background: the MySQL
// promotion never waits on them, and a failure is retried with backoff
// until it succeeds or a newer view replaces the one being followed.
type handoff struct {
	followers []Follower
	log       *slog.Logger
	// firstRetry and maxRetry bound the backoff between failed passes.
	firstRetry, maxRetry time.Duration

	// onDone is told each follower pass's outcome (metrics); may be nil.
	onDone func(follower string, v view.View, err error)

	mu     sync.Mutex
	wanted view.View         // newest view naming an active site
	site   map[string]string // follower → active site it last completed
	done   map[string]uint64 // follower → epoch it last completed
	errs   map[string]string // follower → last error, for status
	kick   chan struct{}
}

func newHandoff(followers []Follower, log *slog.Logger) *handoff {
	return &handoff{followers: followers, log: log, firstRetry: followFirstRetry, maxRetry: followMaxRetry, done: map[string]uint64{}, site: map[string]string{}, errs: map[string]string{}, kick: make(chan struct{}, 1)}
}

// want records a new view; views without an active site (a failover in
// flight) leave routing where it is until the new primary is published.
func (h *handoff) want(v view.View) {
	if h == nil || len(h.followers) == 0 || v.ActiveSite == "" {
		return
	}
	h.mu.Lock()
	if v.Epoch <= h.wanted.Epoch && h.wanted.ActiveSite != "" {
		h.mu.Unlock()
		return
	}
	h.wanted = v
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
		errText, done, wanted := h.errs[f.Name()], h.done[f.Name()], h.wanted.Epoch
		r := status.Follower{Name: f.Name(), InSync: wanted > 0 && done == wanted, State: "pending", Error: errText}
		switch {
		case errText != "":
			r.State = "error"
		case r.InSync:
			r.State = "ok"
		}
		out = append(out, r)
	}
	return out
}

// run follows the wanted view until ctx ends; only the leader moves routing.
func (h *handoff) run(ctx context.Context, isLeader func() bool) {
	if h == nil || len(h.followers) == 0 {
		return
	}
	backoff := h.firstRetry
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.kick:
			backoff = h.firstRetry
		case <-timer.C:
		}
		if isLeader() && h.pass(ctx) {
			timer.Reset(time.Hour)
			continue
		}
		timer.Reset(backoff)
		backoff = min(2*backoff, h.maxRetry)
	}
}

// pass runs every follower not yet in step with the wanted view; it reports
// whether all are.
func (h *handoff) pass(ctx context.Context) bool {
	h.mu.Lock()
	v := h.wanted
	h.mu.Unlock()
	if v.ActiveSite == "" {
		return true
	}
	all := true
	for _, f := range h.followers {
		h.mu.Lock()
		inStep := h.done[f.Name()] == v.Epoch
		h.mu.Unlock()
		if inStep {
			continue
		}
		fctx, cancel := context.WithTimeout(ctx, followTimeout)
		err := f.Follow(fctx, v)
		cancel()
		h.mu.Lock()
		if err != nil {
			all = false
			h.errs[f.Name()] = err.Error()
			h.log.Warn("follow.failed", "follower", f.Name(), "epoch", v.Epoch, "active_site", v.ActiveSite, "err", err)
		} else {
			delete(h.errs, f.Name())
			h.done[f.Name()] = v.Epoch
			h.site[f.Name()] = v.ActiveSite
			h.log.Info("follow.done", "follower", f.Name(), "epoch", v.Epoch, "active_site", v.ActiveSite)
		}
		h.mu.Unlock()
		if h.onDone != nil {
			h.onDone(f.Name(), v, err)
		}
	}
	return all
}

// followed is the active site follower name last completed ("" if none).
func (h *handoff) followed(name string) string {
	if h == nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.site[name]
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
