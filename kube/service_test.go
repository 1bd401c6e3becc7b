package kube

import (
	"context"
	"errors"
	"maps"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/failoverd/failoverd/configs"
)

var noPrimary = map[string]string{NoPrimarySelectorKey: "orders"}

func TestServiceFollowerSelector(t *testing.T) {
	eastSel := map[string]string{"app": "mysql", "site": "east"}
	westSel := map[string]string{"app": "mysql", "site": "west"}
	tests := []struct {
		name         string
		active       string
		wantA, wantB map[string]string
	}{
		{"east active: a routes to east, b to nobody", "east", eastSel, noPrimary},
		{"west active: b routes to west, a to nobody", "west", noPrimary, westSel},
		{"active site without placement: nobody anywhere", "dr", noPrimary, noPrimary},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Start from the opposite routing, with a stray selector key, to
			// prove the selector is replaced, not merged.
			stale := map[string]string{"app": "mysql", "site": "elsewhere", "stray": "x"}
			c, fa, fb := fakeClusters(
				[]runtime.Object{service("mysql", stale, nil)},
				[]runtime.Object{service("mysql", stale, nil)})
			f := NewServiceFollower(testGroup(), c, nil)
			if err := f.Follow(context.Background(), viewOf(4, tc.active)); err != nil {
				t.Fatalf("Follow: %v", err)
			}
			for cluster, want := range map[*fake.Clientset]map[string]string{fa: tc.wantA, fb: tc.wantB} {
				svc := getService(t, cluster, "mysql")
				if !maps.Equal(svc.Spec.Selector, want) {
					t.Errorf("selector = %v, want %v", svc.Spec.Selector, want)
				}
				if svc.Annotations[AnnotationEpoch] != "4" || svc.Annotations[AnnotationActiveSite] != tc.active || svc.Labels[LabelGroup] != "orders" {
					t.Errorf("stamp: annotations %v labels %v", svc.Annotations, svc.Labels)
				}
			}
		})
	}
}

// Two sites placed on one Service: it follows whichever of them is active.
func TestServiceFollowerSharedService(t *testing.T) {
	g := testGroup()
	g.Sites[1].Kubernetes.Cluster = "a" // west now shares a/db/mysql with east
	c, fa, fb := fakeClusters([]runtime.Object{service("mysql", nil, nil)}, nil)
	f := NewServiceFollower(g, c, nil)
	for i, site := range []string{"west", "east", "dr"} {
		v := viewOf(uint64(i+1), site)
		if err := f.Follow(context.Background(), v); err != nil {
			t.Fatalf("Follow %s: %v", site, err)
		}
		want := noPrimary
		if site != "dr" {
			want = siteOf(g, site).Kubernetes.PodSelector
		}
		if got := getService(t, fa, "mysql").Spec.Selector; !maps.Equal(got, want) {
			t.Fatalf("active %s: selector %v, want %v", site, got, want)
		}
	}
	if len(fb.Actions()) != 0 {
		t.Fatalf("cluster b has no placement but saw %v", fb.Actions())
	}
}

func siteOf(g configs.Group, name string) configs.Site {
	for _, s := range g.Sites {
		if s.Name == name {
			return s
		}
	}
	return configs.Site{}
}

func TestServiceFollowerRefuses(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		labels      map[string]string
		want        error
	}{
		{"newer epoch recorded", map[string]string{AnnotationEpoch: "7", AnnotationActiveSite: "west"}, nil, ErrStaleEpoch},
		{"same epoch, other site", map[string]string{AnnotationEpoch: "5", AnnotationActiveSite: "west"}, nil, ErrEpochConflict},
		{"owned by another group", nil, map[string]string{LabelGroup: "billing"}, ErrOtherGroup},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := service("mysql", map[string]string{"site": "west"}, tc.annotations)
			svc.Labels = tc.labels
			c, fa, _ := fakeClusters([]runtime.Object{svc}, []runtime.Object{service("mysql", nil, nil)})
			err := NewServiceFollower(testGroup(), c, nil).Follow(context.Background(), viewOf(5, "east"))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Follow = %v, want %v", err, tc.want)
			}
			if writes(fa) != 0 {
				t.Fatalf("refused Service was written: %v", fa.Actions())
			}
			if got := getService(t, fa, "mysql").Spec.Selector; got["site"] != "west" {
				t.Fatalf("selector changed to %v", got)
			}
		})
	}
}

func TestServiceFollowerAcceptsOlderAndEqualEpoch(t *testing.T) {
	for _, ann := range []map[string]string{
		{AnnotationEpoch: "3", AnnotationActiveSite: "west"},
		{AnnotationEpoch: "5", AnnotationActiveSite: "east"},
		{AnnotationEpoch: "not-a-number"},
	} {
		c, fa, _ := fakeClusters([]runtime.Object{service("mysql", nil, ann)}, []runtime.Object{service("mysql", nil, nil)})
		if err := NewServiceFollower(testGroup(), c, nil).Follow(context.Background(), viewOf(5, "east")); err != nil {
			t.Fatalf("annotations %v: Follow: %v", ann, err)
		}
		if got := getService(t, fa, "mysql"); got.Spec.Selector["site"] != "east" || got.Annotations[AnnotationEpoch] != "5" {
			t.Fatalf("annotations %v: got selector %v annotations %v", ann, got.Spec.Selector, got.Annotations)
		}
	}
}

func TestServiceFollowerIdempotent(t *testing.T) {
	c, fa, fb := fakeClusters([]runtime.Object{service("mysql", nil, nil)}, []runtime.Object{service("mysql", nil, nil)})
	f := NewServiceFollower(testGroup(), c, nil)
	for i := range 2 {
		if err := f.Follow(context.Background(), viewOf(2, "west")); err != nil {
			t.Fatalf("Follow #%d: %v", i+1, err)
		}
	}
	if writes(fa) != 1 || writes(fb) != 1 {
		t.Fatalf("want one write per Service over two identical follows; a: %v, b: %v", fa.Actions(), fb.Actions())
	}
}

func TestServiceFollowerRetriesConflict(t *testing.T) {
	c, fa, _ := fakeClusters([]runtime.Object{service("mysql", nil, nil)}, []runtime.Object{service("mysql", nil, nil)})
	calls := failFirst(fa, "patch", "services", 2) // an apply is a patch
	if err := NewServiceFollower(testGroup(), c, nil).Follow(context.Background(), viewOf(1, "east")); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	if *calls != 3 {
		t.Fatalf("applies = %d, want 2 conflicts then a success", *calls)
	}
	if got := getService(t, fa, "mysql").Spec.Selector; got["site"] != "east" {
		t.Fatalf("selector %v", got)
	}
}

// A cluster that cannot be reached does not keep the others from following.
func TestServiceFollowerGoesOnPastAFailedCluster(t *testing.T) {
	c, fa, _ := fakeClusters([]runtime.Object{service("mysql", nil, nil)}, nil) // b lacks the Service
	err := NewServiceFollower(testGroup(), c, nil).Follow(context.Background(), viewOf(1, "east"))
	if err == nil {
		t.Fatal("Follow succeeded without cluster b's Service")
	}
	if got := getService(t, fa, "mysql").Spec.Selector; got["site"] != "east" {
		t.Fatalf("cluster a selector %v, want east's", got)
	}
	missing := FromClients(nil, nil)
	if err := NewServiceFollower(testGroup(), missing, nil).Follow(context.Background(), viewOf(1, "east")); !errors.Is(err, ErrUnknownCluster) {
		t.Fatalf("Follow without clusters = %v, want ErrUnknownCluster", err)
	}
}

func TestServiceFollowerRejectsBadViews(t *testing.T) {
	tests := []struct {
		name, group, site string
		want              error
	}{
		{"other group", "billing", "east", ErrWrongGroup},
		{"unknown site", "orders", "north", ErrUnknownSite},
		{"no site", "orders", "", ErrUnknownSite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, fa, fb := fakeClusters([]runtime.Object{service("mysql", nil, nil)}, []runtime.Object{service("mysql", nil, nil)})
			v := viewOf(9, tc.site)
			v.Group = tc.group
			if err := NewServiceFollower(testGroup(), c, nil).Follow(context.Background(), v); !errors.Is(err, tc.want) {
				t.Fatalf("Follow = %v, want %v", err, tc.want)
			}
			if len(fa.Actions())+len(fb.Actions()) != 0 {
				t.Fatalf("a rejected view reached the apiserver: %v %v", fa.Actions(), fb.Actions())
			}
		})
	}
}

func TestFollowersOfGroupWithoutKubernetes(t *testing.T) {
	g := configs.Group{Name: "orders", Sites: []configs.Site{{Name: "east"}, {Name: "west",
		Kubernetes: &configs.Placement{Cluster: "a", Namespace: "db"}}}} // placement with neither service nor nodes
	if f := NewServiceFollower(g, nil, nil); f != nil {
		t.Fatalf("NewServiceFollower = %+v, want nil", f)
	}
	if f := NewTaintFollower(g, nil, nil); f != nil {
		t.Fatalf("NewTaintFollower = %+v, want nil", f)
	}
	if fs := Followers(g, nil, nil); len(fs) != 0 {
		t.Fatalf("Followers = %v, want none", fs)
	}
	var sf *ServiceFollower
	var tf *TaintFollower
	if sf.Follow(context.Background(), viewOf(1, "east")) != nil || tf.Follow(context.Background(), viewOf(1, "east")) != nil {
		t.Fatal("nil followers must follow nothing without error")
	}
	names := []string{}
	for _, f := range Followers(testGroup(), nil, nil) {
		names = append(names, f.Name())
	}
	if len(names) != 2 || names[0] != "kube-service" || names[1] != "kube-taint" {
		t.Fatalf("Followers(testGroup) names = %v", names)
	}
}
