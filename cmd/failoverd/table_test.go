package main

import (
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/status"
)

// `failoverd status` names a replica whose applier is blocked and a primary
// whose writes wait for acknowledgements, and its lag column shows the GTID
// lag when the server's own estimate is lower (issue 26 hole 9: both
// replicas had stopped applying while the status said healthy).
func TestStatusTableNamesBlockedAppliersAndStalledWrites(t *testing.T) {
	g := status.Group{Name: "orders", Epoch: 3, ActiveSite: "a", Class: status.ClassDegraded, Reason: "degraded-applier-blocked", Message: "m",
		Sites: []status.Site{
			{Name: "a", Role: "primary-candidate", State: status.StateWritable, Active: true, WritesStalled: "2 sessions waiting",
				SemiSync: &status.SemiSync{SourceEnabled: true, WaitingSessions: 2}},
			{Name: "b", Role: "primary-candidate", State: status.StateReadOnly, ReplicatingFrom: "a", ApplierBlocked: "1 applier thread waiting",
				Replication: &status.Replication{IORunning: true, SQLRunning: true, LagKnown: true, GTIDLagSeconds: 42}},
		}}
	var b strings.Builder
	writeTable(&b, status.Daemon{}, []status.Group{g}, time.Now())
	out := b.String()
	for _, want := range []string{"a WRITES STALLED awaiting semi-sync acknowledgements: 2 sessions waiting", "b APPLIER BLOCKED: 1 applier thread waiting", " 42s "} {
		if !strings.Contains(out, want) {
			t.Errorf("status table lacks %q:\n%s", want, out)
		}
	}
}

// The table says a group is paused and what it withheld, which sites are
// held, and what a lost primary would lead to.
func TestStatusTableShowsPauseHoldsAndReadiness(t *testing.T) {
	now := time.Now()
	g := status.Group{Name: "orders", Epoch: 3, ActiveSite: "a", Class: status.ClassBlocked, Reason: "paused-withheld", Message: "m",
		Pause:    &status.Pause{By: "ann", Reason: "dc2 work", Until: now.Add(20 * time.Minute)},
		Withheld: &status.Withheld{Action: "revoke-epoch", Target: "b", Reason: "failover-revoke"},
		Readiness: []status.Readiness{{Fault: "crash", Ready: true, Candidate: "b", Proof: "primary-down", ExpectedWritableSeconds: 1.4},
			{Fault: "lost", Reason: "await-fence-confirmation"}},
		Sites: []status.Site{{Name: "a", State: status.StateWritable, Active: true},
			{Name: "c", State: status.StateReadOnly, Hold: &status.Pause{Kind: "maintenance", By: "bob", Reason: "disk swap", Until: now.Add(time.Hour)}}}}
	var b strings.Builder
	writeTable(&b, status.Daemon{}, []status.Group{g}, now)
	out := b.String()
	for _, want := range []string{"PAUSED by ann", "(dc2 work): failoverd resume orders", "WITHHELD by the pause: revoke-epoch b (failover-revoke)",
		"c held maintenance by bob", "if the primary crashed: b in about 1.4s (primary-down)", "NO automatic failover (await-fence-confirmation)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
