package kubernetes

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// sidecarContainer is the failoverd sidecar of sidecar-snippet.yaml's
// StatefulSet, with the pod template's labels and namespace.
func sidecarContainer(t *testing.T) (container map[string]any, podLabels map[string]string, namespace string) {
	t.Helper()
	var sts *unstructured.Unstructured
	for _, o := range readObjects(t, "sidecar-snippet.yaml") {
		if o.GetKind() == "StatefulSet" {
			sts = o
		}
	}
	if sts == nil {
		t.Fatal("sidecar-snippet.yaml has no StatefulSet")
	}
	podLabels, _, _ = unstructured.NestedStringMap(sts.Object, "spec", "template", "metadata", "labels")
	cs, _, _ := unstructured.NestedSlice(sts.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		if m := c.(map[string]any); m["name"] == "failoverd-sidecar" {
			return m, podLabels, sts.GetNamespace()
		}
	}
	t.Fatal("sidecar-snippet.yaml has no failoverd-sidecar container")
	return nil, nil, ""
}

// matches reports whether selector's matchLabels select labels.
func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// The shipped PodMonitor scrapes the sidecar of sidecar-snippet.yaml: it
// lives in the snippet's namespace, selects its pods, scrapes the sidecar
// container's named port at /metrics and keeps the pod's site label; the
// NetworkPolicy beside it admits Prometheus to that port's number on the
// same pods (the snippet's own policy admits only peers and the daemon).
func TestSidecarPodMonitorScrapesTheSnippetsSidecar(t *testing.T) {
	container, podLabels, ns := sidecarContainer(t)
	var portName string
	var portNumber int64
	ports, _, _ := unstructured.NestedSlice(container, "ports")
	for _, p := range ports {
		m := p.(map[string]any)
		portName, _ = m["name"].(string)
		portNumber, _ = m["containerPort"].(int64)
	}
	if portName == "" || portNumber == 0 {
		t.Fatalf("the sidecar container has no named port: %v", ports)
	}
	objs := readObjects(t, "sidecar-podmonitor.yaml")
	pm := find(objs, "PodMonitor", ns, "failoverd-sidecar")
	if pm == nil {
		t.Fatalf("sidecar-podmonitor.yaml has no PodMonitor %s/failoverd-sidecar", ns)
	}
	if sel, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels"); !matches(sel, podLabels) {
		t.Errorf("PodMonitor selects %v, the snippet's pods are labelled %v", sel, podLabels)
	}
	if keep, _, _ := unstructured.NestedStringSlice(pm.Object, "spec", "podTargetLabels"); !slices.Contains(keep, "site") || podLabels["site"] == "" {
		t.Errorf("PodMonitor keeps pod labels %v: want site, which the snippet's pods carry", keep)
	}
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != portName || eps[0].(map[string]any)["path"] != "/metrics" {
		t.Errorf("PodMonitor endpoints %v, want port %s path /metrics", eps, portName)
	}
	np := find(objs, "NetworkPolicy", ns, "failoverd-sidecar-metrics")
	if np == nil {
		t.Fatalf("sidecar-podmonitor.yaml has no NetworkPolicy %s/failoverd-sidecar-metrics", ns)
	}
	if sel, _, _ := unstructured.NestedStringMap(np.Object, "spec", "podSelector", "matchLabels"); !matches(sel, podLabels) {
		t.Errorf("the NetworkPolicy selects %v, the snippet's pods are labelled %v", sel, podLabels)
	}
	rules, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
	var open []int64
	for _, r := range rules {
		ps, _, _ := unstructured.NestedSlice(r.(map[string]any), "ports")
		for _, p := range ps {
			if n, ok := p.(map[string]any)["port"].(int64); ok {
				open = append(open, n)
			}
		}
	}
	if !slices.Equal(open, []int64{portNumber}) {
		t.Errorf("the NetworkPolicy opens ports %v, want only the sidecar's %d", open, portNumber)
	}
}
