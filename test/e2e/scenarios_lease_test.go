package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/test/testenv"
)

// The kube-Lease variant of leader-partitioned-from-store: two daemons
// elected on a Lease of one kube-apiserver that also holds their state (a
// ConfigMap) and the routing objects; the leader's link to the API server
// is cut as the primary dies.
func init() {
	moreScenarios = append(moreScenarios, scenario{"leader-partitioned-from-apiserver", func(r *scenarioRun) {
		k, old, next, px := r.beginLeaseElected()
		oldSnap, err := old.snapshot()
		if err != nil || !oldSnap.Daemon.Leader {
			r.t.Fatalf("daemon0 not leading: %+v %v", oldSnap.Daemon, err)
		}
		nextSnap, err := next.snapshot()
		if err != nil {
			r.t.Fatal(err)
		}
		oldID, newID := oldSnap.Daemon.Identity, nextSnap.Daemon.Identity
		before, _ := old.status()
		px.Cut()
		r.g.kill(0)
		cut := time.Now()
		r.g = failedOverLeader(failoverTimeout, next)
		took := time.Since(cut)
		st, i := r.promoted("site0")
		if st.Epoch != before.Epoch+2 {
			r.t.Fatalf("epoch %d after the takeover, want %d (one failover by the new leader)", st.Epoch, before.Epoch+2)
		}
		if s, err := old.snapshot(); err != nil || s.Daemon.Leader {
			r.t.Fatalf("the cut-off daemon0 still says it leads: %+v %v", s.Daemon, err)
		}
		time.Sleep(2 * time.Second) // give a lingering old leader the chance to misbehave
		deposedLoggedNoStep(r.t, old, r.g)
		// The store: the new leader wrote the failover, the Lease is its.
		r.leaseState(k, newID, st.Epoch, st.ActiveSite)
		r.resumes()
		// The link back: the deposed daemon follows the new leader and
		// changes nothing (no step, the ConfigMap and Lease still the new
		// leader's, the Service still on the new primary).
		px.Restore()
		old.waitFor("daemon0 follows daemon1", 30*time.Second, func() bool {
			s, err := old.snapshot()
			return err == nil && !s.Daemon.Leader && s.Daemon.LeaderIdentity == newID
		})
		time.Sleep(2 * time.Second)
		if s, err := old.snapshot(); err != nil || s.Daemon.Leader {
			r.t.Fatalf("daemon0 leads again after the link came back: %+v %v", s.Daemon, err)
		}
		deposedLoggedNoStep(r.t, old, r.g)
		r.leaseState(k, newID, st.Epoch, st.ActiveSite)
		r.g.waitFor("the Service follows "+st.ActiveSite, 20*time.Second, func() bool { return serviceSelects(r.t, k, st.ActiveSite) })
		if n := strings.Count(old.logs.String(), `"msg":"leader.elected"`); n != 1 {
			r.t.Fatalf("daemon0 (%s) logged leader.elected %d times, want once (its first term)", oldID, n)
		}
		r.final, r.overlapFrom = i, 0
		r.outcome = fmt.Sprintf("leader cut off from the API server (%s), no step after daemon1's first; daemon1 took the Lease and failed over in %.1fs: %s; link restored, daemon0 follows",
			firstLogged(old.logs.String(), leaderLossMessages...), took.Seconds(), failoverOutcome(st))
	}})
}

// beginLeaseElected starts a kube-apiserver and two sites managed by two
// daemons elected on its Lease and keeping their state in its ConfigMap:
// daemon0 (old) reaches the API server through the fault proxy px (its own
// kubeconfig), daemon1 (follower) directly. Daemon0 starts first and
// leads; once daemon1 follows it, the write load starts. r.g is daemon0.
func (r *scenarioRun) beginLeaseElected() (k *testenv.Kube, old, follower *group, px *testenv.Proxy) {
	r.t.Helper()
	k = testenv.StartKube(r.t, testenv.KubeOptions{})
	createRoutingObjects(r.t, k, 2)
	px = testenv.NewProxy(r.t, "daemon0-to-apiserver", k.Addr())
	viaProxy := k.KubeconfigVia(r.t, px.Addr())
	base := newGroup(r.t, groupOptions{engine: r.e, sites: 2, kube: k})
	old = base.peerWith("daemon0", func(cfg string) string {
		return strings.Replace(cfg, "kubeconfig: "+k.Kubeconfig+"\n", "kubeconfig: "+viaProxy+"\n", 1)
	})
	if b, err := os.ReadFile(old.config); err != nil || !strings.Contains(string(b), viaProxy) {
		r.t.Fatalf("daemon0's configuration does not reach the API server through the proxy (%v)", err)
	}
	r.g = old
	old.startDaemon()
	old.waitFor("daemon0 leads", 30*time.Second, func() bool { st, err := old.status(); return err == nil && st.Leader })
	old.waitHealthy("site0", 30*time.Second)
	oldSnap, err := old.snapshot()
	if err != nil {
		r.t.Fatal(err)
	}
	follower = base.peerWith("daemon1", nil)
	follower.startDaemon()
	follower.waitFor("daemon1 follows daemon0", 30*time.Second, func() bool {
		s, err := follower.snapshot()
		return err == nil && !s.Daemon.Leader && s.Daemon.LeaderIdentity == oldSnap.Daemon.Identity && s.Daemon.StoreType == "kubernetes"
	})
	r.startLoad()
	return k, old, follower, px
}

// leaseState checks the API server's record: the Lease is held by id and
// the ConfigMap's state was last saved by id at epoch with site active and
// nothing in flight.
func (r *scenarioRun) leaseState(k *testenv.Kube, id string, epoch uint64, site string) {
	r.t.Helper()
	ctx := context.Background()
	lease, err := k.Clientset(r.t).CoordinationV1().Leases("default").Get(ctx, "failoverd-leader", metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h != id {
		r.t.Fatalf("Lease held by %v, want %s", lease.Spec.HolderIdentity, id)
	}
	st, err := store.NewConfigMap(k.Clientset(r.t), "default", "failoverd-state", time.Now).Load(ctx, "orders")
	if err != nil {
		r.t.Fatal(err)
	}
	if st.UpdatedBy != id || st.Epoch != epoch || st.ActiveSite != site || st.InFlight != nil {
		r.t.Fatalf("ConfigMap state by %q epoch %d active %q in flight %v, want by %s at epoch %d with %s active", st.UpdatedBy, st.Epoch, st.ActiveSite, st.InFlight, id, epoch, site)
	}
}
