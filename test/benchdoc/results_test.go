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
	if b, _ := r.Figure("b"); b.P50 != 20 {
		t.Errorf("b not replaced: %+v", b)
	}
	if a, _ := r.Figure("a"); a.P50 != 1 {
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
		"| `rto_kill9` | 900 ms | 1300 ms | 1300 ms | 3 | p50 ≤ 800 ms, p90 ≤ 1.2 s | **NO** |",
		"| `rpo_kill9` | 0 | 0 | 0 | 3 | 0 | yes |",
		"| `rto_kill9` | fault → epoch.revoked | 500 ms | 600 ms | 600 ms |",
		"](failover.svg)",
		"- `rpo_kill9` (",
		"- [failover.md](failover.md)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("README lacks %q:\n%s", want, md)
		}
	}
	svg := RenderChart(kill)
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("chart is not well-formed XML: %v\n%s", err, svg)
		}
	}
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

func TestNiceStep(t *testing.T) {
	for in, want := range map[float64]float64{0.3: 1, 7: 10, 90: 100, 101: 200, 240: 500} {
		if got := niceStep(in); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", in, got, want)
		}
	}
}
