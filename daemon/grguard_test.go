package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/sitepair"
)

// Below the decision, at the connection: whatever asks (a decision of the
// async kind, a server primitive), no fence, read_only, promote, replica,
// semi-sync statement reaches a Group Replication member; each is refused
// with ErrGroupReplicationNoWrite.
func TestGroupReplicationRefusesEveryWriteStatementAtTheConnection(t *testing.T) {
	fg := newFakeGroup()
	h, _ := grHarness(t, fg, newTestStore(t))
	ctx := context.Background()
	for _, d := range []sitepair.Decision{
		{Action: sitepair.Promote, Reason: sitepair.ReasonPromote, Target: "b", From: "a", Epoch: 3},
		{Action: sitepair.FenceSites, Reason: sitepair.ReasonUnexpectedPrimaryFenced, Fence: []string{"a"}},
		{Action: sitepair.RevokeEpoch, Reason: sitepair.ReasonPromote, Target: "b", From: "a", Epoch: 2},
		{Action: sitepair.ReassertPrimary, Reason: sitepair.ReasonReassertPrimary, Target: "a", Epoch: 2},
		{Action: sitepair.Rejoin, Reason: sitepair.ReasonRejoin, Target: "a", Repoint: []string{"b"}},
		{Action: sitepair.StopReplicaIO, Reason: sitepair.ReasonPromote, Detach: []string{"b"}},
		{Action: sitepair.DisableSemiSyncSource, Reason: sitepair.ReasonSemiSyncSourceOnReplica, SemiSyncOff: []string{"b"}},
	} {
		if err := h.g.act(ctx, ctx, d); !errors.Is(err, ErrGroupReplicationNoWrite) {
			t.Errorf("act(%s) = %v, want ErrGroupReplicationNoWrite", d.Action, err)
		}
	}
	for name, op := range map[string]func(Instance) error{
		"fence":     func(in Instance) error { return in.Fence(ctx) },
		"promote":   func(in Instance) error { return in.Promote(ctx) },
		"stop":      func(in Instance) error { return in.StopReplica(ctx) },
		"stop-io":   func(in Instance) error { return in.StopReplicaIO(ctx) },
		"start-io":  func(in Instance) error { return in.StartReplicaIO(ctx) },
		"reset":     func(in Instance) error { return in.ResetReplicaAll(ctx) },
		"semisync":  func(in Instance) error { return in.SetSemiSync(ctx, true, false) },
		"repoint":   func(in Instance) error { return in.ReplicateFrom(ctx, mysqlctl.Source{}) },
		"kill":      func(in Instance) error { _, err := in.KillClientConnections(ctx); return err },
		"drain":     func(in Instance) error { return in.WaitRelayDrained(ctx, gtid.Set{}, time.Second) },
		"makeWrite": func(Instance) error { return h.g.servers.makeWritable(ctx, "b") },
	} {
		if err := h.g.servers.conns.do(ctx, "b", op); !errors.Is(err, ErrGroupReplicationNoWrite) {
			t.Errorf("%s on a member = %v, want ErrGroupReplicationNoWrite", name, err)
		}
	}
	in, err := h.g.servers.conns.get(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := in.(cloner); ok {
		t.Error("a Group Replication member's connection offers CLONE")
	}
	if w := writesRun(fg.ops); len(w) > 0 {
		t.Fatalf("statements reached the members: %v", w)
	}
}

// An observing group's member connection refuses every write an operator
// could ask of the group (set_as_primary, force_members, a bootstrap,
// START GROUP_REPLICATION) before it reaches the member.
func TestGroupReplicationObservingRefusesOperatorWritesAtTheConnection(t *testing.T) {
	fg := newFakeGroup()
	in := grInstance{in: fakeMember{fakeInstance: fakeInstance{site: "b", log: fg.ops}, g: fg}, site: "b", observing: true}
	ctx := context.Background()
	for name, err := range map[string]error{
		"set-as-primary": in.SetAsPrimary(ctx, grUUID("b"), time.Second),
		"force-members":  in.ForceMembers(ctx, []string{"127.0.0.1:3306b"}, time.Second),
		"bootstrap":      in.BootstrapGroup(ctx, time.Second),
		"start":          in.StartGroupReplication(ctx, time.Second),
	} {
		if !errors.Is(err, ErrObserveOnly) {
			t.Errorf("%s: %v, want ErrObserveOnly", name, err)
		}
	}
	if w := writesRun(fg.ops); len(w) > 0 {
		t.Fatalf("statements reached the member: %v", w)
	}
}
