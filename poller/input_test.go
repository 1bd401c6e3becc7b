package poller

import (
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
)

func mariaSet(s string) gtid.Set { return gtid.MustParse(gtid.MariaDB, s) }

// appliedStatus is a read-only MariaDB replica whose SQL thread runs, with
// its IO thread in state io and the given received and executed sets.
func appliedStatus(io mysqlctl.ThreadState, retrieved, executed string) mysqlctl.Status {
	return mysqlctl.Status{ReadOnly: true, Executed: mariaSet(executed),
		Replica: &mysqlctl.ReplicaStatus{IOThread: io, SQLThread: mysqlctl.ThreadYes, Retrieved: mariaSet(retrieved)}}
}

// semiEverywhere is a MariaDB replica's status with both semi-sync sides on.
func semiEverywhere(st mysqlctl.Status) mysqlctl.Status {
	st.SemiSync = mysqlctl.SemiSyncStatus{Available: true, PrimaryEnabled: true, ReplicaEnabled: true, PrimaryActive: true}
	return st
}

// reachableView is a site view whose last reachable probe read st.
func reachableView(st mysqlctl.Status) SiteView {
	return SiteView{State: statemachine.ReadOnly, HasReachable: true,
		LastReachable: Observation{At: t0, Reachable: true, Status: st, Follows: "a", IOConnected: true}}
}

// The old primary's semi-sync wait count reaches the decision: how many
// replicas hold each acknowledged write decides how many may be unreachable
// when it is promoted away from (ack-holder-unreachable).
func TestSiteObservationCarriesTheSemiSyncWaitCount(t *testing.T) {
	v := SiteView{Name: "a", State: statemachine.Unreachable, HasReachable: true, LastReachable: Observation{
		At: t0, Reachable: true, Status: mysqlctl.Status{SemiSync: mysqlctl.SemiSyncStatus{Available: true, PrimaryEnabled: true, PrimaryActive: true, WaitForReplicas: 2}},
	}}
	o := siteObservation(0, configs.Site{Name: "a", Role: configs.RolePrimaryCandidate}, v)
	if !o.SemiSync.Known || !o.SemiSync.Enabled || o.SemiSync.WaitForReplicas != 2 || !o.LastReachableAt.Equal(t0) {
		t.Fatalf("observation %+v", o.SemiSync)
	}
}

// Issue 26, hole 9: the observation carries what the decision needs:
// sessions and appliers waiting for acknowledgements (the SQL thread's own
// state counts when the processlist read did not), the GTID-measured lag
// and a stopped applier.
func TestSiteObservationCarriesAckWaitsAndGTIDLag(t *testing.T) {
	st := semiEverywhere(appliedStatus(mysqlctl.ThreadYes, "0-1-20", "0-1-3"))
	st.Replica.SQLState = "Waiting for semi-sync ACK from slave"
	v := SiteView{State: statemachine.ReadOnly, HasReachable: true, BacklogAge: 40 * time.Second,
		LastReachable: Observation{Reachable: true, Status: st, Follows: "a", IOConnected: true}}
	o := siteObservation(1, configs.Site{Name: "b", Role: "primary-candidate"}, v)
	if o.BacklogAge != 40*time.Second || o.ApplierStopped || !o.AckWaits.Known || o.AckWaits.Appliers != 1 || !o.SemiSync.Enabled {
		t.Fatalf("observation: backlog %v, applier stopped %t, ack waits %+v, semi-sync %+v", o.BacklogAge, o.ApplierStopped, o.AckWaits, o.SemiSync)
	}
	st.Replica.SQLThread, st.Replica.SQLState = mysqlctl.ThreadNo, ""
	st.AckWaits = mysqlctl.AckWaits{Known: true, Sessions: 2, Longest: 9 * time.Second}
	v.LastReachable.Status = st
	o = siteObservation(1, configs.Site{Name: "b", Role: "primary-candidate"}, v)
	if !o.ApplierStopped || o.AckWaits != (sitepair.AckWaitObservation{Known: true, Sessions: 2, Longest: 9 * time.Second}) {
		t.Fatalf("observation: applier stopped %t, ack waits %+v", o.ApplierStopped, o.AckWaits)
	}
}

// A tail received only in part (the source died mid-transaction: the IO
// thread stopped, the applier read all of its relay log and still does not
// have it) is not something the site has: counting it would promote a
// candidate for transactions it can never apply.
func TestSiteObservationDropsAPartialTrailingTransaction(t *testing.T) {
	const idle, applying = "Slave has read all relay log; waiting for more updates", "Reading event from the relay log"
	tests := []struct {
		name          string
		io            mysqlctl.ThreadState
		state         string
		retrieved     string
		wantRetrieved string
	}{
		{"relay log exhausted short of the tail: dropped", mysqlctl.ThreadNo, idle, "0-1-30", ""},
		{"still applying: kept", mysqlctl.ThreadNo, applying, "0-1-30", "0-1-30"},
		{"IO thread running (more may come): kept", mysqlctl.ThreadYes, idle, "0-1-30", "0-1-30"},
		{"everything applied: kept", mysqlctl.ThreadNo, idle, "0-1-29", "0-1-29"},
	}
	for _, tt := range tests {
		st := appliedStatus(tt.io, tt.retrieved, "0-1-29")
		st.Replica.SQLState = tt.state
		o := siteObservation(1, configs.Site{Name: "b", Role: configs.RolePrimaryCandidate}, reachableView(st))
		var want gtid.Set
		if tt.wantRetrieved != "" {
			want = mariaSet(tt.wantRetrieved)
		}
		if !o.Retrieved.Equal(want) {
			t.Errorf("%s: Retrieved %s, want %s", tt.name, o.Retrieved, want)
		}
	}
}

// Seconds_Behind_Master NULL (the source gone) is an unknown lag, never 0:
// the last known value stands, and only a running applier with nothing left
// to apply is known to have none. A site with no replication has none.
func TestSiteObservationLagRules(t *testing.T) {
	tests := []struct {
		name      string
		st        mysqlctl.Status
		lag       time.Duration // the tracker's last known lag
		lagKnown  bool
		wantLag   time.Duration
		wantKnown bool
		wantIOOff bool
	}{
		{"no replication: lag 0 known, no IO thread", mysqlctl.Status{}, 0, false, 0, true, true},
		{"last known lag stands", appliedStatus(mysqlctl.ThreadConnecting, "0-1-30", "0-1-20"), 7 * time.Second, true, 7 * time.Second, true, false},
		{"NULL with a backlog: unknown", appliedStatus(mysqlctl.ThreadConnecting, "0-1-30", "0-1-20"), 0, false, 0, false, false},
		{"NULL with nothing left to apply: 0", appliedStatus(mysqlctl.ThreadConnecting, "0-1-30", "0-1-30"), 0, false, 0, true, false},
		// Found by the readiness e2e test: replicas whose appliers were held
		// behind (lag 2s over maxCandidateLag 1s) caught up after the
		// primary died, and stayed out of the failover for ever.
		{"NULL, caught up since the last known lag: 0", appliedStatus(mysqlctl.ThreadConnecting, "0-1-30", "0-1-30"), 2 * time.Second, true, 0, true, false},
		{"NULL, applier stopped: unknown", func() mysqlctl.Status {
			st := appliedStatus(mysqlctl.ThreadNo, "0-1-30", "0-1-30")
			st.Replica.SQLThread = mysqlctl.ThreadNo
			return st
		}(), 0, false, 0, false, true},
	}
	for _, tt := range tests {
		v := reachableView(tt.st)
		v.Lag, v.LagKnown = tt.lag, tt.lagKnown
		o := siteObservation(1, configs.Site{Name: "b", Role: configs.RolePrimaryCandidate}, v)
		if o.Lag != tt.wantLag || o.LagKnown != tt.wantKnown || o.IOStopped != tt.wantIOOff {
			t.Errorf("%s: lag %v known %t IO stopped %t; want %v %t %t", tt.name, o.Lag, o.LagKnown, o.IOStopped, tt.wantLag, tt.wantKnown, tt.wantIOOff)
		}
	}
}

// Observed lists every configured site in configuration order with its
// role, priority and index; a site never reached carries only its
// debounced state and refusals; the streaming time counts only for the
// source the site still follows; the server identity is in GTID terms.
func TestTrackerObserved(t *testing.T) {
	g := configs.Group{Name: "g", FailureThreshold: 2, RecoveryThreshold: 1, Sites: []configs.Site{
		{Name: "a", Role: configs.RolePrimaryCandidate, Priority: 5},
		{Name: "b", Role: configs.RoleDROnly},
		{Name: "c", Role: configs.RolePrimaryCandidate},
	}}
	tr, err := NewGroupTracker(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := obsOf("a", 1, 'W')
	a.Status.Executed, a.Status.ServerID = mariaSet("0-1-10"), 1
	b := obsOf("b", 1, 'R')
	b.Status.Executed, b.Status.ServerUUID = mariaSet("0-1-10"), "ignored on MariaDB"
	b.Status.ServerID = 2
	for _, o := range []Observation{a, b, obsOf("c", 1, 'F')} {
		if _, _, err := tr.Observe(o); err != nil {
			t.Fatal(err)
		}
	}
	obs := tr.Observed(g)
	if len(obs.Sites) != 3 {
		t.Fatalf("%d sites, want 3", len(obs.Sites))
	}
	sa, sb, sc := obs.Sites[0], obs.Sites[1], obs.Sites[2]
	if sa.Name != "a" || sa.Role != sitepair.PrimaryCandidate || sa.Priority != 5 || sa.Index != 0 || sa.ServerID != "1" || sa.State != statemachine.Writable {
		t.Errorf("a: %+v", sa)
	}
	if sb.Name != "b" || sb.Role != sitepair.DROnly || sb.Index != 1 || sb.ReplicatingFrom != "a" || !sb.LastStreamingAt.Equal(b.At) || sb.ServerID != "2" {
		t.Errorf("b: %+v", sb)
	}
	if sc.Name != "c" || sc.Index != 2 || sc.RefusedProbes != 1 || !sc.LastReachableAt.IsZero() || sc.LagKnown || sc.IOStopped {
		t.Errorf("c (never reached): %+v", sc)
	}
	// b now follows c: its streaming time from a no longer counts.
	b2 := obsOf("b", 2, 'L')
	b2.Follows = "c"
	if _, _, err := tr.Observe(b2); err != nil {
		t.Fatal(err)
	}
	if sb := tr.Observed(g).Sites[1]; !sb.LastStreamingAt.IsZero() {
		t.Errorf("b streaming at %v from a, but it follows c now", sb.LastStreamingAt)
	}
}

// Settled waits for a probe of every site started at or after the barrier,
// except from a site debounced unreachable whose latest probe failed (the
// poller backs off from it; waiting would stall every failover step).
func TestTrackerSettled(t *testing.T) {
	tr, err := NewTracker(TrackerConfig{Sites: []string{"a", "b"}, FailureThreshold: 1, RecoveryThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	probe := func(site string, seq int, kind byte) {
		t.Helper()
		o := obsOf(site, seq, kind)
		o.Started = o.At.Add(-time.Second / 2)
		if _, _, err := tr.Observe(o); err != nil {
			t.Fatal(err)
		}
	}
	barrier := t0.Add(2 * time.Second)
	if tr.Settled(barrier) {
		t.Fatal("settled before any probe")
	}
	probe("a", 1, 'W')
	probe("b", 1, 'R')
	if tr.Settled(barrier) {
		t.Fatal("settled on probes started before the barrier")
	}
	probe("a", 3, 'W')
	if tr.Settled(barrier) {
		t.Fatal("settled while b has no probe since the barrier")
	}
	probe("b", 2, 'F') // FailureThreshold 1: b is unreachable, its latest probe failed
	if !tr.Settled(barrier) {
		t.Fatal("not settled: an unreachable site whose latest probe failed must not hold the barrier")
	}
	if !tr.Settled(t0.Add(2500 * time.Millisecond)) {
		t.Fatal("not settled at the start of a's latest probe")
	}
	if tr.Settled(t0.Add(3 * time.Second)) {
		t.Fatal("settled on a probe of a started before the barrier")
	}
}
