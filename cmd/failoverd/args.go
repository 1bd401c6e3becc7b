package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// namedArgs accepts the positional arguments names, in order; names in
// [brackets] are optional and trail the others. A wrong count is refused
// naming what the command takes (cobra's own errors say "unknown command"
// for an extra argument, which sent operators looking for a subcommand).
func namedArgs(names ...string) cobra.PositionalArgs {
	required := 0
	for _, n := range names {
		if !strings.HasPrefix(n, "[") {
			required++
		}
	}
	return func(cmd *cobra.Command, args []string) error {
		if len(args) >= required && len(args) <= len(names) {
			return nil
		}
		return &exitError{code: exitUsage, err: argCountError(cmd, names, required, args)}
	}
}

// argCountError says what cmd takes and what it got, e.g.
// `failoverd switchover takes 2 arguments, GROUP SITE; got 1: "orders" (usage: failoverd switchover GROUP SITE [flags])`.
func argCountError(cmd *cobra.Command, names []string, required int, args []string) error {
	var want string
	switch {
	case len(names) == 0:
		want = "takes no arguments"
	case required == len(names):
		want = fmt.Sprintf("takes %d argument%s, %s", required, plural(required), strings.Join(names, " "))
	case required == 0:
		want = fmt.Sprintf("takes at most %d argument%s, %s", len(names), plural(len(names)), strings.Join(names, " "))
	default:
		want = fmt.Sprintf("takes %d to %d arguments, %s", required, len(names), strings.Join(names, " "))
	}
	got := "got none"
	if len(args) > 0 {
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = strconv.Quote(a)
		}
		got = fmt.Sprintf("got %d: %s", len(args), strings.Join(quoted, " "))
	}
	return fmt.Errorf("%s %s; %s (usage: %s)", cmd.CommandPath(), want, got, cmd.UseLine())
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// requiredAnnotation marks a flag the command refuses to run without. The
// command itself checks it (with a message saying what to give); the
// annotation lets the docs test (docs_test.go) find commands quoted
// without it.
const requiredAnnotation = "failoverd_required"

func markRequired(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		if err := cmd.Flags().SetAnnotation(n, requiredAnnotation, []string{"true"}); err != nil {
			panic(fmt.Sprintf("markRequired %s --%s: %v", cmd.Name(), n, err)) // a programming error
		}
	}
}

// durationExamples are what a duration flag's refusal suggests when its
// default (0: required, no default) makes a poor example.
var durationExamples = map[string]string{"for": "30m"}

// checkDurations refuses a zero or negative value given to any duration
// flag of cmd: --interval 0 would spin against the daemon, --timeout -5s
// would give up before asking.
func checkDurations(cmd *cobra.Command) error {
	var bad error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if bad != nil || !f.Changed || f.Value.Type() != "duration" {
			return
		}
		d, err := time.ParseDuration(f.Value.String())
		if err == nil && d > 0 {
			return
		}
		example := durationExamples[f.Name]
		if example == "" {
			example = f.DefValue
		}
		bad = &exitError{code: exitUsage, err: fmt.Errorf("--%s %s: must be a positive duration such as --%s %s", f.Name, f.Value, f.Name, example)}
	})
	return bad
}
