package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
)

// stateFixture is a state file written by the release before the persisted
// record was unified (commit 380326d): every field the document holds, in
// two groups (a failover in flight on MariaDB, a settled switchover on
// MySQL). It must keep loading and re-save to the same bytes.
const stateFixture = "testdata/state-v2.json"

var (
	fixtureSavedAt = time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC)
	fixtureSavedBy = "failoverd-1@host-a"
	fixtureGroups  = map[string]gtid.Flavor{"orders": gtid.MariaDB, "billing": gtid.MySQL}
)

// TestWriteStateFixture regenerates the fixture; it only runs when
// FAILOVERD_WRITE_STATE_FIXTURE is set, and was run once with the release
// the fixture stands for.
func TestWriteStateFixture(t *testing.T) {
	if os.Getenv("FAILOVERD_WRITE_STATE_FIXTURE") == "" {
		t.Skip("set FAILOVERD_WRITE_STATE_FIXTURE=1 to regenerate " + stateFixture)
	}
	os.Remove(stateFixture)
	f, err := store.OpenFile(stateFixture, func() time.Time { return fixtureSavedAt })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	save := func(st store.GroupState) {
		st.UpdatedBy = fixtureSavedBy
		if err := f.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
	}

	// orders: a failover a→b promoted on an operator's confirmation, a
	// halt, diverged and recloning sites, then a second failover b→c in
	// flight, published, with its promotion GTID recorded, a fence
	// confirmation and a lost ack holder.
	st := store.GroupState{Group: "orders", Epoch: 4, ActiveSite: "a"}
	p, err := toPersisted(st, gtid.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	at := t0
	p = sitepair.Apply(p, sitepair.Decision{Action: sitepair.RevokeEpoch, Epoch: 5, From: "a", Target: "b"}, at)
	st = fromPersisted("orders", p, st, at)
	st.InFlight.Step, st.InFlight.StepDone = StepRevoked, true
	save(st)
	p.InFlight.OperatorConfirmed = &sitepair.FenceConfirmation{Site: "a", Epoch: 5, At: at.Add(time.Minute), By: "alice"}
	st.Audit = store.AppendAudit(st.Audit, store.AuditEntry{At: at.Add(time.Minute), Action: store.AuditConfirmFence, Site: "a", By: "alice", Result: store.AuditAccepted})
	st = fromPersisted("orders", p, st, at.Add(time.Minute))
	save(st)
	at = at.Add(2 * time.Minute)
	p = sitepair.Apply(p, sitepair.Decision{Action: sitepair.Promote, Epoch: 6, From: "a", Target: "b",
		PromotionGTID: gtid.MustParse(gtid.MariaDB, "0-1-42,1-2-7"), FenceProof: sitepair.ProofOperatorConfirmed}, at)
	st = fromPersisted("orders", p, st, at)
	save(st)
	p.Diverged = map[string]gtid.Set{"a": gtid.MustParse(gtid.MariaDB, "0-1-43"), "d": gtid.MustParse(gtid.MariaDB, "0-4-9")}
	p.DivergedCount = map[string]uint64{"a": 1}
	p.OperatorFenced = []string{"e"}
	p.Recloning = map[string]sitepair.Reclone{"d": {Donor: "b", Epoch: 6, At: at.Add(time.Minute), By: "bob"}}
	st.Audit = store.AppendAudit(st.Audit, store.AuditEntry{At: at.Add(time.Minute), Action: store.AuditReclone, Site: "d", By: "bob",
		Result: store.AuditAccepted + ": discarding what the donor b lacks: 0-4-9"})
	p.EscalationHalted = true
	p.FailoverHistory = append(p.FailoverHistory, at.Add(-time.Hour))
	st.HaltedReason = "3 automatic failovers within 1h0m0s"
	st = fromPersisted("orders", p, st, at.Add(time.Minute))
	save(st)
	st.Audit = store.AppendAudit(st.Audit, store.AuditEntry{At: at.Add(2 * time.Minute), Action: store.AuditSwitchover, Site: "e", By: "carol",
		Result: "refused: switchover to e: e is fenced by an operator (operator-fenced)"})
	at = at.Add(10 * time.Minute)
	p = sitepair.Apply(p, sitepair.Decision{Action: sitepair.RevokeEpoch, Epoch: 7, From: "b", Target: "c"}, at)
	st = fromPersisted("orders", p, st, at)
	st.InFlight.Step, st.InFlight.StepDone = StepRevoked, true
	save(st)
	p.InFlight.OperatorConfirmed = &sitepair.FenceConfirmation{Site: "b", Epoch: 7, At: at.Add(time.Minute), By: "alice"}
	p.InFlight.LostHolders = []sitepair.FenceConfirmation{{Site: "d", Epoch: 7, At: at.Add(90 * time.Second), By: "alice"}}
	st = fromPersisted("orders", p, st, at.Add(2*time.Minute))
	st.InFlight.Step, st.InFlight.StepDone, st.InFlight.PromotionGTID = StepPromotionRecorded, true, "0-1-42,0-2-50,1-2-7"
	save(st)
	p.InFlight.PublishedEpoch, p.InFlight.PublishedTo = 7, "c"
	st = fromPersisted("orders", p, st, at.Add(3*time.Minute))
	st.InFlight.Step, st.InFlight.StepDone = StepPublished, true
	save(st)

	// billing: a settled switchover a→b on MySQL with a legacy diverged
	// set (no count) and a failed reclone.
	u1, u2 := "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4f22ab58-82db-22f2-af44-d91bb0530673"
	st = store.GroupState{Group: "billing", Epoch: 10, ActiveSite: "a"}
	q, err := toPersisted(st, gtid.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	q = sitepair.Apply(q, sitepair.Decision{Action: sitepair.RevokeEpoch, Epoch: 11, From: "a", Target: "b", Planned: true}, t0)
	st = fromPersisted("billing", q, st, t0)
	st.Audit = store.AppendAudit(st.Audit, store.AuditEntry{At: t0, Action: store.AuditSwitchover, Site: "b", By: "dave", Result: store.AuditAccepted})
	save(st)
	q = sitepair.Apply(q, sitepair.Decision{Action: sitepair.Promote, Epoch: 12, From: "a", Target: "b", Planned: true,
		PromotionGTID: gtid.MustParse(gtid.MySQL, u1+":1-100,"+u2+":1-5"), FenceProof: sitepair.ProofSidecarFenced}, t0.Add(time.Second))
	st = fromPersisted("billing", q, st, t0.Add(time.Second))
	save(st)
	q.Diverged = map[string]gtid.Set{"c": gtid.MustParse(gtid.MySQL, u1+":101-103")}
	q.Recloning = map[string]sitepair.Reclone{"c": {Donor: "b", Epoch: 12, At: t0.Add(time.Minute), By: "dave", Failed: "clone plugin: donor refused the connection"}}
	q.FailoverHistory = []time.Time{t0.Add(-24 * time.Hour)}
	st = fromPersisted("billing", q, st, t0.Add(time.Minute))
	save(st)
}

// The state file of the previous release loads, and saving what was
// loaded writes the same bytes: nothing is lost or reshaped.
func TestStateFixtureReloadsAndResavesIdentically(t *testing.T) {
	want, err := os.ReadFile(stateFixture)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clock := func() time.Time { return fixtureSavedAt }
	old, err := store.OpenFile(stateFixture, clock)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state.json")
	resaved, err := store.OpenFile(path, clock)
	if err != nil {
		t.Fatal(err)
	}
	for group, flavor := range fixtureGroups {
		st, err := old.Load(ctx, group)
		if err != nil || !st.Exists {
			t.Fatalf("load %s: exists %v, %v", group, st.Exists, err)
		}
		out, err := reload(st, flavor)
		if err != nil {
			t.Fatalf("load %s: %v", group, err)
		}
		out.UpdatedBy = fixtureSavedBy
		if err := resaved.Save(ctx, out); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("re-saved state differs from %s:\n%s", stateFixture, got)
	}
}

// reload converts a loaded state into the daemon's form and back, as a
// load followed by a save that changes nothing.
func reload(st store.GroupState, flavor gtid.Flavor) (store.GroupState, error) {
	p, err := toPersisted(st, flavor)
	if err != nil {
		return store.GroupState{}, err
	}
	return fromPersisted(st.Group, p, st, fixtureSavedAt), nil
}
