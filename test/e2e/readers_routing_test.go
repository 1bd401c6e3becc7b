package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/failoverd/failoverd/test/testenv"
)

// readersConfig turns read routing on with both reader targets: the Service
// mysql-read of each cluster and the DNSEndpoint orders-readers (in route0,
// beside orders-db). maxLag is small so a replica whose applier stopped
// with a backlog leaves quickly.
const readersConfig = "    readers:\n      enabled: true\n      maxLag: 1s\n      upAfter: 2\n      downAfter: 2\n" +
	"      kubernetes:\n        service: mysql-read\n" +
	"      dns:\n        endpointName: orders-readers\n        hostname: orders-ro.example.test\n"

// createReaders creates in k what a deploy would for read routing: the
// Service mysql-read (its manifest's selector, which failoverd replaces)
// and one pod per listed site labelled site=site<i> (the sites'
// podSelector). No kubelet runs: the pods stay Pending, which is enough for
// their labels.
func createReaders(t testing.TB, k *testenv.Kube, sites ...int) {
	t.Helper()
	ctx := context.Background()
	cs := k.Clientset(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mysql-read", Namespace: "default", Labels: map[string]string{"team": "payments"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "mysql"}, Ports: []corev1.ServicePort{{Port: 3306}}}}
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	no := false
	for _, i := range sites {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mysql-site%d", i), Namespace: "default",
				Labels: map[string]string{"app": "mysql", "site": fmt.Sprintf("site%d", i)}},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: &no, Containers: []corev1.Container{{Name: "mysql", Image: "mysql"}}},
		}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// readerPods lists, across kubes, the pods labelled readers of orders.
func readerPods(t testing.TB, kubes []*testenv.Kube) []string {
	var out []string
	for _, k := range kubes {
		list, err := k.Clientset(t).CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "failoverd.io/reader=orders"})
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		for _, p := range list.Items {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// readerTargets is the reader DNSEndpoint's targets ("-" when it has no
// record, "" when it cannot be read).
func readerTargets(t testing.TB, k *testenv.Kube) string {
	obj, err := k.Dynamic(t).Resource(testenv.DNSEndpointGVR).Namespace("default").Get(context.Background(), "orders-readers", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	eps, _, _ := unstructured.NestedSlice(obj.Object, "spec", "endpoints")
	if len(eps) == 0 {
		return "-"
	}
	var all []string
	for _, ep := range eps {
		targets, _, _ := unstructured.NestedStringSlice(ep.(map[string]any), "targets")
		all = append(all, targets...)
	}
	return strings.Join(all, ",")
}

// readerServicesSelect reports whether every cluster's mysql-read selects
// exactly the reader label of orders.
func readerServicesSelect(t testing.TB, kubes []*testenv.Kube) bool {
	for _, k := range kubes {
		svc, err := k.Clientset(t).CoreV1().Services("default").Get(context.Background(), "mysql-read", metav1.GetOptions{})
		if err != nil || len(svc.Spec.Selector) != 1 || svc.Spec.Selector["failoverd.io/reader"] != "orders" {
			return false
		}
	}
	return true
}

// readersAre reports whether the reader Services and the reader DNSEndpoint
// list exactly the given site numbers (site i's pod and 127.0.0.<i+1>).
func readersAre(t testing.TB, kubes []*testenv.Kube, sites ...int) func() bool {
	var pods, targets []string
	for _, i := range sites {
		pods = append(pods, fmt.Sprintf("mysql-site%d", i))
		targets = append(targets, fmt.Sprintf("127.0.0.%d", i+1))
	}
	wantTargets := strings.Join(targets, ",")
	if len(targets) == 0 {
		wantTargets = "-"
	}
	return func() bool {
		return readerServicesSelect(t, kubes) && slices.Equal(readerPods(t, kubes), pods) && readerTargets(t, kubes[0]) == wantTargets
	}
}

// readerFollowersInSync reports whether both reader followers are in the
// routing status, ok and in sync.
func readerFollowersInSync(g *group) bool {
	s, err := g.status()
	if err != nil {
		return false
	}
	n := 0
	for _, f := range s.Routing {
		if f.Name == "kube-reader-service" || f.Name == "dns-readers" {
			if !f.InSync || f.State != "ok" {
				return false
			}
			n++
		}
	}
	return n == 2
}

// Three sites in two real kube-apiservers (site0 in route0, site1 and
// site2 in route1): the reader Services (their pods' reader label) and the
// reader DNSEndpoint list exactly the eligible sites after a replica's
// applier stops with a backlog (it leaves, and returns once it catches
// up), after hand edits (repaired within the 1s reconcile interval), and
// after a failover (the new primary leaves the set, the dead one is never
// in it).
func TestReaderTargetsFollowTheReaderSet(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		kubes := testenv.StartKubes(t, 2)
		createRouted(t, kubes[0], 0)
		createRouted(t, kubes[1], 1, 2)
		createReaders(t, kubes[0], 0)
		createReaders(t, kubes[1], 1, 2)
		g := newGroup(t, groupOptions{engine: e, sites: 3, routing: kubes, extraConfig: routingInterval + readersConfig})
		g.startDaemon()
		g.waitActive("site0", 30*time.Second)
		g.waitFor("readers site1 and site2", 30*time.Second, readersAre(t, kubes, 1, 2))
		g.waitFor("reader followers in sync", 10*time.Second, func() bool { return readerFollowersInSync(g) })
		if svc, err := kubes[1].Clientset(t).CoreV1().Services("default").Get(context.Background(), "mysql-read", metav1.GetOptions{}); err != nil || svc.Labels["team"] != "payments" {
			t.Fatalf("reader Service lost its deploy's label: %v %v", svc, err)
		}

		// A replica failure: site2's applier stops with a backlog.
		primary := g.topo.Sites[0]
		primary.Exec(t, "CREATE TABLE app.readers (id INT PRIMARY KEY)")
		g.topo.WaitReplicated(t, 20*time.Second)
		g.topo.Sites[2].Exec(t, "STOP REPLICA SQL_THREAD")
		for i := range 30 {
			primary.Exec(t, "INSERT INTO app.readers (id) VALUES (?)", i)
		}
		g.waitFor("site2 out of the reader targets", 30*time.Second, readersAre(t, kubes, 1))
		g.topo.Sites[2].Exec(t, "START REPLICA SQL_THREAD")
		g.waitFor("site2 back in the reader targets", 30*time.Second, readersAre(t, kubes, 1, 2))

		// Hand edits: the primary's pod labelled a reader, the reader
		// Service's selector and the reader record's targets edited.
		ctx := context.Background()
		pods := kubes[0].Clientset(t).CoreV1().Pods("default")
		p, err := pods.Get(ctx, "mysql-site0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Labels["failoverd.io/reader"] = "orders"
		if _, err := pods.Update(ctx, p, metav1.UpdateOptions{FieldManager: "kubectl-label"}); err != nil {
			t.Fatal(err)
		}
		services := kubes[1].Clientset(t).CoreV1().Services("default")
		svc, err := services.Get(ctx, "mysql-read", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc.Spec.Selector = map[string]string{"app": "mysql"}
		if _, err := services.Update(ctx, svc, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
		res := kubes[0].Dynamic(t).Resource(testenv.DNSEndpointGVR).Namespace("default")
		obj, err := res.Get(ctx, "orders-readers", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eps, _, _ := unstructured.NestedSlice(obj.Object, "spec", "endpoints")
		eps[0].(map[string]any)["targets"] = []any{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
		if err := unstructured.SetNestedSlice(obj.Object, eps, "spec", "endpoints"); err != nil {
			t.Fatal(err)
		}
		if _, err := res.Update(ctx, obj, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
		edited := time.Now()
		g.waitFor("hand edits repaired", 10*time.Second, readersAre(t, kubes, 1, 2))
		if took := time.Since(edited); took > 5*time.Second {
			t.Errorf("hand edits repaired after %v, want within a few 1s reconcile intervals", took)
		}
		g.waitFor("repairs in the routing status", 10*time.Second, func() bool {
			s, err := g.status()
			if err != nil {
				return false
			}
			repaired := map[string]bool{}
			for _, f := range s.Routing {
				repaired[f.Name] = f.Repairs > 0
			}
			return repaired["kube-reader-service"] && repaired["dns-readers"]
		})
		if m := g.metrics(); !strings.Contains(m, `failoverd_routing_in_sync{follower="dns-readers",group="orders"} 1`) &&
			!strings.Contains(m, `failoverd_routing_in_sync{group="orders",follower="dns-readers"} 1`) {
			t.Errorf("no in-sync metric for dns-readers in\n%s", grepLines(m, "routing_in_sync"))
		}

		// A failover: site1 is promoted; site2, re-pointed to it, is the
		// only reader once it has streamed for upAfter rounds.
		g.kill(0)
		st := g.expectSolePrimary("site1")
		g.waitFor("readers after the failover", 60*time.Second, readersAre(t, kubes, 2))
		g.waitFor("reader followers in sync after the failover", 10*time.Second, func() bool { return readerFollowersInSync(g) })
		obj, err = res.Get(ctx, "orders-readers", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := obj.GetAnnotations()["failoverd.io/epoch"], fmt.Sprint(st.Epoch); got != want {
			t.Errorf("reader DNSEndpoint records epoch %s, want %s", got, want)
		}
	})
}

// grepLines returns the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
