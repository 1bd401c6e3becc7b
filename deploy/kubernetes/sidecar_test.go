package kubernetes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/sidecar"
)

// flagValue is the value of --name=V or --name V (or -c V) in args.
func flagValue(args []string, names ...string) string {
	for i, a := range args {
		for _, n := range names {
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v
			}
			if a == n && i+1 < len(args) {
				return args[i+1]
			}
		}
	}
	return ""
}

// The sidecar in a MySQL pod gets its own Secret (sidecar-secret.example.yaml)
// and nothing of the daemon's: its keys are exactly the files the sidecar
// of that site reads for the shipped configuration (the view key and the
// sidecar account's password; no API token, kubeconfig or daemon account),
// those alone let it load and build its configuration, and the pod has no
// ServiceAccount token and no RBAC, since the sidecar never calls the
// Kubernetes API. A database pod's owner thus commands no switchover,
// confirm-fence or reclone and reaches no cluster.
func TestSidecarSnippetUsesOnlyItsOwnSecret(t *testing.T) {
	snippet := readObjects(t, "sidecar-snippet.yaml")
	secrets := readObjects(t, "sidecar-secret.example.yaml")
	for _, o := range append(slices.Clone(snippet), secrets...) {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
			t.Errorf("%s: the sidecar needs no Kubernetes API access", objectKey(o))
		}
	}
	var sts *unstructured.Unstructured
	for _, o := range snippet {
		if o.GetKind() == "StatefulSet" {
			sts = o
		}
	}
	if sts == nil {
		t.Fatal("sidecar-snippet.yaml holds no StatefulSet")
	}
	ns := sts.GetNamespace()
	pod, _, _ := unstructured.NestedMap(sts.Object, "spec", "template", "spec")
	if v, ok, _ := unstructured.NestedBool(pod, "automountServiceAccountToken"); !ok || v {
		t.Error("the pod mounts a ServiceAccount token (automountServiceAccountToken is not false); the sidecar never calls the API")
	}

	// The secrets the pod can reach: volumes, env and envFrom.
	splitSecret := func(name string) bool {
		return find(secrets, "Secret", ns, name) != nil
	}
	volumes, _, _ := unstructured.NestedSlice(pod, "volumes")
	secretVolumes := map[string]string{} // volume → Secret
	for _, vol := range volumes {
		v := vol.(map[string]any)
		if name, ok, _ := unstructured.NestedString(v, "secret", "secretName"); ok {
			secretVolumes[v["name"].(string)] = name
			if !splitSecret(name) {
				t.Errorf("volume %s mounts Secret %s, not the sidecar's own (sidecar-secret.example.yaml, namespace %s)", v["name"], name, ns)
			}
		}
		if _, ok := v["projected"]; ok {
			t.Errorf("volume %s is projected: the sidecar needs no ServiceAccount token or other Secret", v["name"])
		}
	}
	containers, _, _ := unstructured.NestedSlice(pod, "containers")
	var sc map[string]any
	for _, c := range containers {
		m := c.(map[string]any)
		env, _, _ := unstructured.NestedSlice(m, "env")
		for _, e := range env {
			if name, ok, _ := unstructured.NestedString(e.(map[string]any), "valueFrom", "secretKeyRef", "name"); ok && !splitSecret(name) {
				t.Errorf("container %s: env from Secret %s", m["name"], name)
			}
		}
		envFrom, _, _ := unstructured.NestedSlice(m, "envFrom")
		for _, e := range envFrom {
			if name, ok, _ := unstructured.NestedString(e.(map[string]any), "secretRef", "name"); ok && !splitSecret(name) {
				t.Errorf("container %s: envFrom Secret %s", m["name"], name)
			}
		}
		if args, _, _ := unstructured.NestedStringSlice(m, "args"); slices.Contains(args, "sidecar") {
			sc = m
		}
	}
	if sc == nil {
		t.Fatal("no container runs `failoverd sidecar`")
	}
	args, _, _ := unstructured.NestedStringSlice(sc, "args")
	group, site := flagValue(args, "--group"), flagValue(args, "--site")
	mounts, _, _ := unstructured.NestedSlice(sc, "volumeMounts")
	var secretName string
	for _, mt := range mounts {
		m := mt.(map[string]any)
		if name, ok := secretVolumes[m["name"].(string)]; ok {
			if m["mountPath"] != strings.TrimSuffix(secretsDir, "/") {
				t.Errorf("Secret %s mounted at %v, the configuration names files under %s", name, m["mountPath"], secretsDir)
			}
			secretName = name
		}
	}
	if secretName == "" {
		t.Fatalf("the sidecar container mounts no Secret at %s", secretsDir)
	}
	secret := find(secrets, "Secret", ns, secretName)
	if secret == nil {
		t.Fatalf("the sidecar's Secret %s/%s is not in sidecar-secret.example.yaml", ns, secretName)
	}
	if secret.GetName() == "failoverd" || secret.GetNamespace() == "failoverd" {
		t.Errorf("%s: the sidecar's Secret must not be the daemon's or live in its namespace", objectKey(secret))
	}
	keys, _, _ := unstructured.NestedStringMap(secret.Object, "stringData")

	// The shipped configuration names the daemon's files; the sidecar's
	// Secret holds exactly the ones it reads.
	text := configFile(t, manifests(t), "failoverd", "failoverd-config")
	full := loadShipped(t, text)
	var g *configs.Group
	for i := range full.Groups {
		if full.Groups[i].Name == group {
			g = &full.Groups[i]
		}
	}
	if g == nil {
		t.Fatalf("--group %q is not a group of config.yaml", group)
	}
	if g.Credentials.Sidecar == nil {
		t.Fatal("config.yaml gives the group no credentials.sidecar: its sidecars would need the daemon's admin password")
	}
	key := func(file string) string { return filepath.Base(file) }
	want := []string{key(full.Daemon.ViewSigningKeyFile), key(g.Credentials.Sidecar.PasswordFile)}
	if g.TLS.Enabled {
		for _, f := range []string{g.TLS.CAFile, g.TLS.CertFile, g.TLS.KeyFile} {
			if f != "" {
				want = append(want, key(f))
			}
		}
	}
	slices.Sort(want)
	got := slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	})
	if !slices.Equal(got, want) {
		t.Errorf("%s holds %v, the sidecar reads exactly %v", objectKey(secret), got, want)
	}
	never := []string{key(full.Daemon.APITokenFile), key(g.Credentials.Admin.PasswordFile), key(g.Credentials.Replication.PasswordFile)}
	for _, cl := range full.Clusters {
		if cl.Kubeconfig != "" {
			never = append(never, key(cl.Kubeconfig))
		}
	}
	for _, k := range never {
		if _, ok := keys[k]; ok {
			t.Errorf("%s holds %s, a secret of the daemon's", objectKey(secret), k)
		}
	}

	// With only that Secret's files the sidecar loads its configuration and
	// builds itself (FromConfig reads the key and the password).
	dir := t.TempDir()
	for k := range keys {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(strings.Repeat("x", 32)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := configs.ParseSidecar(strings.ReplaceAll(text, secretsDir, dir+"/"), dir, group, site)
	if err != nil {
		t.Fatalf("the sidecar of %s/%s does not load with only %s's files:\n%v", group, site, secretName, err)
	}
	if _, opts, err := sidecar.FromConfig(cfg, group, site, sidecar.Overrides{Listen: flagValue(args, "--listen"), MySQLAddress: flagValue(args, "--mysql-address")}); err != nil {
		t.Errorf("sidecar.FromConfig with only %s's files: %v", secretName, err)
	} else if opts.User != g.Credentials.Sidecar.User {
		t.Errorf("the sidecar logs in as %s, want the sidecar account %s", opts.User, g.Credentials.Sidecar.User)
	}
	if c := flagValue(args, "-c", "--config"); filepath.Dir(c) == strings.TrimSuffix(secretsDir, "/") {
		t.Errorf("configuration %s is read from the Secret's directory", c)
	}
}
