package daemon

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/status"
)

// The snapshot's class of a decision is its reason's class in sitepair's
// reason table, with the status package's words; an unknown reason reads as
// invalid.
func TestSnapshotClassComesFromTheReasonTable(t *testing.T) {
	for _, ri := range sitepair.ReasonTable() {
		if got := classOf(ri.Reason); got != string(ri.Class) || got == "" {
			t.Errorf("classOf(%s) = %q, the reason table says %q", ri.Reason, got, ri.Class)
		}
	}
	if classOf("no-such-reason") != status.ClassInvalid {
		t.Fatal("an unknown reason must classify as invalid")
	}
}

// recEvents records Events calls as strings.
type recEvents struct {
	noEvents
	mu    sync.Mutex
	calls []string
}

func (r *recEvents) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}
func (r *recEvents) PhaseDone(g, phase string, _ time.Duration) { r.add("phase " + phase) }
func (r *recEvents) ProofUsed(g, proof string)                  { r.add("proof " + proof) }
func (r *recEvents) FailoverDone(g, kind, result string, _ time.Duration) {
	r.add("failover " + kind + " " + result)
}
func (r *recEvents) Fenced(g, site, by string) { r.add("fenced " + site + " by " + by) }

// A promotion reports each phase, the proof it rested on and its outcome,
// and the snapshot afterwards shows the new primary, the failover and the
// cooldown.
func TestPromotionEventsAndSnapshot(t *testing.T) {
	ms := newTestStore(t)
	g, _ := testGroup(t, ms, "b", clockAt(t0))
	g.policy.FailoverCooldown = time.Hour
	ev := &recEvents{}
	g.events = ev
	g.obs = fixedObs{o: sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Unreachable},
		{Name: "b", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly},
		{Name: "c", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly},
	}}}
	if err := g.failover(promoteDecision("b")).promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"phase proof", "phase drain", "phase detach", "phase publish", "phase writable",
		"proof primary-down", "failover failover promoted", "phase repoint"}
	if fmt.Sprint(ev.calls) != fmt.Sprint(want) {
		t.Fatalf("events %q, want %q", ev.calls, want)
	}
	s := g.snapshot(t0.Add(time.Minute))
	if s.Epoch != 3 || s.ActiveSite != "b" || s.InFlight != nil || s.LastFailover == nil || s.LastFailover.To != "b" {
		t.Fatalf("snapshot %+v", s)
	}
	if s.CooldownRemainingSeconds < 59*60-1 || s.CooldownRemainingSeconds > 59*60+1 {
		t.Fatalf("cooldown remaining %v s, want about 59 min", s.CooldownRemainingSeconds)
	}
	if len(s.Sites) != 3 || !s.Sites[1].Active || s.Sites[0].State != status.StateUnreachable || s.Class != status.ClassWaiting {
		t.Fatalf("sites %+v class %q", s.Sites, s.Class)
	}
}

// A diverged site shows the exact count kept when it was marked, not the
// MariaDB triple's sequence number.
func TestSnapshotShowsTheDivergedCount(t *testing.T) {
	ms := newTestStore(t)
	g, _ := testGroup(t, ms, "b", clockAt(t0))
	g.obs = fixedObs{}
	g.mu.Lock()
	g.rec.Diverged = map[string]gtid.Set{"c": gtid.MustParse(gtid.MariaDB, "0-2-4")}
	g.rec.DivergedCount = map[string]uint64{"c": 1}
	g.mu.Unlock()
	s := g.snapshot(t0)
	if len(s.Diverged) != 1 || s.Diverged[0].Site != "c" || s.Diverged[0].Transactions != 1 || s.Diverged[0].GTID != "0-2-4" {
		t.Fatalf("diverged %+v, want c with 1 transaction (0-2-4)", s.Diverged)
	}
}

// The last failover's old primary is in recovery until it is a healthy
// replica of the active site; a diverged site is blocked.
func TestRecovery(t *testing.T) {
	st := sitepair.Persisted{ActiveSite: "b"}
	healthy := &status.Replication{IORunning: true, SQLRunning: true, LagKnown: true}
	for _, tc := range []struct {
		name string
		s    status.Site
		so   sitepair.SiteObservation
		old  string
		want string
	}{
		{"diverged", status.Site{Diverged: "0-1-5"}, sitepair.SiteObservation{Name: "a"}, "a", status.RecoveryBlocked},
		{"old primary down", status.Site{}, sitepair.SiteObservation{Name: "a"}, "a", status.RecoveryInProgress},
		{"old primary replicating, lag unknown", status.Site{Replication: &status.Replication{IORunning: true, SQLRunning: true}},
			sitepair.SiteObservation{Name: "a", ReplicatingFrom: "b", IOConnected: true}, "a", status.RecoveryInProgress},
		{"old primary a healthy replica", status.Site{Replication: healthy}, sitepair.SiteObservation{Name: "a", ReplicatingFrom: "b", IOConnected: true}, "a", ""},
		{"another replica", status.Site{}, sitepair.SiteObservation{Name: "c"}, "a", ""},
		{"no failover yet", status.Site{}, sitepair.SiteObservation{Name: "a"}, "", ""},
	} {
		if got := recovery(tc.s, tc.so, st, tc.old); got != tc.want {
			t.Errorf("%s: recovery %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The status says plainly whether the group's acknowledged writes survive
// the loss of its primary: only with semi-sync on and in effect on it (each
// acknowledged write then is on a replica as well); without, RPO is not
// zero and the note says why.
func TestSnapshotStatesTheRPO(t *testing.T) {
	reached := t0.Add(-time.Second)
	for _, c := range []struct {
		name string
		ss   sitepair.SemiSyncObservation
		seen time.Time
		want string
		note string
	}{
		{"semi-sync on and in effect", sitepair.SemiSyncObservation{Known: true, Enabled: true, Active: true, WaitForReplicas: 1}, reached, status.RPOZero, "1 replica"},
		{"semi-sync waiting for two", sitepair.SemiSyncObservation{Known: true, Enabled: true, Active: true, WaitForReplicas: 2}, reached, status.RPOZero, "2 replicas"},
		{"no semi-sync plugin", sitepair.SemiSyncObservation{}, reached, status.RPONotZero, "no semi-sync"},
		{"semi-sync off", sitepair.SemiSyncObservation{Known: true}, reached, status.RPONotZero, "off"},
		{"fell back to asynchronous", sitepair.SemiSyncObservation{Known: true, Enabled: true}, reached, status.RPONotZero, "fell back"},
		{"primary never reached", sitepair.SemiSyncObservation{}, time.Time{}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, _ := testGroup(t, newTestStore(t), "b", clockAt(t0))
			g.mu.Lock()
			g.rec.ActiveSite, g.rec.InFlight = "a", nil
			g.mu.Unlock()
			g.obs = fixedObs{o: sitepair.Observed{Sites: []sitepair.SiteObservation{
				{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Writable, SemiSync: c.ss, LastReachableAt: c.seen},
				{Name: "b", Role: sitepair.PrimaryCandidate, State: statemachine.ReadOnly, LastReachableAt: reached},
			}}}
			s := g.snapshot(t0)
			if s.RPO != c.want || !strings.Contains(s.RPONote, c.note) || (c.want != "") != (s.RPONote != "") {
				t.Fatalf("rpo %q (%s), want %q mentioning %q", s.RPO, s.RPONote, c.want, c.note)
			}
		})
	}
}
