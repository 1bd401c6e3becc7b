package sitepair

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/grview"
	"github.com/failoverd/failoverd/gtid"
)

func grVerdict(reason grview.Reason, primarySite string, standings ...grview.Standing) grview.Verdict {
	v := grview.Verdict{Reason: reason, Quorate: reason == grview.ReasonQuorate || reason == grview.ReasonNoPrimary, ViewID: "v:2", Denominator: 3}
	if primarySite != "" || reason == grview.ReasonQuorate {
		v.Primary = grview.Member{ID: "uuid-" + primarySite, Host: "h", Port: 3306}
		v.PrimarySite = primarySite
	}
	for i, s := range []string{"a", "b", "c"} {
		st := grview.StandingAgrees
		if i < len(standings) {
			st = standings[i]
		}
		v.Sites = append(v.Sites, grview.SiteView{Site: s, Standing: st})
	}
	return v
}

// The group decides; failoverd follows: only a quorate verdict naming a
// configured site other than the recorded one moves the epoch (AdoptPrimary
// to it, epoch+1), and every other verdict keeps the recorded site.
func TestGroupReplicationDecisionFollowsOnlyAQuorateVerdict(t *testing.T) {
	st := Persisted{Epoch: 4, ActiveSite: "a"}
	for _, tc := range []struct {
		name   string
		v      grview.Verdict
		st     Persisted
		action Action
		reason Reason
		target string
	}{
		{"same primary, all agree", grVerdict(grview.ReasonQuorate, "a"), st, None, ReasonGroupHealthy, ""},
		{"same primary, one member out", grVerdict(grview.ReasonQuorate, "a", grview.StandingAgrees, grview.StandingAgrees, grview.StandingUnreached), st, Alert, ReasonGroupMemberNotOnline, ""},
		{"group elected b", grVerdict(grview.ReasonQuorate, "b"), st, AdoptPrimary, ReasonGroupPrimaryElected, "b"},
		{"first start adopts", grVerdict(grview.ReasonQuorate, "c"), Persisted{}, AdoptPrimary, ReasonGroupAdoptPrimary, "c"},
		{"no quorum", grVerdict(grview.ReasonNoQuorum, ""), st, Alert, ReasonGroupNoQuorum, ""},
		{"unconfirmed", grVerdict(grview.ReasonUnconfirmed, ""), st, Alert, ReasonGroupUnconfirmed, ""},
		{"no primary", grVerdict(grview.ReasonNoPrimary, ""), st, Alert, ReasonGroupNoPrimary, ""},
		{"primary no configured site", grVerdict(grview.ReasonQuorate, ""), st, Alert, ReasonGroupPrimaryNotConfigured, ""},
		{"unknown verdict", grVerdict("bogus", ""), st, Alert, ReasonInvalidInput, ""},
	} {
		d := DecideGroupReplication(tc.v, tc.st)
		if d.Action != tc.action || d.Reason != tc.reason || d.Target != tc.target || d.Message == "" {
			t.Errorf("%s: %s target %q (%q), want %s (%s) target %q", tc.name, d.Action, d.Target, d.Message, tc.action, tc.reason, tc.target)
		}
		wantEpoch := tc.st.Epoch
		if d.Action == AdoptPrimary {
			wantEpoch++
		}
		if d.Epoch != wantEpoch {
			t.Errorf("%s: epoch %d, want %d", tc.name, d.Epoch, wantEpoch)
		}
		if a, _ := ActionOf(d.Reason); a != d.Action {
			t.Errorf("%s: action %s, the reason table says %s", tc.name, d.Action, a)
		}
		if d.Action == AdoptPrimary {
			next := Apply(tc.st, d, now)
			if next.ActiveSite != tc.target || next.Epoch != tc.st.Epoch+1 {
				t.Errorf("%s: applied state %+v, want %s at epoch %d", tc.name, next, tc.target, tc.st.Epoch+1)
			}
		}
	}
}

// Whatever the verdict, the Group Replication decision never writes to a
// server: no revoke, promote, fence, re-assert, rejoin, detach or semi-sync
// change (the group elects and fences itself).
func TestGroupReplicationDecisionNeverWritesToAServer(t *testing.T) {
	sts := []Persisted{{}, {Epoch: 7, ActiveSite: "a"}, {Epoch: 7, ActiveSite: "b", Pause: &Pause{By: "ann"}}}
	for _, r := range []grview.Reason{grview.ReasonQuorate, grview.ReasonNoPrimary, grview.ReasonNoQuorum, grview.ReasonUnconfirmed} {
		for _, p := range []string{"", "a", "b", "c"} {
			for _, st := range sts {
				d := DecideGroupReplication(grVerdict(r, p), st)
				if d.Action != None && d.Action != Alert && d.Action != AdoptPrimary {
					t.Errorf("verdict %s primary %q state %+v: action %s writes to a server", r, p, st, d.Action)
				}
				if d.MakesWritable() != "" || len(d.Fence) > 0 || len(d.Repoint) > 0 || len(d.Detach) > 0 {
					t.Errorf("verdict %s primary %q: decision %+v touches a server", r, p, d)
				}
			}
		}
	}
}

// A Group Replication switchover is asked of the group only for a target
// ONLINE in a quorate view, not already primary, in a group not paused;
// every refusal names its reason and returns no server_uuid to elect.
func TestGroupSwitchoverRefusesWithReasons(t *testing.T) {
	v := grVerdict(grview.ReasonQuorate, "a")
	v.Sites[1].UUID, v.Sites[2].UUID = "uuid-b", "uuid-c"
	v.Members = []grview.Member{{ID: "uuid-a", State: grview.StateOnline, Role: grview.RolePrimary},
		{ID: "uuid-b", State: grview.StateOnline, Role: grview.RoleSecondary}, {ID: "uuid-c", State: grview.StateRecovering}}
	st := Persisted{Epoch: 3, ActiveSite: "a"}
	noQuorum := grVerdict(grview.ReasonNoQuorum, "")
	paused := st
	paused.Pause = &Pause{By: "ann", Until: now.Add(time.Hour)}
	for _, tc := range []struct {
		name   string
		v      grview.Verdict
		st     Persisted
		target string
		reason Reason
		uuid   string
	}{
		{"online secondary", v, st, "b", ReasonGroupSwitchover, "uuid-b"},
		{"recovering member", v, st, "c", ReasonSwitchoverTargetNotOnline, ""},
		{"unknown site", v, st, "z", ReasonSwitchoverTargetNotOnline, ""},
		{"already primary", v, st, "a", ReasonSwitchoverTargetIsPrimary, ""},
		{"no quorum", noQuorum, st, "b", ReasonSwitchoverGroupNoQuorum, ""},
		{"paused", v, paused, "b", ReasonSwitchoverPaused, ""},
	} {
		d, uuid := DecideGroupSwitchover(tc.v, tc.st, tc.target, now)
		if d.Reason != tc.reason || uuid != tc.uuid || d.Action != None || d.Message == "" || d.Epoch != tc.st.Epoch {
			t.Errorf("%s: %s %s uuid %q (%s), want %s uuid %q", tc.name, d.Action, d.Reason, uuid, d.Message, tc.reason, tc.uuid)
		}
	}
}

// recoveryVerdict: a no-quorum verdict where a, b, c each report their own
// state and view (reached when state is set).
func recoveryVerdict(reason grview.Reason, states map[string]grview.MemberState) grview.Verdict {
	v := grview.Verdict{Reason: reason, Denominator: 3}
	for _, s := range []string{"a", "b", "c"} {
		sv := grview.SiteView{Site: s, Standing: grview.StandingUnreached}
		if st, ok := states[s]; ok {
			sv.Reached, sv.State, sv.ViewID, sv.GroupName, sv.Standing = true, st, "v:7", "g1", grview.StandingMinority
		}
		v.Sites = append(v.Sites, sv)
	}
	return v
}

// Recovery forces the membership only from the survivor whose GTID set
// contains every other survivor's, only when the group lost its majority;
// incomparable survivors, a survivor behind another, a quorate or
// unconfirmed group, a survivor outside any group are refused with the
// reason; the confirmation token changes when the survivor's set changes.
func TestGroupRecoveryNeedsAProvableSurvivor(t *testing.T) {
	gsMy := func(s string) gtid.Set { return gtid.MustParse(gtid.MySQL, s) }
	const u = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
	two := map[string]grview.MemberState{"b": grview.StateOnline, "c": grview.StateOnline}
	for _, tc := range []struct {
		name     string
		v        grview.Verdict
		exec     map[string]gtid.Set
		survivor string
		refusal  RecoveryRefusal
		members  []string
	}{
		{"dominating survivor", recoveryVerdict(grview.ReasonNoQuorum, two), map[string]gtid.Set{"b": gsMy(u + ":1-10"), "c": gsMy(u + ":1-8")}, "b", "", []string{"b", "c"}},
		{"lone survivor", recoveryVerdict(grview.ReasonNoQuorum, map[string]grview.MemberState{"c": grview.StateOnline}), map[string]gtid.Set{"c": gsMy(u + ":1-8")}, "c", "", []string{"c"}},
		{"survivor behind", recoveryVerdict(grview.ReasonNoQuorum, two), map[string]gtid.Set{"b": gsMy(u + ":1-10"), "c": gsMy(u + ":1-8")}, "c", RecoverySurvivorBehind, nil},
		{"incomparable", recoveryVerdict(grview.ReasonNoQuorum, two), map[string]gtid.Set{"b": gsMy(u + ":1-10"), "c": gsMy(u + ":1-8:11")}, "b", RecoveryIncomparable, nil},
		{"quorate", recoveryVerdict(grview.ReasonQuorate, two), map[string]gtid.Set{"b": gsMy(u + ":1-10")}, "b", RecoveryGroupHasQuorum, nil},
		{"unconfirmed", recoveryVerdict(grview.ReasonUnconfirmed, two), map[string]gtid.Set{"b": gsMy(u + ":1-10")}, "b", RecoveryUnconfirmed, nil},
		{"survivor offline", recoveryVerdict(grview.ReasonNoQuorum, map[string]grview.MemberState{"b": grview.StateOffline, "c": grview.StateOnline}), map[string]gtid.Set{"b": gsMy(u + ":1-10"), "c": gsMy(u + ":1-8")}, "b", RecoverySurvivorNotInGroup, nil},
		{"set unread", recoveryVerdict(grview.ReasonNoQuorum, two), map[string]gtid.Set{"b": gsMy(u + ":1-10")}, "b", RecoveryUnknownSet, nil},
	} {
		r, err := PlanGroupRecovery(tc.v, tc.exec, tc.survivor)
		if tc.refusal != "" {
			if !errors.Is(err, ErrGroupRecoveryRefused) || !strings.Contains(err.Error(), string(tc.refusal)) {
				t.Errorf("%s: %v, want refused (%s)", tc.name, err, tc.refusal)
			}
			continue
		}
		if err != nil || !slices.Equal(r.Members, tc.members) || r.Survivor != tc.survivor || len(r.Token) != 12 || !strings.Contains(r.Summary, "a") {
			t.Errorf("%s: %+v, %v; want members %v", tc.name, r, err, tc.members)
		}
		if !slices.Contains(r.Excluded, "a") {
			t.Errorf("%s: excluded %v, want a", tc.name, r.Excluded)
		}
	}
	v := recoveryVerdict(grview.ReasonNoQuorum, two)
	r1, _ := PlanGroupRecovery(v, map[string]gtid.Set{"b": gsMy(u + ":1-10"), "c": gsMy(u + ":1-8")}, "b")
	r2, _ := PlanGroupRecovery(v, map[string]gtid.Set{"b": gsMy(u + ":1-11"), "c": gsMy(u + ":1-8")}, "b")
	r3, _ := PlanGroupRecovery(v, map[string]gtid.Set{"b": gsMy(u + ":1-10"), "c": gsMy(u + ":1-9")}, "b")
	if r1.Token == r2.Token || r1.Token != r3.Token {
		t.Errorf("tokens %s %s %s: want a new token when the survivor's set changes, the same one otherwise", r1.Token, r2.Token, r3.Token)
	}
}

// bootstrapVerdict: the no-quorum verdict of a total outage where a, b, c
// report their own state (reached when set) in group g1, no view.
func bootstrapVerdict(states map[string]grview.MemberState) grview.Verdict {
	v := grview.Verdict{Reason: grview.ReasonNoQuorum, Denominator: 3}
	for _, s := range []string{"a", "b", "c"} {
		sv := grview.SiteView{Site: s, Standing: grview.StandingUnreached}
		if st, ok := states[s]; ok {
			sv.Reached, sv.State, sv.GroupName, sv.Standing = true, st, "g1", grview.StandingNotMember
			if st != grview.StateOffline && st != grview.StateError {
				sv.ViewID, sv.Standing = "v:9", grview.StandingMinority
			}
		}
		v.Sites = append(v.Sites, sv)
	}
	return v
}

// Re-bootstrap after a total outage only when every configured member is
// reached, stopped (OFFLINE, in no view), names the same group, has a known
// GTID set, and the chosen member's set contains every other's; each other
// case is refused with its reason; the token changes with any member's set.
func TestGroupBootstrapNeedsEveryMemberStoppedAndADominantSet(t *testing.T) {
	gsMy := func(s string) gtid.Set { return gtid.MustParse(gtid.MySQL, s) }
	const u = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
	off := grview.StateOffline
	allOff := map[string]grview.MemberState{"a": off, "b": off, "c": off}
	sets := map[string]gtid.Set{"a": gsMy(u + ":1-8"), "b": gsMy(u + ":1-10"), "c": gsMy(u + ":1-9")}
	otherName := bootstrapVerdict(allOff)
	otherName.Sites[2].GroupName = "g2"
	for _, tc := range []struct {
		name    string
		v       grview.Verdict
		exec    map[string]gtid.Set
		member  string
		refusal RecoveryRefusal
		joiners []string
	}{
		{"dominant member", bootstrapVerdict(allOff), sets, "b", "", []string{"a", "c"}},
		{"equal sets", bootstrapVerdict(allOff), map[string]gtid.Set{"a": gsMy(u + ":1-10"), "b": gsMy(u + ":1-10"), "c": gsMy(u + ":1-10")}, "a", "", []string{"b", "c"}},
		{"member behind", bootstrapVerdict(allOff), sets, "c", BootstrapMemberBehind, nil},
		{"incomparable", bootstrapVerdict(allOff), map[string]gtid.Set{"a": gsMy(u + ":1-8"), "b": gsMy(u + ":1-10"), "c": gsMy(u + ":1-9:11")}, "b", BootstrapIncomparable, nil},
		{"member unreachable", bootstrapVerdict(map[string]grview.MemberState{"a": off, "b": off}), sets, "b", BootstrapMemberUnreachable, nil},
		{"unknown member", bootstrapVerdict(allOff), sets, "z", BootstrapMemberUnreachable, nil},
		{"a member still in a group", bootstrapVerdict(map[string]grview.MemberState{"a": grview.StateOnline, "b": off, "c": off}), sets, "b", BootstrapMemberInGroup, nil},
		{"a member in error", bootstrapVerdict(map[string]grview.MemberState{"a": grview.StateError, "b": off, "c": off}), sets, "b", BootstrapMemberInError, nil},
		{"set unread", bootstrapVerdict(allOff), map[string]gtid.Set{"a": gsMy(u + ":1-8"), "b": gsMy(u + ":1-10")}, "b", BootstrapUnknownSet, nil},
		{"two group names", otherName, sets, "b", BootstrapGroupNames, nil},
		{"quorate", recoveryVerdict(grview.ReasonQuorate, allOff), sets, "b", RecoveryGroupHasQuorum, nil},
		{"unconfirmed", recoveryVerdict(grview.ReasonUnconfirmed, allOff), sets, "b", RecoveryUnconfirmed, nil},
	} {
		p, err := PlanGroupBootstrap(tc.v, tc.exec, tc.member)
		if tc.refusal != "" {
			if !errors.Is(err, ErrGroupBootstrapRefused) || !strings.Contains(err.Error(), ": "+string(tc.refusal)+": ") {
				t.Errorf("%s: %v, want refused (%s)", tc.name, err, tc.refusal)
			}
			continue
		}
		if err != nil || p.Member != tc.member || !slices.Equal(p.Joiners, tc.joiners) || len(p.Token) != 12 || !strings.Contains(p.Summary, "bootstraps group g1 on "+tc.member) {
			t.Errorf("%s: %+v, %v; want %s bootstrapping, joiners %v", tc.name, p, err, tc.member, tc.joiners)
		}
	}
	p1, _ := PlanGroupBootstrap(bootstrapVerdict(allOff), sets, "b")
	changed := map[string]gtid.Set{"a": gsMy(u + ":1-9"), "b": sets["b"], "c": sets["c"]}
	p2, _ := PlanGroupBootstrap(bootstrapVerdict(allOff), changed, "b")
	p3, _ := PlanGroupBootstrap(bootstrapVerdict(allOff), sets, "b")
	if p1.Token == p2.Token || p1.Token != p3.Token {
		t.Errorf("tokens %s %s %s: want a new token when any member's set changes, the same one otherwise", p1.Token, p2.Token, p3.Token)
	}
}
