package poller

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failoverd/failoverd/mysqlctl"
)

// Prober reads one server's status. *mysqlctl.Instance implements it. Status
// must return soon after ctx ends.
type Prober interface {
	Status(ctx context.Context) (mysqlctl.Status, error)
}

// Dialer opens the Prober of a site, within ctx (the probe's deadline). It
// is called on a site's first probe and again after the Prober was dropped.
// A Prober that also implements io.Closer is closed when dropped and when
// Run ends.
type Dialer func(ctx context.Context, site Site) (Prober, error)

// Watcher holds a session to site until it breaks: it calls established
// once the session stands, changed when the session saw its site change
// (GroupViewWatcher: a Group Replication member's new view or election;
// trigger names what changed) and returns when it ended (or ctx did).
type Watcher func(ctx context.Context, site Site, established func(), changed func(trigger, detail string)) error

// TriggerWatchLost is the WatchEvent of an established watch session that
// broke (a killed mysqld closes its sockets).
const TriggerWatchLost = "watch-lost"

// WatchEvent is what a site's watch session reported (Config.OnWatch).
type WatchEvent struct {
	Site string
	// Trigger is TriggerWatchLost or what the Watcher named (e.g.
	// mysqlctl.TriggerViewChange); Detail says more, for logs.
	Trigger, Detail string
}

// DefaultBackoffFactor caps the backoff of an unreachable site at this many
// poll intervals when Config.MaxBackoff is zero.
const DefaultBackoffFactor = 4

// Errors returned by New and Run.
var (
	// ErrInvalidConfig: a Config field is missing or out of range.
	ErrInvalidConfig = errors.New("poller: invalid configuration")
	// ErrRunning: Run was called while the Poller was already running.
	ErrRunning = errors.New("poller: already running")
)

// Config configures New.
type Config struct {
	// Group names the group in observations and logs.
	Group string
	// Sites to probe; names must be unique and non-empty.
	Sites []Site
	// PollInterval is the base time between two probes of a site.
	PollInterval time.Duration
	// ProbeTimeout bounds one probe (dial included). It must be shorter
	// than PollInterval, so a probe never delays the next tick.
	ProbeTimeout time.Duration
	// FailureThreshold is the number of consecutive failed probes after
	// which the statemachine marks a site unreachable; backoff starts only
	// BackoffGrace failures after it. At least 1.
	FailureThreshold int
	// MaxBackoff caps the poll interval of an unreachable site; 0 means
	// DefaultBackoffFactor × PollInterval. Must not be below PollInterval.
	MaxBackoff time.Duration
	// SilenceAfter is the minimum silence threshold (see the package doc);
	// the effective threshold is never below 2 × heartbeat period +
	// 1 × PollInterval. 0 uses that floor.
	SilenceAfter time.Duration
	// Dial opens a site's Prober (see MySQLDialer). Required.
	Dial Dialer
	// Watch, when set, holds a session to each site (see MySQLWatcher): when
	// an established one breaks (a killed mysqld closes its sockets) the
	// site is probed at once instead of at its next tick, so the failure
	// window starts at the crash, not up to a PollInterval later.
	Watch Watcher
	// OnWatch, when set, is called with every WatchEvent: an established
	// watch session that broke (after its site's early probe was asked
	// for) and every change a Watcher reported. It must not block: the
	// daemon runs a Group Replication group's round on it.
	OnWatch func(WatchEvent)
	// Clock stamps observations and drives ticks; nil means SystemClock.
	Clock Clock
	// Logger receives reachability changes; nil means slog.Default(). Lines
	// carry "site"; the caller's logger carries "group" (as the daemon's
	// does) so no line names it twice.
	Logger *slog.Logger
}

// Poller probes the sites of one group. Create it with New or
// NewFromGroup, then call Run once.
type Poller struct {
	cfg     Config
	book    addressBook
	running atomic.Bool

	kickMu sync.Mutex
	kicks  []chan struct{} // one per site loop of the current Run
}

// New validates cfg and returns a Poller.
func New(cfg Config) (*Poller, error) {
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultBackoffFactor * cfg.PollInterval
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new poller for group %s: %w", cfg.Group, err)
	}
	cfg.Sites = append([]Site(nil), cfg.Sites...)
	return &Poller{cfg: cfg, book: newAddressBook(cfg.Sites)}, nil
}

func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.PollInterval <= 0 {
		bad("poll interval %v must be positive", c.PollInterval)
	}
	if c.ProbeTimeout <= 0 || c.ProbeTimeout >= c.PollInterval {
		// A probe longer than the interval would delay ticks or overlap the next probe.
		bad("probe timeout %v must be positive and shorter than the poll interval %v", c.ProbeTimeout, c.PollInterval)
	}
	if c.FailureThreshold < 1 {
		bad("failure threshold %d must be at least 1", c.FailureThreshold)
	}
	if c.MaxBackoff < c.PollInterval {
		bad("max backoff %v is below the poll interval %v", c.MaxBackoff, c.PollInterval)
	}
	if c.SilenceAfter < 0 {
		bad("silence threshold %v is negative", c.SilenceAfter)
	}
	if c.Dial == nil {
		bad("no dial function")
	}
	if len(c.Sites) == 0 {
		bad("no sites")
	}
	seen := map[string]bool{}
	for i, s := range c.Sites {
		if s.Name == "" || s.Addr == "" {
			bad("site %d: name and address are required", i)
		}
		if seen[s.Name] {
			bad("duplicate site name %q", s.Name)
		}
		seen[s.Name] = true
	}
	return errors.Join(errs...)
}

// Sites returns the sites, in configuration order.
func (p *Poller) Sites() []Site { return append([]Site(nil), p.cfg.Sites...) }

// Config returns the configuration in effect (defaults applied).
func (p *Poller) Config() Config {
	c := p.cfg
	c.Sites = p.Sites()
	return c
}

// Run probes every site until ctx ends, calling sink with each
// Observation. sink is called from one goroutine per site, concurrently for
// different sites and in Seq order for one site; it must be quick (a slow
// sink delays that site's next tick). Run returns nil once ctx is done and
// every goroutine it started has ended and every Prober is closed; a
// Prober that ignores its context delays that.
func (p *Poller) Run(ctx context.Context, sink func(Observation)) error {
	if sink == nil {
		return fmt.Errorf("run poller for group %s: %w: nil sink", p.cfg.Group, ErrInvalidConfig)
	}
	if !p.running.CompareAndSwap(false, true) {
		return fmt.Errorf("run poller for group %s: %w", p.cfg.Group, ErrRunning)
	}
	defer p.running.Store(false)
	var wg sync.WaitGroup
	n := len(p.cfg.Sites)
	kicks := make([]chan struct{}, n)
	for i := range kicks {
		kicks[i] = make(chan struct{}, 1)
	}
	p.kickMu.Lock()
	p.kicks = kicks
	p.kickMu.Unlock()
	grid := tickGrid(p.cfg.PollInterval)
	early := make([]chan struct{}, n)
	for i := range early {
		early[i] = make(chan struct{}, 1)
	}
	for i, s := range p.cfg.Sites {
		loop := &siteLoop{
			kick:   kicks[i],
			lost:   early[i],
			peers:  peersOf(early, i),
			cfg:    &p.cfg,
			book:   p.book,
			site:   s,
			offset: firstTick(p.cfg.Group, i, n, p.cfg.PollInterval, grid),
			log:    p.cfg.Logger.With("site", s.Name),
		}
		wg.Go(func() { loop.run(ctx, sink) })
		if p.cfg.Watch != nil {
			wg.Go(func() { p.watch(ctx, s, loop.lost) })
		}
	}
	wg.Wait()
	return nil
}

// Regular ticks fire on a grid: at multiples of tickGrid(PollInterval) of
// the clock's time (every 50 ms at the default 1 s interval), so the sites
// of every group in the process whose ticks fall due within one step are
// probed together and one wake-up of the process serves them all. With a
// tick of its own for each site, at 1,000 sites most of the poller's CPU
// went to waking threads and epoll from sleep for one probe at a time
// (docs/benchmarks/polling.md). A regular tick fires at most one grid step
// after its time, never before, and never drifts: the cadence is kept on
// the exact times. Early probes (Kick, a broken watch session) are never
// held back to the grid, nor are the ticks of a site whose probes are
// failing (detection is not delayed), which run a full interval apart from
// the first failed probe.

// tickGrid is the grid step for a poll interval: a twentieth of it, at
// most 50 ms.
func tickGrid(interval time.Duration) time.Duration {
	return min(interval/20, 50*time.Millisecond)
}

// firstTick is the offset of site i of n's first tick in a group: the
// sites of a group are spread over the interval (their probes and the
// group's observations do not all land in one instant), starting at a
// step chosen by the group's name, so many groups of a few sites spread
// over the grid's steps instead of all starting on the same ones.
func firstTick(group string, i, n int, interval, grid time.Duration) time.Duration {
	steps := 1
	if grid > 0 {
		steps = max(1, int(interval/grid))
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(group))
	step := (int(h.Sum32()%uint32(steps)) + i*steps/n) % steps
	return time.Duration(step) * interval / time.Duration(steps)
}

// untilTick is the wait from now until a tick due at due fires: due
// rounded up to the grid.
func untilTick(due, now time.Time, grid time.Duration) time.Duration {
	if grid > 0 {
		if r := due.Sub(due.Truncate(grid)); r > 0 {
			due = due.Add(grid - r)
		}
	}
	return due.Sub(now)
}

// peersOf is every early-probe channel but site i's own.
func peersOf(early []chan struct{}, i int) []chan struct{} {
	out := make([]chan struct{}, 0, len(early)-1)
	for j, c := range early {
		if j != i {
			out = append(out, c)
		}
	}
	return out
}

// askEarly asks for an early probe on c (siteLoop.lost) unless one is
// already pending.
func askEarly(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default: // one is already pending
	}
}

// watch keeps a Watch session to site s and asks for a probe of s (lost)
// each time an established session breaks. It reconnects at most once a
// poll interval: a server that refuses is the probes' to report.
func (p *Poller) watch(ctx context.Context, s Site, lost chan struct{}) {
	log := p.cfg.Logger.With("site", s.Name)
	for {
		up := false
		err := p.cfg.Watch(ctx, s, func() { up = true }, func(trigger, detail string) {
			p.notify(WatchEvent{Site: s.Name, Trigger: trigger, Detail: detail})
		})
		if ctx.Err() != nil {
			return
		}
		if up {
			log.Debug("poller.watch_lost", "err", err)
			askEarly(lost)
			detail := ""
			if err != nil {
				detail = err.Error()
			}
			p.notify(WatchEvent{Site: s.Name, Trigger: TriggerWatchLost, Detail: detail})
		}
		t := p.cfg.Clock.NewTimer(p.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// notify hands ev to Config.OnWatch, if set.
func (p *Poller) notify(ev WatchEvent) {
	if p.cfg.OnWatch != nil {
		p.cfg.OnWatch(ev)
	}
}

// Kick asks every site for a probe now instead of at its next tick: the
// daemon calls it right after an action, so the next decision rests on
// probes taken after it without waiting up to a poll interval. A site with
// a probe still stuck in flight, or one backing off (long unreachable), is
// not probed early: that would pile up probes on a hung server or count
// failures faster than the failure window allows.
func (p *Poller) Kick() {
	p.kickMu.Lock()
	defer p.kickMu.Unlock()
	for _, k := range p.kicks {
		select {
		case k <- struct{}{}:
		default: // a kick is already pending
		}
	}
}

// KickOthers is Kick for every site but skip: the daemon calls it when
// skip's sidecar reports its mysqld exited, so the replicas' view of it (the
// corroboration) is read now. skip itself is not probed early: a second
// failure sooner than the failure window allows would detect it on the
// probes' count, with no guard of the exit report's (sitepair) applied.
func (p *Poller) KickOthers(skip string) {
	p.kickMu.Lock()
	defer p.kickMu.Unlock()
	for i, k := range p.kicks {
		if i >= len(p.cfg.Sites) || p.cfg.Sites[i].Name == skip {
			continue
		}
		select {
		case k <- struct{}{}:
		default: // a kick is already pending
		}
	}
}

// probeResult is what the probe goroutine hands back.
type probeResult struct {
	st      mysqlctl.Status
	err     error
	expired bool // the probe's context had ended when it returned
}

// siteLoop is the state of one site's goroutine.
type siteLoop struct {
	cfg    *Config
	book   addressBook
	site   Site
	offset time.Duration // of the first tick
	log    *slog.Logger

	kick chan struct{} // Kick: probe now
	// lost: the watch session broke, or another site's probe began a
	// failure run: probe now, if no failure run of this site is counting.
	lost chan struct{}
	// peers are the other sites' lost channels: a failure run starting
	// here asks each for a probe, so the replicas' view of this site (the
	// corroboration: their source gone silent) is read from then on, not
	// up to a PollInterval later.
	peers []chan struct{}
	seq   uint64
	fails int // consecutive failed probes
	// prober belongs to the probe goroutine while one runs; the loop only
	// touches it when no probe is in flight.
	prober Prober
	// inflight is the result channel of a probe that outlived its timeout.
	inflight  chan probeResult
	silence   silenceTracker
	lastClass ErrorClass
	reported  bool // lastClass is meaningful
}

func (s *siteLoop) run(ctx context.Context, sink func(Observation)) {
	defer s.shutdown()
	clock := s.cfg.Clock
	grid := tickGrid(s.cfg.PollInterval)
	now := clock.Now()
	due := now.Add(s.offset) // the tick's exact time; it fires on the grid
	timer := clock.NewTimer(untilTick(due, now, grid))
	defer timer.Stop()
	crossing := false // the timer is set for a silence crossing (silenceCrossing)
	for {
		kicked := false
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
			// A silence-crossing probe restarts the rhythm, as an early one.
			kicked = crossing
		case <-s.kick:
			if !s.kickable() {
				continue
			}
			kicked = true
		case <-s.lost:
			// Only ever the start of a failure window: inside a run of
			// failures an early probe would count the next one sooner
			// than the window allows, and a blip could fail over.
			if s.fails > 0 || !s.kickable() {
				continue
			}
			kicked = true
		}
		crossing = false
		obs, ok := s.probe(ctx)
		if !ok {
			return
		}
		sink(obs)
		if !obs.Reachable && s.fails == 1 {
			// Only a run's first failure: the peers' probes are early reads
			// of their own state, never counted failures of this site, and
			// a site failing on end asks once, not every tick.
			for _, c := range s.peers {
				askEarly(c)
			}
		}
		now := clock.Now()
		switch {
		case kicked:
			// The regular rhythm restarts from the early probe.
			timer.Stop()
			due = now
		case s.fails == 1:
			// A failure run counts from its first probe, which the grid
			// may have held back: the next one must not come sooner than
			// a full interval after it (a blip could fail over).
			due = obs.Started
		}
		due = due.Add(s.delay())
		if due.Before(now) {
			// Fell behind (overloaded machine, slow sink): probe at once,
			// but never make up missed ticks in a burst.
			due = now
		}
		if s.fails > 0 {
			// A failure run ticks on its exact times: the grid must not
			// delay the detection of a failed site.
			timer.Reset(due.Sub(now))
		} else {
			wait := untilTick(due, now, grid)
			if at, ok := silenceCrossing(obs); ok && at.Sub(now) < wait {
				wait, crossing = max(at.Sub(now), 0), true
			}
			timer.Reset(wait)
		}
	}
}

// silenceCrossing returns when a replica whose latest probe saw no news
// from its source (SilentFor > 0, not yet silent) will have been silent for
// longer than its threshold, if nothing arrives in between: a probe then
// reads the verdict the moment it can flip instead of up to a PollInterval
// later (the hung or isolated primary's corroboration). Once silent, or
// when news arrived, the regular rhythm stands: one extra probe per silence
// episode at most, none on a healthy link (heartbeats reach it well within
// the threshold).
func silenceCrossing(obs Observation) (time.Time, bool) {
	if !obs.Reachable || !obs.SilenceKnown || obs.SourceSilent || obs.SilentFor <= 0 {
		return time.Time{}, false
	}
	// One millisecond past the threshold: SilentFor must exceed it.
	return obs.At.Add(obs.SilenceThreshold - obs.SilentFor + time.Millisecond), true
}

// kickable reports whether an early probe may run now: not while a probe is
// stuck in flight (a hung server), not while backing off (long unreachable).
func (s *siteLoop) kickable() bool {
	return s.inflight == nil && s.fails <= s.cfg.FailureThreshold+BackoffGrace
}

// BackoffGrace is how many more failed probes, past FailureThreshold, an
// unreachable site is still polled at the full rate: the failover decided
// right after detection waits for a fresh probe of every site, the lost
// primary included, and must not wait out a backoff.
const BackoffGrace = 4

// delay is the time until the next tick: the poll interval, or after
// FailureThreshold + BackoffGrace consecutive failures a doubling backoff
// capped at MaxBackoff.
func (s *siteLoop) delay() time.Duration {
	d := s.cfg.PollInterval
	// Backing off earlier would slow down failure detection and failover.
	for extra := s.fails - s.cfg.FailureThreshold - BackoffGrace; extra >= 0 && d < s.cfg.MaxBackoff; extra-- {
		d *= 2
	}
	return min(d, s.cfg.MaxBackoff)
}

// probe runs one probe, bounded by ProbeTimeout on the injected clock. It
// returns false when ctx ended (shutdown: nothing to report).
func (s *siteLoop) probe(ctx context.Context) (Observation, bool) {
	clock := s.cfg.Clock
	s.seq++
	obs := Observation{Group: s.cfg.Group, Site: s.site.Name, Seq: s.seq, Started: clock.Now()}
	if s.inflight != nil {
		select {
		case <-s.inflight:
			// The stale probe finally returned; its result is too old to report.
			s.inflight = nil
		default:
			// Starting another probe would pile up goroutines on a hung site.
			return s.finish(obs, mysqlctl.Status{}, fmt.Errorf("probe %s: %w", s.site.Name, ErrProbeStuck)), true
		}
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProbeTimeout)
	done := make(chan probeResult, 1)
	go func() {
		st, err := s.attempt(pctx)
		done <- probeResult{st: st, err: err, expired: pctx.Err() != nil}
	}()
	timer := clock.NewTimer(s.cfg.ProbeTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		cancel()
		if ctx.Err() != nil {
			return Observation{}, false
		}
		if r.err != nil && r.expired {
			// A cancelled query surfaces as "invalid connection", "bad
			// connection"...: the deadline is the real cause.
			r.err = fmt.Errorf("%w: %w", ErrProbeTimeout, r.err)
		}
		return s.finish(obs, r.st, r.err), true
	case <-timer.C():
		cancel()
		s.inflight = done
		return s.finish(obs, mysqlctl.Status{}, fmt.Errorf("probe %s: %w after %v", s.site.Name, ErrProbeTimeout, s.cfg.ProbeTimeout)), true
	case <-ctx.Done():
		cancel()
		s.inflight = done
		return Observation{}, false
	}
}

// attempt runs in the probe goroutine: dial if needed, then read the status.
func (s *siteLoop) attempt(ctx context.Context) (mysqlctl.Status, error) {
	if s.prober == nil {
		pr, err := s.cfg.Dial(ctx, s.site)
		if err == nil && pr == nil {
			err = fmt.Errorf("%w: dial returned no prober", ErrInvalidConfig)
		}
		if err != nil {
			return mysqlctl.Status{}, fmt.Errorf("dial %s (%s): %w", s.site.Name, s.site.Addr, err)
		}
		s.prober = pr
	}
	st, err := s.prober.Status(ctx)
	if err != nil {
		if Classify(err) == ClassAuth || errors.Is(err, mysqlctl.ErrUnsupportedVersion) {
			// Reopen: the password file may have been rotated, or another
			// server (flavor) now answers at this address.
			s.closeProber()
		}
		return mysqlctl.Status{}, fmt.Errorf("status %s: %w", s.site.Name, err)
	}
	return st, nil
}

func (s *siteLoop) closeProber() {
	if c, ok := s.prober.(io.Closer); ok {
		if err := c.Close(); err != nil {
			s.log.Warn("poller: close prober", "err", err)
		}
	}
	s.prober = nil
}

// shutdown waits for a probe still in flight (it owns the prober), then
// closes the prober.
func (s *siteLoop) shutdown() {
	if s.inflight != nil {
		<-s.inflight
		s.inflight = nil
	}
	s.closeProber()
}

// finish stamps and completes an observation and updates the per-site
// bookkeeping (failure streak, silence).
func (s *siteLoop) finish(obs Observation, st mysqlctl.Status, err error) Observation {
	obs.At = s.cfg.Clock.Now()
	obs.Duration = obs.At.Sub(obs.Started)
	if err != nil {
		obs.Err, obs.Class = err, Classify(err)
		s.fails++
		s.logChange(obs)
		return obs
	}
	s.fails = 0
	obs.Reachable, obs.Status = true, st
	source := ""
	if r := st.Replica; r != nil {
		if r.SourceHost != "" {
			source = net.JoinHostPort(r.SourceHost, strconv.Itoa(r.SourcePort))
		}
		obs.SourceAddr = source
		obs.Follows = s.book.lookup(r.SourceHost, r.SourcePort)
		obs.IOConnected = r.IOThread == mysqlctl.ThreadYes
		obs.ReplicationBroken = r.IOError() || r.SQLError()
	}
	obs.SilenceKnown, obs.SilentFor = s.silence.observe(st.Replica, source, obs.At)
	if obs.SilenceKnown {
		obs.SilenceThreshold = silenceThreshold(s.cfg.SilenceAfter, st.Replica.HeartbeatPeriod, s.cfg.PollInterval)
		obs.SourceSilent = obs.SilentFor > obs.SilenceThreshold
	}
	s.logChange(obs)
	return obs
}

// logChange logs when a site's probe outcome class changes, not every tick.
func (s *siteLoop) logChange(obs Observation) {
	if s.reported && obs.Class == s.lastClass {
		return
	}
	first := !s.reported
	s.reported, s.lastClass = true, obs.Class
	switch {
	case obs.Reachable && !first:
		s.log.Info("poller: site reachable", "seq", obs.Seq, "duration", obs.Duration)
	case !obs.Reachable:
		s.log.Warn("poller: probe failed", "seq", obs.Seq, "class", string(obs.Class), "err", obs.Err)
	}
}
