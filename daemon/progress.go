package daemon

// A group loop's progress, for GET /healthz and the systemd watchdog
// (notify.go): each loop records when it last completed an iteration (a
// round, an operator request, a tick while following) and, while an
// iteration carries out an action, that action's deadline. A loop is
// stalled ("wedged") when it completed no iteration for stallBound past the
// later of the two: an action legitimately blocked until its deadline
// (a relay-log drain, a fence that times out) is not a wedge, one that
// outlives its deadline by stallBound is.

import (
	"fmt"
	"sync"
	"time"

	"github.com/failoverd/failoverd/configs"
)

// stallPolls is how many poll intervals a loop may go without an iteration
// outside an action before it counts as stalled; minStall is the least
// bound whatever the poll interval: two server steps (stepTimeout) that a
// round may run outside an action (restarting a replica's replication, a
// hold's end), each bounded by its own timeout, or a slow store write.
const (
	stallPolls = 20
	minStall   = 2 * stepTimeout
)

// stallBound is how long g's loop may go without completing an iteration,
// past the deadline of the action it is in, before it counts as stalled.
func stallBound(gc configs.Group) time.Duration {
	return max(time.Duration(stallPolls)*gc.PollInterval, minStall)
}

// loopProgress is one group loop's progress; the zero value is a loop that
// does not run (never stalled).
type loopProgress struct {
	mu      sync.Mutex
	running bool
	// last is when the loop started or last completed an iteration.
	last time.Time
	// deadline is the deadline of the action the current iteration
	// carries out; zero outside an action.
	deadline time.Time
}

// start records a loop that starts now.
func (p *loopProgress) start(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running, p.last, p.deadline = true, now, time.Time{}
}

// beat records an iteration completed at now.
func (p *loopProgress) beat(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last, p.deadline = now, time.Time{}
}

// within records that the current iteration carries out an action bounded
// by deadline (the latest of several counts).
func (p *loopProgress) within(deadline time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deadline = later(p.deadline, deadline)
}

// stop records a loop that returned (retired by a reload, or stopping):
// it is not stalled, it is gone.
func (p *loopProgress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running = false
}

// stalled says why the loop counts as stalled at now with bound, or ""
// while it makes progress (or does not run).
func (p *loopProgress) stalled(now time.Time, bound time.Duration) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return ""
	}
	if p.deadline.IsZero() {
		if idle := now.Sub(p.last); idle > bound {
			return fmt.Sprintf("no loop iteration for %s (bound %s)", idle.Round(time.Second), bound)
		}
		return ""
	}
	if over := now.Sub(p.deadline); over > bound {
		return fmt.Sprintf("no loop iteration for %s: its action is %s past its deadline (bound %s)",
			now.Sub(p.last).Round(time.Second), over.Round(time.Second), bound)
	}
	return ""
}

// Stalled lists the groups whose loop is stalled, one line each ("group G:
// why"); empty while every loop makes progress. GET /healthz answers 503
// with it, and the systemd watchdog is not pinged while it is not empty.
func (d *Daemon) Stalled() []string {
	now := d.opts.Clock()
	var out []string
	for _, g := range d.groupList() {
		if why := g.progress.stalled(now, stallBound(g.cfg)); why != "" {
			out = append(out, fmt.Sprintf("group %s: %s", g.cfg.Name, why))
		}
	}
	return out
}
