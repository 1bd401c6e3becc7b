package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/failoverd/failoverd/daemon"
)

// errNotBuilt is returned by commands whose machinery later issues deliver.
var errNotBuilt = errors.New("not available in this build yet")

func newRunCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the failover daemon for every group in the configuration",
		Long: `run validates the configuration (refusing to start on any problem), loads
the persisted state (refusing to start on a corrupt one), then observes every
site, decides and acts for each group, and serves the HTTP API, /active-site
and /status on daemon.listen until SIGINT or SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := c.logger()
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			cfg, err := c.loadConfig()
			if err != nil {
				log.Error("config.invalid", "path", c.configPath(), "err", err)
				return err
			}
			slog.SetDefault(log) // libraries logging to the default logger use our format
			redis.SetLogger(redisLogger{log})
			for _, w := range cfg.Warnings() {
				log.Warn("config.warning", "warning", w)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			d, err := daemon.New(ctx, cfg, daemon.Options{Logger: log, Failpoint: failpointFromEnv(log)})
			if err != nil {
				log.Error("daemon.start_failed", "err", err)
				return &exitError{code: 1, err: err}
			}
			if err := d.Run(ctx); err != nil {
				log.Error("daemon.failed", "err", err)
				return &exitError{code: 1, err: err}
			}
			return nil
		},
	}
}

// failpointFromEnv makes the process SIGKILL itself right after the failover
// step named by FAILOVERD_FAILPOINT: the crash-recovery tests use it to prove
// every step resumes safely. Unset in production.
func failpointFromEnv(log *slog.Logger) func(string) {
	want := os.Getenv("FAILOVERD_FAILPOINT")
	if want == "" {
		return nil
	}
	log.Warn("failpoint.armed", "step", want)
	return func(step string) {
		if step == want {
			log.Warn("failpoint.crash", "step", step)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL) // never returns on success
		}
	}
}

func newSidecarCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sidecar",
		Short: "Run the self-fencing sidecar beside one MySQL server",
		Long: `sidecar runs next to one site's MySQL. It follows the daemon's signed view of
the active site (and its peers' gossiped copies) and fences its MySQL when
another site is active or when it has been cut off longer than the lease.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if _, err := c.logger(); err != nil {
				return &exitError{code: 2, err: err}
			}
			if _, err := c.loadConfig(); err != nil {
				return err
			}
			return &exitError{code: 1, err: errors.Join(errNotBuilt, errors.New("the sidecar arrives with its own issue"))}
		},
	}
	cmd.Flags().String("site", "", "name of the site this sidecar guards")
	cmd.Flags().String("group", "", "name of the group the site belongs to")
	return cmd
}

// redisLogger routes go-redis's global logger into the daemon's logs.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "cache.driver", "msg", fmt.Sprintf(format, v...))
}
