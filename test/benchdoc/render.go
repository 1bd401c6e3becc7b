package benchdoc

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// FormatValue prints v in unit: whole milliseconds and counts, three
// decimals for cores, one for megabytes.
func FormatValue(v float64, unit string) string {
	switch unit {
	case "ms":
		return fmt.Sprintf("%.0f ms", v)
	case "count":
		return fmt.Sprintf("%.0f", v)
	case "cores":
		return fmt.Sprintf("%.3f cores", v)
	case "MB":
		return fmt.Sprintf("%.1f MB", v)
	}
	return fmt.Sprintf("%g %s", v, unit)
}

// RenderMarkdown is docs/benchmarks/README.md: the summary table of every
// figure in r against its target, one row per engine, the daemon's phases
// beside the client-observed figures, the chart, what each figure measures
// and links to the detailed reports (file names in docs/benchmarks).
func RenderMarkdown(r Results, reports ...string) string {
	var b strings.Builder
	b.WriteString(`# Benchmarks: measured against the targets

Generated from [results.json](results.json) by test/benchdoc; do not edit by
hand. ` + "`make bench`" + ` runs every harness (BENCH_RUNS runs each, default 20) and
rewrites results.json, this file and [failover.svg](failover.svg);
` + "`make bench-quick`" + ` runs a reduced set (BENCH_QUICK_RUNS runs each, default 5,
marked "quick"; no scale figures) in a few minutes and fails
when a figure it measured misses its target. Each harness updates only its own
figures; the date, commit and "quick" mark of every figure are below.
The real-server harnesses run on every engine FAILOVERD_TEST_ENGINE selects
(both by default: MariaDB 10.11 and MySQL 9.7), each figure once per engine
with the same target; the scale figures measure the poller against MariaDB.

`)
	fmt.Fprintf(&b, "- Last update: %s, commit %s\n- Machine: %d CPUs, %s; load average at the last update: %s\n- Engines: %s\n\n",
		r.Date.Format("2006-01-02 15:04 MST"), r.Commit, r.Cores, r.Machine, r.Load, strings.Join(r.Engines(), ", "))
	b.WriteString("| figure | engine | p50 | p90 | max | runs | target | pass |\n|---|---|--:|--:|--:|--:|---|:-:|\n")
	for _, f := range r.Figures {
		pass := "—"
		if f.Target.Checked() {
			pass = map[bool]string{true: "yes", false: "**NO**"}[f.Pass]
		}
		runs := fmt.Sprint(f.Runs)
		if f.Quick {
			runs += " (quick)"
		}
		target := f.Target.Text
		if target == "" {
			target = "—"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s | %s |\n", f.Name, f.EngineName(), FormatValue(f.P50, f.Unit), FormatValue(f.P90, f.Unit),
			FormatValue(f.Max, f.Unit), runs, target, pass)
	}
	var phases strings.Builder
	for _, f := range r.Figures {
		for _, p := range f.Phases {
			fmt.Fprintf(&phases, "| `%s` | %s | %s | %s | %s | %s |\n", f.Name, f.EngineName(), p.Name, FormatValue(p.P50, f.Unit), FormatValue(p.P90, f.Unit), FormatValue(p.Max, f.Unit))
		}
	}
	if phases.Len() > 0 {
		b.WriteString("\n## Phases beside the figures\n\nThe same runs seen from the other side: the daemon's own log timestamps\n" +
			"(`epoch.revoked`, `failover.promoted`), the harness's poll of `read_only`, or\nthe client's gap, each from the fault.\n\n" +
			"| figure | engine | phase | p50 | p90 | max |\n|---|---|---|--:|--:|--:|\n")
		b.WriteString(phases.String())
	}
	if series := chartSeries(r); len(series) > 0 {
		var what []string
		for _, f := range series {
			what = append(what, fmt.Sprintf("%s %d runs", f.EngineName(), f.Runs))
		}
		fmt.Fprintf(&b, "\n## Failover time distribution\n\n![%s: histogram and CDF per engine (%s)](%s)\n", ChartFigure, strings.Join(what, ", "), ChartFile)
	}
	b.WriteString("\n## What each figure measures\n\n")
	var done []string
	for _, f := range r.Figures {
		if slices.Contains(done, f.Name) {
			continue
		}
		done = append(done, f.Name)
		// One line per figure: when and where each engine measured it, then
		// what it measures (an engine whose notes differ says so after).
		all := r.Named(f.Name)
		var runs []string
		for _, e := range all {
			q := ""
			if e.Quick {
				q = ", quick run"
			}
			runs = append(runs, fmt.Sprintf("%s: %s, commit %s%s", e.EngineName(), e.Measured.Format("2006-01-02 15:04 MST"), e.Commit, q))
		}
		notes := strings.Join(strings.Fields(f.Notes), " ")
		fmt.Fprintf(&b, "- `%s` (%s): %s", f.Name, strings.Join(runs, "; "), notes)
		for _, e := range all[1:] {
			if n := strings.Join(strings.Fields(e.Notes), " "); n != notes {
				fmt.Fprintf(&b, " On %s: %s", e.EngineName(), n)
			}
		}
		b.WriteString("\n")
	}
	if len(reports) > 0 {
		b.WriteString("\n## Detailed reports\n\nWritten by the benchmarks that also describe their setup at length (their own\ndates and runs):\n\n")
		for _, name := range reports {
			fmt.Fprintf(&b, "- [%s](%s)\n", name, name)
		}
	}
	return b.String()
}

// chartSeries is what failover.svg plots: ChartFigure of every engine
// that has samples.
func chartSeries(r Results) []Figure {
	var out []Figure
	for _, f := range r.Named(ChartFigure) {
		if len(f.Samples) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// seriesColors are the bars' fill and stroke and the CDF line's colour of
// each series, in order (then again).
var seriesColors = []struct{ fill, stroke, line string }{
	{"#7aa6d8", "#3c6ea5", "#1f4e8c"},
	{"#f0b27a", "#ca6f1e", "#a04000"},
	{"#a9dfbf", "#229954", "#145a32"},
}

// RenderChart draws the samples of series (one figure measured on one
// or more engines, with the same unit and target) as an SVG histogram,
// the engines' bars side by side in each bin, with each one's empirical
// CDF over it and the target bounds (the first series') as dashed lines:
// plain SVG, no scripts.
func RenderChart(series ...Figure) string {
	const (
		w, h                     = 720, 400
		left, right, top, bottom = 60, 60, 84, 50
		pw, ph                   = w - left - right, h - top - bottom
	)
	f := series[0]
	var hi float64
	sorted := make([][]float64, len(series))
	for i, sf := range series {
		sorted[i] = slices.Clone(sf.Samples)
		slices.Sort(sorted[i])
		if n := len(sorted[i]); n > 0 {
			hi = max(hi, sorted[i][n-1])
		}
	}
	for _, bnd := range []*float64{f.Target.P50Max, f.Target.P90Max} {
		if bnd != nil {
			hi = max(hi, *bnd)
		}
	}
	step := niceStep(hi / 12)
	xmax := math.Ceil(hi*1.05/step) * step
	nbins := max(int(math.Round(xmax/step)), 1)
	bins := make([][]int, len(series))
	top1 := 1
	for i, s := range sorted {
		bins[i] = make([]int, nbins)
		for _, v := range s {
			bins[i][min(int(v/step), nbins-1)]++
		}
		top1 = max(top1, slices.Max(bins[i]))
	}
	x := func(v float64) float64 { return left + v/xmax*pw }
	y := func(frac float64) float64 { return top + ph - frac*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(
		fmt.Sprintf("%s per engine, target %s", f.Name, f.Target.Text)))
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">%s</text>`+"\n", left, html.EscapeString(
		fmt.Sprintf("bars: runs per %s bin (left axis); lines: share of runs at or below (right axis)", FormatValue(step, f.Unit))))
	for i, sf := range series {
		c := seriesColors[i%len(seriesColors)]
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s" stroke="%s"/>`+"\n", left, 47+14*i, c.fill, c.stroke)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", left+16, 56+14*i, c.line, html.EscapeString(
			fmt.Sprintf("%s: %d runs, p50 %s, p90 %s, max %s (commit %s)", sf.EngineName(), sf.Runs, FormatValue(sf.P50, sf.Unit),
				FormatValue(sf.P90, sf.Unit), FormatValue(sf.Max, sf.Unit), sf.Commit)))
	}
	bw := (x(step) - left - 1) / float64(len(series))
	for si := range series {
		c := seriesColors[si%len(seriesColors)]
		for i, n := range bins[si] {
			if n == 0 {
				continue
			}
			bh := float64(n) / float64(top1) * ph
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" stroke="%s"/>`+"\n",
				x(float64(i)*step)+float64(si)*bw, top+ph-bh, bw, bh, c.fill, c.stroke)
		}
	}
	// Each series' empirical CDF as a step line.
	for si, s := range sorted {
		if len(s) == 0 {
			continue
		}
		pts := []string{fmt.Sprintf("%.1f,%.1f", x(0), y(0))}
		for i, v := range s {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(v), y(float64(i)/float64(len(s)))), fmt.Sprintf("%.1f,%.1f", x(v), y(float64(i+1)/float64(len(s)))))
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(xmax), y(1)))
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", seriesColors[si%len(seriesColors)].line, strings.Join(pts, " "))
	}
	for i, t := range []struct {
		name  string
		bound *float64
	}{{"p50 target", f.Target.P50Max}, {"p90 target", f.Target.P90Max}} {
		if t.bound == nil {
			continue
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#27ae60" stroke-dasharray="6,4" stroke-width="1.5"/>`+"\n", x(*t.bound), top, x(*t.bound), top+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#1e8449" text-anchor="end">%s %s</text>`+"\n", x(*t.bound)-4, top+14+16*i, t.name, html.EscapeString(FormatValue(*t.bound, f.Unit)))
	}
	// Axes, ticks and labels.
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top+ph, left+pw, top+ph)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, top+ph)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left+pw, top, left+pw, top+ph)
	every := max(1, nbins/8)
	for i := 0; i <= nbins; i += every {
		v := float64(i) * step
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", x(v), top+ph+16, v)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", left+pw/2, h-10, html.EscapeString(f.Unit))
	for c := 0; c <= top1; c += int(niceStep(float64(top1) / 5)) {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%d</text>`+"\n", left-6, y(float64(c)/float64(top1))+4, c)
	}
	for i := 0; i <= 4; i++ {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f">%d%%</text>`+"\n", left+pw+6, y(float64(i)/4)+4, i*25)
	}
	fmt.Fprintf(&b, `<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">runs</text>`+"\n", top+ph/2, top+ph/2)
	b.WriteString("</svg>\n")
	return b.String()
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten (at least 1).
func niceStep(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
