package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/configs"
)

// clientConfig writes a daemon configuration naming listen and a token
// file (relative: resolved against the file's directory) beside it, with a
// group whose password file does not exist: a client reads only the daemon
// section.
func clientConfig(t *testing.T, listen, extraDaemon string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "api.token"), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`daemon:
  listen: %s
  apiTokenFile: api.token
%sgroups:
  - name: orders
    credentials:
      admin: {user: failoverd, passwordFile: /nonexistent/admin.password}
    sites:
      - name: a
        mysql: {address: a:3306}
`, listen, extraDaemon)
	f := filepath.Join(dir, "failoverd.yaml")
	if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// -c gives the client commands the daemon's URL (daemon.listen, a wildcard
// reached on the loopback) and its token (daemon.apiTokenFile), as
// patronictl -c does; --server and FAILOVERD_SERVER still override it; a
// file named by -c that cannot be read is an error (exit 2), a missing
// default file is not.
func TestClientCommandsReadTheDaemonConfig(t *testing.T) {
	ctl := &ackControl{}
	srv := httptest.NewServer(api.Handler(api.Options{Control: ctl, Token: "tok"}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	cfg := clientConfig(t, "0.0.0.0:"+port, "")

	if code, out, errOut := runCLI(t, "acknowledge", "orders", "-c", cfg); code != 0 || !strings.Contains(out, "orders acknowledged") {
		t.Fatalf("acknowledge -c: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "status", "orders", "-c", cfg); code != 0 || !strings.Contains(out, "orders") {
		t.Fatalf("status -c: exit %d %q %q", code, out, errOut)
	}
	// Flags and the environment win over the file.
	wrong := clientConfig(t, "127.0.0.1:1", "")
	if code, _, errOut := runCLI(t, "acknowledge", "orders", "-c", wrong, "--server", srv.URL); code != 0 {
		t.Fatalf("--server did not override daemon.listen: exit %d %q", code, errOut)
	}
	other := filepath.Join(t.TempDir(), "other.token")
	if err := os.WriteFile(other, []byte("other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "acknowledge", "orders", "-c", cfg, "--token-file", other); code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("--token-file did not override daemon.apiTokenFile: exit %d %q", code, errOut)
	}

	// A file named by -c must be usable.
	if code, _, errOut := runCLI(t, "status", "-c", filepath.Join(t.TempDir(), "missing.yaml")); code != 2 || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("status -c missing file: exit %d %q, want 2 naming it", code, errOut)
	}
	bad := writeConfig(t, "daemon:\n  listen: [not, a, string]\ngroups: []\n")
	if code, _, errOut := runCLI(t, "status", "-c", bad); code != 2 || !strings.Contains(errOut, "daemon.listen") {
		t.Fatalf("status -c with a broken daemon section: exit %d %q, want 2 naming daemon.listen", code, errOut)
	}
	// The default file is optional: without it, no token is found and the
	// refusal says where it looked.
	if code, _, errOut := runCLI(t, "acknowledge", "orders", "--server", srv.URL); code != 2 ||
		!strings.Contains(errOut, "--token-file") || !strings.Contains(errOut, "/etc/failoverd/failoverd.yaml does not exist") {
		t.Fatalf("acknowledge without any token: exit %d %q", code, errOut)
	}
	t.Setenv("FAILOVERD_SERVER", srv.URL)
	if code, _, errOut := runCLI(t, "acknowledge", "orders", "-c", wrong); code != 0 {
		t.Fatalf("FAILOVERD_SERVER did not override daemon.listen: exit %d %q", code, errOut)
	}
}

// With daemon.tls the client dials https and trusts the daemon's own
// certificate; with daemon.tls.clientCAFile it presents that certificate
// as its client certificate (as patronictl falls back to the REST API's).
func TestClientConfigTLS(t *testing.T) {
	dir := t.TempDir()
	pki(t, dir)
	p := func(n string) string { return filepath.Join(dir, n) }
	// The server's certificate doubles as the client's: it carries both
	// usages and the CA in clientCAFile signed it.
	srvTLS, err := configs.APITLS{CertFile: p("server.pem"), KeyFile: p("server-key.pem"), ClientCAFile: p("ca.pem")}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.Handler(api.Options{Control: statusOnly{}}), TLSConfig: srvTLS, ReadHeaderTimeout: time.Second,
		ErrorLog: log.New(io.Discard, "", 0)} // the refused handshake below is expected
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	tlsSection := fmt.Sprintf("  tls: {certFile: %s, keyFile: %s, clientCAFile: %s}\n", p("server.pem"), p("server-key.pem"), p("ca.pem"))
	cfg := clientConfig(t, ln.Addr().String(), tlsSection)
	if code, out, errOut := runCLI(t, "status", "-c", cfg); code != 0 || !strings.Contains(out, "tls-daemon") {
		t.Fatalf("status -c over mutual TLS: exit %d %q %q", code, out, errOut)
	}
	// A host the certificate does not name: the refusal says which
	// certificate was trusted and what to give instead.
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	code, _, errOut := runCLI(t, "status", "-c", cfg, "--server", "https://localhost:"+port)
	if code != 3 || !strings.Contains(errOut, "checked against daemon.tls.certFile of "+cfg) || !strings.Contains(errOut, "--ca-file") {
		t.Fatalf("status -c with a host the certificate does not name: exit %d %q", code, errOut)
	}
}

type adminFenceControl struct {
	ackControl
	confirmed []string
}

func (f *adminFenceControl) ConfirmFence(_ context.Context, group, site string, _ api.Actor) error {
	f.confirmed = append(f.confirmed, group+"/"+site)
	return nil
}

// TestAdminCommandsTakeTheAdminTokenFromConfig guards -c against sending the
// operate token for confirm-fence (and reclone) once the daemon has an admin
// token: the daemon would refuse it (403) and the runbook step would fail.
// Other commands keep the operate token.
func TestAdminCommandsTakeTheAdminTokenFromConfig(t *testing.T) {
	ctl := &adminFenceControl{}
	srv := httptest.NewServer(api.Handler(api.Options{Control: ctl, Token: "tok", AdminToken: "admin-token-0123456789"}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	cfg := clientConfig(t, "127.0.0.1:"+port, "  apiAdminTokenFile: admin.token\n")
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "admin.token"), []byte("admin-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "confirm-fence", "orders", "a", "-c", cfg); code != 0 || len(ctl.confirmed) != 1 {
		t.Fatalf("confirm-fence -c with daemon.apiAdminTokenFile: exit %d %q %q, confirmed %v", code, out, errOut, ctl.confirmed)
	}
	if code, out, errOut := runCLI(t, "acknowledge", "orders", "-c", cfg); code != 0 {
		t.Fatalf("acknowledge -c: exit %d %q %q (the operate token)", code, out, errOut)
	}
}
