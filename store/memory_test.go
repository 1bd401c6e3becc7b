package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The memory store keeps the durable stores' write rules and returns what
// it was given, through the same encoding.
func TestMemoryRoundTripAndRules(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewMemory(func() time.Time { return t0 })
	st, err := m.Load(ctx, "g")
	if err != nil || st.Exists || st.Group != "g" {
		t.Fatalf("empty load: %+v %v", st, err)
	}
	in := GroupState{Group: "g", Epoch: 3, ActiveSite: "a", Diverged: map[string]string{"b": "x:1"},
		InFlight: &InFlight{ID: "f1", From: "a", To: "b", Step: "revoked", StartedAt: t0}}
	if err := m.Save(ctx, in); err != nil {
		t.Fatal(err)
	}
	in.Diverged["b"] = "changed after the save"
	got, err := m.Load(ctx, "g")
	if err != nil || !got.Exists || got.Epoch != 3 || got.Diverged["b"] != "x:1" || got.InFlight.ID != "f1" || !got.UpdatedAt.Equal(t0) {
		t.Fatalf("load after save: %+v %v", got, err)
	}
	if err := m.Save(ctx, GroupState{Group: "g", Epoch: 2}); !errors.Is(err, ErrEpochRegression) {
		t.Fatalf("smaller epoch: %v", err)
	}
	if err := m.Save(ctx, GroupState{Group: "g", Epoch: 3}); !errors.Is(err, ErrInFlightMismatch) {
		t.Fatalf("dropping the in-flight action at the same epoch: %v", err)
	}
	if after, _ := m.Load(ctx, "g"); after.Epoch != 3 || after.InFlight == nil {
		t.Fatalf("a refused save changed the state: %+v", after)
	}
}
