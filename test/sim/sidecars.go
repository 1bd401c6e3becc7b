package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/sidecar"
	"github.com/failoverd/failoverd/view"
)

var discard = slog.New(slog.DiscardHandler)

// restartAfterKill is how many steps a mysqld a sidecar SIGKILLed stays
// down before its service manager starts it again (read-only).
const restartAfterKill = 5

// sidecars are the model sites' sidecar processes: the sidecar package's
// own code (sidecar.Sidecar driven by Step and Enforce), one per site whose
// host is up and whose process was not killed.
type sidecars struct {
	w     *world
	procs []*sidecar.Sidecar // nil: not running
	kills []int              // active sidecar-kill faults per site
}

func newSidecars(w *world) *sidecars {
	return &sidecars{w: w, procs: make([]*sidecar.Sidecar, len(w.sites)), kills: make([]int, len(w.sites))}
}

// sync starts the sidecar of every site whose host is up and stops the
// sidecar of every site whose host is down (it runs on that host). The
// sidecars are installed once the daemon adopted the running primary: a
// sidecar without a lease fences its site, the primary included, as
// docs/design.md requires of a group installed in that order.
func (sc *sidecars) sync() {
	if sc.w.stored.Epoch == 0 {
		return
	}
	for i, s := range sc.w.sites {
		should := !s.hostDown && sc.kills[i] == 0
		switch {
		case should && sc.procs[i] == nil:
			sc.procs[i] = sc.start(s)
		case !should && sc.procs[i] != nil:
			sc.w.tracef("sidecar of %s stops", s.name)
			sc.procs[i] = nil
		}
	}
}

// start is a fresh sidecar process: no view, no lease, boot pending.
func (sc *sidecars) start(s *server) *sidecar.Sidecar {
	d := sc.w.d
	cfg, _, err := sidecar.FromConfig(d.full, d.cfg.Name, s.name, sidecar.Overrides{})
	if err != nil {
		panic(fmt.Sprintf("sim: sidecar configuration of %s: %v", s.name, err))
	}
	log := sc.w.logger()
	var k sidecar.Killer = killer{sc.w, s}
	if sc.w.setup.BlindSidecars {
		k = blindKiller{}
	}
	opts := sidecar.Options{MySQL: localMySQL{sc.w, s}, Killer: k, Daemon: daemonLink{sc.w, s},
		Peers: peerLinks{sc}, Clock: clock{sc.w}}
	if log != nil {
		opts.Logger = log
	} else {
		opts.Logger = discard
	}
	p, err := sidecar.New(cfg, opts)
	if err != nil {
		panic(fmt.Sprintf("sim: sidecar of %s: %v", s.name, err))
	}
	// Its watcher finds the mysqld running now (a hung one runs too); a
	// mysqld down at its start is never seen, so its exit is never told.
	if s.up && !sc.w.setup.BlindSidecars {
		p.MysqldRunning(process(s))
	}
	return p
}

// process is the model mysqld's identity as a sidecar's watcher sees it.
func process(s *server) sidecar.Process {
	return sidecar.Process{PID: 1000 + s.index, StartTicks: s.incarnation}
}

// exited tells s's running sidecar, if it can see mysqld, that its mysqld
// crashed or was killed (the pidfd of the real watcher); a host going down
// takes the sidecar with it.
func (sc *sidecars) exited(s *server, host bool) {
	if p := sc.procs[s.index]; p != nil && !host && !sc.w.setup.BlindSidecars {
		sc.w.tracef("sidecar of %s sees its mysqld exit", s.name)
		p.MysqldExited(process(s), false)
	}
}

// running tells s's running sidecar that a new mysqld process runs.
func (sc *sidecars) running(s *server) {
	if p := sc.procs[s.index]; p != nil && !sc.w.setup.BlindSidecars {
		p.MysqldRunning(process(s))
	}
}

// enforce runs every sidecar's guard at this instant: a lease that ends
// now is enforced now, as the guard's timer would (leases are renewed at
// whole steps, so they end at whole steps).
func (sc *sidecars) enforce() {
	for _, p := range sc.procs {
		if p != nil {
			p.Enforce(context.Background())
		}
	}
}

// rounds runs one round of every sidecar (checkInterval = one step).
func (sc *sidecars) rounds() {
	for _, p := range sc.procs {
		if p != nil {
			p.Step(context.Background())
		}
	}
}

// localMySQL is the sidecar's connection to its own mysqld (same host: no
// link to cut).
type localMySQL struct {
	w *world
	s *server
}

var errRefused = fmt.Errorf("sim: dial: %w", syscall.ECONNREFUSED)

func (m localMySQL) reach() error {
	switch {
	case !m.s.up:
		return errRefused
	case m.s.hung:
		return fmt.Errorf("sim: %s hung: %w", m.s.name, context.DeadlineExceeded)
	}
	return nil
}

func (m localMySQL) Status(context.Context) (mysqlctl.Status, error) {
	if err := m.reach(); err != nil {
		return mysqlctl.Status{}, err
	}
	st := m.w.status(m.s)
	st.ExecutedRaw = st.Executed.String()
	return st, nil
}

func (m localMySQL) Fence(context.Context) error {
	if err := m.reach(); err != nil {
		return err
	}
	if !m.s.readOnly {
		m.w.tracef("sidecar of %s fences it", m.s.name)
	}
	m.s.readOnly = true
	return nil
}

func (m localMySQL) KillClientConnections(context.Context) (int, error) {
	if err := m.reach(); err != nil {
		return 0, err
	}
	return len(m.s.dropSessions()), nil
}

func (m localMySQL) Promote(context.Context) error {
	if err := m.reach(); err != nil {
		return err
	}
	if m.s.readOnly {
		m.w.tracef("sidecar of %s lifts its boot read-only", m.s.name)
	}
	m.s.readOnly = false
	return nil
}

// killer SIGKILLs the model mysqld; its service manager restarts it
// read-only restartAfterKill steps later.
type killer struct {
	w *world
	s *server
}

func (k killer) CanKill() bool { return true }

// Gone: this killer shares mysqld's pid namespace and sees every process.
func (k killer) Gone() bool { return !k.s.up }

// blindKiller is a sidecar's killer that cannot see mysqld's process (no
// pid file, another pid namespace): every kill finds no process, and a
// missing process proves nothing.
type blindKiller struct{}

func (blindKiller) CanKill() bool { return false }
func (blindKiller) Gone() bool    { return false }
func (blindKiller) Kill(context.Context) (int, error) {
	return 0, fmt.Errorf("sim: kill mysqld: %w", sidecar.ErrNoProcess)
}

func (k killer) Kill(context.Context) (int, error) {
	if !k.s.up {
		return 0, sidecar.ErrNoProcess
	}
	k.w.tracef("sidecar of %s SIGKILLs its mysqld", k.s.name)
	// SIGKILL ends a stopped (hung) process too; the next one runs.
	k.w.hangCount[k.s.index] = 0
	k.s.hung = false
	k.w.kill(k.s, false)
	k.w.at(k.w.step+restartAfterKill, func() { k.w.restart(k.s) })
	return k.s.index + 1000, nil
}

// daemonLink is the sidecar's HTTP client to the daemon: the daemon↔site
// link (the sidecar runs on the site's host).
type daemonLink struct {
	w *world
	s *server
}

var errNoDaemon = errors.New("sim: daemon unreachable")

func (l daemonLink) Report(_ context.Context, body []byte, sig string) (view.Answer, error) {
	if l.w.d.crashed || !l.w.daemonLink(l.s) {
		return view.Answer{}, errNoDaemon
	}
	return l.w.d.h.SidecarReport(body, sig)
}

// peerLinks is the sidecars' gossip over the replication links' network.
type peerLinks struct{ sc *sidecars }

var errNoPeer = errors.New("sim: peer sidecar unreachable")

func (p peerLinks) ActiveSite(_ context.Context, peer sidecar.Peer, from, nonce string) (view.Answer, error) {
	w := p.sc.w
	to, me := w.site(peer.Site), w.site(from)
	proc := p.sc.procs[to.index]
	if proc == nil || !w.link(me, to) {
		return view.Answer{}, errNoPeer
	}
	a, ok := proc.PeerView(from, nonce)
	if !ok {
		return view.Answer{}, sidecar.ErrNoView
	}
	return a, nil
}

// clock is the world's clock; Step and Enforce use no timers.
type clock struct{ w *world }

func (c clock) Now() time.Time { return c.w.now() }

func (c clock) NewTimer(time.Duration) sidecar.Timer { return stoppedTimer{} }

type stoppedTimer struct{}

func (stoppedTimer) C() <-chan time.Time { return nil }
func (stoppedTimer) Stop()               {}
