package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/failoverd/failoverd/status"
)

// completionTimeout bounds the API request behind one TAB: a shell must
// not hang on a daemon that does not answer.
const completionTimeout = 2 * time.Second

// completeArgs completes the positional arguments names, as the command's
// usage line spells them: GROUP from the daemon's groups, SITE from the
// sites of the GROUP before it (with their state), a|b from those words.
// It asks the daemon the flags (or -c) name; without an answer it offers
// nothing.
func (c *cli) completeArgs(names ...string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= len(names) {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		switch name := strings.Trim(names[len(args)], "[]"); {
		case name == "GROUP":
			return c.completeGroups(cmd, args, toComplete)
		case name == "SITE" && len(args) > 0:
			return c.completeSites(cmd, args[0], toComplete)
		case strings.Contains(name, "|"):
			return prefixed(strings.Split(name, "|"), toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeGroups offers the daemon's groups.
func (c *cli) completeGroups(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	s, ok := c.completionSnapshot(cmd, func(ctx context.Context, cl apiReader) (status.Snapshot, error) { return cl.Status(ctx) })
	if !ok {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	var out []cobra.Completion
	for _, g := range s.Groups {
		if strings.HasPrefix(g.Name, toComplete) {
			out = append(out, cobra.CompletionWithDesc(g.Name, "primary "+orDash(g.ActiveSite)+", "+g.Class))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeSites offers group's sites, each described by its state (and
// "primary" for the active one).
func (c *cli) completeSites(cmd *cobra.Command, group, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	s, ok := c.completionSnapshot(cmd, func(ctx context.Context, cl apiReader) (status.Snapshot, error) {
		g, err := cl.Group(ctx, group)
		return status.Snapshot{Groups: []status.Group{g}}, err
	})
	if !ok {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	var out []cobra.Completion
	for _, site := range s.Groups[0].Sites {
		if !strings.HasPrefix(site.Name, toComplete) {
			continue
		}
		desc := site.State
		if site.Active {
			desc = "primary, " + desc
		}
		out = append(out, cobra.CompletionWithDesc(site.Name, desc))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// apiReader is what completion asks the daemon.
type apiReader interface {
	Status(ctx context.Context) (status.Snapshot, error)
	Group(ctx context.Context, name string) (status.Group, error)
}

// completionSnapshot runs get against the daemon, quietly: a completion
// prints nothing but candidates.
func (c *cli) completionSnapshot(cmd *cobra.Command, get func(context.Context, apiReader) (status.Snapshot, error)) (status.Snapshot, bool) {
	c.completing = true
	cl, err := c.client(cmd, false)
	if err != nil {
		cobra.CompDebugln("failoverd: "+err.Error(), false)
		return status.Snapshot{}, false
	}
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, completionTimeout)
	defer cancel()
	s, err := get(ctx, cl)
	if err != nil {
		cobra.CompDebugln("failoverd: "+err.Error(), false)
		return status.Snapshot{}, false
	}
	return s, true
}

func prefixed(words []string, toComplete string) []cobra.Completion {
	var out []cobra.Completion
	for _, w := range words {
		if strings.HasPrefix(w, toComplete) {
			out = append(out, w)
		}
	}
	return out
}
