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

// fenceControl accepts confirm-fence.
type fenceControl struct{ statusOnly }

func (fenceControl) ConfirmFence(context.Context, string, string, api.Actor) error { return nil }

// With the three tokens set on the daemon: confirm-fence with the operate
// token fails (exit 1) with an error naming the admin token and the flag
// that carries it; with the admin token it is recorded; status without a
// token says to give --token-file, and with the read token it prints. It
// guards the operator's first contact with a least-privilege daemon: a bare
// "403 Forbidden" would not say which file to use.
func TestCLISaysWhichTokenACommandNeeds(t *testing.T) {
	const operate, read, admin = "operate-0123456789abcdef", "read-0123456789abcdef", "admin-0123456789abcdef"
	srv := httptest.NewServer(api.Handler(api.Options{Control: fenceControl{}, Token: operate, ReadToken: read, AdminToken: admin}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	file := func(name, tok string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	operateFile, readFile, adminFile := file("operate", operate), file("read", read), file("admin", admin)

	code, _, errOut := runCLI(t, "confirm-fence", "orders", "a", "--server", srv.URL, "--token-file", operateFile)
	if code != exitRefused || !strings.Contains(errOut, "403") || !strings.Contains(errOut, "needs the admin token") ||
		!strings.Contains(errOut, "--token-file naming the admin token's file") {
		t.Errorf("confirm-fence with the operate token: exit %d %q", code, errOut)
	}
	if code, out, errOut := runCLI(t, "confirm-fence", "orders", "a", "--server", srv.URL, "--token-file", adminFile); code != exitOK || !strings.Contains(out, "confirmed") {
		t.Errorf("confirm-fence with the admin token: exit %d %q %q", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "status", "--server", srv.URL)
	if code != exitRefused || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "--token-file with the read, operate or admin token") {
		t.Errorf("status without a token: exit %d %q", code, errOut)
	}
	if code, out, errOut := runCLI(t, "status", "--server", srv.URL, "--token-file", readFile); code != exitOK || !strings.Contains(out, "orders") {
		t.Errorf("status with the read token: exit %d %q %q", code, out, errOut)
	}
}
