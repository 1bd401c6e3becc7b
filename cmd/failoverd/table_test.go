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

// `failoverd status` names the configuration file the daemon runs (its
// digest and age), a refused reload (the file on disk is not the one
// running) and the groups whose new configuration waits for a failover.
func TestStatusTableShowsConfigRefusalAndPendingGroups(t *testing.T) {
	now := time.Now()
	d := status.Daemon{Identity: "d1", Leader: true, Ready: true, Store: "file state.json", Config: status.Config{
		File: "/etc/failoverd/failoverd.yaml", Digest: "3b1f09c2d4e7aa55", LoadedAt: now.Add(-3 * time.Hour),
		LastRefusedAt: now.Add(-time.Minute), LastRefused: "reload refused: /etc/failoverd/failoverd.yaml: 1 configuration problem(s)",
		Pending: []status.PendingGroup{{Group: "orders", Reason: "a failover from a to b is in flight; applied once it ends"}},
	}}
	var b strings.Builder
	writeTable(&b, d, nil, now)
	out := b.String()
	for _, want := range []string{"config /etc/failoverd/failoverd.yaml sha256:3b1f09c2d4e7, loaded 3h ago",
		"RELOAD REFUSED 60s ago: reload refused: /etc/failoverd/failoverd.yaml: 1 configuration problem(s)",
		"orders keeps its previous configuration: a failover from a to b is in flight"} {
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

// The reclone command the status table suggests for a diverged site is one
// the CLI accepts (it named the renamed --token), with the divergent set's
// start as the confirmation.
func TestStatusTableRecloneAdviceParses(t *testing.T) {
	g := status.Group{Name: "orders", ActiveSite: "a", Class: status.ClassDegraded,
		Diverged: []status.Divergence{{Site: "b", Transactions: 2, GTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:11-12"}}}
	var b strings.Builder
	writeTable(&b, status.Daemon{}, []status.Group{g}, time.Now())
	_, advice, ok := strings.Cut(b.String(), "throw them away: ")
	if !ok {
		t.Fatalf("no reclone advice in:\n%s", b.String())
	}
	advice, _, _ = strings.Cut(advice, "\n")
	dcs := extractCommands("status", "```\n"+advice+"\n```\n")
	if len(dcs) != 1 || !strings.Contains(advice, "--confirm-discard 3e11fa47-71ca-11") {
		t.Fatalf("advice %q", advice)
	}
	if err := checkDocCommand(dcs[0]); err != nil {
		t.Fatalf("advice %q: %v", advice, err)
	}
}

// For a replication: group group the table says whether the group has
// quorum, its view against the sticky majority denominator, each member's
// own report and standing, and two groups among the members.
func TestStatusTableShowsGroupReplicationQuorumAndMembers(t *testing.T) {
	g := status.Group{Name: "gr", Epoch: 2, ActiveSite: "a", Class: status.ClassBlocked, Reason: "group-no-quorum", Message: "m",
		GroupReplication: &status.GroupReplication{Verdict: "no-quorum", Denominator: 3, TwoGroups: true, GroupNames: []string{"g1", "g2"},
			Sites: []status.GroupReplicationSite{{Site: "a", State: "ONLINE", Role: "PRIMARY", ViewID: "v:3", ViewSize: 3, Standing: "minority"},
				{Site: "b", Standing: "unreached", Error: "connection refused"}}}}
	var b strings.Builder
	writeTable(&b, status.Daemon{}, []status.Group{g}, time.Now())
	out := b.String()
	for _, want := range []string{"group replication: NO QUORUM (no-quorum), view - of 0 members (majority of 3)", "a: ONLINE PRIMARY, view v:3 (3 members), minority",
		"b: - -, view - (0 members), unreached: connection refused", "TWO GROUPS among the configured members: g1, g2"} {
		if !strings.Contains(out, want) {
			t.Errorf("status table lacks %q:\n%s", want, out)
		}
	}
}
