package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"os/user"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/status"
)

// Exit codes of the commands that talk to a daemon (README: "Exit codes").
const (
	exitOK          = 0
	exitRefused     = 1 // the daemon answered with an error or refused the command
	exitUsage       = 2 // bad flags or arguments
	exitUnreachable = 3 // no answer from the daemon
	exitTimeout     = 4 // --wait gave up before the switchover completed
)

// addServerFlags adds --server, --token-file and the TLS files to a command
// that talks to a daemon. Each is taken from the flag, else FAILOVERD_<NAME>,
// else the daemon's configuration file (-c: daemon.listen,
// daemon.apiTokenFile, daemon.tls), else its default (see c.setting).
func addServerFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("server", "http://127.0.0.1:8080", "the daemon's API base URL (env FAILOVERD_SERVER; else from daemon.listen and daemon.tls of -c)")
	f.String("token-file", "", "file holding an API bearer token: daemon.apiTokenFile's, or apiAdminTokenFile's for confirm-fence and reclone when the daemon sets it, or apiReadTokenFile's for reads (env FAILOVERD_TOKEN_FILE; else from -c: daemon.apiAdminTokenFile for confirm-fence and reclone when set, else daemon.apiTokenFile)")
	f.String("ca-file", "", "CA that signed the daemon's certificate, for an https:// --server (env FAILOVERD_CA_FILE; else the daemon's own daemon.tls.certFile of -c)")
	f.String("cert-file", "", "client certificate, when daemon.tls.clientCAFile is set (env FAILOVERD_CERT_FILE; else the daemon's own certificate)")
	f.String("key-file", "", "key of --cert-file (env FAILOVERD_KEY_FILE; else daemon.tls.keyFile of -c)")
}

// client builds the API client the flags, the environment and the
// daemon's configuration file (-c) describe.
func (c *cli) client(cmd *cobra.Command, needToken bool) (*api.Client, error) {
	var s [4]setting
	for i, name := range []string{"server", "ca-file", "cert-file", "key-file"} {
		v, err := c.setting(cmd, name)
		if err != nil {
			return nil, err
		}
		s[i] = v
	}
	server := s[0].value
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	hc, err := httpClient(s[1].value, s[2].value, s[3].value)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	if s[1].inFile {
		hc.Transport = caHint{next: hc.Transport, origin: s[1].origin}
	}
	cl := &api.Client{Server: server, HTTP: hc}
	tf, err := c.setting(cmd, "token-file")
	if err != nil {
		return nil, err
	}
	if tf.value != "" {
		tok, err := configs.ReadSecret(tf.value)
		switch {
		// A read needs no token: the configuration's token file may be
		// one this user cannot read.
		case err != nil && !needToken && tf.inFile:
		case err != nil:
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("--token-file (%s): %w", tf.origin, err)}
		default:
			cl.Token = tok
		}
	} else if needToken {
		return nil, c.noTokenError()
	}
	return cl, nil
}

// apiError turns a client error into the documented exit code.
func apiError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, api.ErrDaemonUnreachable) {
		return &exitError{code: exitUnreachable, err: err}
	}
	var he *api.HTTPError
	if errors.As(err, &he) && he.Need != "" {
		// The daemon said which token it wants: say where the CLI takes it.
		return &exitError{code: exitRefused, err: fmt.Errorf("%w; %s", err, tokenHint(he.Need))}
	}
	return &exitError{code: exitRefused, err: err}
}

// tokenHint says which file --token-file must name for a token the daemon
// asked for (api.ErrorBody.Need).
func tokenHint(need string) string {
	switch need {
	case "admin":
		return "run it with --token-file naming the admin token's file"
	case "read":
		return "give --token-file with the read, operate or admin token's file"
	}
	return "run it with --token-file naming the operate (or admin) token's file"
}

// actor names the operator for the daemon's history: user@host.
func actor() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// signalContext ends on SIGINT or SIGTERM.
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
}

func newStatusCmd(c *cli) *cobra.Command {
	var (
		group, output string
		watch         bool
		interval      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status [GROUP]",
		Short: "Show every group (or one) as the daemon sees it",
		Long: `status asks a running daemon (--server) for its groups, or only GROUP, and
prints per group the epoch, the primary, the latest decision and its reason,
the last failover and the cooldown, then a row per site: state, role, GTID
set, replication and lag, sidecar lease age. -o json or yaml prints the API's
document instead. -g GROUP is the older spelling of GROUP.

-w prints it again every --interval until interrupted. Once it has printed,
it keeps watching across a daemon restart or a leader change: a daemon that
does not answer, or answers 5xx (no leader known yet), is reported once on
stderr ("reconnecting") and asked again every --interval until it answers
("reconnected"). An answer such as an unknown group still ends it.

Exit codes: 0 printed (with -w: interrupted), 1 the daemon answered with an
error (unknown group), 2 bad flags, 3 no answer from the daemon (with -w:
before the first print).`,
		Example: `  failoverd status
  failoverd status orders -o json
  failoverd status orders -w --interval 5s`,
		Args:              namedArgs("[GROUP]"),
		ValidArgsFunction: c.completeArgs("[GROUP]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" && output != "yaml" {
				return &exitError{code: exitUsage, err: fmt.Errorf("-o %q: write table, json or yaml", output)}
			}
			if len(args) == 1 {
				if group != "" && group != args[0] {
					return &exitError{code: exitUsage, err: fmt.Errorf("GROUP %q and -g %q differ: give the group once", args[0], group)}
				}
				group = args[0]
			}
			cl, err := c.client(cmd, false)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			if watch {
				return c.watchStatus(ctx, cl, group, output, interval)
			}
			return apiError(c.printStatus(ctx, cl, group, output))
		},
	}
	f := cmd.Flags()
	f.StringVarP(&group, "group", "g", "", "only this group (as the GROUP argument)")
	f.StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	f.BoolVarP(&watch, "watch", "w", false, "print again every --interval until interrupted, reconnecting across daemon restarts")
	f.DurationVar(&interval, "interval", 2*time.Second, "time between prints with --watch")
	_ = cmd.RegisterFlagCompletionFunc("group", c.completeGroups) // the flag exists
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	addServerFlags(cmd)
	return cmd
}

func (c *cli) printStatus(ctx context.Context, cl *api.Client, group, output string) error {
	var doc any
	var groups []status.Group
	var daemon status.Daemon
	if group != "" {
		g, err := cl.Group(ctx, group)
		if err != nil {
			return err
		}
		doc, groups = g, []status.Group{g}
	} else {
		s, err := cl.Status(ctx)
		if err != nil {
			return err
		}
		doc, groups, daemon = s, s.Groups, s.Daemon
	}
	if output == "json" || output == "yaml" {
		return writeDoc(c.stdout, doc, output)
	}
	writeTable(c.stdout, daemon, groups, time.Now())
	return nil
}

func newSwitchoverCmd(c *cli) *cobra.Command {
	var (
		wait, force, allowDR, dryRun bool
		timeout                      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "switchover GROUP SITE",
		Short: "Move the primary of GROUP to SITE (planned, no acknowledged write lost)",
		Long: `switchover asks the daemon for a planned switchover: the old primary is
fenced first, SITE catches up to every transaction, then becomes writable.
The daemon refuses (exit 1, with the reason) when SITE is not a healthy
replica or lacks transactions it cannot get, a failover is in flight, the
group has no single recorded primary (split brain, no primary), the group is
paused, SITE is held or dr-only (--allow-dr-only promotes a dr-only site on
purpose), or the last automatic failover is within the group's
failoverCooldown (--force overrides only that; failoverd acknowledge GROUP
clears the cooldown instead). A lost or unreachable primary does not stop
it: as in a failover, the promotion waits for proof that the old primary is
fenced (failoverd confirm-fence when only a human can give it). --dry-run asks what the daemon would
decide and changes nothing. With --wait it follows the switchover until SITE
is the settled primary.

Exit codes: 0 accepted (with --dry-run: it would be), 1 refused or abandoned,
2 bad arguments or no API token, 3 no answer from the daemon, 4 --wait
timed out (the switchover may still complete: see failoverd status).`,
		Args:              namedArgs("GROUP", "SITE"),
		ValidArgsFunction: c.completeArgs("GROUP", "SITE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			group, target := args[0], args[1]
			cl, err := c.client(cmd, true)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			before, err := cl.Group(ctx, group)
			if err != nil {
				return apiError(err)
			}
			answer, err := cl.SwitchoverWith(ctx, group, target, api.SwitchoverOptions{Force: force, AllowDROnly: allowDR, DryRun: dryRun}, actor())
			if err != nil {
				return apiError(err)
			}
			if dryRun {
				fmt.Fprintf(c.stdout, "dry run, nothing changed: %s\n", answer)
				return nil
			}
			fmt.Fprintf(c.stdout, "switchover of %s to %s accepted (epoch %d, primary %s)\n", group, target, before.Epoch, before.ActiveSite)
			if !wait {
				return nil
			}
			return c.waitSwitchover(ctx, cl, before, target, timeout)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until SITE is the settled primary")
	cmd.Flags().BoolVar(&force, "force", false, "switch over even within failoverCooldown of the last automatic failover")
	cmd.Flags().BoolVar(&allowDR, "allow-dr-only", false, "allow a dr-only SITE (never chosen automatically)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only say what the daemon would decide; change nothing")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "give up waiting after this long (exit 4)")
	addServerFlags(cmd)
	return cmd
}

// waitSwitchover follows a switchover until target is the settled primary,
// the daemon gives it up (the old primary re-asserted), or timeout.
func (c *cli) waitSwitchover(ctx context.Context, cl *api.Client, before status.Group, target string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	lastStep := ""
	timedOut := func() error {
		return &exitError{code: exitTimeout, err: fmt.Errorf("switchover of %s to %s not complete after %v; see failoverd status", before.Name, target, timeout)}
	}
	for {
		g, err := cl.Group(ctx, before.Name)
		switch {
		case err != nil && ctx.Err() != nil:
			return timedOut()
		case err != nil:
			return apiError(err)
		case g.ActiveSite == target && g.InFlight == nil:
			fmt.Fprintf(c.stdout, "%s is the primary of %s at epoch %d (%.1fs)\n", target, g.Name, g.Epoch, time.Since(start).Seconds())
			return nil
		case g.InFlight == nil && g.Epoch > before.Epoch && g.ActiveSite != "" && g.ActiveSite != target:
			return &exitError{code: exitRefused, err: fmt.Errorf("switchover abandoned: %s is the primary again at epoch %d (%s: %s %s)",
				g.ActiveSite, g.Epoch, g.Reason, g.Message, g.LastError)}
		}
		if g.InFlight != nil && g.InFlight.Step != lastStep {
			lastStep = g.InFlight.Step
			fmt.Fprintf(c.stdout, "  %s (%s)\n", lastStep, g.Reason)
		}
		select {
		case <-ctx.Done():
			return timedOut()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// command runs one API command with the token and prints what it says on
// success.
func (c *cli) command(run func(ctx context.Context, cl *api.Client, args []string) (string, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		cl, err := c.client(cmd, true)
		if err != nil {
			return err
		}
		ctx, stop := signalContext(cmd)
		defer stop()
		done, err := run(ctx, cl, args)
		if err != nil {
			return apiError(err)
		}
		fmt.Fprintln(c.stdout, done)
		return nil
	}
}

func newAcknowledgeCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acknowledge GROUP",
		Short: "Clear GROUP's escalation halt and failover cooldown so automatic failover resumes",
		Long: `acknowledge tells the daemon a human looked at the failovers that hit the
escalation limit, or at the last automatic failover: automatic failover
resumes, the escalation halt and an active failover cooldown are cleared (the
history of automatic failovers that arms both starts afresh). Recorded in the
group's history.

Exit codes: 0 done, 1 refused, 2 bad arguments or no API token, 3 no
answer from the daemon.`,
		Args:              namedArgs("GROUP"),
		ValidArgsFunction: c.completeArgs("GROUP"),
		RunE: c.command(func(ctx context.Context, cl *api.Client, args []string) (string, error) {
			return args[0] + " acknowledged; automatic failover resumes", cl.Acknowledge(ctx, args[0], actor())
		}),
	}
	addServerFlags(cmd)
	return cmd
}

func newConfirmFenceCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:         "confirm-fence GROUP SITE",
		Annotations: map[string]string{annotationToken: tokenAdmin},
		Short:       "Assert that SITE, GROUP's old primary (or a replica a failover waits for), is lost",
		Long: `confirm-fence is the way out of await-fence-confirmation: the daemon revoked
SITE but cannot prove it stopped accepting writes (its host is unreachable).
Run it only once you know SITE's mysqld is dead, its host powered off or cut
off from every client: the daemon then promotes the best replica. If SITE
still accepts writes, those writes are lost and the group splits. Recorded in
the group's history with your name.

It is also the way out of ack-holder-unreachable: the old primary is fenced
but unreachable replicas may hold the only copy of a write it acknowledged.
Naming one of them (the status message lists them) accepts losing whatever
only that replica holds; run it only once you know its host is gone.

When the daemon has an admin token (daemon.apiAdminTokenFile), --token-file
must name it: the operate token is refused (exit 1, naming the token).

Exit codes: 0 recorded, 1 refused (no failover from SITE awaits a fence),
2 bad arguments or no API token, 3 no answer from the daemon.`,
		Args:              namedArgs("GROUP", "SITE"),
		ValidArgsFunction: c.completeArgs("GROUP", "SITE"),
		RunE: c.command(func(ctx context.Context, cl *api.Client, args []string) (string, error) {
			return "fence of " + args[0] + "/" + args[1] + " confirmed; the failover goes on", cl.ConfirmFence(ctx, args[0], args[1], actor())
		}),
	}
	addServerFlags(cmd)
	return cmd
}

// modeFlags are the --for and --reason every pause and hold needs.
func modeFlags(cmd *cobra.Command, lasts *time.Duration, reason *string) {
	cmd.Flags().DurationVar(lasts, "for", 0, "how long it lasts (required, e.g. 30m; it ends by itself)")
	cmd.Flags().StringVar(reason, "reason", "", "why (required; shown in status and the history)")
	markRequired(cmd, "for", "reason")
}

// checkMode refuses a pause or hold without a positive --for or a --reason.
func checkMode(lasts time.Duration, reason string) error {
	switch {
	case lasts <= 0:
		return &exitError{code: exitUsage, err: errors.New("--for is required and must be positive (e.g. --for 30m): every pause and hold ends by itself")}
	case strings.TrimSpace(reason) == "":
		return &exitError{code: exitUsage, err: errors.New("--reason is required: the next on-call reads it")}
	}
	return nil
}

func newPauseCmd(c *cli) *cobra.Command {
	var (
		lasts  time.Duration
		reason string
	)
	cmd := &cobra.Command{
		Use:   "pause GROUP --for DURATION --reason TEXT",
		Short: "Stop GROUP's automatic actions (failover, switchover, fence) for a while",
		Long: `pause stops the daemon from acting on GROUP until the pause runs out or
resume: no failover, switchover, fence, re-assert or rejoin starts. It keeps
observing, reporting and repairing routing drift, and a failover it would
have started is logged (pause.withheld) and shown in status and the metrics.
A failover already in flight is not paused (pausing then is refused). The
pause is persisted (it survives restarts and leader changes), recorded in the
history with --reason and your name, and never longer than daemon.maxPause.

Exit codes: 0 paused, 1 refused, 2 bad arguments (no --for, no --reason) or
no API token, 3 no answer from the daemon.`,
		Args:              namedArgs("GROUP"),
		ValidArgsFunction: c.completeArgs("GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkMode(lasts, reason); err != nil {
				return err
			}
			return c.command(func(ctx context.Context, cl *api.Client, args []string) (string, error) {
				return fmt.Sprintf("%s paused for %v (until %s): no failover, switchover or fence starts", args[0], lasts, time.Now().Add(lasts).UTC().Format(time.RFC3339)),
					cl.Pause(ctx, args[0], lasts, reason, actor())
			})(cmd, args)
		},
	}
	modeFlags(cmd, &lasts, &reason)
	addServerFlags(cmd)
	return cmd
}

func newResumeCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resume GROUP",
		Short: "End GROUP's pause: automatic actions resume",
		Long: `resume ends a pause before it runs out; what the group needs (a failover
withheld meanwhile, for instance) starts at its next decision.

Exit codes: 0 resumed, 1 refused (not paused), 2 bad arguments or no API
token, 3 no answer from the daemon.`,
		Args:              namedArgs("GROUP"),
		ValidArgsFunction: c.completeArgs("GROUP"),
		RunE: c.command(func(ctx context.Context, cl *api.Client, args []string) (string, error) {
			return args[0] + " resumed; automatic actions are back", cl.Resume(ctx, args[0], actor())
		}),
	}
	addServerFlags(cmd)
	return cmd
}

func newHoldCmd(c *cli) *cobra.Command {
	var (
		lasts  time.Duration
		reason string
	)
	cmd := &cobra.Command{
		Use:   "hold GROUP SITE no-promote|maintenance --for DURATION --reason TEXT",
		Short: "Keep SITE out of promotions (no-promote) or hold it for maintenance",
		Long: `hold puts a hold on SITE until it runs out or release:

  no-promote   SITE is never chosen by a failover or switchover; it stays a
               replica and a witness.
  maintenance  as no-promote, and SITE may stop, restart or lag without an
               alert or a failover (it is no witness). On the primary, the
               daemon first switches over to the best other site, then holds
               it: the way to restart or upgrade the primary's mysqld. When
               the hold ends the daemon starts its replication again if it
               was left stopped.

Persisted, recorded in the history with --reason and your name, never longer
than daemon.maxHold.

Exit codes: 0 held, 1 refused (e.g. no site can take over the primary), 2 bad
arguments or no API token, 3 no answer from the daemon.`,
		Args:              namedArgs("GROUP", "SITE", "no-promote|maintenance"),
		ValidArgsFunction: c.completeArgs("GROUP", "SITE", "no-promote|maintenance"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[2] != "no-promote" && args[2] != "maintenance" {
				return &exitError{code: exitUsage, err: fmt.Errorf("hold kind %q: write no-promote or maintenance", args[2])}
			}
			if err := checkMode(lasts, reason); err != nil {
				return err
			}
			return c.command(func(ctx context.Context, cl *api.Client, args []string) (string, error) {
				return fmt.Sprintf("%s/%s held (%s) for %v", args[0], args[1], args[2], lasts), cl.Hold(ctx, args[0], args[1], args[2], lasts, reason, actor())
			})(cmd, args)
		},
	}
	modeFlags(cmd, &lasts, &reason)
	addServerFlags(cmd)
	return cmd
}

func newReleaseCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "release GROUP SITE",
		Short: "End SITE's hold",
		Long: `release ends a no-promote or maintenance hold before it runs out.

Exit codes: 0 released, 1 refused (no hold), 2 bad arguments or no API
token, 3 no answer from the daemon.`,
		Args:              namedArgs("GROUP", "SITE"),
		ValidArgsFunction: c.completeArgs("GROUP", "SITE"),
		RunE: c.command(func(ctx context.Context, cl *api.Client, args []string) (string, error) {
			return args[0] + "/" + args[1] + " released", cl.Release(ctx, args[0], args[1], actor())
		}),
	}
	addServerFlags(cmd)
	return cmd
}
