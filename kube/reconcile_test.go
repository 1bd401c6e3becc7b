package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A re-run against the view already followed changes nothing and says so;
// a selector edited by hand is reported and put back; a user's label and
// annotation on the Service survive both the failover and the repair.
func TestServiceFollowerReconcileRepairsDrift(t *testing.T) {
	svc := service("mysql", map[string]string{"app": "mysql", "site": "east"}, map[string]string{"note": "keep"})
	svc.Labels = map[string]string{"team": "db"}
	c, fa, _ := fakeClusters([]runtime.Object{svc}, []runtime.Object{service("mysql", nil, nil)})
	f := NewServiceFollower(testGroup(), c, nil)
	ctx := context.Background()
	if changed, err := f.Reconcile(ctx, viewOf(2, "west")); err != nil || len(changed) != 2 {
		t.Fatalf("failover: changed %v, err %v; want both Services", changed, err)
	}
	if changed, err := f.Reconcile(ctx, viewOf(2, "west")); err != nil || len(changed) != 0 {
		t.Fatalf("re-run: changed %v, err %v; want nothing", changed, err)
	}
	edited := getService(t, fa, "mysql")
	edited.Spec.Selector = map[string]string{"app": "mysql", "site": "east"}
	if _, err := fa.CoreV1().Services("db").Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed, err := f.Reconcile(ctx, viewOf(2, "west"))
	if err != nil || len(changed) != 1 {
		t.Fatalf("after a hand edit: changed %v, err %v; want cluster a's Service", changed, err)
	}
	got := getService(t, fa, "mysql")
	if got.Spec.Selector[NoPrimarySelectorKey] != "orders" || len(got.Spec.Selector) != 1 {
		t.Fatalf("selector %v, want no-primary", got.Spec.Selector)
	}
	if got.Labels["team"] != "db" || got.Annotations["note"] != "keep" {
		t.Fatalf("user metadata lost: labels %v annotations %v", got.Labels, got.Annotations)
	}
	if !slices.ContainsFunc(got.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == FieldManager && m.Operation == metav1.ManagedFieldsOperationApply
	}) {
		t.Fatalf("no apply by field manager %s: %+v", FieldManager, got.ManagedFields)
	}
}

// A standby taint removed by hand is reported and put back.
func TestTaintFollowerReconcileRepairsDrift(t *testing.T) {
	f, cs := taintClusters(node("e1", map[string]string{"zone": "east"}, gpu), node("w1", map[string]string{"zone": "west"}))
	ctx := context.Background()
	if _, err := f.Reconcile(ctx, viewOf(3, "east")); err != nil {
		t.Fatal(err)
	}
	if changed, err := f.Reconcile(ctx, viewOf(3, "east")); err != nil || len(changed) != 0 {
		t.Fatalf("re-run: changed %v, err %v; want nothing", changed, err)
	}
	w1 := getNode(t, cs, "w1")
	w1.Spec.Taints = nil
	if _, err := cs.CoreV1().Nodes().Update(ctx, w1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed, err := f.Reconcile(ctx, viewOf(3, "east"))
	if err != nil || !slices.Equal(changed, []string{"node a/w1 taint added"}) {
		t.Fatalf("after a hand edit: changed %v, err %v", changed, err)
	}
	if !hasOurs(getNode(t, cs, "w1")) || !slices.Contains(getNode(t, cs, "e1").Spec.Taints, gpu) {
		t.Fatalf("taints w1 %v e1 %v", getNode(t, cs, "w1").Spec.Taints, getNode(t, cs, "e1").Spec.Taints)
	}
}

func TestUnreachable(t *testing.T) {
	gr := schema.GroupResource{Resource: "services"}
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:1", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("set service: get: %w", refused), true},
		{errors.Join(errors.New("other"), fmt.Errorf("get: %w", context.DeadlineExceeded)), true},
		{apierrors.NewServiceUnavailable("etcd down"), true},
		{apierrors.NewTimeoutError("slow", 1), true},
		{apierrors.NewNotFound(gr, "mysql"), false},
		{apierrors.NewForbidden(gr, "mysql", errors.New("rbac")), false},
		{fmt.Errorf("service: %w", ErrStaleEpoch), false},
	} {
		if got := Unreachable(tc.err); got != tc.want {
			t.Errorf("Unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
