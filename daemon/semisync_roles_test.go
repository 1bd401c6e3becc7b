package daemon

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
)

// Issue 26, hole 9: the semi-sync source side on a replica makes its
// applier wait for acknowledgements nobody sends.

// semiEverywhere is a MariaDB replica's status with both semi-sync sides on.
func semiEverywhere(st mysqlctl.Status) mysqlctl.Status {
	st.SemiSync = mysqlctl.SemiSyncStatus{Available: true, PrimaryEnabled: true, ReplicaEnabled: true, PrimaryActive: true}
	return st
}

// scriptedGroup is a group acting through the scripted sites.
func scriptedGroup(t *testing.T, sites ...*scripted) (*group, *opLog) {
	t.Helper()
	e, log := scriptedServers(t, "", sites...)
	g := &group{cfg: e.group, policy: sitepair.DefaultPolicy(), store: newTestStore(t), pub: &publisher{},
		now: clockAt(t0), log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, servers: e}
	return g, log
}

// DisableSemiSyncSource switches only the source side off, on each site
// that still has it on (re-read: another round may have done it), keeping
// its replica side (so the IO thread is not restarted).
func TestDisableSemiSyncSourceKeepsTheReplicaSide(t *testing.T) {
	b := &scripted{site: "b", status: semiEverywhere(replicaStatus(mysqlctl.ThreadYes, "0-1-20", "0-1-3"))}
	c := &scripted{site: "c", status: replicaStatus(mysqlctl.ThreadYes, "0-1-20", "0-1-20")}
	g, log := scriptedGroup(t, &scripted{site: "a"}, b, c)
	d := sitepair.Decision{Action: sitepair.DisableSemiSyncSource, Reason: sitepair.ReasonSemiSyncSourceOnReplica, Target: "a", SemiSyncOff: []string{"b", "c"}}
	if err := g.act(context.Background(), context.Background(), d); err != nil {
		t.Fatal(err)
	}
	want := []string{"b:status", "b:semisync primary=false replica=true", "c:status"}
	if got := log.list(); !slices.Equal(got, want) {
		t.Fatalf("operations:\n got  %q\n want %q", got, want)
	}
}

// Before a candidate's relay log is drained its source side is off: with
// it on, its applier waits for acknowledgements nobody sends and the drain
// never ends (the failover sat in "drain relay log" for ever).
func TestDrainSwitchesTheCandidatesSourceSideOffFirst(t *testing.T) {
	after := semiEverywhere(replicaStatus(mysqlctl.ThreadNo, "0-1-12", "0-1-3"))
	b := &scripted{site: "b", status: after}
	e, log := scriptedServers(t, "", b)
	if _, err := e.drain(context.Background(), "b", time.Second); err != nil {
		t.Fatal(err)
	}
	want := []string{"b:stop-io", "b:status", "b:semisync primary=false replica=true", "b:wait 0-1-12"}
	if got := log.list(); !slices.Equal(got, want) {
		t.Fatalf("operations:\n got  %q\n want %q", got, want)
	}
}

// The status names a replica whose applier is blocked and a primary whose
// writes stall waiting for acknowledgements, never "healthy" about either.
func TestSnapshotReportsBlockedApplierAndStalledWrites(t *testing.T) {
	ms := newTestStore(t)
	g, _ := testGroup(t, ms, "b", clockAt(t0))
	g.obs = fixedObs{o: sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Writable,
			SemiSync: sitepair.SemiSyncObservation{Known: true, Enabled: true}, AckWaits: sitepair.AckWaitObservation{Known: true, Sessions: 4, Longest: time.Minute}},
		{Name: "b", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, ReplicatingFrom: "a", BacklogAge: time.Hour},
		{Name: "c", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, ReplicatingFrom: "a",
			SemiSync: sitepair.SemiSyncObservation{Known: true}, AckWaits: sitepair.AckWaitObservation{}},
	}}}
	s := g.snapshot(t0)
	a, b, c := s.Sites[0], s.Sites[1], s.Sites[2]
	if !strings.Contains(a.WritesStalled, "4 sessions") || a.SemiSync == nil || !a.SemiSync.SourceEnabled || a.SemiSync.WaitingSessions != 4 || a.SemiSync.LongestWaitSeconds != 60 {
		t.Errorf("primary: writes stalled %q, semi-sync %+v", a.WritesStalled, a.SemiSync)
	}
	if !strings.Contains(b.ApplierBlocked, "not applied") || b.WritesStalled != "" {
		t.Errorf("replica b: applier blocked %q, writes stalled %q", b.ApplierBlocked, b.WritesStalled)
	}
	if c.ApplierBlocked != "" || c.SemiSync == nil || c.SemiSync.SourceEnabled {
		t.Errorf("replica c: applier blocked %q, semi-sync %+v", c.ApplierBlocked, c.SemiSync)
	}
}

// A re-asserted primary (a total loss, or a give-back) takes the source
// side back when semi-sync is in use and a replica following it
// acknowledges: the roles move with the primary on every path that makes
// one, not only on a promotion.
func TestReassertGivesTheSourceSideToThePrimary(t *testing.T) {
	replicaSide := func(st mysqlctl.Status) mysqlctl.Status {
		st.SemiSync = mysqlctl.SemiSyncStatus{Available: true, ReplicaEnabled: true}
		return st
	}
	a := &scripted{site: "a", status: replicaSide(mysqlctl.Status{Executed: maria("0-1-20")})}
	b := &scripted{site: "b", status: replicaSide(replicaStatus(mysqlctl.ThreadYes, "0-1-20", "0-1-20"))}
	g, log := scriptedGroup(t, a, b)
	g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", State: statemachine.ReadOnly, Executed: maria("0-1-20")},
		{Name: "b", Index: 1, State: statemachine.ReadOnly, ReplicatingFrom: "a", IOConnected: true, Executed: maria("0-1-20")},
	}}}
	d := sitepair.Decision{Action: sitepair.ReassertPrimary, Reason: sitepair.ReasonReassertPrimary, Target: "a", Epoch: 1}
	if err := g.act(context.Background(), context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if got := log.list(); !slices.Contains(got, "a:writable") || !slices.Contains(got, "a:semisync primary=true replica=true") ||
		slices.ContainsFunc(got, func(op string) bool { return strings.HasPrefix(op, "b:semisync") }) {
		t.Fatalf("operations %q: want a writable, then its source side on (b keeps its roles)", got)
	}
}
