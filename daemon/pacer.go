package daemon

import (
	"context"
	"sync"
	"time"
)

// pacer is how an action spends time: its parallel parts and its bounded
// waits for something outside the daemon. The daemon runs them on
// goroutines and real timers (livePacer); the harness runs them one after
// another and lets the rest of its simulated world run at every wait
// (serialPacer), so that a history replays exactly.
type pacer interface {
	// all runs every f and returns once each of them returned.
	all(fs ...func())
	// waitFor waits until cond holds (true) or limit passed (false),
	// checking every waitPoll; an ended ctx ends the wait with its error.
	waitFor(ctx context.Context, limit time.Duration, cond func() bool) (bool, error)
}

// waitPoll is how often waitFor checks its condition.
const waitPoll = 10 * time.Millisecond

// livePacer is the daemon's pacer: goroutines and real timers.
type livePacer struct{}

func (livePacer) all(fs ...func()) {
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Go(f)
	}
	wg.Wait()
}

func (livePacer) waitFor(ctx context.Context, limit time.Duration, cond func() bool) (bool, error) {
	wait := time.NewTimer(limit)
	defer wait.Stop()
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-wait.C:
			return cond(), nil
		case <-tick.C:
		}
	}
	return true, nil
}

// serialPacer is the harness's pacer: parallel parts run one after another
// in order, and each check of a wait calls pause instead of sleeping (the
// harness runs the rest of its world once) as many times as waitPoll fits
// in the limit.
type serialPacer struct{ pause func() }

func (serialPacer) all(fs ...func()) {
	for _, f := range fs {
		f()
	}
}

func (p serialPacer) waitFor(_ context.Context, limit time.Duration, cond func() bool) (bool, error) {
	for range max(1, int(limit/waitPoll)) {
		if cond() {
			return true, nil
		}
		p.pause()
	}
	return cond(), nil
}
