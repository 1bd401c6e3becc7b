package main

import (
	"net/http/httptest"
	"testing"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/status"
)

// twoGroups serves orders (sites a, the primary, and b) and billing.
type twoGroups struct{ statusOnly }

func (twoGroups) Snapshot() status.Snapshot {
	return status.Snapshot{Groups: []status.Group{
		{Name: "orders", ActiveSite: "a", Class: status.ClassHealthy, Sites: []status.Site{
			{Name: "a", State: status.StateWritable, Active: true}, {Name: "b", State: status.StateReadOnly}}},
		{Name: "billing", ActiveSite: "x", Class: status.ClassDegraded, Sites: []status.Site{{Name: "x", State: status.StateWritable, Active: true}}},
	}}
}

// Shell completion asks the daemon: GROUP completes to its groups, SITE to
// that group's sites with their state, hold's kind to its two words, and
// status -g to the groups; with no daemon it offers nothing (and no file
// names).
func TestShellCompletionAsksTheDaemon(t *testing.T) {
	srv := httptest.NewServer(api.Handler(api.Options{Control: twoGroups{}}))
	t.Cleanup(srv.Close)
	complete := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"__complete"}, args...)...)
		if code != 0 {
			t.Fatalf("__complete %v: exit %d %q", args, code, errOut)
		}
		return out
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"switchover", "--server", srv.URL, ""}, "orders\tprimary a, healthy\nbilling\tprimary x, degraded\n:4\n"},
		{[]string{"acknowledge", "--server", srv.URL, "b"}, "billing\tprimary x, degraded\n:4\n"},
		{[]string{"switchover", "orders", "--server", srv.URL, ""}, "a\tprimary, writable\nb\tread-only\n:4\n"},
		{[]string{"confirm-fence", "orders", "--server", srv.URL, "a"}, "a\tprimary, writable\n:4\n"},
		{[]string{"hold", "orders", "b", "--server", srv.URL, "m"}, "maintenance\n:4\n"},
		{[]string{"status", "--server", srv.URL, ""}, "orders\tprimary a, healthy\nbilling\tprimary x, degraded\n:4\n"},
		{[]string{"status", "--server", srv.URL, "-g", "o"}, "orders\tprimary a, healthy\n:4\n"},
		{[]string{"release", "orders", "b", "--server", srv.URL, ""}, ":4\n"},
		{[]string{"pause", "--server", "http://127.0.0.1:1", ""}, ":5\n"},
	} {
		if got := complete(tc.args...); got != tc.want {
			t.Errorf("complete %v:\n%q\nwant\n%q", tc.args, got, tc.want)
		}
	}
}
