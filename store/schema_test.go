package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// withSchema2 is sample with every field schema version 2 added.
func withSchema2(group string, epoch uint64) GroupState {
	st := sample(group, epoch)
	conf := &FenceConfirmation{Site: "west", Epoch: epoch - 1, At: t0.Add(-time.Minute), By: "alice"}
	st.LastFailover.Proof = "operator-confirmed"
	st.LastFailover.FenceConfirmation = conf
	st.InFlight.FenceConfirmation = &FenceConfirmation{Site: "east", Epoch: epoch, At: t0, By: "bob"}
	st.DivergedCount = map[string]uint64{"west": 1}
	st.Pause = &Pause{Since: t0, Until: t0.Add(time.Hour), By: "dave", Reason: "kernel upgrade"}
	st.Holds = map[string]Hold{"west": {Kind: "maintenance", Since: t0, Until: t0.Add(time.Hour), By: "erin", Reason: "disk swap"}}
	st.GroupReplication = &GroupReplication{MaxViewSize: 5}
	st.InFlight.AllowDROnly = true
	st.Audit = []AuditEntry{
		{At: t0.Add(-time.Hour), Action: AuditSwitchover, Site: "east", By: "carol", Result: AuditAccepted},
		{At: t0, Action: AuditConfirmFence, Site: "east", By: "bob", Result: AuditAccepted},
		{At: t0, Action: AuditAcknowledge, By: "bob", Result: "refused: this daemon is not the leader"},
	}
	// The failover history, added within version 2.
	st.InFlight.Timeline = []TimelineStep{{Step: "detected", At: t0.Add(-time.Second)}, {Step: "revoked", At: t0}}
	st.InFlight.By, st.InFlight.Reason = "carol", "switchover"
	st.Failovers = []FailoverRecord{
		{ID: "orders-5", Kind: "switchover", From: "east", To: "west", RevokedEpoch: 5, Epoch: 6, Reason: "switchover", By: "carol",
			Outcome: OutcomeCompleted, EndedAt: t0.Add(-time.Hour), Proof: "operator-confirmed", FenceConfirmation: conf, PromotionGTID: "0-1-42",
			Timeline: []TimelineStep{{Step: "requested", At: t0.Add(-2 * time.Hour)}, {Step: "promoted", At: t0.Add(-time.Hour)}}},
		{ID: "orders-3", Kind: "failover", From: "west", To: "east", RevokedEpoch: 3, Epoch: 4, Outcome: OutcomeAbandoned,
			EndedAt: t0.Add(-3 * time.Hour), Why: "target-lost: east was lost"},
	}
	return st
}

// Every field of schema version 2 survives a save and a load by another
// instance, in both backends.
func TestSchema2FieldsRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.json")
	f, err := OpenFile(path, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	for name, pair := range map[string][2]func() (Store, error){
		"file": {
			func() (Store, error) { return f, nil },
			func() (Store, error) { return OpenFile(path, fixedNow) },
		},
		"configmap": {
			func() (Store, error) { return NewConfigMap(client, "failoverd", "state", fixedNow), nil },
			func() (Store, error) { return NewConfigMap(client, "failoverd", "state", fixedNow), nil },
		},
	} {
		t.Run(name, func(t *testing.T) {
			w, err := pair[0]()
			if err != nil {
				t.Fatal(err)
			}
			want := withSchema2("orders", 7)
			if err := w.Save(ctx, want); err != nil {
				t.Fatal(err)
			}
			r, err := pair[1]()
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Load(ctx, "orders")
			if err != nil {
				t.Fatal(err)
			}
			want.Exists, want.UpdatedAt = true, t0
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("reloaded\n%+v\nwant\n%+v", got, want)
			}
		})
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Version int }
	if err := json.Unmarshal(b, &doc); err != nil || doc.Version != SchemaVersion || SchemaVersion != 2 {
		t.Fatalf("written version %d (%v), want %d = 2", doc.Version, err, SchemaVersion)
	}
}

// v1Group is a group's state as failoverd wrote it before schema version 2:
// no proof, no confirmation, no audit.
const v1Group = `{
  "group": "orders", "epoch": 7, "activeSite": "east",
  "lastFailover": {"kind": "failover", "from": "west", "to": "east", "at": "2026-11-22T12:00:00Z", "epoch": 6, "promotionGTID": "0-1-42"},
  "history": ["2026-11-22T12:00:00Z"],
  "inFlight": {"id": "orders-7", "kind": "failover", "from": "east", "to": "west", "step": "revoked", "stepDone": true,
    "startedAt": "2026-11-22T12:00:00Z", "revokedAt": "2026-11-22T12:00:00Z", "revokedEpoch": 7},
  "updatedAt": "2026-11-22T12:00:00Z"
}`

// A document written by a schema version 1 failoverd still loads, in both
// backends: the new fields are simply absent, and the next save works.
func TestSchema1DocumentsStillLoad(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte(`{"version": 1, "groups": {"orders": `+v1Group+`}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(path, fixedNow)
	if err != nil {
		t.Fatalf("open a version 1 file: %v", err)
	}
	client := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "state", Namespace: "failoverd"},
		Data:       map[string]string{"orders.json": `{"version": 1, "state": ` + v1Group + `}`},
	})
	for name, s := range map[string]Store{"file": f, "configmap": NewConfigMap(client, "failoverd", "state", fixedNow)} {
		t.Run(name, func(t *testing.T) {
			st, err := s.Load(ctx, "orders")
			if err != nil {
				t.Fatalf("load a version 1 state: %v", err)
			}
			if !st.Exists || st.Epoch != 7 || st.LastFailover == nil || st.LastFailover.PromotionGTID != "0-1-42" ||
				st.LastFailover.Proof != "" || st.LastFailover.FenceConfirmation != nil ||
				st.InFlight == nil || st.InFlight.ID != "orders-7" || st.InFlight.FenceConfirmation != nil || st.Audit != nil || st.DivergedCount != nil ||
				st.Failovers != nil || st.InFlight.Timeline != nil || st.GroupReplication != nil {
				t.Fatalf("loaded %+v (last %+v, in flight %+v)", st, st.LastFailover, st.InFlight)
			}
			// The same action advanced at the same epoch, now with a
			// confirmation and an audit entry.
			st.InFlight.FenceConfirmation = &FenceConfirmation{Site: "east", Epoch: 7, At: t0, By: "alice"}
			st.Audit = AppendAudit(st.Audit, AuditEntry{At: t0, Action: AuditConfirmFence, Site: "east", By: "alice", Result: AuditAccepted})
			if err := s.Save(ctx, st); err != nil {
				t.Fatalf("save over a version 1 state: %v", err)
			}
			again, err := s.Load(ctx, "orders")
			if err != nil || again.InFlight.FenceConfirmation == nil || len(again.Audit) != 1 {
				t.Fatalf("reloaded %+v, %v", again, err)
			}
		})
	}
}

func TestAppendAuditKeepsTheNewestMaxAudit(t *testing.T) {
	var audit []AuditEntry
	for i := range MaxAudit + 7 {
		audit = AppendAudit(audit, AuditEntry{At: t0.Add(time.Duration(i) * time.Second), Action: AuditSwitchover, Result: fmt.Sprint(i)})
	}
	if len(audit) != MaxAudit || audit[0].Result != "7" || audit[MaxAudit-1].Result != fmt.Sprint(MaxAudit+6) {
		t.Fatalf("%d entries from %q to %q, want %d from 7 to %d", len(audit), audit[0].Result, audit[len(audit)-1].Result, MaxAudit, MaxAudit+6)
	}
	// Never writes into the caller's backing array (a slice with spare
	// capacity, as one handed out by a store may have).
	base := make([]AuditEntry, 1, 4)
	base[0].Result = "first"
	a := AppendAudit(base, AuditEntry{Result: "a"})
	b := AppendAudit(base, AuditEntry{Result: "b"})
	if a[1].Result != "a" || b[1].Result != "b" || base[:2][1].Result != "" {
		t.Fatalf("AppendAudit shared the caller's array: a %v b %v base %v", a, b, base[:2])
	}
}

func TestAppendFailoverKeepsTheNewestMaxFailovers(t *testing.T) {
	var records []FailoverRecord
	for i := range MaxFailovers + 3 {
		records = AppendFailover(records, FailoverRecord{ID: fmt.Sprint(i)})
	}
	if len(records) != MaxFailovers || records[0].ID != "3" || records[MaxFailovers-1].ID != fmt.Sprint(MaxFailovers+2) {
		t.Fatalf("%d records from %q to %q, want %d from 3 to %d", len(records), records[0].ID, records[len(records)-1].ID, MaxFailovers, MaxFailovers+2)
	}
	// Never writes into the caller's backing array.
	base := make([]FailoverRecord, 1, 4)
	a := AppendFailover(base, FailoverRecord{ID: "a"})
	b := AppendFailover(base, FailoverRecord{ID: "b"})
	if a[1].ID != "a" || b[1].ID != "b" || base[:2][1].ID != "" {
		t.Fatalf("AppendFailover shared the caller's array: a %v b %v", a, b)
	}
}

// A state handed out by Load or given to Save is a copy down to the
// history's timelines: a caller changing it changes nothing stored.
func TestHistoryHandedOutIsACopy(t *testing.T) {
	ctx := context.Background()
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			st := withSchema2("orders", 7)
			if err := s.Save(ctx, st); err != nil {
				t.Fatal(err)
			}
			st.Failovers[0].Timeline[0].Step = "changed after Save"
			st.InFlight.Timeline[0].Step = "changed after Save"
			got := mustLoad(ctx, t, s, "orders")
			got.Failovers[0].Timeline[0].Step = "changed after Load"
			got.Failovers[0].FenceConfirmation.By = "changed after Load"
			again := mustLoad(ctx, t, s, "orders")
			if again.Failovers[0].Timeline[0].Step != "requested" || again.Failovers[0].FenceConfirmation.By != "alice" ||
				again.InFlight.Timeline[0].Step != "detected" {
				t.Fatalf("stored history changed by a caller: %+v, in flight %+v", again.Failovers[0], again.InFlight.Timeline)
			}
		})
	}
}
