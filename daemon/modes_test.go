package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
)

// modesGroup is a healthy three-site group (a primary) on a fake store and
// fake servers, whose observations the test sets.
func modesGroup(t *testing.T, ms *watchedStore, clock *manualClock) (*group, *opLog) {
	t.Helper()
	cfg := configs.Group{Name: "g", Engine: configs.EngineMariaDB, RelayDrainTimeout: time.Second, PollInterval: 500 * time.Millisecond,
		ProbeTimeout: 400 * time.Millisecond, FailureThreshold: 2,
		Sites: []configs.Site{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	ops := &opLog{}
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	dial := func(_ context.Context, s configs.Site) (Instance, error) {
		return fakeInstance{site: s.Name, log: ops, executed: exec}, nil
	}
	g := &group{cfg: cfg, flavor: gtid.MariaDB, policy: sitepair.DefaultPolicy(), store: ms, pub: &publisher{}, now: clock.now,
		log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg), actionTimeout: time.Minute}
	g.servers = &servers{group: cfg, conns: newConnections(dial, cfg.Sites), log: g.log}
	if err := g.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return g, ops
}

func primaryDown() fixedObs {
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	return fixedObs{o: sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Unreachable, Executed: exec},
		{Name: "b", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, ReplicatingFrom: "a", LagKnown: true, Executed: exec, Index: 1},
		{Name: "c", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, ReplicatingFrom: "a", LagKnown: true, Executed: exec, Index: 2},
	}}}
}

// TestPauseWithholdsFailoverSurvivesRestartAndExpires: a paused group whose
// primary is lost fails over neither before nor after a daemon restart
// (the pause is in the store), says what it withheld in status, and fails
// over once the pause runs out by itself; the history has who and why.
func TestPauseWithholdsFailoverSurvivesRestartAndExpires(t *testing.T) {
	ms := newTestStore(t, store.GroupState{Group: "g", Epoch: 3, ActiveSite: "a"})
	clock := &manualClock{t: t0}
	g, ops := modesGroup(t, ms, clock)
	if err := g.handle(request{kind: kindPause, lasts: 10 * time.Minute, reason: "kernel upgrade", by: "ann@ops"}, leading); err != nil {
		t.Fatalf("pause: %v", err)
	}
	g.obs = primaryDown()
	ctx := context.Background()
	g.round(ctx, t0)
	if g.last.Reason != sitepair.ReasonPausedWithheld || g.last.Withheld == nil || g.last.Withheld.Reason != sitepair.ReasonFailoverRevoke {
		t.Fatalf("paused group with its primary down: %s, want the failover withheld", g.last)
	}
	if st, _ := ms.Load(ctx, "g"); st.Epoch != 3 || st.Pause == nil || st.Pause.By != "ann@ops" || len(ops.ops) != 0 {
		t.Fatalf("while paused: stored %+v, ops %v; want nothing done, the pause stored", st, ops.ops)
	}
	snap := g.snapshot(clock.now())
	if snap.Pause == nil || snap.Pause.Reason != "kernel upgrade" || snap.Withheld == nil || snap.Withheld.Target != "b" {
		t.Fatalf("status: pause %+v withheld %+v", snap.Pause, snap.Withheld)
	}
	for _, r := range snap.Readiness {
		if r.Ready {
			t.Errorf("a paused group reads ready: %+v", r)
		}
	}

	// A restarted daemon reads the pause back and still withholds.
	clock.advance(time.Minute)
	g2, ops2 := modesGroup(t, ms, clock)
	g2.obs = primaryDown()
	g2.round(ctx, t0)
	if g2.last.Reason != sitepair.ReasonPausedWithheld || len(ops2.ops) != 0 {
		t.Fatalf("after a restart: %s, ops %v", g2.last, ops2.ops)
	}

	// The pause runs out: dropped, audited, and the failover starts.
	clock.advance(10 * time.Minute)
	g2.round(ctx, t0)
	st, _ := ms.Load(ctx, "g")
	if st.Pause != nil || st.InFlight == nil || st.InFlight.To != "b" {
		t.Fatalf("after the pause ran out: pause %+v in flight %+v (decision %s)", st.Pause, st.InFlight, g2.last)
	}
	var actions []string
	for _, e := range st.Audit {
		actions = append(actions, e.Action+":"+e.By)
	}
	if got := strings.Join(actions, ","); got != "pause:ann@ops,expired:failoverd" {
		t.Fatalf("history %s", got)
	}
}

// TestModeRequestsRefuseClearly: each refusal is one ErrRefused error that
// says why, is audited, and changes nothing.
func TestModeRequestsRefuseClearly(t *testing.T) {
	ms := newTestStore(t, store.GroupState{Group: "g", Epoch: 3, ActiveSite: "a"})
	clock := &manualClock{t: t0}
	g, _ := modesGroup(t, ms, clock)
	g.obs = fixedObs{o: sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Writable},
		{Name: "b", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, ReplicatingFrom: "a", IOConnected: true, LagKnown: true, Index: 1},
		{Name: "c", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, ReplicatingFrom: "a", IOConnected: true, LagKnown: true, Index: 2},
	}}}
	for _, tc := range []struct {
		req  request
		want string
	}{
		{request{kind: kindResume, by: "ann"}, "not paused"},
		{request{kind: kindRelease, target: "b", by: "ann"}, "has no hold"},
		{request{kind: kindPause, lasts: time.Hour, by: "ann"}, "reason is required"},
		{request{kind: kindHold, target: "b", holdKind: "downtime", lasts: time.Hour, reason: "r", by: "ann"}, "no-promote or maintenance"},
	} {
		err := g.handle(tc.req, leading)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line saying %q", tc.req.kind, err, tc.want)
		}
	}
	st, _ := ms.Load(context.Background(), "g")
	if st.Pause != nil || len(st.Holds) != 0 || len(st.Audit) != 4 {
		t.Fatalf("after refusals: pause %+v holds %v audit %d", st.Pause, st.Holds, len(st.Audit))
	}
	// Paused: a switchover is refused, and a dry run says why.
	if err := g.handle(request{kind: kindPause, lasts: time.Hour, reason: "r", by: "ann"}, leading); err != nil {
		t.Fatal(err)
	}
	var answer string
	err := g.handle(request{kind: kindSwitchover, target: "b", dryRun: true, answer: &answer, by: "ann"}, leading)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("dry-run switchover of a paused group: %v", err)
	}
}

// TestMaintenanceOnThePrimarySwitchesOverFirst: a maintenance hold asked
// for the primary starts a switchover to the best site and then records
// the hold; a dry-run switchover before that decides and changes nothing.
func TestMaintenanceOnThePrimarySwitchesOverFirst(t *testing.T) {
	ms := newTestStore(t, store.GroupState{Group: "g", Epoch: 3, ActiveSite: "a"})
	clock := &manualClock{t: t0}
	g, ops := modesGroup(t, ms, clock)
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	g.obs = fixedObs{o: sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Writable, Executed: exec},
		{Name: "b", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, ReplicatingFrom: "a", IOConnected: true, LagKnown: true, Executed: exec, Index: 1},
		{Name: "c", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, ReplicatingFrom: "a", IOConnected: true, LagKnown: true, Executed: exec, Index: 2, Priority: 10},
	}}}
	var answer string
	if err := g.handle(request{kind: kindSwitchover, target: "b", dryRun: true, answer: &answer, by: "ann"}, leading); err != nil || !strings.HasPrefix(answer, "would switch over") {
		t.Fatalf("dry run: %q, %v", answer, err)
	}
	if st, _ := ms.Load(context.Background(), "g"); st.Epoch != 3 || len(ops.ops) != 0 || len(st.Audit) != 0 {
		t.Fatalf("a dry run changed something: %+v, ops %v", st, ops.ops)
	}
	if err := g.handle(request{kind: kindHold, target: "a", holdKind: string(sitepair.HoldMaintenance), lasts: time.Hour, reason: "mysqld upgrade", by: "ann"}, leading); err != nil {
		t.Fatalf("maintenance on the primary: %v", err)
	}
	st, _ := ms.Load(context.Background(), "g")
	if st.InFlight == nil || st.InFlight.Kind != kindSwitchover || st.InFlight.To != "c" {
		t.Fatalf("in flight %+v, want a switchover to c (highest priority)", st.InFlight)
	}
	if h, ok := st.Holds["a"]; !ok || h.Kind != string(sitepair.HoldMaintenance) || h.By != "ann" {
		t.Fatalf("holds %+v, want maintenance on a", st.Holds)
	}
	if n := len(st.Audit); n != 2 || st.Audit[0].Action != store.AuditSwitchover || st.Audit[1].Action != store.AuditHold {
		t.Fatalf("audit %+v, want the switchover then the hold", st.Audit)
	}
}
