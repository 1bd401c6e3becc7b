package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/failoverd/failoverd/test/testenv"
)

// deployDir holds the plain Kubernetes manifests.
const deployDir = "../../deploy/kubernetes"

// The names deploy/kubernetes/config.yaml and rbac.yaml use; the daemon here
// uses the same, so it gets no permission beyond the shipped RBAC.
const (
	rbacNamespace = "failoverd"
	rbacDBNS      = "db"
	rbacDNSNS     = "dns"
	rbacService   = "mariadb-primary"
	rbacEndpoint  = "payments-db"
	// The reader targets (readers.kubernetes, readers.dns).
	rbacReadService  = "mariadb-read"
	rbacReadEndpoint = "payments-db-readers"
	rbacLease        = "failoverd-leader"
	rbacState        = "failoverd-state"
)

// The daemon runs with nothing but deploy/kubernetes's ServiceAccount and
// RBAC (applied for real, authenticated by a TokenRequest token, not
// system:masters): it wins the Lease, keeps its state in the ConfigMap, and
// after a SIGKILL of the primary moves the Service selector, the standby
// taints and the DNSEndpoint to the new primary. A rule missing from
// rbac.yaml makes it fail (a step never happens, or the daemon logs a
// "forbidden" answer).
func TestRBACShippedManifestsSuffice(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		k := testenv.StartKube(t, testenv.KubeOptions{})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		admin := k.Clientset(t)
		for _, ns := range []string{rbacNamespace, rbacDBNS, rbacDNSNS} {
			if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{"serviceaccount.yaml", "rbac.yaml"} {
			applyFile(ctx, t, k, filepath.Join(deployDir, f))
		}
		createShippedRoutingObjects(ctx, t, admin, 3)

		kubeconfig := serviceAccountKubeconfig(ctx, t, k, rbacNamespace, "failoverd")
		sa := clientFor(t, kubeconfig)
		// The token is the ServiceAccount's and nothing more.
		if _, err := sa.CoreV1().Secrets(rbacNamespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("the ServiceAccount lists Secrets (err %v): the token is not limited to rbac.yaml", err)
		}

		g := newGroup(t, groupOptions{engine: e, sites: 3, kube: k})
		g.useShippedNames(kubeconfig)
		g.startDaemon()
		g.waitActive("site0", 30*time.Second)
		g.waitFor("routing of site0 set with the ServiceAccount", 30*time.Second, func() bool {
			return shippedRouting(ctx, t, k, "site0", "127.0.0.1")
		})
		if lease, err := admin.CoordinationV1().Leases(rbacNamespace).Get(ctx, rbacLease, metav1.GetOptions{}); err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			t.Fatalf("Lease %s/%s has no holder: %v", rbacNamespace, rbacLease, err)
		}

		g.kill(0)
		g.expectSolePrimary("site1")
		g.waitFor("Service, taints and DNSEndpoint follow site1", 30*time.Second, func() bool {
			return shippedRouting(ctx, t, k, "site1", "127.0.0.2")
		})
		// The reader targets, with the same ServiceAccount: site2 (re-pointed
		// to site1) is the only reader.
		g.waitFor("reader pods and reader DNSEndpoint list site2", 60*time.Second, func() bool {
			return shippedReaders(ctx, t, k, "mysql-site2", "127.0.0.3")
		})
		cm, err := admin.CoreV1().ConfigMaps(rbacNamespace).Get(ctx, rbacState, metav1.GetOptions{})
		if err != nil || !strings.Contains(cm.Data["orders.json"], `"activeSite": "site1"`) {
			t.Fatalf("state ConfigMap %s/%s: %v, %v", rbacNamespace, rbacState, err, cm.Data)
		}
		// SIGTERM: the leader releases the Lease (an update) on its way out.
		g.stopDaemon()
		lease, err := admin.CoordinationV1().Leases(rbacNamespace).Get(ctx, rbacLease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
			t.Errorf("Lease %s/%s still held by %s after SIGTERM: not released", rbacNamespace, rbacLease, *h)
		}
		// A verb used only on some path (a conflict's re-read, the release)
		// shows up here when the path ran.
		for _, line := range strings.Split(g.logs.String(), "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				t.Errorf("the daemon was refused something: %s", line)
			}
		}
	})
}

// applyFile server-side applies (for real) every object of a manifest file
// as the admin.
func applyFile(ctx context.Context, t *testing.T, k *testenv.Kube, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	resources := map[string]string{"ServiceAccount": "serviceaccounts", "Role": "roles", "RoleBinding": "rolebindings",
		"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}
	dyn := k.Dynamic(t)
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if string(js) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		res, ok := resources[obj.GetKind()]
		if !ok {
			t.Fatalf("%s: unexpected kind %s", file, obj.GetKind())
		}
		gv, err := schema.ParseGroupVersion(obj.GetAPIVersion())
		if err != nil {
			t.Fatal(err)
		}
		client := dyn.Resource(gv.WithResource(res))
		force := true
		opts := metav1.PatchOptions{FieldManager: "failoverd-e2e", Force: &force}
		if ns := obj.GetNamespace(); ns != "" {
			_, err = client.Namespace(ns).Patch(ctx, obj.GetName(), types.ApplyPatchType, js, opts)
		} else {
			_, err = client.Patch(ctx, obj.GetName(), types.ApplyPatchType, js, opts)
		}
		if err != nil {
			t.Fatalf("apply %s %s from %s: %v", obj.GetKind(), obj.GetName(), file, err)
		}
	}
}

// createShippedRoutingObjects creates what the daemon routes but never
// creates: the primary Service (selecting nothing yet) and one Node per site.
func createShippedRoutingObjects(ctx context.Context, t *testing.T, cs kubernetes.Interface, sites int) {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: rbacService, Namespace: rbacDBNS},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"site": "none"}, Ports: []corev1.ServicePort{{Port: 3306}}}}
	if _, err := cs.CoreV1().Services(rbacDBNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	read := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: rbacReadService, Namespace: rbacDBNS},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "mysql"}, Ports: []corev1.ServicePort{{Port: 3306}}}}
	if _, err := cs.CoreV1().Services(rbacDBNS).Create(ctx, read, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: rbacDBNS}}
	if _, err := cs.CoreV1().ServiceAccounts(rbacDBNS).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	no := false
	for i := range sites {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mysql-site%d", i), Namespace: rbacDBNS,
			Labels: map[string]string{"app": "mysql", "site": fmt.Sprintf("site%d", i)}},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: &no, Containers: []corev1.Container{{Name: "mysql", Image: "mysql"}}}}
		if _, err := cs.CoreV1().Pods(rbacDBNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sites {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-site%d", i), Labels: map[string]string{"site": fmt.Sprintf("site%d", i)}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig (context k.Context, as the
// harness's configuration names) whose user is a TokenRequest token of the
// ServiceAccount.
func serviceAccountKubeconfig(ctx context.Context, t *testing.T, k *testenv.Kube, namespace, name string) string {
	t.Helper()
	expiry := int64(3600)
	tr, err := k.Clientset(t).CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", namespace, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[k.Name] = &clientcmdapi.Cluster{Server: k.Server, CertificateAuthorityData: k.RESTConfig.TLSClientConfig.CAData}
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[k.Context] = &clientcmdapi.Context{Cluster: k.Name, AuthInfo: "sa"}
	cfg.CurrentContext = k.Context
	path := filepath.Join(t.TempDir(), "sa.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func clientFor(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// useShippedNames rewrites the harness's configuration to the names of
// deploy/kubernetes (state and Lease in namespace failoverd, the Service in
// db, the DNSEndpoint in dns) and to the ServiceAccount's kubeconfig.
func (g *group) useShippedNames(kubeconfig string) {
	g.t.Helper()
	raw, err := os.ReadFile(g.config)
	if err != nil {
		g.t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		g.t.Fatal(err)
	}
	m := func(v any) map[string]any { return v.(map[string]any) }
	daemon := m(cfg["daemon"])
	st := m(daemon["stateStore"])
	st["namespace"], st["configMap"] = rbacNamespace, rbacState
	le := m(daemon["leaderElection"])
	le["namespace"], le["leaseName"] = rbacNamespace, rbacLease
	for _, c := range cfg["clusters"].([]any) {
		m(c)["kubeconfig"] = kubeconfig
	}
	for _, gr := range cfg["groups"].([]any) {
		dns := m(m(gr)["dns"])
		dns["namespace"], dns["endpointName"] = rbacDNSNS, rbacEndpoint
		for _, s := range m(gr)["sites"].([]any) {
			p := m(m(s)["kubernetes"])
			p["namespace"], p["service"] = rbacDBNS, rbacService
		}
		m(gr)["readers"] = map[string]any{"enabled": true, "kubernetes": map[string]any{"service": rbacReadService},
			"dns": map[string]any{"endpointName": rbacReadEndpoint, "hostname": "orders-ro.example.test"}}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		g.t.Fatal(err)
	}
	if err := os.WriteFile(g.config, out, 0o600); err != nil {
		g.t.Fatal(err)
	}
}

// shippedRouting reports whether the Service selects site, the DNSEndpoint
// targets target, site's node is untainted and every other site's node
// carries the standby taint.
// shippedReaders reports whether exactly pod carries the reader label in
// the shipped namespace, the reader Service selects it and the reader
// DNSEndpoint lists target only.
func shippedReaders(ctx context.Context, t *testing.T, k *testenv.Kube, pod, target string) bool {
	cs := k.Clientset(t)
	svc, err := cs.CoreV1().Services(rbacDBNS).Get(ctx, rbacReadService, metav1.GetOptions{})
	if err != nil || svc.Spec.Selector["failoverd.io/reader"] != "orders" || len(svc.Spec.Selector) != 1 {
		return false
	}
	pods, err := cs.CoreV1().Pods(rbacDBNS).List(ctx, metav1.ListOptions{LabelSelector: "failoverd.io/reader=orders"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Name != pod {
		return false
	}
	ep, err := k.Dynamic(t).Resource(testenv.DNSEndpointGVR).Namespace(rbacDNSNS).Get(ctx, rbacReadEndpoint, metav1.GetOptions{})
	if err != nil {
		return false
	}
	eps, _, _ := unstructured.NestedSlice(ep.Object, "spec", "endpoints")
	if len(eps) != 1 {
		return false
	}
	targets, _, _ := unstructured.NestedStringSlice(eps[0].(map[string]any), "targets")
	return strings.Join(targets, ",") == target
}

func shippedRouting(ctx context.Context, t *testing.T, k *testenv.Kube, site, target string) bool {
	cs := k.Clientset(t)
	svc, err := cs.CoreV1().Services(rbacDBNS).Get(ctx, rbacService, metav1.GetOptions{})
	if err != nil || svc.Spec.Selector["site"] != site || len(svc.Spec.Selector) != 1 {
		return false
	}
	ep, err := k.Dynamic(t).Resource(testenv.DNSEndpointGVR).Namespace(rbacDNSNS).Get(ctx, rbacEndpoint, metav1.GetOptions{})
	if err != nil {
		return false
	}
	eps, _, _ := unstructured.NestedSlice(ep.Object, "spec", "endpoints")
	if len(eps) != 1 {
		return false
	}
	if targets, _, _ := unstructured.NestedStringSlice(eps[0].(map[string]any), "targets"); strings.Join(targets, ",") != target {
		return false
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, n := range nodes.Items {
		tainted := false
		for _, taint := range n.Spec.Taints {
			tainted = tainted || taint.Key == "failoverd.io/standby"
		}
		if tainted != (n.Name != "node-"+site) {
			return false
		}
	}
	return true
}
