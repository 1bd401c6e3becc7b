package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/api"
)

// modeControl records pause, resume, hold, release and switchover calls;
// paused makes switchovers refused the way the daemon refuses them.
type modeControl struct {
	statusOnly
	calls  []string
	paused bool
}

func (m *modeControl) Pause(_ context.Context, group string, d time.Duration, reason string, by api.Actor) error {
	m.calls = append(m.calls, fmt.Sprintf("pause %s %v %q", group, d, reason))
	m.paused = true
	return nil
}

func (m *modeControl) Resume(_ context.Context, group string, _ api.Actor) error {
	if !m.paused {
		return fmt.Errorf("%w: resume: the group is not paused", api.ErrRefused)
	}
	m.calls = append(m.calls, "resume "+group)
	return nil
}

func (m *modeControl) Hold(_ context.Context, group, site, kind string, d time.Duration, reason string, _ api.Actor) error {
	m.calls = append(m.calls, fmt.Sprintf("hold %s %s %s %v %q", group, site, kind, d, reason))
	return nil
}

func (m *modeControl) Release(_ context.Context, group, site string, _ api.Actor) error {
	m.calls = append(m.calls, "release "+group+" "+site)
	return nil
}

func (m *modeControl) Switchover(_ context.Context, group, target string, opt api.SwitchoverOptions, _ api.Actor) (string, error) {
	if m.paused {
		return "", fmt.Errorf("%w: switchover to %s: the group is paused (switchover-refused-paused)", api.ErrRefused, target)
	}
	m.calls = append(m.calls, fmt.Sprintf("switchover %s %s %+v", group, target, opt))
	return "planned switchover from a to " + target, nil
}

// The operating-mode commands: what they send, what they print, and one
// clear line with the documented exit code for every refusal (missing or
// non-positive --for, missing --reason, unknown kind, a paused group).
func TestModeCommands(t *testing.T) {
	ctl := &modeControl{}
	srv := httptest.NewServer(api.Handler(api.Options{Control: ctl, Token: "tok"}))
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		return runCLI(t, append(args, "--server", srv.URL, "--token-file", tokenFile)...)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pause", "orders", "--reason", "x"}, 2, "--for is required"},
		{[]string{"pause", "orders", "--for", "-5m", "--reason", "x"}, 2, "--for -5m0s: must be a positive duration"},
		{[]string{"pause", "orders", "--for", "30m"}, 2, "--reason is required"},
		{[]string{"hold", "orders", "b", "downtime", "--for", "1h", "--reason", "x"}, 2, "write no-promote or maintenance"},
		{[]string{"resume", "orders"}, 1, "not paused"},
		{[]string{"pause", "nope", "--for", "30m", "--reason", "x"}, 1, "unknown group nope"},
		{[]string{"switchover", "orders", "b", "--dry-run"}, 0, "dry run, nothing changed: planned switchover from a to b"},
		{[]string{"pause", "orders", "--for", "30m", "--reason", "kernel upgrade"}, 0, "orders paused for 30m0s"},
		{[]string{"switchover", "orders", "b"}, 1, "the group is paused"},
		{[]string{"resume", "orders"}, 0, "orders resumed"},
		{[]string{"hold", "orders", "b", "maintenance", "--for", "2h", "--reason", "disk swap"}, 0, "orders/b held (maintenance) for 2h0m0s"},
		{[]string{"release", "orders", "b"}, 0, "orders/b released"},
	} {
		code, out, errOut := run(tc.args...)
		got := out + errOut
		if code != tc.code || !strings.Contains(got, tc.want) {
			t.Errorf("%v: exit %d %q, want exit %d with %q", tc.args, code, got, tc.code, tc.want)
		}
		if code != 0 && strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: refusal is more than one line: %q", tc.args, errOut)
		}
	}
	want := []string{
		"switchover orders b {Force:false AllowDROnly:false DryRun:true}",
		`pause orders 30m0s "kernel upgrade"`,
		"resume orders",
		`hold orders b maintenance 2h0m0s "disk swap"`,
		"release orders b",
	}
	if strings.Join(ctl.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant\n%s", strings.Join(ctl.calls, "\n"), strings.Join(want, "\n"))
	}
}
