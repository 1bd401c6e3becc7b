package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
)

// Result is the outcome of one history.
type Result struct {
	Seed     uint64
	Options  Options
	Setup    Setup
	Schedule Schedule
	// Failure is the first invariant violated ("" when none).
	Failure string
	// Trace is the end of the history's log (the last 40 lines).
	Trace []string
	Stats Stats
}

// humanNeeded are the alerts a history may legitimately end in after its
// quiet tail: the group waits for a human, by design, and says so.
var humanNeeded = []sitepair.Reason{
	sitepair.ReasonEscalationHalted, sitepair.ReasonEscalationLimit,
	sitepair.ReasonSplitBrainAlertOnly, sitepair.ReasonNoEligibleCandidate,
	sitepair.ReasonIncomparableCandidates, sitepair.ReasonCandidateLacksTransactions,
	sitepair.ReasonCatchUpTimeoutBlocked, sitepair.ReasonNoPrimaryTargetIneligible,
	sitepair.ReasonNoPrimaryTargetBehind, sitepair.ReasonNoPrimaryNoActiveSite,
	sitepair.ReasonUnexpectedPrimary, sitepair.ReasonTargetWritableWithoutProof, sitepair.ReasonPublishedTargetUnreachable,
}

// Options are what a history is besides its seed and schedule.
type Options struct {
	// Sidecars runs a failoverd sidecar beside every site and fences with
	// it: fencing sidecar, or semisync+sidecar where the seed picks
	// semisync.
	Sidecars bool
	// Verbose prints every step and the daemon's log.
	Verbose bool
}

// Run plays the history of seed with sched (nil: the seed's own schedule).
func Run(seed uint64, sched Schedule, o Options) Result {
	su := setupFor(seed, o.Sidecars)
	if sched == nil {
		sched = scheduleFor(seed, su)
	}
	w := newWorld(seed, su, sched, o.Verbose)
	verbose := o.Verbose
	if verbose {
		fmt.Printf("seed %d: %+v\nschedule %#v\n", seed, w.setup, sched)
	}
	total := w.setup.Steps + w.setup.Tail
	for w.step = 1; w.step <= total && w.failure == ""; w.step++ {
		w.clock = w.t0.Add(time.Duration(w.step) * pollInterval)
		if w.step == w.setup.Steps+1 {
			w.tracef("quiet tail: every fault healed")
			w.healAll()
		}
		w.runHeals()
		if w.step <= w.setup.Steps {
			for _, f := range sched {
				if f.Step == w.step {
					w.inject(f)
				}
			}
		}
		if w.sc != nil {
			w.sc.sync()
			w.sc.enforce()
		}
		w.clientWrites()
		w.replicate()
		w.d.probe(w.clock)
		if w.sc != nil {
			w.sc.rounds()
		}
		for i, s := range w.sites {
			w.probeOK[i] = w.daemonLink(s) && s.reachableHost()
		}
		// Decisions come half a poll interval after the probes.
		w.clock = w.clock.Add(pollInterval / 2)
		if w.switchTo != "" {
			w.d.switchover(w.switchTo)
			w.switchTo = ""
		}
		if !w.d.crashed {
			w.d.round()
		}
		if !w.d.crashed {
			w.d.follow()
		}
		w.d.deliverLate()
		if w.d.crashed {
			w.tracef("daemon crashed mid-action; restarting")
			w.stats.DaemonCrashes++
			w.d.restart()
		}
		if verbose {
			for _, s := range w.sites {
				w.tracef("  %s", s)
			}
		}
	}
	if w.failure == "" {
		w.checkEnd()
	}
	w.stats.EndReason = w.d.last.Reason
	return Result{Seed: seed, Options: Options{Sidecars: o.Sidecars}, Setup: w.setup, Schedule: sched, Failure: w.failure, Trace: w.trace, Stats: w.stats}
}

func (w *world) runHeals() {
	keep := w.heals[:0]
	var due []heal
	for _, h := range w.heals {
		if h.step <= w.step {
			due = append(due, h)
		} else {
			keep = append(keep, h)
		}
	}
	w.heals = keep
	for _, h := range due {
		h.fn()
	}
}

// persist checks a state the store saved against the one before it.
func (w *world) persist(next store.GroupState) {
	prev := w.stored
	// The epoch is monotonic: a smaller one would let an old view win.
	if next.Epoch < prev.Epoch {
		w.fail("persisted epoch decreased from %d to %d", prev.Epoch, next.Epoch)
	}
	if lastFailoverAt(next).Before(lastFailoverAt(prev)) {
		w.fail("last failover time went back from %s to %s", lastFailoverAt(prev), lastFailoverAt(next))
	}
	// The failover history is never lost (the sim has no operator
	// acknowledgement, the only thing that clears it).
	keep := prev.History
	if len(keep) > sitepair.MaxHistory-1 {
		keep = keep[len(keep)-(sitepair.MaxHistory-1):]
	}
	for _, t := range keep {
		if !slices.ContainsFunc(next.History, t.Equal) {
			w.fail("failover at %s dropped from the persisted history", t)
		}
	}
	for site := range prev.Diverged {
		if _, ok := next.Diverged[site]; !ok && !w.repaired(site) {
			w.fail("diverged mark of %s dropped while it still holds transactions the primary lacks", site)
		}
	}
	w.stored = next
}

func lastFailoverAt(st store.GroupState) time.Time {
	if st.LastFailover == nil {
		return time.Time{}
	}
	return st.LastFailover.At
}

// repaired: site holds nothing the persisted primary lacks.
func (w *world) repaired(site string) bool {
	if w.stored.ActiveSite == "" {
		return false
	}
	p, s := w.site(w.stored.ActiveSite), w.site(site)
	for t := range s.executed.m {
		if !p.executed.has(t) {
			return false
		}
	}
	return true
}

func (w *world) holds(s *server, t txn) bool { return s.executed.has(t) || s.retrieved.has(t) }

// checkDecision checks a decision before it is carried out.
func (w *world) checkDecision(obs sitepair.Observed, st sitepair.Persisted, d sitepair.Decision) {
	now := w.now()
	pol := w.policy
	if d.Action == sitepair.RevokeEpoch {
		// Anti-flap: no new failover or (unforced) switchover within the
		// cooldown of the last automatic failover; planned switchovers do
		// not arm it (a crash right after one must still fail over).
		if last, ok := st.CooldownFrom(); ok && now.Sub(last) < pol.FailoverCooldown {
			w.fail("revoke for %s at %s within the %v cooldown of the automatic failover at %s", d.Target, now, pol.FailoverCooldown, last)
		}
		if !d.Planned {
			recent := 0
			for _, t := range st.FailoverHistory {
				if now.Sub(t) < pol.EscalationWindow {
					recent++
				}
			}
			// Escalation: a halted group, or one at its limit, never fails over.
			if st.EscalationHalted || recent >= pol.EscalationCount {
				w.fail("automatic failover to %s with escalation halted=%v and %d recent failovers (limit %d)", d.Target, st.EscalationHalted, recent, pol.EscalationCount)
			}
		}
	}
	switch d.Action {
	case sitepair.Promote, sitepair.ReassertPrimary:
		for _, o := range obs.Sites {
			// Never promote while another site is observed writable.
			if o.Name != d.Target && o.State == statemachine.Writable {
				w.fail("%s %s while %s is observed writable", d.Action, d.Target, o.Name)
			}
		}
		if _, ok := st.Diverged[d.Target]; ok {
			w.fail("%s %s, which is recorded diverged", d.Action, d.Target)
		}
		if w.site(d.Target).dr {
			w.fail("%s dr-only %s", d.Action, d.Target)
		}
		tg := w.site(d.Target)
		for i, s := range w.sites {
			if s == tg || !w.probeOK[i] {
				continue
			}
			for t, a := range w.acks {
				// Never promote a site missing an acknowledged transaction
				// a reachable site holds.
				if w.holds(s, t) && !w.holds(tg, t) {
					w.fail("%s %s, which lacks %s:%d (acknowledged by %s at step %d) that reachable %s holds",
						d.Action, d.Target, uuidOf(t.origin), t.seq, a.site, a.step, s.name)
					return
				}
			}
		}
	case sitepair.Rejoin:
		// (A site with errant transactions never rejoins: checked where a
		// repoint takes effect, instance.ReplicateFrom, since a decision
		// may rest on a probe older than the site's last write.)
		for _, name := range d.Repoint {
			if _, ok := st.Diverged[name]; ok {
				w.fail("rejoin of %s, which is recorded diverged", name)
			}
		}
	}
	if d.Action == sitepair.Promote {
		for _, name := range d.Repoint {
			if _, ok := st.Diverged[name]; ok {
				w.fail("promotion repoints %s, which is recorded diverged", name)
			}
		}
	}
}

// promoted checks a completed promotion or re-assertion: no acknowledged
// write is lost, even with every site holding it unreachable (the
// ack-holder rule waits for one of them; the simulation has no operator to
// accept a loss).
func (w *world) promoted(d sitepair.Decision) {
	switch {
	case d.Action == sitepair.ReassertPrimary:
		w.stats.Reasserts++
	case d.Planned:
		w.stats.Switchovers++
	default:
		w.stats.Failovers++
	}
	p := w.site(d.Target)
	for t, a := range w.acks {
		if p.executed.has(t) {
			continue
		}
		var reachable []string
		for i, s := range w.sites {
			if w.holds(s, t) && w.probeOK[i] {
				reachable = append(reachable, s.name)
			}
		}
		if len(reachable) == 0 {
			reachable = []string{"none"}
		}
		w.fail("acknowledged write %s:%d (by %s at step %d) lost by the promotion of %s; reachable holders: %s",
			uuidOf(t.origin), t.seq, a.site, a.step, d.Target, strings.Join(reachable, ","))
		return
	}
}

// checkEnd is the convergence check after the quiet tail.
func (w *world) checkEnd() {
	var writable []string
	for _, s := range w.sites {
		if s.up && !s.readOnly {
			writable = append(writable, s.name)
		}
	}
	w.stats.Writable = len(writable)
	last := w.d.last
	if len(writable) == 1 && writable[0] == w.stored.ActiveSite && w.stored.InFlight == nil {
		// Routing eventually equals the active site (hand edits repaired).
		if w.svc.site != w.stored.ActiveSite {
			w.fail("after the quiet tail the Service selects %q (epoch %d), not the active site %s (epoch %d)",
				w.svc.site, w.svc.epoch, w.stored.ActiveSite, w.stored.Epoch)
		}
		p := w.site(w.stored.ActiveSite)
		for _, s := range w.sites {
			if s == p || !s.up {
				continue
			}
			for t := range s.executed.m {
				// A returning site with errant transactions is marked,
				// never silently rejoined.
				if !p.executed.has(t) {
					if _, ok := w.stored.Diverged[s.name]; !ok {
						w.fail("after the quiet tail %s holds %s:%d that primary %s lacks and is not marked diverged (last decision %s)",
							s.name, uuidOf(t.origin), t.seq, p.name, last)
					}
					break
				}
			}
		}
		return
	}
	if last.Action == sitepair.Alert && slices.Contains(humanNeeded, last.Reason) {
		return
	}
	w.fail("no convergence after the quiet tail: writable %v, active %q, in flight %v, last decision %s",
		writable, w.stored.ActiveSite, w.stored.InFlight != nil, last)
}

// Shrink drops faults one at a time while the history still fails.
func Shrink(seed uint64, sched Schedule, o Options) Schedule {
	cur := slices.Clone(sched)
	for changed := true; changed; {
		changed = false
		for i := 0; i < len(cur); i++ {
			try := slices.Delete(slices.Clone(cur), i, i+1)
			if Run(seed, try, o).Failure != "" {
				cur, changed = try, true
				i--
			}
		}
	}
	return cur
}
