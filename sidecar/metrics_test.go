package sidecar

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const docsFile = "../docs/metrics.md"

// docRows are docs/metrics.md's table rows of the sidecar's metrics
// (failoverd_sidecar_*): name → type and labels.
func docRows(t *testing.T) map[string][2]string {
	t.Helper()
	b, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(failoverd_sidecar_[a-z0-9_]+)` \\| (gauge|counter|histogram) \\| ([^|]*) \\|")
	out := map[string][2]string{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = [2]string{m[2], m[3]}
	}
	if len(out) == 0 {
		t.Fatalf("%s documents no failoverd_sidecar_ metric", docsFile)
	}
	return out
}

// firstScrape is GET /metrics on a sidecar right after New: no round, no
// view, no event yet.
func firstScrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	s, err := New(Config{Group: "g", Site: "east", Key: testKey, LeaseTimeout: time.Second, CheckInterval: 100 * time.Millisecond},
		Options{MySQL: newFakeMySQL(true)})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

// The acceptance case of issue 30's counters item, for sidecars: the first
// scrape after New shows every counter family docs/metrics.md lists for
// the sidecar with a series at 0 for each of its label values, so the
// rejected-views alert's increase() sees the first rejection.
func TestFirstScrapeHasEverySidecarCounterAtZero(t *testing.T) {
	mfs := firstScrape(t)
	values := map[string][]string{
		"failoverd_sidecar_fences_total":          fenceReasons,
		"failoverd_sidecar_rejected_views_total":  rejectWhys,
		"failoverd_sidecar_unbound_answers_total": unboundWhys,
		"failoverd_sidecar_mysqld_exits_total":    {""}, // no label: one series
		"failoverd_sidecar_watch_wakeups_total":   {""},
	}
	for name, row := range docRows(t) {
		if row[0] != "counter" {
			continue
		}
		mf := mfs[name]
		if mf == nil {
			t.Errorf("%s is not on the first scrape", name)
			continue
		}
		var got []string
		for _, m := range mf.Metric {
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Errorf("%s%v = %v on the first scrape, want 0", name, m.Label, v)
			}
			if len(m.Label) == 0 {
				got = append(got, "")
				continue
			}
			got = append(got, m.Label[0].GetValue())
		}
		want, ok := values[name]
		if !ok {
			t.Errorf("%s: the test does not know its label values", name)
		}
		slices.Sort(got)
		want = slices.Sorted(slices.Values(want))
		if !slices.Equal(got, want) {
			t.Errorf("%s: series for %v, want one for each of %v", name, got, want)
		}
	}
}

// docs/metrics.md documents every sidecar metric with its type and labels,
// and nothing the sidecar does not export.
func TestDocsListEverySidecarMetric(t *testing.T) {
	docs := docRows(t)
	for name, mf := range firstScrape(t) {
		if !strings.HasPrefix(name, "failoverd_sidecar_") {
			continue
		}
		row, ok := docs[name]
		if !ok {
			t.Errorf("%s does not document %s", docsFile, name)
			continue
		}
		delete(docs, name)
		if want := strings.ToLower(mf.GetType().String()); row[0] != want {
			t.Errorf("%s documents %s as a %s, it is a %s", docsFile, name, row[0], want)
		}
		var labels, documented []string
		for _, l := range mf.Metric[0].Label {
			labels = append(labels, l.GetName())
		}
		for _, l := range strings.Split(row[1], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "—" {
				documented = append(documented, l)
			}
		}
		slices.Sort(labels)
		slices.Sort(documented)
		if !slices.Equal(labels, documented) {
			t.Errorf("%s documents %s with labels %v, it has %v", docsFile, name, documented, labels)
		}
	}
	for name := range docs {
		t.Errorf("%s documents %s, which the sidecar does not export", docsFile, name)
	}
}
