package sidecar

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/view"
)

// Options are the sidecar's edges. Only MySQL is required; the others
// default to the real implementations.
type Options struct {
	// MySQL is the local server (DialMySQL, or a *mysqlctl.Instance).
	MySQL MySQL
	// Killer SIGKILLs a mysqld that cannot be fenced; nil never kills (no
	// --mysqld-pid-file).
	Killer Killer
	// Watcher tells the sidecar the instant its mysqld exits (a
	// PIDFileWatcher on --mysqld-pid-file); the next report, sent at once,
	// says so. Nil watches nothing.
	Watcher ProcessWatcher
	// Daemon defaults to HTTP POSTs to Config.DaemonURLs.
	Daemon DaemonClient
	// Peers defaults to HTTP GETs to each Config.Peers URL.
	Peers PeerClient
	// Clock defaults to the real (monotonic) clock.
	Clock Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// HTTPClient is used by the default Daemon client, and by the default
	// Peers client unless PeerHTTPClient is set.
	HTTPClient *http.Client
	// PeerHTTPClient, when set, is the default Peers client's (HTTPS to the
	// peers: PeerTLSFiles.Load).
	PeerHTTPClient *http.Client
	// ServerTLS, when set, makes Run serve HTTPS with it (PeerTLSFiles.Load).
	ServerTLS *tls.Config
	// Listener, when set, is served instead of listening on Config.ListenAddr.
	Listener net.Listener
}

// Sidecar is one site's self-fencing sidecar. Create it with New, start it
// with Run.
type Sidecar struct {
	// lateContacts counts the peer contacts a round left to finish in the
	// background (tests wait for them; nothing else does).
	lateContacts sync.WaitGroup
	cfg          Config
	mysql        MySQL
	killer       Killer
	watcher      ProcessWatcher
	daemon       DaemonClient
	peers        PeerClient
	clock        Clock
	log          *slog.Logger
	listener     net.Listener
	serverTLS    *tls.Config
	m            *metrics
	fenceTimeout time.Duration
	kick         chan struct{} // wakes the guard; buffered 1, sends never block
	push         chan struct{} // starts a round now (an exit to report); buffered 1

	// roundOnly: touched by the round goroutine only.
	daemonDown bool
	// stepped: driven by Step, which runs everything in its caller's
	// goroutine (see concurrently).
	stepped bool

	mu sync.Mutex
	// v is the newest trusted view (nil until the first one), its epoch
	// adopted at vAt.
	v   *view.Signed
	vAt time.Time
	// lease is L: the site may stay writable until then (monotonic).
	lease time.Time
	// expiryHandled is the lease deadline whose expiry the guard last
	// enforced: the guard re-runs at once when a new deadline already passed.
	expiryHandled time.Time
	// daemonView is the newest view obtained directly from the daemon, and
	// daemonSent the send time of the request that returned it.
	daemonView *view.View
	daemonSent time.Time
	// bootPending: the one boot-time unfence decision is not made yet.
	bootPending bool
	fenced      bool
	fencedEpoch uint64
	fencedAt    time.Time
	local       localState
	served      map[string]served
	// boot identifies this process's run; echo is the daemon's last token
	// (see view.Report.Boot, view.Report.Echo).
	boot, echo string
	// exit is the last exit of the watched mysqld, until a process (or a
	// status read begun after it) shows a mysqld again; nil otherwise.
	exit *exitSeen
	// lastFenceErr / downLogged keep repeated failures from flooding the log.
	lastFenceErr string
	downLogged   bool
}

// localState is the last status read of the local MySQL.
type localState struct {
	up, writable bool
	// down: the read failed and mysqld provably does not run (Killer.Gone,
	// or a kill whose pidfd saw the process exit). A failed read alone is
	// "unknown": a hung mysqld times out the same way.
	down     bool
	executed string
	// at is when the read finished; replica the replication channel it
	// found (nil without one): /health answers from them, with no SQL of
	// its own.
	at      time.Time
	replica *replicaState
}

// exitSeen is one exit of the watched mysqld, at on the sidecar's clock.
type exitSeen struct {
	proc Process
	at   time.Time
}

// replicaState is the local replication channel as last read.
type replicaState struct {
	ioRunning, sqlRunning bool
	lag                   time.Duration
	lagKnown              bool
}

// served is the last view served to one peer.
type served struct {
	epoch uint64
	at    time.Time
}

// source says where a view came from.
type source struct {
	daemon bool
	peer   string
}

func (s source) String() string {
	if s.daemon {
		return "daemon"
	}
	return "peer:" + s.peer
}

// New checks cfg and returns a sidecar that has no view and no lease yet.
func New(cfg Config, opts Options) (*Sidecar, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if opts.MySQL == nil {
		return nil, fmt.Errorf("%w: Options.MySQL is required", ErrInvalidConfig)
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.PeerHTTPClient == nil {
		opts.PeerHTTPClient = opts.HTTPClient
	}
	if opts.Daemon == nil {
		opts.Daemon = &httpDaemon{urls: cfg.DaemonURLs, client: opts.HTTPClient, timeout: cfg.CheckInterval}
	}
	if opts.Peers == nil {
		opts.Peers = &httpPeers{client: opts.PeerHTTPClient, timeout: cfg.CheckInterval}
	}
	now := opts.Clock.Now()
	s := &Sidecar{
		cfg:          cfg,
		mysql:        opts.MySQL,
		killer:       opts.Killer,
		watcher:      opts.Watcher,
		daemon:       opts.Daemon,
		peers:        opts.Peers,
		clock:        opts.Clock,
		log:          opts.Logger.With("group", cfg.Group, "site", cfg.Site),
		listener:     opts.Listener,
		serverTLS:    opts.ServerTLS,
		fenceTimeout: cfg.fenceTimeout(),
		kick:         make(chan struct{}, 1),
		push:         make(chan struct{}, 1),
		// A (re)started sidecar holds no lease: it cannot know when its
		// previous run last renewed, and granting a fresh one could outlast
		// the daemon's revokedAt + leaseTimeout bound.
		lease:         now,
		expiryHandled: now, // the first enforcement waits for the first round
		bootPending:   true,
		served:        map[string]served{},
		boot:          view.NewNonce(),
	}
	s.m = newMetrics(s)
	return s, nil
}

// Run serves HTTP and runs the rounds and the guard until ctx ends. It
// returns an error only when the HTTP server cannot listen or fails.
func (s *Sidecar) Run(ctx context.Context) error {
	ln := s.listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.cfg.ListenAddr); err != nil {
			return fmt.Errorf("sidecar: listen: %w", err)
		}
	}
	if s.serverTLS != nil {
		ln = tls.NewListener(ln, s.serverTLS)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("sidecar: serve: %w", err)
			cancel()
		}
	})
	wg.Go(func() { s.rounds(ctx) })
	if w, ok := s.daemon.(DaemonWatcher); ok {
		wg.Go(func() { s.watch(ctx, w) })
	}
	wg.Go(func() { s.guard(ctx) })
	if s.watcher != nil {
		wg.Go(func() { s.watcher.Watch(ctx, s.processRunning, s.processExited) })
	}
	s.log.Info("sidecar.started", "listen", ln.Addr().String(), "lease_timeout", s.cfg.LeaseTimeout,
		"check_interval", s.cfg.CheckInterval, "fence_timeout", s.fenceTimeout, "peers", len(s.cfg.Peers), "can_kill", s.killer != nil,
		"watches_mysqld", s.watcher != nil,
		"tls", s.serverTLS != nil)
	<-ctx.Done()
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx) // best effort: the process is stopping
	wg.Wait()
	s.lateContacts.Wait() // a round's late peer answers log: none after Run returns
	s.log.Info("sidecar.stopped")
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// rounds runs a round at once and then, after each one ends, waits
// nextRound before the next, or less when an exit is to be reported.
func (s *Sidecar) rounds(ctx context.Context) {
	for {
		adopted := s.round(ctx)
		d := s.nextRound(adopted)
		if d == 0 {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		t := s.clock.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-s.push:
			// mysqld just exited: the daemon learns it now, not at the
			// next round (issue 32: detection without the failure window).
			t.Stop()
		}
	}
}

// watchUnsupported is how long the watch waits after a daemon without
// watches (one upgraded later is used then); after any other failure it
// waits checkInterval.
const watchUnsupported = time.Minute

// watch holds a watch at the daemon (view.Watch) and starts a round as soon
// as the daemon publishes a view newer than the one held: the round's report
// then fetches it, bound as always. Without it a new view reaches this
// sidecar at its next round (checkInterval); a failover waits on that twice
// (the old primary's fence as its proof, the target's epoch before writes).
func (s *Sidecar) watch(ctx context.Context, w DaemonWatcher) {
	var seen view.WatchAnswer // the newest view the daemon said it published
	for ctx.Err() == nil {
		s.mu.Lock()
		after := view.Watch{Group: s.cfg.Group, Site: s.cfg.Site, WaitMs: view.MaxWatchWait}
		if s.v != nil {
			after.Epoch, after.Seq = s.v.View.Epoch, s.v.View.Seq
		}
		s.mu.Unlock()
		// A newer view already announced, not yet fetched: wait past it,
		// or every answer would wake a round again at once.
		if view.NewerThan(seen.Epoch, seen.Seq, after.Epoch, after.Seq) {
			after.Epoch, after.Seq = seen.Epoch, seen.Seq
		}
		body, err := json.Marshal(after)
		if err != nil { // a Watch always encodes
			return
		}
		a, err := w.Watch(ctx, body, view.SignBytes(body, s.cfg.Key))
		var pause time.Duration
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrWatchUnsupported):
			pause = watchUnsupported
		case err != nil:
			pause = s.cfg.CheckInterval
		case a.Newer:
			seen = a
			s.m.watchWakes.Inc()
			select {
			case s.push <- struct{}{}:
			default: // a round is already asked for
			}
		}
		if pause > 0 {
			s.log.Debug("sidecar.watch_failed", "err", err, "retry_in", pause)
			t := s.clock.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
	}
}

// processRunning is the watcher's: p is the mysqld now watched. A new
// process ends what an earlier exit said (mysqld runs again).
func (s *Sidecar) processRunning(p Process) {
	s.mu.Lock()
	was := s.exit
	if was != nil && was.proc != p {
		s.exit = nil
	}
	s.mu.Unlock()
	if was != nil && was.proc != p {
		s.log.Info("sidecar.mysqld_running", "pid", p.PID, "start_ticks", p.StartTicks, "exited_pid", was.proc.PID)
	}
}

// processExited is the watcher's: p exited. The report saying so leaves
// at once (a round now), and every report says it until a mysqld is seen
// again. A clean shutdown is not reported: a planned stop (a restart by
// hand, a configuration change) is judged by the daemon's probes over the
// failure window, as without a watcher.
func (s *Sidecar) processExited(p Process, clean bool) {
	if clean {
		s.log.Info("sidecar.mysqld_stopped", "pid", p.PID, "start_ticks", p.StartTicks, "why", "clean shutdown (pid file removed): not reported as an exit")
		return
	}
	now := s.clock.Now()
	s.mu.Lock()
	// The same exit seen again keeps its first instant.
	if s.exit == nil || s.exit.proc != p {
		s.exit = &exitSeen{proc: p, at: now}
	}
	s.mu.Unlock()
	s.m.exits.Inc()
	s.log.Error("sidecar.mysqld_exited", "pid", p.PID, "start_ticks", p.StartTicks)
	select {
	case s.push <- struct{}{}:
	default: // a round is already asked for
	}
}

// minFastRound is the floor of the fast round interval.
const minFastRound = 50 * time.Millisecond

// fastRound is the interval of rounds during a failover:
// max(checkInterval/5, 50ms), never longer than checkInterval.
func (c Config) fastRound() time.Duration {
	return min(c.CheckInterval, max(c.CheckInterval/5, minFastRound))
}

// urgentRound is the round interval in the first moments of a failover,
// when the daemon's next step waits on this sidecar's next report: a
// revoking view just adopted (the old primary's sidecar's report of its
// fence is the promotion's proof; the target's report of the next epoch
// lets it be made writable) or the local mysqld just exited (the revoke
// that follows the exit report is fetched at once). Never slower than the
// fast interval.
const urgentRound = 20 * time.Millisecond

// urgentWindow bounds the urgent rounds: 3 x checkInterval after the
// revoking view's adoption or the exit, as long as the daemon waits for
// the target's sidecar to catch up; a failover blocked for longer (waiting
// for a human, a lease) gets fast rounds, not a report every 20 ms.
func (c Config) urgentWindow() time.Duration { return 3 * c.CheckInterval }

// nextRound is how long to wait after a round: none after a round that
// adopted a newer epoch (the next report tells the daemon now that this
// sidecar holds it, and what the guard did about it); the urgent interval
// in the urgent window (see urgentRound); the fast interval while the
// newest view names no site (a failover revoked the primary and waits for
// a proof or the target's sidecar); checkInterval otherwise.
func (s *Sidecar) nextRound(adopted bool) time.Duration {
	now := s.clock.Now()
	s.mu.Lock()
	revoked := s.v != nil && s.v.View.ActiveSite == ""
	urgent := (revoked && now.Sub(s.vAt) < s.cfg.urgentWindow()) ||
		(s.exit != nil && now.Sub(s.exit.at) < s.cfg.urgentWindow())
	s.mu.Unlock()
	switch {
	case adopted:
		return 0
	case urgent:
		return min(urgentRound, s.cfg.fastRound())
	case revoked:
		return s.cfg.fastRound()
	}
	return s.cfg.CheckInterval
}

// contact is one answer (or failure) of the daemon or a peer to req.
type contact struct {
	src source
	req view.Request
	a   view.Answer
	err error
}

// round reads the local status, reports to the daemon and asks every peer at
// the same time, and applies each answer as it arrives. It reports whether a
// newer view was adopted.
func (s *Sidecar) round(ctx context.Context) (adopted bool) {
	s.readLocal(ctx)
	// Every request of the round carries a fresh nonce made now: an answer
	// bound to one was made after this instant, so a lease it renews counts
	// from here (before any send, however many daemon URLs are tried).
	asked := s.clock.Now()
	rep := s.Report()
	rep.Nonce = view.NewNonce()
	s.mu.Lock()
	rep.Boot, rep.Echo = s.boot, s.echo
	s.mu.Unlock()
	body, err := json.Marshal(rep)
	if err != nil { // a Report always encodes; keep the guard going regardless
		s.log.Error("sidecar.report_encode_failed", "err", err)
	}
	sig := view.SignBytes(body, s.cfg.Key)
	results := make(chan contact, 1+len(s.cfg.Peers))
	s.concurrently(func() {
		a, err := s.daemon.Report(ctx, body, sig)
		results <- contact{src: source{daemon: true}, req: view.Request{Nonce: rep.Nonce, From: s.cfg.Site, By: view.ByDaemon}, a: a, err: err}
	})
	for _, p := range s.cfg.Peers {
		req := view.Request{Nonce: view.NewNonce(), From: s.cfg.Site, By: view.ByPeer(p.Site)}
		s.concurrently(func() {
			a, err := s.peers.ActiveSite(ctx, p, req.From, req.Nonce)
			results <- contact{src: source{peer: p.Site}, req: req, a: a, err: err}
		})
	}
	for pending := 1 + len(s.cfg.Peers); pending > 0; {
		c := <-results
		pending--
		if s.handle(c, asked) {
			adopted = true
			s.kickGuard() // rule 1 right after a new view, not at the round's end
		}
		// Once the daemon answered, a peer that does not (a black-holed
		// link waits out its whole timeout) must not hold up the next
		// report: a failover waits on this sidecar's reports (the lease
		// proof's receipts, the promoted target's epoch). Its answer, if
		// it comes, is still applied; only peer contacts are left, and
		// handling one touches nothing the round does unlocked.
		if c.src.daemon && c.err == nil && pending > 0 {
			left := pending
			s.lateContacts.Add(1)
			s.concurrently(func() {
				defer s.lateContacts.Done()
				for range left {
					if s.handle(<-results, asked) {
						s.kickGuard()
					}
				}
			})
			break
		}
	}
	s.kickGuard() // rule 1 and 2 with this round's facts
	return adopted
}

// handle applies one contact to a request whose nonce was made at asked; it
// reports whether a new view was adopted.
func (s *Sidecar) handle(c contact, asked time.Time) bool {
	if c.err != nil {
		if errors.Is(c.err, ErrMalformedView) {
			s.m.rejected.WithLabelValues(WhyMalformed).Inc()
		}
		switch {
		case c.src.daemon && !s.daemonDown:
			s.daemonDown = true
			s.log.Warn("sidecar.daemon_unreachable", "err", c.err)
		case !c.src.daemon:
			s.log.Debug("sidecar.peer_unreachable", "peer", c.src.peer, "err", c.err)
		}
		return false
	}
	if c.src.daemon && s.daemonDown {
		s.daemonDown = false
		s.log.Info("sidecar.daemon_reachable")
	}
	if c.src.daemon && c.a.Token != "" {
		s.mu.Lock()
		s.echo = c.a.Token
		s.mu.Unlock()
	}
	return s.consider(c.a.Signed, asked, s.bound(c), c.src)
}

// bound reports whether c's answer was made for its request. Only such an
// answer may renew the lease: a replayed answer (an old view naming this
// site, validly signed, sent again by anyone on the path) or an unbound one
// (a daemon or peer of an older version, a peer that does not count this
// site among its peers) may outlast the daemon's bound on the lease.
func (s *Sidecar) bound(c contact) bool {
	err := c.a.VerifyBinding(c.req, s.cfg.Key)
	switch {
	case err == nil:
		return true
	case errors.Is(err, view.ErrUnbound):
		s.m.unbound.WithLabelValues(WhyUnbound).Inc()
		s.log.Debug("sidecar.answer_unbound", "from", c.src.String(), "epoch", c.a.View.Epoch)
	default:
		s.m.unbound.WithLabelValues(WhyBadBinding).Inc()
		s.log.Warn("sidecar.answer_unbound", "from", c.src.String(), "epoch", c.a.View.Epoch, "err", err)
	}
	return false
}

// consider applies adoption (strictly newer trusted views only) and, for an
// answer bound to its request (fresh), renewal (a trusted view of the
// current epoch naming this site) to one view asked for at asked; it
// reports whether sv was adopted. An unbound answer is still adopted when
// newer: a newer signed view can only fence more, never renew.
func (s *Sidecar) consider(sv view.Signed, asked time.Time, fresh bool, src source) bool {
	v, err := sv.Verify(s.cfg.Key)
	if err != nil {
		// A forged or foreign view must neither fence nor keep a site writable.
		s.reject(WhyBadSignature, sv.View, src, slog.LevelWarn, "err", err)
		return false
	}
	if v.Group != s.cfg.Group {
		// Another group's view, validly signed with a shared key, says nothing about ours.
		s.reject(WhyOtherGroup, v, src, slog.LevelWarn)
		return false
	}
	if v.Epoch == 0 {
		// Epoch 0 is a group the daemon has not adopted a primary for yet:
		// "no active site" there is no revocation, and fencing on it would
		// fence the running primary of a group whose sidecars were just
		// installed. The lease (rule 2) still applies.
		s.reject(WhyEpochZero, v, src, slog.LevelDebug)
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	adopted := false
	switch cur := s.v; {
	case cur == nil || v.Epoch > cur.View.Epoch:
		prev := uint64(0)
		if cur != nil {
			prev = cur.View.Epoch
		}
		s.holdLocked(sv, v, src)
		s.vAt = s.clock.Now()
		adopted = true
		s.log.Info("sidecar.view_adopted", "epoch", v.Epoch, "active_site", v.ActiveSite, "from", src.String(), "previous_epoch", prev)
	case v.Epoch < cur.View.Epoch:
		// A lagging peer (or a stale daemon) must not roll the view back.
		s.reject(WhyOlderEpoch, v, src, slog.LevelDebug, "current_epoch", cur.View.Epoch)
		return false
	case v.ActiveSite != cur.View.ActiveSite:
		// Two signed views of one epoch disagree: flipping on either could
		// make two sites writable, and renewing on either is unjustified.
		s.reject(WhyConflictingView, v, src, slog.LevelWarn, "current_active_site", cur.View.ActiveSite)
		return false
	case v.Refreshes(cur.View):
		// Same epoch and active site, newer read exclusions: held (and
		// served to peers) from now on; fencing sees no change. A lower
		// Seq (a peer's older copy) must not undo a newer exclusion.
		s.holdLocked(sv, v, src)
	}
	// A replayed daemon answer must not lift the boot read-only.
	if src.daemon && fresh {
		s.daemonView, s.daemonSent = &v, asked
		if s.bootPending && v.ActiveSite != s.cfg.Site {
			// The boot unfence is one decision: the daemon named someone else.
			s.bootPending = false
			s.log.Info("sidecar.boot_unfence_skipped", "why", "the daemon's view names another site", "epoch", v.Epoch)
		}
	}
	// A replayed or unbound answer must not renew: it could keep an isolated
	// primary writable past the daemon's lease bound (see bound).
	if v.ActiveSite == s.cfg.Site && fresh {
		if until := asked.Add(s.cfg.LeaseTimeout); until.After(s.lease) {
			s.lease = until
			s.log.Debug("sidecar.lease_renewed", "epoch", v.Epoch, "from", src.String(), "remaining", until.Sub(s.clock.Now()))
		}
	}
	return adopted
}

// holdLocked makes the verified v (of sv) the newest view held (s.mu
// held), with both signatures so peers verify the copy it serves, and logs
// a change of this site's read exclusion.
func (s *Sidecar) holdLocked(sv view.Signed, v view.View, src source) {
	var was string
	wasOut := false
	if s.v != nil {
		was, wasOut = s.v.View.Withheld(s.cfg.Site)
	}
	held := sv
	held.View = v
	s.v = &held
	switch why, out := v.Withheld(s.cfg.Site); {
	case out && (!wasOut || why != was):
		s.log.Warn("sidecar.reads_withheld", "epoch", v.Epoch, "seq", v.Seq, "why", why, "from", src.String())
	case !out && wasOut:
		s.log.Info("sidecar.reads_allowed", "epoch", v.Epoch, "seq", v.Seq, "was", was, "from", src.String())
	}
}

func (s *Sidecar) reject(why string, v view.View, src source, level slog.Level, attrs ...any) {
	s.m.rejected.WithLabelValues(why).Inc()
	s.log.Log(context.Background(), level, "sidecar.view_rejected",
		append([]any{"why", why, "epoch", v.Epoch, "view_group", v.Group, "active_site", v.ActiveSite, "from", src.String()}, attrs...)...)
}

// readLocal reads the local status for the report.
func (s *Sidecar) readLocal(ctx context.Context) {
	start := s.clock.Now()
	sctx, cancel := context.WithTimeout(ctx, s.fenceTimeout)
	st, err := s.mysql.Status(sctx)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		// A timeout, an auth error or "too many connections" is not "down":
		// reporting it so would let the daemon promote away a hung primary
		// that resumes writable.
		s.local = localState{down: s.gone() || s.exitedAndRefusedLocked(err), at: s.clock.Now()}
		return
	}
	s.downLogged = false
	// A status read begun after the exit answered: a mysqld runs again
	// (one the watcher has not found yet, or one it cannot see).
	if s.exit != nil && start.After(s.exit.at) {
		s.exit = nil
	}
	s.local = localState{up: true, writable: !st.Fenced(), executed: st.ExecutedRaw, at: s.clock.Now()}
	if rep := st.Replica; rep != nil {
		// Yes only: a Connecting IO thread is not receiving anything.
		s.local.replica = &replicaState{ioRunning: rep.IOThread == mysqlctl.ThreadYes, sqlRunning: rep.SQLThread == mysqlctl.ThreadYes,
			lag: rep.Lag, lagKnown: rep.LagKnown}
	}
	if s.local.writable && s.fenced && start.After(s.fencedAt) {
		s.fenced = false // the daemon promoted the site since
	}
}

// kickGuard wakes the guard without blocking.
func (s *Sidecar) kickGuard() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// guard enforces rules 1 and 2 (and the boot unfence) whenever a round asks
// and when the lease deadline passes, independently of slow rounds.
func (s *Sidecar) guard(ctx context.Context) {
	var t Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		if t != nil {
			t.Stop()
			t = nil
		}
		now := s.clock.Now()
		s.mu.Lock()
		lease, handled := s.lease, s.expiryHandled.Equal(s.lease)
		s.mu.Unlock()
		var expiry <-chan time.Time
		switch {
		case now.Before(lease):
			t = s.clock.NewTimer(lease.Sub(now))
			expiry = t.C()
		case !handled:
			// Renewed to a deadline that has already passed (an answer slower
			// than the lease): enforce it now.
			s.enforce(ctx)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-expiry:
		}
		if ctx.Err() != nil {
			return
		}
		s.enforce(ctx)
	}
}

// enforce applies rule 1 (view names another site or none), rule 2 (lease
// passed) or, when neither holds, the boot unfence.
func (s *Sidecar) enforce(ctx context.Context) {
	now := s.clock.Now()
	s.mu.Lock()
	var cur *view.View
	if s.v != nil {
		v := s.v.View
		cur = &v
	}
	expired := !now.Before(s.lease)
	if expired {
		s.expiryHandled = s.lease
	}
	s.mu.Unlock()
	switch {
	case cur != nil && !cur.Allows(s.cfg.Site):
		s.ensureFenced(ctx, ReasonViewNamesOther, cur.Epoch)
	case expired:
		s.ensureFenced(ctx, ReasonLeaseExpired, epochOf(cur))
	default:
		s.bootUnfence(ctx, now)
	}
}

func epochOf(v *view.View) uint64 {
	if v == nil {
		return 0
	}
	return v.Epoch
}

// fenceResult is the outcome of one bounded fence attempt.
type fenceResult struct {
	already bool // the flavor's fence was already in effect
	skipped bool // the rule no longer held once the status was read
	refused bool // mysqld refused the connection: nothing listens
	killed  int  // client connections killed
	err     error
}

// ensureFenced makes sure the local MySQL cannot take writes: fence (status,
// Fence, KillClientConnections) within the fence timeout, else SIGKILL
// mysqld through the pid file.
func (s *Sidecar) ensureFenced(ctx context.Context, reason string, epoch uint64) {
	fctx, cancel := context.WithTimeout(ctx, s.fenceTimeout)
	defer cancel()
	res := make(chan fenceResult, 1)
	s.concurrently(func() { res <- s.fence(fctx, reason) })
	var r fenceResult
	select {
	case r = <-res:
	case <-fctx.Done():
		// A hung mysqld may never return, whatever the driver promises.
		r = fenceResult{err: fmt.Errorf("fence: %w", fctx.Err())}
	}
	if ctx.Err() != nil {
		return // stopping: shutting the sidecar down is no reason to kill mysqld
	}
	switch {
	case r.skipped:
		s.log.Info("sidecar.fence_skipped", "reason", reason, "epoch", epoch, "why", "a newer view arrived")
		return
	case r.already:
		s.mu.Lock()
		s.lastFenceErr = ""
		s.local.up, s.local.writable = true, false
		s.mu.Unlock()
		return
	case r.refused:
		// Nothing listens (stopped, or starting read-only): killing a
		// starting mysqld would only loop. Down only if proven.
		s.noteDown(reason, r.err)
		return
	case r.err == nil:
		s.markFenced(epoch)
		s.m.fences.WithLabelValues(reason).Inc()
		s.log.Warn("sidecar.fenced", "reason", reason, "epoch", epoch, "killed_connections", r.killed)
		return
	}
	if s.killer == nil {
		s.fenceFailed(reason, epoch, r.err, nil)
		return
	}
	kctx, kcancel := context.WithTimeout(ctx, killWait)
	defer kcancel()
	pid, err := s.killer.Kill(kctx)
	switch {
	case err == nil:
		s.markFenced(epoch)
		s.mu.Lock()
		s.local = localState{down: true} // the pidfd saw it exit
		s.mu.Unlock()
		s.m.fences.WithLabelValues(ReasonKilledMySQLD).Inc()
		s.log.Error("sidecar.mysqld_killed", "reason", reason, "epoch", epoch, "pid", pid, "fence_err", r.err)
	case errors.Is(err, ErrNoProcess) && s.gone():
		s.noteDown(reason, errors.Join(r.err, err))
	default:
		// A kill that finds no process in a pid namespace that never showed
		// mysqld proves nothing: the fence failed, mysqld may be hung.
		s.fenceFailed(reason, epoch, r.err, err)
	}
}

// ruleHolds reports whether the rule behind reason still demands a fence.
func (s *Sidecar) ruleHolds(reason string) bool {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if reason == ReasonLeaseExpired {
		return !now.Before(s.lease)
	}
	return s.v != nil && !s.v.View.Allows(s.cfg.Site)
}

// fence runs status → Fence → KillClientConnections within ctx.
func (s *Sidecar) fence(ctx context.Context, reason string) fenceResult {
	st, err := s.mysql.Status(ctx)
	switch {
	case err == nil && st.Fenced():
		return fenceResult{already: true}
	case err != nil && refused(err):
		return fenceResult{refused: true, err: err}
	}
	// A view adopted while the status was read (a promotion of this site)
	// must not be undone by a decision taken on the older view.
	if !s.ruleHolds(reason) {
		return fenceResult{already: err == nil && st.Fenced(), skipped: true}
	}
	// Writable, or unknown: a hung server may resume and take writes.
	if err := s.mysql.Fence(ctx); err != nil {
		if refused(err) {
			return fenceResult{refused: true, err: err}
		}
		return fenceResult{err: err}
	}
	n, err := s.mysql.KillClientConnections(ctx)
	// A session the sidecar's account may not kill (a SYSTEM_USER
	// account's, MySQL) is stopped by super_read_only: the fence holds.
	if err != nil && !errors.Is(err, mysqlctl.ErrSessionsNotKilled) {
		return fenceResult{err: err}
	}
	return fenceResult{killed: n}
}

// refused reports a refused TCP connection: no mysqld listens (stopped, or
// starting read-only), so nothing can write through it and killing a
// starting mysqld would only loop.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func (s *Sidecar) markFenced(epoch uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fenced, s.fencedEpoch, s.fencedAt = true, epoch, s.clock.Now()
	s.local.writable = false
	s.lastFenceErr = ""
	// The sidecar never lifts a fence it set, not even at boot.
	s.bootPending = false
}

// noteDown records a local mysqld that refused connections or has no
// process: "down" when Killer.Gone proves it, else "unknown".
func (s *Sidecar) noteDown(reason string, err error) {
	down := s.gone()
	s.mu.Lock()
	down = down || s.exitedAndRefusedLocked(err)
	s.local = localState{down: down}
	first := !s.downLogged
	s.downLogged = true
	s.mu.Unlock()
	if first {
		s.log.Info("sidecar.mysqld_down", "reason", reason, "proven", down, "err", err)
	}
}

// exitedAndRefusedLocked (s.mu held) reports the other proof of "down": the
// watcher saw the watched mysqld process exit (a crash: a clean shutdown is
// no exit) and no mysqld since (neither a new process in the pid file nor a
// status read that succeeded), and nothing listens on its port now (err is
// a refused connection, not a timeout: a hung mysqld keeps its listener).
// Killer.Gone cannot tell when other mysqld processes share the pid
// namespace (several instances on one host); this can, for the watched one.
// A mysqld started again after it comes up read-only, as every mysqld of a
// group must (docs/design.md), until the daemon names it.
func (s *Sidecar) exitedAndRefusedLocked(err error) bool {
	return s.exit != nil && err != nil && refused(err)
}

// gone reports whether mysqld provably does not run (never without a
// killer that has seen it: a hung or invisible mysqld is not a down one).
func (s *Sidecar) gone() bool { return s.killer != nil && s.killer.Gone() }

func (s *Sidecar) fenceFailed(reason string, epoch uint64, fenceErr, killErr error) {
	msg := fmt.Sprint(fenceErr, killErr)
	s.mu.Lock()
	repeat := s.lastFenceErr == msg
	s.lastFenceErr = msg
	s.mu.Unlock()
	if !repeat {
		s.log.Error("sidecar.fence_failed", "reason", reason, "epoch", epoch, "err", fenceErr, "kill_err", killErr, "can_kill", s.killer != nil)
	}
}

// bootUnfence lifts the start-up read-only once, at boot, when the daemon
// itself (not a peer) names this site in the newest view.
func (s *Sidecar) bootUnfence(ctx context.Context, now time.Time) {
	s.mu.Lock()
	if !s.bootPending || s.daemonView == nil || s.v == nil {
		s.mu.Unlock()
		return
	}
	dv, cur := *s.daemonView, s.v.View
	daemonLease := s.daemonSent.Add(s.cfg.LeaseTimeout)
	deadline := s.lease
	s.mu.Unlock()
	// Wait (boot stays pending) until the daemon's own answer is the newest
	// view and recent enough to hold the lease by itself: a peer's copy may
	// be a revoked epoch.
	if dv.ActiveSite != s.cfg.Site || dv.Epoch != cur.Epoch || !now.Before(daemonLease) {
		return
	}
	// Never writable past the lease, even for the duration of Promote.
	pctx, cancel := context.WithDeadline(ctx, minTime(deadline, now.Add(s.cfg.CheckInterval)))
	defer cancel()
	st, err := s.mysql.Status(pctx)
	if err != nil {
		return // mysqld not up yet: decide when it is
	}
	if !st.ReadOnly && !st.SuperReadOnly {
		s.endBoot("already writable", dv.Epoch)
		return
	}
	// A writable server applying another primary's stream mixes two histories.
	if r := st.Replica; r != nil && (r.IOThread.Running() || r.SQLThread.Running()) {
		s.endBoot("replication is running", dv.Epoch)
		return
	}
	// A view adopted while the status was read (a revoke) must not be
	// undone by a decision taken on the older one (issue 26 hole 3).
	if !s.bootStillNamed(dv) {
		return // the next enforce fences, or finds no lease, on the newer view
	}
	if err := s.mysql.Promote(pctx); err != nil {
		if errors.Is(err, mysqlctl.ErrReplicaRunning) {
			s.endBoot("replication is running", dv.Epoch)
			return
		}
		s.log.Warn("sidecar.boot_unfence_failed", "epoch", dv.Epoch, "err", err)
		return // retried while the boot decision is pending
	}
	s.mu.Lock()
	s.bootPending = false
	s.local.up, s.local.writable = true, true
	s.mu.Unlock()
	s.log.Warn("sidecar.unfenced", "epoch", dv.Epoch, "why", "boot: the daemon's view names this site")
}

// bootStillNamed reports whether the boot unfence decided on dv still
// holds: boot pending, dv the newest view and the daemon's, lease running.
func (s *Sidecar) bootStillNamed(dv view.View) bool {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bootPending && s.v != nil && s.v.View.Epoch == dv.Epoch && s.v.View.ActiveSite == s.cfg.Site &&
		s.daemonView != nil && s.daemonView.Epoch == dv.Epoch && now.Before(s.lease)
}

func (s *Sidecar) endBoot(why string, epoch uint64) {
	s.mu.Lock()
	s.bootPending = false
	s.mu.Unlock()
	s.log.Info("sidecar.boot_unfence_skipped", "why", why, "epoch", epoch)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Report returns the report the sidecar would send now.
func (s *Sidecar) Report() view.Report {
	canKill := s.killer != nil && s.killer.CanKill()
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := view.Report{
		Group:            s.cfg.Group,
		Site:             s.cfg.Site,
		Epoch:            s.epochLocked(),
		MySQLdUp:         s.local.up,
		MySQLdDown:       !s.local.up && s.local.down,
		Writable:         s.local.up && s.local.writable,
		Fenced:           s.fenced,
		FencedEpoch:      s.fencedEpoch,
		Executed:         s.local.executed,
		CanKill:          canKill,
		LeaseRemainingMs: s.lease.Sub(now).Milliseconds(),
		Peers:            make(map[string]view.PeerServed, len(s.served)),
	}
	for site, sv := range s.served {
		r.Peers[site] = view.PeerServed{ServedEpoch: sv.epoch, ServedAgoMs: now.Sub(sv.at).Milliseconds()}
	}
	if x := s.exit; x != nil {
		r.MySQLdExit = &view.MySQLdExit{PID: x.proc.PID, StartTicks: x.proc.StartTicks, AgoMs: max(now.Sub(x.at).Milliseconds(), 0)}
	}
	return r
}

// View returns the newest trusted view, if any.
func (s *Sidecar) View() (view.Signed, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.v == nil {
		return view.Signed{}, false
	}
	return *s.v, true
}

func (s *Sidecar) epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epochLocked()
}

func (s *Sidecar) epochLocked() uint64 {
	if s.v == nil {
		return 0
	}
	return s.v.View.Epoch
}

func (s *Sidecar) leaseRemaining(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease.Sub(now)
}
