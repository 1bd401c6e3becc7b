package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/failoverd/failoverd/configs"
	failoverd "github.com/failoverd/failoverd/daemon"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/poller"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
)

// Simulated intervals, mirroring a group configured with a 1 s poll
// interval and probe timeout.
const (
	pollInterval      = time.Second
	probeTimeout      = time.Second
	recoveryThreshold = 2
	relayDrainTimeout = 15 * time.Second
	maxCandidateLag   = 30 * time.Second
	escalationWindow  = 10 * time.Minute
)

// policyFor mirrors daemon.policyOf for the simulated group configuration.
func policyFor(su Setup) sitepair.Policy {
	p := sitepair.Policy{
		Fencing:             sitepair.FencingConfirmed,
		FailoverCooldown:    time.Duration(su.CooldownSteps) * pollInterval,
		EscalationCount:     su.EscalationCount,
		EscalationWindow:    escalationWindow,
		MaxLag:              maxCandidateLag,
		Detection:           statemachine.Corroborated,
		CorroborationWindow: max(10*time.Second, 4*time.Duration(su.FailureThreshold)*pollInterval),
		RefusedProbes:       max(2, su.FailureThreshold),
		CatchUpTimeout:      relayDrainTimeout,
		PromotionSettle:     max(sitepair.DefaultPromotionSettle, 2*(time.Duration(recoveryThreshold+1)*pollInterval+probeTimeout)),
		SemiSyncAfterSync:   true,
	}
	if su.SemiSyncFencing {
		p.Fencing = sitepair.FencingSemiSync
	}
	return p
}

// errCrashed ends an action the simulated daemon crashed in.
var errCrashed = errors.New("sim: daemon crashed at a failpoint")

// errUnreachable is an action on a site the daemon cannot reach.
var errUnreachable = errors.New("sim: site unreachable")

// errNotContained mirrors daemon.ErrNotContained (repoint refused).
var errNotContained = errors.New("sim: replica has transactions the new primary lacks; not repointed")

// errDrainAborted mirrors daemon.ErrDrainAborted.
var errDrainAborted = errors.New("sim: relay log not drained in time; promotion aborted")

// daemon is the simulated failoverd: its memory (lost on a restart) and
// the store (kept).
type daemon struct {
	w       *world
	policy  sitepair.Policy
	tracker *poller.Tracker
	seq     map[string]uint64
	state   sitepair.Persisted // in memory, what it last saved or loaded
	fenced  map[string]uint64
	barrier time.Time
	serving time.Time
	last    sitepair.Decision
	// crashAt > 0 makes the crashAt-th failpoint of the next action crash.
	crashAt int
	crashed bool
}

func newDaemon(w *world) *daemon {
	d := &daemon{w: w, policy: w.policy}
	d.start()
	return d
}

// start is a (re)start: load the store, forget everything else.
func (d *daemon) start() {
	names := make([]string, len(d.w.sites))
	for i, s := range d.w.sites {
		names[i] = s.name
	}
	tr, err := poller.NewTracker(poller.TrackerConfig{Sites: names, FailureThreshold: d.w.setup.FailureThreshold,
		RecoveryThreshold: recoveryThreshold, Detection: statemachine.Corroborated, Clock: d.w.now})
	if err != nil {
		panic(err)
	}
	d.tracker = tr
	if d.seq == nil {
		d.seq = map[string]uint64{}
	}
	d.state = clonePersisted(d.w.stored)
	if d.state.InFlight != nil {
		// daemon.load: waits are measured from this process's clock.
		d.state.InFlight.RevokedAt = later(d.state.InFlight.RevokedAt, d.w.now())
	}
	d.fenced = map[string]uint64{}
	d.barrier = time.Time{}
	d.serving = d.w.now()
	d.last = sitepair.Decision{}
	d.crashed = false
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func clonePersisted(p sitepair.Persisted) sitepair.Persisted {
	return sitepair.Apply(p, sitepair.Decision{Action: sitepair.None}, time.Time{})
}

// failpoint is called after each persisted step of an action.
func (d *daemon) failpoint() error {
	if d.crashAt > 0 {
		d.crashAt--
		if d.crashAt == 0 {
			d.crashed = true
			return errCrashed
		}
	}
	return nil
}

// probe polls every site through the daemon's links and feeds the tracker.
func (d *daemon) probe(at time.Time) {
	for _, s := range d.w.sites {
		d.seq[s.name]++
		o := poller.Observation{Group: "sim", Site: s.name, Seq: d.seq[s.name], Started: at, At: at}
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
		if _, _, err := d.tracker.Observe(o); err != nil {
			panic(err)
		}
	}
}

// settled mirrors daemon.polled.Settled.
func (d *daemon) settled(t time.Time) bool {
	for _, s := range d.w.sites {
		v, ok := d.tracker.Site(s.name)
		if !ok || !v.HasLatest {
			return false
		}
		if v.Latest.Started.Before(t) && !(v.State == statemachine.Unreachable && !v.Latest.Reachable) {
			return false
		}
	}
	return true
}

// observed mirrors daemon.polled.Observed plus group.observed.
func (d *daemon) observed() sitepair.Observed {
	out := sitepair.Observed{ServingSince: d.serving}
	for i, s := range d.w.sites {
		v, _ := d.tracker.Site(s.name)
		o := siteObservation(i, s, v)
		o.FencedEpoch = d.fenced[s.name]
		out.Sites = append(out.Sites, o)
	}
	return out
}

// siteObservation feeds the daemon's own conversion (daemon.SiteObservation)
// with the model server's configuration.
func siteObservation(index int, s *server, v poller.SiteView) sitepair.SiteObservation {
	role := configs.RolePrimaryCandidate
	if s.dr {
		role = configs.RoleDROnly
	}
	return failoverd.SiteObservation(index, configs.Site{Name: s.name, Role: role}, v)
}

// round mirrors group.round: decide on settled observations, carry out.
func (d *daemon) round() {
	if !d.settled(d.barrier) {
		return
	}
	obs := d.observed()
	dec := sitepair.Decide(obs, d.state, d.policy, d.w.now())
	d.w.checkDecision(obs, d.state, dec)
	d.carryOut(dec)
}

// switchover mirrors group.handle for kindSwitchover (no cache).
func (d *daemon) switchover(target string) {
	obs := d.observed()
	dec := sitepair.DecideSwitchover(obs, d.state, d.policy, target, false, d.w.now())
	d.w.tracef("switchover to %s: %s", target, dec)
	if dec.Action != sitepair.RevokeEpoch {
		return
	}
	d.w.checkDecision(obs, d.state, dec)
	d.carryOut(dec)
}

// carryOut mirrors group.carryOut.
func (d *daemon) carryOut(dec sitepair.Decision) {
	changed := dec.Reason != d.last.Reason || dec.Action != d.last.Action || dec.Target != d.last.Target
	d.last = dec
	if changed || (dec.Action != sitepair.None && dec.Action != sitepair.Alert) {
		d.w.tracef("decision %s", dec)
	}
	if dec.Action == sitepair.None || dec.Action == sitepair.Alert {
		return
	}
	err := d.act(dec)
	d.barrier = d.w.now()
	if err != nil {
		d.w.tracef("action %s failed: %v", dec.Action, err)
	}
}

// act mirrors group.act.
func (d *daemon) act(dec sitepair.Decision) error {
	switch dec.Action {
	case sitepair.AdoptPrimary, sitepair.MarkDiverged, sitepair.ClearDiverged, sitepair.HaltFailover:
		return d.commit(dec)
	case sitepair.RevokeEpoch:
		return d.revoke(dec)
	case sitepair.FenceSites:
		return d.fenceSites(dec.Fence)
	case sitepair.Promote:
		return d.promote(dec)
	case sitepair.ReassertPrimary:
		if err := d.w.makeWritable(dec.Target); err != nil {
			return err
		}
		if err := d.commit(dec); err != nil {
			return err
		}
		d.w.promoted(dec)
		return nil
	case sitepair.Rejoin:
		return d.repoint(dec.Target, dec.Repoint)
	case sitepair.StopReplicaIO:
		return d.stopIO(dec.Detach)
	}
	return fmt.Errorf("unknown action %q", dec.Action)
}

func (d *daemon) commit(dec sitepair.Decision) error {
	return d.save(sitepair.Apply(d.state, dec, d.w.now()))
}

func (d *daemon) save(next sitepair.Persisted) error {
	d.w.persist(next)
	d.state = next
	return d.failpoint()
}

// revoke mirrors group.revoke.
func (d *daemon) revoke(dec sitepair.Decision) error {
	if err := d.commit(dec); err != nil {
		return err
	}
	if d.state.InFlight != nil {
		d.state.InFlight.RevokedAt = later(d.state.InFlight.RevokedAt, d.w.now())
	}
	if fence := d.reachable(dec.Fence); len(fence) > 0 {
		_ = d.fenceSites(fence) // best effort: phase 2 waits for a proof
	}
	if len(dec.Detach) > 0 {
		_ = d.stopIO(dec.Detach) // the next decision sees what still runs
	}
	return nil
}

// reachable mirrors group.reachable.
func (d *daemon) reachable(sites []string) []string {
	var out []string
	for _, o := range d.observed().Sites {
		if slices.Contains(sites, o.Name) && o.State != statemachine.Unreachable {
			out = append(out, o.Name)
		}
	}
	return out
}

func (d *daemon) stopIO(sites []string) error {
	var errs []error
	for _, s := range sites {
		if err := d.w.stopIO(s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fenceSites mirrors group.fenceSites.
func (d *daemon) fenceSites(sites []string) error {
	var errs []error
	for _, s := range sites {
		if err := d.w.fence(s); err != nil {
			errs = append(errs, err)
			continue
		}
		d.fenced[s] = d.state.Epoch
		if d.state.InFlight != nil && d.state.InFlight.From == s {
			if err := d.failpoint(); err != nil {
				return err
			}
		}
	}
	return errors.Join(errs...)
}

// promote mirrors group.promote (phase 2).
func (d *daemon) promote(dec sitepair.Decision) error {
	if st := d.state; st.InFlight != nil && st.InFlight.To != dec.Target {
		f := *st.InFlight
		f.To = dec.Target
		st.InFlight = &f
		if err := d.save(st); err != nil {
			return err
		}
	}
	if fence := d.reachable(dec.Fence); len(fence) > 0 {
		_ = d.fenceSites(fence)
		if d.crashed {
			return errCrashed
		}
	}
	if err := d.w.drain(dec.Target); err != nil {
		return fmt.Errorf("promote %s: %w", dec.Target, err)
	}
	if err := d.failpoint(); err != nil { // relay-drained
		return err
	}
	promo, err := d.w.detach(dec.Target)
	if err != nil {
		return fmt.Errorf("promote %s: %w", dec.Target, err)
	}
	if err := d.failpoint(); err != nil { // promotion-recorded
		return err
	}
	if !promo.Covers(dec.PromotionGTID) {
		return fmt.Errorf("promote %s: %w: executed %s lacks %s", dec.Target, errDrainAborted, promo.Compact(), promo.Uncovered(dec.PromotionGTID).Compact())
	}
	if st := d.state; st.InFlight != nil && (st.InFlight.PublishedTo != dec.Target || st.InFlight.PublishedEpoch != dec.Epoch) {
		f := *st.InFlight
		f.PublishedEpoch, f.PublishedTo = dec.Epoch, dec.Target
		st.InFlight = &f
		if err := d.save(st); err != nil { // published
			return err
		}
	}
	if err := d.w.makeWritable(dec.Target); err != nil {
		return fmt.Errorf("promote %s: %w", dec.Target, err)
	}
	if err := d.failpoint(); err != nil { // writable
		return err
	}
	dec.PromotionGTID = promo
	if err := d.commit(dec); err != nil {
		return err
	}
	d.w.promoted(dec)
	if err := d.repoint(dec.Target, dec.Repoint); err != nil {
		d.w.tracef("repoint failed: %v", err) // Rejoin retries
	}
	return nil
}

// repoint mirrors executor.repoint, with its containment guard.
func (d *daemon) repoint(primary string, sites []string) error {
	var errs []error
	for _, s := range sites {
		if err := d.w.repoint(primary, s); err != nil {
			errs = append(errs, fmt.Errorf("repoint %s to %s: %w", s, primary, err))
		}
	}
	return errors.Join(errs...)
}

// status is what mysqlctl would read from s.
func (w *world) status(s *server) mysqlctl.Status {
	st := mysqlctl.Status{
		Flavor:     mysqlctl.Flavor{Engine: gtid.MySQL},
		ServerID:   uint32(s.index + 1),
		ServerUUID: uuidOf(s.index),
		ReadOnly:   s.readOnly, SuperReadOnly: s.readOnly,
		Executed: s.executed.gtidSet(),
		SemiSync: mysqlctl.SemiSyncStatus{Available: true, PrimaryEnabled: true, ReplicaEnabled: true, PrimaryActive: true,
			ReplicaActive: true, Timeout: sitepair.MinSemiSyncTimeout, WaitNoReplica: true, WaitPoint: "AFTER_SYNC"},
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
