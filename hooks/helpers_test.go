package hooks

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/procgroup/procgrouptest"
)

// testRunner returns a Runner whose every result is sent on the returned
// channel; the runner is closed (killing what still runs) at the end of the
// test.
func testRunner(t *testing.T, hooks ...configs.Hook) (*Runner, *procgrouptest.Capture, chan Result) {
	t.Helper()
	c := procgrouptest.NewCapture()
	r := New("orders", hooks, slog.New(c).With("group", "orders")) // as the daemon's group logger
	r.grace = 100 * time.Millisecond
	r.backoff = 10 * time.Millisecond
	results := make(chan Result, 100)
	r.SetOnResult(func(res Result) { results <- res })
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r.Close(ctx)
	})
	return r, c, results
}

// next returns the next result (the test's deadline bounds the wait).
func next(t *testing.T, results <-chan Result) Result {
	t.Helper()
	return <-results
}
