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
// figure in r against its target, the daemon's phases beside the
// client-observed figures, the chart, what each figure measures and links
// to the detailed reports (file names in docs/benchmarks).
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

`)
	fmt.Fprintf(&b, "- Last update: %s, commit %s\n- Machine: %d CPUs, %s; load average at the last update: %s\n\n",
		r.Date.Format("2006-01-02 15:04 MST"), r.Commit, r.Cores, r.Machine, r.Load)
	b.WriteString("| figure | p50 | p90 | max | runs | target | pass |\n|---|--:|--:|--:|--:|---|:-:|\n")
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
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s |\n", f.Name, FormatValue(f.P50, f.Unit), FormatValue(f.P90, f.Unit),
			FormatValue(f.Max, f.Unit), runs, target, pass)
	}
	var phases strings.Builder
	for _, f := range r.Figures {
		for _, p := range f.Phases {
			fmt.Fprintf(&phases, "| `%s` | %s | %s | %s | %s |\n", f.Name, p.Name, FormatValue(p.P50, f.Unit), FormatValue(p.P90, f.Unit), FormatValue(p.Max, f.Unit))
		}
	}
	if phases.Len() > 0 {
		b.WriteString("\n## Phases beside the figures\n\nThe same runs seen from the other side: the daemon's own log timestamps\n" +
			"(`epoch.revoked`, `failover.promoted`), the harness's poll of `read_only`, or\nthe client's gap, each from the fault.\n\n" +
			"| figure | phase | p50 | p90 | max |\n|---|---|--:|--:|--:|\n")
		b.WriteString(phases.String())
	}
	if f, ok := r.Figure(ChartFigure); ok && len(f.Samples) > 0 {
		fmt.Fprintf(&b, "\n## Failover time distribution\n\n![%s: histogram and CDF of %d runs](%s)\n", f.Name, f.Runs, ChartFile)
	}
	b.WriteString("\n## What each figure measures\n\n")
	for _, f := range r.Figures {
		q := ""
		if f.Quick {
			q = ", quick run"
		}
		fmt.Fprintf(&b, "- `%s` (%s, commit %s%s): %s\n", f.Name, f.Measured.Format("2006-01-02 15:04 MST"), f.Commit, q, strings.Join(strings.Fields(f.Notes), " "))
	}
	if len(reports) > 0 {
		b.WriteString("\n## Detailed reports\n\nWritten by the benchmarks that also describe their setup at length (their own\ndates and runs):\n\n")
		for _, name := range reports {
			fmt.Fprintf(&b, "- [%s](%s)\n", name, name)
		}
	}
	return b.String()
}

// RenderChart draws f's samples as an SVG histogram with the empirical CDF
// over it and the target bounds as dashed lines: plain SVG, no scripts.
func RenderChart(f Figure) string {
	const (
		w, h                     = 720, 400
		left, right, top, bottom = 60, 60, 50, 50
		pw, ph                   = w - left - right, h - top - bottom
	)
	s := slices.Clone(f.Samples)
	slices.Sort(s)
	hi := s[len(s)-1]
	for _, bnd := range []*float64{f.Target.P50Max, f.Target.P90Max} {
		if bnd != nil {
			hi = max(hi, *bnd)
		}
	}
	step := niceStep(hi / 12)
	xmax := math.Ceil(hi*1.05/step) * step
	bins := make([]int, int(math.Round(xmax/step)))
	for _, v := range s {
		bins[min(int(v/step), len(bins)-1)]++
	}
	top1 := max(slices.Max(bins), 1)
	x := func(v float64) float64 { return left + v/xmax*pw }
	y := func(frac float64) float64 { return top + ph - frac*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(
		fmt.Sprintf("%s: %d runs, p50 %s, p90 %s, max %s", f.Name, f.Runs, FormatValue(f.P50, f.Unit), FormatValue(f.P90, f.Unit), FormatValue(f.Max, f.Unit))))
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">%s</text>`+"\n", left, html.EscapeString(
		fmt.Sprintf("bars: runs per %s bin (left axis); line: share of runs at or below (right axis); commit %s", FormatValue(step, f.Unit), f.Commit)))
	for i, n := range bins {
		if n == 0 {
			continue
		}
		bh := float64(n) / float64(top1) * ph
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#7aa6d8" stroke="#3c6ea5"/>`+"\n",
			x(float64(i)*step), top+ph-bh, x(step)-left-1, bh)
	}
	// The empirical CDF as a step line.
	pts := []string{fmt.Sprintf("%.1f,%.1f", x(0), y(0))}
	for i, v := range s {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(v), y(float64(i)/float64(len(s)))), fmt.Sprintf("%.1f,%.1f", x(v), y(float64(i+1)/float64(len(s)))))
	}
	pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(xmax), y(1)))
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#c0392b" stroke-width="2" points="%s"/>`+"\n", strings.Join(pts, " "))
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
	every := max(1, len(bins)/8)
	for i := 0; i <= len(bins); i += every {
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
