package daemon

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failoverd/failoverd/sitepair"
)

// kickObs is fixedObs that counts the early probes asked of it.
type kickObs struct {
	fixedObs
	kicks atomic.Int32
}

func (k *kickObs) Kick() { k.kicks.Add(1) }

// TestRecheckDelayGrowsWithTheWaitWithinBounds: a failover that just started
// waiting rechecks after catchUpRecheckMin, one waiting longer after a
// quarter of its wait, never later than a quarter poll interval (a target
// far behind is not probed at a busy rate, a near one not held back).
func TestRecheckDelayGrowsWithTheWaitWithinBounds(t *testing.T) {
	poll := 500 * time.Millisecond
	for _, c := range []struct{ waited, want time.Duration }{
		{0, catchUpRecheckMin},
		{-time.Second, catchUpRecheckMin}, // a clock step back
		{8 * time.Millisecond, catchUpRecheckMin},
		{100 * time.Millisecond, 25 * time.Millisecond},
		{time.Minute, poll / 4},
	} {
		if got := recheckDelay(c.waited, poll); got != c.want {
			t.Errorf("recheckDelay(%v, %v) = %v, want %v", c.waited, poll, got, c.want)
		}
	}
}

// TestAwaitCatchUpAsksForEarlyProbes: a failover waiting for its target to
// receive the fenced old primary's last transactions asks for fresh probes
// within milliseconds instead of waiting for the target's next regular
// probe (up to a poll interval: the 0.6 s switchover outliers), one
// recheck at a time; other waits ask for none.
func TestAwaitCatchUpAsksForEarlyProbes(t *testing.T) {
	g, _ := testGroup(t, newTestStore(t), "b", time.Now)
	g.cfg.PollInterval = time.Hour
	obs := &kickObs{}
	g.obs = obs
	wait := sitepair.Decision{Action: sitepair.None, Reason: sitepair.ReasonAwaitCatchUp, Target: "b"}
	ctx := context.Background()

	g.carryOut(ctx, sitepair.Decision{Action: sitepair.None, Reason: sitepair.ReasonAwaitFenceConfirmation})
	time.Sleep(4 * catchUpRecheckMin)
	if n := obs.kicks.Load(); n != 0 {
		t.Fatalf("a wait for a fence proof asked for %d early probes, want 0", n)
	}
	g.carryOut(ctx, wait)
	g.carryOut(ctx, wait) // a round woken by another site's probe
	deadline := time.Now().Add(5 * time.Second)
	for obs.kicks.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(4 * catchUpRecheckMin)
	if n := obs.kicks.Load(); n != 1 {
		t.Fatalf("two rounds awaiting catch-up asked for %d early probes, want 1 (one pending at a time)", n)
	}
	g.carryOut(ctx, wait) // the next round, still waiting: the next recheck
	for obs.kicks.Load() == 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := obs.kicks.Load(); n != 2 {
		t.Fatalf("a round still awaiting catch-up after the recheck asked for %d early probes in all, want 2", n)
	}
}
