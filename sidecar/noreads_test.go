package sidecar

import (
	"testing"
	"time"

	"github.com/failoverd/failoverd/view"
)

// signReads signs a view of testGroup with read exclusions and Seq, as a
// daemon that withholds sites from reads does.
func signReads(t *testing.T, epoch uint64, active string, seq uint64, noReads map[string]string) view.Signed {
	t.Helper()
	s, err := view.Sign(view.View{Group: testGroup, Epoch: epoch, ActiveSite: active, IssuedAt: time.Unix(1_800_000_000, 0).UTC(),
		Seq: seq, NoReads: noReads}, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSidecarReplicaHealthIs503WhileTheViewWithholdsItsSite guards that a
// replica the daemon withholds from reads (diverged: it streams and lags
// like a good one) fails its load balancer's read check, with the reason
// on one line, from what the sidecar holds (no SQL per request), and
// passes again once a newer view of the same epoch lifts the exclusion.
func TestSidecarReplicaHealthIs503WhileTheViewWithholdsItsSite(t *testing.T) {
	h := newHarness(t, nil)
	h.mysql.set(func(f *fakeMySQL) { f.replicaRun = true })
	h.daemon.answer(signReads(t, 3, "west", 10, nil))
	h.step(t)
	wantHealth(t, h.s, "?role=replica&maxLag=5s", 200, "replicating")

	h.daemon.answer(signReads(t, 3, "west", 11, map[string]string{"east": "diverged", "north": "recloning"}))
	h.step(t)
	calls := 0
	h.mysql.set(func(f *fakeMySQL) { f.onStatus = func() { calls++ } })
	wantHealth(t, h.s, "?role=replica&maxLag=5s", 503, "withheld from reads by the daemon's view: diverged")
	wantHealth(t, h.s, "?role=any", 503, "replica: withheld from reads by the daemon's view: diverged")
	if calls != 0 {
		t.Errorf("/health read mysqld %d times", calls)
	}
	// Fencing sees nothing new: same epoch, same active site.
	if f, _, p, _ := h.mysql.counts(); f != 0 || p != 0 {
		t.Errorf("a read exclusion fenced %d / promoted %d", f, p)
	}

	h.daemon.answer(signReads(t, 3, "west", 12, map[string]string{"north": "recloning"}))
	h.step(t)
	wantHealth(t, h.s, "?role=replica&maxLag=5s", 200, "replicating")
}

// TestOlderViewOfTheEpochNeverUndoesANewerExclusion guards the order
// within an epoch: a peer's older copy (lower Seq, or from a daemon that
// predates Seq) never lifts an exclusion the sidecar holds, whatever
// order the answers arrive in; a same-epoch view naming another active
// site is rejected as conflicting whatever its Seq (Seq never orders
// active sites); a newer epoch still wins whatever its Seq.
func TestOlderViewOfTheEpochNeverUndoesANewerExclusion(t *testing.T) {
	h := newHarness(t, nil)
	h.mysql.set(func(f *fakeMySQL) { f.replicaRun = true })
	h.daemon.down()
	h.peers.serve("west", signReads(t, 3, "west", 11, map[string]string{"east": "diverged"}))
	h.peers.serve("north", signReads(t, 3, "west", 10, nil))
	for range 3 {
		h.step(t)
		wantHealth(t, h.s, "?role=replica", 503, "diverged")
	}
	h.peers.serve("north", sign(t, 3, "west")) // an older daemon's view: Seq 0
	h.step(t)
	wantHealth(t, h.s, "?role=replica", 503, "diverged")

	h.peers.serve("north", signReads(t, 3, "north", 99, nil))
	before := metric(t, h.s, `failoverd_sidecar_rejected_views_total{why="conflicting-epoch"}`)
	h.step(t)
	if sv, _ := h.s.View(); sv.View.ActiveSite != "west" || sv.View.Seq != 11 {
		t.Fatalf("held view %+v after a conflicting one, want epoch 3 naming west, seq 11", sv.View)
	}
	if after := metric(t, h.s, `failoverd_sidecar_rejected_views_total{why="conflicting-epoch"}`); after == before {
		t.Error("a same-epoch view naming another site with a higher Seq was not rejected as conflicting")
	}

	h.peers.serve("north", signReads(t, 4, "west", 5, nil))
	h.step(t)
	if sv, _ := h.s.View(); sv.View.Epoch != 4 {
		t.Fatalf("held view %+v, want the newer epoch 4 despite its lower Seq", sv.View)
	}
	wantHealth(t, h.s, "?role=replica", 200, "replicating")
}

// TestHeldViewIsServedToPeersWithItsReadSignature guards the gossip of
// read exclusions: the copy a sidecar serves its peers carries both
// signatures, so a peer that never reaches the daemon verifies it and
// withholds the site too.
func TestHeldViewIsServedToPeersWithItsReadSignature(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(signReads(t, 3, "west", 10, nil))
	h.step(t)
	h.daemon.answer(signReads(t, 3, "west", 11, map[string]string{"north": "fenced by the operator"}))
	h.step(t)
	a, ok := h.s.PeerView("north", view.NewNonce())
	if !ok {
		t.Fatal("no view served")
	}
	v, err := a.Verify(testKey)
	if err != nil || v.Seq != 11 || v.NoReads["north"] != "fenced by the operator" {
		t.Fatalf("served copy: %+v, %v; want it verified with the exclusion", v, err)
	}
}

// TestSidecarWithoutAViewJudgesItsReplicaAlone guards the documented
// fallback: a sidecar that never held a view (daemon and peers out of
// reach since it started) answers its read check from its local read, as
// before read exclusions existed.
func TestSidecarWithoutAViewJudgesItsReplicaAlone(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.down()
	h.mysql.set(func(f *fakeMySQL) { f.replicaRun = true })
	h.step(t)
	if _, ok := h.s.View(); ok {
		t.Fatal("a view without daemon or peers")
	}
	wantHealth(t, h.s, "?role=replica&maxLag=5s", 200, "replicating")
}
