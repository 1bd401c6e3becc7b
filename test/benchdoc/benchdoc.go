// Package benchdoc helps benchmarks publish their results: latency
// distributions, a description of the machine and the date, and the result
// file under docs/benchmarks that the README links. Benchmarks write only
// when FAILOVERD_BENCH_WRITE=1, so an ordinary run never dirties the tree.
package benchdoc

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Enabled reports whether results files should be (re)written.
func Enabled() bool { return os.Getenv("FAILOVERD_BENCH_WRITE") == "1" }

// Stats is a latency distribution.
type Stats struct{ Min, P50, P90, Max, Mean time.Duration }

// Distribution summarises ds (nearest-rank percentiles).
func Distribution(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Stats{Min: s[0], P50: Percentile(s, 0.5), P90: Percentile(s, 0.9), Max: s[len(s)-1], Mean: sum / time.Duration(len(s))}
}

// Percentile returns the nearest-rank percentile q (0..1) of ds.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Runs runs measure n times, as the sub-benchmarks run0 … run<n-1>, and
// returns what each run measured; a failed run fails the benchmark.
func Runs(b *testing.B, n int, measure func(testing.TB) time.Duration) []time.Duration {
	b.Helper()
	var out []time.Duration
	for i := range n {
		if !b.Run(fmt.Sprintf("run%d", i), func(b *testing.B) { out = append(out, measure(b)) }) {
			b.Fatalf("run %d failed", i)
		}
	}
	return out
}

// Millis lists ds in whole milliseconds (truncated, like the Stats a
// results file shows), comma-separated: a results file's raw line.
func Millis(ds []time.Duration) string {
	raw := make([]string, len(ds))
	for i, d := range ds {
		raw[i] = fmt.Sprint(d.Milliseconds())
	}
	return strings.Join(raw, ", ")
}

// LoadAverage is /proc/loadavg's first three fields.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// MachineInfo describes the machine and the date, as Markdown list items.
func MachineInfo() string {
	model := "unknown"
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
	return fmt.Sprintf("- Date: %s\n- Machine: %d CPUs (nproc), %s, Linux %s, %s, GOMAXPROCS %d",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), model, kernel, runtime.Version(), runtime.GOMAXPROCS(0))
}

// Write writes docs/benchmarks/name; root is the path from the benchmark's
// package directory to the repository root.
func Write(b testing.TB, root, name, content string) {
	dir := filepath.Join(root, "docs", "benchmarks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatalf("create %s: %v", dir, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		b.Fatalf("write %s: %v", path, err)
	}
	b.Logf("wrote %s", path)
}
