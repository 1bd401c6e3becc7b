package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/store"
)

// historyGroup is a 3-site MariaDB group on ms with a the recorded primary
// at epoch 1 (unless ms holds a state already), every site answering
// (fake instances holding 0-1-10), a reachable but read-only: the revoke
// fences it.
func historyGroup(t *testing.T, ms *watchedStore, clock func() time.Time) (*group, *opLog) {
	t.Helper()
	if st, _ := ms.Load(context.Background(), "g"); !st.Exists {
		ms.put(t, store.GroupState{Group: "g", Epoch: 1, ActiveSite: "a"})
	}
	cfg := configs.Group{Name: "g", Engine: configs.EngineMariaDB, RelayDrainTimeout: time.Second,
		Sites: []configs.Site{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	ops := &opLog{}
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	dial := func(_ context.Context, s configs.Site) (Instance, error) {
		return fakeInstance{site: s.Name, log: ops, executed: exec}, nil
	}
	g := &group{cfg: cfg, flavor: gtid.MariaDB, policy: sitepair.DefaultPolicy(), store: ms, pub: &publisher{}, now: clock,
		log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg), actionTimeout: time.Minute}
	g.servers = &servers{group: cfg, conns: newConnections(dial, cfg.Sites), log: g.log}
	g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, Executed: exec},
		{Name: "b", Role: sitepair.PrimaryCandidate, Index: 1, State: statemachine.ReadOnly, LagKnown: true, Executed: exec},
		{Name: "c", Role: sitepair.PrimaryCandidate, Index: 2, State: statemachine.ReadOnly, LagKnown: true, Executed: exec},
	}}}
	if err := g.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return g, ops
}

// revokeDecision fails over from a to target at epoch (the revoking one).
func revokeDecision(target string, epoch uint64) sitepair.Decision {
	return sitepair.Decision{Action: sitepair.RevokeEpoch, Reason: sitepair.ReasonFailoverRevoke, Message: "a is down",
		From: "a", Target: target, Epoch: epoch, Fence: []string{"a"}}
}

// promoteTo promotes target at epoch, repointing c when it is not the target.
func promoteTo(target string, epoch uint64) sitepair.Decision {
	d := promoteDecision(target)
	d.Epoch = epoch
	if target != "c" {
		d.Repoint = []string{"c"}
	}
	return d
}

func stepNames(tl []store.TimelineStep) []string {
	var out []string
	for _, s := range tl {
		out = append(out, s.Step)
	}
	return out
}

// inTimeOrder fails the test unless every step of tl has a time, in order.
func inTimeOrder(t *testing.T, what string, tl []store.TimelineStep) {
	t.Helper()
	for i, s := range tl {
		if s.At.IsZero() || (i > 0 && s.At.Before(tl[i-1].At)) {
			t.Fatalf("%s: step %s at %v out of order in %+v", what, s.Step, s.At, tl)
		}
	}
}

// A failover through the fake executor records every step it reaches, on
// the daemon's clock, in order: the decision, the revoke, the old primary's
// fence, the proof, each promotion step, the commit, the repoint and the
// routing; with its proof, promotion GTID and epochs. Each step is persisted
// with the step's own write while the failover runs.
func TestHistoryRecordsFailoverTimelineAndProof(t *testing.T) {
	ms := newTestStore(t)
	clock := clockAt(t0)
	g, ops := historyGroup(t, ms, clock)
	router := &scriptedFollower{name: "kube"}
	g.follow = newHandoff([]Follower{router}, g.log)
	g.follow.now = clock
	var atDrain []string
	ms.onSave = func(st store.GroupState) {
		if st.InFlight != nil && st.InFlight.Step == StepRelayDrained {
			atDrain = stepNames(st.InFlight.Timeline)
		}
	}
	ctx := context.Background()
	g.carryOut(ctx, revokeDecision("b", 2))
	if !ops.has("a:fence") {
		t.Fatalf("setup: the old primary was not fenced: %v", ops)
	}
	g.carryOut(ctx, promoteTo("b", 3))
	if g.lastErr != nil || g.rec.ActiveSite != "b" {
		t.Fatalf("setup: promotion: %v, state %+v", g.lastErr, g.rec.Persisted)
	}
	if want := []string{TimelineDetected, StepRevoked, StepOldPrimaryFenced, TimelineFenced, StepRelayDrained}; !slices.Equal(atDrain, want) {
		t.Fatalf("timeline persisted with the drain: %v, want %v", atDrain, want)
	}
	if !g.follow.pass(ctx, false) {
		t.Fatal("setup: routing did not follow")
	}
	g.noteRouted(ctx)

	st, err := ms.Load(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if st.InFlight != nil || len(st.Failovers) != 1 {
		t.Fatalf("stored history %+v (in flight %+v), want one failover", st.Failovers, st.InFlight)
	}
	f := st.Failovers[0]
	want := []string{TimelineDetected, StepRevoked, StepOldPrimaryFenced, TimelineFenced, StepRelayDrained, StepPromotionRecorded,
		StepPublished, StepWritable, StepPromoted, StepRepointed, TimelineRouted}
	if got := stepNames(f.Timeline); !slices.Equal(got, want) {
		t.Fatalf("timeline %v, want %v", got, want)
	}
	inTimeOrder(t, "failover", f.Timeline)
	if f.ID != "g-2" || f.Kind != kindFailover || f.From != "a" || f.To != "b" || f.RevokedEpoch != 2 || f.Epoch != 3 ||
		f.Outcome != store.OutcomeCompleted || f.Proof != string(sitepair.ProofPrimaryDown) || f.PromotionGTID != "0-1-10" ||
		f.Reason != string(sitepair.ReasonFailoverRevoke) || f.By != "" || f.Why != "" || !f.EndedAt.Equal(f.Timeline[8].At) {
		t.Fatalf("record %+v", f)
	}

	h := g.history(clock())
	if len(h.Entries) != 1 || h.Entries[0].Failover == nil {
		t.Fatalf("history %+v", h)
	}
	e := h.Entries[0].Failover
	if !h.Entries[0].At.Equal(f.Timeline[0].At) || e.TookSeconds <= 0 ||
		e.RevokedToWritableSeconds != f.Timeline[7].At.Sub(f.Timeline[1].At).Seconds() ||
		e.Timeline[3].SincePreviousSeconds != f.Timeline[3].At.Sub(f.Timeline[2].At).Seconds() ||
		e.Timeline[10].SinceStartSeconds != e.TookSeconds {
		t.Fatalf("history entry %+v", e)
	}
}

// A switchover's record names who asked and starts at the request; an
// abandoned action says which decision ended it; the operator requests
// are listed among the actions by time, a request before the action it
// started.
func TestHistoryRecordsSwitchoverAndAbandonedActions(t *testing.T) {
	ms := newTestStore(t)
	clock := clockAt(t0)
	g, _ := historyGroup(t, ms, clock)
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Writable, Executed: exec},
		{Name: "b", Role: sitepair.PrimaryCandidate, Index: 1, State: statemachine.ReadOnly, ReplicatingFrom: "a", IOConnected: true, LagKnown: true, Executed: exec},
		{Name: "c", Role: sitepair.PrimaryCandidate, Index: 2, State: statemachine.ReadOnly, ReplicatingFrom: "a", IOConnected: true, LagKnown: true, Executed: exec},
	}}}
	ctx := context.Background()
	if err := g.handle(request{kind: kindSwitchover, target: "b", by: "ann@ops"}, leading); err != nil {
		t.Fatal(err)
	}
	// The old primary is given back (target-lost, catch-up-timeout): abandoned.
	g.carryOut(ctx, sitepair.Decision{Action: sitepair.ReassertPrimary, Reason: sitepair.ReasonTargetLost, Message: "b was lost", Target: "a", Epoch: 3})
	if err := g.handle(request{kind: kindAcknowledge, by: "bob@ops"}, leading); err != nil {
		t.Fatal(err)
	}
	// An automatic failover, abandoned by a newer revoke, then completed.
	g.carryOut(ctx, revokeDecision("b", 4))
	g.carryOut(ctx, revokeDecision("c", 5))
	g.carryOut(ctx, promoteTo("c", 6))

	st, _ := ms.Load(ctx, "g")
	if len(st.Failovers) != 3 {
		t.Fatalf("stored %+v, want 3 records", st.Failovers)
	}
	sw, re, done := st.Failovers[0], st.Failovers[1], st.Failovers[2]
	if sw.Kind != kindSwitchover || sw.By != "ann@ops" || sw.Outcome != store.OutcomeAbandoned || sw.Epoch != 3 ||
		sw.Why != string(sitepair.ReasonTargetLost)+": b was lost" || sw.Proof != "" || sw.Timeline[0].Step != TimelineRequested ||
		!sw.Timeline[0].At.Equal(st.Audit[0].At) || stepNames(sw.Timeline)[1] != StepRevoked {
		t.Fatalf("switchover record %+v", sw)
	}
	if re.Outcome != store.OutcomeAbandoned || re.To != "b" || !strings.HasPrefix(re.Why, string(sitepair.ReasonFailoverRevoke)) {
		t.Fatalf("failover superseded by a newer revoke: %+v", re)
	}
	if done.Outcome != store.OutcomeCompleted || done.ID != "g-5" || done.To != "c" || done.Epoch != 6 {
		t.Fatalf("completed failover: %+v", done)
	}
	for _, f := range st.Failovers {
		inTimeOrder(t, f.ID, f.Timeline)
	}
	var kinds []string
	for _, e := range g.history(clock()).Entries {
		if e.Action != nil {
			kinds = append(kinds, e.Action.Action+" by "+e.Action.By)
		} else {
			kinds = append(kinds, e.Failover.Kind+" "+e.Failover.Outcome)
		}
	}
	want := []string{"switchover by ann@ops", "switchover abandoned", "acknowledge by bob@ops", "failover abandoned", "failover completed"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("history %v, want %v", kinds, want)
	}
}

// The history is bounded: the newest store.MaxFailovers records are kept,
// and a step reached again (a retried promotion) keeps its first time
// instead of growing the timeline.
func TestHistoryIsBounded(t *testing.T) {
	ms := newTestStore(t)
	g, _ := historyGroup(t, ms, clockAt(t0))
	ctx := context.Background()
	n := store.MaxFailovers + 5
	for i := range n {
		epoch := uint64(2 + 2*i)
		if err := g.commit(ctx, revokeDecision("b", epoch), StepRevoked, ""); err != nil {
			t.Fatal(err)
		}
		if i == n-1 {
			for range 3 {
				if err := g.step(ctx, StepRelayDrained, ""); err != nil {
					t.Fatal(err)
				}
			}
		}
		d := promoteTo("b", epoch+1)
		d.Repoint = nil
		if err := g.commit(ctx, d, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := ms.Load(ctx, "g")
	if len(st.Failovers) != store.MaxFailovers || len(g.rec.failovers) != store.MaxFailovers {
		t.Fatalf("%d records stored, %d held, want %d", len(st.Failovers), len(g.rec.failovers), store.MaxFailovers)
	}
	if first, last := st.Failovers[0].ID, st.Failovers[store.MaxFailovers-1].ID; first != "g-12" || last != fmt.Sprintf("g-%d", 2*n) {
		t.Fatalf("records from %s to %s, want g-12 to g-%d (the oldest dropped)", first, last, 2*n)
	}
	if got := stepNames(st.Failovers[store.MaxFailovers-1].Timeline); !slices.Equal(got, []string{TimelineDetected, StepRevoked, StepRelayDrained, StepPromoted}) {
		t.Fatalf("timeline of a retried step: %v", got)
	}
}

// The history is persisted: a daemon restarted (or a new leader) loads the
// ended actions and the timeline of the one in flight, and goes on with it.
func TestHistorySurvivesRestart(t *testing.T) {
	ms := newTestStore(t)
	clock := clockAt(t0)
	g, _ := historyGroup(t, ms, clock)
	ctx := context.Background()
	g.carryOut(ctx, revokeDecision("b", 2))
	g.carryOut(ctx, promoteTo("b", 3))
	if err := g.handle(request{kind: kindAcknowledge, by: "bob@ops"}, leading); err != nil {
		t.Fatal(err)
	}
	// The next old primary does not answer: no fence stamped in memory
	// only (it would be persisted with the failover's next write).
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	g.obs = fixedObs{sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Unreachable},
		{Name: "b", Role: sitepair.PrimaryCandidate, Index: 1, State: statemachine.ReadOnly, LagKnown: true, Executed: exec},
		{Name: "c", Role: sitepair.PrimaryCandidate, Index: 2, State: statemachine.ReadOnly, LagKnown: true, Executed: exec},
	}}}
	g.carryOut(ctx, revokeDecision("c", 4))
	before := g.history(t0)

	restarted, _ := historyGroup(t, ms, clock)
	a, _ := json.Marshal(restarted.history(t0))
	b, _ := json.Marshal(before)
	if string(a) != string(b) {
		t.Fatalf("history after a restart:\n%s\nwant\n%s", a, b)
	}
	if n := len(before.Entries); n != 3 || before.Entries[n-1].Failover.Outcome != status.OutcomeInFlight {
		t.Fatalf("history before the restart: %+v", before)
	}
	restarted.carryOut(ctx, promoteTo("c", 5))
	st, _ := ms.Load(ctx, "g")
	if len(st.Failovers) != 2 {
		t.Fatalf("stored %+v", st.Failovers)
	}
	resumed := st.Failovers[1]
	if got := stepNames(resumed.Timeline); len(got) < 3 || got[0] != TimelineDetected || got[1] != StepRevoked || got[len(got)-2] != StepPromoted ||
		resumed.Outcome != store.OutcomeCompleted || resumed.To != "c" {
		t.Fatalf("failover resumed after the restart: %+v (%v)", resumed, got)
	}
	inTimeOrder(t, "resumed", resumed.Timeline)
}

// A state written before the history existed (the previous release's
// fixture: a failover in flight, the audit) loads with an empty history,
// shows its audit and in-flight action, and the first ended action is
// recorded from then on.
func TestOldStateWithoutHistoryLoads(t *testing.T) {
	old, err := store.OpenFile(stateFixture, func() time.Time { return fixtureSavedAt })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := old.Load(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if st.Failovers != nil || st.InFlight == nil || st.InFlight.Timeline != nil {
		t.Fatalf("fixture: %+v", st)
	}
	ms := newTestStore(t, st)
	cfg := configs.Group{Name: "orders", Engine: configs.EngineMariaDB, Sites: []configs.Site{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	g := &group{cfg: cfg, flavor: gtid.MariaDB, policy: sitepair.DefaultPolicy(), store: ms, pub: &publisher{}, now: clockAt(fixtureSavedAt),
		log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg)}
	if err := g.load(ctx); err != nil {
		t.Fatalf("load a state without history: %v", err)
	}
	h := g.history(fixtureSavedAt)
	if len(h.Entries) != 4 || h.Entries[3].Failover == nil || h.Entries[3].Failover.Outcome != status.OutcomeInFlight ||
		!h.Entries[3].At.Equal(st.InFlight.StartedAt) || len(h.Entries[3].Failover.Timeline) != 0 {
		t.Fatalf("history of the old state: %+v", h)
	}
	d := sitepair.Decision{Action: sitepair.Promote, Reason: sitepair.ReasonPromote, From: "b", Target: "c", Epoch: 8,
		FenceProof: sitepair.ProofOperatorConfirmed, PromotionGTID: gtid.MustParse(gtid.MariaDB, "0-1-42,0-2-50,1-2-7")}
	if err := g.commit(ctx, d, "", ""); err != nil {
		t.Fatal(err)
	}
	saved, _ := ms.Load(ctx, "orders")
	if len(saved.Failovers) != 1 || saved.Failovers[0].ID != "orders-7" || saved.Failovers[0].Outcome != store.OutcomeCompleted ||
		saved.Failovers[0].FenceConfirmation == nil || saved.Failovers[0].FenceConfirmation.By != "alice" ||
		!slices.Equal(stepNames(saved.Failovers[0].Timeline), []string{StepPromoted}) || len(saved.Audit) != 3 {
		t.Fatalf("after the promotion: %+v", saved.Failovers)
	}
}

// Routing is stamped when the last follower first completed the epoch
// naming the new primary, in time order even when it finished before the
// replicas were repointed; a follower still behind stamps nothing.
func TestHistoryRoutedWaitsForEveryFollower(t *testing.T) {
	ms := newTestStore(t)
	clock := clockAt(t0)
	g, _ := historyGroup(t, ms, clock)
	fast, slow := &scriptedFollower{name: "kube"}, &scriptedFollower{name: "dns"}
	slow.queue(followResult{err: fmt.Errorf("dns down")})
	g.follow = newHandoff([]Follower{fast, slow}, g.log)
	g.follow.now = clock
	ctx := context.Background()
	g.carryOut(ctx, revokeDecision("b", 2))
	g.carryOut(ctx, promoteTo("b", 3))
	g.follow.pass(ctx, false)
	g.noteRouted(ctx)
	if reached(g.rec.failovers[0].Timeline, TimelineRouted) {
		t.Fatalf("routed stamped while dns is behind: %v", stepNames(g.rec.failovers[0].Timeline))
	}
	g.follow.pass(ctx, false)
	g.noteRouted(ctx)
	st, _ := ms.Load(ctx, "g")
	tl := st.Failovers[0].Timeline
	if !reached(tl, TimelineRouted) {
		t.Fatalf("routed not stamped: %v", stepNames(tl))
	}
	inTimeOrder(t, "routed", tl)
	// A stamp earlier than the last step goes before it.
	early, changed := g.rec.stampedEnded("g-2", "probe", tl[1].At)
	if !changed || early.failovers[0].Timeline[2].Step != "probe" {
		t.Fatalf("stamp in time order: %v", stepNames(early.failovers[0].Timeline))
	}
}

// Routing is stamped only on the action this daemon promoted: a restarted
// daemon whose followers catch up with a loaded record's epoch does not
// stamp it with that (later) time.
func TestHistoryRoutedOnlyForTheActionThisDaemonPromoted(t *testing.T) {
	ms := newTestStore(t)
	clock := clockAt(t0)
	g, _ := historyGroup(t, ms, clock)
	ctx := context.Background()
	g.carryOut(ctx, revokeDecision("b", 2))
	g.carryOut(ctx, promoteTo("b", 3))

	restarted, _ := historyGroup(t, ms, clock)
	restarted.follow = newHandoff([]Follower{&scriptedFollower{name: "kube"}}, restarted.log)
	restarted.follow.now = clock
	restarted.publish()
	if !restarted.follow.pass(ctx, false) {
		t.Fatal("setup: routing did not follow")
	}
	if _, ok := restarted.follow.routedAt(3); !ok {
		t.Fatal("setup: the follower did not complete epoch 3")
	}
	restarted.noteRouted(ctx)
	if st, _ := ms.Load(ctx, "g"); reached(st.Failovers[0].Timeline, TimelineRouted) {
		t.Fatalf("a loaded record stamped routed: %v", stepNames(st.Failovers[0].Timeline))
	}
}
