package daemon

// Configuration reload (SIGHUP, POST /v1/reload, `failoverd reload`): the
// file the daemon was started with is read and checked exactly as at start
// (configs.Load, preflight.Check on the files it names, then the checks New
// and Run make before a group runs), and refused whole on any problem: the
// daemon goes on with what it runs. An
// accepted file's groups are brought in: a removed group's loop stops, an
// added one starts from its persisted state, a changed one is rebuilt from
// its persisted state with its new configuration. A group whose failover or
// switchover is in flight (or whose reclone this daemon runs) keeps its loop
// until that ends: rebuilding it between two steps would leave the sequence
// to a loop built for other sites. docs/design.md ("Reload") has the rules.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/preflight"
	"github.com/failoverd/failoverd/status"
)

// ErrReloadRefused is wrapped by the error of a reload that changed
// nothing: an invalid file, a setting that needs a restart, or a group that
// cannot start (the API answers 409 with every problem).
var ErrReloadRefused = errors.New("reload refused")

// Timing of reloads (variables for tests).
var (
	// reloadRetry is how often groups whose new configuration waits are
	// tried again.
	reloadRetry = time.Second
	// retireWait bounds how long a reload waits for a group's loop to finish
	// the round it is in; a longer action defers the group's rebuild.
	retireWait = 2 * time.Second
	// buildRetry is the pause before a group that failed to start after an
	// accepted reload is tried again.
	buildRetry = 30 * time.Second
)

// reloadError is a refused reload: one summary line and every problem.
type reloadError struct {
	msg      string
	problems []string
}

func (e *reloadError) Error() string     { return e.msg }
func (e *reloadError) Details() []string { return e.problems }
func (e *reloadError) Unwrap() []error   { return []error{ErrReloadRefused, api.ErrRefused} }

// loadedConfig is what status says of the configuration file.
type loadedConfig struct {
	digest    string
	at        time.Time
	refusedAt time.Time // the last refused reload, while none applied since
	refused   string
}

// pending is a group still running its previous configuration.
type pending struct {
	reason  string
	retryAt time.Time // zero: at the next retry
}

// Reload implements api.Control: it re-reads the configuration file and
// applies its groups, or refuses it whole (ErrReloadRefused) and changes
// nothing.
func (d *Daemon) Reload(ctx context.Context, by api.Actor) (api.ReloadResult, error) {
	return d.reload(ctx, by.String())
}

// reload is Reload for by (an operator, or "SIGHUP").
func (d *Daemon) reload(ctx context.Context, by string) (api.ReloadResult, error) {
	run, ok := d.enter()
	if !ok {
		return api.ReloadResult{}, fmt.Errorf("%w: the daemon is not running (starting or stopping)", api.ErrUnavailable)
	}
	defer d.wg.Done()
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	file := d.opts.ConfigFile
	next, err := d.check(ctx, run, file)
	if err != nil {
		d.opts.Events.ConfigReloaded("refused")
		var problems []string
		if re := (*reloadError)(nil); errors.As(err, &re) {
			problems = re.Details()
		}
		d.mu.Lock()
		d.conf.refusedAt, d.conf.refused = d.opts.Clock(), err.Error()
		d.mu.Unlock()
		d.log.Error("config.reload_refused", "file", file, "by", by, "err", err, "problems", problems)
		return api.ReloadResult{}, err
	}
	for _, w := range next.warnings {
		d.log.Warn("config.warning", "warning", w)
	}
	d.mu.Lock()
	d.want = next.cfg
	d.conf = loadedConfig{digest: next.cfg.Digest(), at: d.opts.Clock()}
	d.mu.Unlock()
	res := d.apply(run, next.built)
	res.File, res.Digest = file, next.cfg.Digest()
	res.Result = "reloaded"
	if len(res.Added)+len(res.Removed)+len(res.Changed)+len(res.Deferred) == 0 {
		res.Result = "unchanged"
	}
	d.opts.Events.ConfigReloaded("applied")
	d.log.Warn("config.reloaded", "file", file, "digest", res.Digest, "by", by, "added", res.Added,
		"removed", res.Removed, "changed", res.Changed, "deferred", deferredNames(res.Deferred))
	for _, p := range res.Deferred {
		d.log.Warn("config.group_deferred", "group", p.Group, "reason", p.Reason)
	}
	return res, nil
}

// enter admits a reload while Run runs, counted in its wait group so
// that Run's shutdown waits for it; it returns Run's context.
func (d *Daemon) enter() (context.Context, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.runCtx == nil || d.closed || d.runCtx.Err() != nil {
		return nil, false
	}
	d.wg.Add(1)
	return d.runCtx, true
}

// checked is a reload that passed every check: the new configuration and
// the groups it adds or changes, built and observing but not yet running.
type checked struct {
	cfg      *configs.Config
	built    map[string]*group
	warnings []string // configs' and preflight's
}

// check loads file and runs every check a start runs on it (configs.Load,
// preflight.Check, then each added or changed group built). On any problem
// it returns a *reloadError listing them all and leaves nothing behind.
func (d *Daemon) check(ctx, run context.Context, file string) (checked, error) {
	if file == "" {
		return checked{}, &reloadError{msg: "reload refused: this daemon was not started from a configuration file"}
	}
	// The same loading and validation as `failoverd validate` and the start.
	next, err := configs.Load(file)
	if err != nil {
		var ps *configs.Problems
		if !errors.As(err, &ps) {
			return checked{}, &reloadError{msg: fmt.Sprintf("reload refused: %v; the daemon keeps its current configuration", err)}
		}
		return checked{}, &reloadError{msg: fmt.Sprintf("reload refused: %s: %d configuration problem(s); the daemon keeps its current configuration",
			file, len(ps.List)), problems: problemLines(ps.List)}
	}
	// The simplest safe rule: a file that changes what only a start sets
	// up is refused whole, never applied in part (the operator sees
	// exactly one outcome).
	if ps := configs.RestartChanges(d.cfg, next); len(ps) > 0 {
		return checked{}, &reloadError{msg: fmt.Sprintf("reload refused: %s changes %d setting(s) that need a restart; the daemon keeps its current configuration",
			file, len(ps)), problems: problemLines(ps)}
	}
	// The files it names, read as a start reads them (`failoverd run` and
	// validate call the same check): an empty replication password would
	// otherwise be found at the next failover, when replicas are repointed.
	found, err := preflight.Check(next)
	if ps := (*configs.Problems)(nil); errors.As(err, &ps) {
		return checked{}, &reloadError{msg: fmt.Sprintf("reload refused: %s: %d problem(s) in the files it names; the daemon keeps its current configuration",
			file, len(ps.List)), problems: problemLines(ps.List)}
	}
	warnings := next.Warnings()
	for _, w := range found {
		warnings = append(warnings, w.String())
	}
	built := map[string]*group{}
	var problems []string
	running := map[string]configs.Group{}
	for _, g := range d.groupList() {
		running[g.cfg.Name] = g.cfg
	}
	for _, gc := range next.Groups {
		if old, ok := running[gc.Name]; ok && reflect.DeepEqual(old, gc) {
			continue
		}
		// The checks New and Run make before a group runs: its policy, its
		// followers, a readable persisted state, its observations.
		g, err := d.build(ctx, run, gc)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		built[gc.Name] = g
	}
	if len(problems) > 0 {
		for _, g := range built {
			d.closeGroup(g)
		}
		return checked{}, &reloadError{msg: fmt.Sprintf("reload refused: %s: %d group(s) cannot start; the daemon keeps its current configuration",
			file, len(problems)), problems: problems}
	}
	return checked{cfg: next, built: built, warnings: warnings}, nil
}

func problemLines(ps []configs.Problem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func deferredNames(ds []api.Deferred) []string {
	var out []string
	for _, p := range ds {
		out = append(out, p.Group)
	}
	return out
}

// apply brings the running groups to d.want: removes, adds and rebuilds
// them, using built (the groups a reload checked) where it has them and
// building the others. What cannot be applied now stays pending, with its
// reason, for applyPending. It runs under reloadMu.
func (d *Daemon) apply(run context.Context, built map[string]*group) api.ReloadResult {
	var res api.ReloadResult
	d.mu.RLock()
	want, before := d.want, d.pending
	d.mu.RUnlock()
	now := d.opts.Clock()
	waiting := map[string]pending{}
	wait := func(name, why string, retryAt time.Time) {
		waiting[name] = pending{reason: why, retryAt: retryAt}
		res.Deferred = append(res.Deferred, api.Deferred{Group: name, Reason: why})
	}
	discard := func(name string) {
		if g := built[name]; g != nil {
			d.closeGroup(g)
			delete(built, name)
		}
	}
	wanted := map[string]bool{}
	for _, gc := range want.Groups {
		wanted[gc.Name] = true
	}
	for _, g := range d.groupList() {
		if wanted[g.cfg.Name] {
			continue
		}
		if why := d.retire(run, g); why != "" {
			wait(g.cfg.Name, "removal waits: "+why, time.Time{})
			continue
		}
		d.setGroup(g.cfg.Name, nil)
		d.pub.remove(g.cfg.Name)
		d.closeGroup(g)
		res.Removed = append(res.Removed, g.cfg.Name)
	}
	for _, gc := range want.Groups {
		old := d.group(gc.Name)
		if old != nil && reflect.DeepEqual(old.cfg, gc) {
			discard(gc.Name)
			continue
		}
		if p, ok := before[gc.Name]; ok && built[gc.Name] == nil && now.Before(p.retryAt) {
			waiting[gc.Name] = p // a group that failed to start waits for its retry
			continue
		}
		if run.Err() != nil {
			discard(gc.Name)
			continue
		}
		if old != nil {
			// Checked before anything is built: a failover lasts many
			// rounds, and building a group starts its probes.
			if why := old.busy(d.lead.current); why != "" {
				discard(gc.Name)
				wait(gc.Name, why, time.Time{})
				continue
			}
		}
		g := built[gc.Name]
		delete(built, gc.Name)
		if g == nil {
			var err error
			if g, err = d.build(run, run, gc); err != nil {
				d.log.Error("config.group_failed", "group", gc.Name, "err", err)
				wait(gc.Name, fmt.Sprintf("cannot start: %v; tried again in %v", err, buildRetry), now.Add(buildRetry))
				continue
			}
		}
		if old != nil {
			if why := d.retire(run, old); why != "" {
				d.closeGroup(g)
				wait(gc.Name, why, time.Time{})
				continue
			}
		}
		// Restart amnesia guard: the loop starts from the persisted state,
		// read once the old loop wrote its last.
		if err := g.load(run); err != nil {
			d.closeGroup(g)
			if old != nil {
				d.startLoop(old) // the old configuration goes on
			}
			d.log.Error("config.group_failed", "group", gc.Name, "err", err)
			wait(gc.Name, fmt.Sprintf("cannot load its state: %v; tried again in %v", err, buildRetry), now.Add(buildRetry))
			continue
		}
		d.startSeries(g) // before its loop's first event
		d.setGroup(gc.Name, g)
		if old == nil {
			d.startGroup(g)
			res.Added = append(res.Added, gc.Name)
			continue
		}
		// The old routing handoff ends before the new one starts: two
		// would move the same objects at once. Closing the rest (its
		// connections, hooks still running) need not delay the new loop.
		old.stop()
		if old.followDone != nil {
			<-old.followDone
		}
		d.startGroup(g)
		d.closeGroup(old)
		res.Changed = append(res.Changed, gc.Name)
	}
	for name := range built {
		discard(name)
	}
	d.mu.Lock()
	d.pending = waiting
	d.order(want)
	d.mu.Unlock()
	return res
}

// applyPending tries the groups whose new configuration waits, every
// reloadRetry, until ctx ends; a group whose failover ended is rebuilt.
func (d *Daemon) applyPending(ctx context.Context) {
	t := time.NewTicker(reloadRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !d.pendingReady() {
			continue
		}
		run, ok := d.enter()
		if !ok {
			return
		}
		d.reloadMu.Lock()
		res := d.apply(run, nil)
		d.reloadMu.Unlock()
		d.wg.Done()
		if len(res.Added)+len(res.Removed)+len(res.Changed) > 0 {
			d.log.Warn("config.deferred_applied", "added", res.Added, "removed", res.Removed, "changed", res.Changed,
				"still_deferred", deferredNames(res.Deferred))
		}
	}
}

// pendingReady reports whether a pending group may be applied now: its
// loop is no longer busy, or its retry time came.
func (d *Daemon) pendingReady() bool {
	d.mu.RLock()
	ps := d.pending
	d.mu.RUnlock()
	now := d.opts.Clock()
	for name, p := range ps {
		g := d.group(name)
		if !p.retryAt.IsZero() {
			if !now.Before(p.retryAt) {
				return true
			}
			continue
		}
		if g == nil || g.busy(d.lead.current) == "" {
			return true
		}
	}
	return false
}

// reloads serves SIGHUP (Options.Reloads) and applies pending groups until
// ctx ends.
func (d *Daemon) reloads(ctx context.Context) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.applyPending(ctx)
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-d.opts.Reloads:
			if !ok {
				return
			}
			// The outcome is logged (config.reloaded or config.reload_refused).
			_, _ = d.reload(ctx, "SIGHUP")
		}
	}
}

// configStatus is the configuration part of the status.
func (d *Daemon) configStatus() status.Config {
	d.mu.RLock()
	defer d.mu.RUnlock()
	c := status.Config{File: d.opts.ConfigFile, Digest: d.conf.digest, LoadedAt: d.conf.at,
		LastRefusedAt: d.conf.refusedAt, LastRefused: d.conf.refused}
	for _, name := range slices.Sorted(maps.Keys(d.pending)) {
		c.Pending = append(c.Pending, status.PendingGroup{Group: name, Reason: d.pending[name].reason})
	}
	return c
}
