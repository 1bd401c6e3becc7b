package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/view"
)

// Harness runs one group's loop body — decide on settled observations,
// carry the decision out, persist, publish — one round per call, on edges
// the caller provides and the caller's clock, without goroutines or timers
// of its own. The deterministic simulation (test/sim) drives the daemon's
// own code with it instead of a copy of it. Followers (routing, the cache)
// run only when Follow is called and sidecar reports arrive only through
// SidecarReport; hooks and leader election are not part of it.
type Harness struct {
	g       *group
	serving time.Time
}

// HarnessOptions are a Harness's edges.
type HarnessOptions struct {
	// Observations of the group's sites (TrackerObservations, fed by the caller).
	Observations Observations
	// Dial opens a site's Instance.
	Dial Dialer
	// Store keeps the group's state.
	Store store.Store
	// Clock is the only time the decisions and the records see.
	Clock func() time.Time
	// Failpoint, when set, is called after each persisted failover step
	// (the Step* names), as the crash tests' FAILOVERD_FAILPOINT is.
	Failpoint func(step string)
	// Logger receives the group's log (nil: discarded).
	Logger *slog.Logger
	// Identity is recorded with every save.
	Identity string
	// Followers are told every new view naming an active site, in Follow.
	Followers []Follower
	// ViewKey signs the published view and checks sidecar reports
	// (daemon.viewSigningKeyFile); nil: unsigned, no sidecar reports.
	ViewKey []byte
	// Pause is called where the daemon would sleep waiting for something
	// outside it (a sidecar taking the view of a promotion): the caller
	// lets the rest of its world run once. Nil: nothing runs meanwhile.
	Pause func()
}

// NewHarness builds the loop of group gc on o's edges. It runs actions'
// parallel parts one after another so that a history replays exactly.
func NewHarness(gc configs.Group, o HarnessOptions) (*Harness, error) {
	if o.Observations == nil || o.Dial == nil || o.Store == nil || o.Clock == nil {
		return nil, fmt.Errorf("harness for group %s: observations, dial, store and clock are required", gc.Name)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g, err := newGroupCore(gc, o.Store, &publisher{key: o.ViewKey}, o.Dial, o.Clock, o.Failpoint, log.With("group", gc.Name))
	if err != nil {
		return nil, err
	}
	pause := o.Pause
	if pause == nil {
		pause = func() {}
	}
	g.obs, g.identity, g.pace = o.Observations, o.Identity, serialPacer{pause: pause}
	// Prevents an observing group from moving routing or the cache.
	if fs := followersOf(gc, o.Followers); len(fs) > 0 {
		g.follow = newHandoff(fs, g.log)
		g.follow.now = o.Clock
	}
	return &Harness{g: g}, nil
}

// Start loads the persisted state, as a daemon taking the lead does; the
// term it serves begins now.
func (h *Harness) Start(ctx context.Context) error {
	h.serving = h.g.now()
	return h.g.load(ctx)
}

// Policy is the decision policy the group's configuration maps to.
func (h *Harness) Policy() sitepair.Policy { return h.g.policy }

// Decide is this round's decision with its inputs, not carried out; ok is
// false while observations taken since the last action are missing.
func (h *Harness) Decide(ctx context.Context) (Round, bool) { return h.g.decide(ctx, h.serving) }

// CarryOut carries d out as the loop does and returns the action's error.
func (h *Harness) CarryOut(ctx context.Context, d sitepair.Decision) error {
	h.g.carryOut(ctx, d)
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	if d.Action == sitepair.None || d.Action == sitepair.Alert {
		return nil
	}
	return h.g.lastErr
}

// Switchover asks for a planned switchover to target, as the API does.
func (h *Harness) Switchover(ctx context.Context, target string, force bool) error {
	lead := func() (context.Context, time.Time, bool) { return ctx, h.serving, true }
	return h.g.handle(request{kind: kindSwitchover, target: target, force: force, by: "harness"}, lead)
}

// Follow runs the followers once against the newest view naming an active
// site, as the daemon's background handoff does after a new view (only the
// followers not in step) or on its reconcile interval (full: all of them).
// It reports whether every follower is in step.
func (h *Harness) Follow(ctx context.Context, full bool) bool {
	if h.g.follow == nil {
		return true
	}
	return h.g.follow.pass(ctx, full)
}

// SidecarReport takes a sidecar's signed report as the daemon's API does
// (the leader's) and answers the group's signed view, bound to the report.
func (h *Harness) SidecarReport(body []byte, sig string) (view.Answer, error) {
	return acceptReport(h.g.pub, h.group, body, sig)
}

// group is the harness's one group by name (nil for any other).
func (h *Harness) group(name string) *group {
	if name != h.g.cfg.Name {
		return nil
	}
	return h.g
}

// State is the group's decision state as this daemon holds it.
func (h *Harness) State() sitepair.Persisted {
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	return h.g.rec.Persisted
}

// Last is the last decision taken.
func (h *Harness) Last() sitepair.Decision {
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	return h.g.last
}
