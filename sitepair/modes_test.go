package sitepair

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func pausedAt(until time.Time) func(*Persisted) {
	return func(p *Persisted) {
		p.Pause = &Pause{Since: now.Add(-time.Minute), Until: until, By: "alice", Reason: "kernel upgrade"}
	}
}

func holding(site string, k HoldKind, until time.Time) func(*Persisted) {
	return func(p *Persisted) {
		if p.Holds == nil {
			p.Holds = map[string]Hold{}
		}
		p.Holds[site] = Hold{Kind: k, Since: now.Add(-time.Minute), Until: until, By: "bob", Reason: "disk swap"}
	}
}

// TestPausedGroupWithholdsEveryWrite: while paused, a failover, a fence, a
// re-assert or a rejoin is decided as usual but withheld (the alert names
// it); a pause that expired withholds nothing, and a failover already in
// flight finishes.
func TestPausedGroupWithholdsEveryWrite(t *testing.T) {
	downPair := group(site("a", UR), site("b", RO, lost("a")))
	later := now.Add(30 * time.Minute)
	for _, tc := range []struct {
		name      string
		obs       Observed
		st        Persisted
		withheld  Reason // "" = not withheld
		wantPlain Reason
	}{
		{"primary down: the failover is withheld", downPair, with(active("a"), pausedAt(later)), ReasonFailoverRevoke, ""},
		{"rejoin withheld", group(site("a", W), site("b", RO)), with(active("a"), pausedAt(later)), ReasonRejoin, ""},
		{"split brain fence withheld", group(site("a", W), site("b", W)), with(promoted("a"), pausedAt(later)), ReasonSplitBrainKeepPromoted, ""},
		{"healthy: nothing to withhold", group(site("a", W), site("b", RO, follows("a"))), with(active("a"), pausedAt(later)), "", ReasonHealthy},
		{"alerts stay alerts", group(site("a", W), site("b", UR)), with(active("a"), pausedAt(later)), "", ReasonDegradedReplicaUnreachable},
		{"adoption is bookkeeping", group(site("a", W), site("b", RO, follows("a"))), with(Persisted{}, pausedAt(later)), "", ReasonAdoptPrimary},
		{"an expired pause withholds nothing", downPair, with(active("a"), pausedAt(now)), "", ReasonFailoverRevoke},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.obs, tc.st, DefaultPolicy(), now)
			if tc.withheld == "" {
				if d.Reason != tc.wantPlain || d.Withheld != nil {
					t.Fatalf("decision %s (withheld %v), want %s", d, d.Withheld, tc.wantPlain)
				}
				return
			}
			if d.Action != Alert || d.Reason != ReasonPausedWithheld || d.Withheld == nil || d.Withheld.Reason != tc.withheld {
				t.Fatalf("decision %s (withheld %v), want %s withholding %s", d, d.Withheld, ReasonPausedWithheld, tc.withheld)
			}
			for _, want := range []string{"alice", "kernel upgrade", string(tc.withheld)} {
				if !strings.Contains(d.Message, want) {
					t.Errorf("message %q does not name %q", d.Message, want)
				}
			}
		})
	}
	// A failover already in flight is finished, not withheld.
	inFlight := with(active("a"), func(p *Persisted) {
		*p = Apply(*p, Decide(downPair, *p, DefaultPolicy(), now), now)
	})
	inFlight.Pause = &Pause{Until: later, By: "alice", Reason: "late"}
	if d := Decide(group(site("a", UR, down), site("b", RO, lost("a"))), inFlight, DefaultPolicy(), now); d.Action != Promote {
		t.Fatalf("in-flight failover under a pause: %s, want it promoted", d)
	}
}

// TestPauseResumeHoldReleaseRefusals: every refusal is one clear error
// wrapping ErrModeRefused, and a refused request changes nothing.
func TestPauseResumeHoldReleaseRefusals(t *testing.T) {
	st := active("a")
	later := now.Add(time.Hour)
	refuse := func(name string, next Persisted, err error, want string) {
		t.Helper()
		if !errors.Is(err, ErrModeRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want ErrModeRefused mentioning %q", name, err, want)
		}
		if next.Pause != nil || len(next.Holds) != 0 {
			t.Errorf("%s: a refused request changed the state: %+v", name, next)
		}
	}
	next, err := PauseGroup(st, Pause{Until: now, By: "alice", Reason: "r"}, now)
	refuse("pause without a future expiry", next, err, "not in the future")
	next, err = PauseGroup(st, Pause{Until: later, By: "alice"}, now)
	refuse("pause without a reason", next, err, "reason is required")
	inFlight := Apply(st, Decide(group(site("a", UR), site("b", RO, lost("a"))), st, DefaultPolicy(), now), now)
	next, err = PauseGroup(inFlight, Pause{Until: later, By: "alice", Reason: "r"}, now)
	if !errors.Is(err, ErrModeRefused) || next.Pause != nil {
		t.Errorf("pause while a failover is in flight: %v", err)
	}
	next, err = ResumeGroup(st, now)
	refuse("resume of a group not paused", next, err, "not paused")
	next, err = HoldSite(st, "a", Hold{Kind: HoldMaintenance, Until: later, By: "bob", Reason: "r"}, now)
	refuse("maintenance on the primary", next, err, "switchover")
	next, err = HoldSite(st, "b", Hold{Kind: "downtime", Until: later, By: "bob", Reason: "r"}, now)
	refuse("unknown kind", next, err, "no-promote or maintenance")
	next, err = ReleaseSite(st, "b", now)
	refuse("release without a hold", next, err, "no hold")

	// Accepted ones round-trip and never modify their input.
	p, err := PauseGroup(st, Pause{Until: later, By: "alice", Reason: "r"}, now)
	if err != nil || !p.Pause.ActiveAt(now) || st.Pause != nil || !p.Pause.Since.Equal(now) {
		t.Fatalf("PauseGroup = %+v, %v", p.Pause, err)
	}
	if r, err := ResumeGroup(p, now); err != nil || r.Pause != nil || p.Pause == nil {
		t.Fatalf("ResumeGroup = %+v, %v", r.Pause, err)
	}
	h, err := HoldSite(st, "a", Hold{Kind: HoldNoPromote, Until: later, By: "bob", Reason: "r"}, now)
	if err != nil || len(st.Holds) != 0 {
		t.Fatalf("no-promote on the primary: %v (input %v)", err, st.Holds)
	}
	if _, ok := h.HoldAt("a", now); !ok {
		t.Fatal("hold not in effect")
	}
	if r, err := ReleaseSite(h, "a", now); err != nil || len(r.Holds) != 0 || len(h.Holds) != 1 {
		t.Fatalf("ReleaseSite = %v, %v", r.Holds, err)
	}
}

// TestExpiredModesAreDropped: a pause or hold that ran out stops counting
// at once and is dropped (and reported) by ExpireModes.
func TestExpiredModesAreDropped(t *testing.T) {
	st := with(with(with(active("a"), pausedAt(now)), holding("b", HoldNoPromote, now)), holding("c", HoldMaintenance, now.Add(time.Hour)))
	next, gone := ExpireModes(st, now)
	if next.Pause != nil || len(next.Holds) != 1 || len(gone) != 2 || gone[0].Kind != "pause" || gone[1].Site != "b" {
		t.Fatalf("ExpireModes = %+v %v, %+v", next.Pause, next.Holds, gone)
	}
	if st.Pause == nil || len(st.Holds) != 2 {
		t.Fatal("ExpireModes modified its input")
	}
	if same, gone := ExpireModes(next, now); len(gone) != 0 || len(same.Holds) != 1 {
		t.Fatalf("nothing left to expire: %v", gone)
	}
}

// TestHeldSiteIsNeverChosen: a no-promote or maintenance site is never a
// failover or switchover candidate, also when it is the only up-to-date one
// (the group waits with a reason that says so); a maintenance site lost by
// its operator is no witness and no alert.
func TestHeldSiteIsNeverChosen(t *testing.T) {
	later := now.Add(time.Hour)
	three := group(site("a", UR), site("b", RO, lost("a"), prio(100)), site("c", RO, lost("a")))
	for _, k := range HoldKinds() {
		d := Decide(three, with(active("a"), holding("b", k, later)), DefaultPolicy(), now)
		if d.Action != RevokeEpoch || d.Target != "c" {
			t.Errorf("%s hold on the preferred b: %s, want a failover to c", k, d)
		}
		d = DecideSwitchover(group(site("a", W), site("b", RO, follows("a")), site("c", RO, follows("a"))), with(active("a"), holding("b", k, later)), DefaultPolicy(), "b", false, now)
		if d.Reason != ReasonSwitchoverBadTarget || !strings.Contains(d.Message, string(k)+" hold") {
			t.Errorf("switchover to a site with a %s hold: %s", k, d)
		}
	}
	// b alone holds the newest transaction: c lacks it, so nobody is chosen.
	ahead := group(site("a", UR, exec(upto(11))), site("b", RO, lost("a"), exec(upto(11))), site("c", RO, lost("a")))
	d := Decide(ahead, with(active("a"), holding("b", HoldNoPromote, later)), DefaultPolicy(), now)
	if d.Action == RevokeEpoch || !strings.Contains(d.Message, "hold") {
		t.Errorf("only the held site is up to date: %s, want the group to wait naming the hold", d)
	}
	// The only witness is under maintenance: it corroborates nothing.
	d = Decide(group(site("a", UR), site("b", RO, lost("a"))), with(active("a"), holding("b", HoldMaintenance, later)), DefaultPolicy(), now)
	if d.Reason != ReasonUncorroborated {
		t.Errorf("the only witness under maintenance: %s, want %s", d, ReasonUncorroborated)
	}
	// Maintenance: a replica stopped by its operator raises nothing.
	d = Decide(group(site("a", W), site("b", UR), site("c", RO, follows("a"))), with(active("a"), holding("b", HoldMaintenance, later)), DefaultPolicy(), now)
	if d.Reason != ReasonHealthy {
		t.Errorf("replica under maintenance unreachable: %s, want healthy", d)
	}
	// An expired hold counts no more.
	d = Decide(three, with(active("a"), holding("b", HoldNoPromote, now)), DefaultPolicy(), now)
	if d.Target != "b" {
		t.Errorf("expired hold: %s, want b chosen again", d)
	}
}

// TestSwitchoverToDROnlyNeedsTheFlag: a dr-only site is promoted only by an
// explicit switchover that says so, and the permission lasts until its
// promotion (phase 2 does not give the source back for being dr-only).
func TestSwitchoverToDROnlyNeedsTheFlag(t *testing.T) {
	obs := group(site("a", W), site("b", RO, follows("a"), dr))
	st := active("a")
	if d := DecideSwitchover(obs, st, DefaultPolicy(), "b", false, now); d.Reason != ReasonSwitchoverBadTarget || !strings.Contains(d.Message, "--allow-dr-only") {
		t.Fatalf("switchover to dr-only without the flag: %s", d)
	}
	d := DecideSwitchoverWith(obs, st, DefaultPolicy(), "b", SwitchoverOptions{AllowDROnly: true}, now)
	if d.Action != RevokeEpoch || !d.AllowDROnly {
		t.Fatalf("switchover to dr-only with the flag: %s", d)
	}
	st = Apply(st, d, now)
	if !st.InFlight.AllowDROnly {
		t.Fatal("the in-flight switchover forgot the permission")
	}
	// The old primary fenced (read back at the revoked epoch): promote b.
	d = Decide(group(site("a", RO, fencedAt(st.Epoch)), site("b", RO, follows("a"), dr)), st, DefaultPolicy(), now.Add(time.Second))
	if d.Action != Promote || d.Target != "b" {
		t.Fatalf("phase 2 of a dr-only switchover: %s", d)
	}
	// Paused: refused.
	if d := DecideSwitchoverWith(obs, with(active("a"), pausedAt(now.Add(time.Hour))), DefaultPolicy(), "b", SwitchoverOptions{AllowDROnly: true}, now); d.Reason != ReasonSwitchoverPaused {
		t.Fatalf("switchover of a paused group: %s", d)
	}
}
