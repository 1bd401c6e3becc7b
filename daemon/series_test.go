package daemon

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/kube"
	"github.com/failoverd/failoverd/metrics"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/store"
)

// The acceptance case of issue 30's counters item: a scrape right after
// New (before Run, before any event) shows every counter family
// docs/metrics.md lists for the daemon, each series at 0, with the group's
// sites, followers and hooks as labels: the first event of each is an
// increase(), and no series appears a scrape late.
func TestFirstScrapeHasEveryCounterAtZero(t *testing.T) {
	var d *Daemon
	m := metrics.New(metrics.Options{Snapshot: func() status.Snapshot { return d.Snapshot() }})
	exec := gtid.MustParse(gtid.MariaDB, "0-1-10")
	d, err := New(context.Background(), modeConfig(t, configs.ModeActive), Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clockAt(t0), Identity: "me",
		Store: newTestStore(t, store.GroupState{Group: "g", Epoch: 1, ActiveSite: "a"}), Events: m,
		Dial: func(_ context.Context, _ configs.Group, s configs.Site) (Instance, error) {
			return fakeInstance{site: s.Name, log: &opLog{}, executed: exec}, nil
		},
		Followers: func(configs.Group, *kube.Clusters, *slog.Logger) ([]Follower, error) {
			return []Follower{&flaky{}}, nil
		},
		ReaderFollowers: func(configs.Group, *kube.Clusters, *slog.Logger) []ReaderFollower {
			return []ReaderFollower{&recordingReaders{name: "dns-readers"}}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.listener.Close() })
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse the scrape: %v", err)
	}

	docs, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	counters := regexp.MustCompile("(?m)^\\| `(failoverd_[a-z0-9_]+)` \\| counter \\|").FindAllStringSubmatch(string(docs), -1)
	var checked int
	for _, c := range counters {
		name := c[1]
		if strings.HasPrefix(name, "failoverd_sidecar_") {
			continue // the sidecar's (package sidecar checks them)
		}
		checked++
		mf := families[name]
		if mf == nil {
			t.Errorf("%s is not on the first scrape", name)
			continue
		}
		for _, s := range mf.Metric {
			if v := s.GetCounter().GetValue(); v != 0 {
				t.Errorf("%s %v = %v on the first scrape, want 0", name, s.Label, v)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d daemon counters found in docs/metrics.md", checked)
	}
	// The group's own label values, from its configuration and followers.
	for _, want := range []string{
		`failoverd_probe_failures_total{group="g",site="c"} 0`,
		`failoverd_fences_total{by="sidecar",group="g",site="b"} 0`,
		`failoverd_failovers_total{group="g",kind="switchover",result="superseded"} 0`,
		`failoverd_routing_operations_total{follower="flaky",group="g",result="error"} 0`,
		`failoverd_routing_operations_total{follower="dns-readers",group="g",result="ok"} 0`,
		`failoverd_routing_repairs_total{follower="flaky",group="g"} 0`,
		`failoverd_hook_runs_total{event="recovery-blocked",group="g",hook="notify",result="failed"} 0`,
		`failoverd_fence_proofs_total{group="g",proof="lease-expired"} 0`,
	} {
		if !slices.Contains(strings.Split(string(body), "\n"), want) {
			t.Errorf("first scrape lacks %s", want)
		}
	}
}

// StartGroup makes reloadEvents a SeriesStarter that records the groups.
func (e *reloadEvents) StartGroup(group string, _, _ []string, _ map[string][]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.started = append(e.started, group)
}

func (e *reloadEvents) startedGroups() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.started...)
}

// A group a reload adds (or rebuilds) gets its counters started before its
// loop runs, as New's groups do; a refused reload starts none.
func TestReloadStartsTheCountersOfAnAddedGroup(t *testing.T) {
	r := startReloadDaemon(t, configYAML(listen, groupYAML("orders", 0, 2, 1)), &reloadWorld{},
		store.GroupState{Group: "orders", Epoch: 1, ActiveSite: "a"})
	if got := r.events.startedGroups(); !slices.Equal(got, []string{"orders"}) {
		t.Fatalf("after New: counters started for %v, want [orders]", got)
	}
	r.write(t, configYAML(listen, groupYAML("orders", 0, 2, 1), groupYAML("billing", 0, 1), groupYAML("billing", 0, 1)))
	if _, err := r.Reload(context.Background(), api.Actor{Name: "ann"}); err == nil {
		t.Fatal("a file with a group twice was applied")
	}
	if got := r.events.startedGroups(); !slices.Equal(got, []string{"orders"}) {
		t.Fatalf("after a refused reload: counters started for %v, want [orders]", got)
	}
	r.write(t, configYAML(listen, groupYAML("orders", 0, 2, 1), groupYAML("billing", 0, 1)))
	if _, err := r.Reload(context.Background(), api.Actor{Name: "ann"}); err != nil {
		t.Fatal(err)
	}
	if got := r.events.startedGroups(); !slices.Equal(got, []string{"orders", "billing"}) {
		t.Fatalf("after adding billing: counters started for %v, want [orders billing]", got)
	}
}
