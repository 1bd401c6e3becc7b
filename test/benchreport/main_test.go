package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/benchdoc"
)

func writeResults(t *testing.T, figs ...benchdoc.Figure) string {
	t.Helper()
	dir := t.TempDir()
	if err := benchdoc.WriteAll(dir, benchdoc.Results{Figures: figs}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A missed target fails the check only when its figure was measured in
// the run being checked; an old miss is reported, not counted.
func TestCheckCountsOnlyFiguresSince(t *testing.T) {
	old := benchdoc.CountFigure("old", []int{3}, benchdoc.Target{MaxMax: benchdoc.Bound(0)}, "")
	old.Measured = time.Unix(1000, 0)
	ok := benchdoc.CountFigure("new", []int{0}, benchdoc.Target{MaxMax: benchdoc.Bound(0)}, "")
	dir := writeResults(t, old, ok)
	if err := run(io.Discard, dir, time.Unix(2000, 0), true); err != nil {
		t.Fatalf("check of the new figures: %v", err)
	}
	if err := run(io.Discard, dir, time.Unix(0, 0), true); !errors.Is(err, errMissed) {
		t.Fatalf("check of every figure: %v, want errMissed", err)
	}
	if err := run(io.Discard, dir, time.Unix(0, 0), false); err != nil {
		t.Fatalf("without -check: %v", err)
	}
}

// Every engine's figures are checked: a MySQL figure that misses the
// target MariaDB's meets fails the check, and the report names the engine.
func TestCheckCountsEveryEngine(t *testing.T) {
	target := benchdoc.Target{Text: "0", MaxMax: benchdoc.Bound(0)}
	figs := benchdoc.OnEngine("mysql", benchdoc.CountFigure("rpo_kill9", []int{0, 1}, target, ""))
	figs = append(figs, benchdoc.OnEngine("mariadb", benchdoc.CountFigure("rpo_kill9", []int{0, 0}, target, ""))...)
	dir := writeResults(t, figs...)
	var out strings.Builder
	err := run(&out, dir, time.Unix(0, 0), true)
	if !errors.Is(err, errMissed) || !strings.Contains(err.Error(), "1 of 2 figures") {
		t.Fatalf("check: %v, want 1 of 2 figures missed", err)
	}
	for _, want := range []string{"rpo_kill9                    mariadb ", "rpo_kill9                    mysql   "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(out.String(), "MISSED") {
		t.Errorf("report:\n%s", out.String())
	}
}

// A run that measured nothing (a harness that died before recording) fails.
func TestCheckWithNothingMeasuredFails(t *testing.T) {
	f := benchdoc.CountFigure("old", []int{0}, benchdoc.Target{MaxMax: benchdoc.Bound(0)}, "")
	dir := writeResults(t, f)
	if err := run(io.Discard, dir, time.Now().Add(time.Hour), true); err == nil || errors.Is(err, errMissed) {
		t.Fatalf("err %v, want nothing measured", err)
	}
}

// The README is regenerated from results.json.
func TestRunRegeneratesTheReadme(t *testing.T) {
	dir := writeResults(t, benchdoc.CountFigure("lost", []int{0}, benchdoc.Target{MaxMax: benchdoc.Bound(0)}, ""))
	if err := os.WriteFile(filepath.Join(dir, benchdoc.ReadmeFile), []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(io.Discard, dir, time.Time{}, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, benchdoc.ReadmeFile))
	if err != nil || string(b) == "stale" {
		t.Fatalf("README not regenerated: %q %v", b, err)
	}
}
