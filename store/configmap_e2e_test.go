package store

import (
	"context"
	"errors"
	"testing"

	"github.com/failoverd/failoverd/test/testenv"
)

// Against a real kube-apiserver: two writers of the same ConfigMap, the one
// holding a stale resourceVersion gets ErrConflict instead of overwriting.
func TestConfigMapOptimisticConcurrencyOnRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	ctx := context.Background()
	k := testenv.StartKube(t, testenv.KubeOptions{})
	client := k.Clientset(t)
	a := NewConfigMap(client, "default", "failoverd-state", fixedNow)
	b := NewConfigMap(client, "default", "failoverd-state", fixedNow)
	if err := a.Save(ctx, sample("orders", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Load(ctx, "orders"); err != nil { // b caches version 1
		t.Fatal(err)
	}
	if err := a.Save(ctx, sample("orders", 2)); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(ctx, sample("orders", 3)); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale writer: %v, want ErrConflict", err)
	}
	st, err := b.Load(ctx, "orders") // re-read, then the save goes through
	if err != nil || st.Epoch != 2 {
		t.Fatalf("reload: %+v, %v", st, err)
	}
	if err := b.Save(ctx, sample("orders", 3)); err != nil {
		t.Fatalf("save after reload: %v", err)
	}
	if st, _ := a.Load(ctx, "orders"); st.Epoch != 3 {
		t.Fatalf("epoch %d, want 3", st.Epoch)
	}
}
