package sidecar

// A real-server test (both engines, test/testenv) of the sidecar built as
// `failoverd sidecar` builds it, from a configuration that names the
// daemon's secrets but with only its own on disk.

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/test/testenv"
)

// TestRealSidecarWithOnlyItsOwnSecrets: with the view key and the
// documented sidecar account's password as its only files (the API token,
// the kubeconfig and the daemon's and replication accounts' files are
// absent), the sidecar loads (configs.ParseSidecar, FromConfig), lifts the
// boot read-only as the sidecar account, serves /health as the primary,
// and fences its real server when the daemon's view names another site.
func TestRealSidecarWithOnlyItsOwnSecrets(t *testing.T) {
	testenv.ForEachEngine(t, testRealSidecarWithOnlyItsOwnSecrets)
}

func testRealSidecarWithOnlyItsOwnSecrets(t *testing.T, e testenv.Engine) {
	m := startSite(t, e, "")
	d := newStandInDaemon(t)
	d.set(sign(t, 1, "east"))
	dir := t.TempDir()
	for name, content := range map[string]string{"view.key": string(testKey) + "\n", "sidecar.pw": testenv.SidecarPassword + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln := listen(t)
	c, err := configs.ParseSidecar(`
daemon:
  apiTokenFile: absent/api.token
  viewSigningKeyFile: view.key
clusters:
  - name: west
    kubeconfig: absent/west.kubeconfig
groups:
  - name: `+testGroup+`
    engine: `+string(e)+`
    credentials:
      admin: {user: `+testenv.DaemonUser+`, passwordFile: absent/admin.pw}
      replication: {user: `+testenv.ReplUser+`, passwordFile: absent/repl.pw}
      sidecar: {user: `+testenv.SidecarUser+`, passwordFile: sidecar.pw}
    sidecar: {leaseTimeout: `+realLease.String()+`, checkInterval: `+realCheck.String()+`}
    sites:
      - name: east
        mysql: {address: `+m.Addr()+`}
        sidecar: {address: `+ln.Addr().String()+`}
      - name: west
        mysql: {address: 127.0.0.1:1}
        sidecar: {address: `+strings.TrimPrefix(closedURL(t), "http://")+`}
`, dir, testGroup, "east")
	if err != nil {
		t.Fatalf("the sidecar's configuration does not load with only its own secrets: %v", err)
	}
	cfg, opts, err := FromConfig(c, testGroup, "east", Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.DaemonURLs = []string{d.URL()}
	log := slog.New(slog.NewJSONHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts.Logger = log
	my := DialMySQL(opts)
	t.Cleanup(func() { _ = CloseMySQL(my) })
	s := startReal(t, cfg, Options{MySQL: my, Logger: log}, ln)

	health := func() int {
		resp, err := http.Get("http://" + ln.Addr().String() + "/health?role=primary")
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	waitFor(t, "the boot unfence by the sidecar account", func() bool { return readOnlyIs(t, m, false) })
	waitFor(t, "/health?role=primary 200", func() bool { return health() == http.StatusOK })

	d.set(sign(t, 2, "west"))
	waitFor(t, "the fence", func() bool { return readOnlyIs(t, m, true) })
	waitFor(t, "the fence to be counted", func() bool {
		return metric(t, s, `failoverd_sidecar_fences_total{reason="view-names-other"}`) == "1"
	})
	appWriteRefused(t, m)
	if code := health(); code != http.StatusServiceUnavailable {
		t.Errorf("/health?role=primary = %d after the fence, want 503", code)
	}
	if r, ok := d.lastReport(); !ok || d.rejected() != 0 {
		t.Errorf("reports: last %+v (%v), %d rejected signatures", r, ok, d.rejected())
	}
}
