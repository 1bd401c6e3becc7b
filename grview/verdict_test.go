package grview

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// Three configured sites a, b, c; their server_uuids ua, ub, uc; d is a
// member no site names.
var (
	sitesABC = []Site{{"a", "127.0.0.1:3301"}, {"b", "127.0.0.1:3302"}, {"c", "127.0.0.1:3303"}}
	ports    = map[string]int{"ua": 3301, "ub": 3302, "uc": 3303, "ud": 3304}
	t0       = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func m(id string, st MemberState, role Role) Member {
	return Member{ID: id, Host: "127.0.0.1", Port: ports[id], State: st, Role: role, Version: "9.7.4"}
}

func on(id string) Member   { return m(id, StateOnline, RoleSecondary) }
func prim(id string) Member { return m(id, StateOnline, RolePrimary) }
func gone(id string) Member { return m(id, StateUnreachable, RoleSecondary) }

// rep is site's report of a single-primary group named g1 in view.
func rep(site, self, view string, members ...Member) Report {
	return Report{Site: site, Self: self, GroupName: "g1", ViewID: view, SinglePrimary: true, Members: members}
}

func inGroup(r Report, group string) Report { r.GroupName = group; return r }

// allThree is the healthy view v1: a primary, b and c secondaries.
func allThree(site, self string) Report { return rep(site, self, "v1", prim("ua"), on("ub"), on("uc")) }

func standings(v Verdict) map[string]Standing {
	out := map[string]Standing{}
	for _, s := range v.Sites {
		out[s.Site] = s.Standing
	}
	return out
}

// Each rule of Evaluate, one case each: who votes, who is outvoted, and
// which reason the verdict carries.
func TestEvaluateRules(t *testing.T) {
	healthy := State{MaxViewSize: 3, ViewID: "v1", Primary: "ua", PrimarySite: "a", UUIDs: map[string]string{"a": "ua", "b": "ub", "c": "uc"}}
	tests := []struct {
		name        string
		prev        State
		reports     []Report
		reason      Reason
		primarySite string
		standing    map[string]Standing
		warn        string // a warning must contain this ("" = no warning)
	}{
		{
			name:    "all three members agree",
			reports: []Report{allThree("a", "ua"), allThree("b", "ub"), allThree("c", "uc")},
			reason:  ReasonQuorate, primarySite: "a",
			standing: map[string]Standing{"a": StandingAgrees, "b": StandingAgrees, "c": StandingAgrees},
		},
		{
			name: "primary killed: the two survivors' new view wins",
			prev: healthy,
			reports: []Report{
				rep("b", "ub", "v2", prim("ub"), on("uc")),
				rep("c", "uc", "v2", prim("ub"), on("uc")),
			},
			reason: ReasonQuorate, primarySite: "b",
			standing: map[string]Standing{"a": StandingUnreached, "b": StandingAgrees, "c": StandingAgrees},
		},
		{
			// a is blocked from b and c; its failure detector has not fired
			// yet, so it still shows the old view with itself primary, while
			// b and c expelled it and elected b.
			name: "a stale member blocked from the others is outvoted",
			prev: healthy,
			reports: []Report{
				allThree("a", "ua"),
				rep("b", "ub", "v2", prim("ub"), on("uc")),
				rep("c", "uc", "v2", prim("ub"), on("uc")),
			},
			reason: ReasonQuorate, primarySite: "b",
			standing: map[string]Standing{"a": StandingStaleView, "b": StandingAgrees, "c": StandingAgrees},
		},
		{
			name: "a minority partition claiming the old primary does not vote",
			prev: healthy,
			reports: []Report{
				rep("a", "ua", "v1", prim("ua"), gone("ub"), gone("uc")),
				rep("b", "ub", "v2", prim("ub"), on("uc")),
				rep("c", "uc", "v2", prim("ub"), on("uc")),
			},
			reason: ReasonQuorate, primarySite: "b",
			standing: map[string]Standing{"a": StandingMinority, "b": StandingAgrees, "c": StandingAgrees},
		},
		{
			name: "a member lying about the primary of the same view is outvoted",
			prev: healthy,
			reports: []Report{
				allThree("a", "ua"), allThree("b", "ub"),
				rep("c", "uc", "v1", on("ua"), on("ub"), prim("uc")),
			},
			reason: ReasonQuorate, primarySite: "a",
			standing: map[string]Standing{"a": StandingAgrees, "b": StandingAgrees, "c": StandingOtherPrimary},
		},
		{
			name: "a second group bootstrapped on one member: outvoted and warned about",
			prev: healthy,
			reports: []Report{
				rep("a", "ua", "v2", prim("ua"), on("ub")), rep("b", "ub", "v2", prim("ua"), on("ub")),
				inGroup(rep("c", "uc", "x1", prim("uc")), "g2"),
			},
			reason: ReasonQuorate, primarySite: "a",
			standing: map[string]Standing{"a": StandingAgrees, "b": StandingAgrees, "c": StandingOtherGroup},
			warn:     "2 group names: g1 (a, b); g2 (c)",
		},
		{
			// A daemon without history reaching only c, alone in a group of
			// its own: the configured sites are the floor of the denominator.
			name:     "a single member in a one-member view never wins alone",
			reports:  []Report{inGroup(rep("c", "uc", "x1", prim("uc")), "g2")},
			reason:   ReasonUnconfirmed,
			standing: map[string]Standing{"a": StandingUnreached, "b": StandingUnreached, "c": StandingUndecided},
		},
		{
			name:     "one member of a healthy group reached: unconfirmed, not no-quorum",
			prev:     healthy,
			reports:  []Report{allThree("b", "ub")},
			reason:   ReasonUnconfirmed,
			standing: map[string]Standing{"a": StandingUnreached, "b": StandingUndecided, "c": StandingUnreached},
		},
		{
			name:     "two of three killed: the survivor sees the majority unreachable",
			prev:     State{MaxViewSize: 3, ViewID: "v2", Primary: "ub"},
			reports:  []Report{rep("b", "ub", "v2", prim("ub"), gone("uc"))},
			reason:   ReasonNoQuorum,
			standing: map[string]Standing{"a": StandingUnreached, "b": StandingMinority, "c": StandingUnreached},
		},
		{
			name: "total outage: every member reached but none in a group",
			prev: healthy,
			reports: []Report{
				rep("a", "ua", "", m("ua", StateOffline, "")), rep("b", "ub", "", m("ub", StateError, "")), rep("c", "uc", "", m("uc", StateOffline, "")),
			},
			reason:   ReasonNoQuorum,
			standing: map[string]Standing{"a": StandingNotMember, "b": StandingNotMember, "c": StandingNotMember},
		},
		{
			name: "a recovering member does not vote",
			prev: healthy,
			reports: []Report{
				rep("a", "ua", "v3", prim("ua"), on("ub"), m("uc", StateRecovering, RoleSecondary)),
				rep("b", "ub", "v3", prim("ua"), on("ub"), m("uc", StateRecovering, RoleSecondary)),
				rep("c", "uc", "v3", prim("ua"), on("ub"), m("uc", StateRecovering, RoleSecondary)),
			},
			reason: ReasonQuorate, primarySite: "a",
			standing: map[string]Standing{"a": StandingAgrees, "b": StandingAgrees, "c": StandingRecovering},
		},
		{
			name: "election under way: a quorate view without a primary",
			prev: healthy,
			reports: []Report{
				rep("b", "ub", "v2", on("ub"), on("uc")), rep("c", "uc", "v2", on("ub"), on("uc")),
			},
			reason:   ReasonNoPrimary,
			standing: map[string]Standing{"a": StandingUnreached, "b": StandingAgrees, "c": StandingAgrees},
		},
		{
			name: "a view member no configured site is: warned about",
			prev: healthy,
			reports: []Report{
				rep("a", "ua", "v4", prim("ua"), on("ub"), on("uc"), on("ud")),
				rep("b", "ub", "v4", prim("ua"), on("ub"), on("uc"), on("ud")),
				rep("c", "uc", "v4", prim("ua"), on("ub"), on("uc"), on("ud")),
			},
			reason: ReasonQuorate, primarySite: "a",
			standing: map[string]Standing{"a": StandingAgrees, "b": StandingAgrees, "c": StandingAgrees},
			warn:     "member ud (127.0.0.1:3304) is in the group's view but is no configured site",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, _ := Evaluate(tt.prev, sitesABC, tt.reports, t0)
			if v.Reason != tt.reason || v.PrimarySite != tt.primarySite {
				t.Errorf("verdict %s primary site %q, want %s %q (%+v)", v.Reason, v.PrimarySite, tt.reason, tt.primarySite, v)
			}
			if v.Quorate != (tt.reason == ReasonQuorate || tt.reason == ReasonNoPrimary) {
				t.Errorf("Quorate = %t with reason %s", v.Quorate, v.Reason)
			}
			if got := standings(v); !maps.Equal(got, tt.standing) {
				t.Errorf("standings %v, want %v", got, tt.standing)
			}
			joined := strings.Join(v.Warnings, "\n")
			if (tt.warn == "") != (joined == "") || !strings.Contains(joined, tt.warn) {
				t.Errorf("warnings %q, want one containing %q", v.Warnings, tt.warn)
			}
		})
	}
}

// The denominator is sticky: a group that had five members needs three
// agreeing reports even after it shrank to three, and a verdict on the
// smaller view does not lower it (only the caller does, through State).
func TestMaxViewSizeIsStickyAndTheDenominator(t *testing.T) {
	prev := State{MaxViewSize: 5}
	two := []Report{allThree("a", "ua"), allThree("b", "ub")}
	v, next := Evaluate(prev, sitesABC, two, t0)
	if v.Reason != ReasonUnconfirmed || v.Denominator != 5 {
		t.Fatalf("two of a once-five-member group: %s over %d, want unconfirmed over 5", v.Reason, v.Denominator)
	}
	if next.MaxViewSize != 5 {
		t.Fatalf("MaxViewSize %d after no verdict, want 5", next.MaxViewSize)
	}
	v, next = Evaluate(next, sitesABC, append(two, allThree("c", "uc")), t0)
	if v.Reason != ReasonQuorate || v.Denominator != 5 || next.MaxViewSize != 5 {
		t.Fatalf("three of five: %s over %d, MaxViewSize %d; want quorate over 5, still 5", v.Reason, v.Denominator, next.MaxViewSize)
	}
	// A larger view raises it once it wins.
	four := func(site, self string) Report { return rep(site, self, "v9", prim("ua"), on("ub"), on("uc"), on("ud")) }
	_, next = Evaluate(State{}, sitesABC, []Report{four("a", "ua"), four("b", "ub"), four("c", "uc")}, t0)
	if next.MaxViewSize != 4 {
		t.Fatalf("MaxViewSize %d after a quorate four-member view, want 4", next.MaxViewSize)
	}
}

// Without history the configured sites are the denominator, and the first
// verdict makes them sticky even on a smaller view; after a forced
// membership a human lowers MaxViewSize to the survivors, whose view then
// wins, while a liar voting for another view beside it still does not.
func TestDenominatorWithoutHistoryAndAfterAForcedMembership(t *testing.T) {
	two := []Report{rep("a", "ua", "v2", prim("ua"), on("ub")), rep("b", "ub", "v2", prim("ua"), on("ub"))}
	v, next := Evaluate(State{}, sitesABC, two, t0)
	if v.Reason != ReasonQuorate || v.Denominator != 3 || next.MaxViewSize != 3 {
		t.Fatalf("first verdict on a two-member view: %s over %d, MaxViewSize %d; want quorate over 3, 3", v.Reason, v.Denominator, next.MaxViewSize)
	}
	forced := rep("a", "ua", "v7", prim("ua"))
	if v, _ := Evaluate(next, sitesABC, []Report{forced}, t0); v.Reason == ReasonQuorate {
		t.Fatal("a lone member won against the sticky denominator")
	}
	lowered := next
	lowered.MaxViewSize = 1
	v, after := Evaluate(lowered, sitesABC, []Report{forced}, t0)
	if v.Reason != ReasonQuorate || v.PrimarySite != "a" || after.MaxViewSize != 1 {
		t.Fatalf("forced survivor with MaxViewSize 1: %s %q, MaxViewSize %d", v.Reason, v.PrimarySite, after.MaxViewSize)
	}
	liar := inGroup(rep("c", "uc", "x1", prim("uc")), "g2")
	if v, _ := Evaluate(lowered, sitesABC, []Report{forced, liar}, t0); v.Reason == ReasonQuorate {
		t.Fatalf("two one-member views both counted: %+v", v)
	}
}

// A lying member claiming a huge view cannot raise the denominator: only
// a winning view's size enters the state.
func TestALyingBigViewNeitherWinsNorRaisesTheDenominator(t *testing.T) {
	big := rep("c", "uc", "v9", prim("uc"), on("ua"), on("ub"), on("ud"), m("ue", StateOnline, RoleSecondary))
	v, next := Evaluate(State{MaxViewSize: 3}, sitesABC, []Report{allThree("a", "ua"), allThree("b", "ub"), big}, t0)
	if v.Reason != ReasonQuorate || v.PrimarySite != "a" || next.MaxViewSize != 3 {
		t.Fatalf("verdict %s %q, MaxViewSize %d; want quorate a, 3", v.Reason, v.PrimarySite, next.MaxViewSize)
	}
}

// The verdict says when the view and the primary changed, against the
// state it was given, and the state stamps when each was first seen.
func TestEvaluateTracksViewAndPrimaryChanges(t *testing.T) {
	all := []Report{allThree("a", "ua"), allThree("b", "ub"), allThree("c", "uc")}
	v, st := Evaluate(State{}, sitesABC, all, t0)
	if !v.ViewChanged || !v.PrimaryChanged || v.PreviousPrimary != "" || st.Primary != "ua" || st.PrimarySite != "a" || !st.PrimarySince.Equal(t0) {
		t.Fatalf("first verdict %+v, state %+v", v, st)
	}
	v, st2 := Evaluate(st, sitesABC, all, t0.Add(time.Second))
	if v.ViewChanged || v.PrimaryChanged || !st2.ViewSince.Equal(t0) || !st2.PrimarySince.Equal(t0) {
		t.Fatalf("same view again: %+v, state %+v", v, st2)
	}
	t1 := t0.Add(2 * time.Second)
	survivors := []Report{rep("b", "ub", "v2", prim("ub"), on("uc")), rep("c", "uc", "v2", prim("ub"), on("uc"))}
	v, st3 := Evaluate(st2, sitesABC, survivors, t1)
	if !v.ViewChanged || !v.PrimaryChanged || v.PreviousPrimary != "ua" || st3.Primary != "ub" || !st3.PrimarySince.Equal(t1) || st3.ViewID != "v2" {
		t.Fatalf("after failover %+v, state %+v", v, st3)
	}
	// An election in progress keeps the last primary in the state.
	v, st4 := Evaluate(st3, sitesABC, []Report{rep("b", "ub", "v3", on("ub"), on("uc")), rep("c", "uc", "v3", on("ub"), on("uc"))}, t1)
	if v.Reason != ReasonNoPrimary || v.PrimaryChanged || st4.Primary != "ub" || st4.ViewID != "v3" {
		t.Fatalf("no primary: %+v, state %+v", v, st4)
	}
	// The input state is never modified.
	if st.UUIDs["a"] != "ua" || len(State{}.UUIDs) != 0 {
		t.Fatal("state aliasing")
	}
}

// A primary the daemon cannot reach is still named by its address when no
// report of its site ever gave its server_uuid.
func TestPrimarySiteByAddressWhenItsUUIDIsUnknown(t *testing.T) {
	v, _ := Evaluate(State{}, sitesABC, []Report{allThree("b", "ub"), allThree("c", "uc")}, t0)
	if v.Reason != ReasonQuorate || v.PrimarySite != "a" || v.Primary.ID != "ua" {
		t.Fatalf("verdict %s %q %q, want quorate, a, ua", v.Reason, v.PrimarySite, v.Primary.ID)
	}
	if got := v.Agreeing(); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("Agreeing() = %v", got)
	}
	if v.States[StateOnline] != 3 || len(v.Members) != 3 || v.ViewSize != 3 {
		t.Fatalf("members %v states %v size %d", v.Members, v.States, v.ViewSize)
	}
}

// Multi-primary mode has no primary to follow: no primary, and a warning.
func TestMultiPrimaryModeIsNoPrimaryAndWarned(t *testing.T) {
	mp := func(site, self string) Report {
		r := rep(site, self, "v1", prim("ua"), prim("ub"), prim("uc"))
		r.SinglePrimary = false
		return r
	}
	v, _ := Evaluate(State{}, sitesABC, []Report{mp("a", "ua"), mp("b", "ub"), mp("c", "uc")}, t0)
	if v.Reason != ReasonNoPrimary || len(v.Warnings) != 1 || !strings.Contains(v.Warnings[0], "multi-primary") {
		t.Fatalf("verdict %s, warnings %q", v.Reason, v.Warnings)
	}
}

// A report from a site that is not configured is ignored, and a second
// report of a site does not vote twice.
func TestUnknownAndDuplicateReportsDoNotVote(t *testing.T) {
	r := allThree("b", "ub")
	v, _ := Evaluate(State{}, sitesABC, []Report{r, r, allThree("zz", "ud")}, t0)
	if v.Reason != ReasonUnconfirmed {
		t.Fatalf("one site reporting twice plus an unknown site: %s, want unconfirmed", v.Reason)
	}
}

func TestReportQuorate(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Report
		want bool
	}{
		{"all online", allThree("a", "ua"), true},
		{"two of three reachable", rep("a", "ua", "v1", prim("ua"), on("ub"), gone("uc")), true},
		{"recovering counts", rep("a", "ua", "v1", prim("ua"), m("ub", StateRecovering, RoleSecondary), gone("uc")), true},
		{"one of three reachable", rep("a", "ua", "v1", prim("ua"), gone("ub"), gone("uc")), false},
		{"one of two reachable", rep("a", "ua", "v1", prim("ua"), gone("ub")), false},
		{"offline self", rep("a", "ua", "", m("ua", StateOffline, "")), false},
		{"self missing from its table", rep("a", "ux", "v1", prim("ua"), on("ub"), on("uc")), false},
	} {
		if got := tc.r.Quorate(); got != tc.want {
			t.Errorf("%s: Quorate() = %t, want %t", tc.name, got, tc.want)
		}
	}
}

func TestSameServer(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:3306", "localhost:3306", true},
		{"DB-East:3306", "db-east:03306", true},
		{"[::ffff:10.0.0.1]:3306", "10.0.0.1:3306", true},
		{"10.0.0.1:3306", "10.0.0.1:3307", false},
		{"db:3306", "", false},
	} {
		if got := SameServer(tc.a, tc.b); got != tc.want {
			t.Errorf("SameServer(%q, %q) = %t, want %t", tc.a, tc.b, got, tc.want)
		}
	}
}
