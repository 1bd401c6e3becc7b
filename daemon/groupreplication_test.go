package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/grview"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/store"
)

// fakeGroup is a Group Replication group as its members report it: a test
// kills members, elects another primary or leaves one member on a stale
// view, and every statement the daemon runs is recorded in ops.
type fakeGroup struct {
	mu      sync.Mutex
	ops     *opLog
	view    string
	primary string
	// down members answer nothing; unreachable ones are still in the
	// others' view as UNREACHABLE (not yet expelled); recovering ones are
	// RECOVERING.
	down, unreachable, recovering map[string]bool
	// stale members report their own old view (cut off, detector not fired).
	stale map[string]mysqlctl.GroupStatus
	// elect, when set, is what set_as_primary does (nil: elects at once).
	setAsPrimaryErr error
	// offline members run, their Group Replication stopped (a total
	// outage): OFFLINE alone in their table, in no view.
	offline map[string]bool
	// executed overrides a member's gtid_executed.
	executed map[string]string
	// startErr fails START GROUP_REPLICATION on a member.
	startErr map[string]error
}

var grSites = []string{"a", "b", "c"}

func grUUID(site string) string { return "00000000-0000-0000-0000-00000000000" + site }

func newFakeGroup() *fakeGroup {
	return &fakeGroup{ops: &opLog{}, view: "1700000000:1", primary: "a", down: map[string]bool{}, unreachable: map[string]bool{},
		recovering: map[string]bool{}, stale: map[string]mysqlctl.GroupStatus{}, offline: map[string]bool{}, executed: map[string]string{},
		startErr: map[string]error{}}
}

var grSettings = grview.Settings{SinglePrimaryMode: true, Consistency: "BEFORE_ON_PRIMARY_FAILOVER", ExitStateAction: "OFFLINE_MODE",
	AutoRejoinTries: 3, UnreachableMajorityTimeout: 10 * time.Second, MemberExpelTimeout: 5 * time.Second}

// statusOf is what site reports now (f.mu held).
func (f *fakeGroup) statusOf(site string) mysqlctl.GroupStatus {
	if s, ok := f.stale[site]; ok {
		return s
	}
	executed := "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-10"
	if e, ok := f.executed[site]; ok {
		executed = e
	}
	gs := mysqlctl.GroupStatus{ServerUUID: grUUID(site), GroupName: "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa", ViewID: f.view,
		LocalAddress: "127.0.0.1:3306" + site,
		Settings:     grSettings, Executed: gtid.MustParse(gtid.MySQL, executed)}
	if f.offline[site] {
		gs.ViewID = ""
		gs.Members = []grview.Member{{ID: grUUID(site), Host: "127.0.0.1", Port: 3306 + slices.Index(grSites, site), State: grview.StateOffline}}
		return gs
	}
	for i, s := range grSites {
		if f.down[s] && !f.unreachable[s] || f.offline[s] {
			continue // expelled, or not started
		}
		m := grview.Member{ID: grUUID(s), Host: "127.0.0.1", Port: 3306 + i, State: grview.StateOnline, Role: grview.RoleSecondary}
		switch {
		case f.unreachable[s]:
			m.State = grview.StateUnreachable
		case f.recovering[s]:
			m.State = grview.StateRecovering
		}
		if s == f.primary && m.State == grview.StateOnline {
			m.Role = grview.RolePrimary
		}
		gs.Members = append(gs.Members, m)
	}
	return gs
}

// fakeMember is one member's connection: every Instance statement and
// set_as_primary is recorded; GroupStatus reads are recorded as
// "group-status".
type fakeMember struct {
	fakeInstance
	g *fakeGroup
}

func (m fakeMember) GroupStatus(ctx context.Context) (mysqlctl.GroupStatus, error) {
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	if m.g.down[m.site] {
		return mysqlctl.GroupStatus{}, fmt.Errorf("dial %s: connection refused", m.site)
	}
	return m.g.statusOf(m.site), nil
}

func (m fakeMember) SetAsPrimary(ctx context.Context, uuid string, timeout time.Duration) error {
	m.note("set-as-primary " + uuid)
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	if m.g.setAsPrimaryErr != nil {
		return m.g.setAsPrimaryErr
	}
	for _, s := range grSites {
		if grUUID(s) == uuid {
			m.g.primary = s
			m.g.view = strings.Replace(m.g.view, ":", ":1", 1)
		}
	}
	return nil
}

func (m fakeMember) ForceMembers(ctx context.Context, addrs []string, timeout time.Duration) error {
	m.note("force-members " + strings.Join(addrs, ","))
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	for _, s := range grSites {
		if !slices.Contains(addrs, "127.0.0.1:3306"+s) {
			m.g.down[s], m.g.unreachable[s] = true, false
		}
	}
	if m.g.down[m.g.primary] {
		m.g.primary = m.site
	}
	m.g.view = "1700000000:9"
	return nil
}

func (m fakeMember) BootstrapGroup(ctx context.Context, timeout time.Duration) error {
	m.note("bootstrap-group")
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	m.g.offline[m.site] = false
	m.g.primary, m.g.view = m.site, "1800000000:1"
	return nil
}

func (m fakeMember) StartGroupReplication(ctx context.Context, timeout time.Duration) error {
	m.note("start-group-replication")
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	if err := m.g.startErr[m.site]; err != nil {
		return err
	}
	m.g.offline[m.site] = false
	return nil
}

// electAfterKill kills the primary and lets b and c install a new view
// electing b.
func (f *fakeGroup) electAfterKill(killed, elected string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[killed] = true
	f.primary = elected
	f.view = "1700000000:2"
}

func grConfig() configs.Group {
	gc := configs.Group{Name: "g", Engine: configs.EngineMySQL, Replication: configs.ReplicationGroup, ProbeTimeout: time.Second, RelayDrainTimeout: time.Second, FailureThreshold: 3, RecoveryThreshold: 2,
		PollInterval: time.Second}
	for i, s := range grSites {
		gc.Sites = append(gc.Sites, configs.Site{Name: s, MySQL: configs.MySQLEndpoint{Address: fmt.Sprintf("127.0.0.1:%d", 3306+i)}})
	}
	return gc
}

// grHarness runs the Group Replication loop of grConfig on fg with a
// recording follower.
func grHarness(t *testing.T, fg *fakeGroup, ms *watchedStore) (*Harness, *flaky) {
	t.Helper()
	fol := &flaky{}
	h, err := NewHarness(grConfig(), HarnessOptions{Observations: fixedObs{}, Store: ms, Clock: clockAt(t0), Followers: []Follower{fol},
		Dial: func(_ context.Context, s configs.Site) (Instance, error) {
			return fakeMember{fakeInstance: fakeInstance{site: s.Name, log: fg.ops}, g: fg}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h, fol
}

// grRound runs one round of the loop and returns the decision.
func grRound(t *testing.T, h *Harness) sitepair.Decision {
	t.Helper()
	h.g.round(context.Background(), h.serving)
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	if h.g.lastErr != nil {
		t.Fatalf("round: %v", h.g.lastErr)
	}
	return h.g.last
}

// writesRun lists every recorded statement but the reads.
func writesRun(l *opLog) []string {
	var out []string
	for _, op := range l.list() {
		if !strings.HasSuffix(op, ":status") {
			out = append(out, op)
		}
	}
	return out
}

// The group elects, failoverd follows: the first round adopts the group's
// primary; after the primary is killed and the survivors elect b, the next
// round publishes a new epoch naming b, routing follows it, the
// after-promote hooks run, the history
// records a failover-observed with its timeline (primary-lost, view-changed,
// published, routed), and no statement but the group reads ever reached a
// member (no fence, promote, read_only, replica or semi-sync statement).
func TestGroupReplicationFollowsTheGroupsElectionAndNeverFencesOrPromotes(t *testing.T) {
	fg := newFakeGroup()
	ms := newTestStore(t)
	h, fol := grHarness(t, fg, ms)
	hk := &recordedHooks{}
	h.g.hooks = hk
	ctx := context.Background()

	if d := grRound(t, h); d.Reason != sitepair.ReasonGroupAdoptPrimary || h.State().ActiveSite != "a" || h.State().Epoch != 1 {
		t.Fatalf("first round: %s, state %+v; want a adopted at epoch 1", d, h.State())
	}
	if d := grRound(t, h); d.Reason != sitepair.ReasonGroupHealthy {
		t.Fatalf("steady round: %s, want %s", d, sitepair.ReasonGroupHealthy)
	}
	fg.mu.Lock()
	fg.down["a"], fg.unreachable["a"] = true, true // a dies; its peers' detector has not fired yet
	fg.mu.Unlock()
	if d := grRound(t, h); h.State().ActiveSite != "a" || d.Action == sitepair.AdoptPrimary {
		t.Fatalf("before the group elects: %s, active %s; routing must stay", d, h.State().ActiveSite)
	}
	fg.electAfterKill("a", "b")
	fg.mu.Lock()
	fg.unreachable["a"] = false // expelled
	fg.mu.Unlock()
	d := grRound(t, h)
	if d.Reason != sitepair.ReasonGroupPrimaryElected || d.Target != "b" || d.From != "a" {
		t.Fatalf("after the election: %s, want %s to b", d, sitepair.ReasonGroupPrimaryElected)
	}
	if st := h.State(); st.ActiveSite != "b" || st.Epoch != 2 {
		t.Fatalf("state %+v, want b at epoch 2", st)
	}
	if s, ok := h.g.pub.get("g"); !ok || s.View.ActiveSite != "b" || s.View.Epoch != 2 {
		t.Fatalf("published view %+v, want b at epoch 2", s.View)
	}
	if !h.Follow(ctx, false) {
		t.Fatal("routing did not follow")
	}
	if _, followed := fol.snapshot(); len(followed) == 0 || followed[len(followed)-1].ActiveSite != "b" {
		t.Fatalf("routing followed %+v, want b last", followed)
	}
	grRound(t, h) // stamps routed
	hist := h.g.history(t0)
	var rec *status.FailoverRecord
	for _, e := range hist.Entries {
		if e.Failover != nil && e.Failover.Kind == kindObserved {
			rec = e.Failover
		}
	}
	if rec == nil || rec.From != "a" || rec.To != "b" || rec.Epoch != 2 || rec.Outcome != store.OutcomeCompleted {
		t.Fatalf("history %+v, want a failover-observed a → b at epoch 2", hist.Entries)
	}
	var steps []string
	for _, s := range rec.Timeline {
		steps = append(steps, s.Step)
	}
	if want := []string{TimelinePrimaryLost, TimelineViewChanged, StepPublished, TimelineRouted}; strings.Join(steps, ",") != strings.Join(want, ",") {
		t.Fatalf("timeline %v, want %v", steps, want)
	}
	if w := writesRun(fg.ops); len(w) > 0 {
		t.Fatalf("failoverd ran statements on the group's members: %v", w)
	}
	if got := hk.types(); !slices.Contains(got, configs.HookAfterPromote+":b") {
		t.Fatalf("hooks fired %v, want after-promote of b (the hooks move what routing does not)", got)
	}
	snap := h.g.snapshot(t0)
	if gr := snap.GroupReplication; gr == nil || !gr.HasQuorum || gr.PrimarySite != "b" || gr.ViewSize != 2 || gr.Denominator != 3 || gr.Members["ONLINE"] != 2 {
		t.Fatalf("status %+v, want quorate, b primary, view of 2 of a denominator of 3", snap.GroupReplication)
	}
	if snap.RPO != status.RPOZero || !strings.Contains(snap.RPONote, "Group Replication") {
		t.Errorf("status RPO %s (%s), want zero by the group's certification, not semi-sync's", snap.RPO, snap.RPONote)
	}
	if snap.LastFailover == nil || snap.LastFailover.Kind != kindObserved {
		t.Fatalf("status lastFailover %+v, want a failover-observed", snap.LastFailover)
	}
}

// A single member on a stale view naming another primary (cut off, its
// detector not fired) is outvoted: routing does not move.
func TestGroupReplicationStaleMemberDoesNotMoveRouting(t *testing.T) {
	fg := newFakeGroup()
	h, _ := grHarness(t, fg, newTestStore(t))
	grRound(t, h)
	fg.mu.Lock()
	old := fg.statusOf("c")
	old.ViewID = "1699999999:9"
	for i := range old.Members {
		old.Members[i].Role = grview.RoleSecondary
		if old.Members[i].ID == grUUID("c") {
			old.Members[i].Role = grview.RolePrimary
		}
	}
	fg.stale["c"] = old
	fg.mu.Unlock()
	for range 3 {
		if d := grRound(t, h); d.Action == sitepair.AdoptPrimary || h.State().ActiveSite != "a" || h.State().Epoch != 1 {
			t.Fatalf("a stale member moved routing: %s, state %+v", d, h.State())
		}
	}
	if d := h.Last(); d.Reason != sitepair.ReasonGroupMemberNotOnline {
		t.Fatalf("decision %s, want %s naming the stale member", d, sitepair.ReasonGroupMemberNotOnline)
	}
}

// Two of three members lost: the survivor sees them UNREACHABLE, its view
// is not quorate; the decision is blocked (group-no-quorum), the epoch and
// routing stay, status and metrics say no quorum, nothing is written.
func TestGroupReplicationQuorumLostBlocksAndChangesNothing(t *testing.T) {
	fg := newFakeGroup()
	h, _ := grHarness(t, fg, newTestStore(t))
	grRound(t, h)
	fg.mu.Lock()
	for _, s := range []string{"a", "b"} {
		fg.down[s], fg.unreachable[s] = true, true
	}
	fg.mu.Unlock()
	d := grRound(t, h)
	if d.Reason != sitepair.ReasonGroupNoQuorum || sitepair.ClassOf(d.Reason) != sitepair.ClassBlocked {
		t.Fatalf("decision %s, want %s (blocked)", d, sitepair.ReasonGroupNoQuorum)
	}
	if st := h.State(); st.ActiveSite != "a" || st.Epoch != 1 {
		t.Fatalf("state %+v moved without quorum", st)
	}
	gr := h.g.snapshot(t0).GroupReplication
	if gr == nil || gr.HasQuorum || gr.Verdict != string(grview.ReasonNoQuorum) || gr.Denominator != 3 {
		t.Fatalf("status %+v, want no quorum of 3", gr)
	}
	if w := writesRun(fg.ops); len(w) > 0 {
		t.Fatalf("statements reached the members without quorum: %v", w)
	}
	if err := h.Switchover(context.Background(), "c", false); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), string(sitepair.ReasonSwitchoverGroupNoQuorum)) {
		t.Fatalf("switchover without quorum = %v, want refused (%s)", err, sitepair.ReasonSwitchoverGroupNoQuorum)
	}
}

// A switchover asks the group (set_as_primary with the target's uuid, on
// the target), and routing moves only once a quorate verdict names it; the
// history records it as a switchover by its requester. A target not
// ONLINE is refused with its reason and nothing is asked of the group.
func TestGroupReplicationSwitchoverAsksTheGroupAndFollowsItsElection(t *testing.T) {
	fg := newFakeGroup()
	h, fol := grHarness(t, fg, newTestStore(t))
	ctx := context.Background()
	grRound(t, h)
	fg.mu.Lock()
	fg.recovering["c"] = true
	fg.mu.Unlock()
	grRound(t, h)
	if err := h.Switchover(ctx, "c", false); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), string(sitepair.ReasonSwitchoverTargetNotOnline)) {
		t.Fatalf("switchover to a recovering member = %v, want refused (%s)", err, sitepair.ReasonSwitchoverTargetNotOnline)
	}
	if w := writesRun(fg.ops); len(w) > 0 {
		t.Fatalf("a refused switchover ran %v", w)
	}
	fg.mu.Lock()
	fg.recovering["c"] = false
	fg.mu.Unlock()
	grRound(t, h)
	if err := h.Switchover(ctx, "c", false); err != nil {
		t.Fatalf("switchover to c: %v", err)
	}
	if w := writesRun(fg.ops); len(w) != 1 || w[0] != "c:set-as-primary "+grUUID("c") {
		t.Fatalf("statements %v, want one set_as_primary of c's uuid on c", w)
	}
	if h.State().ActiveSite != "a" {
		t.Fatal("routing moved before the group's view confirmed the election")
	}
	if d := grRound(t, h); d.Reason != sitepair.ReasonGroupPrimaryElected || h.State().ActiveSite != "c" || h.State().Epoch != 2 {
		t.Fatalf("after the election: %s, state %+v", d, h.State())
	}
	h.Follow(ctx, false)
	if _, followed := fol.snapshot(); followed[len(followed)-1].ActiveSite != "c" {
		t.Fatalf("routing followed %+v, want c", followed)
	}
	var rec *status.FailoverRecord
	for _, e := range h.g.history(t0).Entries {
		if e.Failover != nil && e.Failover.To == "c" {
			rec = e.Failover
		}
	}
	if rec == nil || rec.Kind != kindSwitchover || rec.By != "harness" || rec.Timeline[0].Step != TimelineRequested || rec.Timeline[1].Step != TimelineSetAsPrimary {
		t.Fatalf("history %+v, want a switchover by harness, requested then set-as-primary", rec)
	}
	fg.mu.Lock()
	fg.setAsPrimaryErr = errors.New("timed out")
	fg.mu.Unlock()
	if err := h.Switchover(ctx, "a", false); err == nil || !strings.Contains(err.Error(), "set_as_primary") {
		t.Fatalf("failed set_as_primary = %v, want its error", err)
	}
	if h.State().ActiveSite != "c" {
		t.Fatal("a failed switchover moved routing")
	}
}

// The async loop's human steps have no place in a group the group elects:
// confirm-fence, reclone and holds are refused with why.
func TestGroupReplicationRefusesAsyncOnlyRequests(t *testing.T) {
	fg := newFakeGroup()
	h, _ := grHarness(t, fg, newTestStore(t))
	grRound(t, h)
	lead := func() (context.Context, time.Time, bool) { return context.Background(), t0, true }
	for _, req := range []request{
		{kind: kindConfirmFence, target: "a", by: "ann"},
		{kind: kindReclone, target: "b", token: "b", by: "ann"},
		{kind: kindHold, target: "a", holdKind: string(sitepair.HoldNoPromote), lasts: time.Hour, by: "ann"},
	} {
		if err := h.g.handle(req, lead); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "replication: group") {
			t.Errorf("%s = %v, want refused naming replication: group", req.kind, err)
		}
	}
	if w := writesRun(fg.ops); len(w) > 0 {
		t.Fatalf("statements reached the members: %v", w)
	}
}
