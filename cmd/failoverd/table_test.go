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

// `failoverd status` says a group is in observe mode, so a reader never takes
// its decision for something that happened.
func TestStatusTableSaysObserveMode(t *testing.T) {
	g := status.Group{Name: "orders", Mode: status.ModeObserve, Epoch: 1, ActiveSite: "a", Class: status.ClassActing, Reason: "failover-revoke"}
	var b strings.Builder
	writeTable(&b, status.Daemon{}, []status.Group{g}, time.Now())
	if !strings.Contains(b.String(), "OBSERVE MODE") {
		t.Errorf("status table of an observing group:\n%s", b.String())
	}
	g.Mode = status.ModeActive
	b.Reset()
	writeTable(&b, status.Daemon{}, []status.Group{g}, time.Now())
	if strings.Contains(b.String(), "OBSERVE") {
		t.Errorf("status table of an active group:\n%s", b.String())
	}
}
