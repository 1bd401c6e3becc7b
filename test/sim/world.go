package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/view"
)

// ack is one write acknowledged to its client.
type ack struct {
	site  string
	epoch uint64
	step  int
}

// world is one simulated history: the sites, the links, the store, the
// daemon and the invariant bookkeeping.
type world struct {
	seed     uint64
	setup    Setup
	schedule Schedule
	policy   sitepair.Policy
	rng      *rand.Rand
	t0       time.Time
	clock    time.Time
	step     int

	sites      []*server
	daemonCut  []int          // per site: active daemon↔site cuts
	linkCut    map[[2]int]int // per unordered pair: active replication-link cuts
	linkSlow   map[[2]int]int // per unordered pair: active slow-link faults
	daemonSlow []int          // per site: active slow-daemon faults
	// loggedAt is the step each transaction was first committed at.
	loggedAt   map[txn]int
	downCount  []int
	hangCount  []int
	stallCount []int
	heals      []heal

	// stored is what the store last saved.
	stored  store.GroupState
	d       *daemon
	acks    map[txn]ack
	ackedBy map[uint64]string // epoch → the site that acknowledged writes in it
	// probeOK: the daemon's probe of the site succeeded this step.
	probeOK []bool
	failure string
	// svc is the model Service the daemon's routing follower moves.
	svc service
	// sc are the sites' sidecars (nil without Setup.Sidecars).
	sc *sidecars
	// switchTo is an operator's switchover request of this step.
	switchTo string
	verbose  bool
	trace    []string
	stats    Stats
}

// heal undoes a fault at a step.
type heal struct {
	step int
	fn   func()
}

// Stats counts what happened in a history.
type Stats struct {
	Failovers, Switchovers, Reasserts, Acks, Diverged, DaemonCrashes int
	// HolderWaits counts the failovers that began waiting for unreachable
	// sites that may hold the only copy of an acknowledged write
	// (ack-holder-unreachable): without the wait they may have lost it.
	HolderWaits int
	// EndReason is the last decision's reason at the end of the tail.
	EndReason sitepair.Reason
	// Writable is how many sites are writable at the end.
	Writable int
}

func newWorld(seed uint64, su Setup, sched Schedule, verbose bool) *world {
	w := &world{
		seed: seed, setup: su, schedule: sched,
		rng:     rand.New(rand.NewPCG(seed, 0xe4f)),
		t0:      time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		linkCut: map[[2]int]int{}, linkSlow: map[[2]int]int{}, loggedAt: map[txn]int{},
		acks: map[txn]ack{}, ackedBy: map[uint64]string{},
		verbose: verbose,
	}
	w.clock = w.t0
	n := su.Sites
	w.daemonCut, w.downCount, w.hangCount, w.stallCount = make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	w.daemonSlow = make([]int, n)
	w.probeOK = make([]bool, n)
	for i := range n {
		s := &server{name: fmt.Sprintf("s%d", i), index: i, dr: i == su.DROnly, up: true, readOnly: i != 0, semiSource: true,
			executed: newTxnSet(), retrieved: newTxnSet()}
		if i != 0 {
			s.source, s.ioRunning = "s0", true
		}
		w.sites = append(w.sites, s)
	}
	d, err := newDaemon(w)
	if err != nil {
		panic(err) // the simulated configuration itself is wrong: every seed would fail
	}
	w.d = d
	if su.Sidecars {
		w.sc = newSidecars(w)
		w.sc.sync()
	}
	return w
}

// logger is the simulated daemon's log: printed in a verbose replay,
// discarded otherwise.
func (w *world) logger() *slog.Logger {
	if !w.verbose {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{} // the trace's step numbers are the clock
		}
		return a
	}}))
}

func (w *world) now() time.Time { return w.clock }

func (w *world) site(name string) *server {
	for _, s := range w.sites {
		if s.name == name {
			return s
		}
	}
	panic("sim: unknown site " + name)
}

func (w *world) tracef(format string, args ...any) {
	line := fmt.Sprintf("step %3d: ", w.step) + fmt.Sprintf(format, args...)
	if w.verbose {
		fmt.Println(line)
	}
	w.trace = append(w.trace, line)
	if len(w.trace) > 40 {
		w.trace = w.trace[1:]
	}
}

// fail records the first invariant violation.
func (w *world) fail(format string, args ...any) {
	if w.failure == "" {
		w.failure = fmt.Sprintf("step %d: ", w.step) + fmt.Sprintf(format, args...)
		w.tracef("VIOLATION %s", w.failure)
	}
}

func pair(a, b int) [2]int {
	if a > b {
		a, b = b, a
	}
	return [2]int{a, b}
}

func (w *world) daemonLink(s *server) bool { return w.daemonCut[s.index] == 0 }

func (w *world) link(a, b *server) bool { return w.linkCut[pair(a.index, b.index)] == 0 }

// ioView is a replica's IO thread as its own status shows it: connected,
// and whether its source has gone silent.
func (w *world) ioView(s *server) (connected, silent bool) {
	if s.source == "" || !s.ioRunning {
		return false, false
	}
	src := w.site(s.source)
	switch {
	case !src.up || !w.link(s, src):
		return false, true
	case src.hung:
		// The TCP connection stands; nothing arrives, not even heartbeats.
		return true, true
	}
	return true, false
}

// actionable: the daemon can act on s now.
func (w *world) actionable(s *server) bool { return w.daemonLink(s) && s.reachableHost() }

// apply runs up to n relay transactions of s.
func (w *world) apply(s *server, n int) {
	for n > 0 && len(s.relay) > 0 {
		s.commit(s.relay[0])
		s.relay = s.relay[1:]
		n--
	}
}

// --- the environment ---

// clientWrites: clients write to every site that accepts writes (the worst
// routing: some clients still reach an old primary).
func (w *world) clientWrites() {
	for _, s := range w.sites {
		if s.reachableHost() && !s.readOnly && w.rng.IntN(10) < 7 {
			w.write(s)
		}
	}
}

func (w *world) write(s *server) txn {
	s.nextSeq++
	t := txn{origin: s.index, seq: s.nextSeq}
	w.loggedAt[t] = w.step
	s.commit(t)
	s.pending = append(s.pending, t)
	if !w.setup.SemiSyncFencing {
		// Without semi-sync fencing the client may be answered at commit
		// (asynchronous replication): the commit is the acknowledgement
		// as far as "one writable site per epoch" goes (not for RPO: that
		// is not zero there, and only replica-received writes count).
		w.checkOneWriter(s, w.ackEpoch(s))
	}
	return t
}

// ackEpoch is the epoch a write acknowledged by src now belongs to.
func (w *world) ackEpoch(src *server) uint64 {
	epoch := w.stored.Epoch
	if f := w.stored.InFlight; f != nil && f.PublishedTo == src.name && f.PublishedEpoch > epoch {
		// The promotion published the epoch naming src before making
		// it writable: src writes in that epoch, not the revoked one.
		epoch = f.PublishedEpoch
	}
	return epoch
}

// checkOneWriter records that src acknowledged a write in epoch.
// Invariant: one site acknowledges writes per epoch.
func (w *world) checkOneWriter(src *server, epoch uint64) {
	if prev, ok := w.ackedBy[epoch]; ok && prev != src.name {
		w.fail("two sites acknowledged writes in epoch %d: %s and %s", epoch, prev, src.name)
	}
	w.ackedBy[epoch] = src.name
}

// replicate moves transactions along every connected replication link,
// acknowledges what a replica received, and runs the appliers.
func (w *world) replicate() {
	for _, r := range w.sites {
		if !r.reachableHost() {
			continue
		}
		if connected, silent := w.ioView(r); connected && !silent {
			src := w.site(r.source)
			lag := 0
			if w.linkSlow[pair(r.index, src.index)] > 0 {
				lag = slowLinkSteps
			}
			for _, t := range src.log {
				if w.loggedAt[t] > w.step-lag {
					break // a slow link delivers the binlog in order, late
				}
				if !r.executed.has(t) && !r.retrieved.has(t) {
					r.retrieved.add(t)
					r.relay = append(r.relay, t)
				}
			}
			w.acknowledge(src, r)
		}
		if r.sqlStall > 0 {
			continue
		}
		n := len(r.relay)
		if w.rng.IntN(4) == 0 {
			n = min(n, 1+w.rng.IntN(3))
		}
		w.apply(r, n)
	}
}

// acknowledge: src's pending commits that replica r received are
// acknowledged (semi-sync, one acknowledgement, AFTER_SYNC).
func (w *world) acknowledge(src, r *server) {
	keep := src.pending[:0]
	for _, t := range src.pending {
		if !r.retrieved.has(t) && !r.executed.has(t) {
			keep = append(keep, t)
			continue
		}
		epoch := w.ackEpoch(src)
		w.acks[t] = ack{site: src.name, epoch: epoch, step: w.step}
		w.stats.Acks++
		w.checkOneWriter(src, epoch)
	}
	src.pending = keep
}

// --- faults ---

// target resolves a fault's site: -1 is whoever is writable now (else the
// recorded primary, else s0).
func (w *world) target(f Fault) *server {
	if f.Site >= 0 {
		return w.sites[f.Site%len(w.sites)]
	}
	for _, s := range w.sites {
		if s.up && !s.readOnly {
			return s
		}
	}
	if w.stored.ActiveSite != "" {
		return w.site(w.stored.ActiveSite)
	}
	return w.sites[0]
}

func (w *world) at(step int, fn func()) { w.heals = append(w.heals, heal{step: step, fn: fn}) }

func (w *world) kill(s *server, host bool) {
	w.downCount[s.index]++
	wasUp := s.up
	s.up, s.hostDown = false, host
	s.dropSessions()
	if w.sc != nil && wasUp {
		w.sc.exited(s, host)
	}
}

func (w *world) restart(s *server) {
	w.downCount[s.index]--
	if w.downCount[s.index] > 0 {
		return
	}
	// A restarted server is read-only (its configuration). It starts its
	// replication threads unless semi-sync fencing is used, which requires
	// skip_replica_start=ON (docs/design.md): a detached replica must not
	// reconnect to a lost primary by itself.
	s.up, s.hostDown, s.readOnly, s.semiSource = true, false, true, true
	s.ioRunning = s.source != "" && !w.setup.SemiSyncFencing
	s.incarnation++
	if w.sc != nil {
		w.sc.running(s)
	}
}

func (w *world) inject(f Fault) {
	s := w.target(f)
	w.tracef("fault %s on %s", f, s.name)
	switch f.Kind {
	case Kill, KillHost:
		w.kill(s, f.Kind == KillHost)
		w.at(f.Step+f.Dur, func() { w.restart(s) })
	case KillUnreplicated:
		if s.reachableHost() && !s.readOnly {
			for range 1 + w.rng.IntN(2) {
				w.write(s)
			}
		}
		w.kill(s, false)
		w.at(f.Step+f.Dur, func() { w.restart(s) })
	case Restart:
		if s.up {
			w.kill(s, false)
			w.restart(s)
		}
	case Hang:
		w.hangCount[s.index]++
		s.hung = true
		w.at(f.Step+f.Dur, func() {
			// (A sidecar's SIGKILL may have ended the hang already.)
			w.hangCount[s.index] = max(0, w.hangCount[s.index]-1)
			s.hung = w.hangCount[s.index] > 0
			if !s.hung && s.up && !s.readOnly {
				// Sessions stopped inside COMMIT finish it on SIGCONT,
				// before any fence can reach the server.
				w.tracef("%s resumes writable and commits the transactions it held", s.name)
				for range 1 + w.rng.IntN(2) {
					w.write(s)
				}
			}
		})
	case CutDaemon, Blip:
		dur := f.Dur
		if f.Kind == Blip {
			dur = 1
		}
		w.daemonCut[s.index]++
		w.at(f.Step+dur, func() { w.daemonCut[s.index]-- })
	case CutLink:
		p := pair(s.index, f.Peer%len(w.sites))
		w.linkCut[p]++
		w.at(f.Step+f.Dur, func() { w.linkCut[p]-- })
	case Isolate:
		w.daemonCut[s.index]++
		var ps [][2]int
		for _, o := range w.sites {
			if o != s {
				p := pair(s.index, o.index)
				w.linkCut[p]++
				ps = append(ps, p)
			}
		}
		w.at(f.Step+f.Dur, func() {
			w.daemonCut[s.index]--
			for _, p := range ps {
				w.linkCut[p]--
			}
		})
	case Stall:
		w.stallCount[s.index]++
		s.sqlStall = 1
		w.at(f.Step+f.Dur, func() {
			w.stallCount[s.index]--
			if w.stallCount[s.index] == 0 {
				s.sqlStall = 0
			}
		})
	case Errant:
		if s.reachableHost() {
			s.nextSeq++
			t := txn{origin: s.index, seq: s.nextSeq}
			w.loggedAt[t] = w.step
			s.commit(t)
		}
	case Switchover:
		w.switchTo = s.name
	case DaemonRestart:
		w.d.restart()
		w.stats.DaemonCrashes++
	case DaemonCrash:
		w.d.crashAt = max(1, f.Peer)
	case RoutingDown:
		w.svc.down++
		w.at(f.Step+f.Dur, func() { w.svc.down-- })
	case RoutingEdit:
		w.svc.site = s.name
	case SlowLink:
		p := pair(s.index, f.Peer%len(w.sites))
		w.linkSlow[p]++
		w.at(f.Step+f.Dur, func() { w.linkSlow[p]-- })
	case SlowDaemon:
		w.daemonSlow[s.index]++
		w.at(f.Step+f.Dur, func() { w.daemonSlow[s.index]-- })
	case SidecarKill:
		if w.sc != nil {
			w.sc.kills[s.index]++
			w.at(f.Step+1, func() { w.sc.kills[s.index]-- }) // restarted a step later, whatever Dur says
		}
	}
}

// healAll ends every fault (the start of the quiet tail).
func (w *world) healAll() {
	hs := w.heals
	w.heals = nil
	for _, h := range hs {
		h.fn()
	}
}

// service is the model of the Kubernetes Service (or DNS record) routing
// clients: the site its selector names and the epoch annotation the
// follower wrote with it.
type service struct {
	site  string
	epoch uint64
	down  int // active routing-down faults: its API does not answer
}

// errRoutingDown is the follower's error while the routing API is down.
var errRoutingDown = errors.New("sim: routing API unreachable")

// follower is the daemon's routing follower on the model Service, epoch
// guarded as the kube and dns followers are.
type follower struct{ d *daemon }

func (f follower) Name() string { return "kube" }

func (f follower) Follow(ctx context.Context, v view.View) error {
	_, err := f.Reconcile(ctx, v)
	return err
}

// Reconcile moves the Service to v.ActiveSite unless a newer epoch wrote it.
func (f follower) Reconcile(_ context.Context, v view.View) ([]string, error) {
	w := f.d.w
	switch {
	case f.d.crashed:
		return nil, errCrashed
	case w.svc.down > 0:
		return nil, errRoutingDown
	case v.Epoch < w.svc.epoch:
		return nil, fmt.Errorf("sim: Service written at epoch %d, view is epoch %d", w.svc.epoch, v.Epoch)
	case w.svc.site == v.ActiveSite && w.svc.epoch == v.Epoch:
		return nil, nil
	}
	// Routing follows completed promotions only: the view it is given is
	// one the store holds (or an older one), never a target in flight.
	if st := w.stored; v.Epoch > st.Epoch || (v.Epoch == st.Epoch && v.ActiveSite != st.ActiveSite) {
		w.fail("routing moved to %s at epoch %d while the store holds %q at epoch %d", v.ActiveSite, v.Epoch, st.ActiveSite, st.Epoch)
	}
	w.tracef("routing: Service selects %s (epoch %d), was %q (epoch %d)", v.ActiveSite, v.Epoch, w.svc.site, w.svc.epoch)
	w.svc.site, w.svc.epoch = v.ActiveSite, v.Epoch
	return []string{"selector"}, nil
}
