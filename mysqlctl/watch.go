package mysqlctl

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"
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
	return watchSession(ctx, opts, established, func(conn *sql.Conn) error {
		for {
			if _, err := conn.ExecContext(ctx, watchQuery); err != nil {
				return err
			}
		}
	})
}

// groupWatchMySQL reads, in one round trip, the member's own view id
// (VIEW_ID of its own replication_group_member_stats row) and its member
// table (server_uuid, state, role of each row, in server_uuid order): a
// new view, an election without a new view (group_replication_set_as_primary
// keeps the view id) and a member's state change each change it. Both
// columns are "" where there is none (Group Replication stopped, no
// plugin).
const groupWatchMySQL = "SELECT IFNULL((SELECT VIEW_ID FROM performance_schema.replication_group_member_stats WHERE MEMBER_ID = @@GLOBAL.server_uuid LIMIT 1), ''), " +
	"IFNULL((SELECT GROUP_CONCAT(MEMBER_ID, ' ', MEMBER_STATE, ' ', MEMBER_ROLE ORDER BY MEMBER_ID SEPARATOR ',') FROM performance_schema.replication_group_members), '')"

// GroupWatch is what a Group Replication member's watch session reads
// (WatchGroupView): its own view id and its member table, as text.
type GroupWatch struct {
	ViewID  string
	Members string
}

// Triggers of a Group Replication watch, as WatchGroupView reports a
// change (GroupWatch.Trigger).
const (
	// TriggerViewChange: the member installed another view (a member
	// joined, left or was expelled).
	TriggerViewChange = "view-change"
	// TriggerMemberChange: same view, another primary or a member's state
	// (an election by group_replication_set_as_primary, a member ONLINE
	// after RECOVERING, UNREACHABLE).
	TriggerMemberChange = "member-change"
)

// Trigger names what changed from prev to w: TriggerViewChange when the
// view id did, else TriggerMemberChange.
func (w GroupWatch) Trigger(prev GroupWatch) string {
	if w.ViewID != prev.ViewID {
		return TriggerViewChange
	}
	return TriggerMemberChange
}

// WatchGroupView is Watch for a MySQL Group Replication member: the one
// session reads the member's view id and member table (GroupWatch) every
// `every` instead of idling, and calls changed with the previous and the
// new reading whenever they differ (the first reading after the session
// stands is the baseline, never a change). It returns the error that
// ended the session, as Watch does: a killed member closes its sockets; a
// read that takes longer than the read timeout (a hung member) ends it too.
// The daemon runs a round on either, so the group's new view is followed
// within a reading's interval instead of at the next poll.
func WatchGroupView(ctx context.Context, opts Options, every time.Duration, established func(), changed func(prev, now GroupWatch)) error {
	if every <= 0 {
		return fmt.Errorf("watch group view: %w: interval %v must be positive", ErrInvalidArgument, every)
	}
	timeout := orDefault(opts.ReadTimeout, DefaultReadTimeout)
	return watchSession(ctx, opts, established, func(conn *sql.Conn) error {
		t := time.NewTicker(every)
		defer t.Stop()
		var last GroupWatch
		for first := true; ; first = false {
			rctx, cancel := context.WithTimeout(ctx, timeout)
			var w GroupWatch
			err := conn.QueryRowContext(rctx, groupWatchMySQL).Scan(&w.ViewID, &w.Members)
			cancel()
			if err != nil {
				return err
			}
			if !first && w != last {
				changed(last, w)
			}
			last = w
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
	})
}

// watchSession opens one session to opts.Addr, calls established once it
// stands and runs loop on it until loop returns; the error names the
// session's end.
func watchSession(ctx context.Context, opts Options, established func(), loop func(*sql.Conn) error) error {
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
	err = loop(conn)
	return redact(fmt.Errorf("watch %s: session ended: %w", opts.Addr, err), opts.Password)
}
