package e2e

// Operating modes on real servers (issue 28): a paused group, site holds,
// the maintenance of the primary and the failover readiness, each under
// write load with the acknowledgements logged.

import (
	"context"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/testenv"
)

// op runs a failoverd command with the API token; the test fails unless it
// exits 0.
func (g *group) op(args ...string) string {
	g.t.Helper()
	args = append(args, "--token-file", filepath.Join(g.dir, "api.token"))
	code, out, errOut := g.cli(args...)
	if code != 0 {
		g.t.Fatalf("failoverd %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// activeIndex is the index of the site the status names active, or -1.
func activeIndex(st groupStatus) int {
	return slices.Index([]string{"site0", "site1", "site2"}, st.ActiveSite)
}

// A paused group whose primary is killed does not fail over while paused:
// status says what it withheld and the metric behind the alert is set, no
// site is made writable. Resuming it (or the pause running out) fails over
// with no acknowledged write lost.
func TestPausedGroupFailsOverOnlyOnceResumed(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		for _, how := range []string{"resume", "expiry"} {
			t.Run(how, func(t *testing.T) {
				g, load := startUnderLoad(t, groupOptions{engine: e}, true)
				lasts := "10m"
				if how == "expiry" {
					lasts = "12s"
				}
				g.op("pause", "orders", "--for", lasts, "--reason", "e2e "+how)
				g.waitFor("readiness blocked by the pause", 15*time.Second, func() bool {
					st, err := g.status()
					return err == nil && len(st.Readiness) == 2 && !st.Readiness[0].Ready && st.Readiness[0].Reason == "paused-withheld"
				})
				before, _ := g.status()
				g.kill(0)
				g.waitFor("the failover withheld", 10*time.Second, func() bool {
					st, err := g.status()
					return err == nil && st.Reason == "paused-withheld" && st.Withheld != nil && st.Withheld.Action == "revoke-epoch"
				})
				if m := g.metrics(); !strings.Contains(m, `failoverd_group_failover_withheld{group="orders"} 1`) || !strings.Contains(m, `failoverd_group_paused{group="orders"} 1`) {
					t.Errorf("metrics do not say the group is paused with a failover withheld")
				}
				time.Sleep(3 * time.Second) // well past detection: still nothing done
				if w := g.writable(); len(w) != 0 {
					t.Fatalf("writable while paused: %v", w)
				}
				if st, _ := g.status(); st.Epoch != before.Epoch || st.InFlight != nil {
					t.Fatalf("the paused group acted: epoch %d -> %d, in flight %+v", before.Epoch, st.Epoch, st.InFlight)
				}
				if how == "resume" {
					g.op("resume", "orders")
				}
				var st groupStatus
				g.waitFor("a replica promoted", failoverTimeout+15*time.Second, func() bool {
					s, err := g.status()
					st = s
					return err == nil && s.ActiveSite != "" && s.ActiveSite != "site0" && s.InFlight == nil
				})
				if st.Pause != nil {
					t.Errorf("pause still shown after %s: %+v", how, st.Pause)
				}
				load.WaitForAcks(t, len(load.Acked())+20, 30*time.Second)
				load.Stop()
				checkNoOverlap(t, g, load, 0, activeIndex(st))
				hist := g.op("history", "orders")
				for _, want := range []string{"pause", map[string]string{"resume": "resume", "expiry": "expired"}[how]} {
					if !strings.Contains(hist, want) {
						t.Errorf("history lacks %q:\n%s", want, hist)
					}
				}
			})
		}
	})
}

// The documented way to restart the primary's mysqld: a maintenance hold
// on it switches over first; its mysqld is then stopped and restarted with
// no failover and no replica alert, and once released it replicates from
// the new primary again. No acknowledged write lost, none acknowledged by
// the old primary after the new one's first.
func TestMaintenanceOfThePrimaryRestartsItWithoutFailover(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g, load := startUnderLoad(t, groupOptions{engine: e}, true)
		g.op("hold", "orders", "site0", "maintenance", "--for", "10m", "--reason", "mysqld upgrade")
		var st groupStatus
		g.waitFor("switched over away from site0", failoverTimeout, func() bool {
			s, err := g.status()
			st = s
			return err == nil && s.ActiveSite != "" && s.ActiveSite != "site0" && s.InFlight == nil
		})
		newIdx := activeIndex(st)
		epoch := st.Epoch
		g.waitFor("site0 replicates from the new primary", 30*time.Second, func() bool {
			return g.follows(g.topo.Sites[0], g.topo.Sites[newIdx])
		})
		load.WaitForAcks(t, len(load.Acked())+20, 30*time.Second)

		if err := g.topo.Sites[0].Stop(); err != nil {
			t.Fatalf("stop site0: %v", err)
		}
		quiet := func(what string) {
			t.Helper()
			for range 15 {
				time.Sleep(200 * time.Millisecond)
				s, err := g.status()
				if err != nil {
					continue
				}
				// No failover, and nothing an alert is raised for (the daemon
				// may still repair the restarted site, e.g. switch its
				// semi-sync source side off: class acting).
				if s.Epoch != epoch || s.ActiveSite != st.ActiveSite || (s.Class != "healthy" && s.Class != "acting") {
					t.Fatalf("%s: %s (%s, class %s, epoch %d), want no alert and no failover at epoch %d", what, s.Reason, s.Message, s.Class, s.Epoch, epoch)
				}
			}
		}
		quiet("site0 stopped")
		if m := g.metrics(); !strings.Contains(m, `failoverd_site_hold{group="orders",kind="maintenance",site="site0"} 1`) {
			t.Errorf("metrics lack the maintenance hold of site0")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := g.topo.Sites[0].Restart(ctx); err != nil {
			t.Fatalf("restart site0: %v", err)
		}
		quiet("site0 restarted")
		g.op("release", "orders", "site0")
		g.waitFor("site0 replicates again after the release", 30*time.Second, func() bool {
			return g.follows(g.topo.Sites[0], g.topo.Sites[newIdx])
		})
		load.WaitForAcks(t, len(load.Acked())+20, 30*time.Second)
		load.Stop()
		checkNoOverlap(t, g, load, 0, newIdx)
		if s, _ := g.status(); s.Epoch != epoch || s.ActiveSite != st.ActiveSite {
			t.Fatalf("the primary moved after the switchover: %+v", s)
		}
	})
}

// A no-promote site is never chosen: not when it has the highest priority,
// and not when it is the only site a failover could use (the group then
// waits, naming the hold, until it is released).
func TestNoPromoteSiteIsNeverChosen(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		t.Run("preferred site held", func(t *testing.T) {
			g, load := startUnderLoad(t, groupOptions{engine: e, priorities: []int{0, 100, 0}}, true)
			g.op("hold", "orders", "site1", "no-promote", "--for", "10m", "--reason", "undersized host")
			g.kill(0)
			st := g.waitActive("site2", failoverTimeout)
			load.WaitForAcks(t, len(load.Acked())+20, 30*time.Second)
			load.Stop()
			checkNoOverlap(t, g, load, 0, activeIndex(st))
		})
		t.Run("the only usable candidate is held", func(t *testing.T) {
			g, load := startUnderLoad(t, groupOptions{engine: e}, true)
			g.op("hold", "orders", "site1", "no-promote", "--for", "10m", "--reason", "undersized host")
			// site2 stops receiving: it falls behind site1, the only site
			// holding every acknowledged write.
			g.topo.Sites[2].Exec(t, stopIOThread(e))
			load.WaitForAcks(t, len(load.Acked())+20, 30*time.Second)
			g.kill(0)
			g.waitFor("the group waits, naming the hold", failoverTimeout, func() bool {
				st, err := g.status()
				// Either site2 lacks what site1 has, or it is no candidate at
				// all (lag unknown): the message names site1's hold.
				return err == nil && (st.Reason == "candidate-lacks-transactions" || st.Reason == "no-eligible-candidate") &&
					strings.Contains(st.Message, "no-promote hold")
			})
			time.Sleep(2 * time.Second)
			if w := g.writable(); len(w) != 0 {
				t.Fatalf("writable while the only candidate is held: %v", w)
			}
			g.op("release", "orders", "site1")
			st := g.waitActive("site1", failoverTimeout)
			load.WaitForAcks(t, len(load.Acked())+20, 30*time.Second)
			load.Stop()
			checkNoOverlap(t, g, load, 0, activeIndex(st))
		})
	})
}

func stopIOThread(e testenv.Engine) string {
	if e == testenv.MariaDB {
		return "STOP SLAVE IO_THREAD"
	}
	return "STOP REPLICA IO_THREAD"
}

// readinessSeen is what readiness answered for a fault in the last second
// before the kill: under write load the replicas take turns being the one
// that holds the newest transaction, so the candidate a crash would get
// changes from one round to the next, both answers right when given.
type readinessSeen struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	seen []readinessAnswer
}

type readinessAnswer struct {
	at               time.Time
	candidate, proof string
}

// watchReadiness polls g's readiness for fault every 20 ms until matches.
func watchReadiness(g *group, fault string) *readinessSeen {
	r := &readinessSeen{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			if st, err := g.status(); err == nil {
				if ready, cand, proof, _ := readiness(st, fault); ready {
					r.mu.Lock()
					r.seen = append(r.seen, readinessAnswer{time.Now(), cand, proof})
					r.mu.Unlock()
				}
			}
			select {
			case <-r.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // a few answers before the kill
	return r
}

// matches stops the watch and fails t unless the failover in st went to a
// candidate, with the proof, that readiness named within the second before
// the fault at killed (answers after it are discarded: they describe a
// primary already gone).
func (r *readinessSeen) matches(t *testing.T, st groupStatus, killed time.Time) {
	t.Helper()
	close(r.stop)
	<-r.done
	f := st.LastFailover
	if f == nil {
		t.Fatalf("no failover recorded: %+v", st)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var said []string
	for _, a := range r.seen {
		if a.at.After(killed) || a.at.Before(killed.Add(-time.Second)) {
			continue
		}
		said = append(said, a.candidate+" on "+a.proof)
		if a.candidate == f.To && a.proof == f.Proof {
			return
		}
	}
	t.Fatalf("failover to %s on %s; readiness said before it: %v", f.To, f.Proof, said)
}

// readiness returns the status's answer for fault.
func readiness(st groupStatus, fault string) (ready bool, candidate, proof, reason string) {
	for _, r := range st.Readiness {
		if r.Fault == fault {
			return r.Ready, r.Candidate, r.Proof, r.Reason
		}
	}
	return false, "", "", ""
}

// The readiness in status says what then happens when the primary is
// killed: for a healthy semi-sync group (the candidate and the proof), in
// the cooldown that failover armed (blocked), with its only candidates
// lagging (blocked until they catch up), and with the primary's sidecar
// silent (a crash still fails over; a lost primary would wait).
func TestReadinessMatchesWhatHappens(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		t.Run("semisync, then cooldown", func(t *testing.T) {
			g, load := startUnderLoad(t, groupOptions{engine: e, fencing: "semisync", semiSyncTimeoutMs: infiniteSemiSync}, true)
			var ready bool
			var reason string
			g.waitFor("ready on a crash", 20*time.Second, func() bool {
				st, err := g.status()
				ready, _, _, reason = readiness(st, "crash")
				return err == nil && ready
			})
			said := watchReadiness(g, "crash")
			killed := time.Now()
			g.kill(0)
			st := g.waitFor2ActiveFrom("site0", failoverTimeout)
			said.matches(t, st, killed)
			load.WaitForAcks(t, len(load.Acked())+20, 30*time.Second)
			load.Stop()
			checkNoOverlap(t, g, load, 0, activeIndex(st))
			// The failover armed the cooldown: readiness says so, and so does
			// the decision when the new primary dies.
			g.waitFor("readiness blocked by the cooldown", 20*time.Second, func() bool {
				s, err := g.status()
				ready, _, _, reason = readiness(s, "crash")
				return err == nil && !ready && reason == "cooldown"
			})
			g.kill(activeIndex(st))
			g.waitFor("cooldown", failoverTimeout, func() bool {
				s, err := g.status()
				return err == nil && s.Reason == "cooldown"
			})
		})
		t.Run("candidates lagging", func(t *testing.T) {
			g, load := startUnderLoad(t, groupOptions{engine: e, extraConfig: "    maxCandidateLag: 1s\n"}, true)
			// Both replicas' appliers wait on a lock: they fall behind.
			var unlock []func()
			for _, r := range g.topo.Sites[1:] {
				unlock = append(unlock, lockAppTable(t, r))
			}
			defer func() {
				for _, u := range unlock {
					u()
				}
			}()
			var reason string
			g.waitFor("readiness blocked by the lag", 30*time.Second, func() bool {
				st, err := g.status()
				var ready bool
				ready, _, _, reason = readiness(st, "crash")
				return err == nil && !ready && reason == "no-eligible-candidate"
			})
			g.kill(0)
			g.waitFor("the failover blocked by the lag", failoverTimeout, func() bool {
				st, err := g.status()
				return err == nil && st.Reason == reason
			})
			for _, u := range unlock {
				u()
			}
			unlock = nil
			st := g.waitFor2ActiveFrom("site0", failoverTimeout+30*time.Second)
			load.WaitForAcks(t, len(load.Acked())+20, 30*time.Second)
			load.Stop()
			checkNoOverlap(t, g, load, 0, activeIndex(st))
		})
		t.Run("sidecar silent", func(t *testing.T) {
			g, load := startUnderLoad(t, groupOptions{engine: e, fencing: "sidecar", sidecars: true}, true)
			if err := g.sidecars[0].cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			g.waitFor("a lost primary would wait, a crash would not", 40*time.Second, func() bool {
				st, err := g.status()
				lostReady, _, _, lostReason := readiness(st, "lost")
				ready, _, _, _ := readiness(st, "crash")
				return err == nil && ready && !lostReady && lostReason == "await-fence-confirmation"
			})
			said := watchReadiness(g, "crash")
			killed := time.Now()
			g.kill(0)
			st := g.waitFor2ActiveFrom("site0", failoverTimeout)
			said.matches(t, st, killed)
			load.WaitForAcks(t, len(load.Acked())+20, 30*time.Second)
			load.Stop()
			checkNoOverlap(t, g, load, 0, activeIndex(st))
		})
	})
}

// lockAppTable holds a read lock on the write load's table on srv from its
// own session (the applier, which must write it, waits; a read lock is
// allowed on a read-only server) until the returned func runs.
func lockAppTable(t *testing.T, srv *testenv.Server) func() {
	t.Helper()
	db := srv.AdminDB(t)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "LOCK TABLES "+testenv.WriteLoadTable+" READ"); err != nil {
		t.Fatalf("lock on %s: %v", srv.Name, err)
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			_, _ = conn.ExecContext(ctx, "UNLOCK TABLES")
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // discard the session
			_ = conn.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// The cooldown fits planned work: a crash right after a planned switchover
// still fails over (only automatic failovers arm the cooldown), and an
// operator's acknowledge clears the cooldown that failover armed, so the
// next crash fails over too. No acknowledged write lost.
func TestCooldownIsArmedByFailoversOnlyAndClearedByAcknowledge(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g, load := startUnderLoad(t, groupOptions{engine: e}, true)
		g.op("switchover", "orders", "site1", "--wait")
		g.waitFor("site0 replicates from site1", 30*time.Second, func() bool { return g.follows(g.topo.Sites[0], g.topo.Sites[1]) })
		load.WaitForAcks(t, len(load.Acked())+20, 30*time.Second)
		g.kill(1)
		st := g.waitFor2ActiveFrom("site1", failoverTimeout)
		if st.CooldownRemainingSeconds <= 0 {
			t.Fatalf("the automatic failover armed no cooldown: %+v", st)
		}
		next := activeIndex(st)
		other := 2 - next // site0 or site2, whichever was not promoted
		g.waitFor("the other replica follows the new primary", 30*time.Second, func() bool {
			return g.follows(g.topo.Sites[other], g.topo.Sites[next])
		})
		load.WaitForAcks(t, len(load.Acked())+20, 30*time.Second)
		g.op("acknowledge", "orders")
		if s, _ := g.status(); s.CooldownRemainingSeconds > 0 {
			t.Fatalf("acknowledge left the cooldown: %v s", s.CooldownRemainingSeconds)
		}
		g.kill(next)
		// The failover starts (no cooldown). site1, the first failover's old
		// primary, is still dead and may hold the only copy of a write the
		// new primary acknowledged (two sites lost): the operator, who knows
		// it is gone, gives it up.
		g.waitFor("the failover waits for site1", failoverTimeout, func() bool {
			s, err := g.status()
			return err == nil && s.Reason == "ack-holder-unreachable" && strings.Contains(s.Message, "site1")
		})
		g.op("confirm-fence", "orders", "site1")
		final := g.waitActive(fmt.Sprintf("site%d", other), failoverTimeout)
		load.WaitForAcks(t, len(load.Acked())+20, 30*time.Second)
		load.Stop()
		checkNoOverlap(t, g, load, next, activeIndex(final))
	})
}

// waitFor2ActiveFrom waits until a site other than from is the settled
// primary.
func (g *group) waitFor2ActiveFrom(from string, timeout time.Duration) groupStatus {
	g.t.Helper()
	var st groupStatus
	g.waitFor("a replica promoted", timeout, func() bool {
		s, err := g.status()
		st = s
		return err == nil && s.ActiveSite != "" && s.ActiveSite != from && s.InFlight == nil
	})
	return st
}
