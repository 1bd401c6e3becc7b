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
// clock through a failover: right after a round that adopted a newer epoch
// the next round runs at once; while the newest view names no site the
// next round comes after the urgent interval for 3 checkIntervals after
// the revocation, then after the fast interval; otherwise after
// checkInterval. The daemon thus hears of the old primary's fence and of
// the target's new epoch within one urgent interval of publishing the
// view that asks for them (issue 32).
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
	// Round 1 adopted epoch 1: round 2 runs at once.
	ended(2, "epoch 1 names this site", check)

	h.daemon.answer(sign(t, 2, "")) // the failover revokes the primary
	revoked := h.clock.Now().Add(check)
	h.clock.Advance(check)
	// Round 3 adopted the revocation, round 4 runs at once.
	ended(4, "the view names no site, just revoked", urgentRound)
	waitEvent(t, h.mysql, "fenced") // rule 1, unchanged
	if r := h.daemon.lastReport(t); r.Epoch != 2 {
		t.Fatalf("report epoch %d during the revocation", r.Epoch)
	}
	// Urgent rounds until 3 checkIntervals after the revocation, then fast.
	n := 4
	for h.clock.Now().Add(urgentRound).Sub(revoked) < 3*check {
		h.clock.Advance(urgentRound)
		n++
		ended(n, "urgent round", urgentRound)
	}
	h.clock.Advance(urgentRound)
	n++
	ended(n, "revoked for 3 checkIntervals: fast rounds", fast)

	published := h.clock.Now()
	h.daemon.answer(sign(t, 3, "east")) // the daemon publishes the promotion of east
	h.clock.Advance(fast)
	// Round n+1 adopted epoch 3, round n+2 ran at once.
	ended(n+2, "epoch 3 names this site", check)
	if r := h.daemon.lastReport(t); r.Epoch != 3 {
		t.Fatalf("report epoch %d, want 3", r.Epoch)
	}
	if took := h.clock.Now().Sub(published); took > fast {
		t.Errorf("the daemon heard of epoch 3 %s after publishing it, want at most %s", took, fast)
	}
	if f, _, _, _ := h.mysql.counts(); f != 1 {
		t.Errorf("fences %d, want the one rule-1 fence", f)
	}
}
