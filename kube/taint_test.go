package kube

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

var (
	notReady = corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
	gpu      = corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoExecute}
	ours     = corev1.Taint{Key: TaintStandby, Value: "orders", Effect: corev1.TaintEffectNoSchedule}
	theirs   = corev1.Taint{Key: TaintStandby, Value: "billing", Effect: corev1.TaintEffectNoSchedule}
	// oursOtherEffect has our key with another effect: not ours to manage.
	oursOtherEffect = corev1.Taint{Key: TaintStandby, Value: "orders", Effect: corev1.TaintEffectPreferNoSchedule}
)

func TestStandbyTaints(t *testing.T) {
	tests := []struct {
		name        string
		in          []corev1.Taint
		add         bool
		want        []corev1.Taint
		wantChanged bool
	}{
		{"add to none", nil, true, []corev1.Taint{ours}, true},
		{"add keeps others in order", []corev1.Taint{notReady, gpu}, true, []corev1.Taint{notReady, gpu, ours}, true},
		{"add when present", []corev1.Taint{notReady, ours}, true, []corev1.Taint{notReady, ours}, false},
		{"add beside other effect", []corev1.Taint{oursOtherEffect}, true, []corev1.Taint{oursOtherEffect, ours}, true},
		{"another group's standby stays", []corev1.Taint{theirs}, true, []corev1.Taint{theirs}, false},
		{"remove keeps others in order", []corev1.Taint{notReady, ours, gpu}, false, []corev1.Taint{notReady, gpu}, true},
		{"remove when absent", []corev1.Taint{notReady}, false, []corev1.Taint{notReady}, false},
		{"remove leaves another group's", []corev1.Taint{theirs, gpu}, false, []corev1.Taint{theirs, gpu}, false},
		{"remove leaves other effect", []corev1.Taint{oursOtherEffect}, false, []corev1.Taint{oursOtherEffect}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			got, changed := standbyTaints(in, "orders", tc.add)
			if !slices.Equal(got, tc.want) || changed != tc.wantChanged {
				t.Fatalf("standbyTaints(%v, add=%v) = %v, %v; want %v, %v", tc.in, tc.add, got, changed, tc.want, tc.wantChanged)
			}
			if !slices.Equal(in, tc.in) {
				t.Fatalf("input modified: %v", in)
			}
		})
	}
}

// taintClusters places east's and west's nodes in one cluster, so one fake
// shows both sides of a failover.
func taintClusters(objs ...runtime.Object) (*TaintFollower, *fake.Clientset) {
	g := testGroup()
	g.Sites[1].Kubernetes.Cluster = "a"
	c, fa, _ := fakeClusters(objs, nil)
	return NewTaintFollower(g, c, nil), fa
}

func hasOurs(n *corev1.Node) bool { return slices.Contains(n.Spec.Taints, ours) }

func TestTaintFollowerFailoverAndBack(t *testing.T) {
	f, cs := taintClusters(
		node("e1", map[string]string{"zone": "east"}, notReady, gpu),
		node("e2", map[string]string{"zone": "east"}),
		node("w1", map[string]string{"zone": "west"}, notReady),
		node("x1", map[string]string{"zone": "north"}),
	)
	steps := []struct {
		view    uint64
		active  string
		tainted []string
	}{
		{1, "east", []string{"w1"}},
		{2, "west", []string{"e1", "e2"}},
		{3, "dr", []string{"e1", "e2", "w1"}}, // dr has no nodes: every other site loses
		{4, "east", []string{"w1"}},
	}
	for _, s := range steps {
		if err := f.Follow(context.Background(), viewOf(s.view, s.active)); err != nil {
			t.Fatalf("epoch %d: Follow: %v", s.view, err)
		}
		for _, name := range []string{"e1", "e2", "w1", "x1"} {
			n := getNode(t, cs, name)
			if want := slices.Contains(s.tainted, name); hasOurs(n) != want {
				t.Errorf("epoch %d (active %s): node %s taints %v, want standby=%v", s.view, s.active, name, n.Spec.Taints, want)
			}
		}
		if e1 := getNode(t, cs, "e1").Spec.Taints; !slices.Contains(e1, notReady) || !slices.Contains(e1, gpu) {
			t.Fatalf("epoch %d: other taints of e1 lost: %v", s.view, e1)
		}
		if w1 := getNode(t, cs, "w1").Spec.Taints; !slices.Contains(w1, notReady) {
			t.Fatalf("epoch %d: not-ready taint of w1 lost: %v", s.view, w1)
		}
	}
	if x1 := getNode(t, cs, "x1"); len(x1.Annotations) != 0 || len(x1.Spec.Taints) != 0 {
		t.Fatalf("node of no site was touched: %v %v", x1.Annotations, x1.Spec.Taints)
	}
	if got := getNode(t, cs, "e2").Annotations[NodeEpochAnnotationPrefix+"orders"]; got != "4" {
		t.Fatalf("e2 epoch annotation %q, want 4", got)
	}
}

// A node matched by the active site and a losing site stays untainted.
func TestTaintFollowerActiveWinsOverlap(t *testing.T) {
	f, cs := taintClusters(node("both", map[string]string{"zone": "east"}, ours))
	f.sites[1].selector = f.sites[0].selector // west selects east's nodes too
	for i, active := range []string{"east", "west"} {
		if err := f.Follow(context.Background(), viewOf(uint64(i+1), active)); err != nil {
			t.Fatalf("Follow: %v", err)
		}
		if n := getNode(t, cs, "both"); hasOurs(n) {
			t.Fatalf("active %s: node of the active site tainted: %v", active, n.Spec.Taints)
		}
	}
}

func TestTaintFollowerStaleEpoch(t *testing.T) {
	newer := node("e1", map[string]string{"zone": "east"})
	newer.Annotations = map[string]string{NodeEpochAnnotationPrefix + "orders": "9"}
	// billing's epoch says nothing about ours.
	other := node("w1", map[string]string{"zone": "west"})
	other.Annotations = map[string]string{NodeEpochAnnotationPrefix + "billing": "99"}
	f, cs := taintClusters(newer, other)
	err := f.Follow(context.Background(), viewOf(3, "west"))
	if !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("Follow = %v, want ErrStaleEpoch", err)
	}
	if n := getNode(t, cs, "e1"); hasOurs(n) || n.Annotations[NodeEpochAnnotationPrefix+"orders"] != "9" {
		t.Fatalf("stale view changed e1: %v %v", n.Spec.Taints, n.Annotations)
	}
	// The other node was still set (west active: untainted, epoch stamped).
	if n := getNode(t, cs, "w1"); n.Annotations[NodeEpochAnnotationPrefix+"orders"] != "3" {
		t.Fatalf("w1 not stamped: %v", n.Annotations)
	}
}

func TestTaintFollowerIdempotent(t *testing.T) {
	f, cs := taintClusters(node("e1", map[string]string{"zone": "east"}), node("w1", map[string]string{"zone": "west"}, notReady))
	for i := range 2 {
		if err := f.Follow(context.Background(), viewOf(5, "east")); err != nil {
			t.Fatalf("Follow #%d: %v", i+1, err)
		}
	}
	if n := writes(cs); n != 2 {
		t.Fatalf("writes = %d over two identical follows, want 2 (one per node): %v", n, cs.Actions())
	}
}

func TestTaintFollowerRetriesConflict(t *testing.T) {
	f, cs := taintClusters(node("w1", map[string]string{"zone": "west"}, notReady))
	calls := failFirstUpdates(cs, "nodes", 1)
	if err := f.Follow(context.Background(), viewOf(1, "east")); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	if *calls != 2 {
		t.Fatalf("updates = %d, want a conflict then a success", *calls)
	}
	if n := getNode(t, cs, "w1"); !hasOurs(n) || !slices.Contains(n.Spec.Taints, notReady) {
		t.Fatalf("w1 taints %v", n.Spec.Taints)
	}
}

// A site without a nodeSelector is never tainted: its empty selector would
// match every node of the cluster.
func TestTaintFollowerSkipsSiteWithoutNodeSelector(t *testing.T) {
	g := testGroup()
	g.Sites[1].Kubernetes.Cluster = "a"
	g.Sites[1].Kubernetes.NodeSelector = nil
	c, cs, _ := fakeClusters([]runtime.Object{node("e1", map[string]string{"zone": "east"}), node("any", nil)}, nil)
	if err := NewTaintFollower(g, c, nil).Follow(context.Background(), viewOf(1, "east")); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	if n := getNode(t, cs, "any"); len(n.Spec.Taints) != 0 || len(n.Annotations) != 0 {
		t.Fatalf("node of no site touched: %v %v", n.Spec.Taints, n.Annotations)
	}
}
