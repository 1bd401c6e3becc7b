package readers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/grview"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
)

// grSitesABC are three members a, b, c (server_uuids ua, ub, uc).
var grSitesABC = []grview.Site{{Name: "a", Addr: "127.0.0.1:3301"}, {Name: "b", Addr: "127.0.0.1:3302"}, {Name: "c", Addr: "127.0.0.1:3303"}}

// fakeGR is a three-member group as its members report it, one round per
// second: the primary commits one transaction a second; each member lags
// by lag rounds.
type fakeGR struct {
	primary string
	view    string
	// state is each member's state in the group's view (absent: ONLINE;
	// "gone": expelled, in no view).
	state map[string]grview.MemberState
	// down members are not reached this round.
	down map[string]bool
	// lag is each member's lag in transactions (= seconds).
	lag map[string]int
	// own overrides a member's own report (a stale view).
	own map[string]func(grview.Report) grview.Report
	// gv is the verdict state carried between rounds.
	gv grview.State
	// round counts the rounds computed.
	round int
}

func newFakeGR() *fakeGR {
	return &fakeGR{primary: "a", view: "v1", state: map[string]grview.MemberState{}, down: map[string]bool{}, lag: map[string]int{},
		own: map[string]func(grview.Report) grview.Report{}}
}

func uuidOf(site string) string { return "u" + site }

// table is the group's view as every member in it reports it.
func (f *fakeGR) table() []grview.Member {
	var out []grview.Member
	for i, s := range grSitesABC {
		st, ok := f.state[s.Name]
		if !ok {
			st = grview.StateOnline
		}
		if st == "gone" || st == grview.StateError || st == grview.StateOffline {
			continue // seen only in its own table
		}
		role := grview.RoleSecondary
		if s.Name == f.primary && st == grview.StateOnline {
			role = grview.RolePrimary
		}
		out = append(out, grview.Member{ID: uuidOf(s.Name), Host: "127.0.0.1", Port: 3301 + i, State: st, Role: role})
	}
	return out
}

// next is the next round's input at t0 + round seconds.
func (f *fakeGR) next() (GroupRound, time.Time) {
	now := t0.Add(time.Duration(f.round) * time.Second)
	var reports []grview.Report
	executed := map[string]gtid.Set{}
	for _, s := range grSitesABC {
		if f.down[s.Name] {
			continue
		}
		st := f.state[s.Name]
		members := f.table()
		if st == "gone" || st == grview.StateError || st == grview.StateOffline {
			// Out of the group: its table holds itself alone.
			if st == "gone" {
				st = grview.StateOffline
			}
			members = []grview.Member{{ID: uuidOf(s.Name), Host: "127.0.0.1", Port: 3300, State: st}}
		}
		r := grview.Report{Site: s.Name, Self: uuidOf(s.Name), GroupName: "g1", ViewID: f.view, SinglePrimary: true, Members: members}
		if o := f.own[s.Name]; o != nil {
			r = o(r)
		}
		reports = append(reports, r)
		executed[s.Name] = gtid.MustParse(gtid.MySQL, fmt.Sprintf("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-%d", 100+f.round-f.lag[s.Name]))
	}
	v, gv := grview.Evaluate(f.gv, grSitesABC, reports, now)
	f.gv = gv
	f.round++
	return GroupRound{Verdict: v, Executed: executed}, now
}

// runGR computes n rounds of f.
func runGR(f *fakeGR, c Config, prev State, st sitepair.Persisted, n int) (State, []Event) {
	var all []Event
	for range n {
		r, now := f.next()
		var ev []Event
		prev, ev = ComputeGroup(r, st, c, prev, now)
		all = append(all, ev...)
	}
	return prev, all
}

// grCfg rounds every second, as fakeGR does.
var grCfg = Config{MaxLag: 5 * time.Second, UpAfter: 3, DownAfter: 2, IncludePrimary: PrimaryWhenNoReplica, Round: time.Second}

// TestGroupMemberRules guards each Group Replication eligibility rule: b,
// a reader, meets one condition for a round; a safety reason takes it out
// at once, a freshness one only after downAfter rounds; Why names it.
func TestGroupMemberRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*fakeGR)
		safety bool
		why    string
	}{
		{"RECOVERING in the view", func(f *fakeGR) { f.state["b"] = grview.StateRecovering }, true, "RECOVERING in the group's view"},
		{"UNREACHABLE in the view", func(f *fakeGR) { f.state["b"] = grview.StateUnreachable; f.down["b"] = true }, true, "UNREACHABLE in the group's view"},
		{"ERROR (left the group)", func(f *fakeGR) { f.state["b"] = grview.StateError }, true, "not in the group's view"},
		{"OFFLINE (expelled)", func(f *fakeGR) { f.state["b"] = "gone" }, true, "not in the group's view"},
		{"own report on a stale view", func(f *fakeGR) {
			f.own["b"] = func(r grview.Report) grview.Report { r.ViewID = "v0"; return r }
		}, true, "disagrees with the group's view (stale-view)"},
		{"not reached this round", func(f *fakeGR) { f.down["b"] = true }, false, "unreachable: its report could not be read"},
		{"lag over maxLag", func(f *fakeGR) { f.lag["b"] = 30 }, false, "over maxLag 5s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeGR()
			f.lag["b"], f.lag["c"] = 1, 1
			st, _ := runGR(f, grCfg, State{}, recorded(), 8)
			if got := st.Readers(); !slices.Equal(got, []string{"b", "c"}) {
				t.Fatalf("healthy readers %v (b: %s), want [b c]", got, st.Sites["b"].Why)
			}
			tc.mutate(f)
			st, ev := runGR(f, grCfg, st, recorded(), 1)
			b := st.Sites["b"]
			if !strings.Contains(b.Why, tc.why) {
				t.Fatalf("b: %q, want it to name %q", b.Why, tc.why)
			}
			if b.Eligible == tc.safety {
				t.Fatalf("after one round b eligible %v (%s); a safety reason leaves at once, freshness after downAfter", b.Eligible, b.Why)
			}
			if tc.safety && (len(ev) != 1 || ev[0].Site != "b" || ev[0].Added) {
				t.Fatalf("events %+v, want b removed", ev)
			}
			if !tc.safety {
				if st, _ = runGR(f, grCfg, st, recorded(), 1); st.Sites["b"].Eligible {
					t.Fatalf("after downAfter bad rounds b is still a reader: %s", st.Sites["b"].Why)
				}
			}
			if !st.Sites["c"].Eligible {
				t.Fatalf("c left too: %s", st.Sites["c"].Why)
			}
		})
	}
}

// TestGroupNoQuorumNoReaders guards that without a quorate verdict (two of
// three members lost; the survivor's view is a minority) no member, the
// primary included, stays a reader for even a round.
func TestGroupNoQuorumNoReaders(t *testing.T) {
	f := newFakeGR()
	c := grCfg
	c.IncludePrimary = PrimaryAlways
	st, _ := runGR(f, c, State{}, recorded(), 4)
	if got := st.Readers(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("readers %v, want all three (includePrimary: always)", got)
	}
	f.state["a"], f.state["b"] = grview.StateUnreachable, grview.StateUnreachable
	f.down["a"], f.down["b"] = true, true
	st, ev := runGR(f, c, st, recorded(), 1)
	if len(st.Readers()) != 0 || len(ev) != 3 {
		t.Fatalf("without quorum: readers %v events %+v, want none, three removals", st.Readers(), ev)
	}
	if why := st.Sites["c"].Why; !strings.Contains(why, "no quorate view (no-quorum)") {
		t.Fatalf("c: %q, want no quorate view", why)
	}
}

// TestGroupHysteresisAndLag guards the hysteresis on a Group Replication
// group (upAfter good rounds to join, downAfter bad ones to leave) and the
// lag measure: the age of the oldest sampled primary position the member
// lacks (exact to a round), unknown while it lacks even the first sample.
func TestGroupHysteresisAndLag(t *testing.T) {
	f := newFakeGR()
	f.lag["b"] = 3
	st, _ := runGR(f, grCfg, State{}, recorded(), 1)
	if b := st.Sites["b"]; b.LagSeconds != -1 || !strings.Contains(b.Why, "lag unknown") {
		t.Fatalf("first round b %+v, want lag unknown (lacks the first sample)", b)
	}
	st, _ = runGR(f, grCfg, st, recorded(), 4)
	if b := st.Sites["b"]; b.LagSeconds != 2 || b.Eligible {
		t.Fatalf("b %+v, want lag 2s (3 transactions a second apart, exact to a round) and not yet in", b)
	}
	st, ev := runGR(f, grCfg, st, recorded(), 1)
	if !st.Sites["b"].Eligible || len(ev) != 1 || ev[0].Site != "b" {
		t.Fatalf("after upAfter good rounds b %+v events %+v", st.Sites["b"], ev)
	}
	st, _ = runGR(f, grCfg, st, recorded(), 10)
	f.lag["b"] = 9
	st, ev = runGR(f, grCfg, st, recorded(), 1)
	if !st.Sites["b"].Eligible || len(ev) != 0 {
		t.Fatalf("after one lagging round b %+v, want still in (downAfter 2)", st.Sites["b"])
	}
	st, ev = runGR(f, grCfg, st, recorded(), 1)
	// The samples go back maxLag+round (6 s): the lag shown is that lower
	// bound, over maxLag.
	if b := st.Sites["b"]; b.Eligible || len(ev) != 1 || b.LagSeconds != 6 || !strings.Contains(b.Why, "lag 6s over maxLag 5s") {
		t.Fatalf("after downAfter lagging rounds b %+v events %+v, want out at lag 6s", b, ev)
	}
	// Caught up, it returns (after the flap bound).
	f.lag["b"] = 0
	if st, _ = runGR(f, grCfg, st, recorded(), 5); !st.Sites["b"].Eligible || st.Sites["b"].LagSeconds != 0 {
		t.Fatalf("caught up: b %+v, want back in at lag 0", st.Sites["b"])
	}
	if n := len(st.applied); n > int((grCfg.MaxLag+grCfg.Round)/time.Second)+1 {
		t.Fatalf("%d samples kept, want at most maxLag+round worth", n)
	}
}

// TestGroupElectionMovesTheReaderSet guards the reader set across the
// group's election: while failoverd's record still names the old primary
// there are no readers; once it names the new one, the new primary leaves
// the replicas (includePrimary whenNoReplica), the killed member is no
// reader, and the other secondary is.
func TestGroupElectionMovesTheReaderSet(t *testing.T) {
	f := newFakeGR()
	st, _ := runGR(f, grCfg, State{}, recorded(), 4)
	if got := st.Readers(); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("readers %v, want [b c]", got)
	}
	// a is killed; the survivors expel it and elect b.
	f.down["a"], f.state["a"], f.primary, f.view = true, "gone", "b", "v2"
	st, ev := runGR(f, grCfg, st, recorded(), 1)
	if len(st.Readers()) != 0 || len(ev) != 2 || !strings.Contains(st.Sites["c"].Why, "record still names a") {
		t.Fatalf("before failoverd follows: readers %v events %+v (c: %s), want none", st.Readers(), ev, st.Sites["c"].Why)
	}
	followed := sitepair.Persisted{Epoch: 5, ActiveSite: "b"}
	// A safety exit restarts the flap bound: upAfter+downAfter rounds.
	st, _ = runGR(f, grCfg, st, followed, grCfg.UpAfter+grCfg.DownAfter)
	if got := st.Readers(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after following b: readers %v, want [c] (b: %s; a: %s)", got, st.Sites["b"].Why, st.Sites["a"].Why)
	}
	if a := st.Sites["a"]; a.Eligible || !strings.Contains(a.Why, "not in the group's view v2") {
		t.Fatalf("the killed member: %+v", a)
	}
	c := grCfg
	c.IncludePrimary = PrimaryAlways
	if st, _ = runGR(f, c, st, followed, 1); !slices.Equal(st.Readers(), []string{"b", "c"}) {
		t.Fatalf("includePrimary always: readers %v, want [b c]", st.Readers())
	}
}
