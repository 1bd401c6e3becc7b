package e2e

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/testenv"
)

// The way back from a total outage of a Group Replication group (MySQL
// only): every member is killed with SIGKILL and restarted (Group
// Replication does not start on boot here: each is OFFLINE, in no group);
// failoverd reports no quorum and keeps routing. `bootstrap-group` while a
// member is still down is refused (member-unreachable); without its token
// it answers the plan and its token and runs nothing; with it, the group
// is bootstrapped on the chosen member (whose GTID set contains every
// other's: here all equal, so a member other than the recorded primary is
// chosen, to see routing move), the others join it, failoverd follows the
// new group's primary, the router moves, group_replication_bootstrap_group
// is OFF again, and no acknowledged write from before the outage is lost.
func TestGroupReplicationMySQLOnlyBootstrapAfterTotalOutage(t *testing.T) {
	grMySQLOnly(t)
	g := newGRGroup(t)
	g.startDaemon()
	first := g.waitActive("site0", 30*time.Second)
	g.waitGRHealthy(30 * time.Second)
	g.follow()
	load := testenv.StartWriteLoad(t, []string{testenv.SiteDSN(g.router.Addr(), testenv.AppUser, testenv.AppPassword)}, testenv.WriteLoadOptions{Workers: 2})
	load.WaitForAcks(t, 100, 20*time.Second)
	load.Stop()
	// Every member applied everything: their sets are equal, so any of
	// them may bootstrap.
	g.waitFor("every member applied every write", 30*time.Second, func() bool {
		a := g.gr.Members[0].GTIDExecuted(t)
		return a == g.gr.Members[1].GTIDExecuted(t) && a == g.gr.Members[2].GTIDExecuted(t)
	})
	outage := time.Now()
	for i := range g.gr.Members {
		g.kill(i)
	}
	restart := func(idx ...int) {
		var wg sync.WaitGroup
		for _, i := range idx {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if err := g.gr.Members[i].Restart(ctx); err != nil {
					t.Errorf("restart member%d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	restart(0, 1)
	g.waitFor("no quorum reported", 30*time.Second, func() bool {
		s, err := g.status()
		return err == nil && s.Reason == "group-no-quorum"
	})
	t.Logf("total outage → no quorum reported after %v", time.Since(outage))
	if st, _ := g.status(); st.ActiveSite != "site0" || st.Epoch != first.Epoch {
		t.Fatalf("without quorum: active %s epoch %d, want site0 at %d", st.ActiveSite, st.Epoch, first.Epoch)
	}
	code, body := g.postJSON("/v1/groups/orders/bootstrap", `{"site": "site2"}`)
	if code != http.StatusConflict || !strings.Contains(body, "member-unreachable") || !strings.Contains(body, "site2 not reached") {
		t.Fatalf("bootstrap with site2 down: %d %s, want 409 member-unreachable", code, body)
	}
	restart(2)
	// The general log (a table, off again after a restart) shows
	// every statement failoverd runs from now on.
	for _, m := range g.gr.Members {
		// SIGKILL left the CSV table marked crashed. Without the binlog:
		// a binlogged repair gives each member a GTID of its own, and
		// bootstrap-group rightly refuses such incomparable sets.
		func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := m.AdminDB(t).Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			for _, q := range []string{"SET SESSION sql_log_bin = 0", "SET GLOBAL super_read_only = OFF", "REPAIR TABLE mysql.general_log",
				"TRUNCATE TABLE mysql.general_log", "SET GLOBAL super_read_only = ON"} {
				if _, err := conn.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %s: %v", m.Name, q, err)
				}
			}
		}()
		m.Exec(t, "SET GLOBAL log_output = 'TABLE'")
		m.Exec(t, "SET GLOBAL general_log = ON")
	}

	target := "site2"
	var token string
	g.waitFor("the bootstrap plan of every member reached", 30*time.Second, func() bool {
		code, body = g.postJSON("/v1/groups/orders/bootstrap", `{"site": "`+target+`"}`)
		if m := regexp.MustCompile(`bootstrap (site\d) instead`).FindStringSubmatch(body); code == http.StatusConflict && m != nil {
			target = m[1] // its set lacks another's: the other one
			return false
		}
		m := regexp.MustCompile(`confirmation token ([0-9a-f]{12})`).FindStringSubmatch(body)
		if code == http.StatusConflict && m != nil {
			token = m[1]
			return true
		}
		if strings.Contains(body, "incomparable-members") {
			t.Fatalf("bootstrap plan: %d %s", code, body)
		}
		t.Logf("bootstrap plan: %d %s", code, body)
		return false
	})
	if !strings.Contains(body, "bootstraps group "+g.gr.Name+" on "+target) {
		t.Fatalf("the plan: %s, want a bootstrap of %s on %s", body, g.gr.Name, target)
	}
	n := g.index(target)
	start := time.Now()
	code, body = g.postJSON("/v1/groups/orders/bootstrap", `{"site": "`+target+`", "confirm": "`+token+`"}`)
	if code != http.StatusAccepted {
		t.Fatalf("bootstrap with its token: %d %s", code, body)
	}
	t.Logf("bootstrap of %s and two joins took %v", target, time.Since(start))
	g.waitFor("failoverd follows the new group's primary "+target, 60*time.Second, func() bool {
		s, err := g.status()
		return err == nil && s.ActiveSite == target && s.GroupReplication != nil && s.GroupReplication.HasQuorum && s.GroupReplication.Denominator == 3
	})
	if p := g.gr.Primary(t); p != g.gr.Members[n] {
		t.Fatalf("the group's primary is %v, want member%d", p, n)
	}
	if target != "site0" {
		g.waitFor("the router follows "+target, 10*time.Second, func() bool { return !g.routedSince(target, outage).IsZero() })
	}
	for _, m := range g.gr.Members {
		if v := m.QueryString(t, "SELECT @@GLOBAL.group_replication_bootstrap_group"); v != "0" {
			t.Errorf("%s: group_replication_bootstrap_group = %s after the bootstrap, want OFF", m.Name, v)
		}
	}
	g.gr.WaitOnline(t, g.gr.Members[n], 3, 60*time.Second)
	// What failoverd ran: the bootstrap on the target, START
	// GROUP_REPLICATION alone on the others; nothing else.
	for i, m := range g.gr.Members {
		want := []string{"START GROUP_REPLICATION"}
		if i == n {
			want = []string{"SET GLOBAL group_replication_bootstrap_group = ON", "START GROUP_REPLICATION", "SET GLOBAL group_replication_bootstrap_group = OFF"}
		}
		if w := daemonWrites(t, m); !slices.Equal(w, want) {
			t.Errorf("failoverd ran on %s: %q, want %q", m.Name, w, want)
		}
	}
	if missing := load.Missing(t, g.gr.Members[n].AppDB(t)); len(missing) > 0 {
		t.Fatalf("%d acknowledged writes missing after the bootstrap: %v", len(missing), missing[:min(len(missing), 10)])
	}
	after := testenv.StartWriteLoad(t, []string{testenv.SiteDSN(g.router.Addr(), testenv.AppUser, testenv.AppPassword)}, testenv.WriteLoadOptions{Workers: 2})
	after.WaitForAcks(t, 20, 30*time.Second) // writes go through the router again
	after.Stop()
}
