package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/failoverd/failoverd"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = execute(args, &out, &errb)
	return code, out.String(), errb.String()
}

// writeConfig writes yaml to a temporary config file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "failoverd.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestValidateAcceptsExamples(t *testing.T) {
	files, _ := filepath.Glob("../../configs/examples/*.yaml")
	if len(files) < 3 {
		t.Fatalf("examples not found: %v", files)
	}
	for _, f := range files {
		code, out, errOut := runCLI(t, "validate", "-c", f)
		if code != 0 {
			t.Errorf("%s: exit %d, stderr:\n%s", f, code, errOut)
		}
		if !strings.Contains(out, "group ") || !strings.Contains(out, "valid") {
			t.Errorf("%s: no per-group summary in:\n%s", f, out)
		}
	}
}

func TestValidateRejectsBadFileWithEveryProblem(t *testing.T) {
	f := writeConfig(t, `groups:
  - name: orders
    pollIntervall: 1s
    probeTimeout: 2s
    sites:
      - name: east
        mysql: {address: east}
`)
	code, _, errOut := runCLI(t, "validate", "-c", f)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, errOut)
	}
	// One problem a line, starting with file:line:col, as editors and grep
	// read them; the key keeps the case it was written in.
	for _, want := range []string{
		"\n" + f + ":3:5: groups[0].pollIntervall: unknown key (did you mean pollInterval?)",
		"\n" + f + `:7:17: groups[0].sites[0].mysql.address: "east" is missing a port`,
		"\nfailoverd: " + f + ": ",
	} {
		if !strings.Contains("\n"+errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestValidateReportsWrongTypesWithTheRest(t *testing.T) {
	f := writeConfig(t, `groups:
  - name: orders
    pollInterval: 5
    pollinterval: 1s
    engine: mysql
    engine: oracle
    sites:
      - name: east
        mysql: {address: east:3306}
        kubernetes: {cluster: east, namespace: db, service: primary, podSelector: {Site: East}}
      - name: west
        mysql: {address: west}
`)
	code, _, errOut := runCLI(t, "validate", "-c", f)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, errOut)
	}
	for _, want := range []string{
		f + ":3:19: groups[0].pollInterval: expected a duration with a unit such as 500ms, 2s or 10m, got 5",
		f + ":4:5: groups[0].pollinterval: duplicate key: pollInterval at line 3:5 and pollinterval at line 4:5 differ only in case",
		f + ":6:5: groups[0].engine: duplicate key: engine is written at line 5:5 and again at line 6:5",
		f + `:10:22: groups[0].sites[0].kubernetes.cluster: cluster "east" is not defined`,
		f + `:12:17: groups[0].sites[1].mysql.address: "west" is missing a port`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestValidateReportsSemanticProblemsTogether(t *testing.T) {
	f := writeConfig(t, `groups:
  - name: orders
    probeTimeout: 2s
    sites:
      - name: east
        mysql: {address: east}
`)
	code, _, errOut := runCLI(t, "validate", "-c", f)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{
		"groups[0].probeTimeout: 2s must be shorter than pollInterval",
		`groups[0].sites[0].mysql.address: "east" is missing a port; write host:port`,
		"groups[0].sites: 1 site(s)",
		"groups[0].credentials.admin.passwordFile: missing",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestRunRefusesInvalidConfig(t *testing.T) {
	f := writeConfig(t, "groups: []\n")
	code, _, errOut := runCLI(t, "run", "-c", f, "--log-format", "text")
	if code != 1 || !strings.Contains(errOut, "groups: no group defined") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}

func TestConfigFlagFromEnvironment(t *testing.T) {
	t.Setenv("FAILOVERD_CONFIG", "../../configs/examples/two-site-mysql.yaml")
	if code, _, errOut := runCLI(t, "validate"); code != 0 {
		t.Fatalf("FAILOVERD_CONFIG not honoured: exit %d\n%s", code, errOut)
	}
}

func TestBadLogFlags(t *testing.T) {
	code, _, errOut := runCLI(t, "run", "--log-format", "xml")
	if code != 2 || !strings.Contains(errOut, "write json or text") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	// The version is the VERSION file's, whatever the build flags.
	if code != 0 || !strings.HasPrefix(out, "failoverd "+failoverd.Version+" (commit unknown, go") {
		t.Fatalf("exit %d, out %q", code, out)
	}
}

func TestHelpShowsDefaults(t *testing.T) {
	for _, sub := range []string{"", "validate", "run", "sidecar", "version"} {
		args := []string{"--help"}
		if sub != "" {
			args = []string{sub, "--help"}
		}
		code, out, _ := runCLI(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
		if !strings.Contains(out, `(default "/etc/failoverd/failoverd.yaml")`) || !strings.Contains(out, `log format: json or text (default "json")`) {
			t.Errorf("%v: flag defaults not shown:\n%s", args, out)
		}
	}
}
