package metrics_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"
)

// The files under deploy/ this package's tests hold to the metrics.
const (
	rulesFile     = "../deploy/prometheus/failoverd-rules.yml"
	rulesTestFile = "../deploy/prometheus/failoverd-rules.test.yml"
	manifestFile  = "../deploy/prometheus/failoverd-prometheusrule.yaml"
	dashboardFile = "../deploy/grafana/failoverd.json"
	docsFile      = "../docs/metrics.md"
	runbookURL    = "https://github.com/failoverd/failoverd/blob/main/docs/metrics.md#"
)

var update = flag.Bool("update", false, "regenerate "+manifestFile+" from "+rulesFile)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	readYAML(t, rulesFile, &rf)
	if len(rf.Groups) == 0 {
		t.Fatalf("%s has no rule groups", rulesFile)
	}
	return rf
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}

// manifestHeader precedes the rule file's groups, indented under spec.
const manifestHeader = `# Generated from failoverd-rules.yml by
# ` + "`go test ./metrics -run TestPrometheusRuleManifest -update`" + `: edit that
# file, not this one. The same alerts as a Prometheus Operator PrometheusRule;
# add the labels your Prometheus's ruleSelector matches (kube-prometheus-stack:
# release: <its release name>). The rules select no job name: one job per
# install, several installs alert apart.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: failoverd
  labels:
    app.kubernetes.io/name: failoverd
    app.kubernetes.io/component: alerting
spec:
`

// TestPrometheusRuleManifest keeps the PrometheusRule manifest's groups
// equal to the plain rule file's (-update regenerates the manifest).
func TestPrometheusRuleManifest(t *testing.T) {
	src, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		var b strings.Builder
		b.WriteString(manifestHeader)
		started := false
		for _, l := range strings.SplitAfter(string(src), "\n") {
			started = started || strings.HasPrefix(l, "groups:")
			if !started || l == "" {
				continue
			}
			if strings.TrimSpace(l) != "" {
				b.WriteString("  ")
			}
			b.WriteString(l)
		}
		if err := os.WriteFile(manifestFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var plain, manifest map[string]any
	readYAML(t, rulesFile, &plain)
	readYAML(t, manifestFile, &manifest)
	if manifest["apiVersion"] != "monitoring.coreos.com/v1" || manifest["kind"] != "PrometheusRule" {
		t.Errorf("%s is a %v %v, not a monitoring.coreos.com/v1 PrometheusRule", manifestFile, manifest["apiVersion"], manifest["kind"])
	}
	if !reflect.DeepEqual(manifest["spec"], plain) {
		t.Errorf("%s's spec differs from %s: run go test ./metrics -run TestPrometheusRuleManifest -update", manifestFile, rulesFile)
	}
}

// TestAlerts checks each alert's labels and annotations, that its runbook
// anchor exists in docs/metrics.md, and that the promtool unit tests see it
// both firing and quiet.
func TestAlerts(t *testing.T) {
	rf := readRules(t)
	anchors := docAnchors(t)
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name  string `yaml:"name"`
			Cases []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, rulesTestFile, &tests)
	if !slices.Contains(tests.RuleFiles, filepath.Base(rulesFile)) {
		t.Errorf("%s does not test %s", rulesTestFile, rulesFile)
	}
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tg := range tests.Tests {
		for _, c := range tg.Cases {
			if len(c.ExpAlerts) > 0 {
				firing[c.Alertname] = true
			} else {
				quiet[c.Alertname] = true
			}
		}
	}
	seen := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if seen[r.Alert] {
				t.Errorf("alert %s is defined twice", r.Alert)
			}
			seen[r.Alert] = true
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s has no %s", r.Alert, a)
				}
			}
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbookURL)
			if !ok || anchor != strings.ToLower(r.Alert) || !anchors[anchor] {
				t.Errorf("%s: runbook_url %q is not %s%s with a heading %q in %s", r.Alert, r.Annotations["runbook_url"], runbookURL, strings.ToLower(r.Alert), r.Alert, docsFile)
			}
			if !firing[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: %s tests it firing %v, quiet %v: it needs both", r.Alert, rulesTestFile, firing[r.Alert], quiet[r.Alert])
			}
		}
	}
	for name := range firing {
		if !seen[name] {
			t.Errorf("%s tests the unknown alert %s", rulesTestFile, name)
		}
	}
}

// TestAlertsWorkForSeveralInstalls: no alert selects a job by name, and
// every join (on) and aggregation (by) keeps job, so several failoverd
// installs in one Prometheus (a job each, with the same group names) alert
// apart; the promtool tests run two jobs.
func TestAlertsWorkForSeveralInstalls(t *testing.T) {
	jobMatcher := regexp.MustCompile(`\bjob\s*(=|!=|=~|!~)`)
	clause := regexp.MustCompile(`\b(on|by)\s*\(([^)]*)\)`)
	clauses := 0
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if jobMatcher.MatchString(r.Expr) {
				t.Errorf("%s selects a job by name: %s", r.Alert, r.Expr)
			}
			for _, m := range clause.FindAllStringSubmatch(r.Expr, -1) {
				clauses++
				var labels []string
				for _, l := range strings.Split(m[2], ",") {
					labels = append(labels, strings.TrimSpace(l))
				}
				if !slices.Contains(labels, "job") {
					t.Errorf("%s: %s (%s) drops job: installs sharing a group name would mix", r.Alert, m[1], m[2])
				}
			}
		}
	}
	if clauses < 10 {
		t.Fatalf("only %d on/by clauses found in %s", clauses, rulesFile)
	}
	b, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]bool{}
	for _, m := range regexp.MustCompile(`job="([^"]+)"`).FindAllStringSubmatch(string(b), -1) {
		jobs[m[1]] = true
	}
	if !jobs["failoverd-eu"] || !jobs["failoverd-us"] {
		t.Errorf("%s tests no two installs (jobs failoverd-eu and failoverd-us): %v", rulesTestFile, jobs)
	}
}

// TestDeployUsesRegisteredMetrics: every failoverd_ metric an alert, a
// dashboard panel, annotation or variable names is one metrics.New exports
// (over a populated snapshot, so every collector series exists).
func TestDeployUsesRegisteredMetrics(t *testing.T) {
	registered := registeredNames(t)
	// The sidecar's metrics are on its own registry: docs/metrics.md's
	// rows of them stand in (package sidecar's TestDocsListEverySidecarMetric
	// keeps those rows equal to what the sidecar exports).
	for _, name := range documentedSidecarMetrics(t) {
		registered[name] = true
	}
	metricName := regexp.MustCompile(`\bfailoverd_[a-z0-9_]+`)
	check := func(where, expr string) {
		for _, name := range metricName.FindAllString(expr, -1) {
			if !registered[name] {
				t.Errorf("%s uses %s, which metrics.New does not export", where, name)
			}
		}
	}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			check("alert "+r.Alert, r.Expr)
		}
	}
	exprs := dashboardQueries(t)
	if len(exprs) < 20 {
		t.Fatalf("only %d queries found in %s", len(exprs), dashboardFile)
	}
	for _, q := range exprs {
		check(q.where, q.expr)
	}
}

// TestPromQLParses runs promtool check rules over the alert rules and over
// a rule file holding every dashboard query (Grafana's variables replaced).
// promtool's parser stands in for prometheus/promql/parser, which the main
// go.mod cannot take without raising its go directive and ~25 modules.
func TestPromQLParses(t *testing.T) {
	promtool := promtoolPath(t)
	vars := strings.NewReplacer(`$__rate_interval`, `1m`, `$__interval`, `1m`, `$__range`, `1h`, `$group`, `.*`, `$job`, `failoverd`)
	type recording struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rec []recording
	for i, q := range dashboardQueries(t) {
		if q.variable {
			continue // label_values(...) is Grafana's, not PromQL
		}
		expr := vars.Replace(q.expr)
		if strings.Contains(expr, "$") {
			t.Errorf("%s: unknown variable in %q", q.where, q.expr)
		}
		rec = append(rec, recording{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: expr})
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rec}}})
	if err != nil {
		t.Fatal(err)
	}
	dash := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(dash, out, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{rulesFile, dash} {
		cmd := exec.Command(promtool, "check", "rules", f)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check rules %s: %v\n%s", f, err, b)
		}
	}
}

// TestDocsListEveryMetric: docs/metrics.md has one table row per failoverd_
// metric with its type and labels, and no row for a metric that is not
// exported (the sidecar's failoverd_sidecar_* rows are package sidecar's
// TestDocsListEverySidecarMetric).
func TestDocsListEveryMetric(t *testing.T) {
	b, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(failoverd_[a-z0-9_]+)` \\| (gauge|counter|histogram) \\| ([^|]*) \\|")
	type doc struct{ typ, labels string }
	docs := map[string]doc{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		if strings.HasPrefix(m[1], "failoverd_sidecar_") {
			continue // the sidecar's own registry: package sidecar checks those rows
		}
		docs[m[1]] = doc{m[2], m[3]}
	}
	for _, mf := range gatherPopulated(t) {
		name := mf.GetName()
		if !strings.HasPrefix(name, "failoverd_") {
			continue
		}
		d, ok := docs[name]
		if !ok {
			t.Errorf("%s does not document %s", docsFile, name)
			continue
		}
		delete(docs, name)
		if want := strings.ToLower(mf.GetType().String()); d.typ != want {
			t.Errorf("%s documents %s as a %s, it is a %s", docsFile, name, d.typ, want)
		}
		var labels []string
		for _, l := range mf.Metric[0].Label {
			labels = append(labels, l.GetName())
		}
		var documented []string
		for _, l := range strings.Split(d.labels, ",") {
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
		t.Errorf("%s documents %s, which is not exported", docsFile, name)
	}
}

type query struct {
	where, expr string
	variable    bool // a templating query (label_values), not PromQL
}

// dashboardQueries returns every query of the dashboard: panel targets,
// annotations and variables.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID         string `json:"uid"`
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("parse %s: %v", dashboardFile, err)
	}
	var out []query
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			out = append(out, query{where: "annotation " + a.Name, expr: a.Expr})
		}
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				out = append(out, query{where: fmt.Sprintf("panel %q %s", p.Title, tg.RefID), expr: tg.Expr})
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		out = append(out, query{where: "variable " + v.Name, expr: q.Query, variable: true})
	}
	return out
}

type panel struct {
	ID         int     `json:"id"`
	Title      string  `json:"title"`
	Type       string  `json:"type"`
	Panels     []panel `json:"panels"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// TestDashboardShape: panel ids are unique, every panel but a row queries
// the templated data source, and every query filters on $group or is about
// the daemons themselves.
func TestDashboardShape(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string  `json:"uid"`
		Title  string  `json:"title"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q title %q", d.UID, d.Title)
	}
	ids := map[int]bool{}
	daemonWide := regexp.MustCompile(`^(failoverd_(leader|ready|build_info)\b|sum\(up\{)`)
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the ${datasource} variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, `group=~"$group"`) && !daemonWide.MatchString(tg.Expr) {
				t.Errorf("panel %q %s ignores the group variable: %s", p.Title, tg.RefID, tg.Expr)
			}
		}
	}
}

// TestDashboardQueriesSelectTheJob: every series selector of every
// dashboard query (panels, annotations, the group variable) carries the
// job matcher job=~"$job", so several failoverd installs in one Prometheus
// (one job each) are charted apart; only the job variable itself spans
// every job.
func TestDashboardQueriesSelectTheJob(t *testing.T) {
	selector := regexp.MustCompile(`\b(failoverd_[a-z0-9_]+|up)\b(\{[^}]*\})?`)
	const job = `job=~"$job"`
	checked := 0
	for _, q := range dashboardQueries(t) {
		if q.where == "variable job" {
			continue
		}
		sels := selector.FindAllStringSubmatch(q.expr, -1)
		if len(sels) == 0 {
			t.Errorf("%s selects no series: %s", q.where, q.expr)
		}
		for _, m := range sels {
			checked++
			if !strings.Contains(m[2], job) {
				t.Errorf("%s: %s%s lacks %s: %s", q.where, m[1], m[2], job, q.expr)
			}
		}
	}
	if checked < 40 {
		t.Fatalf("only %d selectors found in %s", checked, dashboardFile)
	}
}

func gatherPopulated(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	mfs, err := populated(t).Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// registeredNames are the series names a populated registry exposes,
// histograms' _bucket, _sum and _count included.
func registeredNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, mf := range gatherPopulated(t) {
		names[mf.GetName()] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = true
			}
		}
	}
	return names
}

// documentedSidecarMetrics are the failoverd_sidecar_* rows of docs/metrics.md.
func documentedSidecarMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(failoverd_sidecar_[a-z0-9_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// docAnchors returns the GitHub anchors of docs/metrics.md's headings.
func docAnchors(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	anchors := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(l, "#"); ok {
			h = strings.TrimSpace(strings.TrimLeft(h, "#"))
			anchors[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
		}
	}
	return anchors
}

// promtoolPath is the promtool scripts/deps builds into
// $FAILOVERD_CACHE/bin (default ~/.cache/failoverd/bin, as testenv.BinDir).
// A missing binary fails the test: it is never a skip.
func promtoolPath(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("FAILOVERD_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("home directory: %v", err)
		}
		cache = filepath.Join(home, ".cache", "failoverd")
	}
	p := filepath.Join(cache, "bin", "promtool")
	if _, err := os.Stat(p); err != nil {
		if testing.Short() {
			t.Skipf("promtool not found (%v; -short: scripts/deps not run)", err)
		}
		t.Fatalf("promtool not found (%v): run scripts/deps", err)
	}
	return p
}

// scrapeExample is the plain Prometheus scrape configuration shipped for
// daemons and sidecars.
const scrapeExample = "../deploy/prometheus/scrape-config.example.yml"

// TestScrapeConfigExample: the shipped scrape configuration passes
// `promtool check config` (which also loads the rule file it names) and
// scrapes both the daemons and the sidecars at /metrics.
func TestScrapeConfigExample(t *testing.T) {
	promtool := promtoolPath(t)
	if out, err := exec.Command(promtool, "check", "config", scrapeExample).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config %s: %v\n%s", scrapeExample, err, out)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName     string `yaml:"job_name"`
			MetricsPath string `yaml:"metrics_path"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, scrapeExample, &cfg)
	jobs := map[string]string{}
	for _, sc := range cfg.ScrapeConfigs {
		jobs[sc.JobName] = sc.MetricsPath
	}
	for _, job := range []string{"failoverd", "failoverd-sidecar"} {
		if jobs[job] != "/metrics" {
			t.Errorf("%s: job %s scrapes %q, want /metrics", scrapeExample, job, jobs[job])
		}
	}
}
