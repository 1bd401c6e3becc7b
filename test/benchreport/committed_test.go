package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/benchdoc"
)

// committedDir holds the benchmark results the repository ships.
var committedDir = filepath.Join("..", "..", "docs", "benchmarks")

// issue32Figures are the figures issue 32's acceptance asks of one
// `make bench`, each on both engines with its target checked.
var issue32Figures = []string{
	"rto_kill9_sidecar", "rpo_kill9_sidecar", "switchover_unavailability",
	"rto_hung", "overlap_hung", "rpo_hung", "rto_isolation", "overlap_isolation", "rpo_isolation",
	"rto_hung_sidecar", "overlap_hung_sidecar", "rpo_hung_sidecar",
	"rto_isolation_sidecar", "overlap_isolation_sidecar", "rpo_isolation_sidecar",
	"false_failovers", "false_failovers_sidecar",
}

// The committed results.json meets every target it records, holds issue
// 32's figures for both engines from one full (not quick) run of 20 runs
// per figure, its failover times with the daemon's phase times beside
// them, and the committed README is what results.json renders to.
func TestCommittedResults(t *testing.T) {
	r, err := benchdoc.LoadResults(filepath.Join(committedDir, benchdoc.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Figures {
		if f.Target.Checked() && !f.Pass {
			t.Errorf("%s [%s] misses its target %q: p50 %v p90 %v max %v", f.Name, f.EngineName(), f.Target.Text, f.P50, f.P90, f.Max)
		}
	}
	var first, last time.Time
	commits := map[string]bool{}
	for _, name := range issue32Figures {
		for _, engine := range []string{"mariadb", "mysql"} {
			f, ok := r.Figure(name, engine)
			switch {
			case !ok:
				t.Errorf("%s [%s] is not in results.json", name, engine)
				continue
			case !f.Target.Checked():
				t.Errorf("%s [%s] has no checked target", name, engine)
			case f.Quick || f.Runs < 20:
				t.Errorf("%s [%s]: %d runs (quick %t), want a full run of 20", name, engine, f.Runs, f.Quick)
			case strings.HasPrefix(name, "rto_") || strings.HasPrefix(name, "switchover_"):
				// The daemon's phase times stand beside the client's view.
				if len(f.Phases) == 0 {
					t.Errorf("%s [%s] has no daemon phase times", name, engine)
				}
			}
			commits[f.Commit] = true
			if first.IsZero() || f.Measured.Before(first) {
				first = f.Measured
			}
			if f.Measured.After(last) {
				last = f.Measured
			}
		}
	}
	// One `make bench`: one commit, within its 4 h timeout.
	if len(commits) != 1 || last.Sub(first) > 4*time.Hour {
		t.Errorf("issue 32's figures come from commits %v measured %s to %s, want one run", commits, first, last)
	}
	readme, err := os.ReadFile(filepath.Join(committedDir, benchdoc.ReadmeFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := benchdoc.RenderMarkdown(r, benchdoc.Reports(committedDir)...); string(readme) != want {
		t.Errorf("docs/benchmarks/README.md is not what results.json renders to: run go run ./test/benchreport")
	}
}
