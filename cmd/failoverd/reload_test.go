package main

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/failoverd/failoverd/api"
)

// reloadControl answers reload: applied (a group added, one deferred), or
// refused with two problems once refuse is set.
type reloadControl struct {
	statusOnly
	refuse bool
	by     []string
}

// refusal is a daemon's refused reload: a summary and its problems.
type refusal struct{ problems []string }

func (r refusal) Error() string {
	return "reload refused: /etc/failoverd/failoverd.yaml: 2 configuration problem(s); the daemon keeps its current configuration"
}
func (r refusal) Details() []string { return r.problems }
func (r refusal) Unwrap() error     { return api.ErrRefused }

func (c *reloadControl) Reload(_ context.Context, by api.Actor) (api.ReloadResult, error) {
	c.by = append(c.by, by.Name)
	if c.refuse {
		return api.ReloadResult{}, refusal{[]string{
			"/etc/failoverd/failoverd.yaml:12:19: groups[0].sites[1].priority: want a whole number, got \"high\"",
			"/etc/failoverd/failoverd.yaml:3:11: daemon.listen: changed from \"127.0.0.1:8080\" to \":9090\": this setting needs a restart",
		}}
	}
	return api.ReloadResult{Result: "reloaded", File: "/etc/failoverd/failoverd.yaml", Digest: "0123456789abcdef0123",
		Added: []string{"billing"}, Deferred: []api.Deferred{{Group: "orders", Reason: "a failover from a to b is in flight; applied once it ends"}}}, nil
}

// reload: applied (exit 0: what changed, the digest, the deferred group
// and why), refused (exit 1: every problem on its own line, file:line
// first, as validate prints them), no token (exit 2), no daemon (exit 3).
func TestReloadCommand(t *testing.T) {
	ctl := &reloadControl{}
	srv := httptest.NewServer(api.Handler(api.Options{Control: ctl, Token: "tok"}))
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "reload", "--server", srv.URL, "--token-file", tokenFile)
	if code != 0 || !strings.Contains(out, "/etc/failoverd/failoverd.yaml reloaded (sha256 0123456789ab): added billing; changed -; removed -") ||
		!strings.Contains(out, "deferred orders: a failover from a to b is in flight") || len(ctl.by) != 1 || !strings.Contains(ctl.by[0], "@") {
		t.Fatalf("reload: exit %d %q %q, by %v", code, out, errOut, ctl.by)
	}
	ctl.refuse = true
	code, out, errOut = runCLI(t, "reload", "--server", srv.URL, "--token-file", tokenFile)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 1 || out != "" || len(lines) != 3 || !strings.HasPrefix(lines[0], "/etc/failoverd/failoverd.yaml:12:19: groups[0].sites[1].priority") ||
		!strings.Contains(lines[1], "needs a restart") || !strings.Contains(lines[2], "409") || !strings.Contains(lines[2], "reload refused") {
		t.Fatalf("refused reload: exit %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "reload", "--server", srv.URL); code != 2 || !strings.Contains(errOut, "token-file") {
		t.Fatalf("reload without a token: exit %d %q", code, errOut)
	}
	srv.Close()
	if code, _, errOut := runCLI(t, "reload", "--server", srv.URL, "--token-file", tokenFile); code != 3 || !strings.Contains(errOut, "unreachable") {
		t.Fatalf("reload with no daemon: exit %d %q", code, errOut)
	}
}
