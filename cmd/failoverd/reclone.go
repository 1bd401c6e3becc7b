package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/status"
)

func newRecloneCmd(c *cli) *cobra.Command {
	var (
		confirm string
		legacy  string
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:         "reclone GROUP SITE --confirm-discard GTIDS|SITE",
		Annotations: map[string]string{annotationToken: tokenAdmin},
		Short:       "Re-seed SITE of GROUP from the primary, throwing away what SITE holds",
		Long: `reclone replaces every row of SITE with a copy of the current primary's data,
then lets SITE rejoin as a replica. It is the way back for a diverged site
(one holding transactions the primary lacks: they are thrown away) or a
replica whose replication cannot resume (purged binary logs). failoverd never
does it on its own.

--confirm-discard proves you looked at what will be lost: the first 8 or
more characters of what SITE holds that the primary lacks, or the bare site
name when it holds nothing the primary lacks. (It was called --token, an
alias kept for old scripts: it is not the API token, which --token-file or
the configuration gives.) The daemon reads both sites' GTID
sets when the request arrives, so this holds whether or not a divergence is
recorded: failoverd status shows a recorded divergent set, and a refused
request names the set to repeat. MySQL copies with CLONE
INSTANCE (clone plugin on both sites); MariaDB runs the group's
reclone.command (see deploy/reclone/). With --wait it follows the reclone
until SITE replicates from the primary.

When the daemon has an admin token (daemon.apiAdminTokenFile), --token-file
must name it: the operate token is refused (exit 1, naming the token).

Exit codes: 0 started (with --wait: SITE rejoined), 1 refused or failed,
2 bad arguments or no API token, 3 no answer from the daemon, 4 --wait
timed out (the reclone may still complete: see failoverd status).`,
		Args:              namedArgs("GROUP", "SITE"),
		ValidArgsFunction: c.completeArgs("GROUP", "SITE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			group, site := args[0], args[1]
			if cmd.Flags().Changed("token") {
				// Old scripts keep working, told to move on.
				fmt.Fprintln(c.stderr, "failoverd: warning: reclone --token is deprecated, write --confirm-discard (the API token is --token-file)")
				if confirm != "" && confirm != legacy {
					return &exitError{code: exitUsage, err: fmt.Errorf("--confirm-discard %q and --token %q differ: give --confirm-discard only", confirm, legacy)}
				}
				confirm = legacy
			}
			if confirm == "" {
				return &exitError{code: exitUsage, err: fmt.Errorf("--confirm-discard is required: the first 8+ characters of the GTID set %s holds that the primary lacks (failoverd status, or the refusal names it), or %q when it holds nothing the primary lacks", site, site)}
			}
			cl, err := c.client(cmd, true)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			if err := cl.Reclone(ctx, group, site, confirm, actor()); err != nil {
				return apiError(err)
			}
			fmt.Fprintf(c.stdout, "reclone of %s/%s started\n", group, site)
			if !wait {
				return nil
			}
			return c.waitReclone(ctx, cl, group, site, timeout)
		},
	}
	cmd.Flags().StringVar(&confirm, "confirm-discard", "", "what SITE loses, confirmed: the first 8+ characters of the GTID set SITE holds that the primary lacks, or the site name when there is none (required)")
	cmd.Flags().StringVar(&legacy, "token", "", "deprecated name of --confirm-discard")
	_ = cmd.Flags().MarkHidden("token") // the flag exists
	markRequired(cmd, "confirm-discard")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until SITE replicates from the primary")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Hour, "give up waiting after this long (exit 4)")
	addServerFlags(cmd)
	return cmd
}

// waitReclone follows a reclone until site replicates from the primary, the
// reclone fails, or timeout.
func (c *cli) waitReclone(ctx context.Context, cl *api.Client, group, site string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	timedOut := func() error {
		return &exitError{code: exitTimeout, err: fmt.Errorf("reclone of %s/%s not complete after %v; see failoverd status", group, site, timeout)}
	}
	for {
		g, err := cl.Group(ctx, group)
		switch {
		case err != nil && ctx.Err() != nil:
			return timedOut()
		case err != nil:
			return apiError(err)
		}
		if s := siteIn(g, site); s != nil {
			switch {
			case s.Reclone != nil && s.Reclone.Failed != "":
				return &exitError{code: exitRefused, err: fmt.Errorf("reclone of %s/%s failed: %s", group, site, s.Reclone.Failed)}
			case s.Reclone == nil && s.Diverged == "" && g.ActiveSite != "" && s.ReplicatingFrom == g.ActiveSite &&
				s.Replication != nil && s.Replication.IORunning && s.Replication.SQLRunning:
				fmt.Fprintf(c.stdout, "%s replicates from %s (%.0fs)\n", site, g.ActiveSite, time.Since(start).Seconds())
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return timedOut()
		case <-time.After(time.Second):
		}
	}
}

func siteIn(g status.Group, name string) *status.Site {
	for i := range g.Sites {
		if g.Sites[i].Name == name {
			return &g.Sites[i]
		}
	}
	return nil
}
