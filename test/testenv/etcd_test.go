package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// putEventually retries a write until it succeeds or ctx ends: right after
// a member dies, the client's first request may still pick it.
func putEventually(ctx context.Context, t *testing.T, cli *clientv3.Client, key, val string) {
	t.Helper()
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Put(rctx, key, val)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("put %s: %v", key, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func getValue(ctx context.Context, t *testing.T, cli *clientv3.Client, key string) string {
	t.Helper()
	resp, err := cli.Get(ctx, key) // linearizable: needs a quorum
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// Three members: each healthy, a write is read back; with one member killed
// the other two still serve writes; restarted, it rejoins and serves a
// linearizable read of what was written while it was down.
func TestEtcdClusterSurvivesOneMemberAndRejoins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := StartEtcdCluster(t, 3)
	if len(c.Members) != 3 || len(c.Endpoints()) != 3 {
		t.Fatalf("members %d, endpoints %v", len(c.Members), c.Endpoints())
	}
	cli := c.Client(t)
	for i, m := range c.Members {
		if m.Name != fmt.Sprintf("site%d", i) {
			t.Fatalf("member %d named %q", i, m.Name)
		}
		st, err := cli.Status(ctx, m.ClientURL())
		if err != nil {
			t.Fatalf("status of %s: %v", m.Name, err)
		}
		if st.Leader == 0 {
			t.Fatalf("%s sees no leader", m.Name)
		}
	}
	members, err := cli.MemberList(ctx)
	if err != nil || len(members.Members) != 3 {
		t.Fatalf("member list: %v, %v", members, err)
	}
	putEventually(ctx, t, cli, "k", "v1")
	if got := getValue(ctx, t, cli, "k"); got != "v1" {
		t.Fatalf("read %q, want v1", got)
	}

	victim := c.Members[1]
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	if victim.Running() {
		t.Fatal("killed member still runs")
	}
	putEventually(ctx, t, cli, "k", "v2")
	if got := getValue(ctx, t, cli, "k"); got != "v2" {
		t.Fatalf("read %q with one member down, want v2", got)
	}

	if err := victim.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// Only the restarted member: a linearizable read through it needs it
	// to be part of the cluster again.
	if got := getValue(ctx, t, victim.Client(t), "k"); got != "v2" {
		t.Fatalf("restarted member reads %q, want v2", got)
	}
}

// With ProxiedPeers an isolated member keeps answering on its client URL
// but cannot serve a linearizable request; the other two keep a quorum;
// healed, it catches up. A client reaches a member through a NewProxy.
func TestEtcdClusterIsolatedMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := StartEtcdClusterWith(t, 3, EtcdClusterOptions{ProxiedPeers: true})
	cli := c.Client(t)
	putEventually(ctx, t, cli, "k", "v1")

	lone := c.Members[0]
	px := NewProxy(t, "client-to-site0", lone.ClientAddr())
	viaProxy := newEtcdClient(t, "http://"+px.Addr())
	if got := getValue(ctx, t, viaProxy, "k"); got != "v1" {
		t.Fatalf("read through the client proxy %q, want v1", got)
	}

	if err := lone.Isolate(); err != nil {
		t.Fatal(err)
	}
	others := newEtcdClient(t, c.Members[1].ClientURL(), c.Members[2].ClientURL())
	putEventually(ctx, t, others, "k", "v2")
	// The isolated member's raft never learns v2 while cut off: a
	// linearizable read through it must fail, not return v1.
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	resp, err := viaProxy.Get(rctx, "k")
	rcancel()
	if err == nil {
		t.Fatalf("linearizable read on the isolated member succeeded: %v", resp.Kvs)
	}
	// Its client URL still answers (serializable, local).
	if _, err := viaProxy.Get(ctx, "k", clientv3.WithSerializable()); err != nil {
		t.Fatalf("serializable read on the isolated member: %v", err)
	}

	if err := lone.Heal(); err != nil {
		t.Fatal(err)
	}
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := viaProxy.Get(rctx, "k")
		rcancel()
		if err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "v2" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("healed member never served v2: %v %v", resp, err)
		case <-time.After(50 * time.Millisecond):
		}
	}

	if err := StartEtcdCluster(t, 1).Members[0].Isolate(); err == nil {
		t.Fatal("Isolate without ProxiedPeers succeeded")
	}
}
