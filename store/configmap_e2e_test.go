package store

import (
	"context"
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/failoverd/failoverd/test/testenv"
)

// Against a real kube-apiserver: every Save is a compare-and-swap on what the
// store last loaded or saved for the group. Each subtest uses its own
// ConfigMap; a and b are two daemons on the same object.
func TestConfigMapCompareAndSwapOnRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	k := testenv.StartKube(t, testenv.KubeOptions{})
	client := k.Clientset(t)
	pair := func(name string) (a, b *ConfigMap) {
		return NewConfigMap(client, "default", name, fixedNow), NewConfigMap(client, "default", name, fixedNow)
	}
	ctx := context.Background()
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	stored := func(t *testing.T, name, group string) GroupState {
		t.Helper()
		st, err := NewConfigMap(client, "default", name, fixedNow).Load(ctx, group)
		must(t, err)
		return st
	}

	t.Run("stale writer refused and does not overwrite", func(t *testing.T) {
		a, b := pair("stale-writer")
		must(t, a.Save(ctx, sample("orders", 1)))
		_, err := b.Load(ctx, "orders") // b's base: epoch 1
		must(t, err)
		must(t, a.Save(ctx, sample("orders", 2)))
		if err := b.Save(ctx, sample("orders", 3)); !errors.Is(err, ErrConflict) {
			t.Fatalf("stale writer: %v, want ErrConflict", err)
		}
		// The refusal does not make b's next Save blind: b has not loaded
		// the newer state, so it is refused again instead of overwriting.
		if err := b.Save(ctx, sample("orders", 3)); !errors.Is(err, ErrConflict) {
			t.Fatalf("second save without a load: %v, want ErrConflict", err)
		}
		if st := stored(t, "stale-writer", "orders"); st.Epoch != 2 {
			t.Fatalf("stored epoch %d after refused saves, want 2", st.Epoch)
		}
		st, err := b.Load(ctx, "orders") // decide again on the newer state
		if err != nil || st.Epoch != 2 {
			t.Fatalf("reload: %+v, %v", st, err)
		}
		must(t, b.Save(ctx, sample("orders", 3)))
		// Now a is the stale one.
		if err := a.Save(ctx, sample("orders", 4)); !errors.Is(err, ErrConflict) {
			t.Fatalf("a after b wrote: %v, want ErrConflict", err)
		}
		if st := stored(t, "stale-writer", "orders"); st.Epoch != 3 {
			t.Fatalf("epoch %d, want 3", st.Epoch)
		}
	})

	t.Run("equal epoch on a stale base refused", func(t *testing.T) {
		a, b := pair("equal-epoch-stale")
		must(t, a.Save(ctx, withInFlight("orders", 5, "f1", "fence")))
		_, err := b.Load(ctx, "orders")
		must(t, err)
		must(t, a.Save(ctx, withInFlight("orders", 5, "f1", "drain")))
		// Same epoch and action, but b never saw "drain": it would undo it.
		if err := b.Save(ctx, withInFlight("orders", 5, "f1", "promote")); !errors.Is(err, ErrConflict) {
			t.Fatalf("equal epoch on a stale base: %v, want ErrConflict", err)
		}
		if err := b.Save(ctx, withInFlight("orders", 5, "f1", "promote")); !errors.Is(err, ErrConflict) {
			t.Fatalf("equal epoch again without a load: %v, want ErrConflict", err)
		}
		if st := stored(t, "equal-epoch-stale", "orders"); st.InFlight == nil || st.InFlight.Step != "drain" {
			t.Fatalf("stored in flight %+v, want step drain", st.InFlight)
		}
	})

	t.Run("same action advanced at the same epoch", func(t *testing.T) {
		a, _ := pair("same-action")
		for _, step := range []string{"fence", "drain", "promote"} {
			must(t, a.Save(ctx, withInFlight("orders", 5, "f1", step)))
		}
		if st := stored(t, "same-action", "orders"); st.Epoch != 5 || st.InFlight == nil || st.InFlight.Step != "promote" {
			t.Fatalf("stored %+v in flight %+v, want epoch 5 step promote", st, st.InFlight)
		}
	})

	t.Run("another action at the same epoch refused", func(t *testing.T) {
		a, b := pair("other-action")
		must(t, a.Save(ctx, withInFlight("orders", 5, "f1", "fence")))
		if err := a.Save(ctx, withInFlight("orders", 5, "f2", "fence")); !errors.Is(err, ErrInFlightMismatch) {
			t.Fatalf("another action at epoch 5: %v, want ErrInFlightMismatch", err)
		}
		// Also from a second daemon with an up-to-date base.
		_, err := b.Load(ctx, "orders")
		must(t, err)
		if err := b.Save(ctx, withInFlight("orders", 5, "", "")); !errors.Is(err, ErrInFlightMismatch) {
			t.Fatalf("dropping the action at epoch 5: %v, want ErrInFlightMismatch", err)
		}
		if st := stored(t, "other-action", "orders"); st.InFlight == nil || st.InFlight.ID != "f1" {
			t.Fatalf("stored in flight %+v, want f1", st.InFlight)
		}
		must(t, b.Save(ctx, withInFlight("orders", 6, "f2", "fence"))) // a new action takes a new epoch
	})

	t.Run("another group's concurrent write does not block this group", func(t *testing.T) {
		a, b := pair("two-groups")
		_, err := a.Load(ctx, "orders") // object absent: a's base for orders is "no state"
		must(t, err)
		must(t, b.Save(ctx, sample("payments", 9))) // creates the object
		must(t, a.Save(ctx, sample("orders", 1)))   // Create conflicts; orders unchanged: retried as an update
		_, err = b.Load(ctx, "payments")
		must(t, err)
		must(t, a.Save(ctx, sample("orders", 2)))
		must(t, b.Save(ctx, sample("payments", 10))) // Update conflicts; payments unchanged: retried
		must(t, a.Save(ctx, withInFlight("orders", 2, "f1", "fence")))
		if st := stored(t, "two-groups", "orders"); st.Epoch != 2 || st.InFlight == nil || st.InFlight.ID != "f1" {
			t.Fatalf("orders %+v in flight %+v, want epoch 2 with f1", st, st.InFlight)
		}
		if st := stored(t, "two-groups", "payments"); st.Epoch != 10 {
			t.Fatalf("payments epoch %d, want 10 (a's writes kept b's key)", st.Epoch)
		}
	})

	t.Run("a version 1 key loads; the version 2 fields round-trip", func(t *testing.T) {
		// As a version 1 failoverd left it.
		_, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "schema-v1", Namespace: "default"},
			Data:       map[string]string{"orders.json": `{"version": 1, "state": ` + v1Group + `}`},
		}, metav1.CreateOptions{})
		must(t, err)
		a, b := pair("schema-v1")
		st, err := a.Load(ctx, "orders")
		must(t, err)
		if st.Epoch != 7 || st.InFlight == nil || st.InFlight.ID != "orders-7" || st.InFlight.FenceConfirmation != nil || st.Audit != nil {
			t.Fatalf("loaded %+v in flight %+v", st, st.InFlight)
		}
		// The same action advanced with a confirmation and an audit entry:
		// a compare-and-swap over the version 1 key.
		st.InFlight.FenceConfirmation = &FenceConfirmation{Site: "east", Epoch: 7, At: t0, By: "alice"}
		st.Audit = AppendAudit(st.Audit, AuditEntry{At: t0, Action: AuditConfirmFence, Site: "east", By: "alice", Result: AuditAccepted})
		must(t, a.Save(ctx, st))
		got, err := b.Load(ctx, "orders")
		must(t, err)
		st.Exists, st.UpdatedAt = true, t0
		if !reflect.DeepEqual(got, st) {
			t.Fatalf("reloaded\n%+v\nwant\n%+v", got, st)
		}
		want := withSchema2("orders", 8)
		must(t, b.Save(ctx, want))
		got = stored(t, "schema-v1", "orders")
		want.Exists, want.UpdatedAt = true, t0
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("reloaded\n%+v\nwant\n%+v", got, want)
		}
	})

	t.Run("this group changed on the retry path is a conflict", func(t *testing.T) {
		a, b := pair("group-changed")
		must(t, a.Save(ctx, sample("orders", 1)))
		_, err := b.Load(ctx, "orders")
		must(t, err)
		must(t, b.Save(ctx, sample("payments", 1))) // moves the resourceVersion
		must(t, b.Save(ctx, sample("orders", 2)))   // and changes orders
		if err := a.Save(ctx, sample("orders", 3)); !errors.Is(err, ErrConflict) {
			t.Fatalf("a on a changed group: %v, want ErrConflict", err)
		}
		if st := stored(t, "group-changed", "orders"); st.Epoch != 2 {
			t.Fatalf("orders epoch %d, want 2", st.Epoch)
		}
	})

	t.Run("a deposed leader's write over an unchanged group is refused", func(t *testing.T) {
		a, b := pair("fenced")
		valid := func() bool { return true }
		_, err := a.Claim(ctx, "a", valid)
		must(t, err)
		must(t, a.Save(ctx, sample("orders", 1)))
		_, err = b.Claim(ctx, "b", valid) // b leads now and has written nothing
		must(t, err)
		if err := a.Save(ctx, sample("orders", 2)); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("deposed leader's write: %v, want ErrNotLeader", err)
		}
		if _, err := a.Load(ctx, "orders"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("deposed leader's re-read: %v, want ErrNotLeader", err)
		}
		if st := stored(t, "fenced", "orders"); st.Epoch != 1 {
			t.Fatalf("orders epoch %d, want 1", st.Epoch)
		}
		_, err = b.Load(ctx, "orders")
		must(t, err)
		must(t, b.Save(ctx, sample("orders", 2)))
	})
}
