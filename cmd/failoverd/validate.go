package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newValidateCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Check a configuration file and report every problem at once",
		Long: `validate loads the configuration named by --config, applies the defaults and
checks it. A good file prints one summary line per group and exits 0; a bad
one prints every problem, each with its YAML path and the fix, and exits 1.`,
		Example: "  failoverd validate -c /etc/failoverd/failoverd.yaml",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, err := c.loadConfig()
			if err != nil {
				return err
			}
			for _, g := range cfg.Groups {
				fmt.Fprintln(c.stdout, g.Summary())
			}
			for _, w := range cfg.Warnings() {
				fmt.Fprintln(c.stdout, "warning:", w)
			}
			fmt.Fprintf(c.stdout, "%s: valid\n", c.configPath())
			return nil
		},
	}
}
