package benchdoc

import (
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFigureChecksEveryBound(t *testing.T) {
	samples := []float64{100, 200, 300, 400, 500, 600, 700, 800, 900, 1000}
	cases := []struct {
		name string
		t    Target
		pass bool
	}{
		{"no bound is informational", Target{Text: "—"}, true},
		{"p50 within", Target{P50Max: Bound(500)}, true},
		{"p50 over", Target{P50Max: Bound(499)}, false},
		{"p90 over", Target{P50Max: Bound(800), P90Max: Bound(850)}, false},
		{"max over", Target{MaxMax: Bound(0)}, false},
		{"all within", Target{P50Max: Bound(500), P90Max: Bound(900), MaxMax: Bound(1000)}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := NewFigure("x", "ms", samples, c.t, "")
			if f.P50 != 500 || f.P90 != 900 || f.Max != 1000 || f.Runs != 10 {
				t.Fatalf("p50 %v p90 %v max %v runs %d", f.P50, f.P90, f.Max, f.Runs)
			}
			if f.Pass != c.pass {
				t.Errorf("pass %v, want %v", f.Pass, c.pass)
			}
		})
	}
}

// A checked target with nothing measured is missed, never met by default.
func TestEmptyFigureFailsACheckedTarget(t *testing.T) {
	if f := CountFigure("lost", nil, Target{MaxMax: Bound(0)}, ""); f.Pass {
		t.Error("an empty figure met a checked target")
	}
	if f := CountFigure("lost", []int{0, 0}, Target{MaxMax: Bound(0)}, ""); !f.Pass {
		t.Error("zero lost writes missed the target 0")
	}
}

func TestDurationFigureIsInMilliseconds(t *testing.T) {
	f := DurationFigure("rto", []time.Duration{1500 * time.Microsecond, 2 * time.Second}, Target{}, "")
	if f.Unit != "ms" || f.P50 != 1.5 || f.Max != 2000 {
		t.Fatalf("%+v", f)
	}
}

// Each run updates its own figures and keeps the others, in order.
func TestMergeKeepsOtherFigures(t *testing.T) {
	r := Results{Figures: []Figure{{Name: "a", P50: 1}, {Name: "b", P50: 2}}}
	r.Merge(Figure{Name: "b", P50: 20}, Figure{Name: "c", P50: 3})
	var got []string
	for _, f := range r.Figures {
		got = append(got, f.Name)
	}
	if strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("figures %v", got)
	}
	if b, _ := r.Figure("b", ""); b.P50 != 20 {
		t.Errorf("b not replaced: %+v", b)
	}
	if a, _ := r.Figure("a", ""); a.P50 != 1 {
		t.Errorf("a changed: %+v", a)
	}
}

func TestWriteAllRoundTripsAndRenders(t *testing.T) {
	dir := t.TempDir()
	if r, err := LoadResults(filepath.Join(dir, ResultsFile)); err != nil || len(r.Figures) != 0 {
		t.Fatalf("missing file: %+v %v", r, err)
	}
	kill := DurationFigure(ChartFigure, []time.Duration{700 * time.Millisecond, 900 * time.Millisecond, 1300 * time.Millisecond},
		Target{Text: "p50 ≤ 800 ms, p90 ≤ 1.2 s", P50Max: Bound(800), P90Max: Bound(1200)}, "last ack → first ack").
		WithPhase("fault → epoch.revoked", []float64{400, 500, 600})
	lost := CountFigure("rpo_kill9", []int{0, 0, 0}, Target{Text: "0", MaxMax: Bound(0)}, "lost")
	in := Results{Machine: "m", Cores: 2, Commit: "abc", Figures: []Figure{kill, lost}}
	if err := os.WriteFile(filepath.Join(dir, "failover.md"), []byte("# a detailed report\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteAll(dir, in); err != nil {
		t.Fatal(err)
	}
	out, err := LoadResults(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Figures) != 2 || out.Figures[0].Pass || !out.Figures[1].Pass || *out.Figures[0].Target.P90Max != 1200 {
		t.Fatalf("round trip: %+v", out.Figures)
	}
	readme, err := os.ReadFile(filepath.Join(dir, ReadmeFile))
	if err != nil {
		t.Fatal(err)
	}
	md := string(readme)
	for _, want := range []string{
		"| `rto_kill9` | mariadb | 900 ms | 1300 ms | 1300 ms | 3 | p50 ≤ 800 ms, p90 ≤ 1.2 s | **NO** |",
		"| `rpo_kill9` | mariadb | 0 | 0 | 0 | 3 | 0 | yes |",
		"| `rto_kill9` | mariadb | fault → epoch.revoked | 500 ms | 600 ms | 600 ms |",
		"](failover.svg)",
		"- `rpo_kill9` (",
		"- [failover.md](failover.md)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("README lacks %q:\n%s", want, md)
		}
	}
	svg := RenderChart(kill)
	wellFormed(t, svg)
	if !strings.Contains(svg, "p90 target") || strings.Count(svg, "<rect") < 3 {
		t.Errorf("chart lacks the bars or the target lines:\n%s", svg)
	}
}

// Figures keep one order whichever harness recorded last.
func TestWriteAllOrdersTheFigures(t *testing.T) {
	dir := t.TempDir()
	r := Results{Figures: []Figure{{Name: "other"}, {Name: "scale_cpu_100"}, {Name: "rto_hung"}, {Name: "rto_kill9"}}}
	if err := WriteAll(dir, r); err != nil {
		t.Fatal(err)
	}
	out, err := LoadResults(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range out.Figures {
		got = append(got, f.Name)
	}
	if strings.Join(got, ",") != "rto_kill9,rto_hung,scale_cpu_100,other" {
		t.Fatalf("order %v", got)
	}
}

// wellFormed fails t unless svg is well-formed XML.
func wellFormed(t *testing.T, svg string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err == io.EOF {
			return
		} else if err != nil {
			t.Fatalf("chart is not well-formed XML: %v\n%s", err, svg)
		}
	}
}

// A figure is one per name and engine: a MySQL run adds its own figure
// beside MariaDB's, a MariaDB run replaces an engine-less one (results
// files from before engines were MariaDB's), and "" is MariaDB.
func TestMergeReplacesByNameAndEngine(t *testing.T) {
	r := Results{Figures: []Figure{{Name: "rto_kill9", P50: 1}, {Name: "scale_cpu_100", P50: 2}}}
	r.Merge(Figure{Name: "rto_kill9", Engine: "mysql", P50: 30})
	r.Merge(Figure{Name: "rto_kill9", Engine: "mariadb", P50: 10})
	r.Merge(Figure{Name: "scale_cpu_100", P50: 20})
	if len(r.Figures) != 3 {
		t.Fatalf("figures %+v", r.Figures)
	}
	for _, c := range []struct {
		name, engine string
		p50          float64
	}{{"rto_kill9", "mariadb", 10}, {"rto_kill9", "", 10}, {"rto_kill9", "mysql", 30}, {"scale_cpu_100", "mariadb", 20}} {
		if f, ok := r.Figure(c.name, c.engine); !ok || f.P50 != c.p50 {
			t.Errorf("%s on %q: %+v %v, want p50 %v", c.name, c.engine, f, ok, c.p50)
		}
	}
	if got := r.Engines(); strings.Join(got, ",") != "mariadb,mysql" {
		t.Errorf("engines %v", got)
	}
}

// A results.json written before figures carried an engine still loads,
// its figures are MariaDB's, and rewriting it keeps them engine-less.
func TestLoadsResultsWithoutEngines(t *testing.T) {
	dir := t.TempDir()
	old := `{"machine": "m", "cores": 2, "date": "2026-11-01T10:00:00Z", "commit": "abc",
  "figures": [
    {"name": "rto_kill9", "unit": "ms", "runs": 2, "p50": 640, "p90": 650, "max": 650, "samples": [640, 650],
     "target": {"text": "p50 ≤ 800 ms", "p50_max": 800}, "pass": true, "measured": "2026-11-01T10:00:00Z"},
    {"name": "scale_cpu_100", "unit": "cores", "runs": 1, "p50": 0.04, "p90": 0.04, "max": 0.04,
     "target": {}, "pass": true, "measured": "2026-11-01T10:00:00Z"}
  ]}`
	if err := os.WriteFile(filepath.Join(dir, ResultsFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := LoadResults(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Figures) != 2 || r.Figures[0].Engine != "" || r.Figures[0].EngineName() != "mariadb" {
		t.Fatalf("loaded %+v", r.Figures)
	}
	if f, ok := r.Figure("rto_kill9", "mariadb"); !ok || f.P50 != 640 {
		t.Fatalf("rto_kill9 on mariadb: %+v %v", f, ok)
	}
	if err := WriteAll(dir, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"engine"`) {
		t.Errorf("rewritten engine-less figures gained an engine:\n%s", b)
	}
	md, err := os.ReadFile(filepath.Join(dir, ReadmeFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| `rto_kill9` | mariadb | 640 ms |", "| `scale_cpu_100` | mariadb |", "- Engines: mariadb\n"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("README lacks %q:\n%s", want, md)
		}
	}
}

// Both engines' figures render side by side: one row each in the table
// (MariaDB's first, whichever was recorded first), one phase row each,
// one series each in the chart, and one notes line per figure.
func TestWriteAllRendersEveryEngine(t *testing.T) {
	dir := t.TempDir()
	target := Target{Text: "p50 ≤ 800 ms", P50Max: Bound(800)}
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	var r Results
	r.Merge(OnEngine("mysql",
		DurationFigure(ChartFigure, ms(550, 600, 700), target, "last ack → first ack").WithPhase("fault → epoch.revoked", []float64{400}),
		CountFigure("rpo_kill9", []int{0, 0, 1}, Target{Text: "0", MaxMax: Bound(0)}, "lost"))...)
	r.Merge(OnEngine("mariadb",
		DurationFigure(ChartFigure, ms(640, 650, 900), target, "last ack → first ack").WithPhase("fault → epoch.revoked", []float64{450}),
		CountFigure("rpo_kill9", []int{0, 0, 0}, Target{Text: "0", MaxMax: Bound(0)}, "lost"))...)
	if err := WriteAll(dir, r); err != nil {
		t.Fatal(err)
	}
	out, err := LoadResults(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, f := range out.Figures {
		order = append(order, f.Name+"/"+f.Engine)
	}
	if strings.Join(order, ",") != "rto_kill9/mariadb,rto_kill9/mysql,rpo_kill9/mariadb,rpo_kill9/mysql" {
		t.Fatalf("order %v", order)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReadmeFile))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"| figure | engine | p50 |",
		"| `rto_kill9` | mariadb | 650 ms | 900 ms | 900 ms | 3 | p50 ≤ 800 ms | yes |\n| `rto_kill9` | mysql | 600 ms | 700 ms | 700 ms | 3 | p50 ≤ 800 ms | yes |",
		"| `rpo_kill9` | mysql | 0 | 1 | 1 | 3 | 0 | **NO** |",
		"| `rto_kill9` | mysql | fault → epoch.revoked | 400 ms |",
		"(mariadb 3 runs, mysql 3 runs)](failover.svg)",
		"- Engines: mariadb, mysql\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("README lacks %q:\n%s", want, md)
		}
	}
	if n := strings.Count(md, "- `rto_kill9` ("); n != 1 {
		t.Errorf("%d notes lines for rto_kill9, want 1:\n%s", n, md)
	}
	svg, err := os.ReadFile(filepath.Join(dir, ChartFile))
	if err != nil {
		t.Fatal(err)
	}
	wellFormed(t, string(svg))
	for _, want := range []string{"mariadb: 3 runs, p50 650 ms", "mysql: 3 runs, p50 600 ms", "p50 target"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("chart lacks %q:\n%s", want, svg)
		}
	}
	if n := strings.Count(string(svg), "<polyline"); n != 2 {
		t.Errorf("%d CDF lines, want one per engine", n)
	}
}

func TestNiceStep(t *testing.T) {
	for in, want := range map[float64]float64{0.3: 1, 7: 10, 90: 100, 101: 200, 240: 500} {
		if got := niceStep(in); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", in, got, want)
		}
	}
}
