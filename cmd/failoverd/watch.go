package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/failoverd/failoverd/api"
)

// watchRequestTimeout bounds one request of status -w: a daemon whose host
// vanished (no reset, no answer) must not freeze the watch for ever.
func watchRequestTimeout(interval time.Duration) time.Duration {
	return max(10*time.Second, interval)
}

// watchStatus prints the status every interval until ctx ends. Before the
// first print any error ends it (a wrong --server is said at once); after
// it, a daemon that does not answer or answers 5xx (restarting, a follower
// with no leader known, a failed forward) is reported once and asked again
// every interval: a watch kept open through a restart or a leader change
// picks the new daemon up.
func (c *cli) watchStatus(ctx context.Context, cl *api.Client, group, output string, interval time.Duration) error {
	printed, down := false, false
	for {
		rctx, cancel := context.WithTimeout(ctx, watchRequestTimeout(interval))
		err := c.printStatus(rctx, cl, group, output)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			if down {
				fmt.Fprintf(c.stderr, "failoverd: reconnected to %s\n", cl.Server)
				down = false
			}
			printed = true
		case printed && transient(err):
			if !down {
				fmt.Fprintf(c.stderr, "failoverd: %v; reconnecting every %v (Ctrl-C to stop)\n", err, interval)
				down = true
			}
		default:
			return apiError(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
		if !down {
			fmt.Fprintln(c.stdout)
		}
	}
}

// transient: an error a restarting daemon or a leader change causes (no
// answer, a cut answer, a 5xx); a 4xx answer (unknown group, a refused
// token) stays wrong however long one waits.
func transient(err error) bool {
	var he *api.HTTPError
	if errors.As(err, &he) {
		return he.Code >= 500
	}
	return true
}
