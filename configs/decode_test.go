package configs

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// validYAML is a valid two-site config whose files live in secrets(t); the
// tests insert lines into it.
const validYAML = `daemon:
  listen: 127.0.0.1:8080
clusters:
  - name: east
    inCluster: true
groups:
  - name: orders
    engine: mysql
    credentials:
      admin: {user: failoverd, passwordFile: admin.pw}
      replication: {user: repl, passwordFile: repl.pw}
    sites:
      - name: east
        mysql:
          address: db-east:3306
        kubernetes:
          cluster: east
          namespace: db
          service: primary
          podSelector:
            Site: East
            app.kubernetes.io/name: mysql
      - name: west
        mysql:
          address: db-west:3306
`

// problemsOf parses y and returns its problems (failing when it is valid).
func problemsOf(t *testing.T, y string) []Problem {
	t.Helper()
	_, err := Parse(y, secrets(t))
	if err == nil {
		t.Fatalf("accepted:\n%s", y)
	}
	var ps *Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error is not *Problems: %v", err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("error does not wrap ErrInvalid: %v", err)
	}
	return ps.List
}

// findProblem returns the problem at path mentioning every word, or fails.
func findProblem(t *testing.T, list []Problem, path string, words ...string) Problem {
	t.Helper()
next:
	for _, p := range list {
		if p.Path != path {
			continue
		}
		for _, w := range words {
			if !strings.Contains(p.Message, w) {
				continue next
			}
		}
		return p
	}
	t.Errorf("no problem at %s mentioning %q; got:\n%v", path, words, (&Problems{List: list}).Error())
	return Problem{}
}

func TestSelectorKeysKeepTheirCase(t *testing.T) {
	cfg, err := Parse(validYAML, secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Groups[0].Sites[0].Kubernetes.PodSelector
	want := map[string]string{"Site": "East", "app.kubernetes.io/name": "mysql"}
	if len(got) != len(want) || got["Site"] != "East" || got["app.kubernetes.io/name"] != "mysql" {
		t.Errorf("podSelector = %v, want %v (the Service would select no pods)", got, want)
	}
}

func TestSelectorKeysDifferingInCaseAreDistinct(t *testing.T) {
	y := strings.Replace(validYAML, "            Site: East\n", "            Site: East\n            site: east\n", 1)
	cfg, err := Parse(y, secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	if sel := cfg.Groups[0].Sites[0].Kubernetes.PodSelector; sel["Site"] != "East" || sel["site"] != "east" {
		t.Errorf("podSelector = %v, want both Site and site (label keys are case-sensitive)", sel)
	}
}

func TestCaseDuplicateKeyIsReported(t *testing.T) {
	// Both spellings used to be one key, and which value won depended on
	// map iteration order.
	y := strings.Replace(validYAML, "    engine: mysql\n", "    pollInterval: 1s\n    engine: mysql\n    pollinterval: 2s\n", 1)
	for range 10 {
		list := problemsOf(t, y)
		findProblem(t, list, "groups[0].pollinterval", "pollInterval", "line 8", "line 10", "case")
	}
}

func TestCaseVariantAloneIsUnknown(t *testing.T) {
	y := strings.Replace(validYAML, "    engine: mysql\n", "    engine: mysql\n    PollInterval: 2s\n", 1)
	findProblem(t, problemsOf(t, y), "groups[0].PollInterval", "unknown key", "did you mean pollInterval?", "case")
}

func TestDuplicateKeyIsReported(t *testing.T) {
	y := strings.Replace(validYAML, "    engine: mysql\n", "    engine: mysql\n    engine: mariadb\n", 1)
	findProblem(t, problemsOf(t, y), "groups[0].engine", "duplicate", "line 8", "line 9")

	y = strings.Replace(validYAML, "            Site: East\n", "            Site: East\n            Site: West\n", 1)
	findProblem(t, problemsOf(t, y), "groups[0].sites[0].kubernetes.podSelector.Site", "duplicate", "line 21", "line 22")
}

func TestWrongTypeDoesNotHideOtherProblems(t *testing.T) {
	y := strings.Replace(validYAML, "    engine: mysql\n", "    engine: oracle\n    pollInterval: [1s]\n    failureThreshold: two\n    pollIntervall: 1s\n", 1)
	y = strings.Replace(y, "db-west:3306", "db-west", 1)
	list := problemsOf(t, y)
	findProblem(t, list, "groups[0].pollInterval", "with a unit", "a list")
	findProblem(t, list, "groups[0].failureThreshold", "whole number")
	findProblem(t, list, "groups[0].engine", "mysql or mariadb")
	findProblem(t, list, "groups[0].pollIntervall", "unknown key")
	findProblem(t, list, "groups[0].sites[1].mysql.address", "missing a port")
	for _, p := range list {
		// The broken values are reported once, as what they are, not again
		// as zero values.
		if (p.Path == "groups[0].pollInterval" || p.Path == "groups[0].failureThreshold") && !strings.Contains(p.Message, "expected") {
			t.Errorf("second problem for a value of the wrong type: %v", p)
		}
	}
	if len(list) != 5 {
		t.Errorf("%d problems, want 5:\n%v", len(list), (&Problems{List: list}).Error())
	}
}

func TestWrongSectionTypeKeepsTheRestChecked(t *testing.T) {
	y := strings.Replace(validYAML, "  listen: 127.0.0.1:8080\n", "  listen: [a]\n", 1)
	y = strings.Replace(y, "    sites:\n", "    dns: 5\n    sites:\n", 1)
	y = strings.Replace(y, "db-west:3306", "db-west", 1)
	list := problemsOf(t, y)
	findProblem(t, list, "daemon.listen", "expected a string")
	findProblem(t, list, "groups[0].dns", "expected a mapping")
	findProblem(t, list, "groups[0].sites[1].mysql.address", "missing a port")
	if len(list) != 3 {
		t.Errorf("%d problems, want 3:\n%v", len(list), (&Problems{List: list}).Error())
	}
}

func TestAnchorsAliasesAndMergeKeys(t *testing.T) {
	y := `groups:
  - name: orders
    credentials:
      admin: &admin {user: failoverd, passwordFile: admin.pw}
      replication:
        <<: *admin
        user: repl
    sites:
      - &east
        name: east
        priority: 7
        mysql: {address: db-east:3306}
      - <<: *east
        name: west
        mysql: {address: db-west:3306}
`
	cfg, err := Parse(y, secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Groups[0]
	if g.Credentials.Replication.User != "repl" || filepath.Base(g.Credentials.Replication.PasswordFile) != "admin.pw" {
		t.Errorf("merged replication account: %+v", g.Credentials.Replication)
	}
	if g.Sites[1].Name != "west" || g.Sites[1].Priority != 7 || g.Sites[1].MySQL.Address != "db-west:3306" {
		t.Errorf("merged site: %+v", g.Sites[1])
	}
}

func TestMergeKeyCycleIsRefused(t *testing.T) {
	y := strings.Replace(validYAML, "    sites:\n", "    splitBrain: &sb\n      <<: *sb\n    sites:\n", 1)
	// Whether the parser or the decoder refuses it, it must not loop.
	_, err := Parse(y, secrets(t))
	if err == nil {
		t.Fatal("a mapping merged into itself was accepted")
	}
}

func TestDocumentShape(t *testing.T) {
	cases := []struct{ name, yaml, words string }{
		{"empty", "", "empty"},
		{"comments only", "# nothing\n", "empty"},
		{"null document", "---\n", "empty"},
		{"list at top", "- a\n- b\n", "must be a mapping"},
		{"scalar at top", "groups\n", "must be a mapping"},
		{"two documents", validYAML + "---\ngroups: []\n", "one YAML document"},
		{"syntax", "groups: [\n", "did not find expected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			list := problemsOf(t, tc.yaml)
			if len(list) != 1 || !strings.Contains(list[0].Message, tc.words) {
				t.Errorf("want one problem mentioning %q, got:\n%v", tc.words, (&Problems{List: list}).Error())
			}
		})
	}
}

func TestDurationsNeedAUnit(t *testing.T) {
	for _, v := range []string{"5", "1.5", `"5"`, "five"} {
		y := strings.Replace(validYAML, "    engine: mysql\n", "    engine: mysql\n    pollInterval: "+v+"\n", 1)
		findProblem(t, problemsOf(t, y), "groups[0].pollInterval", "unit")
	}
}

func TestScalarsKeepTheirText(t *testing.T) {
	y := strings.Replace(validYAML, "          namespace: db\n", "          namespace: 0123\n", 1)
	y = strings.Replace(y, "            Site: East\n", "            Site: East\n            version: 1.10\n", 1)
	cfg, err := Parse(y, secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Groups[0].Sites[0].Kubernetes
	if k.Namespace != "0123" || k.PodSelector["version"] != "1.10" {
		t.Errorf("namespace %q, version label %q; want the text as written", k.Namespace, k.PodSelector["version"])
	}
}

func TestEmptyEnvironmentValueIsNoOverride(t *testing.T) {
	t.Setenv("FAILOVERD_DAEMON_LISTEN", "")
	cfg, err := Load("examples/two-site-mysql.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Daemon.Listen != "127.0.0.1:8080" {
		t.Errorf("listen = %q, want the default", cfg.Daemon.Listen)
	}
}

func TestEnvironmentOverridesKeysAbsentFromTheFile(t *testing.T) {
	t.Setenv("FAILOVERD_DAEMON_LEADERELECTION_LEASENAME", "other-lease")
	t.Setenv("FAILOVERD_DAEMON_APITOKENFILE", "/etc/failoverd/token")
	f := filepath.Join(secrets(t), "token")
	if err := os.WriteFile(f, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAILOVERD_DAEMON_APITOKENFILE", f)
	cfg, err := Load("examples/two-site-mysql.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Daemon.LeaderElection.LeaseName != "other-lease" || cfg.Daemon.APITokenFile != f {
		t.Errorf("overrides not applied: %+v", cfg.Daemon)
	}
}

func TestProblemsCarryFilePositions(t *testing.T) {
	dir := secrets(t)
	y := strings.Replace(validYAML, "    engine: mysql\n", "    engine: mysql\n    pollIntervall: 1s\n", 1)
	y = strings.Replace(y, "db-west:3306", "db-west", 1)
	y = strings.Replace(y, "          namespace: db\n", "", 1)
	f := filepath.Join(dir, "failoverd.yaml")
	if err := os.WriteFile(f, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(f)
	var ps *Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want *Problems, got %v", err)
	}
	want := []string{
		// Decoding: the unknown key, where it is written.
		f + ":9:5: groups[0].pollIntervall: unknown key (did you mean pollInterval?); remove it or fix the spelling",
		// Validation of a missing key: the section that should hold it.
		f + ":17:9: groups[0].sites[0].kubernetes.namespace: missing; it is required here",
		// Validation of a value: where its key is written.
		f + `:25:11: groups[0].sites[1].mysql.address: "db-west" is missing a port; write host:port`,
	}
	if len(ps.List) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(ps.List), len(want), err)
	}
	for i, w := range want {
		if got := ps.List[i].String(); got != w {
			t.Errorf("problem %d:\n got %s\nwant %s", i, got, w)
		}
	}
	if !strings.Contains(err.Error(), want[2]) {
		t.Errorf("Error() lacks the positions:\n%v", err)
	}
}

func TestValidateKeepsPositionsAfterLoad(t *testing.T) {
	cfg, err := Parse(validYAML, secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Groups[0].Sites[1].MySQL.Address = "db-west"
	var ps *Problems
	if !errors.As(cfg.Validate(), &ps) || len(ps.List) != 1 {
		t.Fatalf("want one problem, got %v", ps)
	}
	if p := ps.List[0]; p.Line != 25 || p.Column != 11 || p.String() != `line 25:11: groups[0].sites[1].mysql.address: "db-west" is missing a port; write host:port` {
		t.Errorf("problem %#v (%s), want it at 25:11", p, p)
	}
}

func TestEnvironmentProblemsNameTheVariable(t *testing.T) {
	t.Setenv("FAILOVERD_DAEMON_LEADERELECTION_ENABLED", "maybe")
	t.Setenv("FAILOVERD_DAEMON_LISTEN", "nohost")
	t.Setenv("FAILOVERD_DAEMON_LEADERELECTION_LEASEDURATION", "15")
	_, err := Load("examples/two-site-mysql.yaml")
	var ps *Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want *Problems, got %v", err)
	}
	want := []string{
		"environment FAILOVERD_DAEMON_LISTEN: daemon.listen: \"nohost\" is missing a port; write host:port",
		"environment FAILOVERD_DAEMON_LEADERELECTION_ENABLED: daemon.leaderElection.enabled: expected true or false, got \"maybe\"",
		"environment FAILOVERD_DAEMON_LEADERELECTION_LEASEDURATION: daemon.leaderElection.leaseDuration: \"15\" is not a duration",
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("no problem %q in:\n%v", w, err)
		}
	}
	if len(ps.List) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(ps.List), len(want), err)
	}
}

func TestEnvironmentOverridesTheFile(t *testing.T) {
	t.Setenv("FAILOVERD_DAEMON_STATESTORE_TYPE", "kubernetes")
	t.Setenv("FAILOVERD_DAEMON_STATESTORE_CLUSTER", "east")
	t.Setenv("FAILOVERD_DAEMON_LEADERELECTION_ENABLED", "true")
	cfg, err := Load("examples/systemd-single-host.yaml")
	// The file says type: file; the environment turns on leader election
	// with a kubernetes store on an undefined cluster.
	var ps *Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want *Problems, got %v (%+v)", err, cfg)
	}
	findProblem(t, ps.List, "daemon.stateStore.cluster", `cluster "east" is not defined`)
	for _, p := range ps.List {
		if p.Path == "daemon.stateStore.cluster" && p.Env != "FAILOVERD_DAEMON_STATESTORE_CLUSTER" {
			t.Errorf("problem does not name the variable that set the value: %s", p)
		}
	}
}

func TestEnvName(t *testing.T) {
	for path, want := range map[string]string{
		"daemon.listen":                       "FAILOVERD_DAEMON_LISTEN",
		"daemon.stateStore.path":              "FAILOVERD_DAEMON_STATESTORE_PATH",
		"daemon.tls.clientCAFile":             "FAILOVERD_DAEMON_TLS_CLIENTCAFILE",
		"daemon.leaderElection.leaseDuration": "FAILOVERD_DAEMON_LEADERELECTION_LEASEDURATION",
	} {
		if got := EnvName(path); got != want {
			t.Errorf("EnvName(%s) = %s, want %s", path, got, want)
		}
	}
}

// TestEveryDefaultDecodes decodes every `default` tag of the schema, also in
// the optional sections that the examples may leave out.
func TestEveryDefaultDecodes(t *testing.T) {
	d := newDecoder("", nil)
	seen := map[reflect.Type]bool{}
	var walk func(rt reflect.Type, path string)
	walk = func(rt reflect.Type, path string) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct || rt == durationType || seen[rt] {
			return
		}
		seen[rt] = true
		for i := range rt.NumField() {
			f := rt.Field(i)
			name, ok := yamlName(f)
			if !ok {
				continue
			}
			if def, ok := f.Tag.Lookup("default"); ok {
				d.decodeValue(&yaml.Node{Kind: yaml.ScalarNode, Value: def}, reflect.New(f.Type).Elem(), join(path, name))
			}
			walk(f.Type, join(path, name))
		}
	}
	walk(reflect.TypeFor[Config](), "")
	if len(d.problems) != 0 || len(seen) < 15 {
		t.Errorf("%d types walked; default tags that do not decode: %v", len(seen), d.problems)
	}
}
