package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/failoverd/failoverd/configs"
	failoverd "github.com/failoverd/failoverd/daemon"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/poller"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
)

// errCrashed is what a crashed daemon's actions and writes get: nothing it
// does after its failpoint reaches a server or the store.
var errCrashed = errors.New("sim: daemon crashed at a failpoint")

// errUnreachable is an action on a site the daemon cannot reach.
var errUnreachable = errors.New("sim: site unreachable")

// daemon is the simulated failoverd: the daemon package's own loop
// (failoverd.Harness: decide, act, persist) fed by simulated probes, acting
// on the model servers, saving to a memory store that outlives its
// restarts.
type daemon struct {
	w     *world
	full  *configs.Config // the whole configuration (the sidecars read it too)
	cfg   configs.Group
	key   []byte // view signing key (sidecars only)
	store *store.Memory
	h     *failoverd.Harness
	// tracker is the daemon's debouncing, fed by probe.
	tracker *poller.Tracker
	seq     map[string]uint64
	// late are probes in flight on a slow link, answered after the round.
	late []poller.Observation
	last sitepair.Decision
	// current is the decision being carried out (promoted checks it).
	current sitepair.Decision
	// paused: the sidecars already ran during this action's wait.
	paused bool
	// crashAt > 0 makes the crashAt-th failpoint of the next action crash.
	crashAt int
	crashed bool
}

func newDaemon(w *world) (*daemon, error) {
	full, err := groupConfig(w.setup)
	if err != nil {
		return nil, err
	}
	d := &daemon{w: w, full: full, cfg: full.Groups[0], store: store.NewMemory(w.now), seq: map[string]uint64{}}
	if w.setup.Sidecars {
		key, err := configs.ReadSecret(full.Daemon.ViewSigningKeyFile)
		if err != nil {
			return nil, fmt.Errorf("sim: view signing key: %w", err)
		}
		d.key = []byte(key)
	}
	if err := d.start(); err != nil {
		return nil, err
	}
	return d, nil
}

// start is a (re)start: a new process with its own debouncing, loading
// what the store holds.
func (d *daemon) start() error {
	tr, err := poller.NewGroupTracker(d.cfg, d.w.now)
	if err != nil {
		return fmt.Errorf("sim: tracker: %w", err)
	}
	d.tracker, d.late = tr, nil
	d.crashed, d.last = false, sitepair.Decision{}
	h, err := failoverd.NewHarness(d.cfg, failoverd.HarnessOptions{
		Observations: failoverd.TrackerObservations(d.cfg, tr),
		Dial:         d.dial,
		Store:        simStore{d},
		Clock:        d.w.now,
		Failpoint:    d.failpoint,
		Logger:       d.w.logger(),
		Identity:     "sim",
		Followers:    []failoverd.Follower{follower{d}},
		ViewKey:      d.key,
		Pause:        d.pause,
	})
	if err != nil {
		return fmt.Errorf("sim: harness: %w", err)
	}
	d.h = h
	d.w.policy = h.Policy()
	return h.Start(context.Background())
}

// restart is start after a crash or a scheduled restart.
func (d *daemon) restart() {
	if err := d.start(); err != nil {
		d.w.fail("daemon restart: %v", err)
	}
}

// failpoint is called after each persisted step of an action: the
// crashAt-th one crashes the daemon.
func (d *daemon) failpoint(step string) {
	if d.crashAt > 0 && !d.crashed {
		d.crashAt--
		if d.crashAt == 0 {
			d.crashed = true
			d.w.tracef("daemon crashes after step %s", step)
		}
	}
}

// probe polls every site through the daemon's links and feeds the tracker.
func (d *daemon) probe(at time.Time) {
	for _, s := range d.w.sites {
		d.seq[s.name]++
		o := poller.Observation{Group: d.cfg.Name, Site: s.name, Seq: d.seq[s.name], Started: at, At: at}
		switch {
		case !d.w.daemonLink(s) || s.hung || (!s.up && s.hostDown):
			o.Class = poller.ClassTimeout
			o.Err = poller.ErrProbeTimeout
		case !s.up:
			o.Class = poller.ClassRefused
			o.Err = errors.New("connection refused")
		default:
			o.Reachable = true
			o.Status = d.w.status(s)
			o.Follows = s.source
			o.IOConnected, o.SourceSilent = d.w.ioView(s)
			o.SilenceKnown = s.source != ""
		}
		if d.w.daemonSlow[s.index] > 0 {
			// Answered after this step's decision (slow-daemon).
			o.At = at.Add(slowDaemonLatency)
			d.late = append(d.late, o)
			continue
		}
		d.observe(o)
	}
}

func (d *daemon) observe(o poller.Observation) {
	if _, _, err := d.tracker.Observe(o); err != nil {
		panic(err)
	}
}

// deliverLate hands the tracker the probes a slow link answered after the
// decision.
func (d *daemon) deliverLate() {
	for _, o := range d.late {
		d.observe(o)
	}
	d.late = nil
}

// round is one round of the daemon's loop, its decision checked against
// the invariants before it is carried out.
func (d *daemon) round() {
	ctx := context.Background()
	r, ok := d.h.Decide(ctx)
	if !ok {
		return
	}
	dec := r.Decision
	changed := dec.Reason != d.last.Reason || dec.Action != d.last.Action || dec.Target != d.last.Target
	d.last = dec
	if changed || (dec.Action != sitepair.None && dec.Action != sitepair.Alert) {
		d.w.tracef("decision %s", dec)
	}
	if changed && dec.Reason == sitepair.ReasonAckHolderUnreachable {
		d.w.stats.HolderWaits++
	}
	d.w.checkDecision(r.Observed, r.State, dec)
	d.current, d.paused = dec, false
	if err := d.h.CarryOut(ctx, dec); err != nil {
		d.w.tracef("action %s failed: %v", dec.Action, err)
	}
}

// follow runs the routing handoff once: the followers not in step, and
// every reconcileSteps all of them (routingReconcileInterval).
func (d *daemon) follow() {
	d.h.Follow(context.Background(), d.w.step%reconcileSteps == 0)
}

// reconcileSteps is the default routingReconcileInterval in steps.
const reconcileSteps = 30

// pause is the daemon waiting within an action (for a sidecar to take the
// view of a promotion): the sidecars run one round meanwhile, once per
// action (no simulated time passes during an action).
func (d *daemon) pause() {
	if d.paused || d.w.sc == nil {
		return
	}
	d.paused = true
	d.w.sc.rounds()
}

// switchover is an operator's request through the daemon's own handling.
func (d *daemon) switchover(target string) {
	d.current, d.paused = sitepair.Decision{Action: sitepair.RevokeEpoch, Planned: true, Target: target}, false
	err := d.h.Switchover(context.Background(), target, false)
	d.w.tracef("switchover to %s: %v", target, err)
}

// simStore is the daemon's store: the memory store, written only by a live
// daemon, each write checked against the invariants on persisted state.
type simStore struct{ d *daemon }

func (s simStore) Describe() string { return "sim memory" }

func (s simStore) Load(ctx context.Context, group string) (store.GroupState, error) {
	if s.d.crashed {
		return store.GroupState{}, errCrashed
	}
	return s.d.store.Load(ctx, group)
}

func (s simStore) Save(ctx context.Context, st store.GroupState) error {
	if s.d.crashed {
		return errCrashed
	}
	if err := s.d.store.Save(ctx, st); err != nil {
		return err
	}
	saved, err := s.d.store.Load(ctx, st.Group)
	if err != nil {
		return err
	}
	s.d.w.persist(saved)
	return nil
}

// dial opens the model server of a site.
func (d *daemon) dial(_ context.Context, site configs.Site) (failoverd.Instance, error) {
	if d.crashed {
		return nil, errCrashed
	}
	return &instance{d: d, s: d.w.site(site.Name)}, nil
}

// instance is the daemon's admin connection to one model server.
type instance struct {
	d *daemon
	s *server
}

var _ failoverd.Instance = (*instance)(nil)

// reach is every operation's first check: a crashed daemon does nothing; a
// site behind a cut link or a hung or dead server does not answer.
func (in *instance) reach(op string) error {
	if in.d.crashed {
		return errCrashed
	}
	if !in.d.w.actionable(in.s) {
		return fmt.Errorf("%s on %s: %w", op, in.s.name, errUnreachable)
	}
	return nil
}

func (in *instance) Status(context.Context) (mysqlctl.Status, error) {
	if err := in.reach("status"); err != nil {
		return mysqlctl.Status{}, err
	}
	return in.d.w.status(in.s), nil
}

func (in *instance) Fence(context.Context) error {
	if err := in.reach("fence"); err != nil {
		return err
	}
	in.s.readOnly = true
	return nil
}

func (in *instance) KillClientConnections(context.Context) (int, error) {
	if err := in.reach("kill connections"); err != nil {
		return 0, err
	}
	return len(in.s.dropSessions()), nil
}

func (in *instance) StopReplicaIO(context.Context) error {
	if err := in.reach("stop IO thread"); err != nil {
		return err
	}
	in.s.ioRunning = false
	return nil
}

func (in *instance) StartReplicaIO(context.Context) error {
	if err := in.reach("start IO thread"); err != nil {
		return err
	}
	in.s.ioRunning = in.s.source != ""
	return nil
}

// WaitRelayDrained applies the relay log at once, unless the applier is
// stalled (the drain times out).
func (in *instance) WaitRelayDrained(_ context.Context, target gtid.Set, timeout time.Duration) error {
	if err := in.reach("wait for the relay log"); err != nil {
		return err
	}
	if in.s.sqlStall > 0 && len(in.s.relay) > 0 {
		return fmt.Errorf("%w: %d transactions not applied within %v", mysqlctl.ErrDrainTimeout, len(in.s.relay), timeout)
	}
	in.d.w.apply(in.s, len(in.s.relay))
	if !in.s.executed.gtidSet().Covers(target) {
		return fmt.Errorf("sim: drained %s but executed %s lacks %s", in.s.name, in.s.executed.gtidSet().Compact(), target.Compact())
	}
	return nil
}

func (in *instance) StopReplica(context.Context) error {
	if err := in.reach("stop replica"); err != nil {
		return err
	}
	in.s.ioRunning = false
	return nil
}

func (in *instance) ResetReplicaAll(context.Context) error {
	if err := in.reach("reset replica all"); err != nil {
		return err
	}
	in.s.source, in.s.ioRunning = "", false
	in.s.retrieved.clear()
	in.s.relay = nil
	return nil
}

// Promote makes the server writable; a transition from read-only is a
// promotion, checked for lost acknowledged writes.
func (in *instance) Promote(context.Context) error {
	if err := in.reach("promote"); err != nil {
		return err
	}
	in.s.readOnly = false
	if c := in.d.current; (c.Action == sitepair.Promote || c.Action == sitepair.ReassertPrimary) && c.Target == in.s.name {
		in.d.w.promoted(c)
	}
	return nil
}

func (in *instance) ReplicateFrom(_ context.Context, src mysqlctl.Source) error {
	if err := in.reach("replicate"); err != nil {
		return err
	}
	var p *server
	for _, s := range in.d.w.sites {
		if siteAddress(s.index) == fmt.Sprintf("%s:%d", src.Host, src.Port) {
			p = s
		}
	}
	if p == nil {
		return fmt.Errorf("sim: no site at %s:%d", src.Host, src.Port)
	}
	for t := range in.s.executed.m {
		// A site with errant transactions never replicates from a source
		// lacking them (the executor checks containment first).
		if !p.executed.has(t) {
			in.d.w.fail("%s repointed to %s with errant transaction %s:%d", in.s.name, p.name, uuidOf(t.origin), t.seq)
			break
		}
	}
	if in.s.source != p.name {
		in.s.retrieved.clear()
		in.s.relay = nil
	}
	in.s.source, in.s.ioRunning = p.name, true
	return nil
}

func (in *instance) SetSemiSync(_ context.Context, primary, _ bool) error {
	if err := in.reach("set semi-sync"); err != nil {
		return err
	}
	in.s.semiSource = primary
	return nil
}

func (in *instance) Close() error { return nil }

// status is what mysqlctl would read from s.
func (w *world) status(s *server) mysqlctl.Status {
	st := mysqlctl.Status{
		Flavor:     mysqlctl.Flavor{Engine: gtid.MySQL},
		ServerID:   uint32(s.index + 1),
		ServerUUID: uuidOf(s.index),
		ReadOnly:   s.readOnly, SuperReadOnly: s.readOnly,
		Executed: s.executed.gtidSet(),
		SemiSync: mysqlctl.SemiSyncStatus{Available: true, PrimaryEnabled: s.semiSource, ReplicaEnabled: true, PrimaryActive: s.semiSource,
			ReplicaActive: true, Timeout: sitepair.MinSemiSyncTimeout, WaitNoReplica: true, WaitPoint: "AFTER_SYNC", WaitForReplicas: 1},
	}
	if s.source == "" {
		return st
	}
	connected, _ := w.ioView(s)
	rep := &mysqlctl.ReplicaStatus{IOThread: mysqlctl.ThreadNo, SQLThread: mysqlctl.ThreadYes, Retrieved: s.retrieved.gtidSet(), AutoPosition: true}
	if s.ioRunning {
		rep.IOThread = mysqlctl.ThreadConnecting
		if connected {
			rep.IOThread = mysqlctl.ThreadYes
		}
	}
	if len(s.relay) == 0 {
		rep.SQLState = "Replica has read all relay log; waiting for more updates"
	}
	if connected && s.ioRunning {
		rep.Lag, rep.LagKnown = time.Duration(len(s.relay))*2*time.Second, true
	}
	st.Replica = rep
	return st
}
