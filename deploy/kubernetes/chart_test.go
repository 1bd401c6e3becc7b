package kubernetes

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/failoverd/failoverd"
)

// The chart's copies of deploy/ files (it cannot read outside its
// directory): chart path → the file it copies.
var chartCopies = map[string]string{
	chartDir + "/files/failoverd-rules.yml":      "../prometheus/failoverd-rules.yml",
	chartDir + "/files/failoverd-dashboard.json": "../grafana/failoverd.json",
}

// TestChartFilesAreDeployCopies: the chart's alert rules and dashboard are
// byte for byte deploy/prometheus's and deploy/grafana's, so a Helm install
// never alerts or graphs differently from the plain files. Fix: make
// chart-files.
func TestChartFilesAreDeployCopies(t *testing.T) {
	for copyPath, orig := range chartCopies {
		c, err := os.ReadFile(copyPath)
		if err != nil {
			t.Fatalf("%v: run make chart-files", err)
		}
		o, err := os.ReadFile(orig)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c, o) {
			t.Errorf("%s differs from %s: run make chart-files", filepath.Clean(copyPath), filepath.Clean(orig))
		}
	}
}

// TestHelmValuesSchemaRejectsTypos: a values typo (an unknown key at any
// level, a wrong type, a value out of range) fails helm lint and helm
// template, naming the key, instead of being ignored (a misspelt
// podDisruptionBudget.enabled would silently keep the default). Guards
// values.schema.json and its additionalProperties: false.
func TestHelmValuesSchemaRejectsTypos(t *testing.T) {
	bad := t.TempDir() + "/typo-values.yaml"
	if err := os.WriteFile(bad, []byte("podDisruptionBudget:\n  enable: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string // in helm's output
	}{
		{"unknown top-level key", []string{"--set", "replicas=3"}, "'replicas' not allowed"},
		{"nested typo", []string{"--set", "serviceMonitor.enabeld=true"}, "'enabeld' not allowed"},
		{"typo in a values file", []string{"-f", bad}, "'enable' not allowed"},
		{"typo in a config cluster", []string{"--set", "config.clusters[0].name=east,config.clusters[0].inCluser=true"}, "'inCluser' not allowed"},
		{"wrong type", []string{"--set", "replicaCount=two"}, "/replicaCount"},
		{"wrong enum", []string{"--set", "image.pullPolicy=Sometimes"}, "/image/pullPolicy"},
		{"out of range", []string{"--set", "startupProbe.failureThreshold=0"}, "/startupProbe/failureThreshold"},
		{"bad budget", []string{"--set", "podDisruptionBudget.maxUnavailable=some"}, "/podDisruptionBudget/maxUnavailable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, cmd := range [][]string{
				{"lint", "--strict", chartDir, "--namespace", "failoverd", "-f", exampleValues},
				{"template", "failoverd", chartDir, "--namespace", "failoverd", "-f", exampleValues},
			} {
				out, err := helm(t, append(cmd, c.args...)...)
				if err == nil || !strings.Contains(out, c.want) {
					t.Errorf("helm %s %v: err %v, want a failure naming %q:\n%s", cmd[0], c.args, err, c.want, out)
				}
			}
		})
	}
	// The schema admits what values.yaml documents.
	render(t, "--set", "replicaCount=3,podDisruptionBudget.maxUnavailable=50%,image.tag=1.2.3,prometheusRule.enabled=true,grafanaDashboard.enabled=true")
}

// TestHelmBareInstallFailsNamingWhatToSet: the chart holds no example
// group, so a bare install refuses with one message naming every value to
// set, instead of deploying a daemon that manages someone else's example
// sites (or crash-loops on them). A ConfigMap of one's own needs no group
// in values.
func TestHelmBareInstallFailsNamingWhatToSet(t *testing.T) {
	out, err := helm(t, "template", "failoverd", chartDir, "--namespace", "failoverd")
	if err == nil {
		t.Fatalf("a bare helm template rendered:\n%s", out)
	}
	for _, want := range []string{"config.groups is empty", "examples/payments-values.yaml", "config.existingConfigMap", "homeCluster is empty"} {
		if !strings.Contains(out, want) {
			t.Errorf("the bare install's message lacks %q:\n%s", want, out)
		}
	}
	objs := render(t, "--set", "config.groups=null,config.existingConfigMap=mine")
	if find(objs, "Deployment", "failoverd", "failoverd") == nil {
		t.Errorf("with config.existingConfigMap and no group the chart rendered %v", kinds(objs))
	}
}

// TestHelmPodDisruptionBudget: by default a PodDisruptionBudget lets a
// drain evict one daemon at a time (the Lease always has a replica to pass
// to), selecting exactly the Deployment's pods; it can be turned off.
func TestHelmPodDisruptionBudget(t *testing.T) {
	objs := render(t)
	pdb := find(objs, "PodDisruptionBudget", "failoverd", "failoverd")
	if pdb == nil {
		t.Fatalf("no PodDisruptionBudget by default: %v", kinds(objs))
	}
	if n, _, _ := unstructured.NestedInt64(pdb.Object, "spec", "maxUnavailable"); n != 1 {
		t.Errorf("maxUnavailable %d, want 1", n)
	}
	sel, _, _ := unstructured.NestedStringMap(pdb.Object, "spec", "selector", "matchLabels")
	want, _, _ := unstructured.NestedStringMap(find(objs, "Deployment", "failoverd", "failoverd").Object, "spec", "selector", "matchLabels")
	if len(sel) == 0 || !reflect.DeepEqual(sel, want) {
		t.Errorf("PodDisruptionBudget selects %v, the Deployment's pods are %v", sel, want)
	}
	if got := render(t, "--set", "podDisruptionBudget.enabled=false"); find(got, "PodDisruptionBudget", "failoverd", "failoverd") != nil {
		t.Error("podDisruptionBudget.enabled=false still renders it")
	}
}

// container returns the Deployment's failoverd container.
func container(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	d := find(objs, "Deployment", "failoverd", "failoverd")
	if d == nil {
		t.Fatalf("no Deployment: %v", kinds(objs))
	}
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("%d containers, want 1", len(cs))
	}
	return cs[0].(map[string]any)
}

// TestHelmStartupProbe: the daemon gets a startupProbe on /healthz, so a
// slow start (state load, every cluster's API) is not killed by the
// liveness probe, with its timing from values.
func TestHelmStartupProbe(t *testing.T) {
	c := container(t, render(t, "--set", "startupProbe.periodSeconds=5,startupProbe.failureThreshold=12"))
	p, ok, _ := unstructured.NestedMap(c, "startupProbe")
	if !ok {
		t.Fatalf("no startupProbe: %v", c)
	}
	path, _, _ := unstructured.NestedString(p, "httpGet", "path")
	port, _, _ := unstructured.NestedString(p, "httpGet", "port")
	period, _, _ := unstructured.NestedInt64(p, "periodSeconds")
	threshold, _, _ := unstructured.NestedInt64(p, "failureThreshold")
	if path != "/healthz" || port != "http" || period != 5 || threshold != 12 {
		t.Errorf("startupProbe %v, want /healthz on http every 5 s, 12 failures", p)
	}
}

// TestHelmImageIsTheVersion: the chart runs the image tagged with the
// VERSION file's release unless image.tag says otherwise.
func TestHelmImageIsTheVersion(t *testing.T) {
	if got, want := container(t, render(t))["image"], "ghcr.io/failoverd/failoverd:"+failoverd.Version; got != want {
		t.Errorf("image %v, want %s", got, want)
	}
	if got := container(t, render(t, "--set", "image.tag=1.2.3"))["image"]; got != "ghcr.io/failoverd/failoverd:1.2.3" {
		t.Errorf("image.tag=1.2.3 runs %v", got)
	}
}

// TestHelmPrometheusRuleAndDashboard: both are off by default; turned on,
// the PrometheusRule holds exactly deploy/prometheus's rules (the same spec
// as failoverd-prometheusrule.yaml) with the ruleSelector's labels, and the
// dashboard ConfigMap holds deploy/grafana's JSON byte for byte with the
// Grafana sidecar's label.
func TestHelmPrometheusRuleAndDashboard(t *testing.T) {
	for _, k := range kinds(render(t)) {
		if strings.HasPrefix(k, "PrometheusRule ") || strings.HasSuffix(k, "-dashboard") {
			t.Errorf("rendered %s by default", k)
		}
	}
	objs := render(t, "--set", "prometheusRule.enabled=true,prometheusRule.labels.release=kps,grafanaDashboard.enabled=true,grafanaDashboard.namespace=monitoring,grafanaDashboard.annotations.grafana_folder=Databases")

	rule := find(objs, "PrometheusRule", "failoverd", "failoverd")
	if rule == nil {
		t.Fatalf("no PrometheusRule: %v", kinds(objs))
	}
	if rule.GetLabels()["release"] != "kps" {
		t.Errorf("PrometheusRule labels %v lack release=kps", rule.GetLabels())
	}
	var shipped map[string]any
	b, err := os.ReadFile("../prometheus/failoverd-prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &shipped); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rule.Object["spec"], shipped["spec"]) {
		t.Error("the chart's PrometheusRule spec differs from deploy/prometheus/failoverd-prometheusrule.yaml's")
	}

	dash := find(objs, "ConfigMap", "monitoring", "failoverd-dashboard")
	if dash == nil {
		t.Fatalf("no ConfigMap monitoring/failoverd-dashboard: %v", kinds(objs))
	}
	if dash.GetLabels()["grafana_dashboard"] != "1" || dash.GetAnnotations()["grafana_folder"] != "Databases" {
		t.Errorf("dashboard labels %v annotations %v", dash.GetLabels(), dash.GetAnnotations())
	}
	want, err := os.ReadFile("../grafana/failoverd.json")
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(dash.Object, "data", "failoverd.json"); got != string(want) {
		t.Errorf("the dashboard ConfigMap's failoverd.json (%d bytes) is not deploy/grafana/failoverd.json (%d bytes)", len(got), len(want))
	}
}
