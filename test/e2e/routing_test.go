package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/failoverd/failoverd/test/testenv"
)

// routingInterval is the routingReconcileInterval of these tests (the
// default is 30s): every follower is re-run that often.
const routingInterval = "    routingReconcileInterval: 1s\n"

// createRouted creates in k what a deploy would: the Service mysql-primary
// (selector site0, a user label and annotation failoverd must keep) and one
// Node per listed site (followers never create Services or Nodes).
func createRouted(t testing.TB, k *testenv.Kube, sites ...int) {
	t.Helper()
	ctx := context.Background()
	cs := k.Clientset(t)
	if _, err := cs.CoreV1().Services("default").Create(ctx, deployedService(map[string]string{"site": "site0"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, i := range sites {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-site%d", i), Labels: map[string]string{"site": fmt.Sprintf("site%d", i)}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// deployedService is the Service as a deploy's manifest has it.
func deployedService(selector map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "mysql-primary", Namespace: "default",
			Labels: map[string]string{"team": "payments"}, Annotations: map[string]string{"owner": "dba"}},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Port: 3306}}},
	}
}

// selectsNobody reports whether k's Service has the selector of a cluster
// without the primary.
func selectsNobody(t *testing.T, k *testenv.Kube) bool {
	svc, err := k.Clientset(t).CoreV1().Services("default").Get(context.Background(), "mysql-primary", metav1.GetOptions{})
	return err == nil && len(svc.Spec.Selector) == 1 && svc.Spec.Selector["failoverd.io/no-primary-in-this-site"] == "orders"
}

// keepsUserMetadata fails the test unless k's Service still has the
// deploy's label and annotation.
func keepsUserMetadata(t *testing.T, k *testenv.Kube) {
	t.Helper()
	svc, err := k.Clientset(t).CoreV1().Services("default").Get(context.Background(), "mysql-primary", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Labels["team"] != "payments" || svc.Annotations["owner"] != "dba" {
		t.Fatalf("%s: user metadata lost: labels %v annotations %v", k.Name, svc.Labels, svc.Annotations)
	}
}

// routingState returns the status state of each routing follower.
func routingState(g *group) map[string]string {
	st, err := g.status()
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, f := range st.Routing {
		out[f.Name] = f.State
	}
	return out
}

// site0 in cluster route0, site1 in route1 (two real kube-apiservers): a
// real failover moves both Services, the node taints of both clusters and
// the DNSEndpoint to site1, and the deploy's label on the Services survives.
func TestRoutingFailoverAcrossTwoClusters(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		kubes := testenv.StartKubes(t, 2)
		createRouted(t, kubes[0], 0)
		createRouted(t, kubes[1], 1)
		g := newGroup(t, groupOptions{engine: e, sites: 2, routing: kubes, extraConfig: routingInterval})
		g.startDaemon()
		first := g.waitActive("site0", 30*time.Second)
		g.waitFor("routing at site0", 30*time.Second, func() bool {
			return serviceSelects(t, kubes[0], "site0") && selectsNobody(t, kubes[1]) &&
				!standby(t, kubes[0], "site0") && standby(t, kubes[1], "site1") && dnsTargets(t, kubes[0]) == "127.0.0.1"
		})

		g.kill(0)
		st := g.expectSolePrimary("site1")
		if st.Epoch != first.Epoch+2 {
			t.Errorf("epoch %d after failover, want %d", st.Epoch, first.Epoch+2)
		}
		g.waitFor("routing at site1", 30*time.Second, func() bool {
			return selectsNobody(t, kubes[0]) && serviceSelects(t, kubes[1], "site1") &&
				standby(t, kubes[0], "site0") && !standby(t, kubes[1], "site1") && dnsTargets(t, kubes[0]) == "127.0.0.2"
		})
		for _, k := range kubes {
			keepsUserMetadata(t, k)
		}
		g.waitFor("every follower in sync", 10*time.Second, func() bool {
			s, err := g.status()
			if err != nil || len(s.Routing) != 3 {
				return false
			}
			for _, f := range s.Routing {
				if !f.InSync || f.State != "ok" || f.Epoch != st.Epoch {
					return false
				}
			}
			return true
		})
	})
}

// The kube-apiserver is down during the failover: the MySQL promotion
// completes without it, the followers report it unreachable, and once the
// API is back routing converges on the new primary with no further
// failover (same epoch).
func TestRoutingConvergesAfterAPIServerOutage(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		k := testenv.StartKube(t, testenv.KubeOptions{})
		createRouted(t, k, 0, 1)
		g := newGroup(t, groupOptions{engine: e, sites: 2, routing: []*testenv.Kube{k}, extraConfig: routingInterval})
		g.startDaemon()
		g.waitActive("site0", 30*time.Second)
		g.waitFor("routing at site0", 30*time.Second, func() bool {
			return serviceSelects(t, k, "site0") && standby(t, k, "site1") && dnsTargets(t, k) == "127.0.0.1"
		})

		if err := k.Stop(); err != nil {
			t.Fatalf("stop kube-apiserver: %v", err)
		}
		g.kill(0)
		promoted := g.expectSolePrimary("site1")
		if k.Running() {
			t.Fatal("kube-apiserver is running again before the test restarted it")
		}
		g.waitFor("routing reported unreachable", 20*time.Second, func() bool {
			s := routingState(g)
			return s["kube-service"] == "unreachable" && s["kube-taint"] == "unreachable" && s["dns"] == "unreachable"
		})

		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := k.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		g.waitFor("routing at site1", 30*time.Second, func() bool {
			return serviceSelects(t, k, "site1") && standby(t, k, "site0") && !standby(t, k, "site1") && dnsTargets(t, k) == "127.0.0.2"
		})
		st, err := g.status()
		if err != nil {
			t.Fatal(err)
		}
		if st.Epoch != promoted.Epoch || st.ActiveSite != "site1" {
			t.Fatalf("after the outage: epoch %d active %s, want epoch %d and site1 (no second failover)", st.Epoch, st.ActiveSite, promoted.Epoch)
		}
		keepsUserMetadata(t, k)
	})
}

// A DNSEndpoint target edited by hand and a Service deleted and recreated
// by a deploy (its manifest's selector matches every site's pods) are put
// back by the next re-run, well before the 30s default interval.
func TestRoutingRepairsHandEditsWithinInterval(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		k := testenv.StartKube(t, testenv.KubeOptions{})
		createRouted(t, k, 0, 1)
		g := newGroup(t, groupOptions{engine: e, sites: 2, routing: []*testenv.Kube{k}, extraConfig: routingInterval})
		g.startDaemon()
		g.waitActive("site0", 30*time.Second)
		routed := func() bool {
			return serviceSelects(t, k, "site0") && standby(t, k, "site1") && dnsTargets(t, k) == "127.0.0.1"
		}
		g.waitFor("routing at site0", 30*time.Second, routed)

		ctx := context.Background()
		res := k.Dynamic(t).Resource(testenv.DNSEndpointGVR).Namespace("default")
		obj, err := res.Get(ctx, "orders-db", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eps, _, _ := unstructured.NestedSlice(obj.Object, "spec", "endpoints")
		eps[0].(map[string]any)["targets"] = []any{"192.0.2.66"}
		if err := unstructured.SetNestedSlice(obj.Object, eps, "spec", "endpoints"); err != nil {
			t.Fatal(err)
		}
		if _, err := res.Update(ctx, obj, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
		services := k.Clientset(t).CoreV1().Services("default")
		if err := services.Delete(ctx, "mysql-primary", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := services.Create(ctx, deployedService(map[string]string{"app": "mysql"}), metav1.CreateOptions{FieldManager: "deploy"}); err != nil {
			t.Fatal(err)
		}
		if routed() {
			t.Fatal("the hand edits did not take")
		}
		// Generous against a loaded machine, yet a third of the default interval.
		g.waitFor("hand edits repaired", 10*time.Second, routed)
		keepsUserMetadata(t, k)
		g.waitFor("repairs in status", 5*time.Second, func() bool {
			st, err := g.status()
			if err != nil {
				return false
			}
			repaired := map[string]bool{}
			for _, f := range st.Routing {
				repaired[f.Name] = f.Repairs > 0 && !f.LastRepairAt.IsZero() && f.InSync
			}
			return repaired["dns"] && repaired["kube-service"]
		})
		if n := strings.Count(g.logs.String(), `"msg":"follow.repaired"`); n < 2 {
			t.Fatalf("%d follow.repaired logs, want the DNSEndpoint's and the Service's", n)
		}
		if st, _ := g.status(); st.ActiveSite != "site0" {
			t.Fatalf("active site %s: a repair must not fail over", st.ActiveSite)
		}
	})
}
