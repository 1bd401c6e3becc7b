package dns

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/kube"
	"github.com/failoverd/failoverd/view"
)

func testGroup() configs.Group {
	return configs.Group{
		Name: "orders",
		DNS: &configs.DNS{Cluster: "a", Namespace: "dns", EndpointName: "orders-primary",
			Hostname: "orders.db.example.com", RecordType: "A", TTL: 30 * time.Second},
		Sites: []configs.Site{
			{Name: "east", DNS: &configs.SiteDNS{Target: "10.0.0.1"}},
			{Name: "west", DNS: &configs.SiteDNS{Target: "10.0.1.1"}},
			{Name: "dr"},
		},
	}
}

func viewOf(epoch uint64, site string) view.View {
	return view.View{Group: "orders", Epoch: epoch, ActiveSite: site}
}

func endpoint(labels, annotations map[string]string, target string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"endpoints": []any{map[string]any{
			"dnsName": "orders.db.example.com", "recordType": "A", "recordTTL": int64(300), "targets": []any{target},
		}}},
	}}
	u.SetAPIVersion("externaldns.k8s.io/v1alpha1")
	u.SetKind("DNSEndpoint")
	u.SetNamespace("dns")
	u.SetName("orders-primary")
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

func newFake(objs ...runtime.Object) (*Follower, *dynfake.FakeDynamicClient) {
	fc := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{EndpointGVR: "DNSEndpointList"}, objs...)
	fc.PrependReactor("patch", "dnsendpoints", fakeApply(fc))
	c := kube.FromClients(nil, map[string]dynamic.Interface{"a": fc})
	return NewFollower(testGroup(), c, nil), fc
}

// fakeApply is a FAKE of server-side apply for the fake dynamic client
// (which has none): labels and annotations merged key by key, spec
// replaced, the applied resourceVersion checked as a precondition. The real
// apiserver's apply is exercised by kube/routing_e2e_test.go.
func fakeApply(fc *dynfake.FakeDynamicClient) k8stesting.ReactionFunc {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		p, ok := a.(k8stesting.PatchAction)
		if !ok || p.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		var applied unstructured.Unstructured
		if err := json.Unmarshal(p.GetPatch(), &applied.Object); err != nil {
			return true, nil, err
		}
		cur, err := fc.Tracker().Get(EndpointGVR, p.GetNamespace(), p.GetName())
		if err != nil {
			return true, nil, err
		}
		obj := cur.(*unstructured.Unstructured).DeepCopy()
		if rv := applied.GetResourceVersion(); rv != "" && rv != obj.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(EndpointGVR.GroupResource(), p.GetName(), errors.New("resourceVersion precondition"))
		}
		labels, annotations := obj.GetLabels(), obj.GetAnnotations()
		if labels == nil {
			labels = map[string]string{}
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		maps.Copy(labels, applied.GetLabels())
		maps.Copy(annotations, applied.GetAnnotations())
		obj.SetLabels(labels)
		obj.SetAnnotations(annotations)
		obj.Object["spec"] = applied.Object["spec"]
		if err := fc.Tracker().Update(EndpointGVR, obj, p.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	}
}

func get(t *testing.T, fc dynamic.Interface) *unstructured.Unstructured {
	t.Helper()
	u, err := fc.Resource(EndpointGVR).Namespace("dns").Get(context.Background(), "orders-primary", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get DNSEndpoint: %v", err)
	}
	return u
}

// endpoints returns spec.endpoints as JSON, the form external-dns reads.
func endpoints(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	eps, _, err := unstructured.NestedSlice(u.Object, "spec", "endpoints")
	if err != nil {
		t.Fatalf("spec.endpoints: %v", err)
	}
	b, err := json.Marshal(eps)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writes(fc *dynfake.FakeDynamicClient) int {
	n := 0
	for _, a := range fc.Actions() {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			n++
		}
	}
	return n
}

func TestSpec(t *testing.T) {
	tests := []struct {
		name string
		dns  configs.DNS
		want string
	}{
		{"A", configs.DNS{Hostname: "h.example.com", RecordType: "A", TTL: 30 * time.Second},
			`{"endpoints":[{"dnsName":"h.example.com","recordTTL":30,"recordType":"A","targets":["10.0.0.1"]}]}`},
		{"CNAME, TTL rounded down", configs.DNS{Hostname: "h.example.com", RecordType: "CNAME", TTL: 1500 * time.Millisecond},
			`{"endpoints":[{"dnsName":"h.example.com","recordTTL":1,"recordType":"CNAME","targets":["10.0.0.1"]}]}`},
		{"no TTL", configs.DNS{Hostname: "h.example.com", RecordType: "A"},
			`{"endpoints":[{"dnsName":"h.example.com","recordType":"A","targets":["10.0.0.1"]}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(Spec(tc.dns, "10.0.0.1"))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Fatalf("Spec = %s\nwant   %s", b, tc.want)
			}
			// Unstructured content must deep-copy (int64, []any, map[string]any only).
			u := unstructured.Unstructured{Object: map[string]any{"spec": Spec(tc.dns, "10.0.0.1")}}
			_ = u.DeepCopy()
		})
	}
}

func TestFollowCreatesThenUpdates(t *testing.T) {
	f, fc := newFake()
	steps := []struct {
		epoch  uint64
		site   string
		target string
	}{{1, "east", "10.0.0.1"}, {2, "west", "10.0.1.1"}, {3, "east", "10.0.0.1"}}
	for _, s := range steps {
		if err := f.Follow(context.Background(), viewOf(s.epoch, s.site)); err != nil {
			t.Fatalf("epoch %d: Follow: %v", s.epoch, err)
		}
		u := get(t, fc)
		want := `[{"dnsName":"orders.db.example.com","recordTTL":30,"recordType":"A","targets":["` + s.target + `"]}]`
		if got := endpoints(t, u); got != want {
			t.Fatalf("epoch %d: endpoints %s, want %s", s.epoch, got, want)
		}
		if a := u.GetAnnotations(); a[kube.AnnotationEpoch] != strconv.FormatUint(s.epoch, 10) || a[kube.AnnotationActiveSite] != s.site {
			t.Fatalf("epoch %d: annotations %v", s.epoch, a)
		}
		if u.GetLabels()[kube.LabelGroup] != "orders" {
			t.Fatalf("labels %v", u.GetLabels())
		}
	}
}

// An existing DNSEndpoint (made by hand, other TTL, extra labels) is adopted:
// spec replaced, its own labels and annotations kept.
func TestFollowAdoptsExisting(t *testing.T) {
	f, fc := newFake(endpoint(map[string]string{"team": "db"}, map[string]string{"note": "keep"}, "192.0.2.9"))
	if err := f.Follow(context.Background(), viewOf(4, "west")); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	u := get(t, fc)
	if got, want := endpoints(t, u), `[{"dnsName":"orders.db.example.com","recordTTL":30,"recordType":"A","targets":["10.0.1.1"]}]`; got != want {
		t.Fatalf("endpoints %s, want %s", got, want)
	}
	if u.GetLabels()["team"] != "db" || u.GetAnnotations()["note"] != "keep" || u.GetAnnotations()[kube.AnnotationEpoch] != "4" {
		t.Fatalf("metadata labels %v annotations %v", u.GetLabels(), u.GetAnnotations())
	}
}

func TestFollowRefuses(t *testing.T) {
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		view        view.View
		want        error
	}{
		{"newer epoch recorded", nil, map[string]string{kube.AnnotationEpoch: "8", kube.AnnotationActiveSite: "east"}, viewOf(7, "west"), ErrStaleEpoch},
		{"same epoch, other site", nil, map[string]string{kube.AnnotationEpoch: "7", kube.AnnotationActiveSite: "east"}, viewOf(7, "west"), kube.ErrEpochConflict},
		{"another group's", map[string]string{kube.LabelGroup: "billing"}, nil, viewOf(7, "west"), kube.ErrOtherGroup},
		{"site without target", nil, nil, viewOf(7, "dr"), ErrNoTarget},
		{"view of another group", nil, nil, view.View{Group: "billing", Epoch: 9, ActiveSite: "west"}, kube.ErrWrongGroup},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, fc := newFake(endpoint(tc.labels, tc.annotations, "10.0.0.1"))
			if err := f.Follow(context.Background(), tc.view); !errors.Is(err, tc.want) {
				t.Fatalf("Follow = %v, want %v", err, tc.want)
			}
			if writes(fc) != 0 {
				t.Fatalf("refused DNSEndpoint was written: %v", fc.Actions())
			}
			if got := endpoints(t, get(t, fc)); got != `[{"dnsName":"orders.db.example.com","recordTTL":300,"recordType":"A","targets":["10.0.0.1"]}]` {
				t.Fatalf("endpoints changed: %s", got)
			}
		})
	}
}

func TestFollowIdempotent(t *testing.T) {
	f, fc := newFake()
	for i := range 3 {
		if err := f.Follow(context.Background(), viewOf(2, "west")); err != nil {
			t.Fatalf("Follow #%d: %v", i+1, err)
		}
	}
	if n := writes(fc); n != 1 {
		t.Fatalf("writes = %d over three identical follows, want 1 (the create): %v", n, fc.Actions())
	}
}

// A concurrent creator or writer makes Follow read again, not fail.
func TestFollowRetriesRaces(t *testing.T) {
	for _, verb := range []string{"create", "patch"} { // an apply is a patch
		t.Run(verb, func(t *testing.T) {
			var objs []runtime.Object
			if verb == "patch" {
				objs = append(objs, endpoint(nil, nil, "192.0.2.9"))
			}
			f, fc := newFake(objs...)
			calls := 0
			fc.PrependReactor(verb, "dnsendpoints", func(k8stesting.Action) (bool, runtime.Object, error) {
				calls++
				if calls > 1 {
					return false, nil, nil
				}
				gr := EndpointGVR.GroupResource()
				if verb == "create" {
					return true, nil, apierrors.NewAlreadyExists(gr, "orders-primary")
				}
				return true, nil, apierrors.NewConflict(gr, "orders-primary", errors.New("written concurrently"))
			})
			if err := f.Follow(context.Background(), viewOf(1, "east")); err != nil {
				t.Fatalf("Follow: %v", err)
			}
			if calls != 2 {
				t.Fatalf("%s calls = %d, want a race then a success", verb, calls)
			}
			if got := endpoints(t, get(t, fc)); got != `[{"dnsName":"orders.db.example.com","recordTTL":30,"recordType":"A","targets":["10.0.0.1"]}]` {
				t.Fatalf("endpoints %s", got)
			}
		})
	}
}

func TestNoDNSSection(t *testing.T) {
	g := testGroup()
	g.DNS = nil
	if f := NewFollower(g, nil, nil); f != nil {
		t.Fatalf("NewFollower = %+v, want nil", f)
	}
	var f *Follower
	if err := f.Follow(context.Background(), viewOf(1, "east")); err != nil {
		t.Fatalf("nil Follower: %v", err)
	}
	if err := NewFollower(testGroup(), nil, nil).Follow(context.Background(), viewOf(1, "east")); !errors.Is(err, kube.ErrUnknownCluster) {
		t.Fatalf("Follow without clusters = %v, want kube.ErrUnknownCluster", err)
	}
}

// A re-run against the view already followed changes nothing; a target
// edited by hand is reported and put back, the user's label kept.
func TestReconcileRepairsDrift(t *testing.T) {
	f, fc := newFake(endpoint(map[string]string{"team": "db"}, nil, "192.0.2.9"))
	ctx := context.Background()
	if changed, err := f.Reconcile(ctx, viewOf(4, "west")); err != nil || len(changed) != 1 {
		t.Fatalf("follow: changed %v, err %v", changed, err)
	}
	if changed, err := f.Reconcile(ctx, viewOf(4, "west")); err != nil || len(changed) != 0 {
		t.Fatalf("re-run: changed %v, err %v; want nothing", changed, err)
	}
	u := get(t, fc)
	u.Object["spec"] = endpoint(nil, nil, "192.0.2.66").Object["spec"]
	if _, err := fc.Resource(EndpointGVR).Namespace("dns").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed, err := f.Reconcile(ctx, viewOf(4, "west"))
	if err != nil || len(changed) != 1 || changed[0] != "dnsendpoint a/dns/orders-primary targets [192.0.2.66] -> [10.0.1.1]" {
		t.Fatalf("after a hand edit: changed %v, err %v", changed, err)
	}
	if u := get(t, fc); u.GetLabels()["team"] != "db" || !strings.Contains(endpoints(t, u), `"10.0.1.1"`) {
		t.Fatalf("labels %v endpoints %s", u.GetLabels(), endpoints(t, u))
	}
}
