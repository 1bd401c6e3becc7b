package sitepair

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/statemachine"
)

func TestApply(t *testing.T) {
	base := with(promoted("a"), func(p *Persisted) {
		p.Diverged = map[string]gtid.Set{"x": errant("x", 1)}
		p.DivergedCount = map[string]uint64{"x": 1}
		p.OperatorFenced = []string{"y"}
	})
	tests := []struct {
		name  string
		st    Persisted
		d     Decision
		check func(t *testing.T, got Persisted)
	}{
		{"revoke starts the failover", base, Decision{Action: RevokeEpoch, Epoch: 3, From: "a", Target: "b"}, func(t *testing.T, got Persisted) {
			want := InFlight{Epoch: 3, RevokedAt: now, From: "a", To: "b"}
			if got.Epoch != 3 || got.ActiveSite != "" || got.InFlight == nil || !reflect.DeepEqual(*got.InFlight, want) {
				t.Errorf("got epoch %d active %q in flight %+v, want 3, \"\", %+v", got.Epoch, got.ActiveSite, got.InFlight, want)
			}
		}},
		{"planned revoke is marked", base, Decision{Action: RevokeEpoch, Epoch: 3, From: "a", Target: "b", Planned: true}, func(t *testing.T, got Persisted) {
			if !got.InFlight.Planned {
				t.Error("in-flight switchover not marked planned")
			}
		}},
		{"automatic promote records the failover", revoked("a", "b", leasePending), Decision{Action: Promote, Epoch: 3, From: "a", Target: "b", PromotionGTID: upto(11)}, func(t *testing.T, got Persisted) {
			if got.ActiveSite != "b" || got.InFlight != nil || got.LastFailoverTarget != "b" || !got.LastFailoverAt.Equal(now) ||
				!got.PromotionGTID.Equal(upto(11)) || len(got.FailoverHistory) != 1 || got.Epoch != 3 {
				t.Errorf("got %+v", got)
			}
		}},
		{"planned promote counts for the cooldown, not for escalation", with(revoked("a", "b", leasePending), func(p *Persisted) { p.InFlight.Planned = true }),
			Decision{Action: Promote, Epoch: 2, Target: "b", Planned: true}, func(t *testing.T, got Persisted) {
				if !got.LastFailoverAt.Equal(now) || len(got.FailoverHistory) != 0 {
					t.Errorf("last failover %v, history %v", got.LastFailoverAt, got.FailoverHistory)
				}
			}},
		{"re-assert bumps the epoch", base, Decision{Action: ReassertPrimary, Epoch: 3, Target: "a"}, func(t *testing.T, got Persisted) {
			if got.Epoch != 3 || got.ActiveSite != "a" {
				t.Errorf("got %+v", got)
			}
		}},
		{"adopt records the primary", Persisted{}, Decision{Action: AdoptPrimary, Epoch: 1, Target: "a"}, func(t *testing.T, got Persisted) {
			if got.Epoch != 1 || got.ActiveSite != "a" {
				t.Errorf("got %+v", got)
			}
		}},
		{"mark diverged records the set", base, Decision{Action: MarkDiverged, Diverged: []Divergence{{Site: "c", Set: errant("c", 2), Count: 2}}}, func(t *testing.T, got Persisted) {
			if !got.Diverged["c"].Equal(errant("c", 2)) || !got.Diverged["x"].Equal(errant("x", 1)) {
				t.Errorf("diverged %v", got.Diverged)
			}
			if want := map[string]uint64{"c": 2, "x": 1}; !reflect.DeepEqual(got.DivergedCount, want) {
				t.Errorf("diverged counts %v, want %v", got.DivergedCount, want)
			}
		}},
		{"mark diverged on a fresh state", Persisted{}, Decision{Action: MarkDiverged, Diverged: []Divergence{{Site: "c", Set: errant("c", 2), Count: 2}}}, func(t *testing.T, got Persisted) {
			if len(got.Diverged) != 1 || len(got.DivergedCount) != 1 || got.DivergedCount["c"] != 2 {
				t.Errorf("diverged %v, counts %v", got.Diverged, got.DivergedCount)
			}
		}},
		{"other decisions keep the counts", base, Decision{Action: HaltFailover}, func(t *testing.T, got Persisted) {
			if got.DivergedCount["x"] != 1 || len(got.DivergedCount) != 1 {
				t.Errorf("diverged counts %v", got.DivergedCount)
			}
		}},
		{"halt sets the flag", base, Decision{Action: HaltFailover}, func(t *testing.T, got Persisted) {
			if !got.EscalationHalted {
				t.Error("not halted")
			}
		}},
		{"an epoch never goes backwards", base, Decision{Action: ReassertPrimary, Epoch: 1, Target: "a"}, func(t *testing.T, got Persisted) {
			if got.Epoch != 2 {
				t.Errorf("epoch %d, want 2", got.Epoch)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snapshot := clonePersisted(tc.st)
			got := Apply(tc.st, tc.d, now)
			tc.check(t, got)
			if !reflect.DeepEqual(tc.st, snapshot) {
				t.Errorf("Apply modified its input: %+v, was %+v", tc.st, snapshot)
			}
		})
	}
	for _, a := range []Action{None, Alert, FenceSites, Rejoin} {
		if got := Apply(base, Decision{Action: a, Fence: []string{"b"}}, now); !reflect.DeepEqual(got, base) {
			t.Errorf("%s changed the persisted state: %+v", a, got)
		}
	}
}

func clonePersisted(p Persisted) Persisted {
	return Apply(p, Decision{Action: None}, time.Time{})
}

func TestApplyKeepsHistoryBounded(t *testing.T) {
	st := Persisted{}
	for i := range MaxHistory + 10 {
		st.Epoch++
		st.InFlight = &InFlight{Epoch: st.Epoch, From: "a", To: "b"}
		st = Apply(st, Decision{Action: Promote, Target: "b"}, now.Add(time.Duration(i)*time.Second))
	}
	if len(st.FailoverHistory) != MaxHistory || !st.FailoverHistory[MaxHistory-1].Equal(now.Add(time.Duration(MaxHistory+9)*time.Second)) {
		t.Fatalf("history has %d entries ending %v", len(st.FailoverHistory), st.FailoverHistory[len(st.FailoverHistory)-1])
	}
}

func TestAcknowledge(t *testing.T) {
	st := with(promoted("a"), func(p *Persisted) { p.EscalationHalted = true })
	got := Acknowledge(st)
	if got.EscalationHalted || len(got.FailoverHistory) != 0 || !st.EscalationHalted {
		t.Fatalf("Acknowledge = %+v (input %+v)", got, st)
	}
	d := Decide(group(site("a", UR), site("b", RO, lost("a"))), got, DefaultPolicy(), now)
	if d.Action != RevokeEpoch {
		t.Fatalf("after acknowledgement: %s, want a failover", d)
	}
}

// TestFailoverLifecycle drives a two-site group through a whole failover
// and the old primary's return, applying each decision as the daemon would.
func TestFailoverLifecycle(t *testing.T) {
	pol := DefaultPolicy()
	clock := now
	st := Persisted{}
	step := func(name string, obs Observed, wantAction Action, wantReason Reason) Decision {
		t.Helper()
		d := Decide(obs, st, pol, clock)
		if d.Action != wantAction || d.Reason != wantReason {
			t.Fatalf("%s: %s, want %s (%s)", name, d, wantAction, wantReason)
		}
		st = Apply(st, d, clock)
		clock = clock.Add(time.Second)
		return d
	}
	step("first start", group(site("a", W), site("b", RO, follows("a"))), AdoptPrimary, ReasonAdoptPrimary)
	step("healthy", group(site("a", W), site("b", RO, follows("a"))), None, ReasonHealthy)
	step("primary failing probes", group(site("a", W, bounce), site("b", RO, follows("a"))), None, ReasonPrimaryDebouncing)
	down := group(site("a", UR), site("b", RO, lost("a")))
	step("primary down", down, RevokeEpoch, ReasonFailoverRevoke)
	if st.Epoch != 2 || st.InFlight == nil {
		t.Fatalf("after revoke: %+v", st)
	}
	// a's sidecar last reported at the revoke; b's holds the revoked epoch.
	down = leased(down, st.InFlight.RevokedAt)
	step("lease pending", down, None, ReasonAwaitLeaseExpiry)
	clock = clock.Add(pol.LeaseTimeout + LeaseMargin)
	// b's sidecar reported from the same run since (issue 26 hole 2).
	down.Sites[1].Sidecar.AliveAt = clock
	d := step("lease expired", down, Promote, ReasonPromote)
	if d.FenceProof != ProofLeaseExpired || st.ActiveSite != "b" || st.InFlight != nil || st.LastFailoverProof != ProofLeaseExpired {
		t.Fatalf("after promote: %s, %+v", d, st)
	}
	// The daemon decides again once every site was probed after the
	// promotion: b's writable probes are still being debounced.
	step("new primary not debounced writable yet, old one still down", group(site("a", UR), site("b", RO, bounce)), None, ReasonPromotionSettling)
	step("new primary healthy, old one still down", group(site("a", UR), site("b", W)), Alert, ReasonDegradedReplicaUnreachable)
	step("old primary back writable: split brain", group(site("a", W), site("b", W)), FenceSites, ReasonSplitBrainKeepPromoted)
	step("old primary fenced, not replicating: rejoin", group(site("a", RO), site("b", W, exec(upto(12)))), Rejoin, ReasonRejoin)
	step("everyone follows b", group(site("a", RO, follows("b"), exec(upto(12))), site("b", W, exec(upto(12)))), None, ReasonHealthy)
	clock = clock.Add(time.Minute)
	step("b dies inside the cooldown", group(site("a", RO, lost("b"), exec(upto(12))), site("b", UR, exec(upto(12)))), Alert, ReasonCooldown)
	if st.Epoch != 3 {
		t.Fatalf("epoch %d after the lifecycle, want 3 (adopt 1, revoke 2, promote 3)", st.Epoch)
	}
}

// TestDocsCoverEveryCodeAndReason keeps docs/decisions.md in step with the
// code: every detection code, every reason and every fence proof must be
// documented.
func TestDocsCoverEveryCodeAndReason(t *testing.T) {
	b, err := os.ReadFile("../docs/decisions.md")
	if err != nil {
		t.Fatalf("read docs: %v", err)
	}
	doc := string(b)
	for _, row := range statemachine.Table() {
		if !strings.Contains(doc, "`"+string(row.Code)+"`") {
			t.Errorf("docs/decisions.md does not document detection code %s", row.Code)
		}
	}
	for _, r := range Reasons() {
		if !strings.Contains(doc, "`"+string(r)+"`") {
			t.Errorf("docs/decisions.md does not document reason %s", r)
		}
	}
	for _, p := range FenceProofs() {
		if !strings.Contains(doc, "| `"+string(p)+"` |") {
			t.Errorf("docs/decisions.md has no row for fence proof %s", p)
		}
	}
}
