package e2e

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/testenv"
)

func activeSiteCode(g *group) int {
	resp, err := http.Get("http://" + g.listen + "/active-site")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Two daemons share a Lease: only the leader acts and serves /active-site;
// the follower answers 503 until the leader dies, then takes over with the
// state the leader persisted in the ConfigMap, and fails over.
func TestLeaderElection(t *testing.T) {
	k := testenv.StartKube(t, testenv.KubeOptions{})
	a := newGroup(t, groupOptions{sites: 3, kube: k})
	a.startDaemon()
	first := a.waitActive("site0", 30*time.Second)
	b := a.peer()
	b.startDaemon()
	time.Sleep(2 * time.Second)
	if code := activeSiteCode(a); code != http.StatusOK {
		t.Fatalf("leader /active-site: %d, want 200", code)
	}
	if code := activeSiteCode(b); code != http.StatusServiceUnavailable {
		t.Fatalf("follower /active-site: %d, want 503", code)
	}
	if st, err := b.status(); err != nil || st.Leader {
		t.Fatalf("follower status: %+v, %v", st, err)
	}

	a.mu.Lock()
	_ = a.cmd.Process.Kill() // SIGKILL: the lease is not released
	a.mu.Unlock()
	a.waitCrash(10 * time.Second)
	b.waitFor("follower becomes leader", 30*time.Second, func() bool { return activeSiteCode(b) == http.StatusOK })
	if st, _ := b.status(); st.Epoch != first.Epoch || st.ActiveSite != "site0" {
		t.Fatalf("new leader state %+v, want the persisted epoch %d and site0", st, first.Epoch)
	}
	if err := a.topo.Sites[0].Kill(); err != nil {
		t.Fatal(err)
	}
	st := b.waitActive("site1", failoverTimeout)
	if st.Epoch != first.Epoch+2 {
		t.Errorf("epoch %d, want %d", st.Epoch, first.Epoch+2)
	}
	if w := b.writable(); !slices.Equal(w, []string{"site1"}) {
		t.Fatalf("writable: %v", w)
	}
}
