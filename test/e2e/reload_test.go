package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/test/testenv"
	"github.com/failoverd/failoverd/test/testenv/promote"
)

// waitGroup waits until cond holds for group name in the daemon's status
// (the harness's status() reads a daemon of one group) and returns it.
func (g *group) waitGroup(name, what string, timeout time.Duration, cond func(status.Group) bool) status.Group {
	g.t.Helper()
	var out status.Group
	g.waitFor(name+": "+what, timeout, func() bool {
		s, err := g.snapshot()
		if err != nil {
			return false
		}
		gs, ok := s.Group(name)
		out = gs
		return ok && cond(gs)
	})
	return out
}

var reloadFileLine = regexp.MustCompile(`failoverd\.yaml:\d+:\d+: `)

// Issue 28's acceptance for reload, on real servers and the real binary: an
// invalid file sent by SIGHUP is refused with file:line errors and nothing
// changes; then `failoverd reload` adds a group (its own sites) and raises
// a replica's priority without a restart, and the next failover goes to
// that replica.
func TestReloadAddsAGroupAndChangesPriority(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		// site2 is the preferred candidate until the reload raises site1.
		g := newGroup(t, groupOptions{engine: e, sites: 3, priorities: []int{0, 0, 3}})
		g.startDaemon()
		g.waitHealthy("site0", 30*time.Second)
		before, err := g.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		pid := g.cmd.Process.Pid
		original, err := os.ReadFile(g.config)
		if err != nil {
			t.Fatal(err)
		}

		// A second group on sites of its own.
		billing := testenv.StartTopology(t, 2, testenv.TopologyOptions{Engine: e, SemiSync: true})
		promote.Site(t, billing.Sites[0])
		billing.Sites[1].Exec(t, "SET GLOBAL "+semiSyncSourceVar(e, "enabled")+" = OFF")
		added := fmt.Sprintf(`  - name: billing
    engine: %s
    pollInterval: 500ms
    probeTimeout: 400ms
    fencing: confirmed
    credentials:
      admin:
        user: %s
        passwordFile: daemon.pw
      replication:
        user: %s
        passwordFile: repl.pw
    sites:
      - name: b0
        mysql:
          address: %s
      - name: b1
        mysql:
          address: %s
`, e, testenv.DaemonUser, testenv.ReplUser, billing.Sites[0].Addr(), billing.Sites[1].Addr())
		raised := strings.Replace(string(original), "- name: site1\n        priority: 0\n", "- name: site1\n        priority: 5\n", 1)
		if raised == string(original) {
			t.Fatal("test setup: site1's priority line not found in the configuration")
		}

		// 1. An invalid file (a priority that is no number) by SIGHUP:
		// refused, logged with file:line, nothing changes.
		invalid := strings.Replace(raised, "priority: 5", "priority: high", 1) + added
		if err := os.WriteFile(g.config, []byte(invalid), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		g.waitFor("the refusal in status", 10*time.Second, func() bool {
			s, err := g.snapshot()
			return err == nil && s.Daemon.Config.LastRefused != ""
		})
		s, err := g.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Groups) != 1 || s.Daemon.Config.Digest != before.Daemon.Config.Digest || !s.Daemon.Config.LoadedAt.Equal(before.Daemon.Config.LoadedAt) {
			t.Fatalf("after a refused reload: %d groups, config %+v (before %+v)", len(s.Groups), s.Daemon.Config, before.Daemon.Config)
		}
		refusal := ""
		for _, line := range strings.Split(g.logs.String(), "\n") {
			if strings.Contains(line, `"msg":"config.reload_refused"`) {
				refusal = line
			}
		}
		if !reloadFileLine.MatchString(refusal) || !strings.Contains(refusal, "groups[0].sites[1].priority") {
			t.Fatalf("config.reload_refused does not name the priority at its file:line: %q", refusal)
		}
		code, out, errOut := g.cli("reload", "--token-file", filepath.Join(g.dir, "api.token"))
		if code != 1 || !reloadFileLine.MatchString(errOut) || !strings.Contains(errOut, "409") {
			t.Fatalf("failoverd reload of the invalid file: exit %d\n%s%s", code, out, errOut)
		}

		// 2. The valid file by `failoverd reload`: billing added, orders
		// rebuilt with site1's new priority, the same process.
		if err := os.WriteFile(g.config, []byte(raised+added), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut = g.cli("reload", "--token-file", filepath.Join(g.dir, "api.token"))
		if code != 0 || !strings.Contains(out, "added billing; changed orders; removed -") {
			t.Fatalf("failoverd reload: exit %d\n%s%s", code, out, errOut)
		}
		g.waitGroup("billing", "b0 healthy", 30*time.Second, func(gs status.Group) bool { return gs.ActiveSite == "b0" && gs.Reason == "healthy" })
		g.waitGroup("orders", "site0 healthy", 30*time.Second, func(gs status.Group) bool { return gs.ActiveSite == "site0" && gs.Reason == "healthy" })
		s, err = g.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if c := s.Daemon.Config; c.Digest == before.Daemon.Config.Digest || c.LastRefused != "" || len(c.Pending) != 0 || g.cmd.Process.Pid != pid {
			t.Fatalf("status config after the reload %+v (pid %d, was %d)", c, g.cmd.Process.Pid, pid)
		}

		// 3. The primary dies: the failover goes to site1, now preferred.
		g.kill(0)
		st := g.waitGroup("orders", "failover to site1", failoverTimeout, func(gs status.Group) bool { return gs.ActiveSite != "" && gs.InFlight == nil && gs.Epoch > 1 })
		if st.ActiveSite != "site1" {
			t.Fatalf("failover promoted %s, want site1 (priority 5 after the reload, site2 has 3)", st.ActiveSite)
		}
		if w := g.writable(); len(w) != 1 || w[0] != "site1" {
			t.Fatalf("writable sites %v, want [site1]", w)
		}
		// billing was not touched.
		if b := g.waitGroup("billing", "still healthy", 10*time.Second, func(gs status.Group) bool { return gs.Reason == "healthy" }); b.ActiveSite != "b0" {
			t.Fatalf("billing's primary %s, want b0", b.ActiveSite)
		}
	})
}
