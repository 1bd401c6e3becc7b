package configs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// LoadDaemonSection gives a client the daemon section as Load would
// (environment overrides, defaults, paths relative to the file) without
// validating the groups or reading any secret, and reports problems of
// the daemon section only.
func TestLoadDaemonSectionReadsOnlyTheDaemonSection(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "failoverd.yaml")
	yaml := `daemon:
  apiTokenFile: secrets/api.token
  tls: {certFile: tls.crt, keyFile: tls.key}
groups:
  - name: orders
    pollIntervall: 1s
    credentials: {admin: {passwordFile: /nonexistent}}
`
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAILOVERD_DAEMON_LISTEN", "127.0.0.1:9443")
	d, err := LoadDaemonSection(f)
	if err != nil {
		t.Fatalf("groups' problems must not stop a client: %v", err)
	}
	if d.Listen != "127.0.0.1:9443" || d.APITokenFile != filepath.Join(dir, "secrets/api.token") ||
		d.TLS.CertFile != filepath.Join(dir, "tls.crt") || !d.TLS.Enabled() || d.MaxPause == 0 {
		t.Fatalf("daemon section: %+v", d)
	}

	if err := os.WriteFile(f, []byte("daemon:\n  lisen: x\n  maxPause: soon\ngroups: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadDaemonSection(f)
	var p *Problems
	if !errors.As(err, &p) || len(p.List) != 2 || !strings.Contains(err.Error(), "daemon.lisen: unknown key") || !strings.Contains(err.Error(), "daemon.maxPause") {
		t.Fatalf("want the daemon section's two problems, got %v", err)
	}
	if _, err := LoadDaemonSection(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}
