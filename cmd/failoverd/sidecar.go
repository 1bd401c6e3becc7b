package main

import (
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/failoverd/failoverd/sidecar"
)

func newSidecarCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sidecar",
		Short: "Run the self-fencing sidecar beside one MySQL server",
		Long: `sidecar runs next to one site's MySQL. It follows the daemon's signed view of
the active site (and its peers' gossiped copies) and fences its MySQL when
another site is active or when it has been cut off longer than the lease
(groups[].sidecar.leaseTimeout). It reads the same configuration file as the
daemon: the view signing key, the group's admin account and TLS, the site's
MySQL address and sidecar address (where it listens), and every other site's
sidecar address (its peers).

Every checkInterval it POSTs a signed report to the daemon (each --daemon-url
until the leader answers) and asks each peer for its newest view. With
--mysqld-pid-file it SIGKILLs a mysqld that cannot be fenced in time (hung).
The server must start read-only (read_only=ON in my.cnf); the sidecar lifts
that only at its own start, and only when the daemon itself names the site.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := c.logger()
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			group, site := c.v.GetString("group"), c.v.GetString("site")
			urls := c.v.GetStringSlice("daemon-url")
			if group == "" || site == "" || len(urls) == 0 {
				return &exitError{code: 2, err: errors.New("sidecar: --group, --site and at least one --daemon-url are required")}
			}
			cfg, err := c.loadConfig()
			if err != nil {
				log.Error("config.invalid", "path", c.configPath(), "err", err)
				return err
			}
			slog.SetDefault(log) // libraries logging to the default logger use our format
			scfg, mysqlOpts, err := sidecar.FromConfig(cfg, group, site)
			if err != nil {
				if errors.Is(err, sidecar.ErrUnknownGroup) || errors.Is(err, sidecar.ErrUnknownSite) || errors.Is(err, sidecar.ErrNoSidecarAddress) {
					return &exitError{code: 2, err: err}
				}
				return &exitError{code: 1, err: err}
			}
			scfg.DaemonURLs = urls
			mysqlOpts.Logger = log
			local := sidecar.DialMySQL(mysqlOpts)
			defer func() { _ = sidecar.CloseMySQL(local) }() // the process is exiting
			opts := sidecar.Options{MySQL: local, Logger: log}
			if f := c.v.GetString("mysqld-pid-file"); f != "" {
				opts.Killer = sidecar.PIDFileKiller{Path: f}
			}
			s, err := sidecar.New(scfg, opts)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := s.Run(ctx); err != nil {
				log.Error("sidecar.failed", "err", err)
				return &exitError{code: 1, err: err}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.String("group", "", "name of the group the site belongs to")
	f.String("site", "", "name of the site this sidecar guards")
	f.StringArray("daemon-url", nil, "base URL of a daemon replica, e.g. http://failoverd:8080 (repeat for every replica; only the leader answers)")
	f.String("mysqld-pid-file", "", "mysqld's pid file: SIGKILL a mysqld that cannot be fenced within the fence timeout (optional)")
	_ = c.v.BindPFlags(f) // FAILOVERD_GROUP, FAILOVERD_SITE, FAILOVERD_DAEMON_URL, FAILOVERD_MYSQLD_PID_FILE
	return cmd
}
