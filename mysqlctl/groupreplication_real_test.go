package mysqlctl

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/failoverd/failoverd/grview"
	"github.com/failoverd/failoverd/test/testenv"
)

// A real three-member single-primary Group Replication group of MySQL 9.7
// (MySQL only: Group Replication does not exist in MariaDB), read only
// through GroupStatus with the documented daemon account: every member
// reports the same quorate view and the recommended settings; after kill
// -9 of the primary grview's verdict names the primary the group elected;
// SetAsPrimary moves it to the other survivor; when that one is killed too
// the survivor is in a minority (no-quorum), and ForceMembers makes it a
// group of one again, with group_replication_force_members cleared; the
// restarted first primary lists itself OFFLINE and does not vote; a server
// without the plugin answers ErrNotSupported.
func TestRealMySQLOnlyGroupReplicationStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers")
	}
	engines, err := testenv.Engines()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(engines, testenv.MySQL) {
		t.Skipf("SKIP: Group Replication is MySQL's; %s does not select mysql", testenv.EngineEnv)
	}
	g := testenv.StartGroupReplication(t, 3)
	sites := make([]grview.Site, len(g.Members))
	readers := make([]*Instance, len(g.Members)) // status-only, as a poller reads
	actors := make([]*Instance, len(g.Members))
	for i, m := range g.Members {
		sites[i] = grview.Site{Name: m.Name, Addr: m.Addr()}
		for _, statusOnly := range []bool{true, false} {
			inst, err := Open(ctxFor(t, 30*time.Second), Options{Addr: m.Addr(), User: testenv.DaemonUser, Password: testenv.DaemonPassword,
				StatusOnly: statusOnly, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = inst.Close() })
			if statusOnly {
				readers[i] = inst
			} else {
				actors[i] = inst
			}
		}
	}
	read := func() ([]grview.Report, map[string]GroupStatus) {
		var reps []grview.Report
		all := map[string]GroupStatus{}
		for i, inst := range readers {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := inst.GroupStatus(ctx)
			cancel()
			if err == nil {
				reps = append(reps, st.Report(sites[i].Name))
				all[sites[i].Name] = st
			}
		}
		return reps, all
	}
	state := grview.State{}
	// waitVerdict polls every 100 ms until ok accepts the verdict.
	waitVerdict := func(what string, timeout time.Duration, ok func(grview.Verdict) bool) grview.Verdict {
		t.Helper()
		start := time.Now()
		var seen []grview.Reason
		for {
			reps, _ := read()
			var v grview.Verdict
			v, state = grview.Evaluate(state, sites, reps, time.Now())
			if len(seen) == 0 || seen[len(seen)-1] != v.Reason {
				seen = append(seen, v.Reason)
			}
			if ok(v) {
				t.Logf("%s after %v (verdicts on the way: %v)", what, time.Since(start).Round(time.Millisecond), seen)
				return v
			}
			if time.Since(start) > timeout {
				t.Fatalf("%s: not within %v; verdicts %v, last %+v", what, timeout, seen, v)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// Every member reports the same quorate view, member0 primary.
	_, all := read()
	if len(all) != 3 {
		t.Fatalf("GroupStatus answered by %d members: %v", len(all), all)
	}
	for i, m := range g.Members {
		st := all[m.Name]
		if st.GroupName != g.Name || st.LocalAddress != g.LocalAddresses[i] || st.ViewID == "" || !st.HasQuorum() || len(st.Members) != 3 {
			t.Fatalf("%s: %+v", m.Name, st)
		}
		if u := st.Settings.Unsafe(); u != nil {
			t.Errorf("%s runs with settings the harness should have set: %q", m.Name, u)
		}
		if self, _ := st.Self(); self.Host != "127.0.0.1" || self.Port != m.Port || st.SuperReadOnly != (i != 0) {
			t.Errorf("%s: self %+v super_read_only %t", m.Name, self, st.SuperReadOnly)
		}
	}
	v := waitVerdict("three members agree", 10*time.Second, func(v grview.Verdict) bool { return v.Reason == grview.ReasonQuorate })
	if v.PrimarySite != "member0" || len(v.Agreeing()) != 3 || v.ViewSize != 3 || len(v.Warnings) != 0 {
		t.Fatalf("verdict %+v", v)
	}
	primary := g.Members[0]
	primary.Exec(t, "CREATE TABLE app.gr (id INT PRIMARY KEY)")
	primary.Exec(t, "INSERT INTO app.gr VALUES (1)")

	// The watch sessions the daemon's poller holds (WatchGroupView): the
	// primary's ends when it is killed, a survivor's reports the new view,
	// then the switchover's election in the same view.
	type watched struct {
		triggers chan string
		ended    chan error
	}
	watch := func(m *testenv.Server) watched {
		w := watched{triggers: make(chan string, 64), ended: make(chan error, 1)}
		up := make(chan struct{})
		ctx := ctxFor(t, 10*time.Minute)
		go func() {
			w.ended <- WatchGroupView(ctx, Options{Addr: m.Addr(), User: testenv.DaemonUser, Password: testenv.DaemonPassword, Logger: slog.New(slog.DiscardHandler)},
				20*time.Millisecond, func() { close(up) }, func(prev, now GroupWatch) {
					select {
					case w.triggers <- now.Trigger(prev):
					default:
					}
				})
		}()
		select {
		case <-up:
		case err := <-w.ended:
			t.Fatalf("watch of %s: %v", m.Name, err)
		}
		return w
	}
	// seen waits until w reported trigger (any, for ""), listing what it
	// reported.
	seen := func(w watched, trigger string, within time.Duration) []string {
		t.Helper()
		var got []string
		deadline := time.After(within)
		for {
			select {
			case tr := <-w.triggers:
				got = append(got, tr)
				if tr == trigger || trigger == "" {
					return got
				}
			case err := <-w.ended:
				t.Fatalf("watch ended waiting for %s (saw %v): %v", trigger, got, err)
			case <-deadline:
				t.Fatalf("no %s reported within %v (saw %v)", trigger, within, got)
			}
		}
	}
	watches := []watched{watch(g.Members[0]), watch(g.Members[1]), watch(g.Members[2])}

	// kill -9 of the primary: the survivors elect one, and only their
	// quorate majority view moves the verdict.
	oldView := v.ViewID
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	v = waitVerdict("the group's election seen", 90*time.Second, func(v grview.Verdict) bool {
		return v.Reason == grview.ReasonQuorate && v.PrimarySite != "member0"
	})
	if v.ViewID == oldView || v.ViewSize != 2 || !v.PrimaryChanged || v.PreviousPrimary != all["member0"].ServerUUID {
		t.Fatalf("after the election: %+v", v)
	}
	select {
	case err := <-watches[0].ended:
		t.Logf("the killed primary's watch ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the killed primary's watch still stands")
	}
	for _, i := range []int{1, 2} {
		t.Logf("member%d's watch reported %v", i, seen(watches[i], TriggerViewChange, 5*time.Second))
	}
	elected := v.PrimarySite
	other := "member1"
	if elected == "member1" {
		other = "member2"
	}
	idx := func(name string) int {
		return slices.IndexFunc(sites, func(s grview.Site) bool { return s.Name == name })
	}
	_, all = read()
	target := all[other].ServerUUID

	// SetAsPrimary moves the primary to the other survivor, asked on it;
	// asked again it is a no-op.
	for len(watches[idx(other)].triggers) > 0 {
		<-watches[idx(other)].triggers // what the election after the kill reported
	}
	start := time.Now()
	if err := actors[idx(other)].SetAsPrimary(ctxFor(t, time.Minute), target, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("set_as_primary %s returned after %v", other, time.Since(start).Round(time.Millisecond))
	v = waitVerdict("the switchover seen", 10*time.Second, func(v grview.Verdict) bool {
		return v.Reason == grview.ReasonQuorate && v.PrimarySite == other
	})
	// The election in the same view (set_as_primary installs no new view,
	// as far as MySQL documents; either trigger runs the daemon's round).
	t.Logf("%s's watch reported %v after set_as_primary", other, seen(watches[idx(other)], "", 5*time.Second))
	if err := actors[idx(elected)].SetAsPrimary(ctxFor(t, time.Minute), target, 5*time.Second); err != nil {
		t.Fatalf("SetAsPrimary of the current primary: %v", err)
	}

	// Kill the new primary too: the last member is in a minority. It would
	// leave the group after group_replication_unreachable_majority_timeout
	// (10 s recommended); a longer one keeps it ONLINE while the test forces.
	survivor := g.Members[idx(elected)]
	survivor.Exec(t, "SET GLOBAL group_replication_unreachable_majority_timeout = 120")
	if err := g.Members[idx(other)].Kill(); err != nil {
		t.Fatal(err)
	}
	waitVerdict("quorum loss seen", 60*time.Second, func(v grview.Verdict) bool { return v.Reason == grview.ReasonNoQuorum })
	if err := actors[idx(elected)].ForceMembers(ctxFor(t, time.Minute), []string{g.LocalAddresses[idx(elected)]}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if fm := survivor.QueryString(t, "SELECT @@GLOBAL.group_replication_force_members"); fm != "" {
		t.Fatalf("group_replication_force_members left at %q", fm)
	}
	// A human lowered the denominator to the forced membership.
	state.MaxViewSize = 1
	v = waitVerdict("the forced group seen", 10*time.Second, func(v grview.Verdict) bool {
		return v.Reason == grview.ReasonQuorate && v.PrimarySite == elected
	})
	if v.ViewSize != 1 {
		t.Fatalf("forced view: %+v", v)
	}
	survivor.Exec(t, "INSERT INTO app.gr VALUES (2)")
	if n := survivor.QueryString(t, "SELECT COUNT(*) FROM app.gr"); n != "2" {
		t.Fatalf("rows %s after the forced group took a write", n)
	}

	// The killed first primary, restarted: Group Replication does not start
	// on boot here, so it lists itself alone, OFFLINE, and does not vote.
	if err := g.Members[0].Restart(ctxFor(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	st, err := readers[0].GroupStatus(ctxFor(t, 30*time.Second))
	if self, ok := st.Self(); err != nil || !ok || self.State != grview.StateOffline || st.HasQuorum() || len(st.Members) != 1 {
		t.Fatalf("restarted member: %+v, %v", st, err)
	}
	v = waitVerdict("the restarted member seen outside the group", 10*time.Second, func(v grview.Verdict) bool {
		return v.Reason == grview.ReasonQuorate && v.Sites[0].Standing == grview.StandingNotMember
	})
	if v.PrimarySite != elected {
		t.Fatalf("after the restart: %+v", v)
	}

	// A MySQL server without the plugin: the same one statement answers,
	// and GroupStatus says Group Replication is not there.
	plain := testenv.StartMySQL(t, testenv.ServerOptions{Name: "no-gr"})
	inst, err := Open(ctxFor(t, 30*time.Second), Options{Addr: plain.Addr(), User: testenv.DaemonUser, Password: testenv.DaemonPassword,
		StatusOnly: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	if st, err := inst.GroupStatus(ctxFor(t, 30*time.Second)); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("GroupStatus without the plugin: %+v, %v, want ErrNotSupported", st, err)
	}
}
