package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/test/testenv"
)

// cli runs the failoverd binary with args against g's daemon and returns
// its exit code, stdout and stderr.
func (g *group) cli(args ...string) (int, string, string) {
	g.t.Helper()
	args = append(args, "--server", "http://"+g.listen)
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	g.t.Fatalf("run failoverd %v: %v", args, err)
	return 0, "", ""
}

// metrics returns the daemon's /metrics page.
func (g *group) metrics() string {
	g.t.Helper()
	resp, err := http.Get("http://" + g.listen + "/metrics")
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The operator's CLI against a real daemon on real MariaDB: status prints
// a readable table (and JSON), switchover --wait follows a planned
// switchover to its end, the metrics count it, and against a stopped
// daemon every command fails in one line with a non-zero exit.
func TestCLIStatusAndSwitchover(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3})
		g.startDaemon()
		g.waitHealthy("site0", 30*time.Second)
		g.waitFor("daemon ready", 10*time.Second, func() bool {
			resp, err := http.Get("http://" + g.listen + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})

		code, out, errOut := g.cli("status")
		if code != 0 {
			t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
		}
		t.Logf("failoverd status:\n%s", out)
		for _, want := range []string{"GROUP", "EPOCH", "orders", "healthy", "site0*", "site1", "site2", "read-only", "writable", "io=on sql=on"} {
			if !strings.Contains(out, want) {
				t.Errorf("status table lacks %q", want)
			}
		}
		code, out, _ = g.cli("status", "-g", "orders", "-o", "json")
		var one status.Group
		if err := json.Unmarshal([]byte(out), &one); code != 0 || err != nil || one.ActiveSite != "site0" || len(one.Sites) != 3 {
			t.Fatalf("status -o json: exit %d, %v, %+v", code, err, one)
		}
		if code, _, errOut := g.cli("status", "-g", "nope"); code != 1 || !strings.Contains(errOut, "unknown group nope") {
			t.Fatalf("status of an unknown group: exit %d, %q", code, errOut)
		}

		token := filepath.Join(g.dir, "api.token")
		if code, _, errOut := g.cli("switchover", "orders", "site1"); code != 2 || !strings.Contains(errOut, "token-file") {
			t.Fatalf("switchover without a token: exit %d, %q", code, errOut)
		}
		code, out, errOut = g.cli("switchover", "orders", "site1", "--wait", "--timeout", "60s", "--token-file", token)
		if code != 0 || !strings.Contains(out, "site1 is the primary of orders") {
			t.Fatalf("switchover --wait: exit %d\n%s%s", code, out, errOut)
		}
		t.Logf("failoverd switchover --wait:\n%s", out)
		g.expectSolePrimary("site1")
		for _, want := range []string{
			`failoverd_failovers_total{group="orders",kind="switchover",result="promoted"} 1`,
			`failoverd_site_state{group="orders",site="site1",state="writable"} 1`,
			`failoverd_site_active{group="orders",site="site1"} 1`,
			`failoverd_leader 1`,
		} {
			// Gauges follow the debounced state a probe or two later.
			g.waitFor("/metrics showing "+want, 10*time.Second, func() bool { return strings.Contains(g.metrics(), want) })
		}

		g.stopDaemon()
		for _, args := range [][]string{{"status"}, {"switchover", "orders", "site0", "--token-file", token}} {
			code, out, errOut := g.cli(args...)
			if code != 3 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "daemon unreachable") {
				t.Errorf("%v against a stopped daemon: exit %d, stdout %q, stderr %q; want exit 3 and one line", args, code, out, errOut)
			}
		}
	})
}
