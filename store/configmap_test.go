package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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

// casClientset is a fake clientset whose ConfigMap writes honour the
// resourceVersion precondition as the API server does (the plain fake
// ignores it): every create or update gets a new resourceVersion, and an
// update carrying another one is refused with Conflict.
func casClientset() *fake.Clientset {
	c := fake.NewClientset()
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	var mu sync.Mutex
	rv := 0
	c.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		cm := a.(k8stesting.CreateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		rv++
		cm.ResourceVersion = strconv.Itoa(rv)
		if err := c.Tracker().Create(gvr, cm, cm.Namespace); err != nil {
			return true, nil, err
		}
		return true, cm, nil
	})
	c.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		cm := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		cur, err := c.Tracker().Get(gvr, cm.Namespace, cm.Name)
		if err != nil {
			return true, nil, err
		}
		if cur.(*corev1.ConfigMap).ResourceVersion != cm.ResourceVersion {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, cm.Name, errors.New("the object has been modified"))
		}
		rv++
		cm.ResourceVersion = strconv.Itoa(rv)
		if err := c.Tracker().Update(gvr, cm, cm.Namespace); err != nil {
			return true, nil, err
		}
		return true, cm, nil
	})
	return c
}

// A Lease leader's term is a fencing token in the ConfigMap: a new leader
// claims the next term before acting, and from then on a deposed leader's
// re-read and writes fail (ErrNotLeader) even though nobody wrote its
// group's state since it last read it, which the resourceVersion
// compare-and-swap alone lets through. A claim sent once the claimer's
// Lease may have passed is refused and changes nothing.
func TestConfigMapDeposedLeaderIsFenced(t *testing.T) {
	ctx := context.Background()
	client := casClientset()
	a := NewConfigMap(client, "failoverd", "failoverd-state", fixedNow)
	b := NewConfigMap(client, "failoverd", "failoverd-state", fixedNow)
	valid := func() bool { return true }
	ta, err := a.Claim(ctx, "daemon-a", valid)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Save(ctx, sample("orders", 1)); err != nil {
		t.Fatal(err)
	}
	// b takes the Lease and claims the next term; it writes nothing yet.
	tb, err := b.Claim(ctx, "daemon-b", valid)
	if err != nil {
		t.Fatal(err)
	}
	if tb <= ta {
		t.Fatalf("b's term %d is not after a's %d", tb, ta)
	}
	if _, err := a.Load(ctx, "orders"); !errors.Is(err, ErrNotLeader) {
		t.Errorf("deposed leader's re-read: %v, want ErrNotLeader", err)
	}
	if err := a.Save(ctx, sample("orders", 2)); !errors.Is(err, ErrNotLeader) {
		t.Errorf("deposed leader's write: %v, want ErrNotLeader", err)
	}
	st, err := b.Load(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if st.Epoch != 1 {
		t.Fatalf("stored epoch %d, want 1: the deposed leader's write went through", st.Epoch)
	}
	if err := b.Save(ctx, sample("orders", 2)); err != nil {
		t.Fatalf("the new leader's write: %v", err)
	}
	// a late claim by a, whose Lease may have passed, changes nothing.
	if _, err := a.Claim(ctx, "daemon-a", func() bool { return false }); !errors.Is(err, ErrNotLeader) {
		t.Errorf("claim past the lease: %v, want ErrNotLeader", err)
	}
	if err := b.Save(ctx, sample("orders", 3)); err != nil {
		t.Fatalf("the new leader's write after a refused claim: %v", err)
	}
	// A term that ended writes nothing.
	b.EndTerm(tb)
	if err := b.Save(ctx, sample("orders", 4)); !errors.Is(err, ErrNotLeader) {
		t.Errorf("write after the term ended: %v, want ErrNotLeader", err)
	}
}
