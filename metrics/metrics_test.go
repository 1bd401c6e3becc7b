package metrics_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/failoverd/failoverd/metrics"
	"github.com/failoverd/failoverd/status"
)

// daemonEvents is a copy of daemon.Events (metrics must not import daemon);
// TestEventsMatchesDaemon keeps the copy honest.
type daemonEvents interface {
	ProbeDone(group, site string, d time.Duration, reached bool)
	FailoverDone(group, kind, result string, d time.Duration)
	PhaseDone(group, phase string, d time.Duration)
	WritesUnavailable(group string, d time.Duration)
	Fenced(group, site, by string)
	ProofUsed(group, proof string)
	RoutingDone(group, follower string, err error)
	SplitBrainResolved(group string)
	CachePromoted(group, site string)
	HookDone(group, hook, event string, ok bool)
	RoutingRepaired(group, follower string)
	ConfigReloaded(result string)
	GroupPrimaryFollowed(group, kind string, d time.Duration)
}

var _ daemonEvents = (*metrics.Metrics)(nil)

// TestEventsMatchesDaemon reads daemon/events.go and checks that Metrics has
// every method of daemon.Events and daemon.SeriesStarter with the same
// parameter types, and that the copies here list them all, so the lead's
// `var _ daemon.Events = (*metrics.Metrics)(nil)` keeps compiling and the
// daemon's StartGroup call reaches the counters.
func TestEventsMatchesDaemon(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../daemon/events.go", nil, 0)
	if err != nil {
		t.Fatalf("parse daemon/events.go: %v", err)
	}
	for name, copyT := range map[string]reflect.Type{
		"Events":        reflect.TypeFor[daemonEvents](),
		"SeriesStarter": reflect.TypeFor[daemonSeriesStarter](),
	} {
		var iface *ast.InterfaceType
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == name {
				iface, _ = ts.Type.(*ast.InterfaceType)
			}
			return iface == nil
		})
		if iface == nil {
			t.Errorf("no interface %s in daemon/events.go", name)
			continue
		}
		checkMethods(t, name, iface, copyT)
	}
}

func checkMethods(t *testing.T, iname string, iface *ast.InterfaceType, copyT reflect.Type) {
	t.Helper()
	mt := reflect.TypeFor[*metrics.Metrics]()
	if got, want := copyT.NumMethod(), len(iface.Methods.List); got != want {
		t.Errorf("the interface copy has %d methods, daemon.%s %d", got, iname, want)
	}
	for _, m := range iface.Methods.List {
		name := m.Names[0].Name
		var want []string
		for _, p := range m.Type.(*ast.FuncType).Params.List {
			for range max(len(p.Names), 1) {
				want = append(want, types(p.Type))
			}
		}
		meth, ok := mt.MethodByName(name)
		if !ok {
			t.Errorf("Metrics lacks daemon.%s method %s", iname, name)
			continue
		}
		var got []string
		for i := 1; i < meth.Type.NumIn(); i++ { // In(0) is the receiver
			got = append(got, meth.Type.In(i).String())
		}
		if meth.Type.NumOut() != 0 || !slices.Equal(got, want) {
			t.Errorf("Metrics.%s takes %v, daemon.%s.%s takes %v", name, got, iname, name, want)
		}
	}
}

func types(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return types(e.X) + "." + e.Sel.Name
	case *ast.ArrayType:
		return "[]" + types(e.Elt)
	case *ast.MapType:
		return "map[" + types(e.Key) + "]" + types(e.Value)
	default:
		return fmt.Sprintf("%T", e)
	}
}

var (
	at       = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	since    = at.Add(-time.Hour)
	failedAt = at.Add(-10 * time.Minute)
)

// fixture is a populated snapshot: one group blocked by the cooldown with a
// replica, a broken and diverged DR site, sidecars and a cache; one in a
// split brain with a failover in flight, halted by the escalation rule.
func fixture() status.Snapshot {
	return status.Snapshot{
		At: at,
		Daemon: status.Daemon{
			Identity: "d0", Version: "v1.2.3", Commit: "abc123", StartedAt: since,
			LeaderElection: true, Leader: true, LeaderSince: since, Ready: true,
			StoreType: "etcd", Session: "etcd session 694d8a1b2c3d4e5f, ttl 5s",
			Config: status.Config{File: "/etc/failoverd/failoverd.yaml", Digest: "0123abcd", LoadedAt: since,
				LastRefusedAt: at, LastRefused: "reload refused: 1 configuration problem(s)",
				Pending: []status.PendingGroup{{Group: "billing", Reason: "a switchover from a to b is in flight"}}},
		},
		Groups: []status.Group{{
			Name: "orders", Engine: "mariadb", Fencing: "sidecar", Epoch: 7, ActiveSite: "east",
			Action: "alert", Reason: "cooldown", Class: status.ClassBlocked, Message: "free text 0-1-42",
			CooldownRemainingSeconds: 42,
			LastFailover:             &status.Failover{Kind: "failover", From: "west", To: "east", At: failedAt, Epoch: 7, PromotionGTID: "0-1-42", Proof: "lease-expired"},
			Diverged:                 []status.Divergence{{Site: "dr", GTID: "0-9-3", Transactions: 3}},
			Sites: []status.Site{{
				Name: "east", Role: "primary-candidate", State: status.StateWritable, Active: true,
				Executed: "0-1-42", LastProbeAt: at, LastReachableAt: at,
				Sidecar:       &status.Sidecar{LastReportAt: at.Add(-time.Second), LeaseAgeSeconds: 1, Epoch: 7},
				CacheRole:     "master",
				SemiSync:      &status.SemiSync{SourceEnabled: true, WaitingSessions: 3, LongestWaitSeconds: 12},
				WritesStalled: "3 sessions waiting for a semi-sync acknowledgement",
			}, {
				Name: "west", Role: "primary-candidate", State: status.StateReadOnly,
				Executed: "0-1-41", ReplicatingFrom: "east", LastProbeAt: at,
				Replication:    &status.Replication{IORunning: true, SQLRunning: true, LagSeconds: 1.5, LagKnown: true, GTIDLagSeconds: 40},
				ApplierBlocked: "transactions it received 40s ago are still not applied",
				SemiSync:       &status.SemiSync{},
				Sidecar:        &status.Sidecar{LeaseAgeSeconds: -1},
				CacheRole:      "replica", Recovery: status.RecoveryInProgress,
				Reader: &status.Reader{Eligible: true, Why: "replicating from east, lag 1.5s", Since: since, LagSeconds: 1.5},
			}, {
				Name: "dr", Role: "dr-only", State: status.StateUnreachable,
				Replication: &status.Replication{IORunning: true, Broken: true, LastError: "Error 1062 on 0-9-3"},
				ProbeError:  "dial tcp: i/o timeout", Diverged: "0-9-3", Recovery: status.RecoveryBlocked,
				Hold:   &status.Pause{Kind: "maintenance", By: "alice", Reason: "upgrade", Since: since, Until: at.Add(time.Hour)},
				Reader: &status.Reader{Why: "diverged", Since: since, LagSeconds: -1},
			}},
			Routing: []status.Follower{{Name: "kube-service", InSync: true, State: "ok"}, {Name: "dns", State: "error", Error: "boom"}},
			Readiness: []status.Readiness{
				{Fault: "crash", Ready: true, Candidate: "west", Proof: "primary-down", ExpectedWritableSeconds: 6.5, Reason: "promote", Message: "free text"},
				{Fault: "lost", Reason: "await-fence-confirmation", Message: "free text"},
			},
		}, {
			Name: "billing", Engine: "mysql", Fencing: "semisync", Mode: status.ModeObserve, Epoch: 12,
			Action: "fence-sites", Reason: "split-brain-keep-promoted", Class: status.ClassSplitBrain,
			EscalationHalted: true,
			InFlight:         &status.InFlight{ID: "f-1", Kind: "switchover", From: "a", To: "b", Step: "drain", StartedAt: at},
			Pause:            &status.Pause{By: "bob", Reason: "network work", Since: since, Until: at.Add(90 * time.Second)},
			Withheld:         &status.Withheld{Action: "revoke-epoch", Reason: "primary-down", Target: "b", Message: "free text"},
			Sites: []status.Site{
				{Name: "a", State: status.StateWritable, SemiSync: &status.SemiSync{SourceEnabled: true}},
				{Name: "b", State: status.StateWritable},
			},
		}},
	}
}

func newFixture() *metrics.Metrics {
	return metrics.New(metrics.Options{Snapshot: fixture, Version: "v1.2.3", Commit: "abc123"})
}

func TestGaugesFromSnapshot(t *testing.T) {
	m := newFixture()
	ts := func(t time.Time) string { return fmt.Sprint(float64(t.Unix())) }
	want := `
# HELP failoverd_leader 1 while this daemon leads (acts and serves views), else 0. Group and site gauges are exported by the leader only.
# TYPE failoverd_leader gauge
failoverd_leader 1
# HELP failoverd_ready 1 when /readyz passes: state loaded, leadership known and first probes of every site done.
# TYPE failoverd_ready gauge
failoverd_ready 1
# HELP failoverd_leader_term_start_timestamp_seconds When this daemon's current leadership term began (Unix time); absent while not leading.
# TYPE failoverd_leader_term_start_timestamp_seconds gauge
failoverd_leader_term_start_timestamp_seconds ` + ts(since) + `
# HELP failoverd_group_epoch The group's epoch (only grows; a failover adds two).
# TYPE failoverd_group_epoch gauge
failoverd_group_epoch{group="billing"} 12
failoverd_group_epoch{group="orders"} 7
# HELP failoverd_group_info Always 1; the labels give the group's engine and fencing mode.
# TYPE failoverd_group_info gauge
failoverd_group_info{engine="mariadb",fencing="sidecar",group="orders"} 1
failoverd_group_info{engine="mysql",fencing="semisync",group="billing"} 1
# HELP failoverd_group_writable_sites Sites of the group whose debounced state is writable (more than 1 is a split brain).
# TYPE failoverd_group_writable_sites gauge
failoverd_group_writable_sites{group="billing"} 2
failoverd_group_writable_sites{group="orders"} 1
# HELP failoverd_group_decision Always 1; the labels are the group's latest decision: its action, machine-readable reason and class.
# TYPE failoverd_group_decision gauge
failoverd_group_decision{action="alert",class="blocked",group="orders",reason="cooldown"} 1
failoverd_group_decision{action="fence-sites",class="split-brain",group="billing",reason="split-brain-keep-promoted"} 1
# HELP failoverd_group_split_brain 1 while the latest decision says more than one site may accept writes.
# TYPE failoverd_group_split_brain gauge
failoverd_group_split_brain{group="billing"} 1
failoverd_group_split_brain{group="orders"} 0
# HELP failoverd_group_no_primary 1 while the latest decision says no site accepts writes and none can be promoted yet.
# TYPE failoverd_group_no_primary gauge
failoverd_group_no_primary{group="billing"} 0
failoverd_group_no_primary{group="orders"} 0
# HELP failoverd_group_awaiting_human 1 while only an operator can move the group on.
# TYPE failoverd_group_awaiting_human gauge
failoverd_group_awaiting_human{group="billing"} 0
failoverd_group_awaiting_human{group="orders"} 0
# HELP failoverd_group_failover_blocked 1 while a failover is needed but a rule refuses it; reason is the refusing decision's reason. Absent otherwise.
# TYPE failoverd_group_failover_blocked gauge
failoverd_group_failover_blocked{group="orders",reason="cooldown"} 1
# HELP failoverd_group_escalation_halted 1 while automatic failover is halted by the escalation rule until an operator acknowledges.
# TYPE failoverd_group_escalation_halted gauge
failoverd_group_escalation_halted{group="billing"} 1
failoverd_group_escalation_halted{group="orders"} 0
# HELP failoverd_group_cooldown_remaining_seconds How long automatic failover stays refused after the last one (0 when none).
# TYPE failoverd_group_cooldown_remaining_seconds gauge
failoverd_group_cooldown_remaining_seconds{group="billing"} 0
failoverd_group_cooldown_remaining_seconds{group="orders"} 42
# HELP failoverd_group_failover_in_flight 1 while a failover or switchover is under way.
# TYPE failoverd_group_failover_in_flight gauge
failoverd_group_failover_in_flight{group="billing"} 1
failoverd_group_failover_in_flight{group="orders"} 0
# HELP failoverd_group_last_failover_timestamp_seconds When the latest completed failover or switchover (kind) promoted its site (Unix time); absent before the first.
# TYPE failoverd_group_last_failover_timestamp_seconds gauge
failoverd_group_last_failover_timestamp_seconds{group="orders",kind="failover"} ` + ts(failedAt) + `
# HELP failoverd_group_observe_only 1 while the group is in observe mode (mode: observe): it decides and logs what it would do but changes nothing; 0 when it acts.
# TYPE failoverd_group_observe_only gauge
failoverd_group_observe_only{group="billing"} 1
failoverd_group_observe_only{group="orders"} 0
# HELP failoverd_site_state 1 for the site's current debounced state, 0 for the three others.
# TYPE failoverd_site_state gauge
failoverd_site_state{group="billing",site="a",state="read-only"} 0
failoverd_site_state{group="billing",site="a",state="unknown"} 0
failoverd_site_state{group="billing",site="a",state="unreachable"} 0
failoverd_site_state{group="billing",site="a",state="writable"} 1
failoverd_site_state{group="billing",site="b",state="read-only"} 0
failoverd_site_state{group="billing",site="b",state="unknown"} 0
failoverd_site_state{group="billing",site="b",state="unreachable"} 0
failoverd_site_state{group="billing",site="b",state="writable"} 1
failoverd_site_state{group="orders",site="dr",state="read-only"} 0
failoverd_site_state{group="orders",site="dr",state="unknown"} 0
failoverd_site_state{group="orders",site="dr",state="unreachable"} 1
failoverd_site_state{group="orders",site="dr",state="writable"} 0
failoverd_site_state{group="orders",site="east",state="read-only"} 0
failoverd_site_state{group="orders",site="east",state="unknown"} 0
failoverd_site_state{group="orders",site="east",state="unreachable"} 0
failoverd_site_state{group="orders",site="east",state="writable"} 1
failoverd_site_state{group="orders",site="west",state="read-only"} 1
failoverd_site_state{group="orders",site="west",state="unknown"} 0
failoverd_site_state{group="orders",site="west",state="unreachable"} 0
failoverd_site_state{group="orders",site="west",state="writable"} 0
# HELP failoverd_site_active 1 for the group's recorded primary (active site), else 0.
# TYPE failoverd_site_active gauge
failoverd_site_active{group="billing",site="a"} 0
failoverd_site_active{group="billing",site="b"} 0
failoverd_site_active{group="orders",site="dr"} 0
failoverd_site_active{group="orders",site="east"} 1
failoverd_site_active{group="orders",site="west"} 0
# HELP failoverd_site_replication_lag_seconds Replication lag of a replica; absent when unknown (NULL lag) or without a replication channel.
# TYPE failoverd_site_replication_lag_seconds gauge
failoverd_site_replication_lag_seconds{group="orders",site="west"} 1.5
# HELP failoverd_site_replication_io_running 1 while the replica's IO (receiver) thread runs; only for sites with a replication channel.
# TYPE failoverd_site_replication_io_running gauge
failoverd_site_replication_io_running{group="orders",site="dr"} 1
failoverd_site_replication_io_running{group="orders",site="west"} 1
# HELP failoverd_site_replication_sql_running 1 while the replica's SQL (applier) thread runs; only for sites with a replication channel.
# TYPE failoverd_site_replication_sql_running gauge
failoverd_site_replication_sql_running{group="orders",site="dr"} 0
failoverd_site_replication_sql_running{group="orders",site="west"} 1
# HELP failoverd_site_replication_broken 1 when a replication thread stopped on an error; only for sites with a replication channel.
# TYPE failoverd_site_replication_broken gauge
failoverd_site_replication_broken{group="orders",site="dr"} 1
failoverd_site_replication_broken{group="orders",site="west"} 0
# HELP failoverd_site_replication_gtid_lag_seconds Replication lag of a replica measured from its GTID sets: how long transactions it received have stayed unapplied (0 when none); only for sites with a replication channel.
# TYPE failoverd_site_replication_gtid_lag_seconds gauge
failoverd_site_replication_gtid_lag_seconds{group="orders",site="dr"} 0
failoverd_site_replication_gtid_lag_seconds{group="orders",site="west"} 40
# HELP failoverd_site_replication_applier_blocked 1 while the replica's applier is blocked: its threads wait for semi-sync acknowledgements, or what it received stays unapplied while its threads run; only for sites with a replication channel.
# TYPE failoverd_site_replication_applier_blocked gauge
failoverd_site_replication_applier_blocked{group="orders",site="dr"} 0
failoverd_site_replication_applier_blocked{group="orders",site="west"} 1
# HELP failoverd_site_writes_stalled_awaiting_ack 1 while commits on the site have waited for a semi-sync acknowledgement longer than the bound (no replica acknowledges); only for sites whose semi-sync source side is on.
# TYPE failoverd_site_writes_stalled_awaiting_ack gauge
failoverd_site_writes_stalled_awaiting_ack{group="billing",site="a"} 0
failoverd_site_writes_stalled_awaiting_ack{group="orders",site="east"} 1
# HELP failoverd_site_semisync_waiting_sessions Sessions whose commits wait for a semi-sync acknowledgement; only for sites whose semi-sync source side is on.
# TYPE failoverd_site_semisync_waiting_sessions gauge
failoverd_site_semisync_waiting_sessions{group="billing",site="a"} 0
failoverd_site_semisync_waiting_sessions{group="orders",site="east"} 3
# HELP failoverd_site_divergent_transactions Transactions the site holds that the primary lacks (exact under gtid_strict_mode; an upper bound for MariaDB sites marked before counts were kept); 0 when not diverged.
# TYPE failoverd_site_divergent_transactions gauge
failoverd_site_divergent_transactions{group="billing",site="a"} 0
failoverd_site_divergent_transactions{group="billing",site="b"} 0
failoverd_site_divergent_transactions{group="orders",site="dr"} 3
failoverd_site_divergent_transactions{group="orders",site="east"} 0
failoverd_site_divergent_transactions{group="orders",site="west"} 0
# HELP failoverd_site_sidecar_lease_age_seconds Time since the site's sidecar last reported; absent without a sidecar or before its first report to this leader.
# TYPE failoverd_site_sidecar_lease_age_seconds gauge
failoverd_site_sidecar_lease_age_seconds{group="orders",site="east"} 1
# HELP failoverd_site_last_probe_timestamp_seconds When the latest probe of the site finished (Unix time); absent before the first.
# TYPE failoverd_site_last_probe_timestamp_seconds gauge
failoverd_site_last_probe_timestamp_seconds{group="orders",site="east"} ` + ts(at) + `
failoverd_site_last_probe_timestamp_seconds{group="orders",site="west"} ` + ts(at) + `
# HELP failoverd_cache_role 1 for the role (master, replica) the site's cache server holds, 0 for the other; absent without a cache or while unknown.
# TYPE failoverd_cache_role gauge
failoverd_cache_role{group="orders",role="master",site="east"} 1
failoverd_cache_role{group="orders",role="replica",site="east"} 0
failoverd_cache_role{group="orders",role="master",site="west"} 0
failoverd_cache_role{group="orders",role="replica",site="west"} 1
# HELP failoverd_routing_in_sync 1 when the routing follower (kube-service, kube-taint, dns, cache) points at the active site of the newest view, or the reader follower (kube-reader-service, dns-readers) lists the newest reader set.
# TYPE failoverd_routing_in_sync gauge
failoverd_routing_in_sync{follower="dns",group="orders"} 0
failoverd_routing_in_sync{follower="kube-service",group="orders"} 1
# HELP failoverd_group_paused 1 while an operator's pause is in effect: the group starts no failover, switchover or fence.
# TYPE failoverd_group_paused gauge
failoverd_group_paused{group="billing"} 1
failoverd_group_paused{group="orders"} 0
# HELP failoverd_group_pause_remaining_seconds How long the pause in effect lasts yet (0 when not paused).
# TYPE failoverd_group_pause_remaining_seconds gauge
failoverd_group_pause_remaining_seconds{group="billing"} 90
failoverd_group_pause_remaining_seconds{group="orders"} 0
# HELP failoverd_group_failover_withheld 1 while the latest decision withheld a failover (revoke-epoch or promote) because the group is paused, else 0.
# TYPE failoverd_group_failover_withheld gauge
failoverd_group_failover_withheld{group="billing"} 1
failoverd_group_failover_withheld{group="orders"} 0
# HELP failoverd_site_hold 1 for an operator's hold in effect on the site, by kind (no-promote, maintenance); absent without one.
# TYPE failoverd_site_hold gauge
failoverd_site_hold{group="orders",kind="maintenance",site="dr"} 1
# HELP failoverd_site_reader 1 while the site is in the group's reader set (read routing: readers.enabled), else 0; absent while read routing is off.
# TYPE failoverd_site_reader gauge
failoverd_site_reader{group="orders",site="dr"} 0
failoverd_site_reader{group="orders",site="west"} 1
# HELP failoverd_failover_ready 1 when the group would fail over on its own if its primary were lost now by fault (crash: mysqld exits; lost: it answers nothing), else 0; absent before the first decision.
# TYPE failoverd_failover_ready gauge
failoverd_failover_ready{fault="crash",group="orders"} 1
failoverd_failover_ready{fault="lost",group="orders"} 0
# HELP failoverd_failover_expected_writable_seconds Expected time from the fault to the candidate writable (detection plus the wait for the proof); only while failover_ready is 1.
# TYPE failoverd_failover_expected_writable_seconds gauge
failoverd_failover_expected_writable_seconds{fault="crash",group="orders"} 6.5
`
	gatherAndCompare(t, m.Gatherer(), want)
}

// TestPauseAndWithheldGauges guards the pause alerts' inputs: the remaining
// time counts from the snapshot's clock and never goes negative, only a
// withheld failover (revoke-epoch, promote) sets failover_withheld (a
// withheld rejoin waits harmlessly for the pause to end), and resuming
// clears both at the next scrape.
func TestPauseAndWithheldGauges(t *testing.T) {
	snap := fixture()
	m := metrics.New(metrics.Options{Snapshot: func() status.Snapshot { return snap }})
	billing := map[string]string{"group": "billing"}
	for _, c := range []struct {
		name           string
		until          time.Time
		withheld       string
		wantLeft, want float64
	}{
		{"failover withheld", at.Add(time.Hour), "revoke-epoch", 3600, 1},
		{"promotion withheld", at.Add(time.Minute), "promote", 60, 1},
		{"rejoin withheld", at.Add(time.Minute), "rejoin", 60, 0},
		{"pause ran out before the daemon dropped it", at.Add(-time.Second), "", 0, 0},
	} {
		snap.Groups[1].Pause.Until = c.until
		snap.Groups[1].Withheld = nil
		if c.withheld != "" {
			snap.Groups[1].Withheld = &status.Withheld{Action: c.withheld, Reason: "r"}
		}
		if v := gaugeValue(t, m.Gatherer(), "failoverd_group_pause_remaining_seconds", billing); v != c.wantLeft {
			t.Errorf("%s: pause remaining = %v, want %v", c.name, v, c.wantLeft)
		}
		if v := gaugeValue(t, m.Gatherer(), "failoverd_group_failover_withheld", billing); v != c.want {
			t.Errorf("%s: failover withheld = %v, want %v", c.name, v, c.want)
		}
	}
	snap.Groups[1].Pause, snap.Groups[1].Withheld = nil, nil
	for name, want := range map[string]float64{"failoverd_group_paused": 0, "failoverd_group_pause_remaining_seconds": 0, "failoverd_group_failover_withheld": 0} {
		if v := gaugeValue(t, m.Gatherer(), name, billing); v != want {
			t.Errorf("resumed: %s = %v, want %v", name, v, want)
		}
	}
}

// TestSiteHoldAndReadinessGauges guards the maintenance silences and the
// readiness alert: a hold is exported only while in effect (released: the
// series goes, so the replica alerts come back), readiness only once the
// daemon computed it, and the expected time to writable only when ready.
func TestSiteHoldAndReadinessGauges(t *testing.T) {
	snap := fixture()
	m := metrics.New(metrics.Options{Snapshot: func() status.Snapshot { return snap }})
	snap.Groups[0].Sites[1].Hold = &status.Pause{Kind: "no-promote", By: "alice", Reason: "slow disks", Until: at.Add(time.Hour)}
	if v := gaugeValue(t, m.Gatherer(), "failoverd_site_hold", map[string]string{"group": "orders", "site": "west", "kind": "no-promote"}); v != 1 {
		t.Errorf("no-promote hold = %v", v)
	}
	snap.Groups[0].Sites[1].Hold, snap.Groups[0].Sites[2].Hold = nil, nil
	if n := count(t, m.Gatherer(), "failoverd_site_hold"); n != 0 {
		t.Errorf("%d hold series after every hold was released", n)
	}

	snap.Groups[0].Readiness[0] = status.Readiness{Fault: "crash", Reason: "cooldown", Message: "m"}
	if v := gaugeValue(t, m.Gatherer(), "failoverd_failover_ready", map[string]string{"group": "orders", "fault": "crash"}); v != 0 {
		t.Errorf("ready{crash} = %v while the cooldown blocks it", v)
	}
	if n := count(t, m.Gatherer(), "failoverd_failover_expected_writable_seconds"); n != 0 {
		t.Errorf("%d expected-writable series while no fault is ready", n)
	}
	snap.Groups[0].Readiness = nil
	if n := count(t, m.Gatherer(), "failoverd_failover_ready"); n != 0 {
		t.Errorf("%d readiness series before the first decision", n)
	}
}

func TestBuildInfo(t *testing.T) {
	m := metrics.New(metrics.Options{Version: "v1.2.3", Commit: "abc123"})
	mf := family(t, m.Gatherer(), "failoverd_build_info")
	if mf == nil || len(mf.Metric) != 1 {
		t.Fatalf("failoverd_build_info: %v", mf)
	}
	got := labelMap(mf.Metric[0])
	if got["version"] != "v1.2.3" || got["commit"] != "abc123" || !strings.HasPrefix(got["goversion"], "go") || mf.Metric[0].GetGauge().GetValue() != 1 {
		t.Errorf("failoverd_build_info = %v %v", got, mf.Metric[0].GetGauge().GetValue())
	}
	// Without a snapshot only the build info and the Go and process
	// collectors are there.
	if n := count(t, m.Gatherer(), "failoverd_leader") + count(t, m.Gatherer(), "failoverd_site_state"); n != 0 {
		t.Errorf("without a snapshot: %d series of snapshot gauges", n)
	}
}

// A standby neither decides nor acts: it exports its leadership and
// readiness, never a group's or a site's gauges (an HA pair would alert
// twice, once on stale facts).
func TestStandbyExportsNoGroupGauges(t *testing.T) {
	snap := fixture()
	snap.Daemon.Leader, snap.Daemon.LeaderSince = false, time.Time{}
	m := metrics.New(metrics.Options{Snapshot: func() status.Snapshot { return snap }})
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		name := mf.GetName()
		if strings.HasPrefix(name, "failoverd_group_") || strings.HasPrefix(name, "failoverd_site_") ||
			name == "failoverd_cache_role" || name == "failoverd_routing_in_sync" || name == "failoverd_leader_term_start_timestamp_seconds" ||
			name == "failoverd_failover_ready" || name == "failoverd_failover_expected_writable_seconds" {
			t.Errorf("a standby exports %s", name)
		}
	}
	if v := gaugeValue(t, m.Gatherer(), "failoverd_leader", nil); v != 0 {
		t.Errorf("failoverd_leader = %v on a standby", v)
	}
}

// The snapshot is read at each scrape: nothing stays from the previous one.
func TestGaugesFollowTheSnapshot(t *testing.T) {
	snap := fixture()
	m := metrics.New(metrics.Options{Snapshot: func() status.Snapshot { return snap }})
	if v := gaugeValue(t, m.Gatherer(), "failoverd_group_failover_blocked", map[string]string{"group": "orders", "reason": "cooldown"}); v != 1 {
		t.Fatalf("blocked = %v", v)
	}
	snap.Groups[0].Class, snap.Groups[0].Reason, snap.Groups[0].Action = status.ClassHealthy, "healthy", "none"
	snap.Groups[0].Sites[1].Replication.LagKnown = false
	snap.Groups = snap.Groups[:1]
	for name, want := range map[string]int{
		"failoverd_group_failover_blocked":       0,
		"failoverd_site_replication_lag_seconds": 0,
		"failoverd_group_epoch":                  1,
		"failoverd_group_decision":               1,
	} {
		if n := count(t, m.Gatherer(), name); n != want {
			t.Errorf("%s: %d series after the snapshot changed, want %d", name, n, want)
		}
	}
	if v := gaugeValue(t, m.Gatherer(), "failoverd_group_decision", map[string]string{"group": "orders", "action": "none", "reason": "healthy", "class": "healthy"}); v != 1 {
		t.Errorf("decision = %v", v)
	}
}

func TestEvents(t *testing.T) {
	m := newFixture()
	m.ProbeDone("orders", "east", 3*time.Millisecond, true)
	m.ProbeDone("orders", "east", 40*time.Millisecond, true)
	m.ProbeDone("orders", "dr", time.Second, false)
	m.FailoverDone("orders", "failover", "promoted", 3500*time.Millisecond)
	m.FailoverDone("orders", "switchover", "failed", time.Minute)
	m.PhaseDone("orders", "proof", 2*time.Second)
	m.PhaseDone("orders", "publish", 2*time.Millisecond)
	m.WritesUnavailable("orders", 300*time.Millisecond)
	m.Fenced("orders", "west", "daemon")
	m.Fenced("orders", "west", "sidecar")
	m.ProofUsed("orders", "lease-expired")
	m.RoutingDone("orders", "dns", nil)
	m.RoutingDone("orders", "dns", errors.New("a long error text naming 0-1-42"))
	m.SplitBrainResolved("billing")
	m.CachePromoted("orders", "east")

	want := `
# HELP failoverd_probe_failures_total Probes of a site that did not reach the server.
# TYPE failoverd_probe_failures_total counter
failoverd_probe_failures_total{group="orders",site="dr"} 1
# HELP failoverd_failovers_total Failovers and switchovers (kind) that ended, by result (promoted, failed, superseded).
# TYPE failoverd_failovers_total counter
failoverd_failovers_total{group="orders",kind="failover",result="promoted"} 1
failoverd_failovers_total{group="orders",kind="switchover",result="failed"} 1
# HELP failoverd_fences_total Sites set read-only and read back by the daemon, or reported fenced by their sidecar (by).
# TYPE failoverd_fences_total counter
failoverd_fences_total{by="daemon",group="orders",site="west"} 1
failoverd_fences_total{by="sidecar",group="orders",site="west"} 1
# HELP failoverd_fence_proofs_total Promotions by the fence proof they rested on.
# TYPE failoverd_fence_proofs_total counter
failoverd_fence_proofs_total{group="orders",proof="lease-expired"} 1
# HELP failoverd_routing_operations_total Passes of a routing follower (Service selector, taints, DNS, cache) by result (ok, error).
# TYPE failoverd_routing_operations_total counter
failoverd_routing_operations_total{follower="dns",group="orders",result="error"} 1
failoverd_routing_operations_total{follower="dns",group="orders",result="ok"} 1
# HELP failoverd_split_brain_resolutions_total Split brains resolved by fencing every site but the rightful primary.
# TYPE failoverd_split_brain_resolutions_total counter
failoverd_split_brain_resolutions_total{group="billing"} 1
# HELP failoverd_cache_promotions_total Times the cache primary (Dragonfly/Redis) moved to a site.
# TYPE failoverd_cache_promotions_total counter
failoverd_cache_promotions_total{group="orders",site="east"} 1
`
	// Only events make series here: StartGroup (not called) makes the
	// zero ones (TestStartGroupCreatesEveryCounterAtZero).
	gatherAndCompare(t, m.Gatherer(), want)

	for _, h := range []struct {
		name   string
		labels map[string]string
		count  uint64
		sum    float64
		le     float64 // an upper bound
		below  uint64  // observations at or below le
	}{
		{"failoverd_probe_duration_seconds", map[string]string{"group": "orders", "site": "east"}, 2, 0.043, 0.005, 1},
		{"failoverd_failover_duration_seconds", map[string]string{"group": "orders", "kind": "failover"}, 1, 3.5, 5, 1},
		{"failoverd_failover_phase_duration_seconds", map[string]string{"group": "orders", "phase": "proof"}, 1, 2, 1, 0},
		{"failoverd_failover_phase_duration_seconds", map[string]string{"group": "orders", "phase": "publish"}, 1, 0.002, 0.0025, 1},
		{"failoverd_switchover_write_unavailable_seconds", map[string]string{"group": "orders"}, 1, 0.3, 0.5, 1},
	} {
		got := histogram(t, m.Gatherer(), h.name, h.labels)
		if got == nil {
			t.Errorf("%s%v: no series", h.name, h.labels)
			continue
		}
		if got.GetSampleCount() != h.count || !near(got.GetSampleSum(), h.sum) {
			t.Errorf("%s%v: count %d sum %v, want %d %v", h.name, h.labels, got.GetSampleCount(), got.GetSampleSum(), h.count, h.sum)
		}
		found := false
		for _, b := range got.Bucket {
			if b.GetUpperBound() == h.le {
				found = true
				if b.GetCumulativeCount() != h.below {
					t.Errorf("%s%v: %d at or below %v, want %d", h.name, h.labels, b.GetCumulativeCount(), h.le, h.below)
				}
			}
		}
		if !found {
			t.Errorf("%s: no bucket %v", h.name, h.le)
		}
	}
	// Failed probes are not timed, failed failovers neither.
	if got := histogram(t, m.Gatherer(), "failoverd_probe_duration_seconds", map[string]string{"group": "orders", "site": "dr"}); got != nil {
		t.Errorf("a failed probe was timed: %v", got)
	}
	if got := histogram(t, m.Gatherer(), "failoverd_failover_duration_seconds", map[string]string{"group": "orders", "kind": "switchover"}); got != nil {
		t.Errorf("a failed switchover was timed: %v", got)
	}
}

func TestHandler(t *testing.T) {
	m := newFixture()
	m.ProbeDone("orders", "east", time.Millisecond, true)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	for _, want := range []string{
		"failoverd_build_info{", "failoverd_site_state{", "failoverd_probe_duration_seconds_bucket{",
		"go_goroutines ", "process_start_time_seconds ", "promhttp_metric_handler_requests_total{",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// Every metric has help text, follows the naming conventions promlint
// checks, and failoverd's are in base units under the prefix.
func TestHelpAndLint(t *testing.T) {
	m := populated(t)
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.TrimSpace(mf.GetHelp()) == "" {
			t.Errorf("%s has no help text", mf.GetName())
		}
		if n := mf.GetName(); strings.HasPrefix(n, "failoverd_") && nonBaseUnit.MatchString(n) {
			t.Errorf("%s is not in base units", n)
		}
	}
	for _, p := range lint(t, m.Gatherer()) {
		if strings.HasPrefix(p.Metric, "failoverd_") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
}

// withGroupReplication is the fixture with a replication: group group
// whose survivor lost its majority.
func withGroupReplication() status.Snapshot {
	s := fixture()
	s.Groups = append(s.Groups, status.Group{Name: "gr", Engine: "mysql", Fencing: "group", ActiveSite: "a", Epoch: 3,
		Action: "alert", Reason: "group-no-quorum", Class: "blocked",
		Sites: []status.Site{{Name: "a", State: status.StateReadOnly}, {Name: "b", State: status.StateUnreachable}, {Name: "c", State: status.StateUnreachable}},
		GroupReplication: &status.GroupReplication{Verdict: "no-quorum", Denominator: 3, MaxViewSize: 3, GroupNames: []string{"g1"},
			Members: map[string]int{}}})
	return s
}

// A Group Replication group's quorum, members per state, view size and
// sticky denominator are gauges; a followed primary change is counted by
// kind and timed.
func TestGroupReplicationGauges(t *testing.T) {
	m := metrics.New(metrics.Options{Snapshot: func() status.Snapshot {
		s := withGroupReplication()
		gr := s.Groups[len(s.Groups)-1].GroupReplication
		gr.Verdict, gr.HasQuorum, gr.ViewSize, gr.Members = "quorate", true, 2, map[string]int{"ONLINE": 2}
		return s
	}})
	m.GroupPrimaryFollowed("gr", "failover-observed", 300*time.Millisecond)
	m.GroupPrimaryFollowed("gr", "teleport", time.Second)
	g := m.Gatherer()
	for name, want := range map[string]float64{"failoverd_group_replication_quorum": 1, "failoverd_group_replication_view_size": 2,
		"failoverd_group_replication_denominator": 3, "failoverd_group_replication_group_names": 1} {
		if got := gaugeValue(t, g, name, map[string]string{"group": "gr"}); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := gaugeValue(t, g, "failoverd_group_replication_members", map[string]string{"group": "gr", "state": "ONLINE"}); got != 2 {
		t.Errorf("ONLINE members = %v, want 2", got)
	}
	if got := gaugeValue(t, g, "failoverd_group_replication_members", map[string]string{"group": "gr", "state": "UNREACHABLE"}); got != 0 {
		t.Errorf("UNREACHABLE members = %v, want 0", got)
	}
	c := find(t, g, "failoverd_group_replication_primary_changes_total", map[string]string{"group": "gr", "kind": "failover-observed"})
	if c == nil || c.GetCounter().GetValue() != 1 {
		t.Errorf("primary changes %v, want 1 failover-observed", c)
	}
	if h := histogram(t, g, "failoverd_group_replication_follow_seconds", map[string]string{"group": "gr"}); h == nil || h.GetSampleCount() != 2 {
		t.Errorf("follow histogram %v, want 2 samples", h)
	}
	if find(t, g, "failoverd_group_replication_quorum", map[string]string{"group": "orders"}) != nil {
		t.Error("an async group exports a Group Replication quorum")
	}
}

var nonBaseUnit = regexp.MustCompile(`_(ms|us|ns|milliseconds|microseconds|nanoseconds|minutes|hours|days|kilobytes|megabytes|percent)(_|$)`)

// populated returns metrics over the fixture with every event called once,
// gathered once so the zero series exist: every failoverd_ family is there.
func populated(t *testing.T) *metrics.Metrics {
	t.Helper()
	m := metrics.New(metrics.Options{Snapshot: withGroupReplication, Version: "v1.2.3", Commit: "abc123"})
	m.GroupPrimaryFollowed("gr", "failover-observed", 300*time.Millisecond)
	m.ProbeDone("orders", "east", time.Millisecond, true)
	m.ProbeDone("orders", "dr", time.Second, false)
	m.FailoverDone("orders", "failover", "promoted", time.Second)
	m.PhaseDone("orders", "drain", time.Millisecond)
	m.WritesUnavailable("orders", time.Second)
	m.Fenced("orders", "west", "daemon")
	m.ProofUsed("orders", "fence-confirmed")
	m.RoutingDone("orders", "kube-service", nil)
	m.SplitBrainResolved("billing")
	m.CachePromoted("orders", "east")
	m.RoutingRepaired("orders", "dns")
	m.HookDone("orders", "proxysql", "after-promote", true)
	m.ConfigReloaded("refused")
	if _, err := m.Gatherer().Gather(); err != nil {
		t.Fatal(err)
	}
	return m
}

func family(t *testing.T, g prometheus.Gatherer, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

func find(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mf := family(t, g, name)
	if mf == nil {
		return nil
	}
	for _, m := range mf.Metric {
		if reflect.DeepEqual(labelMap(m), labels) || (len(labels) == 0 && len(m.Label) == 0) {
			return m
		}
	}
	return nil
}

func gaugeValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	m := find(t, g, name, labels)
	if m == nil {
		t.Fatalf("no series %s%v", name, labels)
	}
	return m.GetGauge().GetValue()
}

func histogram(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) *dto.Histogram {
	t.Helper()
	if m := find(t, g, name, labels); m != nil {
		return m.GetHistogram()
	}
	return nil
}

func labelMap(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// The store backend and, with the etcd store, whether this daemon holds an
// election session (leader or not) are exported by every daemon.
func TestStoreAndSession(t *testing.T) {
	snap := fixture()
	snap.Daemon.Leader = false
	snap.Daemon.StoreType, snap.Daemon.Session = "etcd", "etcd session 694d8a1b2c3d4e5f, ttl 5s"
	m := metrics.New(metrics.Options{Snapshot: func() status.Snapshot { return snap }})
	if v := gaugeValue(t, m.Gatherer(), "failoverd_store_info", map[string]string{"type": "etcd"}); v != 1 {
		t.Errorf("failoverd_store_info{type=etcd} = %v", v)
	}
	if v := gaugeValue(t, m.Gatherer(), "failoverd_election_session_up", nil); v != 1 {
		t.Errorf("failoverd_election_session_up = %v with a session", v)
	}
	snap.Daemon.Session = ""
	if v := gaugeValue(t, m.Gatherer(), "failoverd_election_session_up", nil); v != 0 {
		t.Errorf("failoverd_election_session_up = %v without a session", v)
	}
	snap.Daemon.StoreType = "zookeeper"
	if find(t, m.Gatherer(), "failoverd_store_info", map[string]string{"type": "other"}) == nil {
		t.Error("an unknown store type must read other (bounded labels)")
	}
}

// A recovering old primary and a diverged site are exported with their
// recovery state; a healthy site is absent.
func TestSiteRecovery(t *testing.T) {
	m := newFixture()
	for site, state := range map[string]string{"west": "in-progress", "dr": "blocked"} {
		if v := gaugeValue(t, m.Gatherer(), "failoverd_site_recovery", map[string]string{"group": "orders", "site": site, "state": state}); v != 1 {
			t.Errorf("failoverd_site_recovery{site=%s,state=%s} = %v", site, state, v)
		}
	}
	for _, mt := range family(t, m.Gatherer(), "failoverd_site_recovery").GetMetric() {
		if labelMap(mt)["site"] == "east" {
			t.Error("the healthy primary has a recovery series")
		}
	}
}

// Reloads of the configuration file: counted by result from the start
// (both series at 0, for increase()), and every daemon, standbys included
// (each runs its own file), exports when its file was applied, whether the
// last reload was refused and how many groups wait for their rebuild.
func TestConfigReloadMetrics(t *testing.T) {
	snap := fixture()
	snap.Daemon.Leader = false
	m := metrics.New(metrics.Options{Snapshot: func() status.Snapshot { return snap }})
	gatherAndCompare(t, m.Gatherer(), `
# HELP failoverd_config_reloads_total Reloads of the configuration file (SIGHUP or POST /v1/reload) by result (applied, refused).
# TYPE failoverd_config_reloads_total counter
failoverd_config_reloads_total{result="applied"} 0
failoverd_config_reloads_total{result="refused"} 0
`)
	m.ConfigReloaded("applied")
	m.ConfigReloaded("refused")
	m.ConfigReloaded("refused")
	if c := find(t, m.Gatherer(), "failoverd_config_reloads_total", map[string]string{"result": "refused"}); c.GetCounter().GetValue() != 2 {
		v := c.GetCounter().GetValue()
		t.Errorf("refused reloads = %v, want 2", v)
	}
	if v := gaugeValue(t, m.Gatherer(), "failoverd_config_last_reload_success_timestamp_seconds", nil); v != float64(since.Unix()) {
		t.Errorf("last reload success = %v, want %v", v, since.Unix())
	}
	if v := gaugeValue(t, m.Gatherer(), "failoverd_config_last_reload_successful", nil); v != 0 {
		t.Errorf("last reload successful = %v after a refusal", v)
	}
	if v := gaugeValue(t, m.Gatherer(), "failoverd_config_pending_groups", nil); v != 1 {
		t.Errorf("pending groups = %v, want 1", v)
	}
	snap.Daemon.Config.LastRefusedAt, snap.Daemon.Config.Pending = time.Time{}, nil
	if v := gaugeValue(t, m.Gatherer(), "failoverd_config_last_reload_successful", nil); v != 1 {
		t.Errorf("last reload successful = %v after an applied one", v)
	}
}

// TestSiteReaderGauge guards failoverd_site_reader: 1 for a reader, 0 for a
// site out of the set, and no series while read routing is off (no Reader).
func TestSiteReaderGauge(t *testing.T) {
	snap := fixture()
	m := metrics.New(metrics.Options{Snapshot: func() status.Snapshot { return snap }})
	for i := range snap.Groups[0].Sites {
		snap.Groups[0].Sites[i].Reader = nil
	}
	if n := count(t, m.Gatherer(), "failoverd_site_reader"); n != 0 {
		t.Fatalf("%d reader series with read routing off", n)
	}
	snap.Groups[0].Sites[1].Reader = &status.Reader{Eligible: true, Why: "replicating from east, lag 0s"}
	snap.Groups[0].Sites[2].Reader = &status.Reader{Eligible: false, Why: "lag 12s over maxLag 5s", LagSeconds: 12}
	if v := gaugeValue(t, m.Gatherer(), "failoverd_site_reader", map[string]string{"group": "orders", "site": "west"}); v != 1 {
		t.Errorf("west reader = %v, want 1", v)
	}
	if v := gaugeValue(t, m.Gatherer(), "failoverd_site_reader", map[string]string{"group": "orders", "site": "dr"}); v != 0 {
		t.Errorf("dr reader = %v, want 0", v)
	}
	if n := count(t, m.Gatherer(), "failoverd_site_reader"); n != 2 {
		t.Errorf("%d reader series, want 2 (only sites with a reader state)", n)
	}
}
