package readers

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

var cfg = Config{MaxLag: 5 * time.Second, UpAfter: 3, DownAfter: 2, IncludePrimary: PrimaryWhenNoReplica}

func primary(name string) sitepair.SiteObservation {
	return sitepair.SiteObservation{Name: name, State: statemachine.Writable}
}

// replica is a healthy replica of from with lag.
func replica(name, from string, lag time.Duration) sitepair.SiteObservation {
	return sitepair.SiteObservation{Name: name, State: statemachine.ReadOnly, ReplicatingFrom: from,
		IOConnected: true, LagKnown: true, Lag: lag}
}

func recorded() sitepair.Persisted { return sitepair.Persisted{Epoch: 4, ActiveSite: "a"} }

// run computes n rounds one second apart on the same input.
func run(t *testing.T, c Config, prev State, sites []sitepair.SiteObservation, st sitepair.Persisted, n int) (State, []Event) {
	t.Helper()
	var all []Event
	for range n {
		now := prev.At.Add(time.Second)
		if prev.At.IsZero() {
			now = t0
		}
		var ev []Event
		prev, ev = Compute(sites, st, c, prev, now)
		all = append(all, ev...)
	}
	return prev, all
}

// TestReplicaRules guards each eligibility rule: a replica that breaks one
// never becomes a reader, and its Why names the rule.
func TestReplicaRules(t *testing.T) {
	hold := func(kind sitepair.HoldKind) sitepair.Persisted {
		st := recorded()
		st.Holds = map[string]sitepair.Hold{"b": {Kind: kind, By: "ops", Reason: "disk", Since: t0.Add(-time.Hour), Until: t0.Add(time.Hour)}}
		return st
	}
	tests := []struct {
		name   string
		mutate func(*sitepair.SiteObservation, *sitepair.Persisted)
		good   bool
		why    string
	}{
		{"healthy", func(*sitepair.SiteObservation, *sitepair.Persisted) {}, true, "replicating from a, lag 1s"},
		{"lag at maxLag", func(o *sitepair.SiteObservation, _ *sitepair.Persisted) { o.Lag = 5 * time.Second }, true, "lag 5s"},
		{"lag over maxLag", func(o *sitepair.SiteObservation, _ *sitepair.Persisted) { o.Lag = 12 * time.Second }, false, "lag 12s over maxLag 5s"},
		{"backlog over maxLag with Seconds_Behind 0", func(o *sitepair.SiteObservation, _ *sitepair.Persisted) {
			o.Lag, o.BacklogAge = 0, 9*time.Second
		}, false, "lag 9s over maxLag 5s"},
		{"lag unknown", func(o *sitepair.SiteObservation, _ *sitepair.Persisted) { o.LagKnown = false }, false, "lag unknown"},
		{"io not connected", func(o *sitepair.SiteObservation, _ *sitepair.Persisted) { o.IOConnected = false }, false, "IO thread not connected"},
		{"source silent", func(o *sitepair.SiteObservation, _ *sitepair.Persisted) { o.SourceSilent = true }, false, "no events or heartbeats"},
		{"sql thread stopped", func(o *sitepair.SiteObservation, _ *sitepair.Persisted) { o.ApplierStopped = true }, false, "SQL thread stopped"},
		{"replication broken", func(o *sitepair.SiteObservation, _ *sitepair.Persisted) { o.ReplicationBroken = true }, false, "replication broken"},
		{"unreachable", func(o *sitepair.SiteObservation, _ *sitepair.Persisted) { o.State = statemachine.Unreachable }, false, "unreachable"},
		{"replicating from another site", func(o *sitepair.SiteObservation, _ *sitepair.Persisted) { o.ReplicatingFrom = "c" }, false, "replicating from c, not from the primary a"},
		{"not replicating", func(o *sitepair.SiteObservation, _ *sitepair.Persisted) { o.ReplicatingFrom = "" }, false, "not replicating"},
		{"diverged", func(_ *sitepair.SiteObservation, st *sitepair.Persisted) { st.Diverged = map[string]gtid.Set{"b": {}} }, false, "diverged"},
		{"recloning", func(_ *sitepair.SiteObservation, st *sitepair.Persisted) {
			st.Recloning = map[string]sitepair.Reclone{"b": {Donor: "a"}}
		}, false, "recloning"},
		{"operator fenced", func(_ *sitepair.SiteObservation, st *sitepair.Persisted) { st.OperatorFenced = []string{"b"} }, false, "fenced by the operator"},
		{"maintenance hold", func(_ *sitepair.SiteObservation, st *sitepair.Persisted) { *st = hold(sitepair.HoldMaintenance) }, false, "held for maintenance by ops"},
		{"no-promote hold still reads", func(_ *sitepair.SiteObservation, st *sitepair.Persisted) { *st = hold(sitepair.HoldNoPromote) }, true, "replicating from a"},
		{"expired maintenance hold still reads", func(_ *sitepair.SiteObservation, st *sitepair.Persisted) {
			*st = hold(sitepair.HoldMaintenance)
			h := st.Holds["b"]
			h.Until = t0.Add(-time.Minute)
			st.Holds["b"] = h
		}, true, "replicating from a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := replica("b", "a", time.Second)
			st := recorded()
			tc.mutate(&b, &st)
			got, _ := run(t, cfg, State{}, []sitepair.SiteObservation{primary("a"), b}, st, 10)
			s := got.Sites["b"]
			if s.Eligible != tc.good || !strings.Contains(s.Why, tc.why) {
				t.Fatalf("b: eligible %v why %q; want %v containing %q", s.Eligible, s.Why, tc.good, tc.why)
			}
			// whenNoReplica: the primary reads exactly when b does not.
			if p := got.Sites["a"]; p.Eligible == tc.good {
				t.Fatalf("primary eligible %v (%s) with replica eligible %v", p.Eligible, p.Why, tc.good)
			}
		})
	}
}

// TestLagSecondsIsTheLargerOfLagAndBacklog guards the lag status shows: the
// one the decision used, -1 when unknown.
func TestLagSecondsIsTheLargerOfLagAndBacklog(t *testing.T) {
	b := replica("b", "a", 2*time.Second)
	b.BacklogAge = 3 * time.Second
	c := replica("c", "a", 0)
	c.LagKnown = false
	got, _ := run(t, cfg, State{}, []sitepair.SiteObservation{primary("a"), b, c}, recorded(), 1)
	if l := got.Sites["b"].LagSeconds; l != 3 {
		t.Fatalf("b lag %v, want 3", l)
	}
	if l := got.Sites["c"].LagSeconds; l != -1 {
		t.Fatalf("c lag %v, want -1", l)
	}
}

// TestNoReadersWhileFailoverInFlightOrWithoutPrimary guards the group-wide
// rules: no site (primary included) reads while a failover is in flight or
// no primary is recorded, at once, and the why says so.
func TestNoReadersWhileFailoverInFlightOrWithoutPrimary(t *testing.T) {
	sites := []sitepair.SiteObservation{primary("a"), replica("b", "a", 0), replica("c", "a", 0)}
	c := cfg
	c.IncludePrimary = PrimaryAlways
	full, _ := run(t, c, State{}, sites, recorded(), 3)
	if r := full.Readers(); !slices.Equal(r, []string{"a", "b", "c"}) {
		t.Fatalf("readers %v, want a b c", r)
	}
	inFlight := recorded()
	inFlight.InFlight = &sitepair.InFlight{Epoch: 5, From: "a", To: "b"}
	inFlight.Epoch = 5
	none := recorded()
	none.ActiveSite = ""
	for name, st := range map[string]sitepair.Persisted{"in flight": inFlight, "no primary": none} {
		got, ev := run(t, c, full, sites, st, 1)
		if r := got.Readers(); len(r) != 0 || len(ev) != 3 {
			t.Fatalf("%s: readers %v events %v, want none and 3 removals", name, r, ev)
		}
		for _, s := range got.Sites {
			if !strings.Contains(s.Why, "no readers") {
				t.Fatalf("%s: why %q does not say why there are no readers", name, s.Why)
			}
		}
	}
}

// TestHysteresisJoinsAfterUpAfterAndLeavesAfterDownAfter guards freshness
// hysteresis: upAfter good rounds to join, downAfter bad rounds to leave,
// one event each.
func TestHysteresisJoinsAfterUpAfterAndLeavesAfterDownAfter(t *testing.T) {
	good := []sitepair.SiteObservation{primary("a"), replica("b", "a", time.Second)}
	lagging := []sitepair.SiteObservation{primary("a"), replica("b", "a", time.Minute)}
	st, _ := run(t, cfg, State{}, good, recorded(), cfg.UpAfter-1)
	if len(st.Readers()) != 0 {
		t.Fatalf("after %d good rounds: readers %v, want none yet", cfg.UpAfter-1, st.Readers())
	}
	st, ev := run(t, cfg, st, good, recorded(), 1)
	if !st.Sites["b"].Eligible || !slices.Equal(st.Readers(), []string{"b"}) {
		t.Fatalf("after upAfter good rounds readers %v, want b", st.Readers())
	}
	if len(ev) != 1 || ev[0] != (Event{Site: "b", Added: true, Why: st.Sites["b"].Why}) {
		t.Fatalf("events %+v, want b added", ev)
	}
	if !st.Sites["b"].Since.Equal(st.At) {
		t.Fatalf("since %v, want the round it joined %v", st.Sites["b"].Since, st.At)
	}
	// Stay a while, then lag.
	st, _ = run(t, cfg, st, good, recorded(), 10)
	st, ev = run(t, cfg, st, lagging, recorded(), cfg.DownAfter-1)
	if !st.Sites["b"].Eligible || len(ev) != 0 || !strings.Contains(st.Sites["b"].Why, "leaves after 2 bad rounds, 1 so far") {
		t.Fatalf("after %d bad rounds b %+v events %v; want still in", cfg.DownAfter-1, st.Sites["b"], ev)
	}
	st, ev = run(t, cfg, st, lagging, recorded(), 1)
	if st.Sites["b"].Eligible || !st.Sites["a"].Eligible || len(ev) != 2 {
		t.Fatalf("after downAfter bad rounds b %+v events %v; want b out, a in", st.Sites["b"], ev)
	}
}

// TestFlappingReplicaChangesTheSetAtMostOncePerUpAfterPlusDownAfter guards
// issue 29's flap bound: whatever the pattern of good and bad rounds, a
// replica's membership changes at most once per upAfter+downAfter rounds.
func TestFlappingReplicaChangesTheSetAtMostOncePerUpAfterPlusDownAfter(t *testing.T) {
	patterns := map[string]func(i int) bool{
		"alternating":      func(i int) bool { return i%2 == 0 },
		"3 good 2 bad":     func(i int) bool { return i%5 < 3 },
		"4 good 3 bad":     func(i int) bool { return i%7 < 4 },
		"3 good 1 bad":     func(i int) bool { return i%4 < 3 },
		"long good 2 bad":  func(i int) bool { return i%12 < 10 },
		"pseudo-random":    func(i int) bool { return (i*7919)%11 < 6 },
		"around maxLag ±1": func(i int) bool { return (i/2)%2 == 0 },
	}
	window := cfg.UpAfter + cfg.DownAfter
	for name, good := range patterns {
		t.Run(name, func(t *testing.T) {
			var st State
			var changes []int
			for i := range 200 {
				lag := 4 * time.Second
				if !good(i) {
					lag = 6 * time.Second
				}
				var ev []Event
				st, ev = run(t, cfg, st, []sitepair.SiteObservation{primary("a"), replica("b", "a", lag)}, recorded(), 1)
				for _, e := range ev {
					if e.Site == "b" {
						changes = append(changes, i)
					}
				}
			}
			if name == "long good 2 bad" && len(changes) < 4 {
				t.Fatalf("changes at rounds %v: the pattern should move b in and out", changes)
			}
			for k := 1; k < len(changes); k++ {
				if changes[k]-changes[k-1] < window {
					t.Fatalf("changes at rounds %v: two within %d rounds", changes, window)
				}
			}
		})
	}
}

// TestSafetyExitsAreImmediate guards that diverged, operator-fenced,
// recloning, maintenance-held and re-pointed replicas leave at once (no
// downAfter, no flap bound), even between two counted rounds.
func TestSafetyExitsAreImmediate(t *testing.T) {
	c := cfg
	c.Round = time.Second
	sites := []sitepair.SiteObservation{primary("a"), replica("b", "a", 0)}
	in, _ := run(t, c, State{}, sites, recorded(), 3)
	if !in.Sites["b"].Eligible {
		t.Fatalf("b not a reader: %+v", in.Sites["b"])
	}
	tests := map[string]func(*sitepair.SiteObservation, *sitepair.Persisted){
		"diverged":       func(_ *sitepair.SiteObservation, st *sitepair.Persisted) { st.Diverged = map[string]gtid.Set{"b": {}} },
		"operator fence": func(_ *sitepair.SiteObservation, st *sitepair.Persisted) { st.OperatorFenced = []string{"b"} },
		"recloning": func(_ *sitepair.SiteObservation, st *sitepair.Persisted) {
			st.Recloning = map[string]sitepair.Reclone{"b": {}}
		},
		"maintenance": func(_ *sitepair.SiteObservation, st *sitepair.Persisted) {
			st.Holds = map[string]sitepair.Hold{"b": {Kind: sitepair.HoldMaintenance, By: "ops", Until: t0.Add(time.Hour)}}
		},
		"re-pointed": func(o *sitepair.SiteObservation, _ *sitepair.Persisted) { o.ReplicatingFrom = "c" },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			b := replica("b", "a", 0)
			st := recorded()
			mutate(&b, &st)
			// 100ms after the last counted round: not a new round.
			got, ev := Compute([]sitepair.SiteObservation{primary("a"), b}, st, c, in, in.At.Add(100*time.Millisecond))
			if got.Sites["b"].Eligible || len(ev) != 2 || ev[1].Site != "b" || ev[1].Added {
				t.Fatalf("b %+v events %+v; want removed at once", got.Sites["b"], ev)
			}
		})
	}
}

// TestRoundsWithinAPollIntervalAreNotCounted guards that deciding several
// times per poll interval does not shortcut upAfter.
func TestRoundsWithinAPollIntervalAreNotCounted(t *testing.T) {
	c := cfg
	c.Round = time.Second
	sites := []sitepair.SiteObservation{primary("a"), replica("b", "a", 0)}
	var st State
	for i := range 10 {
		st, _ = Compute(sites, recorded(), c, st, t0.Add(time.Duration(i)*100*time.Millisecond))
	}
	if st.Sites["b"].Eligible {
		t.Fatalf("b joined after 10 decisions within one second: %+v", st.Sites["b"])
	}
	st, _ = run(t, c, st, sites, recorded(), 2)
	if !st.Sites["b"].Eligible {
		t.Fatalf("b not in after 3 counted rounds: %+v", st.Sites["b"])
	}
}

// TestIncludePrimaryModes guards includePrimary: whenNoReplica (only while no
// replica reads), always, never.
func TestIncludePrimaryModes(t *testing.T) {
	withReplica := []sitepair.SiteObservation{primary("a"), replica("b", "a", 0)}
	lagging := []sitepair.SiteObservation{primary("a"), replica("b", "a", time.Hour)}
	tests := []struct {
		mode       IncludePrimary
		sites      []sitepair.SiteObservation
		want       []string
		whyPrimary string
	}{
		{PrimaryWhenNoReplica, withReplica, []string{"b"}, "only while no replica does"},
		{PrimaryWhenNoReplica, lagging, []string{"a"}, "because no replica does"},
		{"", lagging, []string{"a"}, "because no replica does"},
		{PrimaryAlways, withReplica, []string{"a", "b"}, "always"},
		{PrimaryAlways, lagging, []string{"a"}, "always"},
		{PrimaryNever, withReplica, []string{"b"}, "never"},
		{PrimaryNever, lagging, nil, "never"},
	}
	for _, tc := range tests {
		c := cfg
		c.IncludePrimary = tc.mode
		st, _ := run(t, c, State{}, tc.sites, recorded(), 5)
		if got := st.Readers(); !slices.Equal(got, tc.want) || !strings.Contains(st.Sites["a"].Why, tc.whyPrimary) {
			t.Errorf("%q: readers %v primary why %q; want %v, why containing %q", tc.mode, got, st.Sites["a"].Why, tc.want, tc.whyPrimary)
		}
	}
	// An unreachable primary is no reader, whatever the mode.
	down := primary("a")
	down.State = statemachine.Unreachable
	c := cfg
	c.IncludePrimary = PrimaryAlways
	if st, _ := run(t, c, State{}, []sitepair.SiteObservation{down}, recorded(), 5); len(st.Readers()) != 0 {
		t.Fatalf("unreachable primary reads: %+v", st.Sites["a"])
	}
}

// TestRestartStartsWithNoReaders guards the in-memory state: a fresh State
// has no readers and fills after upAfter rounds.
func TestRestartStartsWithNoReaders(t *testing.T) {
	c := cfg
	c.IncludePrimary = PrimaryNever
	sites := []sitepair.SiteObservation{primary("a"), replica("b", "a", 0), replica("c", "a", 0)}
	st, ev := run(t, c, State{}, sites, recorded(), 1)
	if len(st.Readers()) != 0 || len(ev) != 0 {
		t.Fatalf("first round readers %v events %v, want none", st.Readers(), ev)
	}
	st, ev = run(t, c, st, sites, recorded(), c.UpAfter-1)
	if !slices.Equal(st.Readers(), []string{"b", "c"}) || len(ev) != 2 {
		t.Fatalf("after upAfter rounds readers %v events %v, want b c added", st.Readers(), ev)
	}
}

// TestResetRemovesEveryReaderAndRestartsHysteresis guards a stale state
// (leadership regained, rounds stalled): every reader leaves at once with
// an event, and a site rejoins only after upAfter fresh rounds.
func TestResetRemovesEveryReaderAndRestartsHysteresis(t *testing.T) {
	sites := []sitepair.SiteObservation{primary("a"), replica("b", "a", 0), replica("c", "a", time.Hour)}
	st, _ := run(t, cfg, State{}, sites, recorded(), 5)
	if !st.Stale(st.At.Add(time.Minute), 10*time.Second) || st.Stale(st.At.Add(time.Second), 10*time.Second) || (State{}).Stale(t0, time.Second) {
		t.Fatal("Stale wrong")
	}
	later := st.At.Add(time.Minute)
	reset, ev := Reset(st, cfg, later, "stale")
	if len(reset.Readers()) != 0 || len(ev) != 1 || ev[0] != (Event{Site: "b", Why: "stale"}) || !reset.Sites["b"].Since.Equal(later) {
		t.Fatalf("reset %+v events %+v; want b removed at %v", reset, ev, later)
	}
	next, ev := Compute(sites, recorded(), cfg, reset, later)
	if len(next.Readers()) != 0 || len(ev) != 0 {
		t.Fatalf("first round after reset readers %v events %v, want none", next.Readers(), ev)
	}
	next, _ = run(t, cfg, next, sites, recorded(), cfg.UpAfter-1)
	if !slices.Equal(next.Readers(), []string{"b"}) {
		t.Fatalf("after upAfter rounds readers %v, want b", next.Readers())
	}
}

// TestWithheldListsSafetyReasonsOnlyAsComputeWordsThem guards what the
// daemon signs into the view's NoReads: every per-site safety reason,
// worded as in the reader set, and nothing a sidecar judges itself (lag,
// stopped threads, unreachable) nor a group-wide state (a failover in
// flight hides no site's own reason); a site with only a name (not
// observed yet) still gets the record's reasons.
func TestWithheldListsSafetyReasonsOnlyAsComputeWordsThem(t *testing.T) {
	st := recorded()
	st.Diverged = map[string]gtid.Set{"b": {}}
	st.Recloning = map[string]sitepair.Reclone{"c": {Donor: "a"}}
	st.OperatorFenced = []string{"d"}
	st.Holds = map[string]sitepair.Hold{
		"e": {Kind: sitepair.HoldMaintenance, By: "ops", Since: t0.Add(-time.Hour), Until: t0.Add(time.Hour)},
		"f": {Kind: sitepair.HoldMaintenance, By: "ops", Since: t0.Add(-2 * time.Hour), Until: t0.Add(-time.Hour)}, // expired
	}
	lagging := replica("g", "a", time.Hour)
	stopped := replica("h", "a", 0)
	stopped.ApplierStopped = true
	lost := replica("i", "c", 0)
	lost.State = statemachine.Unreachable
	sites := []sitepair.SiteObservation{primary("a"), replica("b", "a", 0), replica("c", "a", 0), replica("d", "a", 0),
		replica("e", "a", 0), replica("f", "a", 0), lagging, stopped, lost, replica("j", "c", 0), replica("k", "", 0), {Name: "l"}}
	st.OperatorFenced = append(st.OperatorFenced, "l")
	got := Withheld(sites, st, t0)
	want := map[string]string{
		"b": "diverged", "c": "recloning", "d": "fenced by the operator",
		"e": "held for maintenance by ops until " + t0.Add(time.Hour).UTC().Format(time.RFC3339),
		"j": "replicating from c, not from the primary a", "k": "not replicating (the primary is a)",
		"l": "fenced by the operator",
	}
	if len(got) != len(want) {
		t.Fatalf("Withheld = %v, want %v", got, want)
	}
	state, _ := Compute(sites, st, cfg, State{}, t0)
	for site, why := range want {
		if got[site] != why {
			t.Errorf("Withheld[%s] = %q, want %q", site, got[site], why)
		}
		if s := state.Sites[site]; s.Eligible || s.Why != why {
			t.Errorf("the reader set words %s as %q (eligible %v), Withheld as %q", site, s.Why, s.Eligible, got[site])
		}
	}
	// A failover in flight: no primary recorded; the per-site reasons stay,
	// the source reasons (no primary to compare with) do not.
	st.InFlight, st.ActiveSite = &sitepair.InFlight{From: "a", To: "g"}, ""
	got = Withheld(sites, st, t0)
	if _, ok := got["j"]; ok || got["b"] != "diverged" || len(got) != 5 {
		t.Errorf("in flight: Withheld = %v, want the record's reasons only", got)
	}
	if got := Withheld([]sitepair.SiteObservation{replica("b", "a", 0)}, recorded(), t0); got != nil {
		t.Errorf("nothing withheld: %v, want nil", got)
	}
}
