package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
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

// reloadWorld is what the daemon of a reload test observes: every group's
// first site is its primary, the others follow it, all hold the same
// transactions. lost makes the primary of every group unreachable and its
// replicas lose it (a corroborated failure); a group in unsettled never
// has settled observations, so its loop decides nothing.
type reloadWorld struct {
	mu        sync.Mutex
	lost      bool
	unsettled map[string]bool
}

func (w *reloadWorld) set(f func(w *reloadWorld)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w)
}

// observe is Options.Observe: observations of gc as configured, site
// priorities included, as the poller builds them.
func (w *reloadWorld) observe(_ context.Context, gc configs.Group, _ *slog.Logger) (Observations, error) {
	return &worldObs{w: w, gc: gc}, nil
}

type worldObs struct {
	w  *reloadWorld
	gc configs.Group
}

func (o *worldObs) Observed() sitepair.Observed {
	o.w.mu.Lock()
	lost := o.w.lost
	o.w.mu.Unlock()
	exec := gtid.MustParse(gtid.MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10")
	var out sitepair.Observed
	for i, s := range o.gc.Sites {
		so := sitepair.SiteObservation{Name: s.Name, Role: sitepair.Role(s.Role), Priority: s.Priority, Index: i,
			Executed: exec, LagKnown: true, State: statemachine.ReadOnly, ReplicatingFrom: o.gc.Sites[0].Name, IOConnected: !lost}
		if i == 0 {
			so.State, so.ReplicatingFrom = statemachine.Writable, ""
			if lost {
				so.State = statemachine.Unreachable
			}
		}
		out.Sites = append(out.Sites, so)
	}
	return out
}

func (o *worldObs) Settled(time.Time) bool {
	o.w.mu.Lock()
	defer o.w.mu.Unlock()
	return !o.w.unsettled[o.gc.Name]
}

// reloadEvents records the reloads' results.
type reloadEvents struct {
	noEvents
	mu      sync.Mutex
	reloads []string
	started []string // groups whose counters were started (series_test.go)
}

func (e *reloadEvents) ConfigReloaded(result string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reloads = append(e.reloads, result)
}

func (e *reloadEvents) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.reloads...)
}

// syncBuffer is a log sink safe for the daemon's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// groupYAML is a group of sites a, b, c (a the primary) with these
// priorities.
func groupYAML(name string, prio ...int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `  - name: %s
    credentials:
      admin: {user: failoverd, passwordFile: admin.pw}
      replication: {user: repl, passwordFile: repl.pw}
    sites:
`, name)
	for i, p := range prio {
		site := string(rune('a' + i))
		fmt.Fprintf(&b, "      - name: %s\n        priority: %d\n        mysql: {address: %s-%s:3306}\n", site, p, name, site)
	}
	return b.String()
}

// listen is a port free when the tests start (the configuration refuses 0).
var listen = func() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}()

func configYAML(listen string, groups ...string) string {
	return "daemon:\n  listen: " + listen + "\n  stateStore: {path: state.json}\ngroups:\n" + strings.Join(groups, "")
}

// reloadDaemon is a running daemon of file's configuration on fakes.
type reloadDaemon struct {
	*Daemon
	file   string
	store  *watchedStore
	world  *reloadWorld
	events *reloadEvents
	logs   *syncBuffer
	hup    chan os.Signal
}

func startReloadDaemon(t *testing.T, yaml string, world *reloadWorld, states ...store.GroupState) *reloadDaemon {
	t.Helper()
	was := reloadRetry
	reloadRetry = 10 * time.Millisecond
	t.Cleanup(func() { reloadRetry = was })
	dir := t.TempDir()
	for _, f := range []string{"admin.pw", "repl.pw"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := &reloadDaemon{file: filepath.Join(dir, "failoverd.yaml"), store: newTestStore(t, states...), world: world,
		events: &reloadEvents{}, logs: &syncBuffer{}, hup: make(chan os.Signal, 1)}
	r.write(t, yaml)
	cfg, err := configs.Load(r.file)
	if err != nil {
		t.Fatal(err)
	}
	ops := &opLog{}
	exec := gtid.MustParse(gtid.MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10")
	d, err := New(context.Background(), cfg, Options{
		Logger: slog.New(slog.NewJSONHandler(r.logs, nil)), Store: r.store, Observe: world.observe, Identity: "me",
		Dial: func(_ context.Context, _ configs.Group, s configs.Site) (Instance, error) {
			return fakeInstance{site: s.Name, log: ops, executed: exec}, nil
		},
		Followers:  func(configs.Group, *kube.Clusters, *slog.Logger) ([]Follower, error) { return nil, nil },
		Events:     r.events,
		ConfigFile: r.file,
		Reloads:    r.hup,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Daemon = d
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	waitUntil(t, "the daemon runs", func() bool {
		d.mu.RLock()
		defer d.mu.RUnlock()
		return d.runCtx != nil
	})
	return r
}

func (r *reloadDaemon) write(t *testing.T, yaml string) {
	t.Helper()
	if err := os.WriteFile(r.file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (r *reloadDaemon) stored(t *testing.T, group string) store.GroupState {
	t.Helper()
	st, err := r.store.Load(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (r *reloadDaemon) groupNames() []string {
	var out []string
	for _, g := range r.groupList() {
		out = append(out, g.cfg.Name)
	}
	return out
}

// The acceptance case of issue 28 item 6: SIGHUP re-reads the file; a
// group it adds starts from its persisted state while the running one goes
// on, and a site's new priority decides the next failover's target — no
// restart.
func TestReloadAddsGroupAndChangesPriorityWithoutRestart(t *testing.T) {
	world := &reloadWorld{}
	r := startReloadDaemon(t, configYAML(listen, groupYAML("orders", 0, 2, 1)), world,
		store.GroupState{Group: "orders", Epoch: 1, ActiveSite: "a"},
		store.GroupState{Group: "billing", Epoch: 4, ActiveSite: "a"}) // kept from an earlier run
	before := r.Snapshot().Daemon.Config
	orders := r.group("orders")
	orders.mu.Lock()
	st := orders.rec.Persisted
	orders.mu.Unlock()
	if d := sitepair.Decide(withLost(orders.observed(time.Time{})), st, orders.policy, time.Now()); d.Target != "b" {
		t.Fatalf("test setup: before the reload a failover would go to %q, want b (priority 2)", d.Target)
	}

	// c's priority goes from 1 to 3, and a group is added.
	r.write(t, configYAML(listen, groupYAML("orders", 0, 2, 3), groupYAML("billing", 0, 1)))
	r.hup <- syscall.SIGHUP
	waitUntil(t, "the reload", func() bool { return len(r.events.list()) == 1 })
	if got := r.events.list(); got[0] != "applied" {
		t.Fatalf("reload %v, want applied; logs:\n%s", got, r.logs)
	}
	if got := r.groupNames(); strings.Join(got, ",") != "orders,billing" {
		t.Fatalf("groups %v after the reload, want orders,billing", got)
	}
	billing := r.group("billing")
	waitUntil(t, "billing's loaded state", func() bool { return billing.snapshot(time.Now()).Epoch == 4 })
	after := r.Snapshot().Daemon.Config
	if after.Digest == before.Digest || !after.LoadedAt.After(before.LoadedAt) || len(after.Pending) != 0 {
		t.Fatalf("status config %+v after the reload, before %+v", after, before)
	}
	if !strings.Contains(r.logs.String(), `"msg":"config.reloaded"`) || !strings.Contains(r.logs.String(), `"added":["billing"]`) ||
		!strings.Contains(r.logs.String(), `"changed":["orders"]`) {
		t.Fatalf("no config.reloaded naming billing added and orders changed:\n%s", r.logs)
	}
	if r.group("orders") == orders {
		t.Fatal("orders was not rebuilt")
	}

	// The primary is lost: the next decision fails over to c.
	revoked := make(chan string, 4)
	r.store.onSave = func(st store.GroupState) {
		if st.Group == "orders" && st.InFlight != nil {
			select {
			case revoked <- st.InFlight.To:
			default:
			}
		}
	}
	world.set(func(w *reloadWorld) { w.lost = true })
	select {
	case to := <-revoked:
		if to != "c" {
			t.Fatalf("failover target %s, want c (its new priority 3)", to)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no failover after the primary was lost; logs:\n%s", r.logs)
	}
}

// withLost is o with its primary (the first site) lost and its replicas
// cut off from it.
func withLost(o sitepair.Observed) sitepair.Observed {
	for i := range o.Sites {
		if i == 0 {
			o.Sites[i].State = statemachine.Unreachable
		} else {
			o.Sites[i].IOConnected = false
		}
	}
	return o
}

var fileLine = regexp.MustCompile(`failoverd\.yaml:\d+:\d+: `)

// An invalid file is refused with validate's errors, each with its
// file:line:col, in the error the API and the CLI return; nothing changes:
// the same loops run, status keeps the old file's digest and says a reload
// was refused.
func TestReloadRefusesInvalidFileAndKeepsOldConfig(t *testing.T) {
	r := startReloadDaemon(t, configYAML(listen, groupYAML("orders", 0, 2, 1)), &reloadWorld{},
		store.GroupState{Group: "orders", Epoch: 1, ActiveSite: "a"})
	orders := r.group("orders")
	before := r.Snapshot().Daemon.Config
	// A priority that is not a number, and a second group of the same name
	// (on other servers).
	r.write(t, strings.Replace(configYAML(listen, groupYAML("orders", 0, 2, 1), strings.Replace(groupYAML("billing", 0, 1), "name: billing", "name: orders", 1)),
		"priority: 2", "priority: high", 1))
	_, err := r.Reload(context.Background(), api.Actor{Name: "ann"})
	if !errors.Is(err, ErrReloadRefused) || !errors.Is(err, api.ErrRefused) {
		t.Fatalf("reload of an invalid file: %v, want ErrReloadRefused (409)", err)
	}
	var detailed api.Detailed
	if !errors.As(err, &detailed) || len(detailed.Details()) != 2 {
		t.Fatalf("refusal %v lists %v, want both problems", err, detailed)
	}
	for _, p := range detailed.Details() {
		if !fileLine.MatchString(p) {
			t.Errorf("problem %q carries no failoverd.yaml:line:col", p)
		}
	}
	if !strings.Contains(strings.Join(detailed.Details(), "\n"), "groups[0].sites[1].priority") ||
		!strings.Contains(strings.Join(detailed.Details(), "\n"), "duplicate group name") {
		t.Errorf("problems %q do not name the priority and the duplicate group", detailed.Details())
	}
	// Exactly what validate prints.
	_, lerr := configs.Load(r.file)
	var ps *configs.Problems
	if !errors.As(lerr, &ps) || len(ps.List) != 2 || ps.List[0].String() != detailed.Details()[0] {
		t.Errorf("reload problems %q differ from validate's %v", detailed.Details(), lerr)
	}
	if r.group("orders") != orders || len(r.groupList()) != 1 {
		t.Fatalf("the running groups changed: %v", r.groupNames())
	}
	after := r.Snapshot().Daemon.Config
	if after.Digest != before.Digest || !after.LoadedAt.Equal(before.LoadedAt) || after.LastRefused == "" || after.LastRefusedAt.IsZero() {
		t.Fatalf("status config %+v, before %+v: want the old digest and the refusal", after, before)
	}
	if got := r.events.list(); len(got) != 1 || got[0] != "refused" {
		t.Fatalf("reload events %v, want [refused]", got)
	}
	if logs := r.logs.String(); !strings.Contains(logs, `"msg":"config.reload_refused"`) || !strings.Contains(logs, "priority") {
		t.Fatalf("no config.reload_refused with the problems:\n%s", logs)
	}
	// The loop still decides.
	orders.mu.Lock()
	orders.decidedAt = time.Time{}
	orders.mu.Unlock()
	waitUntil(t, "a decision of the old loop", func() bool { return !orders.snapshot(time.Now()).DecidedAt.IsZero() })
}

// A file that changes what only a start sets up (here the listen address,
// with a group added) is refused whole, naming the field and that it needs
// a restart: the added group does not start.
func TestReloadRefusesRestartOnlyChangeWhole(t *testing.T) {
	r := startReloadDaemon(t, configYAML(listen, groupYAML("orders", 0, 2, 1)), &reloadWorld{})
	r.write(t, configYAML("127.0.0.1:9", groupYAML("orders", 0, 2, 1), groupYAML("billing", 0, 1)))
	_, err := r.Reload(context.Background(), api.Actor{Name: "ann"})
	var detailed api.Detailed
	if !errors.Is(err, ErrReloadRefused) || !errors.As(err, &detailed) || len(detailed.Details()) != 1 {
		t.Fatalf("reload changing daemon.listen: %v", err)
	}
	if p := detailed.Details()[0]; !strings.Contains(p, "daemon.listen") || !strings.Contains(p, "needs a restart") || !fileLine.MatchString(p) {
		t.Fatalf("problem %q does not name daemon.listen at its line as needing a restart", p)
	}
	if got := r.groupNames(); len(got) != 1 {
		t.Fatalf("groups %v: a refused reload started a group", got)
	}
	if _, ok := r.pub.get("billing"); ok {
		t.Fatal("a refused reload published a view of its group")
	}
}

// A group with a failover in flight keeps its loop: the reload says it is
// deferred and why (status too) while the rest of the file applies; once
// the failover ends the daemon rebuilds it by itself, from the state the
// failover left.
func TestReloadDefersGroupWithFailoverInFlight(t *testing.T) {
	world := &reloadWorld{unsettled: map[string]bool{"orders": true}} // the failover waits
	r := startReloadDaemon(t, configYAML(listen, groupYAML("orders", 0, 2, 1)), world,
		store.GroupState{Group: "orders", Epoch: 2, InFlight: &store.InFlight{ID: "orders-2", Kind: kindFailover, From: "a", To: "b",
			RevokedEpoch: 2, RevokedAt: time.Now(), Step: StepRevoked, StepDone: true}})
	orders := r.group("orders")
	r.write(t, configYAML(listen, groupYAML("orders", 0, 2, 3), groupYAML("billing", 0, 1)))
	res, err := r.Reload(context.Background(), api.Actor{Name: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Added) != 1 || len(res.Changed) != 0 || len(res.Deferred) != 1 || res.Deferred[0].Group != "orders" ||
		!strings.Contains(res.Deferred[0].Reason, "failover from a to b is in flight") {
		t.Fatalf("reload %+v: want billing added, orders deferred for its failover", res)
	}
	if r.group("orders") != orders || orders.cfg.Sites[2].Priority != 1 {
		t.Fatal("orders was rebuilt with its failover in flight")
	}
	if p := r.Snapshot().Daemon.Config.Pending; len(p) != 1 || p[0].Group != "orders" {
		t.Fatalf("status pending %+v, want orders", p)
	}
	time.Sleep(10 * reloadRetry)
	if r.group("orders") != orders {
		t.Fatal("orders was rebuilt while its failover is still in flight")
	}

	// The failover ends: b promoted at epoch 3, as its last commit leaves it.
	r.store.put(t, store.GroupState{Group: "orders", Epoch: 3, ActiveSite: "b"})
	orders.mu.Lock()
	orders.rec.InFlight, orders.rec.Epoch, orders.rec.ActiveSite = nil, 3, "b"
	orders.mu.Unlock()
	waitUntil(t, "the deferred rebuild", func() bool { return r.group("orders") != orders })
	rebuilt := r.group("orders")
	if rebuilt.cfg.Sites[2].Priority != 3 || rebuilt.snapshot(time.Now()).ActiveSite != "b" {
		t.Fatalf("rebuilt orders: priority %d, active %q; want 3 and b", rebuilt.cfg.Sites[2].Priority, rebuilt.snapshot(time.Now()).ActiveSite)
	}
	if p := r.Snapshot().Daemon.Config.Pending; len(p) != 0 {
		t.Fatalf("still pending: %+v", p)
	}
	if !strings.Contains(r.logs.String(), `"msg":"config.deferred_applied"`) {
		t.Fatalf("no config.deferred_applied:\n%s", r.logs)
	}
	select {
	case <-orders.gone:
	default:
		t.Fatal("the old loop of orders was not closed")
	}
}

// A removed group's loop stops, its view is no longer served and a
// request handed to it is answered (not left waiting).
func TestReloadRemovesGroup(t *testing.T) {
	r := startReloadDaemon(t, configYAML(listen, groupYAML("orders", 0, 2, 1), groupYAML("billing", 0, 1)), &reloadWorld{},
		store.GroupState{Group: "orders", Epoch: 1, ActiveSite: "a"}, store.GroupState{Group: "billing", Epoch: 1, ActiveSite: "a"})
	billing := r.group("billing")
	r.write(t, configYAML(listen, groupYAML("orders", 0, 2, 1)))
	res, err := r.Reload(context.Background(), api.Actor{Name: "ann"})
	if err != nil || len(res.Removed) != 1 || res.Removed[0] != "billing" || len(res.Changed)+len(res.Added) != 0 {
		t.Fatalf("reload %+v, %v: want billing removed, nothing else", res, err)
	}
	if r.group("billing") != nil {
		t.Fatal("billing still runs")
	}
	if _, ok := r.pub.get("billing"); ok {
		t.Fatal("billing's view is still served")
	}
	if err := billing.submit(context.Background(), request{kind: kindAcknowledge}); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("a request to the removed group: %v, want api.ErrUnavailable", err)
	}
	if st := r.stored(t, "billing"); st.Epoch != 1 {
		t.Fatalf("the removed group's state %+v: want it kept", st)
	}
	// Reloading the same file again changes nothing.
	if res, err := r.Reload(context.Background(), api.Actor{Name: "ann"}); err != nil || res.Result != "unchanged" {
		t.Fatalf("second reload %+v, %v: want unchanged", res, err)
	}
}

// Only a leader's loop can be busy: a follower acts on nothing (its next
// term reloads every state), so it rebuilds whatever its stale record says.
func TestBusyOnlyWhileLeading(t *testing.T) {
	g := &group{reclones: map[string]bool{}}
	g.rec.InFlight = &sitepair.InFlight{From: "a", To: "b", Planned: true}
	leading := func() (context.Context, time.Time, bool) { return context.Background(), t0, true }
	following := func() (context.Context, time.Time, bool) { return nil, time.Time{}, false }
	if why := g.busy(following); why != "" {
		t.Fatalf("a follower is busy: %q", why)
	}
	if why := g.busy(leading); !strings.Contains(why, "switchover from a to b") {
		t.Fatalf("leader with a switchover in flight: %q", why)
	}
	g.rec.InFlight = nil
	g.reclones["c"] = true
	if why := g.busy(leading); !strings.Contains(why, "reclone of c") {
		t.Fatalf("leader running a reclone: %q", why)
	}
}
