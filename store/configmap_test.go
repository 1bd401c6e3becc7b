package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestConfigMapRoundTrip(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	s := NewConfigMap(client, "failoverd", "failoverd-state", fixedNow)
	if st, err := s.Load(ctx, "orders"); err != nil || st.Exists {
		t.Fatalf("Load before any save = %+v, %v", st, err)
	}
	if err := s.Save(ctx, sample("orders", 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, sample("payments", 9)); err != nil {
		t.Fatal(err)
	}
	other := NewConfigMap(client, "failoverd", "failoverd-state", fixedNow)
	st, err := other.Load(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Exists || st.Epoch != 3 || st.InFlight.Step != "fence" {
		t.Fatalf("reloaded %+v", st)
	}
	if err := other.Save(ctx, sample("orders", 2)); !errors.Is(err, ErrEpochRegression) {
		t.Fatalf("lower epoch: %v, want ErrEpochRegression", err)
	}
}

func TestConfigMapCorruptKey(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "st", Namespace: "ns"},
		Data:       map[string]string{"orders.json": "{broken"},
	})
	_, err := NewConfigMap(client, "ns", "st", fixedNow).Load(ctx, "orders")
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "configmap ns/st key orders.json") {
		t.Fatalf("Load: %v, want ErrCorrupt naming the key", err)
	}
}
