package main

import (
	"context"
	"fmt"
	"github.com/failoverd/failoverd/api"

	"github.com/spf13/cobra"
)

func newForceMembersCmd(c *cli) *cobra.Command {
	var confirm string
	cmd := &cobra.Command{
		Use:         "force-members GROUP SURVIVOR [--confirm TOKEN]",
		Annotations: map[string]string{annotationToken: tokenAdmin},
		Short:       "Recover a Group Replication group that lost its majority, from SURVIVOR",
		Long: `force-members recovers a replication: group group that lost its majority (status
says group-no-quorum): it forces the group's membership to the survivors of
SURVIVOR's view with group_replication_force_members, run on SURVIVOR. The
daemon reads every member when the request arrives and refuses unless it can
prove SURVIVOR safe: the group has no quorum, SURVIVOR is ONLINE in a view of
its own, and its gtid_executed contains every other survivor's (refused with
the reason otherwise: incomparable-survivors, survivor-lacks-transactions,
group-has-quorum, loss-of-quorum-unconfirmed, ...). failoverd never does it
on its own.

Without --confirm (or with the token of an older plan) nothing changes: the
refusal says what forcing would do (the survivors kept, the members left out,
the survivor's GTID set) and the confirmation token to repeat. Stop every
member left out before: one still running may form the other half of a split
group. Once forced, the group's majority is taken of the survivors, and
failoverd follows the primary of the forced group.

When the daemon has an admin token (daemon.apiAdminTokenFile), --token-file
must name it.

Exit codes: 0 forced, 1 refused or failed (the answer says why, or the plan
and its token), 2 bad arguments or no API token, 3 no answer from the daemon.`,
		Args:              namedArgs("GROUP", "SURVIVOR"),
		ValidArgsFunction: c.completeArgs("GROUP", "SITE"),
		RunE: c.command(func(ctx context.Context, cl *api.Client, args []string) (string, error) {
			group, site := args[0], args[1]
			return fmt.Sprintf("membership of %s forced from %s", group, site), cl.ForceMembers(ctx, group, site, confirm, actor())
		}),
	}
	cmd.Flags().StringVar(&confirm, "confirm", "", "the plan's confirmation token (a request without it answers the plan and its token)")
	addServerFlags(cmd)
	return cmd
}
