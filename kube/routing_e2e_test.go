package kube_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/dns"
	"github.com/failoverd/failoverd/kube"
	"github.com/failoverd/failoverd/test/testenv"
	"github.com/failoverd/failoverd/view"
)

// routingGroup places east in cluster a and west in cluster b, each with
// its Service db/mysql and nodes zone=<site>; the DNSEndpoint lives in a.
func routingGroup() configs.Group {
	site := func(name, cluster, target string) configs.Site {
		return configs.Site{
			Name: name,
			Kubernetes: &configs.Placement{Cluster: cluster, Namespace: "db", Service: "mysql",
				PodSelector:  map[string]string{"app": "mysql", "site": name},
				NodeSelector: map[string]string{"zone": name}},
			DNS: &configs.SiteDNS{Target: target},
		}
	}
	return configs.Group{
		Name:  "orders",
		Sites: []configs.Site{site("east", "a", "10.0.0.1"), site("west", "b", "10.0.1.1")},
		DNS: &configs.DNS{Cluster: "a", Namespace: "external-dns", EndpointName: "orders-primary",
			Hostname: "orders.db.example.com", RecordType: "A", TTL: 30 * time.Second},
	}
}

type cluster struct {
	cs  kubernetes.Interface
	dyn dynamic.Interface
}

var dedicated = corev1.Taint{Key: "dedicated", Value: "mysql", Effect: corev1.TaintEffectNoSchedule}

// Against two real kube-apiservers: the three routing followers move the
// Services, node taints and DNSEndpoint from east to west, and a stale view
// afterwards is refused by each of them without changing anything.
func TestRoutingFollowersOnRealAPIServers(t *testing.T) {
	kubes := testenv.StartKubes(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := map[string]cluster{
		"a": {kubes[0].Clientset(t), kubes[0].Dynamic(t)},
		"b": {kubes[1].Clientset(t), kubes[1].Dynamic(t)},
	}
	seed(ctx, t, cl)

	clusters := kube.New([]configs.Cluster{
		{Name: "a", Kubeconfig: kubes[0].Kubeconfig, Context: kubes[0].Context},
		{Name: "b", Kubeconfig: kubes[1].Kubeconfig, Context: kubes[1].Context},
	})
	g := routingGroup()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	followers := kube.Followers(g, clusters, log)
	followers = append(followers, dns.NewFollower(g, clusters, log))
	if len(followers) != 3 {
		t.Fatalf("followers = %d, want service, taint and dns", len(followers))
	}
	follow := func(v view.View) []error {
		var errs []error
		for _, f := range followers {
			if err := f.Follow(ctx, v); err != nil {
				errs = append(errs, err)
			}
		}
		return errs
	}

	for _, v := range []view.View{
		{Group: "orders", Epoch: 1, ActiveSite: "east"},
		{Group: "orders", Epoch: 2, ActiveSite: "west"},
	} {
		if errs := follow(v); len(errs) > 0 {
			t.Fatalf("follow %+v: %v", v, errs)
		}
		expectRouted(ctx, t, cl, g, v)
	}

	// Following the same view again writes nothing.
	before := versions(ctx, t, cl)
	if errs := follow(view.View{Group: "orders", Epoch: 2, ActiveSite: "west"}); len(errs) > 0 {
		t.Fatalf("follow epoch 2 again: %v", errs)
	}
	if after := versions(ctx, t, cl); !maps.Equal(before, after) {
		t.Fatalf("an identical view rewrote objects:\nbefore %v\nafter  %v", before, after)
	}

	// A stale daemon's view is refused by every follower and changes nothing.
	errs := follow(view.View{Group: "orders", Epoch: 1, ActiveSite: "east"})
	if len(errs) != 3 {
		t.Fatalf("stale view: %d followers refused (%v), want 3", len(errs), errs)
	}
	for _, err := range errs {
		if !errors.Is(err, kube.ErrStaleEpoch) {
			t.Fatalf("stale view: %v, want ErrStaleEpoch", err)
		}
	}
	if after := versions(ctx, t, cl); !maps.Equal(before, after) {
		t.Fatalf("a stale view changed objects:\nbefore %v\nafter  %v", before, after)
	}
	expectRouted(ctx, t, cl, g, view.View{Group: "orders", Epoch: 2, ActiveSite: "west"})
}

// seed creates the namespaces, Services and Nodes the test routes.
func seed(ctx context.Context, t *testing.T, cl map[string]cluster) {
	t.Helper()
	for name, c := range cl {
		for _, ns := range []string{"db", "external-dns"} {
			if _, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("cluster %s: create namespace %s: %v", name, ns, err)
			}
		}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "mysql", Namespace: "db"},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "mysql"}, Ports: []corev1.ServicePort{{Port: 3306}}},
		}
		if _, err := c.cs.CoreV1().Services("db").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("cluster %s: create service: %v", name, err)
		}
	}
	nodes := map[string][]*corev1.Node{
		"a": {
			{ObjectMeta: metav1.ObjectMeta{Name: "east-1", Labels: map[string]string{"zone": "east"}}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{dedicated}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "east-2", Labels: map[string]string{"zone": "east"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "bystander", Labels: map[string]string{"zone": "elsewhere"}}},
		},
		"b": {{ObjectMeta: metav1.ObjectMeta{Name: "west-1", Labels: map[string]string{"zone": "west"}}}},
	}
	for name, ns := range nodes {
		for _, n := range ns {
			if _, err := cl[name].cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
				t.Fatalf("cluster %s: create node %s: %v", name, n.Name, err)
			}
		}
	}
}

// expectRouted checks every routed object for v.
func expectRouted(ctx context.Context, t *testing.T, cl map[string]cluster, g configs.Group, v view.View) {
	t.Helper()
	epoch := strconv.FormatUint(v.Epoch, 10)
	for _, s := range g.Sites {
		c := cl[s.Kubernetes.Cluster]
		svc, err := c.cs.CoreV1().Services("db").Get(ctx, "mysql", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get service of %s: %v", s.Name, err)
		}
		want := map[string]string{kube.NoPrimarySelectorKey: "orders"}
		if s.Name == v.ActiveSite {
			want = s.Kubernetes.PodSelector
		}
		if !maps.Equal(svc.Spec.Selector, want) {
			t.Errorf("epoch %d: service of %s selects %v, want %v", v.Epoch, s.Name, svc.Spec.Selector, want)
		}
		if svc.Annotations[kube.AnnotationEpoch] != epoch || svc.Annotations[kube.AnnotationActiveSite] != v.ActiveSite || svc.Labels[kube.LabelGroup] != "orders" {
			t.Errorf("epoch %d: service of %s stamped %v %v", v.Epoch, s.Name, svc.Annotations, svc.Labels)
		}

		nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list nodes of %s: %v", s.Name, err)
		}
		for _, n := range nodes.Items {
			standby := slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool {
				return tn.Key == kube.TaintStandby && tn.Value == "orders" && tn.Effect == corev1.TaintEffectNoSchedule
			})
			mine := n.Labels["zone"] == s.Name
			switch {
			case n.Labels["zone"] == "elsewhere":
				if standby || n.Annotations[kube.NodeEpochAnnotationPrefix+"orders"] != "" {
					t.Errorf("bystander node touched: %v %v", n.Spec.Taints, n.Annotations)
				}
			case mine && standby != (s.Name != v.ActiveSite):
				t.Errorf("epoch %d: node %s of %s standby-tainted=%v, taints %v", v.Epoch, n.Name, s.Name, standby, n.Spec.Taints)
			}
			// Taints that are not ours (the apiserver's not-ready, dedicated) stay.
			if !slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == "node.kubernetes.io/not-ready" }) {
				t.Errorf("node %s lost its not-ready taint: %v", n.Name, n.Spec.Taints)
			}
			if n.Name == "east-1" && !slices.Contains(n.Spec.Taints, dedicated) {
				t.Errorf("east-1 lost its dedicated taint: %v", n.Spec.Taints)
			}
		}
	}

	ep, err := cl["a"].dyn.Resource(testenv.DNSEndpointGVR).Namespace("external-dns").Get(ctx, "orders-primary", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get DNSEndpoint: %v", err)
	}
	eps, _, _ := unstructured.NestedSlice(ep.Object, "spec", "endpoints")
	target := map[string]string{"east": "10.0.0.1", "west": "10.0.1.1"}[v.ActiveSite]
	wantEps := []any{map[string]any{"dnsName": "orders.db.example.com", "recordType": "A", "recordTTL": int64(30), "targets": []any{target}}}
	if !equalJSONish(eps, wantEps) {
		t.Errorf("epoch %d: DNSEndpoint endpoints %v, want %v", v.Epoch, eps, wantEps)
	}
	if a := ep.GetAnnotations(); a[kube.AnnotationEpoch] != epoch || a[kube.AnnotationActiveSite] != v.ActiveSite || ep.GetLabels()[kube.LabelGroup] != "orders" {
		t.Errorf("epoch %d: DNSEndpoint stamped %v %v", v.Epoch, a, ep.GetLabels())
	}
	if t.Failed() {
		t.FailNow()
	}
}

func equalJSONish(a, b []any) bool {
	ua := unstructured.Unstructured{Object: map[string]any{"x": a}}
	ub := unstructured.Unstructured{Object: map[string]any{"x": b}}
	ja, errA := ua.MarshalJSON()
	jb, errB := ub.MarshalJSON()
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// versions returns the resourceVersion of every object the followers may
// write, by "cluster/kind/name".
func versions(ctx context.Context, t *testing.T, cl map[string]cluster) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, c := range cl {
		svc, err := c.cs.CoreV1().Services("db").Get(ctx, "mysql", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get service: %v", err)
		}
		out[name+"/service/mysql"] = svc.ResourceVersion
		nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list nodes: %v", err)
		}
		for _, n := range nodes.Items {
			out[name+"/node/"+n.Name] = n.ResourceVersion
		}
	}
	ep, err := cl["a"].dyn.Resource(testenv.DNSEndpointGVR).Namespace("external-dns").Get(ctx, "orders-primary", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get DNSEndpoint: %v", err)
	}
	out["a/dnsendpoint/orders-primary"] = ep.GetResourceVersion()
	return out
}

// Against two real kube-apiservers: the reader followers label exactly the
// eligible sites' pods (a real pod update), set the reader Services'
// selector and the reader DNSEndpoint (real server-side apply), read their
// own writes back as unchanged, survive a hand-added label and an empty set
// (the record read back), and refuse an older set.
func TestReaderFollowersOnRealAPIServers(t *testing.T) {
	kubes := testenv.StartKubes(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := map[string]cluster{
		"a": {kubes[0].Clientset(t), kubes[0].Dynamic(t)},
		"b": {kubes[1].Clientset(t), kubes[1].Dynamic(t)},
	}
	seed(ctx, t, cl)
	no := false
	for name, c := range cl {
		site := map[string]string{"a": "east", "b": "west"}[name]
		if _, err := c.cs.CoreV1().ServiceAccounts("db").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "db"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mysql-read", Namespace: "db", Labels: map[string]string{"team": "db"}},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "mysql"}, Ports: []corev1.ServicePort{{Port: 3306}}}}
		if _, err := c.cs.CoreV1().Services("db").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: site + "-0", Namespace: "db", Labels: map[string]string{"app": "mysql", "site": site}},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: &no, Containers: []corev1.Container{{Name: "mysql", Image: "mysql"}}}}
		if _, err := c.cs.CoreV1().Pods("db").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clusters := kube.New([]configs.Cluster{
		{Name: "a", Kubeconfig: kubes[0].Kubeconfig, Context: kubes[0].Context},
		{Name: "b", Kubeconfig: kubes[1].Kubeconfig, Context: kubes[1].Context},
	})
	g := routingGroup()
	g.Readers = configs.Readers{Enabled: true, Kubernetes: &configs.ReaderService{Service: "mysql-read"},
		DNS: &configs.ReaderDNS{EndpointName: "orders-readers", Hostname: "orders-ro.db.example.com"}}
	svcF := kube.NewReaderServiceFollower(g, clusters, slog.New(slog.DiscardHandler))
	dnsF := dns.NewReaderFollower(g, clusters, slog.New(slog.DiscardHandler))
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	follow := func(s kube.ReaderSet) ([]string, error) {
		a, errA := svcF.FollowReaders(ctx, s)
		b, errB := dnsF.FollowReaders(ctx, s)
		return append(a, b...), errors.Join(errA, errB)
	}
	readers := func() []string {
		var out []string
		for _, c := range cl {
			list, err := c.cs.CoreV1().Pods("db").List(ctx, metav1.ListOptions{LabelSelector: kube.LabelReader + "=orders"})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range list.Items {
				out = append(out, p.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	record := func() string {
		ep, err := cl["a"].dyn.Resource(testenv.DNSEndpointGVR).Namespace("external-dns").Get(ctx, "orders-readers", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eps, _, _ := unstructured.NestedSlice(ep.Object, "spec", "endpoints")
		if len(eps) == 0 {
			return "-"
		}
		ts, _, _ := unstructured.NestedStringSlice(eps[0].(map[string]any), "targets")
		return strings.Join(ts, ",")
	}

	both := kube.ReaderSet{Group: "orders", Epoch: 4, Sites: []string{"east", "west"}, At: at}
	if _, err := follow(both); err != nil {
		t.Fatal(err)
	}
	if got := readers(); !slices.Equal(got, []string{"east-0", "west-0"}) || record() != "10.0.0.1,10.0.1.1" {
		t.Fatalf("readers %v record %s, want both", got, record())
	}
	for _, c := range cl {
		svc, err := c.cs.CoreV1().Services("db").Get(ctx, "mysql-read", metav1.GetOptions{})
		if err != nil || !maps.Equal(svc.Spec.Selector, map[string]string{kube.LabelReader: "orders"}) || svc.Labels["team"] != "db" {
			t.Fatalf("reader Service %v %v", svc, err)
		}
	}
	if changed, err := follow(both); err != nil || len(changed) != 0 {
		t.Fatalf("re-run changed %v, err %v: the real apiserver's answer reads as drift", changed, err)
	}
	west := kube.ReaderSet{Group: "orders", Epoch: 4, Sites: []string{"west"}, At: at.Add(time.Second)}
	if _, err := follow(west); err != nil {
		t.Fatal(err)
	}
	if got := readers(); !slices.Equal(got, []string{"west-0"}) || record() != "10.0.1.1" {
		t.Fatalf("readers %v record %s, want west only", got, record())
	}
	// A label added by hand (another field manager) is removed.
	pods := cl["a"].cs.CoreV1().Pods("db")
	p, err := pods.Get(ctx, "east-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels[kube.LabelReader] = "orders"
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{FieldManager: "kubectl-label"}); err != nil {
		t.Fatal(err)
	}
	if changed, err := follow(west); err != nil || len(changed) != 1 || readers()[0] != "west-0" || len(readers()) != 1 {
		t.Fatalf("hand label: changed %v err %v readers %v", changed, err, readers())
	}
	if _, err := follow(both); !errors.Is(err, kube.ErrStaleReaderSet) {
		t.Fatalf("older set: %v, want ErrStaleReaderSet", err)
	}
	none := kube.ReaderSet{Group: "orders", Epoch: 5, At: at}
	if _, err := follow(none); err != nil {
		t.Fatal(err)
	}
	if got := readers(); len(got) != 0 || record() != "-" {
		t.Fatalf("readers %v record %s, want none", got, record())
	}
	if changed, err := follow(none); err != nil || len(changed) != 0 {
		t.Fatalf("re-run of the empty set changed %v, err %v", changed, err)
	}
}
