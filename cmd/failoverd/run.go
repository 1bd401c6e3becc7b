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
	"k8s.io/klog/v2"

	"github.com/failoverd/failoverd/daemon"
	"github.com/failoverd/failoverd/metrics"
	"github.com/failoverd/failoverd/sdnotify"
	"github.com/failoverd/failoverd/status"
)

func newRunCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the failover daemon for every group in the configuration",
		Long: `run checks the configuration as failoverd validate does (refusing to
start on any problem, the file's or that of a file it names), loads
the persisted state (refusing to start on a corrupt one), then observes every
site, decides and acts for each group, and serves the HTTP API, /active-site
the API (/v1/groups, /metrics, /healthz, /readyz) on daemon.listen until
SIGINT or SIGTERM. SIGHUP re-reads the configuration file, as failoverd reload
does: a file with any problem is refused (logged as config.reload_refused with
every problem) and the daemon runs on unchanged.`,
		Args: namedArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := c.logger()
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			// Caught from the start: SIGHUP's default action would end the
			// process. One pending reload is kept until the daemon runs.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			// Exactly validate's checks (prestart), so they cannot differ.
			cfg, warnings, err := prestart(c.configPath())
			if err != nil {
				log.Error("config.invalid", "path", c.configPath(), "err", err)
				return &exitError{code: 1, err: err}
			}
			routeLibraryLogs(log)
			for _, w := range warnings {
				log.Warn("config.warning", "warning", w)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Type=notify under systemd: READY=1 and the watchdog's pings.
			notifier, err := sdnotify.FromEnv()
			if err != nil {
				log.Warn("systemd.watchdog_ignored", "err", err)
			}
			// The metrics read the daemon's snapshot at scrape time; the
			// server that scrapes starts in Run, after d is set.
			var d *daemon.Daemon
			m := metrics.New(metrics.Options{Snapshot: func() status.Snapshot { return d.Snapshot() }, Version: version, Commit: commit})
			d, err = daemon.New(ctx, cfg, daemon.Options{Logger: log, Failpoint: failpointFromEnv(log),
				Events: m, Metrics: m.Handler(), Version: version, Commit: commit, ConfigFile: c.configPath(), Reloads: hup, Notifier: notifier})
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

// routeLibraryLogs sends the libraries' own loggers (slog's default,
// go-redis, client-go's klog) into log, so every line has our format.
func routeLibraryLogs(log *slog.Logger) {
	slog.SetDefault(log)
	redis.SetLogger(redisLogger{log})
	klog.SetSlogLogger(log.With("logger", "client-go"))
}

// redisLogger routes go-redis's global logger into the daemon's logs.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "cache.driver", "detail", fmt.Sprintf(format, v...))
}
