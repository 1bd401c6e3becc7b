package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/failoverd/failoverd"
	"github.com/failoverd/failoverd/configs"
)

// version is the VERSION file's (package failoverd), never a build flag, so
// the binary, the image tag and the chart cannot disagree; commit is set by
// -ldflags "-X main.commit=...".
var (
	version = failoverd.Version
	commit  = "unknown"
)

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// cli holds the global flags, bound to viper so FAILOVERD_CONFIG,
// FAILOVERD_LOG_FORMAT and FAILOVERD_LOG_LEVEL override their defaults.
type cli struct {
	v      *viper.Viper
	stdout io.Writer
	stderr io.Writer
	// daemonCfg is the daemon section client commands read (daemonSection).
	daemonCfg *daemonConfig
	// completing silences warnings while the shell asks for completions.
	completing bool
}

func (c *cli) configPath() string { return c.v.GetString("config") }

// logger builds the slog logger the flags ask for.
func (c *cli) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.v.GetString("log-level"))); err != nil {
		return nil, fmt.Errorf("--log-level %q: write debug, info, warn or error", c.v.GetString("log-level"))
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.v.GetString("log-format") {
	case "json":
		return slog.New(slog.NewJSONHandler(c.stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(c.stderr, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: write json or text", c.v.GetString("log-format"))
	}
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	c := &cli{v: viper.New(), stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "failoverd",
		Short: "Keep a MySQL/MariaDB failover group available and consistent",
		Long: `failoverd watches every site of a MySQL or MariaDB failover group, decides
from the whole group, and fails over safely: it fences the old primary before
it promotes the most up-to-date replica, then moves replicas, Kubernetes
Services, node taints, DNS and Dragonfly/Redis to the new primary.

The commands that talk to a running daemon (status, switchover, pause, ...)
find it as patronictl -c does: in the daemon's configuration file (-c) they
read its address (daemon.listen, daemon.tls) and API token
(daemon.apiTokenFile); --server, --token-file and the TLS flags override it.

Every flag can also be set with an environment variable: FAILOVERD_ plus the
flag name in upper case with dashes as underscores (FAILOVERD_LOG_LEVEL=debug).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Every command refuses a zero or negative duration flag.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return checkDurations(cmd) },
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringP("config", "c", "/etc/failoverd/failoverd.yaml", "configuration file (YAML)")
	pf.String("log-format", "json", "log format: json or text")
	pf.String("log-level", "info", "log level: debug, info, warn or error")
	c.v.SetEnvPrefix(configs.EnvPrefix)
	c.v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	c.v.AutomaticEnv()
	_ = c.v.BindPFlags(pf) // cannot fail for flags we just defined

	root.AddCommand(newValidateCmd(c), newVersionCmd(c), newRunCmd(c), newSidecarCmd(c),
		newStatusCmd(c), newSwitchoverCmd(c), newAcknowledgeCmd(c), newConfirmFenceCmd(c), newRecloneCmd(c), newForceMembersCmd(c), newBootstrapGroupCmd(c),
		newPauseCmd(c), newResumeCmd(c), newHoldCmd(c), newReleaseCmd(c), newReloadCmd(c))
	root.AddCommand(newHistoryCmd(c))
	root.Version = version
	root.SetVersionTemplate(versionLine() + "\n")
	return root
}

// execute runs the CLI and returns the process exit code.
func execute(args []string, stdout, stderr io.Writer) int {
	return executeContext(context.Background(), args, stdout, stderr)
}

// executeContext is execute ending when ctx does (as on SIGINT).
func executeContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "failoverd:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 2
}

func newVersionCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(c.stdout, versionLine())
			return nil
		},
	}
}

func versionLine() string {
	return fmt.Sprintf("failoverd %s (commit %s, %s %s/%s)", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
