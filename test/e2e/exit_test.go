package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/testenv"
)

// exitDecision is a decision log line with its detection code.
type exitDecision struct {
	Msg, Action, Reason, Detection, Message string
	Time                                    time.Time
}

func (g *group) decisionsWithDetection() []exitDecision {
	var out []exitDecision
	for line := range strings.SplitSeq(g.logs.String(), "\n") {
		var d exitDecision
		if json.Unmarshal([]byte(line), &d) == nil && d.Msg == "decision" {
			out = append(out, d)
		}
	}
	return out
}

// exitsLogged counts the daemon's sidecar.mysqld_exited lines for site.
func (g *group) exitsLogged(site string) int {
	n := 0
	for line := range strings.SplitSeq(g.logs.String(), "\n") {
		if strings.Contains(line, `"msg":"sidecar.mysqld_exited"`) && strings.Contains(line, `"site":"`+site+`"`) {
			n++
		}
	}
	return n
}

// TestKillPrimaryWithSidecarsFailsOverOnTheExitReport (issue 32): with
// sidecars given the pid file, a kill -9 of a replica's mysqld is reported
// at once and fails nothing over (a replica's exit says nothing about the
// primary), and it rejoins once restarted by hand; a kill -9 of the
// primary's mysqld is reported at once and the failover starts on it
// (detection PrimaryExited), with every acknowledged write kept and writes
// resuming on the new primary.
func TestKillPrimaryWithSidecarsFailsOverOnTheExitReport(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g, load := startUnderLoad(t, groupOptions{engine: e, fencing: "sidecar", sidecars: true}, true)
		first, err := g.status()
		if err != nil {
			t.Fatal(err)
		}

		// A replica's crash: reported, no failover, back by hand.
		g.kill(1)
		g.waitFor("the daemon hears site1's exit", 10*time.Second, func() bool { return g.exitsLogged("site1") > 0 })
		time.Sleep(2 * time.Second) // several failure windows: a wrong shortcut would have revoked by now
		if st, err := g.status(); err != nil || st.ActiveSite != "site0" || st.Epoch != first.Epoch {
			t.Fatalf("after a replica's exit: active %q epoch %d (err %v), want site0 at epoch %d", st.ActiveSite, st.Epoch, err, first.Epoch)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := g.topo.Sites[1].Restart(ctx); err != nil {
			t.Fatal(err)
		}
		// Servers start with skip_replica_start (semi-sync fencing needs
		// it): the operator who restarted it starts its replication.
		g.topo.Sites[1].Exec(t, "START REPLICA")
		g.waitFor("site1 follows site0 again", 30*time.Second, func() bool { return g.follows(g.topo.Sites[1], g.topo.Sites[0]) })
		before := len(load.Acked())
		load.WaitForAcks(t, before+20, 20*time.Second)

		// The primary's crash: the failover starts on the exit report.
		killed := time.Now()
		g.kill(0)
		n := g.promotedFrom("site0")
		var revoke *exitDecision
		for _, d := range g.decisionsWithDetection() {
			if d.Action == "revoke-epoch" && d.Time.After(killed) {
				revoke = &d
				break
			}
		}
		if revoke == nil || revoke.Detection != "PrimaryExited" {
			t.Fatalf("the failover's revoke: %+v, want detection PrimaryExited", revoke)
		}
		if g.exitsLogged("site0") == 0 {
			t.Error("the daemon logged no sidecar.mysqld_exited for site0")
		}
		t.Logf("kill -9 → revoke decided in %v (%s)", revoke.Time.Sub(killed), revoke.Message)
		before = len(load.Acked())
		load.WaitForAcks(t, before+50, 30*time.Second) // writes resume on the new primary
		load.Stop()
		if missing := load.Missing(t, g.topo.Sites[n].AppDB(t)); len(missing) > 0 {
			t.Fatalf("%d acknowledged writes missing on the new primary: %v", len(missing), missing[:min(len(missing), 10)])
		}
		// The exit report is no proof: the promotion rested on the probes
		// (primary-down) or on the sidecar's own report of the revoked epoch.
		if s := g.stateFile(); s.LastFailover == nil || (s.LastFailover.Proof != "primary-down" && s.LastFailover.Proof != "sidecar-fenced") {
			t.Errorf("last failover %+v, want proof primary-down or sidecar-fenced", s.LastFailover)
		}
	})
}

// TestCleanRestartOfThePrimaryIsNoExitReport (issue 32): a restart of the
// primary's mysqld by hand (SIGTERM: a clean shutdown removes the pid file)
// is not reported as an exit, so it never shortens detection: whatever the
// daemon decides rests on its probes over the failure window, as without
// sidecars.
func TestCleanRestartOfThePrimaryIsNoExitReport(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g, load := startUnderLoad(t, groupOptions{engine: e, fencing: "sidecar", sidecars: true}, true)
		defer load.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := g.topo.Sites[0].Restart(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond) // a report, had one been sent, has arrived
		if n := g.exitsLogged("site0"); n > 0 {
			t.Errorf("the daemon logged %d exits of site0 for a clean restart", n)
		}
		for _, d := range g.decisionsWithDetection() {
			if d.Detection == "PrimaryExited" {
				t.Errorf("decision on PrimaryExited after a clean restart: %+v", d)
			}
		}
		// The sidecar saw it stop (its log is read once it has exited).
		p := g.sidecars[0]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.exited
		logs := p.logs.String()
		if !strings.Contains(logs, `"msg":"sidecar.mysqld_stopped"`) || strings.Contains(logs, `"msg":"sidecar.mysqld_exited"`) {
			t.Errorf("site0's sidecar did not log the clean shutdown as a stop (and no exit):\n%s", tail(logs, 20))
		}
	})
}
