package poller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/mysqlctl"
)

// MySQLDialer returns a Dialer that opens each site with mysqlctl.Open:
// base with Addr set to the site's address, StatusOnly (Status in one round
// trip), MaxOpenConns 1 unless set (one
// reused session per site; mysqlctl.Open copies base.TLS). When password is
// not nil it is called at every dial (so a rotated password file is picked
// up when a Prober is reopened) and overrides base.Password.
func MySQLDialer(base mysqlctl.Options, password func() (string, error)) Dialer {
	return func(ctx context.Context, site Site) (Prober, error) {
		o, err := siteOptions(base, site, password)
		if err != nil {
			return nil, err
		}
		// A prober only reads the status: one round trip per probe.
		o.StatusOnly = true
		if o.MaxOpenConns == 0 {
			o.MaxOpenConns = 1
		}
		inst, err := mysqlctl.Open(ctx, o)
		if err != nil {
			return nil, err
		}
		return inst, nil
	}
}

// MySQLWatcher is the Watcher of MySQL sites: mysqlctl.Watch with base's
// account and TLS at each site's address.
func MySQLWatcher(base mysqlctl.Options, password func() (string, error)) Watcher {
	return func(ctx context.Context, site Site, established func(), _ func(string, string)) error {
		o, err := siteOptions(base, site, password)
		if err != nil {
			return err
		}
		return mysqlctl.Watch(ctx, o, established)
	}
}

// GroupViewWatcher is the Watcher of the members of a MySQL Group
// Replication group: mysqlctl.WatchGroupView every `every`, which reports
// a member's new view (mysqlctl.TriggerViewChange) or a new primary or
// member state in the same view (mysqlctl.TriggerMemberChange) as changed,
// and breaks like MySQLWatcher's session when the member dies. One session
// per member serves both.
func GroupViewWatcher(base mysqlctl.Options, password func() (string, error), every time.Duration) Watcher {
	return func(ctx context.Context, site Site, established func(), changed func(string, string)) error {
		o, err := siteOptions(base, site, password)
		if err != nil {
			return err
		}
		return mysqlctl.WatchGroupView(ctx, o, every, established, func(prev, now mysqlctl.GroupWatch) {
			trigger := now.Trigger(prev)
			detail := fmt.Sprintf("view %s (was %s)", now.ViewID, prev.ViewID)
			if trigger == mysqlctl.TriggerMemberChange {
				detail = fmt.Sprintf("view %s members %s", now.ViewID, now.Members)
			}
			changed(trigger, detail)
		})
	}
}

// GroupViewEvery is how often a Group Replication member's watch session
// reads its view (GroupViewWatcher): a tenth of the poll interval, between
// 10 and 100 ms, so the group's new view is seen well within the 1 s the
// follow is allowed, for a few cheap performance_schema reads a second.
func GroupViewEvery(pollInterval time.Duration) time.Duration {
	return min(max(pollInterval/10, 10*time.Millisecond), 100*time.Millisecond)
}

// siteOptions is base at site's address, with the password read now when
// password is not nil (a rotated file is picked up at the next dial).
func siteOptions(base mysqlctl.Options, site Site, password func() (string, error)) (mysqlctl.Options, error) {
	o := base
	o.Addr = site.Addr
	if password != nil {
		pw, err := password()
		if err != nil {
			return o, fmt.Errorf("admin password: %w", err)
		}
		o.Password = pw
	}
	return o, nil
}

// GroupSites returns the poller sites of a configured group, in order.
func GroupSites(g configs.Group) []Site {
	out := make([]Site, len(g.Sites))
	for i, s := range g.Sites {
		out[i] = Site{Name: s.Name, Addr: s.MySQL.Address, ReplicationAddr: s.MySQL.ReplicationAddress}
	}
	return out
}

// GroupOptions are the daemon-side settings of NewFromGroup that the
// configuration does not hold.
type GroupOptions struct {
	// Clock: nil means SystemClock.
	Clock Clock
	// Logger: nil means slog.Default().
	Logger *slog.Logger
	// MaxBackoff and SilenceAfter: see Config (0 = defaults).
	MaxBackoff, SilenceAfter time.Duration
	// OnWatch: see Config. The watch sessions of a replication: group
	// group's members report their new views (GroupViewWatcher).
	OnWatch func(WatchEvent)
}

// NewFromGroup returns a Poller for a validated configs.Group: its poll
// interval, probe timeout and failure threshold, its sites, the admin
// account (password read from its file now, to fail early, and again at
// every dial) and its TLS settings.
func NewFromGroup(g configs.Group, opts GroupOptions) (*Poller, error) {
	tlsCfg, err := g.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("new poller for group %s: %w", g.Name, err)
	}
	if _, err := g.Credentials.Admin.Password(); err != nil {
		return nil, fmt.Errorf("new poller for group %s: admin password: %w", g.Name, err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	base := mysqlctl.Options{
		User:         g.Credentials.Admin.User,
		TLS:          tlsCfg,
		DialTimeout:  g.ProbeTimeout,
		MaxOpenConns: 1,
		Logger:       logger,
	}
	watch := MySQLWatcher(base, g.Credentials.Admin.Password)
	if g.Replication == configs.ReplicationGroup {
		watch = GroupViewWatcher(base, g.Credentials.Admin.Password, GroupViewEvery(g.PollInterval))
	}
	return New(Config{
		Group:            g.Name,
		Sites:            GroupSites(g),
		PollInterval:     g.PollInterval,
		ProbeTimeout:     g.ProbeTimeout,
		FailureThreshold: g.FailureThreshold,
		MaxBackoff:       opts.MaxBackoff,
		SilenceAfter:     opts.SilenceAfter,
		Dial:             MySQLDialer(base, g.Credentials.Admin.Password),
		Watch:            watch,
		OnWatch:          opts.OnWatch,
		Clock:            opts.Clock,
		Logger:           logger,
	})
}
