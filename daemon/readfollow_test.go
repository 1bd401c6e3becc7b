package daemon

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/kube"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/view"
)

// recordingReaders is a ReaderFollower recording the sets it followed and
// returning queued drift.
type recordingReaders struct {
	name  string
	mu    sync.Mutex
	sets  []kube.ReaderSet
	drift [][]string
}

func (r *recordingReaders) Name() string { return r.name }
func (r *recordingReaders) FollowReaders(_ context.Context, s kube.ReaderSet) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sets = append(r.sets, s)
	if len(r.drift) > 0 {
		d := r.drift[0]
		r.drift = r.drift[1:]
		return d, nil
	}
	return nil, nil
}
func (r *recordingReaders) followed() []kube.ReaderSet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sets)
}

// TestReaderHandoffFollowsOnlyNewerSetsAndRepairsDrift guards the reader
// handoff: a set older than the one wanted (same epoch computed earlier,
// or an older epoch) is never followed, a newer one is; the follower shows
// in the routing status in sync with the set's epoch; every interval it is
// re-run and drift it reports is counted as a repair.
func TestReaderHandoffFollowsOnlyNewerSetsAndRepairsDrift(t *testing.T) {
	f := &recordingReaders{name: "kube-reader-service"}
	h := newReaderHandoff([]ReaderFollower{f}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c := newStepClock(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.run(ctx, func() bool { return true })
	c.idle(t)
	var repairs []string
	h.onRepair = func(name string, _ view.View, drift []string) { repairs = append(repairs, drift...) }

	h.want(view.View{Group: "g", Epoch: 9, ActiveSite: "a"}) // a view is not a reader set
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	h.wantReaders(kube.ReaderSet{Group: "g", Epoch: 3, Sites: []string{"b", "c"}, At: at})
	c.idle(t)
	h.wantReaders(kube.ReaderSet{Group: "g", Epoch: 3, Sites: []string{"b"}, At: at.Add(-time.Second)}) // older: ignored
	h.wantReaders(kube.ReaderSet{Group: "g", Epoch: 2, Sites: []string{"a"}, At: at.Add(time.Hour)})    // older epoch: ignored
	h.wantReaders(kube.ReaderSet{Group: "g", Epoch: 3, Sites: []string{"b", "c"}, At: at})              // the same: ignored
	h.wantReaders(kube.ReaderSet{Group: "g", Epoch: 3, Sites: []string{"c"}, At: at.Add(time.Second)})
	c.idle(t)
	sets := f.followed()
	if len(sets) != 2 || !slices.Equal(sets[0].Sites, []string{"b", "c"}) || !slices.Equal(sets[1].Sites, []string{"c"}) {
		t.Fatalf("followed %+v, want [b c] then [c] only", sets)
	}
	st := stateOf(t, h, "kube-reader-service")
	if !st.InSync || st.State != "ok" || st.Epoch != 3 {
		t.Fatalf("status %+v, want ok and in sync at epoch 3", st)
	}
	f.mu.Lock()
	f.drift = [][]string{{"pod a/db/b-0 reader false -> true"}}
	f.mu.Unlock()
	c.tick(t)
	if st := stateOf(t, h, "kube-reader-service"); st.Repairs != 1 || !st.InSync || !slices.Equal(repairs, []string{"pod a/db/b-0 reader false -> true"}) {
		t.Fatalf("after a drifted re-run: %+v, repairs %v", st, repairs)
	}
	if sets := f.followed(); len(sets) != 3 || !slices.Equal(sets[2].Sites, []string{"c"}) {
		t.Fatalf("re-run followed %+v, want [c] again", sets)
	}
}

// TestReaderTargetsWaitForUpAfterRoundsThenFollowEachChange guards the
// daemon wiring of the reader targets: nothing is handed on before
// readers.upAfter rounds (a new leader must not empty the previous one's
// targets), then the set with the record's epoch, each change stamped
// later than the previous; a daemon whose rounds stopped starts over and
// waits again, and its next set is stamped after every earlier one.
func TestReaderTargetsWaitForUpAfterRoundsThenFollowEachChange(t *testing.T) {
	g, obs, _, _, advance := readerGroup(t)
	g.readFollow = newReaderHandoff([]ReaderFollower{&recordingReaders{name: "dns-readers"}}, g.log)
	wanted := func() (uint64, kube.ReaderSet) {
		g.readFollow.mu.Lock()
		defer g.readFollow.mu.Unlock()
		return g.readFollow.seq, g.readFollow.wantedSet
	}
	rounds(g, advance, 2)
	if seq, _ := wanted(); seq != 0 {
		t.Fatalf("a set was handed on after 2 rounds (upAfter 3)")
	}
	rounds(g, advance, 2)
	seq, s := wanted()
	if seq != 1 || s.Group != "g" || s.Epoch != 3 || !slices.Equal(s.Sites, []string{"b", "c"}) {
		t.Fatalf("seq %d set %+v, want [b c] at epoch 3", seq, s)
	}
	first := s.At
	if r := g.snapshot(g.now()).Routing; len(r) != 1 || r[0].Name != "dns-readers" {
		t.Fatalf("routing status %+v, want the reader follower", r)
	}
	rounds(g, advance, 3)
	if seq, _ := wanted(); seq != 1 {
		t.Fatalf("seq %d: an unchanged set was handed on again", seq)
	}
	obs.set("c", func(o *sitepair.SiteObservation) { o.ReplicatingFrom = "b" }) // re-pointed: out at once
	rounds(g, advance, 1)
	seq, s = wanted()
	if seq != 2 || !slices.Equal(s.Sites, []string{"b"}) || !s.At.After(first) {
		t.Fatalf("seq %d set %+v after c was re-pointed, want [b] stamped after %v", seq, s, first)
	}
	second := s.At
	advance(time.Minute) // rounds stopped: the state starts over
	rounds(g, advance, 2)
	if seq, _ := wanted(); seq != 2 {
		t.Fatalf("seq %d: a set was handed on while warming up again", seq)
	}
	rounds(g, advance, 2)
	seq, s = wanted()
	if seq != 3 || !slices.Equal(s.Sites, []string{"b"}) || !s.At.After(second) {
		t.Fatalf("seq %d set %+v after starting over, want [b] stamped after %v", seq, s, second)
	}
}

// TestActiveGroupRunsReaderFollowersInItsStatus guards the daemon's wiring
// of the reader followers: an active group built by New gets them in a
// reader handoff with the group's reconcile interval, and its status lists
// them under routing (pending until a set is handed on). An observing group
// gets none (TestObserveModeLogsWouldAndWritesNothing).
func TestActiveGroupRunsReaderFollowersInItsStatus(t *testing.T) {
	m := newModeGroup(t, configs.ModeActive, newTestStore(t))
	h := m.g.readFollow
	if h == nil || !h.readers || len(h.followers) != 1 || h.interval != m.g.cfg.RoutingReconcileInterval {
		t.Fatalf("reader handoff %+v", h)
	}
	var found bool
	for _, f := range m.g.snapshot(m.g.now()).Routing {
		found = found || (f.Name == "dns-readers" && f.State == "pending" && !f.InSync)
	}
	if !found {
		t.Fatalf("routing status %+v lacks dns-readers pending", m.g.snapshot(m.g.now()).Routing)
	}
}
