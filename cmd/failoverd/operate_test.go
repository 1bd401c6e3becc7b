package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/failoverd/failoverd/api"
)

// ackControl answers acknowledge: accepted, or refused once refuse is set.
type ackControl struct {
	statusOnly
	refuse bool
	by     []string
}

func (a *ackControl) Acknowledge(_ context.Context, group string, by api.Actor) error {
	if a.refuse {
		return fmt.Errorf("%w: nothing halted in %s", api.ErrRefused, group)
	}
	a.by = append(a.by, by.Name)
	return nil
}

// acknowledge: done (exit 0, says so, names the operator), refused (exit 1
// with the daemon's reason), no token (exit 2).
func TestAcknowledgeCommand(t *testing.T) {
	ctl := &ackControl{}
	srv := httptest.NewServer(api.Handler(api.Options{Control: ctl, Token: "tok"}))
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "acknowledge", "orders", "--server", srv.URL, "--token-file", tokenFile)
	if code != 0 || !strings.Contains(out, "orders acknowledged") || len(ctl.by) != 1 || !strings.Contains(ctl.by[0], "@") {
		t.Fatalf("acknowledge: exit %d %q %q, recorded by %v", code, out, errOut, ctl.by)
	}
	ctl.refuse = true
	if code, _, errOut := runCLI(t, "acknowledge", "orders", "--server", srv.URL, "--token-file", tokenFile); code != 1 || !strings.Contains(errOut, "409") || !strings.Contains(errOut, "nothing halted in orders") {
		t.Fatalf("refused acknowledge: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "acknowledge", "orders", "--server", srv.URL); code != 2 || !strings.Contains(errOut, "token-file") {
		t.Fatalf("acknowledge without a token: exit %d %q", code, errOut)
	}
}
