package configs

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/grview"
)

// grBase is base() as a replication: group group of MySQL members.
func grBase() map[string]any {
	m := base()
	group(m)["engine"] = "mysql"
	group(m)["replication"] = "group"
	for i := range 3 {
		delete(siteN(m, i), "sidecar")
	}
	return m
}

// Read routing works on a Group Replication group (the readers are the
// group's ONLINE secondaries): readers.enabled is accepted, and the
// readers section is still checked as for async.
func TestGroupReplicationAcceptsReadersAndChecksThem(t *testing.T) {
	m := grBase()
	group(m)["readers"] = map[string]any{"enabled": true, "maxLag": "5s", "includePrimary": "never"}
	cfg, err := parseMap(t, m, secrets(t))
	if err != nil {
		t.Fatalf("readers on a replication: group group: %v", err)
	}
	if r := cfg.Groups[0].Readers; !r.Enabled || r.IncludePrimary != IncludePrimaryNever {
		t.Fatalf("readers %+v", r)
	}
	group(m)["readers"] = map[string]any{"enabled": true, "includePrimary": "sometimes", "upAfter": 0}
	_, err = parseMap(t, m, secrets(t))
	if paths := problemPaths(t, err); !slices.Contains(paths, "groups[0].readers.includePrimary") || !slices.Contains(paths, "groups[0].readers.upAfter") {
		t.Fatalf("problems at %v, want readers.includePrimary and readers.upAfter", paths)
	}
}

// A sidecar fences its MySQL when the view names another site: with
// replication: group it would fight the group's own election, so each
// site's sidecar is refused at its own field.
func TestGroupReplicationRefusesSidecars(t *testing.T) {
	m := grBase()
	siteN(m, 0)["sidecar"] = map[string]any{"address": "east:8081"}
	siteN(m, 2)["sidecar"] = map[string]any{"address": "dr:8081"}
	_, err := parseMap(t, m, secrets(t))
	if paths := problemPaths(t, err); !slices.Equal(paths, []string{"groups[0].sites[0].sidecar", "groups[0].sites[2].sidecar"}) {
		t.Fatalf("problems at %v, want each sidecar refused", paths)
	}
}

func problemPaths(t *testing.T, err error) []string {
	t.Helper()
	var ps *Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want *Problems, got %v", err)
	}
	var out []string
	for _, p := range ps.List {
		out = append(out, p.Path)
	}
	return out
}

// Replication defaults to async (no change for existing files); only async
// and group are accepted.
func TestReplicationDefaultsToAsync(t *testing.T) {
	cfg, err := parseMap(t, base(), secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.Groups[0]; g.Replication != ReplicationAsync || g.FencingMode() == FencingGroup {
		t.Fatalf("replication %q fencing %q, want async and not group", g.Replication, g.FencingMode())
	}
	m := base()
	group(m)["replication"] = "galera"
	_, err = parseMap(t, m, secrets(t))
	if paths := problemPaths(t, err); !slices.Equal(paths, []string{"groups[0].replication"}) {
		t.Fatalf("replication galera: problems at %v, want groups[0].replication only", paths)
	}
}

// A valid replication: group group: fencing is the group's own, validate's
// summary says the group elects, and the warnings spell out the my.cnf
// lines (as the semi-sync advice does).
func TestGroupReplicationIsValidAndPrintsItsMyCnfLines(t *testing.T) {
	cfg, err := parseMap(t, grBase(), secrets(t))
	if err != nil {
		t.Fatalf("replication group: %v", err)
	}
	g := cfg.Groups[0]
	if g.FencingMode() != FencingGroup || !strings.Contains(g.Summary(), "replication group (the group elects; failoverd follows)") {
		t.Fatalf("fencing %q, summary %q", g.FencingMode(), g.Summary())
	}
	w := strings.Join(cfg.Warnings(), "\n")
	for _, line := range []string{"group_replication_single_primary_mode=ON", "group_replication_consistency=BEFORE_ON_PRIMARY_FAILOVER",
		"group_replication_exit_state_action=OFFLINE_MODE", "group_replication_autorejoin_tries=3",
		"group_replication_unreachable_majority_timeout=10", "group_replication_bootstrap_group=OFF"} {
		if !strings.Contains(w, "\n    "+line) {
			t.Errorf("warnings lack the my.cnf line %q:\n%s", line, w)
		}
	}
	if strings.Contains(w, "semi") || strings.Contains(w, "failoverCooldown") {
		t.Errorf("async-only advice given to a GR group:\n%s", w)
	}
}

// What replication: group rules out is refused, each at its own field,
// all at once: MariaDB (no Group Replication), any fencing mode, rejoin by
// reclone, promote on drain timeout, a preferred split-brain site, more
// than nine members.
func TestGroupReplicationRefusesWhatFailoverdNeverDoesThere(t *testing.T) {
	m := grBase()
	g := group(m)
	g["engine"] = "mariadb"
	g["fencing"] = "sidecar"
	g["rejoin"] = "reclone-unacknowledged"
	g["onDrainTimeout"] = "promote"
	g["splitBrain"] = map[string]any{"preferSite": "east"}
	_, err := parseMap(t, m, secrets(t))
	want := []string{"groups[0].engine", "groups[0].fencing", "groups[0].onDrainTimeout", "groups[0].rejoin", "groups[0].splitBrain.preferSite"}
	paths := problemPaths(t, err)
	slices.Sort(paths)
	if !slices.Equal(paths, want) {
		t.Fatalf("problems at %v, want exactly %v:\n%v", paths, want, err)
	}
	for _, words := range []string{"has no Group Replication", "never fences or promotes"} {
		if !strings.Contains(err.Error(), words) {
			t.Errorf("problems do not say %q:\n%v", words, err)
		}
	}

	m = grBase()
	var sites []any
	for i := range 10 {
		sites = append(sites, map[string]any{"name": "m" + strconv.Itoa(i), "mysql": map[string]any{"address": "db" + strconv.Itoa(i) + ":3306"}})
	}
	group(m)["sites"] = sites
	delete(group(m), "dns")
	delete(group(m), "cache")
	_, err = parseMap(t, m, secrets(t))
	if paths := problemPaths(t, err); !slices.Equal(paths, []string{"groups[0].sites"}) || !strings.Contains(err.Error(), "at most 9 members") {
		t.Fatalf("ten members: %v", err)
	}
}

// Two members lose their majority with either; a dr-only member can still
// be elected by the group: both are warned about with the fix.
func TestGroupReplicationWarnsAboutTwoMembersAndDROnly(t *testing.T) {
	m := grBase()
	group(m)["sites"] = group(m)["sites"].([]any)[:2]
	cfg, err := parseMap(t, m, secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(cfg.Warnings(), "\n")
	if !strings.Contains(w, "2 members") || !strings.Contains(w, "at least 3 members") {
		t.Errorf("no two-member warning:\n%s", w)
	}
	m = grBase()
	siteN(m, 2)["role"] = "dr-only"
	cfg, err = parseMap(t, m, secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(cfg.Warnings(), "\n"); !strings.Contains(w, "groups[0].sites[2].role: dr-only does not stop the group electing dr") ||
		!strings.Contains(w, "group_replication_member_weight=0") {
		t.Errorf("no dr-only warning:\n%s", w)
	}
}

// The my.cnf lines validate recommends are exactly what grview accepts at
// run time: parsed back into grview.Settings they are not unsafe.
func TestGroupReplicationSettingsAreWhatGrviewAccepts(t *testing.T) {
	vals := map[string]string{}
	for _, line := range GroupReplicationSettings() {
		line, _, _ = strings.Cut(line, "#")
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			t.Fatalf("not a name=value line: %q", line)
		}
		vals[k] = v
	}
	secs := func(k string) time.Duration { n, _ := strconv.Atoi(vals[k]); return time.Duration(n) * time.Second }
	tries, _ := strconv.Atoi(vals["group_replication_autorejoin_tries"])
	s := grview.Settings{
		SinglePrimaryMode: vals["group_replication_single_primary_mode"] == "ON", Consistency: vals["group_replication_consistency"],
		ExitStateAction: vals["group_replication_exit_state_action"], AutoRejoinTries: tries,
		UnreachableMajorityTimeout: secs("group_replication_unreachable_majority_timeout"), MemberExpelTimeout: secs("group_replication_member_expel_timeout"),
	}
	if u := s.Unsafe(); u != nil {
		t.Fatalf("recommended lines %+v are unsafe to grview: %q", s, u)
	}
}
