package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/daemon"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/test/testenv"
)

// failoverd history after a real failover: the primary of a 3-site group
// (with a cache, so routing has a follower) is SIGKILLed; once a replica is
// promoted, the history lists one completed failover from site0 to it, with
// its epochs, proof, promotion GTID and every step of its timeline, in
// order, on the daemon's clock; the table shows the same.
func TestHistoryShowsARealFailover(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, cache: true})
		g.startDaemon()
		first := g.waitActive("site0", 30*time.Second)
		// One transaction, replicated before the kill: the promotion GTID
		// the history records is then not empty.
		g.topo.Sites[0].Exec(t, "CREATE TABLE "+testenv.AppDatabase+".history_probe (id INT PRIMARY KEY)")
		g.waitFor("the transaction replicated", 30*time.Second, func() bool {
			return g.received(g.topo.Sites[1], g.topo.Sites[0]) && g.received(g.topo.Sites[2], g.topo.Sites[0])
		})
		g.kill(0)
		to := fmt.Sprintf("site%d", g.promotedFrom("site0"))

		// The repoint and the routing are stamped after the promotion was
		// committed: wait until they are in.
		var f *status.FailoverRecord
		g.waitFor("the failover's history complete", 30*time.Second, func() bool {
			code, out, _ := g.cli("history", "orders", "-o", "json")
			var h status.History
			if code != 0 || json.Unmarshal([]byte(out), &h) != nil {
				return false
			}
			f = nil
			for _, e := range h.Entries {
				if e.Failover != nil {
					f = e.Failover
				}
			}
			return f != nil && f.Outcome == status.OutcomeCompleted && stepAt(f, daemon.StepRepointed) >= 0 && stepAt(f, daemon.TimelineRouted) >= 0
		})
		if f.Kind != "failover" || f.From != "site0" || f.To != to || f.RevokedEpoch != first.Epoch+1 || f.Epoch != first.Epoch+2 ||
			f.Proof == "" || f.PromotionGTID == "" || f.Reason == "" || f.By != "" || f.Why != "" {
			t.Fatalf("history entry %+v", f)
		}
		want := []string{daemon.TimelineDetected, daemon.StepRevoked, daemon.TimelineFenced, daemon.StepRelayDrained,
			daemon.StepPromotionRecorded, daemon.StepPublished, daemon.StepWritable, daemon.StepPromoted, daemon.StepRepointed}
		last := -1
		for _, step := range want {
			i := stepAt(f, step)
			if i <= last {
				t.Fatalf("step %s at %d (previous wanted step at %d) in %+v", step, i, last, f.Timeline)
			}
			last = i
		}
		for i, s := range f.Timeline {
			if s.At.IsZero() || (i > 0 && (s.At.Before(f.Timeline[i-1].At) || s.SinceStartSeconds < f.Timeline[i-1].SinceStartSeconds)) {
				t.Fatalf("timeline out of order at %s: %+v", s.Step, f.Timeline)
			}
		}
		if f.TookSeconds <= 0 || f.RevokedToWritableSeconds <= 0 || f.RevokedToWritableSeconds > f.TookSeconds {
			t.Fatalf("durations: took %.3fs, revoked to writable %.3fs", f.TookSeconds, f.RevokedToWritableSeconds)
		}

		code, out, errOut := g.cli("history", "orders")
		if code != 0 {
			t.Fatalf("history: exit %d\n%s%s", code, out, errOut)
		}
		t.Logf("failoverd history:\n%s", out)
		for _, w := range []string{"failover orders-", "site0 → " + to, fmt.Sprintf("completed at epoch %d", f.Epoch), "proof " + f.Proof,
			"STEP", daemon.StepWritable, daemon.TimelineRouted} {
			if !strings.Contains(out, w) {
				t.Errorf("history table lacks %q", w)
			}
		}
		if code, _, errOut := g.cli("history", "nope"); code != 1 || !strings.Contains(errOut, "unknown group nope") {
			t.Errorf("history of an unknown group: exit %d %q", code, errOut)
		}
	})
}

// stepAt is the index of step in f's timeline, -1 if absent.
func stepAt(f *status.FailoverRecord, step string) int {
	return slices.IndexFunc(f.Timeline, func(s status.TimelineStep) bool { return s.Step == step })
}
