package testenv

import (
	"slices"
	"testing"
	"time"
)

// TestWriteLoadFollowsWritableSiteAndLosesNothing is acceptance test 4,
// second part: a planned switchover under load, then Missing on both sites;
// Origins names the committing server of every row; finally Missing must
// report a deliberately deleted acknowledged row.
func TestWriteLoadFollowsWritableSiteAndLosesNothing(t *testing.T) {
	ForEachEngine(t, testWriteLoadFollowsWritableSiteAndLosesNothing)
}

func testWriteLoadFollowsWritableSiteAndLosesNothing(t *testing.T, e Engine) {
	tp := StartTopology(t, 2, TopologyOptions{Engine: e})
	oldP, newP := tp.Sites[0], tp.Sites[1]
	writableForTestenvTest(t, oldP)
	// The replica first: the load must find the writable site by itself.
	wl := StartWriteLoad(t, AppDSNs(newP, oldP), WriteLoadOptions{Workers: 2})
	wl.WaitForAcks(t, 50, 20*time.Second)
	if got := wl.Target(); got != 1 {
		t.Fatalf("write load targets DSN %d, want 1 (the primary)", got)
	}

	// Switchover: fence the primary, let the replica catch up, promote it.
	readOnlyForTestenvTest(t, oldP)
	newP.WaitGTID(t, oldP.GTIDExecuted(t), 10*time.Second)
	newP.Exec(t, "STOP REPLICA")
	writableForTestenvTest(t, newP)
	n := len(wl.Acked())
	wl.WaitForAcks(t, n+50, 20*time.Second)
	ReplicateFrom(t, oldP, newP)
	wl.Stop()

	acks := wl.Acks()
	if !slices.ContainsFunc(acks, func(a Ack) bool { return a.Target == 0 }) {
		t.Fatalf("no write acknowledged by the promoted site")
	}
	if wl.Errors() == 0 {
		t.Fatalf("the fenced primary refused no write: the switch was not exercised")
	}
	for i := 1; i < len(acks); i++ {
		if acks[i].At.Before(acks[i-1].At) {
			t.Fatalf("acks out of order at %d", i)
		}
	}
	if tp.Primary() != newP {
		t.Fatalf("Primary() after switchover is not the promoted site")
	}
	tp.WaitReplicated(t, 20*time.Second)
	for _, s := range tp.Sites {
		if missing := wl.Missing(t, s.AdminDB(t)); len(missing) != 0 {
			t.Fatalf("%s lacks %d acknowledged writes: %v", s.Name, len(missing), missing)
		}
	}
	t.Logf("%d acknowledged writes, %d refused attempts, none lost", len(acks), wl.Errors())

	// Origins names the server that committed each row, read on a replica
	// too (a load behind a proxy learns the acknowledging site from it).
	origins := wl.Origins(t, oldP.AdminDB(t))
	for _, a := range acks {
		want := map[int]uint32{0: newP.ServerID, 1: oldP.ServerID}[a.Target]
		if origins[a.ID] != want {
			t.Fatalf("ack %d by DSN %d: origin %d, want server_id %d", a.ID, a.Target, origins[a.ID], want)
		}
	}

	// Missing must really find a lost write.
	lost := acks[len(acks)/2].ID
	newP.Exec(t, "DELETE FROM "+WriteLoadTable+" WHERE run = ? AND id = ?", wl.Run(), lost)
	if got := wl.Missing(t, newP.AdminDB(t)); !slices.Equal(got, []int64{lost}) {
		t.Fatalf("Missing after deleting id %d = %v, want [%d]", lost, got, lost)
	}
}
