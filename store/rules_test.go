package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

// withInFlight is sample with the in-flight action id at step (nil for "").
func withInFlight(group string, epoch uint64, id, step string) GroupState {
	st := sample(group, epoch)
	if id == "" {
		st.InFlight = nil
		return st
	}
	st.InFlight.ID, st.InFlight.Step = id, step
	return st
}

// backends returns a fresh instance of every backend (the ConfigMap on a
// fake clientset: the compare-and-swap itself is tested on a real API server).
func backends(t *testing.T) map[string]Store {
	t.Helper()
	f, err := OpenFile(filepath.Join(t.TempDir(), "state.json"), fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Store{
		"file":      f,
		"configmap": NewConfigMap(fake.NewClientset(), "failoverd", "failoverd-state", fixedNow),
	}
}

// writeRule is one case of checkWrite's rules: tc.stored is saved, then
// tc.next, which is accepted (want nil) or refused with want.
type writeRule struct {
	name   string
	stored GroupState
	next   GroupState
	want   error
}

// writeRules are the write rules of checkWrite, the same for every backend:
// the epoch only grows, and at the stored epoch only the stored in-flight
// action may be advanced.
func writeRules() []writeRule {
	return []writeRule{
		{"higher epoch", withInFlight("orders", 5, "", ""), withInFlight("orders", 6, "", ""), nil},
		{"lower epoch", withInFlight("orders", 5, "", ""), withInFlight("orders", 4, "", ""), ErrEpochRegression},
		{"same epoch, no action stored", withInFlight("orders", 5, "", ""), withInFlight("orders", 5, "", ""), nil},
		{"same epoch, action starts", withInFlight("orders", 5, "", ""), withInFlight("orders", 5, "f1", "fence"), nil},
		{"same epoch, same action advanced", withInFlight("orders", 5, "f1", "fence"), withInFlight("orders", 5, "f1", "drain"), nil},
		{"same epoch, another action", withInFlight("orders", 5, "f1", "fence"), withInFlight("orders", 5, "f2", "fence"), ErrInFlightMismatch},
		{"same epoch, action dropped", withInFlight("orders", 5, "f1", "fence"), withInFlight("orders", 5, "", ""), ErrInFlightMismatch},
		{"higher epoch, action completed", withInFlight("orders", 5, "f1", "promote"), withInFlight("orders", 6, "", ""), nil},
		{"higher epoch, another action", withInFlight("orders", 5, "f1", "fence"), withInFlight("orders", 6, "f2", "fence"), nil},
		{"lower epoch, same action", withInFlight("orders", 5, "f1", "fence"), withInFlight("orders", 4, "f1", "drain"), ErrEpochRegression},
	}
}

// checkWriteRule saves tc.stored then tc.next through s and checks the
// outcome, and what check then loads: the next state, or the stored one
// when the save was refused.
func checkWriteRule(ctx context.Context, t *testing.T, s, check Store, tc writeRule) {
	t.Helper()
	if err := s.Save(ctx, tc.stored); err != nil {
		t.Fatal(err)
	}
	err := s.Save(ctx, tc.next)
	if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
		t.Fatalf("Save: %v, want %v", err, tc.want)
	}
	want := tc.next
	if err != nil {
		want = tc.stored // a refused save changes nothing
	}
	got := mustLoad(ctx, t, check, "orders")
	if got.Epoch != want.Epoch || (got.InFlight == nil) != (want.InFlight == nil) ||
		(got.InFlight != nil && (got.InFlight.ID != want.InFlight.ID || got.InFlight.Step != want.InFlight.Step)) {
		t.Fatalf("stored %+v (in flight %+v), want epoch %d in flight %+v", got, got.InFlight, want.Epoch, want.InFlight)
	}
}

// mustLoad loads group from s, failing the test on an error.
func mustLoad(ctx context.Context, t *testing.T, s Store, group string) GroupState {
	t.Helper()
	st, err := s.Load(ctx, group)
	if err != nil {
		t.Fatalf("load %s: %v", group, err)
	}
	return st
}

func TestWriteRules(t *testing.T) {
	for _, tc := range writeRules() {
		for name, s := range backends(t) {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				ctx := context.Background()
				mustLoad(ctx, t, s, "orders")
				checkWriteRule(ctx, t, s, s, tc)
			})
		}
	}
}

// The store compares the next write with what it stored, not with a value
// the caller may change afterwards.
func TestCallerChangesDoNotReachTheStore(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := withInFlight("orders", 5, "f1", "fence")
			if err := s.Save(ctx, st); err != nil {
				t.Fatal(err)
			}
			st.InFlight.ID = "f2" // the caller reuses its value
			loaded, err := s.Load(ctx, "orders")
			if err != nil {
				t.Fatal(err)
			}
			loaded.InFlight.ID = "f2"
			if err := s.Save(ctx, withInFlight("orders", 5, "f2", "fence")); !errors.Is(err, ErrInFlightMismatch) {
				t.Fatalf("Save of another action: %v, want ErrInFlightMismatch", err)
			}
		})
	}
}
