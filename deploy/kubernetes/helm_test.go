package kubernetes

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/failoverd/failoverd/test/testenv"
)

// chartDir is the Helm chart, relative to this package.
const chartDir = "../helm/failoverd"

// exampleValues is the chart's example group, the one the plain manifests
// describe: the chart's defaults hold no group.
const exampleValues = chartDir + "/examples/payments-values.yaml"

// allToggles turns on everything the plain manifests contain, so the chart
// renders the same set of objects.
var allToggles = []string{"--set", "serviceMonitor.enabled=true,networkPolicy.enabled=true,networkPolicy.sidecar.enabled=true"}

// helm runs the helm that scripts/deps caches (test/tools/helm) offline.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(testenv.BinDir(), "helm")
	if _, err := os.Stat(bin); err != nil {
		if testing.Short() {
			t.Skipf("helm not found in %s (-short: scripts/deps not run)", testenv.BinDir())
		}
		t.Fatalf("helm not found in %s: run scripts/deps", testenv.BinDir())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	// Keep helm away from the user's repositories, plugins and caches.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home+"/config", "HELM_CACHE_HOME="+home+"/cache", "HELM_DATA_HOME="+home+"/data")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// render runs helm template for release "failoverd" in namespace failoverd
// with the example group's values.
func render(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := helm(t, append([]string{"template", "failoverd", chartDir, "--namespace", "failoverd", "-f", exampleValues}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, out)
	}
	return decodeObjects(t, "helm template", []byte(out))
}

func TestHelmLint(t *testing.T) {
	for _, args := range [][]string{nil, allToggles, {"--set", "secret.create=true,secret.data.api\\.token=t,secret.data.view\\.key=k"}} {
		out, err := helm(t, append([]string{"lint", "--strict", chartDir, "--namespace", "failoverd", "-f", exampleValues}, args...)...)
		if err != nil {
			t.Errorf("helm lint --strict %v: %v\n%s", args, err, out)
		}
	}
}

func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, objectKey(o))
	}
	slices.Sort(out)
	return out
}

// The chart renders with its defaults and its toggles, and refuses a
// configuration without the cluster it runs in.
func TestHelmTemplate(t *testing.T) {
	base := kinds(render(t))
	for _, k := range []string{"Deployment failoverd/failoverd", "Service failoverd/failoverd", "ConfigMap failoverd/failoverd-config",
		"ServiceAccount failoverd/failoverd", "Role failoverd/failoverd", "ClusterRole /failoverd-node-taints"} {
		if !slices.Contains(base, k) {
			t.Errorf("default render lacks %s; it has %v", k, base)
		}
	}
	for _, k := range []string{"ServiceMonitor", "NetworkPolicy", "Secret"} {
		if slices.ContainsFunc(base, func(s string) bool { return strings.HasPrefix(s, k+" ") }) {
			t.Errorf("default render has a %s (off by default): %v", k, base)
		}
	}

	t.Run("toggles off", func(t *testing.T) {
		objs := render(t, "--set", "rbac.create=false,rbac.nodeTaints=false,serviceAccount.create=false,serviceAccount.name=mine")
		for _, o := range objs {
			if strings.HasPrefix(o.GetAPIVersion(), "rbac.") || o.GetKind() == "ServiceAccount" {
				t.Errorf("rendered %s with RBAC and the ServiceAccount turned off", objectKey(o))
			}
		}
		sa, _, _ := unstructured.NestedString(find(objs, "Deployment", "failoverd", "failoverd").Object, "spec", "template", "spec", "serviceAccountName")
		if sa != "mine" {
			t.Errorf("serviceAccountName %q, want mine", sa)
		}
	})

	t.Run("secret", func(t *testing.T) {
		objs := render(t, "--set", "secret.create=true,secret.data.api\\.token=t,secret.data.view\\.key=k")
		s := find(objs, "Secret", "failoverd", "failoverd")
		if s == nil {
			t.Fatalf("no Secret: %v", kinds(objs))
		}
		if got, _, _ := unstructured.NestedStringMap(s.Object, "data"); got["api.token"] != "dA==" || got["view.key"] != "aw==" {
			t.Errorf("Secret data %v", got)
		}
		if out, err := helm(t, "template", "failoverd", chartDir, "-f", exampleValues, "--set", "secret.create=true"); err == nil || !strings.Contains(out, "secret.create needs secret.data.api.token") {
			t.Errorf("secret.create without api.token rendered:\n%s", out)
		}
	})

	t.Run("existing ConfigMap", func(t *testing.T) {
		objs := render(t, "--set", "config.existingConfigMap=mine,rbac.services[0].namespace=apps,rbac.services[0].names={a,b}")
		if find(objs, "ConfigMap", "failoverd", "failoverd-config") != nil {
			t.Error("rendered its own ConfigMap next to config.existingConfigMap")
		}
		got := grantsOf(t, objs, "failoverd", "failoverd")
		for _, want := range []rule{{"apps", "", "services", "a", "patch"}, {"apps", "", "services", "b", "get"}} {
			if !slices.Contains(got, want) {
				t.Errorf("grants lack %s: %s", want, joinRules(got))
			}
		}
		if slices.ContainsFunc(got, func(r rule) bool { return r.Resource == "dnsendpoints" || r.Namespace == "db" }) {
			t.Errorf("with config.existingConfigMap the routing rules come from rbac.* only: %s", joinRules(got))
		}
	})

	t.Run("release name", func(t *testing.T) {
		out, err := helm(t, "template", "orders", chartDir, "--namespace", "ops", "-f", exampleValues)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		objs := decodeObjects(t, "helm template orders", []byte(out))
		cfg := loadShipped(t, configFile(t, objs, "ops", "orders-failoverd-config"))
		if le := cfg.Daemon.LeaderElection; le.Namespace != "ops" || le.LeaseName != "orders-failoverd-leader" {
			t.Errorf("Lease %s/%s, want ops/orders-failoverd-leader", le.Namespace, le.LeaseName)
		}
		// The rules follow the names the configuration uses.
		if got, want := grantsOf(t, objs, "ops", "orders-failoverd"), needs(cfg, "east"); !reflect.DeepEqual(got, want) {
			t.Errorf("release orders grants\n  %s\nthe code needs\n  %s", joinRules(got), joinRules(want))
		}
	})

	t.Run("no home cluster", func(t *testing.T) {
		out, err := helm(t, "template", "failoverd", chartDir, "-f", exampleValues, "--set", "homeCluster=elsewhere")
		if err == nil || !strings.Contains(out, "config.clusters needs the home cluster") {
			t.Errorf("homeCluster not in config.clusters: err %v\n%s", err, out)
		}
	})
}

// rbacView is an RBAC object reduced to what grants permissions.
func rbacView(o *unstructured.Unstructured) map[string]any {
	v := map[string]any{"kind": o.GetKind(), "namespace": o.GetNamespace(), "name": o.GetName()}
	for _, f := range []string{"rules", "roleRef", "subjects"} {
		if x, ok := o.Object[f]; ok {
			v[f] = x
		}
	}
	return v
}

func rbacObjects(objs []*unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		if strings.HasPrefix(o.GetAPIVersion(), "rbac.authorization.k8s.io/") || o.GetKind() == "ServiceAccount" {
			out[objectKey(o)] = rbacView(o)
		}
	}
	return out
}

// The chart's RBAC (release failoverd in namespace failoverd, defaults) is
// the plain manifests' RBAC: same Roles, ClusterRoles, bindings and rules.
func TestChartRBACEqualsManifests(t *testing.T) {
	chart := rbacObjects(render(t))
	plain := rbacObjects(manifests(t))
	for _, k := range slices.Sorted(maps.Keys(plain)) {
		c, ok := chart[k]
		if !ok {
			t.Errorf("the chart does not render %s", k)
			continue
		}
		if !reflect.DeepEqual(c, plain[k]) {
			cy, _ := yaml.Marshal(c)
			py, _ := yaml.Marshal(plain[k])
			t.Errorf("%s differs:\nchart:\n%s\nmanifests:\n%s", k, cy, py)
		}
	}
	for k := range chart {
		if _, ok := plain[k]; !ok {
			t.Errorf("the chart renders %s, which the manifests lack", k)
		}
	}
}

// normalized drops what only the chart adds: Helm's labels on each object
// (the manifests' labels must be among them) and the config checksum.
func normalized(t *testing.T, o *unstructured.Unstructured, plainLabels map[string]string) map[string]any {
	t.Helper()
	c := o.DeepCopy()
	for k, v := range plainLabels {
		if c.GetLabels()[k] != v {
			t.Errorf("%s: label %s=%q, the manifests have %q", objectKey(o), k, c.GetLabels()[k], v)
		}
	}
	unstructured.RemoveNestedField(c.Object, "metadata", "labels")
	if ann, ok, _ := unstructured.NestedStringMap(c.Object, "spec", "template", "metadata", "annotations"); ok {
		delete(ann, "checksum/config")
		if len(ann) == 0 {
			unstructured.RemoveNestedField(c.Object, "spec", "template", "metadata", "annotations")
		} else {
			_ = unstructured.SetNestedStringMap(c.Object, ann, "spec", "template", "metadata", "annotations")
		}
	}
	if c.GetKind() == "ConfigMap" {
		// The file's text differs (the chart writes keys sorted); its content must not.
		var doc any
		s, _, _ := unstructured.NestedString(c.Object, "data", "failoverd.yaml")
		if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
			t.Fatalf("%s: %v", objectKey(o), err)
		}
		c.Object["data"] = map[string]any{"failoverd.yaml": doc}
	}
	return c.Object
}

// With the toggles the manifests have, the chart renders the manifests'
// objects (and the sidecar's NetworkPolicy of sidecar-snippet.yaml), the
// same but for Helm's labels.
func TestChartRendersTheManifests(t *testing.T) {
	plain := manifests(t)
	plain = append(plain, find(readObjects(t, "sidecar-snippet.yaml"), "NetworkPolicy", "db", "failoverd-sidecar"))
	chart := render(t, allToggles...)
	if got, want := kinds(chart), kinds(plain); !slices.Equal(got, want) {
		t.Fatalf("chart renders\n  %s\nthe manifests hold\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, p := range plain {
		c := find(chart, p.GetKind(), p.GetNamespace(), p.GetName())
		got, want := normalized(t, c, p.GetLabels()), normalized(t, p, nil)
		if !reflect.DeepEqual(got, want) {
			gy, _ := yaml.Marshal(got)
			wy, _ := yaml.Marshal(want)
			t.Errorf("%s differs:\nchart:\n%s\nmanifests:\n%s", objectKey(p), gy, wy)
		}
	}
}
