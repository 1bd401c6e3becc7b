package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/kube"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
)

// modeConfig is a three-site MariaDB group a, b, c in mode (from YAML, so
// the mode is decoded and every default applied as in production).
func modeConfig(t *testing.T, mode string) *configs.Config {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"admin.pw", "repl.pw"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	yaml := `daemon:
  listen: 127.0.0.1:8080
groups:
  - name: g
    engine: mariadb
    mode: ` + mode + `
    fencing: confirmed
    credentials:
      admin: {user: failoverd, passwordFile: admin.pw}
      replication: {user: repl, passwordFile: repl.pw}
    hooks:
      - name: notify
        command: [/bin/true]
        events: [before-promote, after-promote, failover-failed, split-brain, recovery-blocked]
    sites:
      - {name: a, mysql: {address: "127.0.0.1:1"}}
      - {name: b, mysql: {address: "127.0.0.1:2"}}
      - {name: c, mysql: {address: "127.0.0.1:3"}}
`
	cfg, err := configs.Parse(yaml, dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Daemon.Listen = "127.0.0.1:0" // any free port
	return cfg
}

// settableObs observes whatever the test last set; always settled.
type settableObs struct {
	mu sync.Mutex
	o  sitepair.Observed
}

func (s *settableObs) set(o sitepair.Observed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.o = o
}

func (s *settableObs) Observed() sitepair.Observed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fixedObs{s.o}.Observed()
}

func (*settableObs) Settled(time.Time) bool { return true }

// modeGroup is a daemon (New, as in production) running group g of
// modeConfig(mode) on st, with fake servers, a recording follower and
// recorded hooks; log receives the group's JSON log.
type modeGroup struct {
	d      *Daemon
	g      *group
	ops    *opLog
	follow *flaky
	hooks  *recordedHooks
	obs    *settableObs
	log    *bytes.Buffer
}

func newModeGroup(t *testing.T, mode string, st store.Store) *modeGroup {
	t.Helper()
	m := &modeGroup{ops: &opLog{}, follow: &flaky{}, hooks: &recordedHooks{}, obs: &settableObs{}, log: &bytes.Buffer{}}
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	d, err := New(context.Background(), modeConfig(t, mode), Options{
		Logger: slog.New(slog.NewJSONHandler(m.log, nil)), Clock: clockAt(t0), Store: st, Identity: "me",
		Dial: func(_ context.Context, _ configs.Group, s configs.Site) (Instance, error) {
			return fakeInstance{site: s.Name, log: m.ops, executed: exec}, nil
		},
		Followers: func(configs.Group, *kube.Clusters, *slog.Logger) ([]Follower, error) {
			return []Follower{m.follow}, nil
		},
		ReaderFollowers: func(configs.Group, *kube.Clusters, *slog.Logger) []ReaderFollower {
			return []ReaderFollower{&recordingReaders{name: "dns-readers"}}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.listener.Close() })
	m.d, m.g = d, d.groups[0]
	m.g.obs, m.g.hooks = m.obs, m.hooks
	return m
}

// round is one round of the group's loop on o.
func (m *modeGroup) round(o sitepair.Observed) sitepair.Decision {
	m.obs.set(o)
	m.g.round(context.Background(), t0)
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	return m.g.last
}

// logged returns the log lines with message msg.
func (m *modeGroup) logged(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(m.log.String()), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// Observations of sites a, b, c holding 0-1-10.
var modeExec = gtid.MustParse(gtid.MariaDB, "0-1-10")

func modeSite(name string, i int, state statemachine.State, f func(*sitepair.SiteObservation)) sitepair.SiteObservation {
	o := sitepair.SiteObservation{Name: name, Role: sitepair.PrimaryCandidate, Index: i, State: state, Executed: modeExec, LagKnown: true}
	if f != nil {
		f(&o)
	}
	return o
}

// healthyObs: a is the writable primary, b and c stream from it.
func healthyObs() sitepair.Observed {
	follows := func(o *sitepair.SiteObservation) { o.ReplicatingFrom, o.IOConnected = "a", true }
	return sitepair.Observed{Sites: []sitepair.SiteObservation{
		modeSite("a", 0, statemachine.Writable, nil), modeSite("b", 1, statemachine.ReadOnly, follows), modeSite("c", 2, statemachine.ReadOnly, follows)}}
}

// primaryDownObs: a refuses every probe and both replicas lost it.
func primaryDownObs() sitepair.Observed {
	lost := func(o *sitepair.SiteObservation) { o.ReplicatingFrom, o.IOConnected = "a", false }
	return sitepair.Observed{Sites: []sitepair.SiteObservation{
		modeSite("a", 0, statemachine.Unreachable, func(o *sitepair.SiteObservation) { o.RefusedProbes = 2 }),
		modeSite("b", 1, statemachine.ReadOnly, lost), modeSite("c", 2, statemachine.ReadOnly, lost)}}
}

// An observing group that sees its primary die decides the failover an
// active group would start and logs it as decision.would, once, with the
// action, reason, target and epoch, and changes nothing: no call on any
// server, no follower or hook run, no store write, the signed view and
// the persisted state as they were; the status says mode observe.
func TestObserveModeLogsWouldAndWritesNothing(t *testing.T) {
	st := newTestStore(t, store.GroupState{Group: "g", Epoch: 1, ActiveSite: "a"})
	saves := 0
	st.onSave = func(store.GroupState) { saves++ }
	m := newModeGroup(t, configs.ModeObserve, st)
	for range 3 {
		if d := m.round(primaryDownObs()); d.Action != sitepair.RevokeEpoch || d.Target != "b" || d.Epoch != 2 {
			t.Fatalf("decision %s, want revoke-epoch to b at epoch 2 (what an active group decides)", d)
		}
	}
	would := m.logged(t, "decision.would")
	if len(would) != 1 {
		t.Fatalf("%d decision.would lines over three equal rounds, want 1: %v", len(would), would)
	}
	if w := would[0]; w["action"] != "revoke-epoch" || w["reason"] != string(sitepair.ReasonFailoverRevoke) || w["target"] != "b" ||
		w["epoch"] != float64(2) || w["from"] != "a" || w["mode"] != "observe" {
		t.Fatalf("decision.would %v", w)
	}
	if n := len(m.logged(t, "decision")); n != 0 {
		t.Errorf("%d plain decision lines for an acting decision, want only decision.would", n)
	}
	if len(m.g.follow.followers) != 0 {
		t.Errorf("the observing group has followers %v: routing or the cache could move", m.g.follow.followers)
	}
	if m.g.readFollow != nil {
		t.Errorf("the observing group has reader followers %v: the reader targets could move", m.g.readFollow.followers)
	}
	if !m.g.follow.pass(context.Background(), true) || m.follow.calls != 0 {
		t.Errorf("follower ran %d times", m.follow.calls)
	}
	if ops := m.ops.list(); len(ops) != 0 {
		t.Errorf("calls on the servers: %v", ops)
	}
	if ev := m.hooks.types(); len(ev) != 0 {
		t.Errorf("hooks fired: %v", ev)
	}
	if saves != 0 {
		t.Errorf("%d store writes", saves)
	}
	if got, err := st.Load(context.Background(), "g"); err != nil || got.Epoch != 1 || got.ActiveSite != "a" || got.InFlight != nil {
		t.Errorf("stored state %+v %v, want epoch 1 active a, nothing in flight", got, err)
	}
	if v, ok := m.d.pub.get("g"); !ok || v.View.Epoch != 1 || v.View.ActiveSite != "a" {
		t.Errorf("view %+v, want epoch 1 naming a (the persisted one)", v.View)
	}
	snap := m.d.Snapshot()
	if g, _ := snap.Group("g"); g.Mode != configs.ModeObserve || g.Action != "revoke-epoch" || g.Epoch != 1 || g.ActiveSite != "a" || g.InFlight != nil {
		t.Errorf("status %+v", g)
	}
}

// Behind the decision gate, an observing group's servers and record refuse
// every change themselves: a statement that writes is never sent to MySQL
// (only status reads pass) and nothing is persisted, whichever path asks.
func TestObserveModeConnectionsAndStoreRefuseWrites(t *testing.T) {
	st := newTestStore(t, store.GroupState{Group: "g", Epoch: 1, ActiveSite: "a"})
	m := newModeGroup(t, configs.ModeObserve, st)
	ctx := context.Background()
	checks := map[string]error{
		"fence":    m.g.servers.fence(ctx, "a"),
		"repoint":  m.g.servers.repoint(ctx, "a", []string{"b"}),
		"writable": m.g.servers.makeWritable(ctx, "b"),
		"stop-io":  m.g.failover(sitepair.Decision{}).stopIO(ctx, []string{"b"}),
		"set-semisync": m.g.servers.on(ctx, "b", time.Second, func(ctx context.Context, in Instance) error {
			return in.SetSemiSync(ctx, false, true)
		}),
		"commit":      m.g.commit(ctx, sitepair.Decision{Action: sitepair.RevokeEpoch, Target: "b", From: "a", Epoch: 2}, StepRevoked, ""),
		"acknowledge": m.g.audited(ctx, sitepair.Acknowledge(m.g.rec.Persisted), store.AuditEntry{At: t0, Action: kindAcknowledge}),
	}
	_, drainErr := m.g.servers.drain(ctx, "b", time.Second)
	checks["drain"] = drainErr
	_, detachErr := m.g.servers.detach(ctx, "b")
	checks["detach"] = detachErr
	for name, err := range checks {
		if !errors.Is(err, ErrObserveOnly) {
			t.Errorf("%s: %v, want ErrObserveOnly", name, err)
		}
	}
	for _, op := range m.ops.list() {
		if !strings.HasSuffix(op, ":status") {
			t.Errorf("%s reached the server", op)
		}
	}
	if got, _ := st.Load(ctx, "g"); got.Epoch != 1 || got.ActiveSite != "a" {
		t.Errorf("stored state %+v", got)
	}
}

// The same observations through an active and an observing group give the
// same decisions (action, reason, target, epoch) up to the first one that
// acts on a server, the adoption of the writable primary of a never-saved
// group included: the observing group keeps it in memory only, so its
// would-decisions rest on the state an active group would have recorded.
func TestObserveModeWouldDecisionsMatchActive(t *testing.T) {
	debouncing := primaryDownObs()
	debouncing.Sites[0].State, debouncing.Sites[0].Debouncing, debouncing.Sites[0].RefusedProbes = statemachine.Writable, true, 1
	seq := []sitepair.Observed{healthyObs(), healthyObs(), debouncing, primaryDownObs()}
	active := newModeGroup(t, configs.ModeActive, newTestStore(t))
	observe := newModeGroup(t, configs.ModeObserve, newTestStore(t))
	key := func(d sitepair.Decision) string {
		return fmt.Sprintf("%s/%s target=%s epoch=%d", d.Action, d.Reason, d.Target, d.Epoch)
	}
	var got []string
	for i, o := range seq {
		a, w := active.round(o), observe.round(o)
		if key(a) != key(w) {
			t.Fatalf("round %d: active decided %s, observing %s", i, key(a), key(w))
		}
		got = append(got, key(a))
	}
	want := []string{"adopt-primary/adopt-primary target=a epoch=1", "none/healthy target= epoch=1",
		"none/primary-debouncing target= epoch=1", "revoke-epoch/failover-revoke target=b epoch=2"}
	if !slices.Equal(got, want) {
		t.Fatalf("decisions %v, want %v (the scenario no longer tests what it means to)", got, want)
	}
	if s, _ := observe.d.pub.get("g"); s.View.Epoch != 0 || s.View.ActiveSite != "" {
		t.Errorf("the observing group published %+v: its adoption must stay in memory", s.View)
	}
	if st, _ := active.d.store.Load(context.Background(), "g"); st.Epoch != 2 || st.InFlight == nil {
		t.Errorf("active group's state %+v: it should have adopted and revoked", st)
	}
	var actions []string
	for _, w := range observe.logged(t, "decision.would") {
		actions = append(actions, fmt.Sprint(w["action"], "→", w["target"]))
	}
	if strings.Join(actions, " ") != "adopt-primary→a revoke-epoch→b" {
		t.Errorf("would lines %v", actions)
	}
}

// Operator commands that would act on an observing group are refused with
// 409 and a message naming the group's mode, before anything is recorded;
// the views and the status are still served.
func TestObserveModeRefusesCommands(t *testing.T) {
	st := newTestStore(t, store.GroupState{Group: "g", Epoch: 1, ActiveSite: "a"})
	saves := 0
	st.onSave = func(store.GroupState) { saves++ }
	m := newModeGroup(t, configs.ModeObserve, st)
	m.d.lead.begin(context.Background(), t0, nil)
	m.d.tokens.Operate = "tok"
	srv := httptest.NewServer(api.Handler(api.Options{Control: m.d, Token: m.d.tokens.Operate, Logger: m.d.log}))
	t.Cleanup(srv.Close)
	post := func(path, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/groups/g/"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for path, body := range map[string]string{
		"switchover":    `{"target":"b"}`,
		"acknowledge":   `{}`,
		"confirm-fence": `{"site":"a"}`,
		"reclone":       `{"site":"c","token":"0-1-10"}`,
	} {
		code, resp := post(path, body)
		if code != http.StatusConflict || !strings.Contains(resp, "group g is in observe mode") {
			t.Errorf("%s: %d %s, want 409 saying group g is in observe mode", path, code, resp)
		}
	}
	if saves != 0 {
		t.Errorf("%d store writes for refused commands", saves)
	}
	// Reads still work: the persisted view and the status.
	resp, err := http.Get(srv.URL + "/active-site?group=g")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /active-site: %d", resp.StatusCode)
	}
	// An active group takes the same command to its loop.
	if err := newModeGroup(t, configs.ModeActive, newTestStore(t)).g.refuseObserving(); err != nil {
		t.Errorf("active group refused: %v", err)
	}
}
