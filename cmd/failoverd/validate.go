package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/failoverd/failoverd/configs"
)

func newValidateCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "validate [FILE]",
		Short: "Check a configuration file and report every problem at once",
		Long: `validate loads the configuration FILE (or the one -c names), applies the
defaults and the FAILOVERD_DAEMON_* environment overrides, and makes every check failoverd
run makes before it starts (the same code): the file's rules, then the files
it names, read as the daemon reads them (the API token at least 16 bytes, the
view signing key at least 32, no empty password file, TLS files and
kubeconfigs that load). It opens no connection and reads no persisted state.
A good file prints one summary line per group, then its warnings (a secret
every user of the host can read, the API over plain HTTP on a non-loopback
address, ...), and exits 0; a bad one prints every problem on its own line as
FILE:LINE:COL: YAML-PATH: what is wrong and the fix (the format editors and
grep understand), and exits 1. Keys are case-sensitive.`,
		Example: "  failoverd validate /etc/failoverd/failoverd.yaml\n  failoverd validate -c /etc/failoverd/failoverd.yaml",
		Args:    namedArgs("[FILE]"),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return []cobra.Completion{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
		},
		// FILE is -c spelled as an argument: the checks read c.configPath().
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			if cmd.Flags().Changed("config") && c.configPath() != args[0] {
				return &exitError{code: exitUsage, err: fmt.Errorf("FILE %q and -c %q differ: name the file once", args[0], c.configPath())}
			}
			c.v.Set("config", args[0])
			return nil
		},
		RunE: func(*cobra.Command, []string) error {
			cfg, warnings, err := prestart(c.configPath())
			var problems *configs.Problems
			if errors.As(err, &problems) {
				for _, p := range problems.List {
					fmt.Fprintln(c.stderr, p)
				}
				return &exitError{code: 1, err: fmt.Errorf("%s: %d configuration problem(s) listed above: %w",
					c.configPath(), len(problems.List), configs.ErrInvalid)}
			}
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			for _, g := range cfg.Groups {
				fmt.Fprintln(c.stdout, g.Summary())
			}
			for _, w := range warnings {
				fmt.Fprintln(c.stdout, "warning:", w)
			}
			fmt.Fprintf(c.stdout, "%s: valid\n", c.configPath())
			return nil
		},
	}
}
