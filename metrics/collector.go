package metrics

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/status"
)

// snapshotCollector computes every gauge from one snapshot per scrape.
type snapshotCollector struct {
	snapshot func() status.Snapshot
	build    prometheus.Metric

	leader, ready, termStart, storeInfo, session *prometheus.Desc

	configLoaded, configOK, configPending *prometheus.Desc

	groupInfo, epoch, writableSites, decision, splitBrain, noPrimary,
	awaitingHuman, blocked, halted, cooldown, inFlight, lastFailover, observeOnly *prometheus.Desc

	siteState, siteActive, lag, ioRunning, sqlRunning, broken, divergent, recovery,
	leaseAge, lastProbe, cacheRole *prometheus.Desc

	gtidLag, applierBlocked, writesStalled, ackWaiting *prometheus.Desc

	routingInSync *prometheus.Desc

	paused, pauseRemaining, withheld, siteHold, failoverReady, expectedWritable, siteReader *prometheus.Desc

	grQuorum, grMembers, grViewSize, grDenominator, grGroupNames *prometheus.Desc
}

func newSnapshotCollector(o Options) *snapshotCollector {
	gs := []string{"group"}
	ss := []string{"group", "site"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("failoverd_"+name, help, labels, nil)
	}
	build := prometheus.MustNewConstMetric(
		d("build_info", "Always 1; the labels identify the build.", "version", "commit", "goversion"),
		prometheus.GaugeValue, 1, o.Version, o.Commit, runtime.Version())
	return &snapshotCollector{
		snapshot: o.Snapshot,
		build:    build,

		leader:    d("leader", "1 while this daemon leads (acts and serves views), else 0. Group and site gauges are exported by the leader only."),
		ready:     d("ready", "1 when /readyz passes: state loaded, leadership known and first probes of every site done."),
		termStart: d("leader_term_start_timestamp_seconds", "When this daemon's current leadership term began (Unix time); absent while not leading."),
		storeInfo: d("store_info", "Always 1; type is the state store backend (file, kubernetes, etcd).", "type"),
		session:   d("election_session_up", "1 while this daemon holds an election session (etcd: a live session lease), whether or not it leads; absent without election in etcd."),

		configLoaded:  d("config_last_reload_success_timestamp_seconds", "When the configuration file this daemon runs was applied: its start or the last reload not refused (Unix time)."),
		configOK:      d("config_last_reload_successful", "0 while the last reload of the configuration file was refused and none applied since (the daemon runs an older file than the one on disk), else 1."),
		configPending: d("config_pending_groups", "Groups still running their previous configuration after a reload: their rebuild waits for a failover or switchover in flight to end."),

		groupInfo:     d("group_info", "Always 1; the labels give the group's engine and fencing mode.", "group", "engine", "fencing"),
		epoch:         d("group_epoch", "The group's epoch (only grows; a failover adds two).", gs...),
		writableSites: d("group_writable_sites", "Sites of the group whose debounced state is writable (more than 1 is a split brain).", gs...),
		decision:      d("group_decision", "Always 1; the labels are the group's latest decision: its action, machine-readable reason and class.", "group", "action", "reason", "class"),
		splitBrain:    d("group_split_brain", "1 while the latest decision says more than one site may accept writes.", gs...),
		noPrimary:     d("group_no_primary", "1 while the latest decision says no site accepts writes and none can be promoted yet.", gs...),
		awaitingHuman: d("group_awaiting_human", "1 while only an operator can move the group on.", gs...),
		blocked:       d("group_failover_blocked", "1 while a failover is needed but a rule refuses it; reason is the refusing decision's reason. Absent otherwise.", "group", "reason"),
		halted:        d("group_escalation_halted", "1 while automatic failover is halted by the escalation rule until an operator acknowledges.", gs...),
		cooldown:      d("group_cooldown_remaining_seconds", "How long automatic failover stays refused after the last one (0 when none).", gs...),
		inFlight:      d("group_failover_in_flight", "1 while a failover or switchover is under way.", gs...),
		lastFailover:  d("group_last_failover_timestamp_seconds", "When the latest completed failover or switchover (kind) promoted its site (Unix time); absent before the first.", "group", "kind"),
		observeOnly:   d("group_observe_only", "1 while the group is in observe mode (mode: observe): it decides and logs what it would do but changes nothing; 0 when it acts.", gs...),

		siteState:      d("site_state", "1 for the site's current debounced state, 0 for the three others.", "group", "site", "state"),
		siteActive:     d("site_active", "1 for the group's recorded primary (active site), else 0.", ss...),
		lag:            d("site_replication_lag_seconds", "Replication lag of a replica; absent when unknown (NULL lag) or without a replication channel.", ss...),
		ioRunning:      d("site_replication_io_running", "1 while the replica's IO (receiver) thread runs; only for sites with a replication channel.", ss...),
		sqlRunning:     d("site_replication_sql_running", "1 while the replica's SQL (applier) thread runs; only for sites with a replication channel.", ss...),
		broken:         d("site_replication_broken", "1 when a replication thread stopped on an error; only for sites with a replication channel.", ss...),
		recovery:       d("site_recovery", "1 while the site recovers: state in-progress (the last failover's old primary not yet a healthy replica of the active site) blocked (diverged: stays fenced until a human repairs or reclones it), recloning or reclone-failed (a reclone a human asked for runs, or failed). Absent otherwise.", "group", "site", "state"),
		divergent:      d("site_divergent_transactions", "Transactions the site holds that the primary lacks (exact under gtid_strict_mode; an upper bound for MariaDB sites marked before counts were kept); 0 when not diverged.", ss...),
		leaseAge:       d("site_sidecar_lease_age_seconds", "Time since the site's sidecar last reported; absent without a sidecar or before its first report to this leader.", ss...),
		lastProbe:      d("site_last_probe_timestamp_seconds", "When the latest probe of the site finished (Unix time); absent before the first.", ss...),
		gtidLag:        d("site_replication_gtid_lag_seconds", "Replication lag of a replica measured from its GTID sets: how long transactions it received have stayed unapplied (0 when none); only for sites with a replication channel.", ss...),
		applierBlocked: d("site_replication_applier_blocked", "1 while the replica's applier is blocked: its threads wait for semi-sync acknowledgements, or what it received stays unapplied while its threads run; only for sites with a replication channel.", ss...),
		writesStalled:  d("site_writes_stalled_awaiting_ack", "1 while commits on the site have waited for a semi-sync acknowledgement longer than the bound (no replica acknowledges); only for sites whose semi-sync source side is on.", ss...),
		ackWaiting:     d("site_semisync_waiting_sessions", "Sessions whose commits wait for a semi-sync acknowledgement; only for sites whose semi-sync source side is on.", ss...),
		cacheRole:      d("cache_role", "1 for the role (master, replica) the site's cache server holds, 0 for the other; absent without a cache or while unknown.", "group", "site", "role"),

		routingInSync: d("routing_in_sync", "1 when the routing follower (kube-service, kube-taint, dns, cache) points at the active site of the newest view, or the reader follower (kube-reader-service, dns-readers) lists the newest reader set.", "group", "follower"),

		paused:           d("group_paused", "1 while an operator's pause is in effect: the group starts no failover, switchover or fence.", gs...),
		pauseRemaining:   d("group_pause_remaining_seconds", "How long the pause in effect lasts yet (0 when not paused).", gs...),
		withheld:         d("group_failover_withheld", "1 while the latest decision withheld a failover (revoke-epoch or promote) because the group is paused, else 0.", gs...),
		siteHold:         d("site_hold", "1 for an operator's hold in effect on the site, by kind (no-promote, maintenance); absent without one.", "group", "site", "kind"),
		failoverReady:    d("failover_ready", "1 when the group would fail over on its own if its primary were lost now by fault (crash: mysqld exits; lost: it answers nothing), else 0; absent before the first decision.", "group", "fault"),
		siteReader:       d("site_reader", "1 while the site is in the group's reader set (read routing: readers.enabled), else 0; absent while read routing is off.", ss...),
		grQuorum:         d("group_replication_quorum", "1 while a majority of the Group Replication group's members (of the sticky denominator), each ONLINE in a view it sees quorate, report the same view; else 0. Only for replication: group groups, after the first round.", gs...),
		grMembers:        d("group_replication_members", "Members of the Group Replication group's winning view per MEMBER_STATE (ONLINE, RECOVERING, UNREACHABLE, ERROR, OFFLINE); 0 for every state without a winning view.", "group", "state"),
		grViewSize:       d("group_replication_view_size", "Members in the Group Replication group's winning view (0 without one).", gs...),
		grDenominator:    d("group_replication_denominator", "The member count the Group Replication majority is taken of: the sticky largest quorate view, at least the configured members before the first verdict.", gs...),
		grGroupNames:     d("group_replication_group_names", "Distinct group names the configured members report (more than 1: two groups run among them, a second bootstrap).", gs...),
		expectedWritable: d("failover_expected_writable_seconds", "Expected time from the fault to the candidate writable (detection plus the wait for the proof); only while failover_ready is 1.", "group", "fault"),
	}
}

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.build.Desc(), c.leader, c.ready, c.termStart, c.storeInfo, c.session,
		c.configLoaded, c.configOK, c.configPending,
		c.groupInfo, c.epoch, c.writableSites, c.decision, c.splitBrain, c.noPrimary,
		c.awaitingHuman, c.blocked, c.halted, c.cooldown, c.inFlight, c.lastFailover, c.observeOnly,
		c.siteState, c.siteActive, c.lag, c.ioRunning, c.sqlRunning, c.broken, c.divergent, c.recovery,
		c.leaseAge, c.lastProbe, c.cacheRole, c.routingInSync,
		c.gtidLag, c.applierBlocked, c.writesStalled, c.ackWaiting,
		c.paused, c.pauseRemaining, c.withheld, c.siteHold, c.failoverReady, c.expectedWritable, c.siteReader,
		c.grQuorum, c.grMembers, c.grViewSize, c.grDenominator, c.grGroupNames,
	} {
		ch <- d
	}
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- c.build
	if c.snapshot == nil {
		return
	}
	snap := c.snapshot()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.leader, boolean(snap.Daemon.Leader))
	gauge(c.ready, boolean(snap.Daemon.Ready))
	if snap.Daemon.Leader && !snap.Daemon.LeaderSince.IsZero() {
		gauge(c.termStart, unix(snap.Daemon.LeaderSince))
	}
	if t := snap.Daemon.StoreType; t != "" {
		gauge(c.storeInfo, 1, oneOf(t, storeTypes))
	}
	if snap.Daemon.StoreType == "etcd" {
		gauge(c.session, boolean(snap.Daemon.Session != ""))
	}
	// Every daemon runs its own file, standbys included.
	if cf := snap.Daemon.Config; !cf.LoadedAt.IsZero() {
		gauge(c.configLoaded, unix(cf.LoadedAt))
		gauge(c.configOK, boolean(cf.LastRefusedAt.IsZero()))
		gauge(c.configPending, float64(len(cf.Pending)))
	}
	// A standby neither decides nor acts: its view of a group is not the
	// one that matters, and exporting it would double every series and
	// alert of a highly available pair.
	if !snap.Daemon.Leader {
		return
	}
	now := snap.At
	if now.IsZero() {
		now = time.Now()
	}
	for _, g := range snap.Groups {
		c.collectGroup(g, now, gauge)
	}
}

func (c *snapshotCollector) collectGroup(g status.Group, now time.Time, gauge func(*prometheus.Desc, float64, ...string)) {
	n := g.Name
	gauge(c.groupInfo, 1, n, g.Engine, g.Fencing)
	gauge(c.epoch, float64(g.Epoch), n)
	class := oneOf(g.Class, classes)
	if g.Action != "" {
		gauge(c.decision, 1, n, oneOf(g.Action, actions), oneOf(g.Reason, reasons), class)
	}
	gauge(c.splitBrain, boolean(class == status.ClassSplitBrain), n)
	gauge(c.noPrimary, boolean(class == status.ClassNoPrimary), n)
	gauge(c.awaitingHuman, boolean(class == status.ClassAwaitingHuman), n)
	if class == status.ClassBlocked {
		gauge(c.blocked, 1, n, oneOf(g.Reason, reasons))
	}
	gauge(c.halted, boolean(g.EscalationHalted), n)
	gauge(c.cooldown, max(g.CooldownRemainingSeconds, 0), n)
	gauge(c.inFlight, boolean(g.InFlight != nil), n)
	gauge(c.observeOnly, boolean(g.Mode == status.ModeObserve), n)
	if f := g.LastFailover; f != nil && !f.At.IsZero() {
		gauge(c.lastFailover, unix(f.At), n, oneOf(f.Kind, lastFailoverKinds))
	}
	c.collectModes(g, now, gauge)
	if gr := g.GroupReplication; gr != nil && gr.Verdict != "" {
		gauge(c.grQuorum, boolean(gr.HasQuorum), n)
		for _, st := range memberStates {
			gauge(c.grMembers, float64(gr.Members[st]), n, st)
		}
		gauge(c.grViewSize, float64(gr.ViewSize), n)
		gauge(c.grDenominator, float64(gr.Denominator), n)
		gauge(c.grGroupNames, float64(len(gr.GroupNames)), n)
	}

	writable := 0
	for _, s := range g.Sites {
		state := oneOf(s.State, states)
		if state == other {
			state = status.StateUnknown
		}
		if state == status.StateWritable {
			writable++
		}
		for _, st := range states {
			gauge(c.siteState, boolean(st == state), n, s.Name, st)
		}
		gauge(c.siteActive, boolean(s.Active), n, s.Name)
		if r := s.Replication; r != nil {
			gauge(c.ioRunning, boolean(r.IORunning), n, s.Name)
			gauge(c.sqlRunning, boolean(r.SQLRunning), n, s.Name)
			gauge(c.broken, boolean(r.Broken), n, s.Name)
			if r.LagKnown {
				gauge(c.lag, r.LagSeconds, n, s.Name)
			}
			gauge(c.gtidLag, max(r.GTIDLagSeconds, 0), n, s.Name)
			gauge(c.applierBlocked, boolean(s.ApplierBlocked != ""), n, s.Name)
		}
		if ss := s.SemiSync; ss != nil && ss.SourceEnabled {
			gauge(c.writesStalled, boolean(s.WritesStalled != ""), n, s.Name)
			gauge(c.ackWaiting, float64(ss.WaitingSessions), n, s.Name)
		}
		var diverged uint64
		for _, d := range g.Diverged {
			if d.Site == s.Name {
				diverged = d.Transactions
			}
		}
		gauge(c.divergent, float64(diverged), n, s.Name)
		if s.Recovery != "" {
			gauge(c.recovery, 1, n, s.Name, oneOf(s.Recovery, recoveries))
		}
		if sc := s.Sidecar; sc != nil && !sc.LastReportAt.IsZero() && sc.LeaseAgeSeconds >= 0 {
			gauge(c.leaseAge, sc.LeaseAgeSeconds, n, s.Name)
		}
		if h := s.Hold; h != nil {
			gauge(c.siteHold, 1, n, s.Name, oneOf(h.Kind, holdKinds))
		}
		if r := s.Reader; r != nil {
			gauge(c.siteReader, boolean(r.Eligible), n, s.Name)
		}
		if !s.LastProbeAt.IsZero() {
			gauge(c.lastProbe, unix(s.LastProbeAt), n, s.Name)
		}
		if role := oneOf(s.CacheRole, cacheRoles); role != other {
			for _, r := range cacheRoles {
				gauge(c.cacheRole, boolean(r == role), n, s.Name, r)
			}
		}
	}
	gauge(c.writableSites, float64(writable), n)
	for _, f := range g.Routing {
		gauge(c.routingInSync, boolean(f.InSync), n, f.Name)
	}
}

// collectModes exports the operator's pause, what it withheld and the
// failover readiness of group g.
func (c *snapshotCollector) collectModes(g status.Group, now time.Time, gauge func(*prometheus.Desc, float64, ...string)) {
	n := g.Name
	gauge(c.paused, boolean(g.Pause != nil), n)
	var left float64
	if p := g.Pause; p != nil {
		left = max(p.Until.Sub(now).Seconds(), 0)
	}
	gauge(c.pauseRemaining, left, n)
	// Only a withheld failover pages: a withheld fence or rejoin waits
	// harmlessly for the pause to end.
	w := g.Withheld
	gauge(c.withheld, boolean(w != nil && (w.Action == string(sitepair.RevokeEpoch) || w.Action == string(sitepair.Promote))), n)
	for _, r := range g.Readiness {
		fault := oneOf(r.Fault, faults)
		gauge(c.failoverReady, boolean(r.Ready), n, fault)
		if r.Ready {
			gauge(c.expectedWritable, max(r.ExpectedWritableSeconds, 0), n, fault)
		}
	}
}

func boolean(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// unix is t in seconds since the epoch, the unit of *_timestamp_seconds.
func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
