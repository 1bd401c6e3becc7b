package metrics_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// gatherAndCompare checks that the families named in want (the text
// exposition format) are gathered exactly so, series order aside. It stands
// in for prometheus/testutil, whose diff dependency the main go.mod lacks.
func gatherAndCompare(t *testing.T, g prometheus.Gatherer, want string) {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	wantMFs, err := parser.TextToMetricFamilies(strings.NewReader(want))
	if err != nil {
		t.Fatalf("parse the expected text: %v", err)
	}
	got, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for name, w := range wantMFs {
		i := slices.IndexFunc(got, func(mf *dto.MetricFamily) bool { return mf.GetName() == name })
		if i < 0 {
			t.Errorf("%s is not gathered", name)
			continue
		}
		if gs, ws := text(t, got[i]), text(t, w); gs != ws {
			t.Errorf("%s: got\n%s\nwant\n%s", name, gs, ws)
		}
	}
}

// text is mf in the text format with its series sorted.
func text(t *testing.T, mf *dto.MetricFamily) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
		t.Fatalf("format %s: %v", mf.GetName(), err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// count is the number of series of the family name.
func count(t *testing.T, g prometheus.Gatherer, name string) int {
	t.Helper()
	mf := family(t, g, name)
	if mf == nil {
		return 0
	}
	return len(mf.Metric)
}

// lint runs promlint over everything g gathers.
func lint(t *testing.T, g prometheus.Gatherer) []promlint.Problem {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	return problems
}
