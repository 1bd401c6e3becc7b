package configs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sidecarYAML is a daemon's whole configuration: two groups, clusters with
// kubeconfigs, an API token, HTTPS, caches. Site east of group orders has
// a sidecar; the files it uses are view.key and sidecar.pw, every other
// file lies under absent/ (never created) or is locked.kubeconfig (mode
// 0000).
const sidecarYAML = `daemon:
  listen: 0.0.0.0:8080
  apiTokenFile: absent/api.token
  viewSigningKeyFile: view.key
  tls: {certFile: absent/tls.crt, keyFile: absent/tls.key, clientCAFile: absent/clients-ca.crt}
  stateStore: {type: kubernetes, cluster: east, namespace: failoverd, configMap: failoverd-state}
clusters:
  - name: east
    kubeconfig: locked.kubeconfig
  - name: west
    kubeconfig: absent/west.kubeconfig
groups:
  - name: orders
    engine: mariadb
    credentials:
      admin: {user: failoverd, passwordFile: absent/admin.pw}
      replication: {user: repl, passwordFile: absent/repl.pw}
      sidecar: {user: failoverd_sidecar, passwordFile: sidecar.pw}
    cache: {engine: redis, passwordFile: absent/cache.pw}
    sidecar: {leaseTimeout: 4s, checkInterval: 500ms}
    sites:
      - name: east
        mysql: {address: db-east:3306}
        cache: {address: cache-east:6379}
        sidecar: {address: db-east:8081}
      - name: west
        mysql: {address: db-west:3306}
        cache: {address: cache-west:6379}
        sidecar: {address: db-west:8081}
  - name: billing
    engine: mysql
    credentials:
      admin: {user: failoverd, passwordFile: absent/billing-admin.pw}
      replication: {user: repl, passwordFile: absent/billing-repl.pw}
      sidecar: {user: failoverd_sidecar, passwordFile: absent/billing-sidecar.pw}
    tls: {enabled: true, caFile: absent/billing-ca.crt}
    sites:
      - name: east
        mysql: {address: billing-east:3306}
        sidecar: {address: billing-east:8081}
      - name: west
        mysql: {address: billing-west:3306}
`

// sidecarDir writes only the sidecar's own files (view.key, sidecar.pw) and
// a locked kubeconfig.
func sidecarDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"view.key": "view-signing-key\n", "sidecar.pw": "sidecar-pw\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "locked.kubeconfig"), []byte("apiVersion: v1\n"), 0o000); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The sidecar of orders/east loads the daemon's whole file with nothing but
// its own two secrets: the API token, kubeconfigs (absent or unreadable),
// the daemon's and replication accounts, the cache password, the daemon's
// TLS and everything of another group are neither required nor opened. The
// daemon refuses the same file for exactly those files.
func TestLoadSidecarNeedsOnlyItsOwnSecrets(t *testing.T) {
	dir := sidecarDir(t)
	file := filepath.Join(dir, "failoverd.yaml")
	if err := os.WriteFile(file, []byte(sidecarYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadSidecar(file, "orders", "east")
	if err != nil {
		t.Fatalf("the sidecar refused a file whose other secrets it does not use:\n%v", err)
	}
	if a := cfg.Groups[0].Credentials.SidecarAccount(); a.User != "failoverd_sidecar" || a.PasswordFile != filepath.Join(dir, "sidecar.pw") {
		t.Errorf("sidecar account %+v", a)
	}
	// The fixture is meaningful: the daemon needs every file the sidecar skipped.
	_, err = Load(file)
	for _, path := range []string{"daemon.apiTokenFile", "daemon.tls.certFile", "clusters[1].kubeconfig",
		"groups[0].credentials.admin.passwordFile", "groups[0].credentials.replication.passwordFile", "groups[0].cache.passwordFile",
		"groups[1].credentials.sidecar.passwordFile", "groups[1].tls.caFile"} {
		if err == nil || !strings.Contains(err.Error(), path+": cannot read") {
			t.Errorf("the daemon's Load does not refuse the absent %s:\n%v", path, err)
		}
	}
	if os.Getuid() != 0 && (err == nil || !strings.Contains(err.Error(), "clusters[0].kubeconfig: cannot read")) {
		t.Errorf("the daemon's Load does not refuse the unreadable kubeconfig:\n%v", err)
	}
	// Site west of orders has the same needs.
	if _, err := ParseSidecar(sidecarYAML, dir, "orders", "west"); err != nil {
		t.Errorf("orders/west: %v", err)
	}
}

// The sidecar still refuses to start without a secret it uses, naming the
// field (with its line) and what to do, every problem at once.
func TestLoadSidecarRefusesWithoutItsOwnSecrets(t *testing.T) {
	for _, tc := range []struct {
		name, from, to string
		group          string
		want           []string
	}{
		{name: "view key absent", from: "viewSigningKeyFile: view.key", to: "viewSigningKeyFile: absent/view.key",
			want: []string{"failoverd.yaml:4:3: daemon.viewSigningKeyFile: cannot read", "fix the path or the file's permissions"}},
		{name: "view key unset", from: "  viewSigningKeyFile: view.key\n", to: "",
			want: []string{"daemon.viewSigningKeyFile: missing; the sidecar verifies the daemon's views"}},
		{name: "sidecar password absent", from: "passwordFile: sidecar.pw", to: "passwordFile: absent/sidecar.pw",
			want: []string{"groups[0].credentials.sidecar.passwordFile: cannot read"}},
		{name: "no sidecar account: the admin's password is its own", from: "      sidecar: {user: failoverd_sidecar, passwordFile: sidecar.pw}\n", to: "",
			want: []string{"groups[0].credentials.admin.passwordFile: cannot read"}},
		{name: "both at once", from: "view.key", to: "absent/view.key", group: "billing",
			want: []string{"daemon.viewSigningKeyFile: cannot read", "groups[1].credentials.sidecar.passwordFile: cannot read", "groups[1].tls.caFile: cannot read"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := sidecarDir(t)
			text := strings.Replace(sidecarYAML, tc.from, tc.to, 1)
			file := filepath.Join(dir, "failoverd.yaml")
			if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			group := tc.group
			if group == "" {
				group = "orders"
			}
			_, err := LoadSidecar(file, group, "east")
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err %v, want ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if !strings.Contains(err.Error(), file+":") {
				t.Errorf("problems carry no file position:\n%v", err)
			}
		})
	}
}

// Within its scope the sidecar's checks are the daemon's (timings,
// addresses it listens on or dials); a broken file (an unknown key, a wrong
// type) is refused wherever the break is; another group's settings are the
// daemon's business.
func TestLoadSidecarChecksWhatItUses(t *testing.T) {
	dir := sidecarDir(t)
	for _, tc := range []struct {
		name     string
		edits    [][2]string
		want     []string
		wantNone bool
	}{
		{name: "lease timings", edits: [][2]string{{"checkInterval: 500ms}", "checkInterval: 3s}"}},
			want: []string{"groups[0].sidecar.checkInterval: 3s must be at most half of leaseTimeout 4s"}},
		{name: "own and peer addresses", edits: [][2]string{{"{address: db-east:3306}", "{address: db-east}"}, {"{address: db-west:8081}", "{address: db-west}"}},
			want: []string{`groups[0].sites[0].mysql.address: "db-east" is missing a port`, `groups[0].sites[1].sidecar.address: "db-west" is missing a port`}},
		{name: "unknown key in another group", edits: [][2]string{{"engine: mysql", "engine: mysql\n    enigne: mysql"}},
			want: []string{"groups[1].enigne"}},
		{name: "another group's semantics", edits: [][2]string{{"engine: mysql", "engine: oracle"}, {"billing-west:3306", "billing-west"}},
			wantNone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := sidecarYAML
			for _, e := range tc.edits {
				if !strings.Contains(text, e[0]) {
					t.Fatalf("fixture lacks %q", e[0])
				}
				text = strings.Replace(text, e[0], e[1], 1)
			}
			_, err := ParseSidecar(text, dir, "orders", "east")
			if tc.wantNone {
				if err != nil {
					t.Fatalf("the sidecar of orders refused another group's settings:\n%v", err)
				}
				return
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
