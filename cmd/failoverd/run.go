package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/failoverd/failoverd/daemon"
)

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

// redisLogger routes go-redis's global logger into the daemon's logs.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "cache.driver", "msg", fmt.Sprintf(format, v...))
}
