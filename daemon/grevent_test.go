package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/grview"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/poller"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
)

// eventObs is the Observations of a Group Replication group whose member
// watch sessions' events the test sends.
type eventObs struct {
	fixedObs
	events chan poller.WatchEvent
}

func (o eventObs) WatchEvents() <-chan poller.WatchEvent { return o.events }

// runningGR runs the whole loop (group.run, as the daemon does) of
// grConfig on fg with the given poll interval, always leading; the test
// sends member watch events on the returned channel. The loop's log is
// logs.
func runningGR(t *testing.T, fg *fakeGroup, poll time.Duration) (h *Harness, events chan poller.WatchEvent, logs *syncBuffer) {
	t.Helper()
	gc := grConfig()
	gc.PollInterval = poll
	events, logs = make(chan poller.WatchEvent, 4), &syncBuffer{}
	h, err := NewHarness(gc, HarnessOptions{Observations: eventObs{events: events}, Store: newTestStore(t), Clock: time.Now,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Dial: func(_ context.Context, s configs.Site) (Instance, error) {
			return fakeMember{fakeInstance: fakeInstance{site: s.Name, log: fg.ops}, g: fg}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	serving := time.Now()
	go func() {
		defer close(done)
		h.g.run(ctx, func() (context.Context, time.Time, bool) { return ctx, serving, true })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return h, events, logs
}

// waitActive waits up to within for the group's record to name site.
func waitActive(t *testing.T, h *Harness, site string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for h.State().ActiveSite != site {
		if time.Since(start) > within {
			t.Fatalf("active site %q after %v, want %s", h.State().ActiveSite, within, site)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// logged returns the log lines with message msg, decoded.
func logged(logs *syncBuffer, msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// A member's new view wakes the loop at once: with a poll interval of an
// hour (no backstop round in the test's time), the view-change event of a
// survivor runs the round that follows the group's election, and the
// daemon logs the event and names it as the follow's trigger. The decision
// is still the cross-validated verdict's: the event only ran the round.
func TestGroupReplicationViewChangeEventRunsARoundAtOnce(t *testing.T) {
	fg := newFakeGroup()
	h, events, logs := runningGR(t, fg, time.Hour)
	events <- poller.WatchEvent{Site: "a", Trigger: mysqlctl.TriggerMemberChange, Detail: "start"}
	waitActive(t, h, "a", 5*time.Second)

	fg.electAfterKill("a", "b")
	time.Sleep(50 * time.Millisecond)
	if got := h.State().ActiveSite; got != "a" {
		t.Fatalf("active site %s before any event or poll, want a (no round ran)", got)
	}
	events <- poller.WatchEvent{Site: "b", Trigger: mysqlctl.TriggerViewChange, Detail: "view 1700000000:2 (was 1700000000:1)"}
	took := waitActive(t, h, "b", 5*time.Second)
	t.Logf("view-change event → b followed in %v", took)
	f := logged(logs, "group.primary_followed") // the adoption of a, then b
	if len(f) != 2 || f[1]["trigger"] != mysqlctl.TriggerViewChange || f[1]["trigger_site"] != "b" || f[1]["to"] != "b" {
		t.Fatalf("group.primary_followed lines %v, want the follow of b naming trigger view-change on b", f)
	}
	if ev := logged(logs, "group.watch_event"); len(ev) != 2 || ev[1]["site"] != "b" || ev[1]["trigger"] != mysqlctl.TriggerViewChange {
		t.Fatalf("group.watch_event lines %v", ev)
	}
	if w := writesRun(fg.ops); len(w) > 0 {
		t.Fatalf("statements run on the members: %v", w)
	}
}

// A broken watch session (the member died) wakes the loop at once: the
// round reads every member and sees the dead one unreached, without
// waiting for the poll (an hour here).
func TestGroupReplicationBrokenWatchRunsARound(t *testing.T) {
	fg := newFakeGroup()
	h, events, logs := runningGR(t, fg, time.Hour)
	events <- poller.WatchEvent{Site: "a", Trigger: mysqlctl.TriggerMemberChange}
	waitActive(t, h, "a", 5*time.Second)

	fg.mu.Lock()
	fg.down["c"], fg.unreachable["c"] = true, true
	fg.mu.Unlock()
	events <- poller.WatchEvent{Site: "c", Trigger: poller.TriggerWatchLost, Detail: "session ended: EOF"}
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.g.mu.Lock()
		_, seen := h.g.gr.errs["c"]
		h.g.mu.Unlock()
		if seen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no round read the dead member after its watch broke")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ev := logged(logs, "group.watch_event"); len(ev) != 2 || ev[1]["trigger"] != poller.TriggerWatchLost || ev[1]["site"] != "c" {
		t.Fatalf("group.watch_event lines %v, want c's watch-lost", ev)
	}
	if got := h.State().ActiveSite; got != "a" {
		t.Fatalf("active site %s, want a: a broken watch moves nothing by itself", got)
	}
}

// Without any event the poll still runs the rounds (the backstop): the
// group's election is followed within a few poll intervals, and the
// follow names the poll as its trigger.
func TestGroupReplicationPollRunsWithoutEvents(t *testing.T) {
	fg := newFakeGroup()
	h, _, logs := runningGR(t, fg, 100*time.Millisecond)
	waitActive(t, h, "a", 5*time.Second)
	fg.electAfterKill("a", "c")
	took := waitActive(t, h, "c", 5*time.Second)
	t.Logf("followed by the poll in %v", took)
	if f := logged(logs, "group.primary_followed"); len(f) != 2 || f[1]["trigger"] != "poll" || f[1]["to"] != "c" {
		t.Fatalf("group.primary_followed lines %v, want the follow of c naming the poll", f)
	}
	if ev := logged(logs, "group.watch_event"); len(ev) != 0 {
		t.Fatalf("watch events logged without any: %v", ev)
	}
}

// bigView is a Group Replication group of five members of which the
// configuration names three (a, b, c; d and e run but were never added to
// sites): members lists who is in the group's one view, a the primary.
type bigView struct {
	mu      sync.Mutex
	members []string
	view    string
}

func (v *bigView) status(site string) (mysqlctl.GroupStatus, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	gs := mysqlctl.GroupStatus{ServerUUID: grUUID(site), GroupName: "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa", ViewID: v.view,
		LocalAddress: "127.0.0.1:3306" + site, Settings: grSettings, Executed: gtid.MustParse(gtid.MySQL, "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-10")}
	in := false
	for i, s := range v.members {
		in = in || s == site
		m := grview.Member{ID: grUUID(s), Host: "127.0.0.1", Port: 3306 + int(s[0]-'a'), State: grview.StateOnline, Role: grview.RoleSecondary}
		if i == 0 {
			m.Role = grview.RolePrimary
		}
		gs.Members = append(gs.Members, m)
	}
	if !in {
		return mysqlctl.GroupStatus{}, fmt.Errorf("dial %s: connection refused", site)
	}
	return gs, nil
}

type bigViewMember struct {
	fakeMember
	v *bigView
}

func (m bigViewMember) GroupStatus(context.Context) (mysqlctl.GroupStatus, error) {
	return m.v.status(m.site)
}

// bigViewHarness is a daemon of grConfig (a, b, c) on bv and st.
func bigViewHarness(t *testing.T, bv *bigView, st store.Store) *Harness {
	t.Helper()
	h, err := NewHarness(grConfig(), HarnessOptions{Observations: fixedObs{}, Store: st, Clock: clockAt(t0),
		Dial: func(_ context.Context, s configs.Site) (Instance, error) {
			return bigViewMember{fakeMember: fakeMember{fakeInstance: fakeInstance{site: s.Name, log: &opLog{}}}, v: bv}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

// The sticky denominator survives a restart: a daemon that saw the group
// quorate with five members persists 5 in the group's record; once the
// group is down to a and b in a view of their own (c, d and e gone), a
// daemon restarted on the same store still takes majorities of five and
// does not call the 2-of-5 view quorate nor follow it, where a daemon
// without the record (the configured three) would.
func TestGroupReplicationDenominatorSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	bv := &bigView{members: []string{"a", "b", "c", "d", "e"}, view: "1700000000:1"}
	st := newTestStore(t)
	h := bigViewHarness(t, bv, st)
	grRound(t, h)
	if v := h.g.gr.verdict; v.Reason != grview.ReasonQuorate || v.Denominator != 5 || h.State().ActiveSite != "a" {
		t.Fatalf("first daemon: verdict %+v, active %q", v, h.State().ActiveSite)
	}
	saved, err := st.Load(ctx, "g")
	if err != nil || saved.GroupReplication == nil || saved.GroupReplication.MaxViewSize != 5 {
		t.Fatalf("stored %+v, %v: want the denominator 5 persisted", saved.GroupReplication, err)
	}

	// The group shrinks to a and b in a view of two; b is the primary.
	bv.mu.Lock()
	bv.members, bv.view = []string{"b", "a"}, "1700000000:7"
	bv.mu.Unlock()
	restarted := bigViewHarness(t, bv, st)
	if got := restarted.g.gr.state.MaxViewSize; got != 5 {
		t.Fatalf("restarted daemon's denominator %d, want the persisted 5", got)
	}
	grRound(t, restarted)
	if v := restarted.g.gr.verdict; v.Quorate || v.Denominator != 5 || restarted.State().ActiveSite != "a" {
		t.Fatalf("restarted daemon: verdict %s quorate %t denominator %d, active %q: a 2-of-5 view must not win",
			v.Reason, v.Quorate, v.Denominator, restarted.State().ActiveSite)
	}

	// What the record prevents: the configured three alone make 2 of 3.
	fresh := bigViewHarness(t, bv, newTestStore(t))
	grRound(t, fresh)
	if v := fresh.g.gr.verdict; !v.Quorate || v.Denominator != 3 {
		t.Fatalf("a daemon without the record: %+v (the test's premise)", v)
	}
}

// A record written before the denominator was kept (no groupReplication
// key) loads as unknown: the daemon takes the configured members, as
// before, and writes the denominator with its first quorate verdict.
func TestGroupReplicationRecordWithoutDenominatorLoads(t *testing.T) {
	st := newTestStore(t, store.GroupState{Group: "g", Epoch: 4, ActiveSite: "a"})
	h := bigViewHarness(t, &bigView{members: []string{"a", "b", "c"}, view: "1700000000:1"}, st)
	if got := h.g.gr.state.MaxViewSize; got != 0 {
		t.Fatalf("denominator %d loaded from a record without one, want 0 (the configured members)", got)
	}
	grRound(t, h)
	saved, err := st.Load(context.Background(), "g")
	if err != nil || saved.GroupReplication == nil || saved.GroupReplication.MaxViewSize != 3 || saved.Epoch != 4 {
		t.Fatalf("stored %+v (epoch %d), %v: want the denominator 3 written, the epoch kept", saved.GroupReplication, saved.Epoch, err)
	}
}

// The one way the denominator shrinks is a human's: force-members lowers
// it to the survivors and persists that with the audit, so a daemon
// restarted on the same store follows the forced group (a majority of one)
// instead of falling back to the configured three.
func TestGroupReplicationForcedDenominatorSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	fg := newFakeGroup()
	st := newTestStore(t)
	h, _ := grHarness(t, fg, st)
	grRound(t, h)
	fg.mu.Lock()
	for _, s := range []string{"a", "b"} {
		fg.down[s], fg.unreachable[s] = true, true
	}
	fg.mu.Unlock()
	grRound(t, h)
	lead := func() (context.Context, time.Time, bool) { return ctx, t0, true }
	err := h.g.handle(request{kind: kindForceMembers, target: "c", token: "x", by: "ann"}, lead)
	m := regexp.MustCompile(`confirmation token ([0-9a-f]{12})`).FindStringSubmatch(fmt.Sprint(err))
	if m == nil {
		t.Fatalf("force-members without the token = %v", err)
	}
	if err := h.g.handle(request{kind: kindForceMembers, target: "c", token: m[1], by: "ann"}, lead); err != nil {
		t.Fatal(err)
	}
	if saved, err := st.Load(ctx, "g"); err != nil || saved.GroupReplication == nil || saved.GroupReplication.MaxViewSize != 1 {
		t.Fatalf("stored %+v, %v: want the forced denominator 1", saved.GroupReplication, err)
	}
	restarted, _ := grHarness(t, fg, st)
	if d := grRound(t, restarted); d.Reason != sitepair.ReasonGroupPrimaryElected || d.Target != "c" || restarted.g.gr.verdict.Denominator != 1 {
		t.Fatalf("restarted after forcing: %s, denominator %d; want routing on c, a majority of one", d, restarted.g.gr.verdict.Denominator)
	}
}
