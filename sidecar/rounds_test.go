package sidecar

import (
	"fmt"
	"testing"
	"time"
)

func TestFastRoundInterval(t *testing.T) {
	for _, tc := range []struct{ check, want time.Duration }{
		{time.Second, 200 * time.Millisecond},
		{500 * time.Millisecond, 100 * time.Millisecond},
		{200 * time.Millisecond, 50 * time.Millisecond}, // the floor
		{30 * time.Millisecond, 30 * time.Millisecond},  // never slower than checkInterval
	} {
		if got := (Config{CheckInterval: tc.check}).fastRound(); got != tc.want {
			t.Errorf("checkInterval %s: fast round %s, want %s", tc.check, got, tc.want)
		}
	}
}

// TestFastRoundsDuringAFailover runs the sidecar's own loops on the fake
// clock through a failover: while the newest view names no site, and right
// after a view is adopted, the next round comes after the fast interval;
// otherwise after checkInterval. The daemon thus hears of the target's new
// epoch within two fast intervals of publishing it.
func TestFastRoundsDuringAFailover(t *testing.T) {
	const check = time.Second
	fast := check / 5
	h := newHarness(t, func(c *Config, _ *Options) {
		c.CheckInterval = check
		c.LeaseTimeout = 10 * time.Second // lease timers far from every round timer
	})
	// ended waits until round n has sent its report and, once over, armed
	// the timer of the next round d later.
	ended := func(n int, what string, d time.Duration) {
		t.Helper()
		waitFor(t, fmt.Sprintf("report of round %d", n), func() bool { return h.daemon.count() == n })
		at := h.clock.Now().Add(d)
		waitFor(t, fmt.Sprintf("round %d (%s) to arm the next one %s later", n, what, d), func() bool { return h.clock.armedAt(at) })
	}
	h.daemon.answer(sign(t, 1, "east"))
	runHarness(t, h)
	waitEvent(t, h.mysql, "promoted")
	ended(1, "adopted epoch 1", fast)
	h.clock.Advance(fast)
	ended(2, "epoch 1 names this site", check)

	h.daemon.answer(sign(t, 2, "")) // the failover revokes the primary
	h.clock.Advance(check)
	ended(3, "adopted the revocation", fast)
	waitEvent(t, h.mysql, "fenced") // rule 1, unchanged
	h.clock.Advance(fast)
	ended(4, "the view names no site", fast)
	if r := h.daemon.lastReport(t); r.Epoch != 2 {
		t.Fatalf("report epoch %d during the revocation", r.Epoch)
	}

	published := h.clock.Now()
	h.daemon.answer(sign(t, 3, "east")) // the daemon publishes the promotion of east
	h.clock.Advance(fast)
	ended(5, "adopted epoch 3", fast)
	h.clock.Advance(fast)
	ended(6, "epoch 3 names this site", check)
	if r := h.daemon.lastReport(t); r.Epoch != 3 {
		t.Fatalf("report epoch %d, want 3", r.Epoch)
	}
	if took := h.clock.Now().Sub(published); took > 2*fast {
		t.Errorf("the daemon heard of epoch 3 %s after publishing it, want at most %s", took, 2*fast)
	}
	if f, _, _, _ := h.mysql.counts(); f != 1 {
		t.Errorf("fences %d, want the one rule-1 fence", f)
	}
}
