package daemon

// systemd's notifications (Type=notify, WatchdogSec=; deploy/systemd):
// READY=1 once the API listens and every group's loop runs, WATCHDOG=1
// every half WatchdogSec while every group loop makes progress (the same
// signal as GET /healthz, progress.go), STOPPING=1 when Run ends. A wedged
// loop stops the pings, and systemd kills the process with SIGABRT (Go
// prints every goroutine's stack to the journal) and restarts it.

import (
	"context"
	"fmt"
	"time"

	"github.com/failoverd/failoverd/sdnotify"
)

// notifyReady tells systemd the daemon is ready and starts the watchdog's
// pings until ctx ends. Called by Run once the API serves and the groups
// run.
func (d *Daemon) notifyReady(ctx context.Context) {
	n := d.opts.Notifier
	if n == nil {
		return
	}
	d.sdNotify(sdnotify.Ready, fmt.Sprintf("STATUS=%d group(s), API on %s", len(d.groupList()), d.Addr()))
	if n.WatchdogInterval <= 0 {
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.watchdog(ctx, n.WatchdogInterval/2)
	}()
}

// watchdog pings systemd every interval while no group loop is stalled.
func (d *Daemon) watchdog(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	withheld := false
	for {
		// Prevents systemd from keeping a daemon whose loop is wedged: no
		// ping while any loop is stalled.
		if stalled := d.Stalled(); len(stalled) > 0 {
			if !withheld {
				d.log.Error("watchdog.withheld", "stalled", stalled,
					"note", "systemd restarts the daemon once WatchdogSec passes without a ping")
			}
			withheld = true
		} else {
			if withheld {
				d.log.Info("watchdog.resumed")
			}
			withheld = false
			d.sdNotify(sdnotify.Watchdog)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sdNotify sends messages to systemd; a failure is logged (the daemon
// runs on: a missed READY fails the start, missed pings restart it).
func (d *Daemon) sdNotify(messages ...string) {
	if err := d.opts.Notifier.Notify(messages...); err != nil {
		d.log.Warn("systemd.notify_failed", "messages", messages, "err", err)
	}
}
