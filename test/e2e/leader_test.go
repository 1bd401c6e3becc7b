package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/failoverd/failoverd/test/testenv"
)

func activeSiteCode(g *group) int {
	resp, err := http.Get("http://" + g.listen + "/active-site")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Two daemons share a Lease: only the leader acts and serves /active-site;
// the follower answers 503 until the leader dies, then takes over with the
// state the leader persisted in the ConfigMap, and fails over.
func TestLeaderElection(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		k := testenv.StartKube(t, testenv.KubeOptions{})
		createRoutingObjects(t, k, 3)
		a := newGroup(t, groupOptions{engine: e, sites: 3, kube: k})
		a.startDaemon()
		first := a.waitActive("site0", 30*time.Second)
		b := a.peer()
		b.startDaemon()
		time.Sleep(2 * time.Second)
		if code := activeSiteCode(a); code != http.StatusOK {
			t.Fatalf("leader /active-site: %d, want 200", code)
		}
		if code := activeSiteCode(b); code != http.StatusServiceUnavailable {
			t.Fatalf("follower /active-site: %d, want 503", code)
		}
		if st, err := b.status(); err != nil || st.Leader {
			t.Fatalf("follower status: %+v, %v", st, err)
		}

		a.mu.Lock()
		_ = a.cmd.Process.Kill() // SIGKILL: the lease is not released
		a.mu.Unlock()
		a.waitCrash(10 * time.Second)
		b.waitFor("follower becomes leader", 30*time.Second, func() bool { return activeSiteCode(b) == http.StatusOK })
		if st, _ := b.status(); st.Epoch != first.Epoch || st.ActiveSite != "site0" {
			t.Fatalf("new leader state %+v, want the persisted epoch %d and site0", st, first.Epoch)
		}
		b.kill(0)
		st := b.expectSolePrimary("site1")
		if st.Epoch != first.Epoch+2 {
			t.Errorf("epoch %d, want %d", st.Epoch, first.Epoch+2)
		}
		// Routing followed the new primary (after it, never blocking it).
		b.waitFor("Service and DNS follow site1", 30*time.Second, func() bool {
			return serviceSelects(t, k, "site1") && dnsTargets(t, k) == "127.0.0.2" && standby(t, k, "site0") && !standby(t, k, "site1")
		})
	})
}

// createRoutingObjects creates the Service the daemon flips and one Node per
// site (followers never create Services or Nodes).
func createRoutingObjects(t testing.TB, k *testenv.Kube, sites int) {
	t.Helper()
	cs := k.Clientset(t)
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mysql-primary", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"site": "site0"}, Ports: []corev1.ServicePort{{Port: 3306}}}}
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range sites {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-site%d", i), Labels: map[string]string{"site": fmt.Sprintf("site%d", i)}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func serviceSelects(t testing.TB, k *testenv.Kube, site string) bool {
	svc, err := k.Clientset(t).CoreV1().Services("default").Get(context.Background(), "mysql-primary", metav1.GetOptions{})
	return err == nil && svc.Spec.Selector["site"] == site && len(svc.Spec.Selector) == 1
}

func standby(t testing.TB, k *testenv.Kube, site string) bool {
	n, err := k.Clientset(t).CoreV1().Nodes().Get(context.Background(), "node-"+site, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == "failoverd.io/standby" {
			return true
		}
	}
	return false
}

func dnsTargets(t testing.TB, k *testenv.Kube) string {
	obj, err := k.Dynamic(t).Resource(testenv.DNSEndpointGVR).Namespace("default").Get(context.Background(), "orders-db", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	eps, _, _ := unstructured.NestedSlice(obj.Object, "spec", "endpoints")
	if len(eps) != 1 {
		return ""
	}
	targets, _, _ := unstructured.NestedStringSlice(eps[0].(map[string]any), "targets")
	return strings.Join(targets, ",")
}

// deposedLoggedNoStep checks, by both daemons' logs, that the deposed
// leader old logged no failover step (stepMessages) at or after the new
// leader next's first one.
func deposedLoggedNoStep(t testing.TB, old, next *group) {
	t.Helper()
	newSteps := stepTimes(next.logs.String())
	if len(newSteps) == 0 {
		t.Fatal("the new leader logged no step")
	}
	first := slices.MinFunc(newSteps, func(x, y time.Time) int { return x.Compare(y) })
	for _, at := range stepTimes(old.logs.String()) {
		if !at.Before(first) {
			t.Errorf("the deposed leader logged a step at %s, after the new leader's first at %s", at.Format(time.RFC3339Nano), first.Format(time.RFC3339Nano))
		}
	}
}
