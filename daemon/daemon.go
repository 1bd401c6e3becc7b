// Package daemon wires failoverd together: for every group one loop that
// observes (poller), decides (sitepair), acts, persists (store) and
// publishes (the signed view at /active-site), plus the HTTP API and
// optional leader election. docs/design.md ("The loop") names the file of
// each part in the order a failover runs through them, and the invariants
// every step keeps.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/dragonfly"
	"github.com/failoverd/failoverd/hooks"
	"github.com/failoverd/failoverd/kube"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/sdnotify"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/view"
)

// Options are the daemon's dependencies; zero values pick production ones.
type Options struct {
	// Logger receives structured logs; default slog.Default().
	Logger *slog.Logger
	// Clock is the daemon's clock; default time.Now.
	Clock func() time.Time
	// Store overrides the configured state store (tests).
	Store store.Store
	// Dial opens admin connections to sites; default mysqlctl.
	Dial func(ctx context.Context, g configs.Group, s configs.Site) (Instance, error)
	// Observe builds a group's observations; default the poller.
	Observe func(ctx context.Context, g configs.Group, log *slog.Logger) (Observations, error)
	// Failpoint is called after each failover step (crash tests).
	Failpoint func(step string)
	// Identity names this daemon in leader election; default the hostname.
	Identity string
	// Followers builds what follows a group's primary (routing, cache);
	// default: the Kubernetes, DNS and cache followers its configuration asks for.
	Followers func(g configs.Group, c *kube.Clusters, log *slog.Logger) ([]Follower, error)
	// ReaderFollowers builds what follows a group's reader set; default:
	// the reader Service and reader DNS record its configuration asks for.
	ReaderFollowers func(g configs.Group, c *kube.Clusters, log *slog.Logger) []ReaderFollower
	// Events receives counters and histograms (the metrics package); default none.
	Events Events
	// Metrics serves GET /metrics; nil answers 404.
	Metrics http.Handler
	// Version and Commit identify the build in the status.
	Version, Commit string
	// ConfigFile is the file the configuration was loaded from: a reload
	// reads it again ("" refuses reloads).
	ConfigFile string
	// Reloads reloads ConfigFile on every receive (SIGHUP); nil: only the
	// API reloads.
	Reloads <-chan os.Signal
	// Notifier tells systemd the daemon is ready and pings its watchdog
	// while every group loop makes progress (notify.go); nil: not run by
	// systemd with Type=notify.
	Notifier *sdnotify.Notifier
}

// Daemon runs every group of a configuration.
type Daemon struct {
	// cfg is the configuration the daemon started with: its daemon section
	// and clusters hold for the whole run (a reload that changes them is
	// refused); the groups run d.want's.
	cfg   *configs.Config
	opts  Options
	log   *slog.Logger
	store store.Store
	// mu guards the fields below it up to pub; the groups' own fields
	// have their locks.
	mu      sync.RWMutex
	groups  []*group
	want    *configs.Config    // the configuration the groups are brought to (reload.go)
	conf    loadedConfig       // what status says of it
	pending map[string]pending // groups still running an older configuration, by name
	runCtx  context.Context    // Run's, once every group runs; nil before
	closed  bool               // Run is stopping: no reload starts
	// reloadMu orders reloads, the retries of pending groups and the start
	// of a leadership term (which loads every group's state).
	reloadMu sync.Mutex
	wg       sync.WaitGroup // Run's goroutines, reloads included
	pub      *publisher
	tokens   configs.APITokens
	listener net.Listener
	clusters *kube.Clusters
	lead     leadership
	tls      *tls.Config // nil serves plain HTTP
	started  time.Time
	// etcd and etcdStore are set with the etcd store (election in etcd).
	etcd      *clientv3.Client
	etcdStore *store.Etcd
	// cmStore is set with the ConfigMap store (a Lease leader claims a term in it).
	cmStore *store.ConfigMap
}

// New prepares a daemon: it opens the state store, reads the secrets and
// binds the HTTP listener, and fails with a clear error on any problem
// (a corrupt state file stops startup here). Nothing acts before Run.
func New(ctx context.Context, cfg *configs.Config, opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Dial == nil {
		opts.Dial = dialMySQL
	}
	if opts.Identity == "" && cfg.Daemon.AdvertiseURL != "" {
		// Followers forward to the leader's identity (see leaderURL).
		opts.Identity = strings.TrimRight(cfg.Daemon.AdvertiseURL, "/")
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if opts.Events == nil {
		opts.Events = noEvents{}
	}
	d := &Daemon{cfg: cfg, opts: opts, log: opts.Logger, clusters: kube.New(cfg.Clusters), pub: &publisher{},
		started: opts.Clock(), want: cfg}
	d.conf = loadedConfig{digest: cfg.Digest(), at: d.started}
	if f := cfg.Daemon.ViewSigningKeyFile; f != "" {
		key, err := configs.ReadSecret(f)
		if err != nil {
			return nil, fmt.Errorf("view signing key: %w", err)
		}
		d.pub.key = []byte(key)
	}
	// The API's tokens are read once, here: a reload never changes them
	// (the daemon section needs a restart, configs.RestartChanges).
	tokens, err := cfg.ReadAPITokens()
	if err != nil {
		return nil, fmt.Errorf("api tokens: %w", err)
	}
	d.tokens = tokens
	tlsCfg, err := cfg.Daemon.TLS.ServerConfig()
	if err != nil {
		return nil, fmt.Errorf("api tls: %w", err)
	}
	d.tls = tlsCfg
	st, err := d.openStore(opts)
	if err != nil {
		return nil, err
	}
	d.store = st
	for _, gc := range cfg.Groups {
		g, err := d.newGroup(gc)
		if err != nil {
			return nil, err
		}
		// Restart amnesia guard: the persisted state is loaded before anything
		// observes or acts; an unreadable state stops startup.
		if err := g.load(ctx); err != nil {
			return nil, err
		}
		d.groups = append(d.groups, g)
	}
	// The counters exist at 0 before the first scrape and the first event.
	for _, g := range d.groups {
		d.startSeries(g)
	}
	ln, err := net.Listen("tcp", cfg.Daemon.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Daemon.Listen, err)
	}
	d.listener = ln
	return d, nil
}

// Addr is the HTTP server's address.
func (d *Daemon) Addr() string { return d.listener.Addr().String() }

func (d *Daemon) openStore(opts Options) (store.Store, error) {
	if opts.Store != nil {
		return opts.Store, nil
	}
	ss := d.cfg.Daemon.StateStore
	switch ss.Type {
	case "kubernetes":
		cl, err := d.clusters.Client(ss.Cluster)
		if err != nil {
			return nil, fmt.Errorf("state store: %w", err)
		}
		d.cmStore = store.NewConfigMap(cl, ss.Namespace, ss.ConfigMap, opts.Clock)
		return d.cmStore, nil
	case configs.StoreEtcd:
		cli, err := openEtcd(ss.Etcd)
		if err != nil {
			return nil, fmt.Errorf("state store: %w", err)
		}
		d.etcd = cli
		d.etcdStore = store.NewEtcd(cli, ss.Etcd.Prefix, opts.Clock)
		return d.etcdStore, nil
	default:
		f, err := store.OpenFile(ss.Path, opts.Clock)
		if err != nil {
			return nil, fmt.Errorf("state store: %w", err)
		}
		return f, nil
	}
}

func (d *Daemon) newGroup(gc configs.Group) (*group, error) {
	dial := func(ctx context.Context, s configs.Site) (Instance, error) { return d.opts.Dial(ctx, gc, s) }
	g, err := newGroupCore(gc, d.store, d.pub, dial, d.opts.Clock, d.opts.Failpoint, d.log.With("group", gc.Name))
	if err != nil {
		return nil, err
	}
	log := g.log
	build := d.opts.Followers
	if build == nil {
		build = defaultFollowers
	}
	fs, err := build(gc, d.clusters, log)
	if err != nil {
		return nil, fmt.Errorf("group %s: %w", gc.Name, err)
	}
	// Prevents an observing group from moving routing or the cache.
	g.follow = newHandoff(followersOf(gc, fs), log)
	g.follow.interval = gc.RoutingReconcileInterval
	g.follow.now = d.opts.Clock // routing times (the history's routed step) on the daemon's clock
	g.follow.onRepair = func(follower string, _ view.View, _ []string) { d.opts.Events.RoutingRepaired(gc.Name, follower) }
	g.follow.onDone = func(follower string, v view.View, err error) {
		d.opts.Events.RoutingDone(gc.Name, follower, err)
		if err == nil && follower == dragonfly.FollowerName {
			d.opts.Events.CachePromoted(gc.Name, v.ActiveSite)
		}
	}
	buildReaders := d.opts.ReaderFollowers
	if buildReaders == nil {
		buildReaders = defaultReaderFollowers
	}
	// Prevents an observing group from moving the reader targets.
	if rfs := buildReaders(gc, d.clusters, log); len(rfs) > 0 && !gc.Observing() {
		g.readFollow = newReaderHandoff(rfs, log)
		g.readFollow.interval = gc.RoutingReconcileInterval
		g.readFollow.now = d.opts.Clock
		g.readFollow.onRepair = func(follower string, _ view.View, _ []string) { d.opts.Events.RoutingRepaired(gc.Name, follower) }
		g.readFollow.onDone = func(follower string, _ view.View, err error) { d.opts.Events.RoutingDone(gc.Name, follower, err) }
	}
	g.events = d.opts.Events
	g.identity = d.opts.Identity
	if len(gc.Hooks) > 0 {
		r := hooks.New(gc.Name, gc.Hooks, log)
		r.SetOnResult(func(res hooks.Result) { d.opts.Events.HookDone(gc.Name, res.Hook, res.Event, res.OK) })
		g.hooks = r
	}
	return g, nil
}

// newGroupCore is a group's decision loop and its servers, without routing,
// cache, hooks or events (the daemon adds them; the harness runs without).
func newGroupCore(gc configs.Group, st store.Store, pub *publisher, dial Dialer, clock func() time.Time,
	failpoint func(string), log *slog.Logger) (*group, error) {
	pol := policyOf(gc)
	// The async decisions never run on a Group Replication group (round
	// runs grRound): its policy is not used, so not checked.
	if err := pol.Validate(); err != nil && gc.Replication != configs.ReplicationGroup {
		return nil, fmt.Errorf("group %s: %w", gc.Name, err)
	}
	g := &group{
		cfg: gc, flavor: flavorOf(gc.Engine), policy: pol, store: st, pub: pub, now: clock, log: log,
		actionTimeout: gc.RelayDrainTimeout + 30*time.Second, // maxLagWait only shortens the drain
		fenced:        map[string]uint64{},
		sidecars:      newSidecars(gc),
		pace:          livePacer{},
		failpointHook: failpoint,
		requests:      make(chan request),
		reclones:      map[string]bool{},
		recloned:      make(chan recloneResult),
		retire:        make(chan chan string),
		gone:          make(chan struct{}),
	}
	if gc.Replication == configs.ReplicationGroup {
		// Prevents any fence, promote, read_only or replica statement on a
		// member of a Group Replication group, whichever path asks: the
		// group elects and fences itself (grloop.go).
		dial = groupReplicationDial(gc, dial)
		g.gr = newGRLoop(gc)
	} else {
		// Prevents any MySQL write by an observing group, whichever path asks.
		dial = observeOnlyDial(gc, dial)
	}
	g.servers = &servers{group: gc, conns: newConnections(dial, gc.Sites), log: log, secret: gc.Credentials.Replication.Password}
	if gc.Observing() {
		log.Warn("group.observe_mode", "note", "decides and logs what it would do (decision.would); changes nothing on MySQL, routing, the cache, hooks or the epoch")
	}
	return g, nil
}

// policyOf maps a group's configuration onto the decision policy.
func policyOf(gc configs.Group) sitepair.Policy {
	return sitepair.Policy{
		Fencing:          sitepair.FencingMode(gc.FencingMode()),
		LeaseTimeout:     gc.Sidecar.LeaseTimeout,
		FailoverCooldown: gc.FailoverCooldown,
		EscalationCount:  gc.Escalation.MaxFailovers,
		EscalationWindow: gc.Escalation.Window,
		MaxLag:           gc.MaxCandidateLag,
		PreferSite:       gc.SplitBrain.PreferSite,
		Detection:        statemachine.Detection(gc.Detection),
		// A replica that lost the primary well before the daemon did has a
		// link problem of its own; a few failure windows is "at the same time".
		CorroborationWindow: max(10*time.Second, 4*time.Duration(gc.FailureThreshold)*gc.PollInterval),
		// Every failing probe refused, and never a single one.
		RefusedProbes:  max(2, gc.FailureThreshold),
		CatchUpTimeout: gc.RelayDrainTimeout,
		MaxLagWait:     gc.MaxLagWait,
		// The new primary's writable probes must pass the recovery
		// threshold before it reads as writable; no alarm before that.
		PromotionSettle: max(sitepair.DefaultPromotionSettle, 2*(time.Duration(gc.RecoveryThreshold+1)*gc.PollInterval+gc.ProbeTimeout)),
		// With AFTER_COMMIT, MySQL shows other sessions commits no replica has.
		SemiSyncAfterSync: gc.Engine != configs.EngineMariaDB,
		Rejoin:            sitepair.RejoinPolicy(gc.Rejoin),
		// A sidecar's exit report shortens detection only within the
		// failure window: past it the probes decide as they always did.
		ExitWindow: time.Duration(gc.FailureThreshold) * gc.PollInterval,
	}
}

// dialMySQL opens an admin connection to a site with its group's
// credentials.
func dialMySQL(ctx context.Context, g configs.Group, site configs.Site) (Instance, error) {
	pw, err := g.Credentials.Admin.Password()
	if err != nil {
		return nil, err
	}
	// The same TLS settings (CA, client certificate, server name) as the poller.
	tlsCfg, err := g.TLS.ClientConfig()
	if err != nil {
		return nil, err
	}
	return mysqlctl.Open(ctx, mysqlctl.Options{Addr: site.MySQL.Address, User: g.Credentials.Admin.User, Password: pw,
		TLS: tlsCfg, DialTimeout: g.ProbeTimeout, MaxOpenConns: 2})
}

func (d *Daemon) group(name string) *group {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, g := range d.groups {
		if g.cfg.Name == name {
			return g
		}
	}
	return nil
}

func (d *Daemon) isLeader() bool { return d.lead.leading() }

// Run observes, decides and acts for every group until ctx ends, then shuts
// down cleanly: loops stop between actions, connections close. A reload
// (SIGHUP, POST /v1/reload) adds, removes and rebuilds groups meanwhile.
func (d *Daemon) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	groups := d.groupList()
	for _, g := range groups {
		if err := d.observe(ctx, g); err != nil {
			return err
		}
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := d.serve(ctx, d.log); err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("http: %w", err)
			cancel()
		}
	}()
	if le := d.cfg.Daemon.LeaderElection; le.Enabled {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := d.elect(ctx); err != nil {
				errc <- err
				cancel()
			}
		}()
	} else {
		// A single daemon leads from its start: views served before it by
		// an earlier process are accounted for by ServingSince.
		d.lead.begin(ctx, d.opts.Clock(), nil)
		d.lead.observed(d.opts.Identity)
	}
	for _, g := range groups {
		d.startGroup(g)
	}
	d.mu.Lock()
	d.runCtx = ctx // reloads may start
	d.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.reloads(ctx)
	}()
	d.log.Info("daemon.started", "groups", len(groups), "listen", d.Addr(), "store", d.store.Describe())
	d.notifyReady(ctx)
	<-ctx.Done()
	d.sdNotify(sdnotify.Stopping)
	// No reload starts from here, and none is under way past this point.
	d.reloadMu.Lock()
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.reloadMu.Unlock()
	var closing sync.WaitGroup
	for _, g := range d.groupList() {
		closing.Add(1)
		go func() {
			defer closing.Done()
			d.closeGroup(g)
		}()
	}
	closing.Wait()
	d.wg.Wait()
	if d.etcd != nil {
		_ = d.etcd.Close() // the process is stopping
	}
	d.log.Info("daemon.stopped")
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}
