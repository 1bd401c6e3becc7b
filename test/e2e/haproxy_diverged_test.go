package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/testenv"
	"github.com/failoverd/failoverd/view"
)

// sidecarHealth is one GET /health?query on a sidecar: its status code and
// reason ("" when it did not answer).
func sidecarHealth(addr, query string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/health?" + query)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var h struct{ Reason string }
	_ = json.Unmarshal(b, &h)
	return resp.StatusCode, h.Reason
}

// activeSiteView is the daemon's /active-site view (zero when unreadable).
func activeSiteView(g *group) view.View {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + g.listen + "/active-site?group=orders")
	if err != nil {
		return view.View{}
	}
	defer resp.Body.Close()
	var s view.Signed
	if json.NewDecoder(resp.Body).Decode(&s) != nil {
		return view.View{}
	}
	v, err := s.Verify([]byte(viewKey))
	if err != nil {
		return view.View{}
	}
	return v
}

// TestHAProxyNeverReadsFromADivergedReplica is issue 29's "a diverged
// replica never serves reads" through the shipped HAProxy, on real servers
// of both engines, with read routing off (the exclusion does not need it):
// an operator's errant write on site2 (its replication keeps running, its
// lag stays low) makes the daemon mark it diverged and sign it into the
// view's noReads; site2's sidecar then answers its read check 503 with
// that reason within a few sidecar rounds and keeps doing so, the reader
// backend drops it, and no read through the reader frontend that started
// after HAProxy marked it down is served by site2.
func TestHAProxyNeverReadsFromADivergedReplica(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, sidecars: true})
		g.startDaemon()
		g.waitHealthy("site0", 30*time.Second)
		g.startSidecars()
		g.waitSidecarsRenewed()
		primary, site2 := g.topo.Sites[0], g.topo.Sites[2]
		primary.Exec(t, "CREATE TABLE app.errant (id INT PRIMARY KEY)")
		g.topo.WaitReplicated(t, 20*time.Second)
		h := startHAProxy(t, g, "5s")
		writer := testenv.SiteDSN(h.Addr("writer"), testenv.AppUser, testenv.AppPassword)
		reader := testenv.SiteDSN(h.Addr("reader"), testenv.AppUser, testenv.AppPassword)
		hb := startHeartbeat(t, writer)
		reads := startReadLoad(t, reader, 2)
		// Both replicas serve reads before: the check below can fail.
		g.waitFor("reads served by site2 through haproxy", 20*time.Second, func() bool {
			for _, rd := range reads.all() {
				if rd.server == site2.ServerID {
					return true
				}
			}
			return false
		})
		if code, why := sidecarHealth(g.sidecarAddrs[2], "role=replica&maxLag=5s"); code != http.StatusOK {
			t.Fatalf("site2's sidecar before the errant write: %d %q, want 200", code, why)
		}

		g.note("errant write on site2")
		errant := []string{"INSERT INTO app.errant (id) VALUES (1)"}
		if e == testenv.MariaDB {
			// In a domain of its own: in domain 0 the primary's next event
			// would break site2's applier under gtid_strict_mode, and the
			// sidecar's 503 would come from the stopped thread, not the view.
			errant = append([]string{"SET SESSION gtid_domain_id = 99"}, errant...)
		}
		if err := operatorExec(t, site2, errant...); err != nil {
			t.Fatal(err)
		}
		g.waitFor("site2 recorded as diverged", 20*time.Second, func() bool {
			_, ok := g.stateFile().Diverged["site2"]
			return ok
		})
		seen := time.Now()
		if v := activeSiteView(g); v.NoReads["site2"] != "diverged" {
			t.Errorf("/active-site view %+v, want site2 withheld from reads as diverged", v)
		}
		// A few sidecar rounds (checkInterval 300ms) after the daemon saw it.
		g.waitFor("site2's sidecar withholds it from reads", 10*300*time.Millisecond, func() bool {
			code, why := sidecarHealth(g.sidecarAddrs[2], "role=replica&maxLag=5s")
			return code == http.StatusServiceUnavailable && why == "withheld from reads by the daemon's view: diverged"
		})
		t.Logf("site2's sidecar answered 503 %v after the daemon recorded the divergence", time.Since(seen))
		if !g.follows(site2, primary) {
			t.Fatal("site2 stopped replicating: the 503 would not show the view's exclusion")
		}
		waitHAProxyUp(t, h, "mysql_readers", []string{"site1"}, 10*time.Second)
		out := time.Now()
		t.Logf("site2 left the reader backend %v after the daemon recorded the divergence", out.Sub(seen))

		// It stays out: no gossiped older view lifts the exclusion.
		for range 10 {
			if code, why := sidecarHealth(g.sidecarAddrs[2], "role=replica&maxLag=5s"); code != http.StatusServiceUnavailable || !strings.Contains(why, "diverged") {
				t.Fatalf("site2's sidecar answered %d %q after withholding it", code, why)
			}
			time.Sleep(300 * time.Millisecond)
		}
		reads.waitReads(t, 20, 20*time.Second)
		reads.Stop()
		hb.Stop()
		n := 0
		for _, rd := range reads.all() {
			if !rd.start.After(out) {
				continue
			}
			n++
			if rd.server == site2.ServerID {
				t.Fatalf("a read started %v after site2 left the reader backend was served by the diverged site2", rd.start.Sub(out))
			}
		}
		if n == 0 {
			t.Fatal("no read through the reader frontend after site2 left it")
		}
		if up, err := h.Up(t.Context(), "mysql_readers"); err != nil || len(up) != 1 || up[0] != "site1" {
			t.Errorf("reader backend at the end: %v, %v; want [site1]", up, err)
		}
		t.Logf("%d reads through the reader frontend after site2 left it, none by site2 (%d errors)", n, reads.errs.Load())
	})
}
