package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/failoverd/failoverd/api"
)

func newReloadCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reload",
		Short: "Make the daemon re-read its configuration file (as SIGHUP does)",
		Long: `reload asks the daemon at --server to re-read the configuration file it was
started with. The file is checked as validate and the start check it; a file
with any problem, or one that changes a setting that needs a restart (the
daemon section: listen address, API token and TLS, view signing key, state
store, leader election; and the clusters), is refused whole: every problem is
printed on its own line and the daemon runs on unchanged.

An accepted file's groups are applied without a restart: removed groups stop,
added ones start from their persisted state, changed ones are rebuilt from
theirs. A group with a failover or switchover in flight is listed as deferred:
the daemon rebuilds it once that ends (failoverd status shows it meanwhile).
Each daemon reads its own file: with leader election, reload every replica.

Exit codes: 0 reloaded (deferred groups listed), 1 refused, 2 bad arguments or
no API token, 3 no answer from the daemon.`,
		Example: "  failoverd reload                 # on the daemon's host: its configuration gives the token\n" +
			"  failoverd reload --server https://db-ops-2:8443 --token-file /etc/failoverd/secrets/api.token",
		Args: namedArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.client(cmd, true)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			res, err := cl.Reload(ctx, actor())
			if err != nil {
				var he *api.HTTPError
				if errors.As(err, &he) {
					for _, p := range he.Problems {
						fmt.Fprintln(c.stderr, p)
					}
				}
				return apiError(err)
			}
			fmt.Fprintf(c.stdout, "%s %s (sha256 %s): added %s; changed %s; removed %s\n", res.File, res.Result,
				res.Digest[:min(12, len(res.Digest))], list(res.Added), list(res.Changed), list(res.Removed))
			for _, p := range res.Deferred {
				fmt.Fprintf(c.stdout, "  deferred %s: %s\n", p.Group, p.Reason)
			}
			return nil
		},
	}
	addServerFlags(cmd)
	return cmd
}

func list(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ", ")
}
