package testenv

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// TestKubeObjectsThroughClientGo is acceptance test 2, on the first of two
// clusters; the second proves the clusters sharing one etcd are independent
// and the kubeconfig files work.
func TestKubeObjectsThroughClientGo(t *testing.T) {
	start := time.Now()
	kubes := StartKubes(t, 2)
	t.Logf("2 clusters ready in %v", time.Since(start).Round(time.Millisecond))
	k := kubes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The kubeconfig file, not only RESTConfig, must reach the cluster.
	cs := clientsetFromKubeconfig(t, k.Kubeconfig, k.Context)

	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "site-a-node"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node: %v", err)
	}
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "failoverd.io/fenced", Value: "true", Effect: corev1.TaintEffectNoSchedule})
	if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("taint node: %v", err)
	}
	node, err = cs.CoreV1().Nodes().Get(ctx, "site-a-node", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node: %v", err)
	}
	if !hasTaint(node, "failoverd.io/fenced") {
		t.Fatalf("node taints %v lack failoverd.io/fenced", node.Spec.Taints)
	}

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "mysql-primary", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"site": "a"},
			Ports:    []corev1.ServicePort{{Port: 3306}},
		},
	}
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}
	if _, err := cs.CoreV1().Services("default").Patch(ctx, "mysql-primary", types.MergePatchType,
		[]byte(`{"spec":{"selector":{"site":"b"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch service selector: %v", err)
	}
	got, err := cs.CoreV1().Services("default").Get(ctx, "mysql-primary", metav1.GetOptions{})
	if err != nil || got.Spec.Selector["site"] != "b" {
		t.Fatalf("service selector after patch: %v, %v; want site=b", got.Spec.Selector, err)
	}

	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "failoverd-leader", Namespace: "default"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("failoverd-0"),
			LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime:          &metav1.MicroTime{Time: time.Now()},
		},
	}
	if _, err := cs.CoordinationV1().Leases("default").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create lease: %v", err)
	}
	gotLease, err := cs.CoordinationV1().Leases("default").Get(ctx, "failoverd-leader", metav1.GetOptions{})
	if err != nil || gotLease.Spec.HolderIdentity == nil || *gotLease.Spec.HolderIdentity != "failoverd-0" {
		t.Fatalf("lease holder: %+v, %v", gotLease.Spec, err)
	}

	ep := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "externaldns.k8s.io/v1alpha1",
		"kind":       "DNSEndpoint",
		"metadata":   map[string]any{"name": "mysql-primary", "namespace": "default"},
		"spec": map[string]any{"endpoints": []any{map[string]any{
			"dnsName": "mysql.example.test", "recordType": "A", "recordTTL": int64(30), "targets": []any{"192.0.2.10"},
		}}},
	}}
	dyn := k.Dynamic(t)
	if _, err := dyn.Resource(DNSEndpointGVR).Namespace("default").Create(ctx, ep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create DNSEndpoint: %v", err)
	}
	gotEP, err := dyn.Resource(DNSEndpointGVR).Namespace("default").Get(ctx, "mysql-primary", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get DNSEndpoint: %v", err)
	}
	eps, _, _ := unstructured.NestedSlice(gotEP.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["dnsName"] != "mysql.example.test" {
		t.Fatalf("DNSEndpoint endpoints = %v", eps)
	}

	// The second cluster shares etcd but none of the objects.
	if _, err := kubes[1].Clientset(t).CoreV1().Nodes().Get(ctx, "site-a-node", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("node of cluster 0 visible in cluster 1: err %v", err)
	}
	merged := MergedKubeconfig(t, kubes...)
	cs1 := clientsetFromKubeconfig(t, merged, kubes[1].Context)
	if _, err := cs1.CoreV1().Services("default").Get(ctx, "mysql-primary", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("service of cluster 0 visible through the merged kubeconfig's %s context: err %v", kubes[1].Context, err)
	}
	if _, err := clientsetFromKubeconfig(t, merged, k.Context).CoreV1().Services("default").Get(ctx, "mysql-primary", metav1.GetOptions{}); err != nil {
		t.Fatalf("merged kubeconfig context %s: %v", k.Context, err)
	}
}

// TestKubeThroughProxy checks KubeconfigVia (a cut link to the apiserver
// fails, a restored one works) and Kill/Restart of a single StartKube cluster.
func TestKubeThroughProxy(t *testing.T) {
	k := StartKube(t, KubeOptions{Name: "proxied"})
	p := NewProxy(t, "daemon-to-kube", k.Addr())
	cs := clientsetFromKubeconfig(t, k.KubeconfigVia(t, p.Addr()), "proxied")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("through proxy: %v", err)
	}
	p.Cut()
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	_, err := cs.CoreV1().Namespaces().Get(short, "default", metav1.GetOptions{})
	cancelShort()
	if err == nil {
		t.Fatalf("request through a cut link succeeded")
	}
	p.Restore()
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("after Restore: %v", err)
	}

	// Kill and Restart: same port, certificates and etcd data.
	direct := k.Clientset(t)
	if _, err := direct.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	if err := k.Kill(); err != nil {
		t.Fatalf("kill apiserver: %v", err)
	}
	short, cancelShort = context.WithTimeout(ctx, 3*time.Second)
	_, err = direct.CoreV1().ConfigMaps("default").Get(short, "kept", metav1.GetOptions{})
	cancelShort()
	if err == nil {
		t.Fatalf("request to a killed apiserver succeeded")
	}
	if err := k.Restart(ctx); err != nil {
		t.Fatalf("restart apiserver: %v", err)
	}
	if _, err := direct.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Fatalf("configmap after restart: %v", err)
	}
}

func clientsetFromKubeconfig(t *testing.T, path, context string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		t.Fatalf("load kubeconfig %s context %s: %v", path, context, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, tt := range n.Spec.Taints {
		if tt.Key == key {
			return true
		}
	}
	return false
}
