package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/testenv"
)

// Semi-sync enabled on both sides of every site, as guides commonly advise
// ("so that any site can be promoted"), with the infinite timeout fencing
// semisync requires. A replica's own source side makes its applier wait for
// acknowledgements nobody sends (issue 26, hole 9: the replicas stopped
// applying, the daemon said healthy, and a hung primary's failover sat in the
// relay drain for ever). The daemon owns the roles: the source side only on
// the primary. A SIGSTOPped primary is failed over within failoverTimeout
// with no acknowledged write lost; the new primary has the source side on,
// the remaining replica has it off.
func TestSemiSyncEverywhereHungPrimaryFailsOver(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g, load := startUnderLoad(t, groupOptions{engine: e, fencing: "semisync", semiSyncTimeoutMs: infiniteSemiSync, semiSyncEverywhere: true}, true)
		t.Cleanup(func() {
			if t.Failed() {
				for _, r := range g.topo.Sites[1:] {
					t.Logf("%s executed %s, replica status %v", r.Name, r.GTIDExecuted(t), r.ReplicaStatus(t))
				}
			}
		})
		if st, err := g.status(); err == nil {
			t.Logf("before the fault: %s (%s)", st.Reason, st.Message)
		}
		// The daemon took the source side away from both replicas (the
		// harness left it on, with the infinite timeout).
		for _, site := range []string{"site1", "site2"} {
			want := `"msg":"semisync.source_disabled","group":"orders","site":"` + site + `","why":"replica"`
			if !strings.Contains(g.logs.String(), want) {
				t.Errorf("no %s in the daemon's log", want)
			}
		}
		t.Logf("fault at %s", time.Now().Format(time.RFC3339Nano))
		g.pause(0)
		var st groupStatus
		g.waitFor("a replica promoted", failoverTimeout, func() bool {
			s, err := g.status()
			st = s
			return err == nil && s.ActiveSite != "" && s.ActiveSite != "site0" && s.InFlight == nil
		})
		newIdx := slices.Index([]string{"site0", "site1", "site2"}, st.ActiveSite)
		t.Logf("failover done: %s", st.Message)
		before := len(load.Acked())
		load.WaitForAcks(t, before+50, 30*time.Second)
		// The roles moved with the primary.
		other := 3 - newIdx
		source := semiSyncSourceVar(e, "enabled")
		g.waitFor("the source side on the new primary only", 15*time.Second, func() bool {
			return g.topo.Sites[newIdx].QueryString(t, "SELECT @@GLOBAL."+source) == "1" &&
				g.topo.Sites[other].QueryString(t, "SELECT @@GLOBAL."+source) == "0"
		})
		if err := g.topo.Sites[0].Resume(); err != nil {
			t.Fatal(err)
		}
		g.waitFor("old primary fenced", failoverTimeout, func() bool {
			return !slices.Contains(g.writable(), "site0")
		})
		load.Stop()
		checkNoOverlap(t, g, load, 0, newIdx)
	})
}
