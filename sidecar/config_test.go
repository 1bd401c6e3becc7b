package sidecar

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/sitepair"
)

func testConfigs(t *testing.T) *configs.Config {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"view.key": "s3cret-view-key-of-at-least-32-bytes\n", "admin.pw": "adminpw\n", "repl.pw": "replpw\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := configs.Parse(`
daemon:
  viewSigningKeyFile: view.key
groups:
  - name: orders
    engine: mariadb
    credentials:
      admin: {user: failoverd, passwordFile: admin.pw}
      replication: {user: repl, passwordFile: repl.pw}
    sidecar: {leaseTimeout: 4s, checkInterval: 500ms}
    sites:
      - name: east
        mysql: {address: 10.0.0.1:3306}
        sidecar: {address: 10.0.0.1:9300}
      - name: west
        mysql: {address: 10.0.0.2:3306}
        sidecar: {address: 10.0.0.2:9300}
      - name: dr
        role: dr-only
        mysql: {address: 10.0.0.3:3306}
`, dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFromConfig(t *testing.T) {
	c := testConfigs(t)
	cfg, opts, err := FromConfig(c, "orders", "east", Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Group != "orders" || cfg.Site != "east" || string(cfg.Key) != "s3cret-view-key-of-at-least-32-bytes" || cfg.LeaseTimeout != 4*time.Second ||
		cfg.CheckInterval != 500*time.Millisecond || cfg.ListenAddr != "10.0.0.1:9300" {
		t.Errorf("config %+v", cfg)
	}
	if len(cfg.Peers) != 1 || cfg.Peers[0] != (Peer{Site: "west", URL: "http://10.0.0.2:9300"}) {
		t.Errorf("peers %+v (a site without a sidecar is no peer)", cfg.Peers)
	}
	if opts.Addr != "10.0.0.1:3306" || opts.User != "failoverd" || opts.Password != "adminpw" || opts.TLS != nil {
		t.Errorf("mysql options %+v", opts)
	}
	if cfg.fenceTimeout() != 400*time.Millisecond {
		t.Errorf("fence timeout %s", cfg.fenceTimeout())
	}
	for _, tc := range []struct {
		group, site string
		want        error
	}{
		{"payments", "east", ErrUnknownGroup},
		{"orders", "south", ErrUnknownSite},
		{"orders", "dr", ErrNoSidecarAddress},
	} {
		if _, _, err := FromConfig(c, tc.group, tc.site, Overrides{}); !errors.Is(err, tc.want) {
			t.Errorf("%s/%s: %v, want %v", tc.group, tc.site, err, tc.want)
		}
	}
}

func TestFromConfigOverrides(t *testing.T) {
	c := testConfigs(t)
	cfg, opts, err := FromConfig(c, "orders", "east", Overrides{Listen: "0.0.0.0:9300", MySQLAddress: "127.0.0.1:3306"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ListenAddr != "0.0.0.0:9300" || opts.Addr != "127.0.0.1:3306" {
		t.Errorf("listen %s, mysql %s: the overrides were not applied", cfg.ListenAddr, opts.Addr)
	}
	// Peers still dial the configured addresses.
	if len(cfg.Peers) != 1 || cfg.Peers[0].URL != "http://10.0.0.2:9300" {
		t.Errorf("peers %+v", cfg.Peers)
	}
	for _, ov := range []Overrides{{Listen: "9300"}, {MySQLAddress: "db.local"}} {
		if _, _, err := FromConfig(c, "orders", "east", ov); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", ov, err)
		}
	}

	// With TLS, the certificate is still checked against the configured
	// host, not the local address dialled instead.
	c.Groups[0].Sites[0].MySQL.Address = "east-db.orders.svc:3306"
	c.Groups[0].TLS = configs.TLS{Enabled: true}
	_, opts, err = FromConfig(c, "orders", "east", Overrides{MySQLAddress: "127.0.0.1:3306"})
	if err != nil {
		t.Fatal(err)
	}
	if opts.TLS == nil || opts.TLS.ServerName != "east-db.orders.svc" {
		t.Errorf("TLS %+v, want ServerName east-db.orders.svc", opts.TLS)
	}
	c.Groups[0].TLS.ServerName = "mysql.example"
	if _, opts, err = FromConfig(c, "orders", "east", Overrides{MySQLAddress: "127.0.0.1:3306"}); err != nil || opts.TLS.ServerName != "mysql.example" {
		t.Errorf("configured tls.serverName not kept: %+v, %v", opts.TLS, err)
	}
	c.Groups[0].TLS.ServerName = ""
	if _, opts, err = FromConfig(c, "orders", "east", Overrides{}); err != nil || opts.TLS.ServerName != "" {
		t.Errorf("without an override the driver derives the name from the address: %+v, %v", opts.TLS, err)
	}
}

// sidecarOnlyConfig loads, as the sidecar does, a two-site group whose
// API token, kubeconfig and daemon accounts are absent, with only the view
// key and the sidecar account's password written (view.key holds key).
func sidecarOnlyConfig(t *testing.T, key string) *configs.Config {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"view.key": key + "\n", "sidecar.pw": "sidecarpw\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := configs.ParseSidecar(`
daemon:
  apiTokenFile: absent/api.token
  viewSigningKeyFile: view.key
clusters:
  - name: west
    kubeconfig: absent/west.kubeconfig
groups:
  - name: orders
    engine: mariadb
    credentials:
      admin: {user: failoverd, passwordFile: absent/admin.pw}
      replication: {user: repl, passwordFile: absent/repl.pw}
      sidecar: {user: failoverd_sidecar, passwordFile: sidecar.pw}
    sidecar: {leaseTimeout: 4s, checkInterval: 500ms}
    sites:
      - name: east
        mysql: {address: 10.0.0.1:3306}
        sidecar: {address: 10.0.0.1:9300}
      - name: west
        mysql: {address: 10.0.0.2:3306}
        sidecar: {address: 10.0.0.2:9300}
`, dir, "orders", "east")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// FromConfig logs in with the sidecar account, whose password and the view
// key are the only secrets it reads: a configuration loaded for the sidecar
// (configs.ParseSidecar) whose API token, kubeconfig and daemon accounts
// are absent builds a working sidecar.
func TestFromConfigReadsOnlyItsOwnSecrets(t *testing.T) {
	const key = "s3cret-view-key-of-at-least-32-bytes"
	cfg, opts, err := FromConfig(sidecarOnlyConfig(t, key), "orders", "east", Overrides{})
	if err != nil {
		t.Fatalf("FromConfig read a secret it does not use: %v", err)
	}
	if string(cfg.Key) != key || opts.User != "failoverd_sidecar" || opts.Password != "sidecarpw" {
		t.Errorf("key %q, account %s/%s: want the view key and the sidecar account", cfg.Key, opts.User, opts.Password)
	}
}

// TestFromConfigRefusesAShortViewKey guards a sidecar against trusting views
// signed with a key the daemon itself would refuse to start with.
func TestFromConfigRefusesAShortViewKey(t *testing.T) {
	_, _, err := FromConfig(sidecarOnlyConfig(t, "short"), "orders", "east", Overrides{})
	if !errors.Is(err, ErrShortViewKey) || !strings.Contains(err.Error(), "fewer than 32") {
		t.Fatalf("a 5-byte view key: got %v, want ErrShortViewKey naming the minimum", err)
	}
}

// TestFenceBoundFitsTheDaemonsLeaseMargin: the daemon's lease proof waits
// sitepair.LeaseMargin past the lease for the sidecar's fence and the
// SIGKILL after it; a fence bound outgrowing half of it would let the proof
// come before the old primary has stopped acknowledging.
func TestFenceBoundFitsTheDaemonsLeaseMargin(t *testing.T) {
	if 2*maxFenceTimeout > sitepair.LeaseMargin {
		t.Fatalf("fence bound %v leaves less than itself of the daemon's lease margin %v", maxFenceTimeout, sitepair.LeaseMargin)
	}
}
