package benchdoc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// ResultsFile, ReadmeFile and ChartFile are the generated files under
// docs/benchmarks: the machine-readable results, the summary table
// rendered from them, and the failover time chart.
const (
	ResultsFile = "results.json"
	ReadmeFile  = "README.md"
	ChartFile   = "failover.svg"
)

// ChartFigure is the figure whose samples failover.svg plots, one series
// per engine.
const ChartFigure = "rto_kill9"

// DefaultEngine is the engine of a figure that names none: results files
// written before figures carried an engine measured MariaDB only, and so
// do the scale figures of poller/bench_test.go, which stay engine-less.
const DefaultEngine = "mariadb"

// engineOrder ranks the known engines in results.json and the README
// (testenv.AllEngines' order); others follow, by name.
var engineOrder = []string{"mariadb", "mysql"}

// Target is what a figure must meet: Text for people, and numeric upper
// bounds (in the figure's unit) on its p50, p90 and maximum; a nil bound
// is not checked. A target with no bound is informational.
type Target struct {
	Text   string   `json:"text,omitempty"`
	P50Max *float64 `json:"p50_max,omitempty"`
	P90Max *float64 `json:"p90_max,omitempty"`
	MaxMax *float64 `json:"max_max,omitempty"`
}

// Bound returns a pointer to v, for Target's fields.
func Bound(v float64) *float64 { return &v }

// Checked reports whether t bounds anything.
func (t Target) Checked() bool { return t.P50Max != nil || t.P90Max != nil || t.MaxMax != nil }

// Phase is a distribution measured beside a figure's headline value: the
// daemon's own event times, or the client's view of a daemon-side figure.
type Phase struct {
	Name string  `json:"name"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	Max  float64 `json:"max"`
}

// Figure is one measured number with its distribution over Runs runs,
// its target and whether it met it.
type Figure struct {
	Name string `json:"name"`
	// Engine is the database server measured ("mariadb", "mysql"); empty
	// means DefaultEngine (see EngineName).
	Engine  string    `json:"engine,omitempty"`
	Unit    string    `json:"unit"`
	Runs    int       `json:"runs"`
	P50     float64   `json:"p50"`
	P90     float64   `json:"p90"`
	Max     float64   `json:"max"`
	Samples []float64 `json:"samples,omitempty"`
	Phases  []Phase   `json:"phases,omitempty"`
	Target  Target    `json:"target"`
	Pass    bool      `json:"pass"`
	// Notes says what is measured, between which two points.
	Notes string `json:"notes,omitempty"`
	// Measured, Commit and Quick describe the run that produced the figure
	// (figures of one results file may come from different runs).
	Measured time.Time `json:"measured"`
	Commit   string    `json:"commit,omitempty"`
	Quick    bool      `json:"quick,omitempty"`
}

// EngineName is f's engine, DefaultEngine when it names none.
func (f Figure) EngineName() string {
	if f.Engine == "" {
		return DefaultEngine
	}
	return f.Engine
}

// same reports whether f and o are the same figure: one name, one engine.
func (f Figure) same(o Figure) bool { return f.Name == o.Name && f.EngineName() == o.EngineName() }

// OnEngine tags figs with engine (in place) and returns them.
func OnEngine(engine string, figs ...Figure) []Figure {
	for i := range figs {
		figs[i].Engine = engine
	}
	return figs
}

// Results is docs/benchmarks/results.json: the machine and commit of the
// latest update, and every figure, one per name and engine, each replaced
// by its latest run.
type Results struct {
	Machine string    `json:"machine"`
	Cores   int       `json:"cores"`
	Date    time.Time `json:"date"`
	Commit  string    `json:"commit"`
	Load    string    `json:"load_average,omitempty"`
	Figures []Figure  `json:"figures"`
}

// NewFigure summarises samples (nearest-rank percentiles) and checks them
// against t. An empty samples list fails any checked target.
func NewFigure(name, unit string, samples []float64, t Target, notes string) Figure {
	rounded := make([]float64, len(samples))
	for i, v := range samples {
		rounded[i] = roundFor(unit, v)
	}
	samples = rounded
	f := Figure{Name: name, Unit: unit, Runs: len(samples), Samples: samples, Target: t, Notes: notes,
		Measured: time.Now().UTC().Truncate(time.Second), Quick: Quick()}
	f.P50, f.P90, f.Max = PercentileOf(samples, 0.5), PercentileOf(samples, 0.9), PercentileOf(samples, 1)
	f.Pass = f.meets()
	return f
}

// DurationFigure is NewFigure for durations, in milliseconds.
func DurationFigure(name string, ds []time.Duration, t Target, notes string) Figure {
	return NewFigure(name, "ms", Millis64(ds), t, notes)
}

// CountFigure is NewFigure for a count per run.
func CountFigure(name string, counts []int, t Target, notes string) Figure {
	s := make([]float64, len(counts))
	for i, c := range counts {
		s[i] = float64(c)
	}
	return NewFigure(name, "count", s, t, notes)
}

// WithPhase adds a phase distribution (samples in the figure's unit).
func (f Figure) WithPhase(name string, samples []float64) Figure {
	r := func(v float64) float64 { return roundFor(f.Unit, v) }
	f.Phases = append(f.Phases, Phase{Name: name, P50: r(PercentileOf(samples, 0.5)), P90: r(PercentileOf(samples, 0.9)), Max: r(PercentileOf(samples, 1))})
	return f
}

// meets checks f's distribution against its target's bounds.
func (f Figure) meets() bool {
	if !f.Target.Checked() {
		return true
	}
	if f.Runs == 0 {
		return false // nothing measured meets nothing
	}
	for _, c := range []struct {
		v     float64
		bound *float64
	}{{f.P50, f.Target.P50Max}, {f.P90, f.Target.P90Max}, {f.Max, f.Target.MaxMax}} {
		if c.bound != nil && c.v > *c.bound {
			return false
		}
	}
	return true
}

// roundFor rounds v to 0.1 ms (below any clock's noise here), or to three
// decimals in other units (cores).
func roundFor(unit string, v float64) float64 {
	if unit == "ms" {
		return math.Round(v*10) / 10
	}
	return math.Round(v*1000) / 1000
}

// Millis64 converts ds to milliseconds with a fractional part.
func Millis64(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

// PercentileOf is the nearest-rank percentile q (0..1] of s (0 if empty).
func PercentileOf(s []float64, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(math.Ceil(q*float64(len(c)))) - 1
	return c[min(max(i, 0), len(c)-1)]
}

// Quick reports whether this is a reduced run (make bench-quick).
func Quick() bool { return os.Getenv("FAILOVERD_BENCH_QUICK") == "1" }

// Merge replaces r's figures of the same name and engine by figs (in
// place, keeping their order) and appends the new ones. A figure without
// an engine is DefaultEngine's: a "mariadb" figure replaces it.
func (r *Results) Merge(figs ...Figure) {
	for _, f := range figs {
		if i := slices.IndexFunc(r.Figures, f.same); i >= 0 {
			r.Figures[i] = f
		} else {
			r.Figures = append(r.Figures, f)
		}
	}
}

// figureOrder is the order of the known figures in results.json and the
// README, whichever harness ran last; others follow in their own order.
var figureOrder = []string{"rto_kill9", "rpo_kill9", "rto_kill9_sidecar", "rpo_kill9_sidecar", "rpo_kill9_semisync_off", "rto_kill9_haproxy", "switchover_unavailability",
	"rto_hung", "overlap_hung", "rpo_hung", "rto_isolation", "overlap_isolation", "rpo_isolation",
	"rto_hung_sidecar", "overlap_hung_sidecar", "rpo_hung_sidecar", "rto_isolation_sidecar", "overlap_isolation_sidecar", "rpo_isolation_sidecar",
	"rto_backlog", "false_failovers", "false_failovers_sidecar", "gr_follow", "gr_rpo_kill9"}

// sortFigures orders r's figures: the known ones first, then the scale_
// ones, then the rest, each group stable; the engines of one figure
// together, MariaDB's first.
func (r *Results) sortFigures() {
	rank := func(name string) int {
		if i := slices.Index(figureOrder, name); i >= 0 {
			return i
		}
		if strings.HasPrefix(name, "scale_") {
			return len(figureOrder)
		}
		return len(figureOrder) + 1
	}
	first := map[string]int{} // each unknown name's first position
	for i, f := range r.Figures {
		if _, ok := first[f.Name]; !ok {
			first[f.Name] = i
		}
	}
	slices.SortStableFunc(r.Figures, func(a, b Figure) int {
		if d := rank(a.Name) - rank(b.Name); d != 0 {
			return d
		}
		if d := first[a.Name] - first[b.Name]; d != 0 {
			return d
		}
		return engineRank(a.EngineName()) - engineRank(b.EngineName())
	})
}

// engineRank is e's place in engineOrder (unknown engines last).
func engineRank(e string) int {
	if i := slices.Index(engineOrder, e); i >= 0 {
		return i
	}
	return len(engineOrder)
}

// Figure returns the figure named name measured on engine ("" is
// DefaultEngine).
func (r Results) Figure(name, engine string) (Figure, bool) {
	i := slices.IndexFunc(r.Figures, Figure{Name: name, Engine: engine}.same)
	if i < 0 {
		return Figure{}, false
	}
	return r.Figures[i], true
}

// Named returns every engine's figure named name, in r's order.
func (r Results) Named(name string) []Figure {
	var out []Figure
	for _, f := range r.Figures {
		if f.Name == name {
			out = append(out, f)
		}
	}
	return out
}

// Engines lists the engines r's figures measured, in the README's order.
func (r Results) Engines() []string {
	var out []string
	for _, f := range r.Figures {
		if !slices.Contains(out, f.EngineName()) {
			out = append(out, f.EngineName())
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		if d := engineRank(a) - engineRank(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return out
}

// LoadResults reads a results file; a missing file is empty results.
func LoadResults(path string) (Results, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Results{}, nil
	}
	if err != nil {
		return Results{}, fmt.Errorf("read results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return Results{}, fmt.Errorf("decode results %s: %w", path, err)
	}
	return r, nil
}

// WriteAll writes the results file, the README rendered from it and the
// chart into dir.
func WriteAll(dir string, r Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	r.Figures = slices.Clone(r.Figures)
	r.sortFigures()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	files := map[string]string{ResultsFile: string(b) + "\n", ReadmeFile: RenderMarkdown(r, Reports(dir)...)}
	if series := chartSeries(r); len(series) > 0 {
		files[ChartFile] = RenderChart(series...)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// Reports lists the per-harness reports in dir (its *.md files but the
// README), which the README links.
func Reports(dir string) []string {
	var reports []string
	if md, err := filepath.Glob(filepath.Join(dir, "*.md")); err == nil {
		for _, p := range md {
			if name := filepath.Base(p); name != ReadmeFile {
				reports = append(reports, name)
			}
		}
	}
	return reports
}

// RecordEngine is Record of figs measured on engine.
func RecordEngine(tb testing.TB, root, engine string, figs ...Figure) {
	tb.Helper()
	Record(tb, root, OnEngine(engine, figs...)...)
}

// Record merges figs into docs/benchmarks/results.json (root is the path
// from the benchmark's package directory to the repository root) and
// regenerates README.md and failover.svg, when FAILOVERD_BENCH_WRITE=1;
// it always logs each figure against its target.
func Record(tb testing.TB, root string, figs ...Figure) {
	tb.Helper()
	for _, f := range figs {
		verdict := "informational"
		if f.Target.Checked() {
			verdict = map[bool]string{true: "PASS", false: "FAIL"}[f.Pass]
		}
		tb.Logf("figure %s [%s]: runs %d p50 %.0f p90 %.0f max %.0f %s; target %s: %s", f.Name, f.EngineName(), f.Runs, f.P50, f.P90, f.Max, f.Unit, f.Target.Text, verdict)
		for _, p := range f.Phases {
			tb.Logf("figure %s [%s]: phase %s: p50 %.0f p90 %.0f max %.0f %s", f.Name, f.EngineName(), p.Name, p.P50, p.P90, p.Max, f.Unit)
		}
	}
	if !Enabled() {
		return
	}
	dir := filepath.Join(root, "docs", "benchmarks")
	r, err := LoadResults(filepath.Join(dir, ResultsFile))
	if err != nil {
		tb.Fatalf("record figures: %v", err)
	}
	commit := Commit(root)
	for i := range figs {
		figs[i].Commit = commit
	}
	r.Merge(figs...)
	r.Machine, r.Cores, r.Date, r.Commit, r.Load = Machine(), runtime.NumCPU(), time.Now().UTC().Truncate(time.Second), commit, LoadAverage()
	if err := WriteAll(dir, r); err != nil {
		tb.Fatalf("record figures: %v", err)
	}
	tb.Logf("recorded %d figures in %s", len(figs), filepath.Join(dir, ResultsFile))
}

// Commit is the short commit of the tree at root, "-dirty" when the
// working tree differs from it (the binary measured was built from it).
func Commit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if exec.Command("git", "-C", root, "diff", "--quiet", "HEAD").Run() != nil {
		c += "-dirty"
	}
	return c
}

// Machine is the CPU model, kernel and Go version.
func Machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := "unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%s, Linux %s, %s", model, kernel, runtime.Version())
}
