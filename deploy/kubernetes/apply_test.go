package kubernetes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/failoverd/failoverd/test/testenv"
)

// PrometheusOperatorVersion is the github.com/prometheus-operator/prometheus-operator
// module whose ServiceMonitor and PodMonitor CRDs are installed
// (scripts/deps puts it in the module cache).
const PrometheusOperatorVersion = "v0.85.0"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// operatorCRDs returns the real ServiceMonitor and PodMonitor CRD files
// from the prometheus-operator module in the Go module cache.
func operatorCRDs(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "github.com", "prometheus-operator", "prometheus-operator@"+PrometheusOperatorVersion,
		"example", "prometheus-operator-crd")
	var files []string
	for _, f := range []string{"monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_podmonitors.yaml"} {
		p := filepath.Join(dir, f)
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s of prometheus-operator %s not in the module cache (%v): run scripts/deps", f, PrometheusOperatorVersion, err)
		}
		files = append(files, p)
	}
	return files
}

// warnings collects the API server's warnings (Pod Security, deprecations).
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// cluster is a real kube-apiserver with the CRDs and namespaces the
// manifests need.
type cluster struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	warn   *warnings
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	k := testenv.StartKube(t, testenv.KubeOptions{}) // installs the DNSEndpoint CRD
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := rest.CopyConfig(k.RESTConfig)
	c := &cluster{warn: &warnings{}}
	cfg.WarningHandler = c.warn
	var err error
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	for _, f := range operatorCRDs(t) {
		for _, crd := range readObjects(t, f) {
			if _, err := c.dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
				t.Fatalf("install CRD %s: %v", crd.GetName(), err)
			}
		}
	}
	cs := k.Clientset(t)
	// The daemon's namespace warns of anything the restricted Pod Security
	// Standard refuses; the others exist so their objects can be applied.
	for ns, labels := range map[string]map[string]string{
		"failoverd":  {"pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": "latest"},
		"db":         nil,
		"dns":        nil,
		"monitoring": nil,
	} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Discovery serves a new CRD's kind a moment after it is Established.
	want := schema.GroupKind{Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}
	alsoWant := schema.GroupKind{Group: "monitoring.coreos.com", Kind: "PodMonitor"}
	for {
		groups, err := restmapper.GetAPIGroupResources(dc)
		if err == nil {
			c.mapper = restmapper.NewDiscoveryRESTMapper(groups)
			if _, err = c.mapper.RESTMapping(want); err == nil {
				if _, err = c.mapper.RESTMapping(alsoWant); err == nil {
					break
				}
				want = alsoWant
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("discovery never served %s: %v", want, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	c.warn.take()
	return c
}

// apply is a server-side apply of obj with dryRun=All: the API server
// validates, defaults and admits it (schemas, CRDs, Pod Security) and
// stores nothing.
func (c *cluster) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("map %s: %w", gvk, err)
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	var res dynamic.ResourceInterface = c.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			return fmt.Errorf("%s has no namespace", objectKey(obj))
		}
		res = c.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	force := true
	_, err = res.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		DryRun: []string{metav1.DryRunAll}, FieldManager: "failoverd-deploy-test", Force: &force,
	})
	return err
}

// Every object of the plain manifests (also the example Secret, the sidecar
// example and the remote-cluster RBAC) and of the chart (with every toggle
// on) is accepted by a real kube-apiserver, nothing in the daemon's
// namespace draws a Pod Security warning, and nothing is stored.
func TestServerSideDryRun(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sets := map[string][]*unstructured.Unstructured{"manifests": manifests(t)}
	for _, f := range separate {
		sets[f] = readObjects(t, f)
	}
	sets["chart"] = render(t, append(allToggles, "--set", "secret.create=true,secret.data.api\\.token=t,secret.data.view\\.key=k")...)
	for name, objs := range sets {
		for _, o := range objs {
			if err := c.apply(ctx, o); err != nil {
				t.Errorf("%s: %s: %v", name, objectKey(o), err)
			}
			if w := c.warn.take(); len(w) > 0 && o.GetNamespace() == "failoverd" {
				t.Errorf("%s: %s: warnings: %v", name, objectKey(o), w)
			}
		}
	}
	// Dry run: nothing was written.
	if _, err := c.dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).
		Namespace("failoverd").Get(ctx, "failoverd", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment exists after a dry run (err %v)", err)
	}

	// The warning check works: a root, writable container in the same
	// namespace draws warnings.
	bad := find(manifests(t), "Deployment", "failoverd", "failoverd").DeepCopy()
	bad.SetName("not-hardened")
	unstructured.RemoveNestedField(bad.Object, "spec", "template", "spec", "securityContext")
	containers, _, _ := unstructured.NestedSlice(bad.Object, "spec", "template", "spec", "containers")
	delete(containers[0].(map[string]any), "securityContext")
	_ = unstructured.SetNestedSlice(bad.Object, containers, "spec", "template", "spec", "containers")
	if err := c.apply(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if w := c.warn.take(); len(w) == 0 {
		t.Error("no Pod Security warning for a container without securityContext: the check above proves nothing")
	}
}
