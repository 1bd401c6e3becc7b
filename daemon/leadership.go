package daemon

import (
	"context"
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

// begin starts a term bound to ctx (cancelled when the term ends).
func (l *leadership) begin(ctx context.Context, since time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ctx, l.since = ctx, since
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
	if l.ctx == nil || l.ctx.Err() != nil {
		return nil, time.Time{}, false
	}
	return l.ctx, l.since, true
}

func (l *leadership) leading() bool {
	_, _, ok := l.current()
	return ok
}
