package metrics_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/failoverd/failoverd/metrics"
)

// daemonSeriesStarter is a copy of daemon.SeriesStarter (metrics must not
// import daemon); TestEventsMatchesDaemon keeps the copy honest.
type daemonSeriesStarter interface {
	StartGroup(group string, sites, followers []string, hooks map[string][]string)
}

var _ daemonSeriesStarter = (*metrics.Metrics)(nil)

// documentedCounters are the counter families docs/metrics.md lists whose
// name starts with prefix and not with any of skip.
func documentedCounters(t *testing.T, prefix string, skip ...string) []string {
	t.Helper()
	b, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(failoverd_[a-z0-9_]+)` \\| counter \\|")
	var out []string
next:
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		if !strings.HasPrefix(m[1], prefix) {
			continue
		}
		for _, s := range skip {
			if strings.HasPrefix(m[1], s) {
				continue next
			}
		}
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no counter starting with %s", docsFile, prefix)
	}
	return out
}

// StartGroup creates every counter series of a group at 0: sites × the
// fixed words, followers × results, hooks × their events × results; the
// first scrape after it shows every daemon counter family that
// docs/metrics.md lists, each series at 0, and nothing from the scrape
// itself (the snapshot's groups make no counter series).
func TestStartGroupCreatesEveryCounterAtZero(t *testing.T) {
	m := metrics.New(metrics.Options{Snapshot: fixture})
	m.StartGroup("orders", []string{"east", "west", "dr"}, []string{"kube-service", "dns-readers"},
		map[string][]string{"proxysql": {"before-promote", "after-promote"}})
	mfs, err := m.Gatherer().Gather() // the first scrape
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	for _, name := range documentedCounters(t, "failoverd_", "failoverd_sidecar_") {
		mf := byName[name]
		if mf == nil {
			t.Errorf("%s is not on the first scrape", name)
			continue
		}
		for _, s := range mf.Metric {
			if v := s.GetCounter().GetValue(); v != 0 {
				t.Errorf("%s%v = %v on the first scrape, want 0", name, labelMap(s), v)
			}
		}
	}
	for name, want := range map[string]int{
		"failoverd_probe_failures_total":          3,
		"failoverd_failovers_total":               6, // 2 kinds × 3 results
		"failoverd_fences_total":                  6, // 3 sites × daemon, sidecar
		"failoverd_fence_proofs_total":            7, // every sitepair proof
		"failoverd_routing_operations_total":      4, // 2 followers × ok, error
		"failoverd_routing_repairs_total":         2, // 2 followers
		"failoverd_hook_runs_total":               4, // 1 hook × 2 events × ok, failed
		"failoverd_split_brain_resolutions_total": 1, // the group
		"failoverd_cache_promotions_total":        3, // 3 sites
		"failoverd_config_reloads_total":          2, // applied, refused (from New)
	} {
		if got := count(t, m.Gatherer(), name); got != want {
			t.Errorf("%s: %d series, want %d", name, got, want)
		}
	}
	// The snapshot's other group ("billing") was never started: scraping
	// it creates no counter of its own.
	if find(t, m.Gatherer(), "failoverd_split_brain_resolutions_total", map[string]string{"group": "billing"}) != nil {
		t.Error("a scrape created a counter series for a group StartGroup never saw")
	}
}
