package mysqlctl

import (
	"context"
	"fmt"
	"log/slog"
)

// watchQuery idles the watch session on the server. Bounded, so a session
// whose client vanished without the server noticing (a cut link) ends on
// its own soon.
const watchQuery = "DO SLEEP(10)"

// Watch holds one session to the server at opts.Addr, idle in a bounded
// SLEEP, for as long as the session stands: established is called once it
// does, and Watch returns the error that ended it (ctx's once ctx ended). A
// killed or restarted mysqld closes its sockets, so a broken watch is
// noticed the moment it happens; the poller then probes the site at once
// instead of up to a poll interval later. A hung server or a black-holed
// link breaks nothing: the probes' timeouts see those.
func Watch(ctx context.Context, opts Options, established func()) error {
	if opts.Addr == "" || opts.User == "" {
		return fmt.Errorf("watch: %w: Addr and User are required", ErrInvalidArgument)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	cfg := driverConfig(opts, logger)
	cfg.MultiStatements = false
	cfg.ReadTimeout = 0 // the SLEEP outlasts any read timeout; ctx ends it
	p, err := newPool(cfg, 1, &connIDs{})
	if err != nil {
		return redact(fmt.Errorf("watch %s: %w", opts.Addr, err), opts.Password)
	}
	defer p.db.Close()
	conn, err := p.db.Conn(ctx)
	if err == nil {
		err = conn.PingContext(ctx)
	}
	if err != nil {
		return redact(fmt.Errorf("watch %s: connect: %w", opts.Addr, err), opts.Password)
	}
	defer conn.Close()
	established()
	for {
		if _, err := conn.ExecContext(ctx, watchQuery); err != nil {
			return redact(fmt.Errorf("watch %s: session ended: %w", opts.Addr, err), opts.Password)
		}
	}
}
