package daemon

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/kube"
)

// grReaderHarness is grHarness with read routing on (upAfter 2, downAfter
// 1), a clock one poll interval per round, a recorded reader target and
// recorded hooks.
func grReaderHarness(t *testing.T, fg *fakeGroup) (*Harness, *recordedHooks, func() (uint64, kube.ReaderSet), func()) {
	t.Helper()
	gc := grConfig()
	gc.Readers = configs.Readers{Enabled: true, MaxLag: 5 * time.Second, UpAfter: 2, DownAfter: 1, IncludePrimary: configs.IncludePrimaryWhenNoReplica}
	var mu sync.Mutex
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h, err := NewHarness(gc, HarnessOptions{Observations: fixedObs{}, Store: newTestStore(t), Clock: clock, Followers: []Follower{&flaky{}},
		Dial: func(_ context.Context, s configs.Site) (Instance, error) {
			return fakeMember{fakeInstance: fakeInstance{site: s.Name, log: fg.ops}, g: fg}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hk := &recordedHooks{}
	h.g.hooks = hk
	h.g.readFollow = newReaderHandoff([]ReaderFollower{&recordingReaders{name: "dns-readers"}}, h.g.log)
	wanted := func() (uint64, kube.ReaderSet) {
		h.g.readFollow.mu.Lock()
		defer h.g.readFollow.mu.Unlock()
		return h.g.readFollow.seq, h.g.readFollow.wantedSet
	}
	round := func() {
		mu.Lock()
		now = now.Add(gc.PollInterval)
		mu.Unlock()
		grRound(t, h)
	}
	return h, hk, wanted, round
}

// readerHooks lists the reader events fired, with each event's reader set.
func readerHooks(hk *recordedHooks) []string {
	hk.mu.Lock()
	defer hk.mu.Unlock()
	var out []string
	for _, ev := range hk.events {
		if ev.Type == configs.HookReaderAdded || ev.Type == configs.HookReaderRemoved {
			out = append(out, ev.Type+":"+ev.Site+"["+strings.Join(ev.Readers, ",")+"]")
		}
	}
	return out
}

// TestGroupReplicationReaderSetDrivesTheReaderTargets guards the daemon
// wiring of a Group Replication group's readers: after upAfter rounds the
// reader targets get the ONLINE secondaries at the record's epoch, the
// status and the reader hooks say so; while the dead primary is still in
// the view (no primary) nobody reads; after the group's election and
// failoverd's follow the set is the remaining secondary at the new epoch
// (the new primary out under includePrimary whenNoReplica, the killed
// member out), and nothing but the group reads reached a member.
func TestGroupReplicationReaderSetDrivesTheReaderTargets(t *testing.T) {
	fg := newFakeGroup()
	h, hk, wanted, round := grReaderHarness(t, fg)
	for range 3 {
		round()
	}
	seq, set := wanted()
	if seq == 0 || set.Epoch != 1 || !slices.Equal(set.Sites, []string{"b", "c"}) {
		t.Fatalf("reader set #%d %+v, want [b c] at epoch 1", seq, set)
	}
	if r := h.g.readerStatus("b", h.g.now()); r == nil || !r.Eligible || r.LagSeconds != 0 || !strings.Contains(r.Why, "ONLINE secondary of a") {
		t.Fatalf("status of b: %+v, want an eligible ONLINE secondary at lag 0", r)
	}
	if r := h.g.readerStatus("a", h.g.now()); r == nil || r.Eligible {
		t.Fatalf("status of the primary a: %+v, want not a reader (whenNoReplica)", r)
	}
	if got, want := readerHooks(hk), []string{"reader-added:b[b,c]", "reader-added:c[b,c]"}; !slices.Equal(got, want) {
		t.Fatalf("reader hooks %v, want %v", got, want)
	}

	fg.mu.Lock()
	fg.down["a"], fg.unreachable["a"] = true, true // the view still lists a, UNREACHABLE: no primary
	fg.mu.Unlock()
	round()
	if _, set = wanted(); len(set.Sites) != 0 {
		t.Fatalf("while the group has no primary: readers %v, want none", set.Sites)
	}
	fg.electAfterKill("a", "b")
	fg.mu.Lock()
	fg.unreachable["a"] = false // expelled
	fg.mu.Unlock()
	for range 3 { // upAfter+downAfter rounds after a safety exit
		round()
	}
	if st := h.State(); st.ActiveSite != "b" || st.Epoch != 2 {
		t.Fatalf("state %+v, want b followed at epoch 2", st)
	}
	if _, set = wanted(); set.Epoch != 2 || !slices.Equal(set.Sites, []string{"c"}) {
		t.Fatalf("after the election: reader set %+v, want [c] at epoch 2", set)
	}
	if r := h.g.readerStatus("a", h.g.now()); r == nil || r.Eligible || !strings.Contains(r.Why, "not in the group's view") {
		t.Fatalf("status of the killed member: %+v", r)
	}
	if got := readerHooks(hk); !slices.Contains(got, "reader-added:c[c]") || slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "reader-added:b") && s != "reader-added:b[b,c]" }) {
		t.Fatalf("reader hooks %v, want c added back alone and b never again", got)
	}
	for _, ev := range hk.events {
		if ev.Type == configs.HookReaderAdded && ev.Site == "c" && ev.Epoch == 2 && ev.To != "b" {
			t.Fatalf("hook %+v names %s as the primary, want b", ev, ev.To)
		}
	}
	if w := writesRun(fg.ops); len(w) > 0 {
		t.Fatalf("failoverd ran statements on the group's members: %v", w)
	}
}
