package daemon

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/view"
)

// servedView is the group's view as /active-site serves it.
func servedView(t *testing.T, g *group) view.View {
	t.Helper()
	s, ok := g.pub.get(g.cfg.Name)
	if !ok {
		t.Fatal("no view published")
	}
	if len(g.pub.key) > 0 {
		v, err := s.Verify(g.pub.key)
		if err != nil {
			t.Fatalf("the published view does not verify: %v", err)
		}
		return v
	}
	return s.View
}

// TestViewWithholdsSitesFromReadsAndRepublishesOnChange guards that the
// daemon's signed view carries the sites it withholds from reads for a
// safety reason, so each site's sidecar can answer its load balancer's
// read check: a replica the daemon finds diverged (an errant transaction)
// and one replicating from another source than the primary are listed,
// with their reasons, in a view republished with a higher Seq at the round
// that saw them; lag is not listed; lifting one republishes again; and it
// works with read routing off (the sidecars' checks need it regardless).
func TestViewWithholdsSitesFromReadsAndRepublishesOnChange(t *testing.T) {
	g, obs, _, logs, advance := readerGroup(t)
	g.cfg.Readers.Enabled = false
	g.pub.key = []byte("k3y")
	g.publish() // signed from here on
	rounds(g, advance, 2)
	v0 := servedView(t, g)
	if v0.NoReads != nil || v0.Seq == 0 || v0.ActiveSite != "a" {
		t.Fatalf("healthy group: view %+v, want no exclusions and a Seq", v0)
	}
	// Lag, however large, is the sidecar's to judge: nothing changes.
	obs.set("c", func(o *sitepair.SiteObservation) { o.Lag = time.Hour })
	rounds(g, advance, 2)
	if v := servedView(t, g); v.NoReads != nil || v.Seq != v0.Seq {
		t.Fatalf("a lagging replica changed the view: %+v (was seq %d)", v, v0.Seq)
	}

	// b applies a transaction the primary never had.
	errant := gtid.MustParse(gtid.MariaDB, "0-1-10,7-2-1")
	obs.set("b", func(o *sitepair.SiteObservation) { o.Executed, o.Retrieved, o.ServerID = errant, errant, "2" })
	rounds(g, advance, 3)
	if _, ok := g.decisionState().Diverged["b"]; !ok {
		t.Fatalf("b not marked diverged: %+v (last decision %+v)", g.decisionState(), g.last)
	}
	v1 := servedView(t, g)
	if v1.NoReads["b"] != "diverged" || len(v1.NoReads) != 1 || v1.Seq <= v0.Seq || v1.Epoch != v0.Epoch {
		t.Fatalf("after b diverged: view %+v, want b withheld as diverged, same epoch %d, Seq above %d", v1, v0.Epoch, v0.Seq)
	}
	// The snapshot carries it, so the daemon's own health endpoint refuses b too.
	for _, site := range g.snapshot(g.now()).Sites {
		if want := map[string]string{"b": "diverged"}[site.Name]; site.ReadsWithheld != want {
			t.Errorf("snapshot site %s readsWithheld %q, want %q", site.Name, site.ReadsWithheld, want)
		}
	}

	// c is repointed by hand to b: withheld; back to a: lifted.
	obs.set("c", func(o *sitepair.SiteObservation) { o.Lag, o.ReplicatingFrom = 0, "b" })
	rounds(g, advance, 1)
	v2 := servedView(t, g)
	if v2.NoReads["c"] != "replicating from b, not from the primary a" || v2.Seq <= v1.Seq {
		t.Fatalf("c replicating from b: view %+v", v2)
	}
	obs.set("c", func(o *sitepair.SiteObservation) { o.ReplicatingFrom = "a" })
	rounds(g, advance, 1)
	v3 := servedView(t, g)
	if _, ok := v3.NoReads["c"]; ok || v3.NoReads["b"] != "diverged" || v3.Seq <= v2.Seq {
		t.Fatalf("c back on a: view %+v, want only b withheld, Seq above %d", v3, v2.Seq)
	}
	if n := strings.Count(logs.String(), `"msg":"view.no_reads_changed"`); n != 3 {
		t.Errorf("%d view.no_reads_changed records, want 3 (b diverged, c out, c back):\n%s", n, logs)
	}
}

// TestViewCarriesTheRecordsExclusionsBeforeTheFirstRound guards a daemon
// that just loaded its record (a restart, a new leader): the view it
// serves before its first round already withholds the sites the record
// does (diverged, recloning, fenced by the operator), instead of lifting
// them for a round.
func TestViewCarriesTheRecordsExclusionsBeforeTheFirstRound(t *testing.T) {
	st := newTestStore(t)
	st.put(t, store.GroupState{Group: "g", Epoch: 4, ActiveSite: "a", Diverged: map[string]string{"b": "0-5-1"},
		OperatorFenced: []string{"c"}})
	cfg := configs.Group{Name: "g", Engine: configs.EngineMariaDB, RelayDrainTimeout: time.Second,
		Sites: []configs.Site{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	g := &group{cfg: cfg, flavor: gtid.MariaDB, policy: sitepair.DefaultPolicy(), store: st, pub: &publisher{key: []byte("k3y")},
		now: time.Now, log: slog.New(slog.DiscardHandler), fenced: map[string]uint64{}, pace: livePacer{}, sidecars: newSidecars(cfg)}
	if err := g.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := servedView(t, g)
	if v.NoReads["b"] != "diverged" || v.NoReads["c"] != "fenced by the operator" || len(v.NoReads) != 2 {
		t.Fatalf("view after load: %+v, want b and c withheld", v)
	}
}

// TestObservingGroupWithholdsNothingInItsView guards invariant 10: an
// observing daemon changes no view, read exclusions included.
func TestObservingGroupWithholdsNothingInItsView(t *testing.T) {
	g, obs, _, _, advance := readerGroup(t)
	g.cfg.Mode = configs.ModeObserve
	obs.set("c", func(o *sitepair.SiteObservation) { o.ReplicatingFrom = "b" })
	rounds(g, advance, 2)
	g.publish()
	if v := servedView(t, g); v.NoReads != nil {
		t.Fatalf("observing group's view %+v, want no exclusions", v)
	}
}

// TestPublisherSeqOnlyGrows guards the order of same-epoch views: every
// view the publisher signs for a group has a higher Seq than the last,
// within one millisecond, after the clock steps back, and after the group
// was removed and added again (a reload).
func TestPublisherSeqOnlyGrows(t *testing.T) {
	p := &publisher{key: []byte("k3y")}
	at := time.UnixMilli(1_800_000_000_000)
	var last uint64
	for i, issued := range []time.Time{at, at, at.Add(-time.Hour), at.Add(time.Second), time.Time{}} {
		if i == 4 {
			p.remove("g")
		}
		p.set(view.View{Group: "g", Epoch: 3, ActiveSite: "a", IssuedAt: issued})
		s, _ := p.get("g")
		v, err := s.Verify(p.key)
		if err != nil || v.Seq <= last {
			t.Fatalf("view %d: %+v, %v; want Seq above %d", i, v, err, last)
		}
		last = v.Seq
	}
	if p.set(view.View{Group: "h", Epoch: 1, IssuedAt: at}); true {
		if s, _ := p.get("h"); s.View.Seq != uint64(at.UnixMilli()) {
			t.Errorf("another group's first Seq %d, want its clock in ms %d", s.View.Seq, at.UnixMilli())
		}
	}
}
