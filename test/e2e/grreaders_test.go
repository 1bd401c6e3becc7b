package e2e

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/testenv"
)

// readerSet is the sites the status lists as readers.
func readerSet(st groupStatus) []string {
	var out []string
	for _, s := range st.Sites {
		if s.Reader != nil && s.Reader.Eligible {
			out = append(out, s.Name)
		}
	}
	return out
}

// replicaHealth is the daemon's GET .../sites/SITE/health?role=replica code.
func (g *grGroup) replicaHealth(site string) int {
	g.t.Helper()
	resp, err := http.Get("http://" + g.listen + "/v1/groups/orders/sites/" + site + "/health?role=replica")
	if err != nil {
		g.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Read routing on a Group Replication group (MySQL only): with a write
// load through the router, the reader set (status sites[].reader, the
// health endpoint for role=replica) is the group's ONLINE secondaries;
// after kill -9 of the primary and the group's election, once failoverd
// follows, it is the remaining secondary alone: the new primary leaves it
// (includePrimary whenNoReplica) and the killed member never returns to it.
func TestGroupReplicationMySQLOnlyReadersFollowTheGroup(t *testing.T) {
	grMySQLOnly(t)
	g := newGRGroup(t)
	cfg, err := os.ReadFile(g.config)
	if err != nil {
		t.Fatal(err)
	}
	on := strings.Replace(string(cfg), "    replication: group\n",
		"    replication: group\n    readers:\n      enabled: true\n      maxLag: 5s\n      upAfter: 2\n      downAfter: 1\n", 1)
	if err := os.WriteFile(g.config, []byte(on), 0o600); err != nil {
		t.Fatal(err)
	}
	g.startDaemon()
	first := g.waitActive("site0", 30*time.Second)
	g.follow()
	load := testenv.StartWriteLoad(t, []string{testenv.SiteDSN(g.router.Addr(), testenv.AppUser, testenv.AppPassword)}, testenv.WriteLoadOptions{Workers: 2})
	load.WaitForAcks(t, 50, 20*time.Second)
	g.waitFor("the readers are the two secondaries", 30*time.Second, func() bool {
		st, err := g.status()
		return err == nil && slices.Equal(readerSet(st), []string{"site1", "site2"})
	})
	st, _ := g.status()
	for _, s := range st.Sites {
		t.Logf("%s reader: %+v", s.Name, s.Reader)
	}
	if c1, c0 := g.replicaHealth("site1"), g.replicaHealth("site0"); c1 != http.StatusOK || c0 != http.StatusServiceUnavailable {
		t.Fatalf("health role=replica: site1 %d, site0 (the primary) %d; want 200 and 503", c1, c0)
	}

	g.kill(0)
	g.waitFor("failoverd follows the group's election", failoverTimeout, func() bool {
		s, err := g.status()
		st = s
		return err == nil && s.ActiveSite != "site0" && s.ActiveSite != "" && s.Epoch > first.Epoch
	})
	elected := st.ActiveSite
	other := "site1"
	if elected == "site1" {
		other = "site2"
	}
	// From the follow on, neither the killed member nor the new primary
	// is ever listed.
	g.waitFor("the readers are "+other+" alone", 30*time.Second, func() bool {
		s, err := g.status()
		if err != nil {
			return false
		}
		if r := readerSet(s); slices.Contains(r, "site0") || slices.Contains(r, elected) {
			t.Fatalf("after the follow the readers are %v (new primary %s)", r, elected)
		}
		st = s
		return slices.Equal(readerSet(s), []string{other})
	})
	for _, s := range st.Sites {
		t.Logf("%s reader: %+v", s.Name, s.Reader)
	}
	if ce, co := g.replicaHealth(elected), g.replicaHealth(other); ce != http.StatusServiceUnavailable || co != http.StatusOK {
		t.Fatalf("health role=replica: the new primary %s %d, %s %d; want 503 and 200", elected, ce, other, co)
	}
	before := len(load.Acked())
	load.WaitForAcks(t, before+50, 30*time.Second)
	load.Stop()
	if w := daemonWrites(t, g.gr.Members[g.index(other)]); len(w) > 0 {
		t.Fatalf("failoverd ran on %s: %q", other, w)
	}
}
