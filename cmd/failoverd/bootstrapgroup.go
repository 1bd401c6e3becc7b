package main

import (
	"context"
	"fmt"
	"github.com/failoverd/failoverd/api"

	"github.com/spf13/cobra"
)

func newBootstrapGroupCmd(c *cli) *cobra.Command {
	var confirm string
	cmd := &cobra.Command{
		Use:         "bootstrap-group GROUP MEMBER [--confirm TOKEN]",
		Annotations: map[string]string{annotationToken: tokenAdmin},
		Short:       "Re-form a Group Replication group after a total outage, on MEMBER",
		Long: `bootstrap-group re-forms a replication: group group after a total outage (every
member's Group Replication stopped, or every mysqld restarted: status says
group-no-quorum with every member not-member): it bootstraps the group on MEMBER
(SET GLOBAL group_replication_bootstrap_group = ON, START GROUP_REPLICATION,
then OFF again, always) and then starts Group Replication on every other
member, one after the other, which join it. The daemon reads every member when
the request arrives and refuses unless it can prove the bootstrap safe: every
configured member answers, none is in a group's view (member-in-group) or in
ERROR (member-in-error), all name the same group, every member's gtid_executed
is known, and MEMBER's contains every other's (refused with the reason
otherwise: member-unreachable, member-set-unknown, member-lacks-transactions,
incomparable-members, group-names-differ, ...). failoverd never does it on its
own.

Without --confirm (or with the token of an older plan) nothing changes: the
refusal says what bootstrapping would do (the member, its GTID set, the
joiners) and the confirmation token to repeat. Once the members joined,
failoverd follows the new group's primary (MEMBER) as soon as a majority of
the configured members is ONLINE in its view.

When the daemon has an admin token (daemon.apiAdminTokenFile), --token-file
must name it.

Exit codes: 0 bootstrapped and every member started, 1 refused or failed (the
answer says why, or the plan and its token; a member that did not join is
named), 2 bad arguments or no API token, 3 no answer from the daemon.`,
		Args:              namedArgs("GROUP", "MEMBER"),
		ValidArgsFunction: c.completeArgs("GROUP", "SITE"),
		RunE: c.command(func(ctx context.Context, cl *api.Client, args []string) (string, error) {
			group, site := args[0], args[1]
			return fmt.Sprintf("group %s bootstrapped on %s; every other member started", group, site), cl.BootstrapGroup(ctx, group, site, confirm, actor())
		}),
	}
	cmd.Flags().StringVar(&confirm, "confirm", "", "the plan's confirmation token (a request without it answers the plan and its token)")
	addServerFlags(cmd)
	return cmd
}
