package configs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// secrets writes readable secret files into a temp dir and returns it.
func secrets(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"admin.pw", "repl.pw", "view.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// base is a valid three-site config with every optional section, as a
// generic map each test case mutates.
func base() map[string]any {
	site := func(name, addr, ip string, prio int) map[string]any {
		return map[string]any{
			"name": name, "priority": prio,
			"mysql":      map[string]any{"address": addr},
			"kubernetes": map[string]any{"cluster": "east", "namespace": "db", "service": "primary", "podSelector": map[string]any{"site": name}},
			"dns":        map[string]any{"target": ip},
			"cache":      map[string]any{"address": "cache-" + name + ":6379"},
			"sidecar":    map[string]any{"address": name + ":8081"},
		}
	}
	return map[string]any{
		"daemon":   map[string]any{"listen": "127.0.0.1:8080", "viewSigningKeyFile": "view.key"},
		"clusters": []any{map[string]any{"name": "east", "inCluster": true}},
		"groups": []any{map[string]any{
			"name":   "orders",
			"engine": "mariadb",
			"credentials": map[string]any{
				"admin":       map[string]any{"user": "failoverd", "passwordFile": "admin.pw"},
				"replication": map[string]any{"user": "repl", "passwordFile": "repl.pw"},
			},
			"dns":   map[string]any{"cluster": "east", "namespace": "dns", "endpointName": "orders", "hostname": "orders.example.com"},
			"cache": map[string]any{"engine": "redis"},
			"sites": []any{
				site("east", "db-east:3306", "192.0.2.1", 10),
				site("west", "db-west:3306", "192.0.2.2", 5),
				site("dr", "db-dr:3306", "192.0.2.3", 0),
			},
		}},
	}
}

func group(m map[string]any) map[string]any { return m["groups"].([]any)[0].(map[string]any) }
func siteN(m map[string]any, i int) map[string]any {
	return group(m)["sites"].([]any)[i].(map[string]any)
}

func parseMap(t *testing.T, m map[string]any, dir string) (*Config, error) {
	t.Helper()
	b, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return Parse(string(b), dir)
}

func TestBaseIsValidAndDefaulted(t *testing.T) {
	cfg, err := parseMap(t, base(), secrets(t))
	if err != nil {
		t.Fatalf("base config: %v", err)
	}
	g := cfg.Groups[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"pollInterval", g.PollInterval, 500 * time.Millisecond},
		{"probeTimeout", g.ProbeTimeout, 400 * time.Millisecond},
		{"failureThreshold", g.FailureThreshold, 2},
		{"recoveryThreshold", g.RecoveryThreshold, 3},
		{"detection", g.Detection, DetectionCorroborated},
		{"fencing (every candidate declares a sidecar)", g.FencingMode(), FencingSidecar},
		{"escalation.maxFailovers", g.Escalation.MaxFailovers, 3},
		{"escalation.window", g.Escalation.Window, time.Hour},
		{"sites[0].role", g.Sites[0].Role, RolePrimaryCandidate},
		{"dns.recordType", g.DNS.RecordType, "A"},
		{"dns.ttl", g.DNS.TTL, 30 * time.Second},
		{"cache.onSyncTimeout", g.Cache.OnSyncTimeout, "proceed"},
		{"sidecar.leaseTimeout", g.Sidecar.LeaseTimeout, 10 * time.Second},
		{"daemon.stateStore.type", cfg.Daemon.StateStore.Type, "file"},
		{"daemon.leaderElection.leaseDuration", cfg.Daemon.LeaderElection.LeaseDuration, 15 * time.Second},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if !filepath.IsAbs(g.Credentials.Admin.PasswordFile) {
		t.Errorf("relative passwordFile not resolved: %s", g.Credentials.Admin.PasswordFile)
	}
	if pw, err := g.Credentials.Admin.Password(); err != nil || pw != "secret" {
		t.Errorf("Password() = %q, %v; want secret", pw, err)
	}
}

func TestInvalidConfigsNameTheField(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(m map[string]any)
		path   string // exact YAML path expected in a problem
		words  string // part of the message
	}{
		{"typo'd key", func(m map[string]any) { group(m)["pollIntervall"] = "1s" }, "groups[0].pollIntervall", "did you mean pollInterval?"},
		{"unknown top-level key", func(m map[string]any) { m["group"] = []any{} }, "group", "did you mean groups?"},
		{"zero poll interval", func(m map[string]any) { group(m)["pollInterval"] = "0s" }, "groups[0].pollInterval", "not positive"},
		{"negative probe timeout", func(m map[string]any) { group(m)["probeTimeout"] = "-1s" }, "groups[0].probeTimeout", "not positive"},
		{"probe timeout not below poll interval", func(m map[string]any) { group(m)["probeTimeout"] = "500ms" }, "groups[0].probeTimeout", "shorter than pollInterval"},
		{"duration without unit", func(m map[string]any) { group(m)["pollInterval"] = 5 }, "groups[0].pollInterval", "with a unit"},
		{"garbage duration", func(m map[string]any) { group(m)["relayDrainTimeout"] = "soon" }, "groups[0].relayDrainTimeout", "not a duration"},
		{"failure threshold zero", func(m map[string]any) { group(m)["failureThreshold"] = 0 }, "groups[0].failureThreshold", "below 1"},
		{"recovery threshold negative", func(m map[string]any) { group(m)["recoveryThreshold"] = -2 }, "groups[0].recoveryThreshold", "below 1"},
		{"threshold not a number", func(m map[string]any) { group(m)["failureThreshold"] = "two" }, "groups[0].failureThreshold", "whole number"},
		{"unknown engine", func(m map[string]any) { group(m)["engine"] = "postgres" }, "groups[0].engine", "mysql or mariadb"},
		{"unknown detection", func(m map[string]any) { group(m)["detection"] = "vibes" }, "groups[0].detection", "corroborated, daemon-only"},
		{"unknown fencing", func(m map[string]any) { group(m)["fencing"] = "stonith" }, "groups[0].fencing", "confirmed, semisync, sidecar, semisync+sidecar, none"},
		{"duplicate site", func(m map[string]any) { siteN(m, 1)["name"] = "east" }, "groups[0].sites[1].name", "duplicate site name"},
		{"duplicate group", func(m map[string]any) {
			g2 := base()["groups"].([]any)[0]
			m["groups"] = append(m["groups"].([]any), g2)
		}, "groups[1].name", "duplicate group name"},
		{"one primary candidate", func(m map[string]any) { siteN(m, 1)["role"] = "dr-only"; siteN(m, 2)["role"] = "dr-only" }, "groups[0].sites", "at least 2"},
		{"one site", func(m map[string]any) { group(m)["sites"] = group(m)["sites"].([]any)[:1] }, "groups[0].sites", "2 to 16 sites"},
		{"unknown role", func(m map[string]any) { siteN(m, 2)["role"] = "witness" }, "groups[0].sites[2].role", "primary-candidate or dr-only"},
		{"missing port", func(m map[string]any) { siteN(m, 1)["mysql"] = map[string]any{"address": "db-west"} }, "groups[0].sites[1].mysql.address", "missing a port; write host:port"},
		{"bad port", func(m map[string]any) { siteN(m, 0)["mysql"] = map[string]any{"address": "db:99999"} }, "groups[0].sites[0].mysql.address", "1 to 65535"},
		{"preferSite unknown", func(m map[string]any) { group(m)["splitBrain"] = map[string]any{"preferSite": "north"} }, "groups[0].splitBrain.preferSite", `"north" is not in this group`},
		{"kubernetes undefined cluster", func(m map[string]any) {
			siteN(m, 1)["kubernetes"].(map[string]any)["cluster"] = "west"
		}, "groups[0].sites[1].kubernetes.cluster", `cluster "west" is not defined`},
		{"dns undefined cluster", func(m map[string]any) { group(m)["dns"].(map[string]any)["cluster"] = "nowhere" }, "groups[0].dns.cluster", "not defined"},
		{"unreadable credential file", func(m map[string]any) {
			group(m)["credentials"].(map[string]any)["admin"].(map[string]any)["passwordFile"] = "missing.pw"
		}, "groups[0].credentials.admin.passwordFile", "cannot read"},
		{"inline password key", func(m map[string]any) {
			group(m)["credentials"].(map[string]any)["admin"].(map[string]any)["password"] = "hunter2"
		}, "groups[0].credentials.admin.password", "unknown key"},
		{"dns A record with hostname target", func(m map[string]any) { siteN(m, 0)["dns"] = map[string]any{"target": "db.example.com"} }, "groups[0].sites[0].dns.target", "IPv4"},
		{"candidate without dns target", func(m map[string]any) { delete(siteN(m, 1), "dns") }, "groups[0].sites[1].dns.target", "every primary-candidate"},
		{"fencing sidecar without sidecar", func(m map[string]any) {
			group(m)["fencing"] = "sidecar"
			delete(siteN(m, 0), "sidecar")
		}, "groups[0].sites[0].sidecar.address", "fencing: sidecar"},
		{"unknown rejoin policy", func(m map[string]any) { group(m)["rejoin"] = "always" }, "groups[0].rejoin", "manual, reclone-unacknowledged"},
		{"unknown mode", func(m map[string]any) { group(m)["mode"] = "dry-run" }, "groups[0].mode", `"dry-run" is not allowed; write one of active, observe`},
		{"rejoin by reclone without semi-sync fencing", func(m map[string]any) {
			group(m)["rejoin"] = "reclone-unacknowledged"
			group(m)["fencing"] = "sidecar"
		}, "groups[0].rejoin", "needs fencing semisync or semisync+sidecar"},
		{"rejoin by reclone on MariaDB without reclone.command", func(m map[string]any) {
			group(m)["rejoin"] = "reclone-unacknowledged"
			group(m)["fencing"] = "semisync"
			group(m)["engine"] = "mariadb"
		}, "groups[0].rejoin", "needs reclone.command"},
		{"sidecar check interval too slow", func(m map[string]any) {
			group(m)["sidecar"] = map[string]any{"leaseTimeout": "4s", "checkInterval": "3s"}
		}, "groups[0].sidecar.checkInterval", "half of leaseTimeout"},
		{"no view signing key with sidecars", func(m map[string]any) { delete(m["daemon"].(map[string]any), "viewSigningKeyFile") }, "daemon.viewSigningKeyFile", "signed with this key"},
		{"state store kubernetes without cluster", func(m map[string]any) {
			m["daemon"].(map[string]any)["stateStore"] = map[string]any{"type": "kubernetes"}
		}, "daemon.stateStore.cluster", "missing"},
		{"unknown state store", func(m map[string]any) {
			m["daemon"].(map[string]any)["stateStore"] = map[string]any{"type": "zookeeper"}
		}, "daemon.stateStore.type", "file, kubernetes or etcd"},
		{"etcd store without endpoints", func(m map[string]any) {
			m["daemon"].(map[string]any)["stateStore"] = map[string]any{"type": "etcd"}
			m["daemon"].(map[string]any)["leaderElection"] = map[string]any{"enabled": true}
		}, "daemon.stateStore.etcd.endpoints", "client URLs"},
		{"etcd store without election", func(m map[string]any) {
			m["daemon"].(map[string]any)["stateStore"] = map[string]any{"type": "etcd", "etcd": map[string]any{"endpoints": []any{"http://127.0.0.1:2379"}}}
		}, "daemon.leaderElection.enabled", "fenced by the election"},
		{"etcd endpoint not a URL", func(m map[string]any) {
			m["daemon"].(map[string]any)["stateStore"] = map[string]any{"type": "etcd", "etcd": map[string]any{"endpoints": []any{"etcd-site0:2379"}}}
			m["daemon"].(map[string]any)["leaderElection"] = map[string]any{"enabled": true}
		}, "daemon.stateStore.etcd.endpoints[0]", "client URL"},
		{"etcd session TTL not whole seconds", func(m map[string]any) {
			m["daemon"].(map[string]any)["stateStore"] = map[string]any{"type": "etcd", "etcd": map[string]any{"endpoints": []any{"http://127.0.0.1:2379"}}}
			m["daemon"].(map[string]any)["leaderElection"] = map[string]any{"enabled": true, "leaseDuration": "1500ms"}
		}, "daemon.leaderElection.leaseDuration", "whole seconds"},
		{"leader election renew >= lease", func(m map[string]any) {
			m["daemon"].(map[string]any)["leaderElection"] = map[string]any{"enabled": true, "cluster": "east", "renewDeadline": "20s"}
		}, "daemon.leaderElection.renewDeadline", "shorter than leaseDuration"},
		{"leader election retry jitter reaches renew deadline", func(m map[string]any) {
			m["daemon"].(map[string]any)["leaderElection"] = map[string]any{"enabled": true, "cluster": "east", "renewDeadline": "1200ms", "retryPeriod": "1s"}
		}, "daemon.leaderElection.retryPeriod", "must be shorter than renewDeadline 1.2s, or the leader cannot renew in time; lower retryPeriod below 1s or raise renewDeadline"},
		{"leader election non-positive lease", func(m map[string]any) {
			m["daemon"].(map[string]any)["leaderElection"] = map[string]any{"enabled": true, "cluster": "east", "leaseDuration": "0s"}
		}, "daemon.leaderElection.leaseDuration", "not positive"},
		{"leader election with the file store", func(m map[string]any) {
			m["daemon"].(map[string]any)["leaderElection"] = map[string]any{"enabled": true, "cluster": "east", "leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "1s"}
		}, "daemon.stateStore.type", "each daemon would read and write its own file"},
		{"leader change outlasts the sidecar lease", func(m map[string]any) {
			m["daemon"].(map[string]any)["stateStore"] = map[string]any{"type": "kubernetes", "cluster": "east"}
			m["daemon"].(map[string]any)["leaderElection"] = map[string]any{"enabled": true, "cluster": "east"}
		}, "groups[0].sidecar.leaseTimeout", "10s is not above the longest leader change, 19.4s (daemon.leaderElection.leaseDuration 15s + 2.2 × retryPeriod 2s)"},
		{"cluster with kubeconfig and inCluster", func(m map[string]any) {
			m["clusters"] = []any{map[string]any{"name": "east", "inCluster": true, "kubeconfig": "admin.pw"}}
		}, "clusters[0].kubeconfig", "one or the other"},
		{"bad group name", func(m map[string]any) { group(m)["name"] = "Orders_DB" }, "groups[0].name", "not a valid name"},
		{"cache onSyncTimeout", func(m map[string]any) { group(m)["cache"].(map[string]any)["onSyncTimeout"] = "retry" }, "groups[0].cache.onSyncTimeout", "proceed, fail"},
		{"sites is not a list", func(m map[string]any) { group(m)["sites"] = "east,west" }, "groups[0].sites", "expected a list"},
		{"no groups", func(m map[string]any) { delete(m, "groups") }, "groups", "no group defined"},
	}
	if len(cases) < 20 {
		t.Fatalf("only %d cases; the issue asks for at least 20", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			tc.mutate(m)
			_, err := parseMap(t, m, secrets(t))
			if err == nil {
				t.Fatal("accepted an invalid config")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("error is not *Problems: %v", err)
			}
			for _, p := range ps.List {
				if p.Path == tc.path && strings.Contains(p.Message, tc.words) {
					return
				}
			}
			t.Errorf("no problem at %s mentioning %q; got:\n%v", tc.path, tc.words, err)
		})
	}
}

func TestEveryProblemReportedAtOnce(t *testing.T) {
	m := base()
	group(m)["pollInterval"] = "0s"
	group(m)["engine"] = "oracle"
	siteN(m, 1)["mysql"] = map[string]any{"address": "nohost"}
	_, err := parseMap(t, m, secrets(t))
	var ps *Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want *Problems, got %v", err)
	}
	want := []string{"groups[0].pollInterval", "groups[0].engine", "groups[0].sites[1].mysql.address"}
	for _, w := range want {
		found := false
		for _, p := range ps.List {
			found = found || p.Path == w
		}
		if !found {
			t.Errorf("missing problem at %s in:\n%v", w, err)
		}
	}
}

func TestExamplesValidate(t *testing.T) {
	files, err := filepath.Glob("examples/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("want at least 3 examples, got %v (%v)", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := Load(f); err != nil {
				t.Fatalf("example does not validate: %v", err)
			}
		})
	}
}

func TestLoadEnvOverridesDaemon(t *testing.T) {
	t.Setenv("FAILOVERD_DAEMON_LISTEN", "127.0.0.1:9999")
	t.Setenv("FAILOVERD_DAEMON_STATESTORE_PATH", "/tmp/override.json")
	cfg, err := Load("examples/two-site-mysql.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Daemon.Listen != "127.0.0.1:9999" || cfg.Daemon.StateStore.Path != "/tmp/override.json" {
		t.Errorf("env overrides not applied: listen=%s path=%s", cfg.Daemon.Listen, cfg.Daemon.StateStore.Path)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("want ErrNotExist, got %v", err)
	}
}

func TestLoadMalformedYAML(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(f, []byte("groups: [\n  - name: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f); !errors.Is(err, ErrInvalid) {
		t.Fatalf("want ErrInvalid, got %v", err)
	}
}

func TestFencingNoneWarns(t *testing.T) {
	m := base()
	group(m)["fencing"] = "none"
	cfg, err := parseMap(t, m, secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "durability risk") {
		t.Errorf("Warnings() = %q, want one durability-risk warning", w)
	}
}

func TestSidecarFencing(t *testing.T) {
	cfg, err := parseMap(t, base(), secrets(t))
	if err != nil {
		t.Fatalf("every candidate has a sidecar: %v", err)
	}
	if got := cfg.Groups[0].FencingMode(); got != FencingSidecar {
		t.Errorf("FencingMode() = %s, want the sidecar default", got)
	}
	if w := cfg.Warnings(); len(w) != 0 {
		t.Errorf("Warnings() = %q, want none", w)
	}
	m := base()
	group(m)["fencing"] = "sidecar"
	delete(siteN(m, 1), "sidecar")
	_, err = parseMap(t, m, secrets(t))
	var ps *Problems
	if !errors.As(err, &ps) || len(ps.List) != 1 || ps.List[0].Path != "groups[0].sites[1].sidecar.address" {
		t.Fatalf("fencing sidecar with a candidate lacking its sidecar: %v, want only groups[0].sites[1].sidecar.address", err)
	}
}

func TestLeaderElectionFitsTheSidecarLease(t *testing.T) {
	m := base()
	m["daemon"].(map[string]any)["stateStore"] = map[string]any{"type": "kubernetes", "cluster": "east"}
	// 6s + 2.2 × 1s = 8.2s is below the default 10s lease.
	m["daemon"].(map[string]any)["leaderElection"] = map[string]any{"enabled": true, "cluster": "east", "leaseDuration": "6s", "renewDeadline": "4s", "retryPeriod": "1s"}
	if _, err := parseMap(t, m, secrets(t)); err != nil {
		t.Fatalf("leader change within the sidecar lease: %v", err)
	}
	// Without any sidecar no lease is in play, so the defaults are fine.
	for i := range 3 {
		delete(siteN(m, i), "sidecar")
	}
	delete(m["daemon"].(map[string]any), "viewSigningKeyFile")
	m["daemon"].(map[string]any)["leaderElection"] = map[string]any{"enabled": true, "cluster": "east"}
	if _, err := parseMap(t, m, secrets(t)); err != nil {
		t.Fatalf("no sidecars, default leader election: %v", err)
	}
}

func TestFencingDefaultsToConfirmedWithoutSidecars(t *testing.T) {
	m := base()
	for i := range 3 {
		delete(siteN(m, i), "sidecar")
	}
	cfg, err := parseMap(t, m, secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Groups[0].FencingMode(); got != FencingConfirmed {
		t.Errorf("FencingMode() = %s, want confirmed", got)
	}
}

func TestReadSecretEmptyFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(f, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSecret(f); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty secret: want ErrInvalid, got %v", err)
	}
}

func TestRejoinByRecloneWithSemiSync(t *testing.T) {
	m := base()
	group(m)["engine"] = "mysql"
	group(m)["fencing"] = "semisync"
	group(m)["rejoin"] = "reclone-unacknowledged"
	cfg, err := parseMap(t, m, secrets(t))
	if err != nil {
		t.Fatalf("rejoin reclone-unacknowledged with fencing semisync on MySQL: %v", err)
	}
	if got := cfg.Groups[0].Rejoin; got != RejoinRecloneUnacknowledged {
		t.Fatalf("rejoin %q", got)
	}
	if cfg, err := parseMap(t, base(), secrets(t)); err != nil || cfg.Groups[0].Rejoin != RejoinManual {
		t.Fatalf("default rejoin: %v %v", cfg, err)
	}
}

// The mode defaults to active (a group acts unless told otherwise), decodes
// "observe", and a wrong value is refused naming the field and the allowed
// values (TestInvalidConfigsNameTheField "unknown mode").
func TestGroupModeDefaultsToActiveAndDecodesObserve(t *testing.T) {
	cfg, err := parseMap(t, base(), secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.Groups[0]; g.Mode != ModeActive || g.Observing() {
		t.Fatalf("default mode %q (observing %v), want active", g.Mode, g.Observing())
	}
	m := base()
	group(m)["mode"] = "observe"
	cfg, err = parseMap(t, m, secrets(t))
	if err != nil {
		t.Fatalf("mode observe: %v", err)
	}
	if g := cfg.Groups[0]; g.Mode != ModeObserve || !g.Observing() || !strings.Contains(g.Summary(), "mode observe") {
		t.Fatalf("mode %q, observing %v, summary %q", g.Mode, g.Observing(), g.Summary())
	}
	// A key differing in case is an unknown key, not a silent default.
	m = base()
	group(m)["Mode"] = "observe"
	if _, err := parseMap(t, m, secrets(t)); err == nil || !strings.Contains(err.Error(), "groups[0].Mode") {
		t.Fatalf("key Mode: %v, want an unknown-key problem", err)
	}
}

func TestSidecarAccount(t *testing.T) {
	dir := secrets(t)
	cfg, err := parseMap(t, base(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Groups[0].Credentials.SidecarAccount(); a.User != "failoverd" {
		t.Fatalf("without credentials.sidecar the sidecars use %q, want the admin account", a.User)
	}
	m := base()
	group(m)["credentials"].(map[string]any)["sidecar"] = map[string]any{"user": "failoverd_sidecar", "passwordFile": "repl.pw"}
	cfg, err = parseMap(t, m, dir)
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Groups[0].Credentials.SidecarAccount()
	if a.User != "failoverd_sidecar" || a.PasswordFile != filepath.Join(dir, "repl.pw") {
		t.Fatalf("sidecar account %+v, want failoverd_sidecar with its file resolved against the config's directory", a)
	}
	if pw, err := a.Password(); err != nil || pw != "secret" {
		t.Fatalf("sidecar password %q, %v", pw, err)
	}
	group(m)["credentials"].(map[string]any)["sidecar"] = map[string]any{"user": "failoverd_sidecar", "passwordFile": "missing.pw"}
	if _, err := parseMap(t, m, dir); err == nil || !strings.Contains(err.Error(), "groups[0].credentials.sidecar.passwordFile") {
		t.Fatalf("a missing sidecar password file: %v", err)
	}
}

func TestSemiSyncFencing(t *testing.T) {
	m := base()
	group(m)["fencing"] = "semisync"
	cfg, err := parseMap(t, m, secrets(t))
	if err != nil {
		t.Fatalf("fencing semisync: %v", err)
	}
	w := cfg.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "timeout=4294967295") || !strings.Contains(w[0], "wait_no") {
		t.Errorf("Warnings() = %q, want the semi-sync server settings spelled out", w)
	}
	// semisync+sidecar also needs a sidecar at every candidate.
	m = base()
	group(m)["fencing"] = "semisync+sidecar"
	delete(siteN(m, 1), "sidecar")
	_, err = parseMap(t, m, secrets(t))
	var ps *Problems
	if !errors.As(err, &ps) || len(ps.List) != 1 || ps.List[0].Path != "groups[0].sites[1].sidecar.address" {
		t.Fatalf("semisync+sidecar with a candidate lacking its sidecar: %v, want only groups[0].sites[1].sidecar.address", err)
	}
}

// Event hooks: each problem is named with its path and the fix; a valid
// hook decodes with its defaults.
func TestHooksValidation(t *testing.T) {
	m := base()
	group(m)["hooks"] = []any{
		map[string]any{"name": "proxysql", "events": []any{"after-promote"}, "command": []any{"/usr/local/bin/proxysql-hook"}},
		map[string]any{"name": "proxysql", "events": []any{"after-promotion"}, "url": "ftp://x"},
		map[string]any{"command": []any{"x"}, "url": "http://x", "timeout": "0s", "retries": -1},
	}
	_, err := parseMap(t, m, secrets(t))
	for _, want := range []string{
		`groups[0].hooks[1].name: "proxysql" is used by another hook`,
		`groups[0].hooks[1].events[0]: unknown event "after-promotion"`,
		`groups[0].hooks[1].url: "ftp://x" is not an http:// or https:// URL`,
		`groups[0].hooks[2].name: required`,
		`groups[0].hooks[2].events: required`,
		`groups[0].hooks[2]: set command or url, not both`,
		`groups[0].hooks[2].retries: must not be negative`,
		`groups[0].hooks[2].timeout`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation lacks %q:\n%v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "hooks[0]") {
		t.Errorf("the valid hook was reported: %v", err)
	}
	m = base()
	group(m)["hooks"] = []any{map[string]any{"name": "haproxy", "events": []any{"after-promote", "split-brain"}, "url": "http://127.0.0.1:9999/hook"}}
	cfg, err := parseMap(t, m, secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.Groups[0].Hooks[0]; h.Timeout != 10*time.Second || h.Retries != 3 || len(h.Events) != 2 {
		t.Fatalf("hook decoded as %+v, want the defaults 10s and 3 retries", h)
	}
	if cfg.Groups[0].RoutingReconcileInterval != 30*time.Second {
		t.Fatalf("routingReconcileInterval default %v", cfg.Groups[0].RoutingReconcileInterval)
	}
}

// client-go's leader steps down only at its last renewal + retryPeriod +
// renewDeadline, while another daemon may take the Lease leaseDuration (in
// whole seconds, as the Lease records it) after that renewal: timings where
// the first is not below the second, less a margin, let two daemons lead.
func TestLeaderElectionTimingsCannotOverlap(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		lease, renew, retry   string
		wantField, wantPhrase string // wantField "": valid
	}{
		{"defaults 15s/10s/2s", "", "", "", "", ""},
		{"examples 6s/4s/1s", "6s", "4s", "1s", "", ""},
		{"e2e 3s/2s/500ms", "3s", "2s", "500ms", "", ""},
		{"15s/14s/4s overlaps by 3s", "15s", "14s", "4s", "daemon.leaderElection.renewDeadline",
			"renewDeadline 14s + retryPeriod 4s + margin 750ms = 18.75s must be below leaseDuration 15s"},
		{"15s/12s/3s overlaps at the margin", "15s", "12s", "3s", "daemon.leaderElection.renewDeadline", "= 15.75s must be below leaseDuration 15s"},
		{"6s/5s/900ms within the margin", "6s", "5s", "900ms", "daemon.leaderElection.renewDeadline", "lower renewDeadline or retryPeriod, or raise leaseDuration"},
		{"2500ms is 2s on the Lease", "2500ms", "1500ms", "400ms", "daemon.leaderElection.renewDeadline", "leaseDuration 2.5s (the Lease records 2s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			for i := range 3 {
				delete(siteN(m, i), "sidecar") // no sidecar lease to fit in
			}
			delete(m["daemon"].(map[string]any), "viewSigningKeyFile")
			m["daemon"].(map[string]any)["stateStore"] = map[string]any{"type": "kubernetes", "cluster": "east"}
			le := map[string]any{"enabled": true, "cluster": "east"}
			for k, v := range map[string]string{"leaseDuration": tc.lease, "renewDeadline": tc.renew, "retryPeriod": tc.retry} {
				if v != "" {
					le[k] = v
				}
			}
			m["daemon"].(map[string]any)["leaderElection"] = le
			_, err := parseMap(t, m, secrets(t))
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("valid timings refused: %v", err)
				}
				return
			}
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("timings that let two daemons lead accepted (err %v)", err)
			}
			for _, p := range ps.List {
				if p.Path == tc.wantField && strings.Contains(p.Message, tc.wantPhrase) {
					return
				}
			}
			t.Fatalf("no problem at %s containing %q: %v", tc.wantField, tc.wantPhrase, err)
		})
	}
}

// TestTwoSiteSemiSyncWarnsRPOAfterAFailover: semi-sync fencing promises that
// no acknowledged write is lost, but in a group of two sites the promoted
// primary has no replica left to acknowledge its commits: it commits
// asynchronously until the lost site is back, and the ack-holder rule can
// never hold for its next failover. validate says so; three sites (a dr-only
// replica counts) do not warn.
func TestTwoSiteSemiSyncWarnsRPOAfterAFailover(t *testing.T) {
	for _, fencing := range []string{"semisync", "semisync+sidecar"} {
		m := base()
		group(m)["fencing"] = fencing
		group(m)["sites"] = group(m)["sites"].([]any)[:2]
		cfg, err := parseMap(t, m, secrets(t))
		if err != nil {
			t.Fatalf("fencing %s, two sites: %v", fencing, err)
		}
		var found []string
		for _, w := range cfg.Warnings() {
			if strings.Contains(w, "groups[0].sites") {
				found = append(found, w)
			}
		}
		if len(found) != 1 || !strings.Contains(found[0], "RPO is not zero") || !strings.Contains(found[0], "3 sites") {
			t.Errorf("fencing %s, two sites: Warnings() = %q, want one saying the RPO after a failover is not zero and 3 sites fix it", fencing, cfg.Warnings())
		}
		m = base()
		group(m)["fencing"] = fencing
		cfg, err = parseMap(t, m, secrets(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range cfg.Warnings() {
			if strings.Contains(w, "groups[0].sites") {
				t.Errorf("fencing %s, three sites: unexpected %q", fencing, w)
			}
		}
	}
}

// TestReadersDefaultsAndDecoding guards the read-routing policy: off by
// default with maxLag 5s, upAfter 3, downAfter 2, includePrimary
// whenNoReplica, and every field decodes.
func TestReadersDefaultsAndDecoding(t *testing.T) {
	cfg, err := parseMap(t, base(), secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	want := Readers{Enabled: false, MaxLag: 5 * time.Second, UpAfter: 3, DownAfter: 2, IncludePrimary: IncludePrimaryWhenNoReplica}
	if got := cfg.Groups[0].Readers; got != want {
		t.Fatalf("default readers %+v, want %+v", got, want)
	}
	m := base()
	group(m)["readers"] = map[string]any{"enabled": true, "maxLag": "2s", "upAfter": 5, "downAfter": 1, "includePrimary": "never"}
	cfg, err = parseMap(t, m, secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	want = Readers{Enabled: true, MaxLag: 2 * time.Second, UpAfter: 5, DownAfter: 1, IncludePrimary: IncludePrimaryNever}
	if got := cfg.Groups[0].Readers; got != want {
		t.Fatalf("readers %+v, want %+v", got, want)
	}
}

// TestReadersValidationNamesEveryFieldAtOnce guards that a bad read-routing
// policy is refused with every problem, each naming its field and the fix.
func TestReadersValidationNamesEveryFieldAtOnce(t *testing.T) {
	m := base()
	group(m)["readers"] = map[string]any{"enabled": true, "maxLag": "0s", "upAfter": 0, "downAfter": -1, "includePrimary": "sometimes"}
	_, err := parseMap(t, m, secrets(t))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"groups[0].readers.maxLag", "not positive",
		"groups[0].readers.upAfter", "groups[0].readers.downAfter", "at least 1",
		"groups[0].readers.includePrimary", `"sometimes" is not allowed; write one of whenNoReplica, always, never`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestReaderTargetsParseAndValidate guards the reader targets' shape: a
// full readers.kubernetes / readers.dns parses, and every mistake (targets
// without readers.enabled, empty names, no podSelector to label, no group
// dns section, the writer's DNSEndpoint reused) is named with its fix.
func TestReaderTargetsParseAndValidate(t *testing.T) {
	m := base()
	group(m)["readers"] = map[string]any{"enabled": true,
		"kubernetes": map[string]any{"service": "mysql-read"},
		"dns":        map[string]any{"endpointName": "orders-readers", "hostname": "orders-ro.example.com"}}
	cfg, err := parseMap(t, m, secrets(t))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Groups[0].Readers
	if r.Kubernetes == nil || r.Kubernetes.Service != "mysql-read" || r.DNS == nil || r.DNS.EndpointName != "orders-readers" || r.DNS.Hostname != "orders-ro.example.com" {
		t.Fatalf("reader targets %+v %+v", r.Kubernetes, r.DNS)
	}

	m = base()
	group(m)["readers"] = map[string]any{"enabled": false,
		"kubernetes": map[string]any{"service": ""},
		"dns":        map[string]any{"endpointName": "orders", "hostname": ""}}
	_, err = parseMap(t, m, secrets(t))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"groups[0].readers.enabled", "write enabled: true or remove them",
		"groups[0].readers.kubernetes.service", "groups[0].readers.dns.hostname",
		"groups[0].readers.dns.endpointName", `"orders" is the writer's DNSEndpoint`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	m = base()
	delete(group(m), "dns")
	for i := 0; i < 3; i++ {
		delete(siteN(m, i), "dns")
		delete(siteN(m, i)["kubernetes"].(map[string]any), "podSelector")
		delete(siteN(m, i)["kubernetes"].(map[string]any), "service")
		siteN(m, i)["kubernetes"].(map[string]any)["nodeSelector"] = map[string]any{"zone": "z"}
	}
	group(m)["readers"] = map[string]any{"enabled": true,
		"kubernetes": map[string]any{"service": "mysql-read"},
		"dns":        map[string]any{"endpointName": "orders-readers", "hostname": "orders-ro.example.com"}}
	_, err = parseMap(t, m, secrets(t))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"groups[0].readers.kubernetes", "no site has kubernetes.podSelector",
		"groups[0].readers.dns", "the group has no dns section",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
