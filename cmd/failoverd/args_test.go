package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/failoverd/failoverd/api"
)

// `status GROUP` (the runbook's first step) and `validate FILE` work, and
// the older -g and -c forms still do; giving both with different values is
// refused.
func TestPositionalForms(t *testing.T) {
	srv := httptest.NewServer(api.Handler(api.Options{Control: statusOnly{}}))
	t.Cleanup(srv.Close)
	for _, args := range [][]string{{"status", "orders"}, {"status", "-g", "orders"}, {"status", "orders", "-g", "orders"}} {
		code, out, errOut := runCLI(t, append(args, "--server", srv.URL, "-o", "json")...)
		if code != 0 || !strings.Contains(out, `"name": "orders"`) || strings.Contains(out, `"groups"`) {
			t.Errorf("%v: exit %d %q %q, want the one group's document", args, code, out, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "status", "orders", "-g", "billing", "--server", srv.URL); code != 2 || !strings.Contains(errOut, `GROUP "orders" and -g "billing" differ`) {
		t.Errorf("status GROUP -g OTHER: exit %d %q", code, errOut)
	}

	example := "../../configs/examples/two-site-mysql.yaml"
	for _, args := range [][]string{{"validate", example}, {"validate", "-c", example}, {"validate", example, "-c", example}} {
		if code, out, errOut := runCLI(t, args...); code != 0 || !strings.Contains(out, example+": valid") {
			t.Errorf("%v: exit %d %q %q", args, code, out, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "validate", example, "-c", "/etc/other.yaml"); code != 2 || !strings.Contains(errOut, "differ") {
		t.Errorf("validate FILE -c OTHER: exit %d %q", code, errOut)
	}
	// FAILOVERD_CONFIG is a default: FILE overrides it.
	t.Setenv("FAILOVERD_CONFIG", "/nonexistent.yaml")
	if code, _, errOut := runCLI(t, "validate", example); code != 0 {
		t.Errorf("validate FILE with FAILOVERD_CONFIG set: exit %d %q", code, errOut)
	}
}

// A wrong number of arguments is refused (exit 2) naming the arguments the
// command takes and what it got, never as an "unknown command".
func TestWrongArgumentCountNamesTheArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"switchover", "orders"}, `failoverd switchover takes 2 arguments, GROUP SITE; got 1: "orders" (usage: failoverd switchover GROUP SITE [flags])`},
		{[]string{"acknowledge"}, "failoverd acknowledge takes 1 argument, GROUP; got none"},
		{[]string{"hold", "orders", "b"}, "failoverd hold takes 3 arguments, GROUP SITE no-promote|maintenance; got 2"},
		{[]string{"status", "orders", "billing"}, `failoverd status takes at most 1 argument, [GROUP]; got 2: "orders" "billing"`},
		{[]string{"validate", "a.yaml", "b.yaml"}, "failoverd validate takes at most 1 argument, [FILE]; got 2"},
		{[]string{"reload", "now"}, `failoverd reload takes no arguments; got 1: "now"`},
		{[]string{"history"}, "failoverd history takes 1 argument, GROUP; got none"},
		{[]string{"reclone", "orders", "b", "c"}, "failoverd reclone takes 2 arguments, GROUP SITE; got 3"},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "unknown command") {
			t.Errorf("%v: exit %d %q, want exit 2 with %q", tc.args, code, errOut, tc.want)
		}
	}
}

// Every duration flag refuses zero and negative values with a message
// naming the flag and an example, before anything is sent.
func TestDurationFlagsMustBePositive(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "-w", "--interval", "0"}, "--interval 0s: must be a positive duration such as --interval 2s"},
		{[]string{"switchover", "orders", "b", "--wait", "--timeout", "-5s"}, "--timeout -5s: must be a positive duration such as --timeout 2m0s"},
		{[]string{"reclone", "orders", "b", "--confirm-discard", "b", "--timeout", "0s"}, "--timeout 0s: must be a positive duration"},
		{[]string{"pause", "orders", "--for", "0", "--reason", "x"}, "--for 0s: must be a positive duration such as --for 30m"},
		{[]string{"hold", "orders", "b", "maintenance", "--for", "-1h", "--reason", "x"}, "--for -1h0m0s: must be a positive duration"},
	} {
		// No daemon: the refusal comes before any request (exit 3 otherwise).
		code, _, errOut := runCLI(t, append(tc.args, "--server", "http://127.0.0.1:1")...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d %q, want exit 2 with %q", tc.args, code, errOut, tc.want)
		}
	}
	// Every duration flag of the tree is covered by the check (it visits
	// them all); this lists them so a new one is seen here.
	var names []string
	root := newRoot(nil, nil)
	for _, cmd := range root.Commands() {
		if cmd.Flags().HasFlags() {
			cmd.Flags().VisitAll(func(f *pflag.Flag) {
				if f.Value.Type() == "duration" {
					names = append(names, cmd.Name()+" --"+f.Name)
				}
			})
		}
	}
	if got := strings.Join(names, ", "); got != "hold --for, pause --for, reclone --timeout, status --interval, switchover --timeout" {
		t.Errorf("duration flags: %s", got)
	}
}

// recloneControl records reclone requests.
type recloneControl struct {
	statusOnly
	tokens []string
}

func (r *recloneControl) Reclone(_ context.Context, group, site, token string, _ api.Actor) error {
	r.tokens = append(r.tokens, group+"/"+site+" "+token)
	return nil
}

// reclone's confirmation is --confirm-discard; the old --token still works,
// hidden, with a warning that it is deprecated (it was confused with
// --token-file); both with different values are refused.
func TestRecloneConfirmDiscardAndDeprecatedToken(t *testing.T) {
	ctl := &recloneControl{}
	srv := httptest.NewServer(api.Handler(api.Options{Control: ctl, Token: "tok"}))
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		return runCLI(t, append(append([]string{"reclone", "orders", "b"}, args...), "--server", srv.URL, "--token-file", tokenFile)...)
	}
	if code, out, errOut := run("--confirm-discard", "3e11fa47"); code != 0 || !strings.Contains(out, "reclone of orders/b started") || errOut != "" {
		t.Fatalf("--confirm-discard: exit %d %q %q", code, out, errOut)
	}
	code, out, errOut := run("--token", "b")
	if code != 0 || !strings.Contains(out, "started") || !strings.Contains(errOut, "warning: reclone --token is deprecated, write --confirm-discard") {
		t.Fatalf("--token: exit %d %q %q, want it accepted with a deprecation warning", code, out, errOut)
	}
	if code, _, errOut := run("--token", "b", "--confirm-discard", "c"); code != 2 || !strings.Contains(errOut, "differ") {
		t.Fatalf("--token and --confirm-discard differing: exit %d %q", code, errOut)
	}
	if code, _, errOut := run(); code != 2 || !strings.Contains(errOut, "--confirm-discard is required") {
		t.Fatalf("no confirmation: exit %d %q", code, errOut)
	}
	if want := fmt.Sprint([]string{"orders/b 3e11fa47", "orders/b b"}); fmt.Sprint(ctl.tokens) != want {
		t.Fatalf("sent %v, want %s", ctl.tokens, want)
	}
	_, help, _ := runCLI(t, "reclone", "--help")
	if strings.Contains(help, "--token ") || !strings.Contains(help, "--confirm-discard") {
		t.Fatalf("help must show --confirm-discard and hide --token:\n%s", help)
	}
}
