// Package kubernetes tests the Kubernetes install path: the plain manifests
// in this directory and the Helm chart in deploy/helm/failoverd. helm lint
// and helm template must pass, the chart must render the same objects as the
// manifests (RBAC above all), the configuration they ship must load and
// agree with the RBAC, and every object must be accepted by a real
// kube-apiserver (server-side apply, dry run). test/e2e/rbac_test.go runs the
// daemon with nothing but these RBAC rules.
package kubernetes

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/failoverd/failoverd/configs"
)

// Files of this directory that kustomization.yaml leaves out on purpose:
// each is applied on its own (see its header).
var separate = []string{"secret.example.yaml", "sidecar-secret.example.yaml", "sidecar-snippet.yaml", "sidecar-podmonitor.yaml", "rbac-remote-cluster.yaml"}

// decodeObjects parses a multi-document YAML stream into objects, skipping
// documents that hold only comments.
func decodeObjects(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: read YAML document: %v", what, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, doc)
		}
		if string(js) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		// UnmarshalJSON keeps integers int64, as the API machinery does.
		if err := obj.UnmarshalJSON(js); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, doc)
		}
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" || obj.GetName() == "" {
			t.Fatalf("%s: a document without kind, apiVersion or name:\n%s", what, doc)
		}
		out = append(out, obj)
	}
}

func readObjects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return decodeObjects(t, file, data)
}

// kustomizeResources lists kustomization.yaml's resources.
func kustomizeResources(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	return k.Resources
}

// manifests returns the objects `kubectl apply -k .` creates.
func manifests(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, f := range kustomizeResources(t) {
		out = append(out, readObjects(t, f)...)
	}
	return out
}

// objectKey names an object: "Kind namespace/name".
func objectKey(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

func find(objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

// Every YAML file here is either in kustomization.yaml or one of the files
// applied on their own, so no manifest is silently left out of an install.
func TestKustomizationListsEveryManifest(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	listed := kustomizeResources(t)
	for _, f := range files {
		if f == "kustomization.yaml" {
			continue
		}
		if !slices.Contains(listed, f) && !slices.Contains(separate, f) {
			t.Errorf("%s is neither in kustomization.yaml nor applied separately", f)
		}
	}
	for _, f := range listed {
		if !slices.Contains(files, f) {
			t.Errorf("kustomization.yaml lists %s, which does not exist", f)
		}
	}
}

// configFile returns the failoverd.yaml of a ConfigMap among objs.
func configFile(t *testing.T, objs []*unstructured.Unstructured, namespace, name string) string {
	t.Helper()
	cm := find(objs, "ConfigMap", namespace, name)
	if cm == nil {
		t.Fatalf("no ConfigMap %s/%s", namespace, name)
	}
	s, ok, _ := unstructured.NestedString(cm.Object, "data", "failoverd.yaml")
	if !ok {
		t.Fatalf("ConfigMap %s/%s has no failoverd.yaml", namespace, name)
	}
	return s
}

// secretsDir is where the Deployment mounts the Secret.
const secretsDir = "/etc/failoverd/secrets/"

// loadShipped loads a shipped configuration as the daemon would, with the
// Secret's files (every key of secret.example.yaml) in a temporary directory
// standing for secretsDir.
func loadShipped(t *testing.T, text string) *configs.Config {
	t.Helper()
	dir := t.TempDir()
	secret := find(readObjects(t, "secret.example.yaml"), "Secret", "failoverd", "failoverd")
	keys, _, _ := unstructured.NestedStringMap(secret.Object, "stringData")
	for k := range keys {
		if err := os.WriteFile(filepath.Join(dir, k), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := configs.Parse(strings.ReplaceAll(text, secretsDir, dir+"/"), dir)
	if err != nil {
		t.Fatalf("the shipped configuration does not load (a secret file it names must be a key of secret.example.yaml):\n%v", err)
	}
	return cfg
}

// The configuration in config.yaml loads and validates (every secret it
// names is a key of the example Secret), and it is the pod flavour: HTTP on
// every address, state and Lease in the daemon's namespace of the cluster it
// runs in.
func TestShippedConfigLoads(t *testing.T) {
	cfg := loadShipped(t, configFile(t, manifests(t), "failoverd", "failoverd-config"))
	d := cfg.Daemon
	if d.Listen != "0.0.0.0:8080" {
		t.Errorf("daemon.listen %q, want 0.0.0.0:8080 (the Service and probes reach the pod's IP)", d.Listen)
	}
	if d.StateStore.Type != "kubernetes" || !d.LeaderElection.Enabled {
		t.Errorf("stateStore.type %q, leaderElection.enabled %v: two replicas need the ConfigMap store and the Lease", d.StateStore.Type, d.LeaderElection.Enabled)
	}
	home := inClusterName(t, cfg)
	if d.StateStore.Cluster != home || d.LeaderElection.Cluster != home || d.StateStore.Namespace != "failoverd" || d.LeaderElection.Namespace != "failoverd" {
		t.Errorf("state %s/%s and Lease %s/%s must be in the daemon's own cluster %s and namespace failoverd",
			d.StateStore.Cluster, d.StateStore.Namespace, d.LeaderElection.Cluster, d.LeaderElection.Namespace, home)
	}
}

// inClusterName is the name of the one cluster reached with the pod's
// ServiceAccount.
func inClusterName(t *testing.T, cfg *configs.Config) string {
	t.Helper()
	var names []string
	for _, c := range cfg.Clusters {
		if c.InCluster {
			names = append(names, c.Name)
		}
	}
	if len(names) != 1 {
		t.Fatalf("clusters with inCluster: true: %v, want exactly one (the daemon's own)", names)
	}
	return names[0]
}

// rule is one RBAC permission on one object kind: "" name means any object
// (or, for create, the collection).
type rule struct {
	Namespace, Group, Resource, Name, Verb string
}

func (r rule) String() string {
	name := r.Name
	if name == "" {
		name = "*"
	}
	return fmt.Sprintf("%s %s/%s %s.%s", r.Verb, r.Namespace, name, r.Resource, r.Group)
}

// grantsOf expands the RBAC objects among objs into the rules the
// ServiceAccount saNamespace/sa holds (ClusterRole rules with an empty
// namespace), failing on wildcards.
func grantsOf(t *testing.T, objs []*unstructured.Unstructured, saNamespace, sa string) []rule {
	t.Helper()
	var out []rule
	for _, b := range objs {
		if b.GetKind() != "RoleBinding" && b.GetKind() != "ClusterRoleBinding" {
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		bound := false
		for _, s := range subjects {
			m := s.(map[string]any)
			if m["kind"] == "ServiceAccount" && m["namespace"] == saNamespace && m["name"] == sa {
				bound = true
			}
		}
		if !bound {
			continue
		}
		kind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		roleNS := "" // a ClusterRole
		if kind == "Role" {
			roleNS = b.GetNamespace()
		}
		role := find(objs, kind, roleNS, name)
		if role == nil {
			t.Fatalf("%s refers to %s %s, which is not there", objectKey(b), kind, name)
		}
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		for _, r := range rules {
			m := r.(map[string]any)
			strs := func(k string) []string {
				v, _, _ := unstructured.NestedStringSlice(m, k)
				return v
			}
			names := strs("resourceNames")
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range strs("apiGroups") {
				for _, res := range strs("resources") {
					for _, v := range strs("verbs") {
						for _, n := range names {
							if g == "*" || res == "*" || v == "*" || n == "*" {
								t.Errorf("%s: wildcard in a rule: %v", objectKey(role), m)
							}
							out = append(out, rule{b.GetNamespace(), g, res, n, v})
						}
					}
				}
			}
		}
	}
	sortRules(out)
	return slices.Compact(out)
}

func sortRules(rs []rule) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].String() < rs[j].String() })
}

// needs is what the daemon's code does in the cluster it runs in for cfg:
// the single source of truth these tests hold the RBAC to.
func needs(cfg *configs.Config, home string) []rule {
	var out []rule
	d := cfg.Daemon
	if d.LeaderElection.Enabled && d.LeaderElection.Cluster == home {
		// daemon/lease.go elect: client-go LeaseLock Create, Get, Update.
		ns := d.LeaderElection.Namespace
		out = append(out, rule{ns, "coordination.k8s.io", "leases", "", "create"},
			rule{ns, "coordination.k8s.io", "leases", d.LeaderElection.LeaseName, "get"},
			rule{ns, "coordination.k8s.io", "leases", d.LeaderElection.LeaseName, "update"})
	}
	if d.StateStore.Type == "kubernetes" && d.StateStore.Cluster == home {
		// store/configmap.go fetch (get) and write (create, update).
		ns := d.StateStore.Namespace
		out = append(out, rule{ns, "", "configmaps", "", "create"},
			rule{ns, "", "configmaps", d.StateStore.ConfigMap, "get"},
			rule{ns, "", "configmaps", d.StateStore.ConfigMap, "update"})
	}
	nodes := false
	for _, g := range cfg.Groups {
		for _, s := range g.Sites {
			p := s.Kubernetes
			if p == nil || p.Cluster != home {
				continue
			}
			if p.Service != "" {
				// kube/service.go ServiceFollower: Get, server-side Apply (patch).
				out = append(out, rule{p.Namespace, "", "services", p.Service, "get"}, rule{p.Namespace, "", "services", p.Service, "patch"})
			}
			nodes = nodes || len(p.NodeSelector) > 0
			if r := g.Readers.Kubernetes; r != nil && g.Readers.Enabled && len(p.PodSelector) > 0 {
				// kube/readers.go ReaderServiceFollower: the reader Service
				// (Get, server-side Apply) and the site's pods (List by
				// podSelector, Get, Update).
				out = append(out, rule{p.Namespace, "", "services", r.Service, "get"}, rule{p.Namespace, "", "services", r.Service, "patch"},
					rule{p.Namespace, "", "pods", "", "get"}, rule{p.Namespace, "", "pods", "", "list"}, rule{p.Namespace, "", "pods", "", "update"})
			}
		}
		if g.DNS != nil && g.DNS.Cluster == home {
			// dns/endpoint.go Follower: Get, Create when missing, server-side Apply (patch).
			ns := g.DNS.Namespace
			out = append(out, rule{ns, "externaldns.k8s.io", "dnsendpoints", "", "create"},
				rule{ns, "externaldns.k8s.io", "dnsendpoints", g.DNS.EndpointName, "get"},
				rule{ns, "externaldns.k8s.io", "dnsendpoints", g.DNS.EndpointName, "patch"})
			if r := g.Readers.DNS; r != nil && g.Readers.Enabled {
				// dns/readers.go ReaderFollower: the same for the reader DNSEndpoint.
				out = append(out, rule{ns, "externaldns.k8s.io", "dnsendpoints", r.EndpointName, "get"},
					rule{ns, "externaldns.k8s.io", "dnsendpoints", r.EndpointName, "patch"})
			}
		}
	}
	if nodes {
		// kube/taint.go: List by nodeSelector, Get after a conflict, Update.
		for _, v := range []string{"get", "list", "update"} {
			out = append(out, rule{"", "", "nodes", "", v})
		}
	}
	sortRules(out)
	return slices.Compact(out)
}

// rbac.yaml grants the ServiceAccount exactly what the code needs for the
// shipped configuration's names: no rule missing (the daemon would be
// forbidden) and none beyond (least privilege).
func TestConfigMatchesRBAC(t *testing.T) {
	objs := manifests(t)
	cfg := loadShipped(t, configFile(t, objs, "failoverd", "failoverd-config"))
	got := grantsOf(t, objs, "failoverd", "failoverd")
	want := needs(cfg, inClusterName(t, cfg))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rbac.yaml grants\n  %s\nthe code needs for config.yaml\n  %s", joinRules(got), joinRules(want))
	}
	// The other clusters: only routing (Service and Nodes), as for a site
	// placed there.
	remote := readObjects(t, "rbac-remote-cluster.yaml")
	for _, cl := range cfg.Clusters {
		if cl.InCluster {
			continue
		}
		got := grantsOf(t, remote, "failoverd", "failoverd")
		var want []rule
		for _, r := range needs(&configs.Config{Groups: cfg.Groups}, cl.Name) {
			if r.Resource != "dnsendpoints" {
				want = append(want, r)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("rbac-remote-cluster.yaml grants\n  %s\nthe code needs in cluster %s\n  %s", joinRules(got), cl.Name, joinRules(want))
		}
	}
}

func joinRules(rs []rule) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.String())
	}
	return strings.Join(s, "\n  ")
}

// The Deployment runs the shipped configuration with the security settings
// the install promises, and its probes are the API's health endpoints.
func TestDeploymentHardening(t *testing.T) {
	d := find(manifests(t), "Deployment", "failoverd", "failoverd")
	if d == nil {
		t.Fatal("no Deployment failoverd/failoverd")
	}
	if n, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); n != 2 {
		t.Errorf("replicas %d, want 2", n)
	}
	pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	if v, _, _ := unstructured.NestedBool(pod, "securityContext", "runAsNonRoot"); !v {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	containers, _, _ := unstructured.NestedSlice(pod, "containers")
	if len(containers) != 1 {
		t.Fatalf("%d containers, want 1", len(containers))
	}
	c := containers[0].(map[string]any)
	for _, f := range []string{"runAsNonRoot", "readOnlyRootFilesystem"} {
		if v, _, _ := unstructured.NestedBool(c, "securityContext", f); !v {
			t.Errorf("container securityContext.%s is not true", f)
		}
	}
	if v, ok, _ := unstructured.NestedBool(c, "securityContext", "allowPrivilegeEscalation"); !ok || v {
		t.Error("container securityContext.allowPrivilegeEscalation is not false")
	}
	if drop, _, _ := unstructured.NestedStringSlice(c, "securityContext", "capabilities", "drop"); !slices.Equal(drop, []string{"ALL"}) {
		t.Errorf("capabilities.drop %v, want [ALL]", drop)
	}
	for probe, path := range map[string]string{"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		if p, _, _ := unstructured.NestedString(c, probe, "httpGet", "path"); p != path {
			t.Errorf("%s path %q, want %s", probe, p, path)
		}
	}
}
