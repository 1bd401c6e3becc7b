package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/test/testenv"
)

// cacheFollower is the cache follower's status in st, if any.
func cacheFollower(st groupStatus) (status.Follower, bool) {
	for _, f := range st.Routing {
		if f.Name == "cache" {
			return f, true
		}
	}
	return status.Follower{}, false
}

// An emergency MySQL failover moves the cache primary with it: the new
// primary site's Redis replica is promoted with every key it had, and the
// old master's site rejoins as a replica once it is back.
func TestCacheFollowsAnEmergencyFailover(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, cache: true})
		g.startDaemon()
		g.waitHealthy("site0", 30*time.Second)
		master := g.caches[0].Client(t)
		for _, k := range []string{"a", "b", "c"} {
			if err := master.Set(t.Context(), "session:"+k, k, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		g.caches[1].WaitInSync(t, g.caches[0], 10*time.Second)
		g.kill(0)
		if err := g.caches[0].Kill(); err != nil { // the whole site is gone
			t.Fatal(err)
		}
		g.expectSolePrimary("site1")
		g.waitFor("site1's Redis is the cache master", 30*time.Second, func() bool {
			return g.caches[1].Info(t, "replication")["role"] == "master"
		})
		for _, k := range []string{"a", "b", "c"} {
			if v, err := g.caches[1].Client(t).Get(t.Context(), "session:"+k).Result(); err != nil || v != k {
				t.Fatalf("session:%s on the new cache master: %q, %v", k, v, err)
			}
		}
		g.waitFor("site2's Redis replicates from site1's", 30*time.Second, func() bool {
			info := g.caches[2].Info(t, "replication")
			return info["role"] == "slave" && info["master_port"] == strings.TrimPrefix(g.caches[1].Addr(), g.caches[1].Host+":")
		})
	})
}

// A cache that is down during a MySQL failover does not hold the MySQL
// promotion back: the new primary is writable on time, the cache follower
// reports the failure, and once Redis is back the caches converge without
// another failover.
func TestCacheDownDuringFailoverDoesNotDelayPromotion(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, cache: true, extraConfig: "    routingReconcileInterval: 1s\n"})
		g.startDaemon()
		g.waitHealthy("site0", 30*time.Second)
		for _, c := range g.caches {
			if err := c.Stop(); err != nil {
				t.Fatal(err)
			}
		}
		g.kill(0)
		st := g.expectSolePrimary("site1")
		g.waitFor("the cache follower reports the outage", 30*time.Second, func() bool {
			st, err := g.status()
			f, ok := cacheFollower(st)
			return err == nil && ok && f.State != "ok" && f.Error != ""
		})
		for _, i := range []int{1, 2} {
			if err := g.caches[i].Restart(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		// site0's cache stays down with its site: only it may still be reported.
		g.waitFor("the caches converge on site1", 30*time.Second, func() bool {
			a, b := g.caches[1].Info(t, "replication"), g.caches[2].Info(t, "replication")
			st, err := g.status()
			f, ok := cacheFollower(st)
			return a["role"] == "master" && b["role"] == "slave" && b["master_link_status"] == "up" &&
				err == nil && ok && !strings.Contains(f.Error, "site1") && !strings.Contains(f.Error, "site2")
		})
		if now, _ := g.status(); now.Epoch != st.Epoch || now.ActiveSite != "site1" {
			t.Fatalf("routing converged with another failover: epoch %d → %d, active %s", st.Epoch, now.Epoch, now.ActiveSite)
		}
	})
}

// A planned switchover moves the cache first (FAILOVER TO on Redis): every
// key written before the switch is on the new cache master, the old master
// replicates from it, and the status says the sessions were preserved.
func TestCacheMovesBeforeASwitchover(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, cache: true})
		g.startDaemon()
		g.waitHealthy("site0", 30*time.Second)
		master := g.caches[0].Client(t)
		for i := range 200 {
			if err := master.Set(t.Context(), fmt.Sprintf("session:%d", i), i, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if code, body := g.post("/v1/groups/orders/switchover?target=site1"); code != http.StatusAccepted {
			t.Fatalf("switchover: %d %s", code, body)
		}
		st := g.expectSolePrimary("site1")
		if m := st.CacheSwitchover; m == nil || !m.SessionsPreserved || !m.Synced || m.To != "site1" {
			t.Fatalf("cache move in the status: %+v", m)
		}
		if role := g.caches[1].Info(t, "replication")["role"]; role != "master" {
			t.Fatalf("site1's cache is %s, want master", role)
		}
		n, err := g.caches[1].Client(t).DBSize(t.Context()).Result()
		if err != nil || n != 200 {
			t.Fatalf("the new cache master holds %d keys (%v), want 200", n, err)
		}
		g.waitFor("the old cache master replicates from the new one", 30*time.Second, func() bool {
			info := g.caches[0].Info(t, "replication")
			return info["role"] == "slave" && info["master_port"] == fmt.Sprint(g.caches[1].Port)
		})
	})
}

// The cache master killed alone (MySQL healthy): no MySQL failover, the
// cache follower reports it, and once it is back (restarted empty) the
// periodic re-check makes it the master again with the replicas following.
func TestCacheMasterKilledAloneIsHandled(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		g := newGroup(t, groupOptions{engine: e, sites: 3, cache: true, extraConfig: "    routingReconcileInterval: 1s\n"})
		g.startDaemon()
		before := g.waitHealthy("site0", 30*time.Second)
		if err := g.caches[0].Kill(); err != nil {
			t.Fatal(err)
		}
		g.waitFor("the cache follower reports the dead master", 30*time.Second, func() bool {
			st, err := g.status()
			f, ok := cacheFollower(st)
			return err == nil && ok && f.State != "ok" && strings.Contains(f.Error, "site0")
		})
		if err := g.caches[0].Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		g.waitFor("the caches converge on site0 again", 30*time.Second, func() bool {
			st, err := g.status()
			f, ok := cacheFollower(st)
			return err == nil && ok && f.State == "ok" && g.caches[0].Info(t, "replication")["role"] == "master" &&
				g.caches[1].Info(t, "replication")["master_link_status"] == "up" && g.caches[2].Info(t, "replication")["master_link_status"] == "up"
		})
		if st, _ := g.status(); st.Epoch != before.Epoch || st.ActiveSite != "site0" {
			t.Fatalf("a cache failure moved MySQL: epoch %d → %d, active %s", before.Epoch, st.Epoch, st.ActiveSite)
		}
	})
}
