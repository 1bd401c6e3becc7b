package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
)

// readerObs is a settable Observations for the reader tests.
type readerObs struct {
	mu sync.Mutex
	o  sitepair.Observed
}

func (r *readerObs) Observed() sitepair.Observed {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.o
	o.Sites = slices.Clone(r.o.Sites)
	return o
}
func (*readerObs) Settled(time.Time) bool { return true }

func (r *readerObs) set(site string, f func(*sitepair.SiteObservation)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.o.Sites {
		if r.o.Sites[i].Name == site {
			f(&r.o.Sites[i])
		}
	}
}

// readerGroup is a healthy group (a primary, b and c streaming from it) with
// read routing on, a settable clock, recorded hooks and captured logs.
func readerGroup(t *testing.T) (*group, *readerObs, *recordedHooks, *bytes.Buffer, func(time.Duration)) {
	t.Helper()
	ms := newTestStore(t)
	ms.put(t, store.GroupState{Group: "g", Epoch: 3, ActiveSite: "a"})
	var mu sync.Mutex
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	cfg := configs.Group{Name: "g", Engine: configs.EngineMariaDB, PollInterval: 500 * time.Millisecond, RelayDrainTimeout: time.Second,
		Sites:   []configs.Site{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		Readers: configs.Readers{Enabled: true, MaxLag: 5 * time.Second, UpAfter: 3, DownAfter: 2, IncludePrimary: configs.IncludePrimaryWhenNoReplica}}
	logs := &bytes.Buffer{}
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	dial := func(_ context.Context, s configs.Site) (Instance, error) {
		return fakeInstance{site: s.Name, log: &opLog{}, executed: exec}, nil
	}
	g := &group{cfg: cfg, flavor: gtid.MariaDB, policy: sitepair.DefaultPolicy(), store: ms, pub: &publisher{}, now: clock,
		log: slog.New(slog.NewJSONHandler(logs, nil)), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg)}
	g.servers = &servers{group: cfg, conns: newConnections(dial, cfg.Sites), log: g.log}
	if err := g.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := &recordedHooks{}
	g.hooks = rec
	g.actionTimeout = time.Minute
	replica := func(name string, i int) sitepair.SiteObservation {
		return sitepair.SiteObservation{Name: name, Role: sitepair.PrimaryCandidate, Index: i, State: statemachine.ReadOnly,
			ReplicatingFrom: "a", IOConnected: true, LagKnown: true, Executed: exec, Retrieved: exec, LastReachableAt: t0, LastStreamingAt: t0}
	}
	obs := &readerObs{o: sitepair.Observed{Sites: []sitepair.SiteObservation{
		{Name: "a", Role: sitepair.PrimaryCandidate, State: statemachine.Writable, Executed: exec, LastReachableAt: t0},
		replica("b", 1), replica("c", 2),
	}}}
	g.obs = obs
	return g, obs, rec, logs, advance
}

// rounds runs n rounds of the group's loop, one poll interval apart.
func rounds(g *group, advance func(time.Duration), n int) {
	for range n {
		g.round(context.Background(), t0)
		advance(g.cfg.PollInterval)
	}
}

func readerEvents(rec *recordedHooks) []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, ev := range rec.events {
		if ev.Type == configs.HookReaderAdded || ev.Type == configs.HookReaderRemoved {
			out = append(out, ev.Type+":"+ev.Site+":"+strings.Join(ev.Readers, ","))
		}
	}
	return out
}

// TestReaderRoundsFillStatusAndFireEventsOnce guards the daemon wiring of
// read routing: rounds fill status.Site.Reader, a change logs
// reader.added/reader.removed and fires its hook event once with the full
// set, rounds within one poll interval do not count, and a lagging replica
// leaves after downAfter rounds.
func TestReaderRoundsFillStatusAndFireEventsOnce(t *testing.T) {
	g, obs, rec, logs, advance := readerGroup(t)
	// Many decisions within one poll interval count as one round.
	for range 10 {
		g.round(context.Background(), t0)
		advance(40 * time.Millisecond)
	}
	advance(200 * time.Millisecond)
	rounds(g, advance, 1)
	if ev := readerEvents(rec); len(ev) != 0 {
		t.Fatalf("events %v before upAfter rounds", ev)
	}
	snap := g.snapshot(g.now())
	for _, s := range snap.Sites {
		if s.Reader == nil || s.Reader.Eligible {
			t.Fatalf("site %s reader %+v before upAfter rounds, want out with a why", s.Name, s.Reader)
		}
	}
	rounds(g, advance, 5)
	want := []string{"reader-added:b:b,c", "reader-added:c:b,c"}
	if ev := readerEvents(rec); !slices.Equal(ev, want) {
		t.Fatalf("events %v, want %v (once each)", ev, want)
	}
	snap = g.snapshot(g.now())
	for _, s := range snap.Sites {
		if wantIn := s.Name != "a"; s.Reader == nil || s.Reader.Eligible != wantIn || s.Reader.Why == "" {
			t.Fatalf("site %s reader %+v, want eligible %v", s.Name, s.Reader, wantIn)
		}
	}
	if n := strings.Count(logs.String(), `"msg":"reader.added"`); n != 2 || !strings.Contains(logs.String(), `"site":"b","why":"replicating from a, lag 0s"`) {
		t.Fatalf("%d reader.added records in\n%s", n, logs)
	}

	obs.set("c", func(o *sitepair.SiteObservation) { o.ApplierStopped, o.BacklogAge = true, time.Minute })
	rounds(g, advance, 1)
	if ev := readerEvents(rec); len(ev) != 2 {
		t.Fatalf("events %v after one bad round, want none new", ev)
	}
	rounds(g, advance, 3)
	want = append(want, "reader-removed:c:b")
	if ev := readerEvents(rec); !slices.Equal(ev, want) {
		t.Fatalf("events %v, want %v", ev, want)
	}
	if !strings.Contains(logs.String(), `"msg":"reader.removed","site":"c","why":"replication SQL thread stopped"`) {
		t.Fatalf("no reader.removed record for c in\n%s", logs)
	}
	if r := g.snapshot(g.now()).Sites[2].Reader; r == nil || r.Eligible || r.LagSeconds != 60 {
		t.Fatalf("c reader %+v, want out with lag 60", r)
	}
}

// TestReaderStatusGoesStaleWithoutRounds guards a daemon that stopped
// deciding (lost leadership): its snapshot shows no reader, and its next
// round starts over with removal events instead of trusting old rounds.
func TestReaderStatusGoesStaleWithoutRounds(t *testing.T) {
	g, _, rec, _, advance := readerGroup(t)
	rounds(g, advance, 4)
	if ev := readerEvents(rec); len(ev) != 2 {
		t.Fatalf("events %v, want b and c added", ev)
	}
	advance(time.Minute)
	for _, s := range g.snapshot(g.now()).Sites {
		if s.Reader == nil || s.Reader.Eligible || !strings.Contains(s.Reader.Why, "no reader round since") {
			t.Fatalf("stale site %s reader %+v, want out saying why", s.Name, s.Reader)
		}
	}
	rounds(g, advance, 1)
	want := []string{"reader-added:b:b,c", "reader-added:c:b,c", "reader-removed:b:", "reader-removed:c:"}
	if ev := readerEvents(rec); !slices.Equal(ev, want) {
		t.Fatalf("events %v, want %v", ev, want)
	}
	rounds(g, advance, 2)
	if n := len(readerEvents(rec)); n != 6 {
		t.Fatalf("%d events: b and c should be back after upAfter fresh rounds", n)
	}
}

// TestReadersOffLeavesStatusEmpty guards the default: no reader state in
// status and no events while readers.enabled is false.
func TestReadersOffLeavesStatusEmpty(t *testing.T) {
	g, _, rec, _, advance := readerGroup(t)
	g.cfg.Readers.Enabled = false
	rounds(g, advance, 6)
	for _, s := range g.snapshot(g.now()).Sites {
		if s.Reader != nil {
			t.Fatalf("site %s reader %+v with read routing off", s.Name, s.Reader)
		}
	}
	if ev := readerEvents(rec); len(ev) != 0 {
		t.Fatalf("events %v with read routing off", ev)
	}
}

// TestObservingGroupComputesReadersButFiresNoHooks guards mode: observe:
// the reader set shows in status and logs, but no hook runs.
func TestObservingGroupComputesReadersButFiresNoHooks(t *testing.T) {
	g, _, rec, logs, advance := readerGroup(t)
	g.cfg.Mode = configs.ModeObserve
	rounds(g, advance, 4)
	if ev := readerEvents(rec); len(ev) != 0 {
		t.Fatalf("observing group fired %v", ev)
	}
	if r := g.snapshot(g.now()).Sites[1].Reader; r == nil || !r.Eligible {
		t.Fatalf("b reader %+v, want eligible", r)
	}
	if n := strings.Count(logs.String(), `"msg":"reader.added"`); n != 2 {
		t.Fatalf("%d reader.added records, want 2", n)
	}
}
