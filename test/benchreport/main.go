// Command benchreport reads docs/benchmarks/results.json, regenerates the
// README.md summary and failover.svg from it, prints every figure against
// its target and, with -check, exits 1 when a figure measured since -since
// missed its target (or none was measured): make bench-quick's verdict.
// Every engine's figures count alike (a figure without an engine is
// MariaDB's); the same targets hold on each.
//
//	go run ./test/benchreport [-dir docs/benchmarks] [-since UNIX] [-check]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/failoverd/failoverd/test/benchdoc"
)

// errMissed is returned when a checked figure missed its target.
var errMissed = errors.New("a figure missed its target")

func main() {
	dir := flag.String("dir", filepath.Join("docs", "benchmarks"), "directory holding results.json")
	since := flag.Int64("since", 0, "only figures measured at or after this Unix time count (0: all)")
	check := flag.Bool("check", false, "exit 1 when a counted figure missed its target or none was measured")
	flag.Parse()
	if err := run(os.Stdout, *dir, time.Unix(*since, 0), *check); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, dir string, since time.Time, check bool) error {
	r, err := benchdoc.LoadResults(filepath.Join(dir, benchdoc.ResultsFile))
	if err != nil {
		return err
	}
	if len(r.Figures) > 0 {
		// The committed README and chart always follow results.json.
		if err := benchdoc.WriteAll(dir, r); err != nil {
			return fmt.Errorf("regenerate: %w", err)
		}
	}
	counted, missed := 0, 0
	for _, f := range r.Figures {
		if f.Measured.Before(since) {
			continue
		}
		counted++
		verdict := "informational"
		if f.Target.Checked() {
			verdict = "ok"
			if !f.Pass {
				verdict, missed = "MISSED", missed+1
			}
		}
		fmt.Fprintf(w, "%-28s %-8s p50 %-14s p90 %-14s max %-14s runs %-3d target %-40s %s\n", f.Name, f.EngineName(),
			benchdoc.FormatValue(f.P50, f.Unit), benchdoc.FormatValue(f.P90, f.Unit), benchdoc.FormatValue(f.Max, f.Unit), f.Runs, f.Target.Text, verdict)
	}
	switch {
	case !check:
		return nil
	case counted == 0:
		return fmt.Errorf("no figure measured since %s in %s", since.UTC().Format(time.RFC3339), dir)
	case missed > 0:
		return fmt.Errorf("%d of %d figures: %w", missed, counted, errMissed)
	}
	return nil
}
