package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/testenv"
)

// A member blocked from the others keeps answering failoverd with its own,
// now stale, view of the group; it must never move routing (MySQL only).
// Members 0 (the first primary) and 2 run each in a network namespace of
// their own, so the test can cut one from the others while failoverd still
// reads it (testenv GroupReplication.CutOff); every member waits 300 s
// before leaving a view whose majority it cannot reach, so a cut member
// stays in its stale view for the whole test instead of going OFFLINE.
//
// Cut a secondary (member2): it reports itself ONLINE in the old view of
// three with the others UNREACHABLE, the majority expels it; through the
// whole window failoverd's published view (active site, epoch) and the
// router stay on site0, with site2's report outvoted. Reconnected, it
// rejoins. Cut the primary (member0): the majority elects another primary
// while member0 still says it is the primary; failoverd follows the
// majority (one new epoch, a failover-observed), routing moves once and
// never back to site0. Under write load through the router, no
// acknowledged write is lost, and failoverd ran no fence, promote or
// membership statement on any member.
func TestGroupReplicationMySQLOnlyStaleMemberCutOffDoesNotMoveRouting(t *testing.T) {
	grMySQLOnly(t)
	g := newGRGroupWith(t, testenv.GroupReplicationOptions{Isolated: []int{0, 2}})
	for _, m := range g.gr.Members {
		m.Exec(t, "SET GLOBAL group_replication_unreachable_majority_timeout = 300")
	}
	g.startDaemon()
	first := g.waitActive("site0", 30*time.Second)
	g.waitAllAgree(30 * time.Second)
	g.follow()
	load := testenv.StartWriteLoad(t, []string{testenv.SiteDSN(g.router.Addr(), testenv.AppUser, testenv.AppPassword)}, testenv.WriteLoadOptions{Workers: 2})
	load.WaitForAcks(t, 50, 20*time.Second)

	// 1. A secondary cut off: nothing moves.
	m2 := g.gr.Members[2]
	watch := g.watchRouting()
	g.note("cut off site2")
	cut := time.Now()
	g.gr.CutOff(t, m2)
	g.waitFor("member2 reports the others UNREACHABLE in its old view", 30*time.Second, func() bool {
		r := ownReport(t, m2)
		return r.state == "ONLINE" && r.size == 3 && r.unreachable == 2
	})
	var st groupStatus
	g.waitFor("failoverd's verdict is the majority's view without site2", 90*time.Second, func() bool {
		s, err := g.status()
		st = s
		return err == nil && s.GroupReplication != nil && s.GroupReplication.HasQuorum && s.GroupReplication.ViewSize == 2 &&
			standing(s, "site2") != "" && standing(s, "site2") != "agrees"
	})
	t.Logf("site2 cut off → the majority's view of 2 after %v; site2 counted %s", time.Since(cut), standing(st, "site2"))
	time.Sleep(3 * time.Second) // more rounds with the stale member
	if r := ownReport(t, m2); r.state != "ONLINE" || r.size != 3 || r.unreachable != 2 {
		t.Fatalf("member2 no longer reports the stale view (ONLINE, 2 of 3 UNREACHABLE): %+v", r)
	}
	before := len(load.Acked())
	load.WaitForAcks(t, before+20, 20*time.Second) // the majority still commits
	for _, s := range watch() {
		if s.site != "site0" || s.epoch != first.Epoch {
			t.Fatalf("with site2 cut off failoverd published %s at epoch %d (%v after the cut), want site0 at %d", s.site, s.epoch, s.at.Sub(cut), first.Epoch)
		}
	}
	if r := g.routedMoves(); len(r) > 0 {
		t.Fatalf("the router moved with site2 cut off: %v", r)
	}

	g.note("reconnect site2")
	g.gr.Reconnect(t, m2)
	reconnected := time.Now()
	g.waitFor("member2 back in the group", 3*time.Minute, func() bool {
		r := ownReport(t, g.gr.Members[0])
		return r.online == 3
	})
	t.Logf("site2 reconnected → back ONLINE after %v", time.Since(reconnected))
	g.waitAllAgree(30 * time.Second)

	// 2. The primary cut off: the majority elects, failoverd follows it
	// once and never the stale member's claim.
	m0 := g.gr.Members[0]
	watch = g.watchRouting()
	g.note("cut off site0")
	cut = time.Now()
	g.gr.CutOff(t, m0)
	g.waitFor("failoverd follows the majority's election", 90*time.Second, func() bool {
		s, err := g.status()
		st = s
		return err == nil && s.ActiveSite != "" && s.ActiveSite != "site0" && s.Epoch > first.Epoch
	})
	elected := st.ActiveSite
	n := g.index(elected)
	t.Logf("site0 cut off → failoverd names %s after %v", elected, time.Since(cut))
	if st.Epoch != first.Epoch+1 || st.LastFailover == nil || st.LastFailover.Kind != "failover-observed" || st.LastFailover.From != "site0" {
		t.Fatalf("after the election: epoch %d (was %d), last failover %+v", st.Epoch, first.Epoch, st.LastFailover)
	}
	if r := ownReport(t, g.gr.Members[n]); r.role != "PRIMARY" || r.online != 2 {
		t.Fatalf("%s's own view: %+v, want it PRIMARY of 2 ONLINE", elected, r)
	}
	g.waitFor("the router follows "+elected, 10*time.Second, func() bool { return !g.routedTo(elected).IsZero() })
	before = len(load.Acked())
	load.WaitForAcks(t, before+50, 30*time.Second) // writes resume through the router
	time.Sleep(3 * time.Second)                    // more rounds with the stale primary
	r := ownReport(t, m0)
	if r.state != "ONLINE" || r.role != "PRIMARY" || r.size != 3 || r.unreachable != 2 {
		t.Fatalf("member0 no longer claims to be the primary of its stale view: %+v", r)
	}
	st, err := g.status()
	if err != nil {
		t.Fatal(err)
	}
	if s := standing(st, "site0"); s == "agrees" || s == "" {
		t.Fatalf("site0, cut off and claiming the primary, counted %q", s)
	}
	t.Logf("site0 still claims the primary of its old view; failoverd counts it %s", standing(st, "site0"))
	moved := false
	for _, s := range watch() {
		switch {
		case s.site == elected && s.epoch == first.Epoch+1:
			moved = true
		case moved:
			t.Fatalf("after following %s failoverd published %s at epoch %d (%v after the cut)", elected, s.site, s.epoch, s.at.Sub(cut))
		case (s.site != "site0" || s.epoch != first.Epoch) && s.site != "": // "": the failover in flight
			t.Fatalf("before following the election failoverd published %s at epoch %d", s.site, s.epoch)
		}
	}
	if r := g.routedMoves(); len(r) != 1 || r[0] != elected {
		t.Fatalf("the router moved %v, want once, to %s", r, elected)
	}

	load.Stop()
	if missing := load.Missing(t, g.gr.Members[n].AppDB(t)); len(missing) > 0 {
		t.Fatalf("%d acknowledged writes missing on the new primary %s: %v", len(missing), elected, missing[:min(len(missing), 10)])
	}
	for i, m := range g.gr.Members {
		if w := daemonWrites(t, m); len(w) > 0 {
			t.Errorf("failoverd ran on site%d: %q", i, w)
		}
	}
}

// waitAllAgree waits until the daemon's verdict is quorate with every
// configured member agreeing, in a view of all three.
func (g *grGroup) waitAllAgree(timeout time.Duration) {
	g.t.Helper()
	g.waitFor("every member agrees on a quorate view of 3", timeout, func() bool {
		s, err := g.status()
		if err != nil || s.Reason != "group-healthy" || s.GroupReplication == nil || !s.GroupReplication.HasQuorum || s.GroupReplication.ViewSize != 3 {
			return false
		}
		for _, site := range s.GroupReplication.Sites {
			if site.Standing != "agrees" {
				return false
			}
		}
		return len(s.GroupReplication.Sites) == 3
	})
}

// standing is how site's report counted in the daemon's verdict ("" if
// absent).
func standing(st groupStatus, site string) string {
	if st.GroupReplication == nil {
		return ""
	}
	for _, s := range st.GroupReplication.Sites {
		if s.Site == site {
			return s.Standing
		}
	}
	return ""
}

// routedMoves lists the router's moves, in order.
func (g *grGroup) routedMoves() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, r := range g.routed {
		out = append(out, r.site)
	}
	return out
}

// routingSample is one reading of what the daemon published.
type routingSample struct {
	at    time.Time
	site  string
	epoch uint64
}

// watchRouting reads the daemon's published active site and epoch every
// 50 ms until the returned function is called, which returns every reading.
func (g *grGroup) watchRouting() func() []routingSample {
	var (
		mu      sync.Mutex
		samples []routingSample
		stop    = make(chan struct{})
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			if st, err := g.status(); err == nil {
				mu.Lock()
				samples = append(samples, routingSample{time.Now(), st.ActiveSite, st.Epoch})
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	finish := func() []routingSample {
		once.Do(func() { close(stop); <-done })
		mu.Lock()
		defer mu.Unlock()
		return samples
	}
	g.t.Cleanup(func() { finish() })
	return finish
}

// memberReport is one member's own member table, as the harness reads it.
type memberReport struct {
	state, role         string // its own row
	size                int    // members in its view
	online, unreachable int
}

// ownReport reads m's own member table (what failoverd reads too).
func ownReport(t *testing.T, m *testenv.Server) memberReport {
	t.Helper()
	var r memberReport
	var state, role *string
	err := m.AdminDB(t).QueryRow("SELECT MAX(IF(MEMBER_ID = @@server_uuid, MEMBER_STATE, NULL)), MAX(IF(MEMBER_ID = @@server_uuid, MEMBER_ROLE, NULL)), "+
		"COUNT(*), COUNT(IF(MEMBER_STATE = 'ONLINE', 1, NULL)), COUNT(IF(MEMBER_STATE = 'UNREACHABLE', 1, NULL)) "+
		"FROM performance_schema.replication_group_members").Scan(&state, &role, &r.size, &r.online, &r.unreachable)
	if err != nil {
		t.Logf("%s: read its member table: %v", m.Name, err)
		return r
	}
	if state != nil {
		r.state = *state
	}
	if role != nil {
		r.role = *role
	}
	return r
}

// String shows a report in failure messages.
func (r memberReport) String() string {
	return strings.TrimSpace(fmt.Sprintf("state %s role %s, view of %d: %d ONLINE, %d UNREACHABLE", r.state, r.role, r.size, r.online, r.unreachable))
}
