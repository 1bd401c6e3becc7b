package store

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The golden records in testdata were written by the schema 1 code itself
// (store.go, file.go and configmap.go of commit cfb3f37, the last before
// schema 2), not typed by hand: its File store's whole document
// (schema1-file.json) and its ConfigMap store's key documents
// (schema1-key-<group>.json), the same document the etcd and memory stores
// keep. Never regenerate them with the current code: they are what a
// release using schema 1 left on disk.

// schema1Time parses a golden record's time.
func schema1Time(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// schema1Want is what the golden records hold, field by field: a failover
// in flight (orders, MariaDB GTIDs) and a halted group with an operator
// fence (payments, MySQL GTIDs), every schema 1 field set in one of them.
func schema1Want(t *testing.T) map[string]GroupState {
	at := func(s string) time.Time { return schema1Time(t, s) }
	saved := at("2026-11-23T15:00:00Z")
	return map[string]GroupState{
		"orders": {
			Group: "orders", Exists: true, Epoch: 9, ActiveSite: "",
			LastFailover: &Failover{Kind: "switchover", From: "east", To: "west", At: at("2026-11-23T09:30:02Z"), Epoch: 7, PromotionGTID: "0-1-1200,1-2-17"},
			History:      []time.Time{at("2026-11-22T18:04:11Z"), at("2026-11-23T14:59:58Z")},
			Diverged:     map[string]string{"dr": "0-3-5"},
			InFlight: &InFlight{ID: "orders-9", Kind: "failover", From: "west", To: "east", Step: "published", StepDone: true,
				StartedAt: at("2026-11-23T14:59:58Z"), RevokedAt: at("2026-11-23T14:59:58.5Z"), RevokedEpoch: 8,
				PromotionGTID: "0-1-1200,0-2-3411,1-2-17", PublishedEpoch: 9, PublishedTo: "east"},
			UpdatedAt: saved,
		},
		"payments": {
			Group: "payments", Exists: true, Epoch: 4, ActiveSite: "east",
			LastFailover: &Failover{Kind: "failover", From: "west", To: "east", At: at("2026-11-22T21:15:40Z"), Epoch: 4,
				PromotionGTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5170"},
			History:        []time.Time{at("2026-11-22T21:15:37Z")},
			Halted:         true,
			HaltedReason:   "escalation: 3 failovers within 1h",
			OperatorFenced: []string{"west"},
			UpdatedAt:      saved,
		},
	}
}

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Version int }
	if err := json.Unmarshal(b, &doc); err != nil || doc.Version != 1 {
		t.Fatalf("%s: schema version %d (%v), want a schema 1 record", name, doc.Version, err)
	}
	return b
}

// advance is the next write a daemon makes over a loaded schema 1 state:
// the failover in flight reaches its next step and gets a schema 2 field.
func advance(st GroupState) GroupState {
	st.Audit = AppendAudit(st.Audit, AuditEntry{At: t0, Action: AuditAcknowledge, By: "alice", Result: AuditAccepted})
	if st.InFlight != nil {
		f := *st.InFlight
		f.Step, f.StepDone = "writable", true
		st.InFlight = &f
	}
	return st
}

// TestSchema1GoldenRecordsLoad: records the previous state schema's own
// code wrote still load, field for field, through every decoder (the file
// document; the key document of the ConfigMap, memory and etcd stores), and
// the next save over them works. Guards an upgrade against a daemon that
// refuses, or silently misreads (epoch, failover in flight, halt), the
// state its predecessor left.
func TestSchema1GoldenRecordsLoad(t *testing.T) {
	ctx := context.Background()
	want := schema1Want(t)
	check := func(t *testing.T, s Store, group string) {
		t.Helper()
		got, err := s.Load(ctx, group)
		if err != nil {
			t.Fatalf("load %s: %v", group, err)
		}
		if !reflect.DeepEqual(got, want[group]) {
			t.Fatalf("loaded %s\n%+v\nwant\n%+v", group, got, want[group])
		}
		next := advance(got)
		if err := s.Save(ctx, next); err != nil {
			t.Fatalf("save over the schema 1 %s: %v", group, err)
		}
		again, err := s.Load(ctx, group)
		if err != nil || len(again.Audit) != 1 || again.Epoch != want[group].Epoch || !reflect.DeepEqual(again.InFlight, next.InFlight) {
			t.Fatalf("reloaded %s after the save: %+v, %v", group, again, err)
		}
	}

	t.Run("file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.json")
		if err := os.WriteFile(path, readGolden(t, "schema1-file.json"), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := OpenFile(path, fixedNow)
		if err != nil {
			t.Fatalf("open a schema 1 file: %v", err)
		}
		for _, g := range []string{"orders", "payments"} {
			check(t, f, g)
		}
		var doc struct{ Version int }
		b, _ := os.ReadFile(path)
		if err := json.Unmarshal(b, &doc); err != nil || doc.Version != SchemaVersion {
			t.Fatalf("rewritten as schema %d (%v), want %d", doc.Version, err, SchemaVersion)
		}
	})

	keys := map[string][]byte{}
	for _, g := range []string{"orders", "payments"} {
		keys[g] = readGolden(t, "schema1-key-"+g+".json")
	}
	t.Run("configmap", func(t *testing.T) {
		data := map[string]string{}
		for g, raw := range keys {
			data[g+configMapKeySuffix] = string(raw)
		}
		client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "failoverd-state", Namespace: "failoverd"}, Data: data})
		s := NewConfigMap(client, "failoverd", "failoverd-state", fixedNow)
		for _, g := range []string{"orders", "payments"} {
			check(t, s, g)
		}
	})
	t.Run("memory", func(t *testing.T) {
		m := NewMemory(fixedNow)
		for g, raw := range keys {
			m.groups[g] = raw
		}
		for _, g := range []string{"orders", "payments"} {
			check(t, m, g)
		}
	})
	t.Run("etcd decode", func(t *testing.T) {
		// The etcd store's decoding of a key's value, without a server.
		e := NewEtcd(clientv3.NewCtxClient(ctx), "/failoverd", fixedNow)
		for g, raw := range keys {
			got, err := e.decode(raw, g, 42)
			if err != nil {
				t.Fatalf("decode %s: %v", g, err)
			}
			w := want[g]
			w.Exists = false // set by Load, not by the decoder
			if !reflect.DeepEqual(*got, w) {
				t.Fatalf("decoded %s\n%+v\nwant\n%+v", g, *got, w)
			}
		}
	})
}
