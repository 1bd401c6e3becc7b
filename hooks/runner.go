// Package hooks runs a group's event hooks (configs.Hook): a command or a
// webhook per event (before-promote, after-promote, failover-failed,
// split-brain, recovery-blocked, reader-added, reader-removed) with the
// event as a JSON payload, so that routing outside Kubernetes (ProxySQL,
// HAProxy, a service registry) can follow the primary and the readers.
//
// A hook never blocks or undoes a MySQL promotion: Fire only queues the event
// and returns; every hook runs in its own goroutine, bounded by its Timeout,
// and its outcome is only reported (Results, SetOnResult, logs).
//
// Delivery is at most once for commands and at least once for webhooks (a
// retried call may have reached the receiver before it failed): receivers
// should treat (group, event, epoch) as the identity of an event.
package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/failoverd/failoverd/configs"
)

// Event is one group event a hook may run on; its JSON is the payload.
type Event struct {
	Type    string `json:"event"` // one of configs.HookEvents()
	Group   string `json:"group"`
	Epoch   uint64 `json:"epoch"`
	From    string `json:"from,omitempty"`    // old primary
	To      string `json:"to,omitempty"`      // new primary / target
	Site    string `json:"site,omitempty"`    // split-brain/recovery-blocked/reader-*: the site concerned
	Reason  string `json:"reason"`            // the decision's machine-readable reason
	Message string `json:"message,omitempty"` // the decision's human-readable text
	GTID    string `json:"gtid,omitempty"`    // promotion GTID set when known
	// Readers is the full reader set after a reader-added or
	// reader-removed event (sorted site names; [] when none, absent from
	// other events: nil is omitted, an empty set is not).
	Readers []string  `json:"readers,omitzero"`
	At      time.Time `json:"at"`
}

// Result is the outcome of one hook run.
//
// A run still in progress is reported by Results with OK false and Err equal
// to Running; At is when it started, Duration is 0 and Attempts counts the
// webhook calls started so far (1 for a command). InProgress tells it apart.
//
// An event that never ran (dropped from a full queue, or still queued when
// the runner was closed) is reported to the OnResult callback with Attempts
// 0, Duration 0 and Err starting with ErrDropped's text; it never becomes a
// hook's latest Result.
type Result struct {
	Hook     string        `json:"hook"`
	Event    string        `json:"event"`
	Epoch    uint64        `json:"epoch"`
	At       time.Time     `json:"at"`       // when the run started (or the event was dropped)
	Duration time.Duration `json:"duration"` // how long the run took, retries included
	Attempts int           `json:"attempts"` // webhook calls made; 1 for a command that started
	OK       bool          `json:"ok"`
	Err      string        `json:"err,omitempty"` // "" when OK; Running while in progress
}

// Running is Result.Err of a run still in progress.
const Running = "running"

// InProgress reports whether r describes a run that has not finished yet.
func (r Result) InProgress() bool { return !r.OK && r.Err == Running }

// Expected outcomes, named in Result.Err.
var (
	// ErrTimeout: the hook did not finish within its Timeout (a command was
	// killed, a webhook call abandoned).
	ErrTimeout = errors.New("hook timed out")
	// ErrClosed: the runner was closed (failoverd is stopping) before the
	// hook finished.
	ErrClosed = errors.New("hook cancelled: failoverd is stopping")
	// ErrDropped: the event never ran (queue full or runner closed).
	ErrDropped = errors.New("hook event dropped")
	// ErrFailed: the command exited non-zero or could not start, or the
	// webhook answered non-2xx or could not be reached.
	ErrFailed = errors.New("hook failed")
)

const (
	// maxQueued bounds the events waiting behind a running hook, so a hook
	// that hangs on every event cannot grow memory without bound; the oldest
	// queued event is dropped first (the latest state matters most).
	maxQueued = 16
	// defaultTimeout applies to a Hook built without configs' defaults.
	defaultTimeout = 10 * time.Second
)

// Runner runs one group's hooks. Its methods are safe for concurrent use.
type Runner struct {
	group  string
	log    *slog.Logger
	client *http.Client
	// grace is how long a command's process group gets between SIGTERM and
	// SIGKILL; tests shorten it.
	grace time.Duration
	// backoff is the pause before the first webhook retry, doubled after
	// each; tests shorten it.
	backoff time.Duration

	ctx    context.Context // cancelled by Close once its ctx ends: kills every run
	cancel context.CancelFunc
	wg     sync.WaitGroup // one per worker goroutine

	mu       sync.Mutex
	closed   bool
	onResult func(Result)
	workers  []*worker // sorted by hook name
}

// worker serialises the runs of one hook: a later event waits for the
// earlier one, so an after-promote never overtakes its before-promote.
type worker struct {
	hook configs.Hook
	// The fields below are guarded by Runner.mu.
	queue   []Event
	dropped []Result // reported to onResult by the worker goroutine
	running bool     // a goroutine is draining queue
	latest  *Result  // the latest finished or in-progress run
}

// New returns a Runner for group's hooks; log nil means slog.Default(). The
// hooks are expected to be validated by configs; a zero Timeout means 10s
// and a negative Retries means none.
func New(group string, hooks []configs.Hook, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runner{
		group:   group,
		log:     log, // the caller's logger names the group (the daemon's does)
		client:  newHTTPClient(),
		grace:   defaultGrace,
		backoff: defaultBackoff,
		ctx:     ctx,
		cancel:  cancel,
	}
	for _, h := range hooks {
		h.Events = slices.Clone(h.Events)
		h.Command = slices.Clone(h.Command)
		if h.Timeout <= 0 {
			h.Timeout = defaultTimeout
		}
		if h.Retries < 0 {
			h.Retries = 0
		}
		r.workers = append(r.workers, &worker{hook: h})
	}
	slices.SortStableFunc(r.workers, func(a, b *worker) int { return strings.Compare(a.hook.Name, b.hook.Name) })
	return r
}

// SetOnResult sets the callback that receives every finished run and every
// dropped event (metrics). Set it before the first Fire. It is called from
// the hook's goroutine, never while a lock is held, and must not block long:
// the next event of the same hook waits for it.
func (r *Runner) SetOnResult(f func(Result)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onResult = f
}

// Fire starts every hook subscribed to ev.Type in the background and returns
// at once (never blocks the caller, even if a hook hangs). An empty ev.Group
// becomes the runner's group and a zero ev.At the current time. After Close,
// events are dropped (logged "hook.dropped").
func (r *Runner) Fire(ev Event) {
	if ev.Group == "" {
		ev.Group = r.group
	}
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.workers {
		if !slices.Contains(w.hook.Events, ev.Type) {
			continue
		}
		if r.closed {
			r.log.Warn("hook.dropped", "hook", w.hook.Name, "event", ev.Type, "epoch", ev.Epoch, "reason", "closed")
			continue
		}
		w.queue = append(w.queue, ev)
		if len(w.queue) > maxQueued {
			old := w.queue[0]
			w.queue = w.queue[1:]
			r.log.Warn("hook.dropped", "hook", w.hook.Name, "event", old.Type, "epoch", old.Epoch,
				"reason", "queue-full", "queued", maxQueued)
			w.dropped = append(w.dropped, droppedResult(w.hook.Name, old, "more than 16 events queued behind a running hook"))
		}
		if !w.running {
			w.running = true
			r.wg.Add(1)
			go r.drain(w)
		}
	}
}

func droppedResult(hook string, ev Event, why string) Result {
	return Result{Hook: hook, Event: ev.Type, Epoch: ev.Epoch, At: time.Now(), Err: fmt.Sprintf("%v: %s", ErrDropped, why)}
}

// drain runs w's queued events one after the other until the queue is
// empty.
func (r *Runner) drain(w *worker) {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		dropped := w.dropped
		w.dropped = nil
		if r.ctx.Err() != nil {
			// Closed and past its deadline: what is still queued never runs.
			for _, ev := range w.queue {
				r.log.Warn("hook.dropped", "hook", w.hook.Name, "event", ev.Type, "epoch", ev.Epoch, "reason", "closed")
				dropped = append(dropped, droppedResult(w.hook.Name, ev, "failoverd is stopping"))
			}
			w.queue = nil
		}
		if len(w.queue) == 0 {
			w.running = false
			onResult := r.onResult
			r.mu.Unlock()
			report(onResult, dropped)
			return
		}
		ev := w.queue[0]
		w.queue = w.queue[1:]
		cur := &Result{Hook: w.hook.Name, Event: ev.Type, Epoch: ev.Epoch, At: time.Now(), Attempts: 1, Err: Running}
		w.latest = cur
		onResult := r.onResult
		r.mu.Unlock()

		report(onResult, dropped)
		res := r.run(w.hook, ev, cur.At, func(attempt int) {
			r.mu.Lock()
			cur.Attempts = attempt
			r.mu.Unlock()
		})
		r.mu.Lock()
		w.latest = &res
		r.mu.Unlock()
		report(onResult, []Result{res})
	}
}

func report(f func(Result), rs []Result) {
	if f == nil {
		return
	}
	for _, res := range rs {
		f(res)
	}
}

// Results returns the latest Result per hook (sorted by hook name),
// including a run still in progress (see Result). Hooks that have not run
// yet are absent.
func (r *Runner) Results() []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Result
	for _, w := range r.workers {
		if w.latest != nil {
			out = append(out, *w.latest)
		}
	}
	return out
}

// Close stops accepting events and waits for the running and queued hooks
// until ctx ends; then it kills the running commands (SIGTERM, SIGKILL after
// a grace period), cancels the webhook calls, drops what is still queued and
// waits for that to finish (bounded by the grace period and a few seconds).
func (r *Runner) Close(ctx context.Context) {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		r.log.Warn("hook.close_cancelling", "reason", ctx.Err())
	}
	r.cancel()
	<-done
	r.client.CloseIdleConnections()
}

// run runs one hook for one event and returns its Result.
func (r *Runner) run(h configs.Hook, ev Event, start time.Time, onAttempt func(int)) Result {
	log := r.log.With("hook", h.Name, "event", ev.Type, "epoch", ev.Epoch)
	res := Result{Hook: h.Name, Event: ev.Type, Epoch: ev.Epoch, At: start}
	ctx, cancel := context.WithTimeout(r.ctx, h.Timeout)
	defer cancel()

	var err error
	payload, merr := json.Marshal(ev)
	switch {
	case merr != nil:
		err = fmt.Errorf("%w: encode payload: %w", ErrFailed, merr)
	case len(h.Command) > 0:
		log.Info("hook.started", "kind", "command", "command", h.Command, "timeout", h.Timeout)
		res.Attempts = 1
		err = r.runCommand(ctx, h, ev, payload, log)
	default:
		log.Info("hook.started", "kind", "webhook", "url", redactURL(h.URL), "timeout", h.Timeout, "retries", h.Retries)
		res.Attempts, err = r.runWebhook(ctx, h, ev.Type, payload, log, onAttempt)
	}
	res.Duration = time.Since(start)
	if err != nil {
		err = r.classify(ctx, h, err)
		res.Err = err.Error()
		log.Warn("hook.finished", "ok", false, "attempts", res.Attempts, "duration", res.Duration, "err", res.Err)
		return res
	}
	res.OK = true
	log.Info("hook.finished", "ok", true, "attempts", res.Attempts, "duration", res.Duration)
	return res
}

// classify names why a run that failed after its context ended failed:
// Close (ErrClosed) or its own Timeout (ErrTimeout).
func (r *Runner) classify(ctx context.Context, h configs.Hook, err error) error {
	switch {
	case errors.Is(err, ErrClosed) || errors.Is(err, ErrTimeout):
		return err
	case r.ctx.Err() != nil:
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case ctx.Err() != nil:
		return fmt.Errorf("%w after %v: %w", ErrTimeout, h.Timeout, err)
	}
	return err
}
