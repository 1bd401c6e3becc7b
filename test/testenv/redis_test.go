package testenv

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRedisPair is acceptance test 4, first part.
func TestRedisPair(t *testing.T) {
	primary, replica := StartRedisPair(t)
	ctx := context.Background()
	pc, rc := primary.Client(t), replica.Client(t)
	if err := pc.Set(ctx, "k", "v1", 0).Err(); err != nil {
		t.Fatalf("set on primary: %v", err)
	}
	replica.WaitInSync(t, primary, 10*time.Second)
	if v, err := rc.Get(ctx, "k").Result(); err != nil || v != "v1" {
		t.Fatalf("get on replica: %q, %v; want v1", v, err)
	}
	if role := replica.Info(t, "replication")["role"]; role != "slave" {
		t.Fatalf("replica role %q, want slave", role)
	}
	if err := rc.Set(ctx, "k", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "READONLY") {
		t.Fatalf("write on replica: err %v, want READONLY", err)
	}

	// Killing the primary drops the replica's link; a restarted primary
	// comes back empty and the replica resyncs from it.
	if err := primary.Kill(); err != nil {
		t.Fatalf("kill primary: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for replica.Info(t, "replication")["master_link_status"] != "down" {
		if time.Now().After(deadline) {
			t.Fatalf("replica link still up 10 s after the primary was killed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := primary.Restart(rctx); err != nil {
		t.Fatalf("restart primary: %v", err)
	}
	if err := pc.Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatalf("set after restart: %v", err)
	}
	replica.WaitInSync(t, primary, 30*time.Second)
	if v, err := rc.Get(ctx, "k").Result(); err != nil || v != "v2" {
		t.Fatalf("get on replica after resync: %q, %v; want v2", v, err)
	}
}
