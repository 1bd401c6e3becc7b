package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/test/testenv"
)

// grGroup is a real three-member single-primary Group Replication group of
// MySQL 9.7 with failoverd (the real binary) following it as a
// replication: group group, and a router: the application's one address
// (a TCP proxy) that a routing follower moves to the member failoverd's
// published view names, as the Service selector or the DNS record would.
type grGroup struct {
	*group
	gr     *testenv.GroupReplication
	router *testenv.Proxy
	// routed is every move of the router: to which member, when.
	mu     sync.Mutex
	routed []routedAt
	stop   chan struct{}
	done   chan struct{}
}

type routedAt struct {
	site string
	at   time.Time
}

// grMySQLOnly skips unless the engines under test include MySQL: Group
// Replication does not exist in MariaDB.
func grMySQLOnly(t testing.TB) {
	t.Helper()
	engines, err := testenv.Engines()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(engines, testenv.MySQL) {
		t.Skipf("SKIP: Group Replication is MySQL's; %s does not select mysql", testenv.EngineEnv)
	}
}

// newGRGroup starts the group, writes failoverd's configuration for it
// (site i is member i), turns on every member's general log (table) so the
// test can read back each statement failoverd ran, and starts the router.
func newGRGroup(t testing.TB) *grGroup {
	t.Helper()
	return newGRGroupWith(t, testenv.GroupReplicationOptions{})
}

// newGRGroupWith is newGRGroup with the group's options (e.g. members in
// network namespaces of their own, which CutOff can cut from the rest).
func newGRGroupWith(t testing.TB, opts testenv.GroupReplicationOptions) *grGroup {
	t.Helper()
	gr := testenv.StartGroupReplicationWith(t, 3, opts)
	g := &group{t: t, engine: testenv.MySQL, topo: &testenv.Topology{Engine: testenv.MySQL, Sites: gr.Members}, dir: t.TempDir()}
	for name, content := range map[string]string{"daemon.pw": testenv.DaemonPassword, "repl.pw": testenv.ReplPassword, "api.token": apiToken} {
		if err := os.WriteFile(filepath.Join(g.dir, name), []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g.listen = freeAddr(t)
	// A cache per member (member0's the master): the routing follower the
	// daemon moves itself, whose completion the history stamps routed.
	for i := range gr.Members {
		r := testenv.StartRedis(t, testenv.RedisOptions{Name: fmt.Sprintf("cache%d", i)})
		if i > 0 {
			r.ReplicaOf(t, g.caches[0].Host, g.caches[0].Port)
		}
		g.caches = append(g.caches, r)
	}
	var sites strings.Builder
	for i, m := range gr.Members {
		fmt.Fprintf(&sites, "      - name: site%d\n        mysql:\n          address: %s\n        cache:\n          address: %s\n", i, m.Addr(), g.caches[i].Addr())
		m.Exec(t, "SET GLOBAL log_output = 'TABLE'")
		m.Exec(t, "SET GLOBAL general_log = ON")
	}
	cfg := fmt.Sprintf(`daemon:
  listen: %s
  apiTokenFile: api.token
  stateStore:
    path: state.json
groups:
  - name: orders
    engine: mysql
    replication: group
    pollInterval: 500ms
    probeTimeout: 400ms
    credentials:
      admin:
        user: %s
        passwordFile: daemon.pw
      replication:
        user: %s
        passwordFile: repl.pw
    cache:
      engine: redis
      maxSyncWait: 2s
    sites:
%s`, g.listen, testenv.DaemonUser, testenv.ReplUser, sites.String())
	g.config = filepath.Join(g.dir, "failoverd.yaml")
	if err := os.WriteFile(g.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.stopDaemon)
	gg := &grGroup{group: g, gr: gr, router: testenv.NewProxy(t, "router", gr.Members[0].Addr()), stop: make(chan struct{}), done: make(chan struct{})}
	return gg
}

// follow runs the routing follower: every 20 ms it reads the daemon's
// status and moves the router to the member its active site names.
func (g *grGroup) follow() {
	current := "site0"
	go func() {
		defer close(g.done)
		for {
			select {
			case <-g.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			st, err := g.status()
			if err != nil || st.ActiveSite == "" || st.ActiveSite == current {
				continue
			}
			var i int
			if _, err := fmt.Sscanf(st.ActiveSite, "site%d", &i); err != nil || i >= len(g.gr.Members) {
				continue
			}
			g.router.Retarget(g.gr.Members[i].Addr())
			current = st.ActiveSite
			g.mu.Lock()
			g.routed = append(g.routed, routedAt{st.ActiveSite, time.Now()})
			g.mu.Unlock()
		}
	}()
	g.t.Cleanup(func() {
		select {
		case <-g.stop:
		default:
			close(g.stop)
		}
		<-g.done
	})
}

// routedTo is when the router moved to site (zero if it did not).
func (g *grGroup) routedTo(site string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.routed {
		if r.site == site {
			return r.at
		}
	}
	return time.Time{}
}

// index is the member a site name stands for.
func (g *grGroup) index(site string) int {
	var i int
	if _, err := fmt.Sscanf(site, "site%d", &i); err != nil {
		g.t.Fatalf("site %q: %v", site, err)
	}
	return i
}

// writeStatement matches what failoverd must never run on a Group
// Replication member (fence, promote, replica threads, the group's own
// membership), and set_as_primary, which only a switchover may.
var writeStatement = regexp.MustCompile(`(?is)^\s*(SET\s+(GLOBAL|PERSIST|@@GLOBAL|@@PERSIST)\b|STOP\b|START\b|RESET\b|CHANGE\b|KILL\b|CLONE\b|FLUSH\b)|` +
	`group_replication_set_as_primary|group_replication_force_members`)

// daemonWrites lists the statements of the daemon's account in m's general
// log that writeStatement matches.
func daemonWrites(t *testing.T, m *testenv.Server) []string {
	t.Helper()
	rows, err := m.AdminDB(t).Query("SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log WHERE command_type IN ('Query', 'Execute') AND user_host LIKE ?",
		testenv.DaemonUser+"[%")
	if err != nil {
		t.Fatalf("%s: read the general log: %v", m.Name, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		if writeStatement.MatchString(s) {
			out = append(out, s)
		}
	}
	return out
}

// history is the daemon's GET /v1/groups/orders/history.
func (g *grGroup) history() status.History {
	g.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+g.listen+"/v1/groups/orders/history", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	var h status.History
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		g.t.Fatalf("decode history: %v", err)
	}
	return h
}

// The acceptance scenario of a Group Replication group (MySQL only): with a
// write load through the router, kill -9 of the elected primary makes the
// group elect another; failoverd's published view (a new epoch naming it),
// the router, the cache (within 1 s of failoverd seeing the view change)
// and the history's failover-observed follow; no acknowledged
// write is lost; and the general log of every survivor shows that
// failoverd ran no fence, promote, read_only, replica, membership or
// set_as_primary statement. Then a switchover under load moves the primary
// with set_as_primary (the one statement it runs), routing follows, and
// again nothing acknowledged is lost.
func TestGroupReplicationMySQLOnlyKillPrimaryAndSwitchoverUnderLoad(t *testing.T) {
	grMySQLOnly(t)
	g := newGRGroup(t)
	g.startDaemon()
	first := g.waitActive("site0", 30*time.Second)
	g.waitFor("the group verdict is quorate", 30*time.Second, func() bool {
		st, err := g.status()
		return err == nil && st.Reason == "group-healthy" && st.GroupReplication != nil && st.GroupReplication.HasQuorum
	})
	g.follow()
	load := testenv.StartWriteLoad(t, []string{testenv.SiteDSN(g.router.Addr(), testenv.AppUser, testenv.AppPassword)}, testenv.WriteLoadOptions{Workers: 2})
	load.WaitForAcks(t, 50, 20*time.Second)

	killed := time.Now()
	g.kill(0)
	var st groupStatus
	g.waitFor("failoverd follows the group's election", failoverTimeout, func() bool {
		s, err := g.status()
		st = s
		return err == nil && s.ActiveSite != "site0" && s.ActiveSite != "" && s.Epoch > first.Epoch
	})
	elected := st.ActiveSite
	n := g.index(elected)
	if p := g.gr.Primary(t); p == nil || p != g.gr.Members[n] {
		t.Fatalf("failoverd names %s, the group's primary is %v", elected, p)
	}
	if st.Epoch != first.Epoch+1 || st.LastFailover == nil || st.LastFailover.Kind != "failover-observed" || st.LastFailover.From != "site0" {
		t.Fatalf("after the election: epoch %d (was %d), last failover %+v", st.Epoch, first.Epoch, st.LastFailover)
	}
	g.waitFor("the router follows "+elected, 10*time.Second, func() bool { return !g.routedTo(elected).IsZero() })
	t.Logf("kill -9 → router on %s: %v (the group's detection and election included)", elected, g.routedTo(elected).Sub(killed))
	before := len(load.Acked())
	load.WaitForAcks(t, before+50, 30*time.Second) // writes resume through the router
	var rec *status.FailoverRecord
	g.waitFor("the history stamps routed", 10*time.Second, func() bool {
		for _, e := range g.history().Entries {
			if f := e.Failover; f != nil && f.Kind == "failover-observed" && f.To == elected && len(f.Timeline) > 0 && f.Timeline[len(f.Timeline)-1].Step == "routed" {
				rec = f
			}
		}
		return rec != nil
	})
	var seen, routed time.Time
	for _, s := range rec.Timeline {
		switch s.Step {
		case "view-changed":
			seen = s.At
		case "routed":
			routed = s.At
		}
	}
	var steps []string
	for _, s := range rec.Timeline {
		steps = append(steps, fmt.Sprintf("%s +%.3fs", s.Step, s.SinceStartSeconds))
	}
	t.Logf("failoverd saw the group's view change → routing (the cache) followed: %v; timeline %s", routed.Sub(seen), strings.Join(steps, ", "))
	if seen.IsZero() || routed.Sub(seen) > time.Second {
		t.Errorf("failoverd's routing (the cache) followed %v after it saw the group's view change (want within 1 s): %+v", routed.Sub(seen), rec.Timeline)
	}
	g.checkWatchEvents(elected)
	if role := g.caches[n].Info(t, "replication")["role"]; role != "master" {
		t.Errorf("the cache of %s is %s, want master", elected, role)
	}

	// A switchover under load to the other survivor, with set_as_primary.
	to := 1
	if n == 1 {
		to = 2
	}
	target := fmt.Sprintf("site%d", to)
	code, body := g.post("/v1/groups/orders/switchover?target=" + target)
	if code != http.StatusAccepted {
		t.Fatalf("switchover to %s: %d %s", target, code, body)
	}
	g.waitFor("failoverd follows the switchover to "+target, 30*time.Second, func() bool {
		s, err := g.status()
		return err == nil && s.ActiveSite == target && s.LastFailover != nil && s.LastFailover.Kind == "switchover"
	})
	g.waitFor("the router follows "+target, 10*time.Second, func() bool { return !g.routedTo(target).IsZero() })
	before = len(load.Acked())
	load.WaitForAcks(t, before+50, 30*time.Second)
	load.Stop()
	if missing := load.Missing(t, g.gr.Members[to].AppDB(t)); len(missing) > 0 {
		t.Fatalf("%d acknowledged writes missing on the new primary %s: %v", len(missing), target, missing[:min(len(missing), 10)])
	}
	if missing := load.Missing(t, g.gr.Members[n].AppDB(t)); len(missing) > 0 {
		g.waitFor(elected+" has every acknowledged write", 20*time.Second, func() bool { return len(load.Missing(t, g.gr.Members[n].AppDB(t))) == 0 })
	}
	// What failoverd ran on the members: nothing that writes, but the one
	// set_as_primary of the switchover, on its target.
	for _, i := range []int{1, 2} {
		w := daemonWrites(t, g.gr.Members[i])
		if i == to && len(w) == 1 && strings.Contains(w[0], "group_replication_set_as_primary") {
			continue
		}
		if len(w) > 0 {
			t.Errorf("failoverd ran on site%d: %q", i, w)
		}
	}
}

// Two of three members killed: the survivor is in a minority. failoverd
// reports no quorum (group-no-quorum) within a few rounds, keeps its view
// and routing, runs nothing on the survivor, and a switchover to it is
// refused with the reason. The recovery command without its confirmation
// token is refused with the plan and the token, and runs nothing; with
// it, the survivor (whose set contains every other survivor's: it is the
// only one) is forced to a group of one and routing follows it (MySQL only).
func TestGroupReplicationMySQLOnlyQuorumLostIsReportedAndRecoveredByAHuman(t *testing.T) {
	grMySQLOnly(t)
	g := newGRGroup(t)
	// The survivor must still be in its minority view when the human
	// forces it: with the recommended 10 s it would leave the group first
	// (OFFLINE_MODE), and a member outside any group needs a bootstrap,
	// which failoverd does not do.
	for _, m := range g.gr.Members {
		m.Exec(t, "SET GLOBAL group_replication_unreachable_majority_timeout = 300")
	}
	g.startDaemon()
	first := g.waitActive("site0", 30*time.Second)
	g.waitFor("the group verdict is quorate", 30*time.Second, func() bool {
		st, err := g.status()
		return err == nil && st.Reason == "group-healthy"
	})
	killed := time.Now()
	g.kill(0)
	g.kill(1)
	var st groupStatus
	g.waitFor("no quorum reported", 20*time.Second, func() bool {
		s, err := g.status()
		st = s
		return err == nil && s.Reason == "group-no-quorum" && s.GroupReplication != nil && !s.GroupReplication.HasQuorum
	})
	t.Logf("two members killed → no quorum reported after %v", time.Since(killed))
	if st.ActiveSite != "site0" || st.Epoch != first.Epoch || st.Class != "blocked" {
		t.Fatalf("without quorum: active %s epoch %d class %s, want site0 at %d, blocked", st.ActiveSite, st.Epoch, st.Class, first.Epoch)
	}
	code, body := g.post("/v1/groups/orders/switchover?target=site2")
	if code != http.StatusConflict || !strings.Contains(body, "switchover-refused-group-no-quorum") {
		t.Fatalf("switchover without quorum: %d %s, want 409 switchover-refused-group-no-quorum", code, body)
	}
	time.Sleep(2 * time.Second) // a few more rounds
	if w := daemonWrites(t, g.gr.Members[2]); len(w) > 0 {
		t.Fatalf("failoverd ran on the survivor without quorum: %q", w)
	}

	code, body = g.postJSON("/v1/groups/orders/force-members", `{"site": "site2"}`)
	m := regexp.MustCompile(`confirmation token ([0-9a-f]{12})`).FindStringSubmatch(body)
	if code != http.StatusConflict || m == nil || !strings.Contains(body, "left out: site0, site1") {
		t.Fatalf("force-members without its token: %d %s, want 409 with the plan and its token", code, body)
	}
	if w := daemonWrites(t, g.gr.Members[2]); len(w) > 0 {
		t.Fatalf("a refused recovery ran %q", w)
	}
	code, body = g.postJSON("/v1/groups/orders/force-members", `{"site": "site2", "confirm": "`+m[1]+`"}`)
	if code != http.StatusAccepted {
		t.Fatalf("force-members with its token: %d %s", code, body)
	}
	g.waitFor("routing follows the forced group to site2", 30*time.Second, func() bool {
		s, err := g.status()
		return err == nil && s.ActiveSite == "site2" && s.GroupReplication != nil && s.GroupReplication.HasQuorum && s.GroupReplication.Denominator == 1
	})
	if p := g.gr.Primary(t); p != g.gr.Members[2] {
		t.Fatalf("the group's primary is %v, want member2", p)
	}
	if w := daemonWrites(t, g.gr.Members[2]); len(w) != 1 || !strings.Contains(w[0], "group_replication_force_members") {
		// The clearing SET GLOBAL group_replication_force_members='' is
		// the same variable: count the statements naming it.
		var forced int
		for _, s := range w {
			if strings.Contains(s, "group_replication_force_members") {
				forced++
			}
		}
		if forced != len(w) {
			t.Fatalf("failoverd ran on the survivor: %q, want only force_members (set and cleared)", w)
		}
	}
}

// postJSON calls a command endpoint with a JSON body and the API token.
func (g *grGroup) postJSON(path, body string) (int, string) {
	g.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.listen+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// playgroundGroupReplication is `make playground ARGS=--replication=group`:
// a real three-member MySQL Group Replication group on loopback, a Redis
// per member, the daemon following the group, and a write load through a
// router that follows the daemon's view; then the primary is killed, the
// group elects, and the playground prints failoverd's history of it.
func playgroundGroupReplication(t *testing.T) {
	out := io.Writer(os.Stdout)
	if !testing.Verbose() {
		out = io.Discard
	}
	say := func(format string, args ...any) { fmt.Fprintf(out, "playground: "+format+"\n", args...) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	start := time.Now()
	say("starting a 3-member MySQL Group Replication group (single-primary) and a Redis per member ...")
	g := newGRGroup(t)
	g.startDaemon()
	g.waitActive("site0", 30*time.Second)
	g.follow()
	load := testenv.StartWriteLoad(t, []string{testenv.SiteDSN(g.router.Addr(), testenv.AppUser, testenv.AppPassword)}, testenv.WriteLoadOptions{Workers: 2})
	load.WaitForAcks(t, 50, 20*time.Second)
	bin := *playBinary
	if bin == "" {
		bin = binary
	}
	say("ready in %.1fs; a write load runs through the router %s, which follows failoverd's view", time.Since(start).Seconds(), g.router.Addr())
	fmt.Fprintf(out, "\n  watch it:    %s status -w --server http://%s\n  history:     %s history orders --server http://%s\n  config:      %s\n\n",
		bin, g.listen, bin, g.listen, g.config)
	if _, table, _ := g.cli("status"); table != "" {
		fmt.Fprintln(out, indent(table))
	}
	if ctx.Err() != nil {
		return
	}
	say("killing site0's mysqld (SIGKILL), the group's primary, under write load: the group elects, failoverd follows ...")
	killed := time.Now()
	g.kill(0)
	g.waitFor("failoverd follows the group's election", failoverTimeout, func() bool {
		st, err := g.status()
		return err == nil && st.ActiveSite != "" && st.ActiveSite != "site0"
	})
	st, _ := g.status()
	before := len(load.Acked())
	load.WaitForAcks(t, before+50, 30*time.Second)
	load.Stop()
	missing := load.Missing(t, g.gr.Members[g.index(st.ActiveSite)].AppDB(t))
	say("the group elected %s; failoverd published epoch %d naming it %.1fs after the kill", st.ActiveSite, st.Epoch, time.Since(killed).Seconds())
	for _, e := range g.history().Entries {
		if f := e.Failover; f != nil && f.Kind == "failover-observed" {
			for _, s := range f.Timeline {
				fmt.Fprintf(out, "  %8s  %s\n", fmt.Sprintf("+%dms", s.At.Sub(killed).Milliseconds()), s.Step)
			}
		}
	}
	fmt.Fprintf(out, "  acknowledged writes lost: %d (of %d acknowledged)\n\n", len(missing), len(load.Acked()))
	if len(missing) > 0 {
		t.Fatalf("%d acknowledged writes missing on %s", len(missing), st.ActiveSite)
	}
	if _, table, _ := g.cli("status"); table != "" {
		fmt.Fprintln(out, indent(table))
	}
	if *playInteractive {
		say("everything keeps running; try `%s switchover orders site2 --token-file %s` (group_replication_set_as_primary); Ctrl-C stops it all",
			bin, filepath.Join(g.dir, "api.token"))
		<-ctx.Done()
		say("Ctrl-C: tearing down")
	}
}

// checkWatchEvents checks, in the daemon's log, that the members' watch
// sessions woke the loop: site0's broke when it was killed (watch-lost)
// and a survivor reported the group's new view (view-change); and logs
// what ran the round that followed elected (a watch event, or the poll as
// the backstop, which may come first).
func (g *grGroup) checkWatchEvents(elected string) {
	g.t.Helper()
	lost, viewChange := false, false
	trigger := ""
	for _, line := range strings.Split(g.logs.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch {
		case l["msg"] == "group.watch_event" && l["trigger"] == "watch-lost" && l["site"] == "site0":
			lost = true
		case l["msg"] == "group.watch_event" && l["trigger"] == "view-change" && l["site"] != "site0":
			viewChange = true
		case l["msg"] == "group.primary_followed" && l["to"] == elected:
			trigger = fmt.Sprintf("%v (site %v)", l["trigger"], l["trigger_site"])
		}
	}
	g.t.Logf("the round that followed %s was run by: %s", elected, trigger)
	if !lost || !viewChange {
		g.t.Errorf("watch events in the daemon log: site0 watch-lost %t, a survivor's view-change %t; want both", lost, viewChange)
	}
}
