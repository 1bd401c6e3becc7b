package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/failoverd/failoverd/view"
)

func TestSidecarNeedsGroupSiteAndDaemonURL(t *testing.T) {
	f := "../../configs/examples/three-site-mariadb-k8s.yaml"
	for _, args := range [][]string{
		{"sidecar", "-c", f},
		{"sidecar", "-c", f, "--group", "payments", "--site", "east"},
		{"sidecar", "-c", f, "--site", "east", "--daemon-url", "http://127.0.0.1:1"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != 2 || !strings.Contains(errOut, "--group, --site and at least one --daemon-url are required") {
			t.Errorf("%v: exit %d, stderr:\n%s", args, code, errOut)
		}
	}
}

func TestSidecarFlagsFromTheEnvironment(t *testing.T) {
	t.Setenv("FAILOVERD_CONFIG", "../../configs/examples/three-site-mariadb-k8s.yaml")
	t.Setenv("FAILOVERD_GROUP", "payments")
	t.Setenv("FAILOVERD_SITE", "south")
	t.Setenv("FAILOVERD_DAEMON_URL", "http://127.0.0.1:1 http://127.0.0.1:2")
	code, _, errOut := runCLI(t, "sidecar")
	if code != 2 || !strings.Contains(errOut, `site "south": sidecar: unknown site`) {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}

func TestSidecarRefusesUnknownGroupOrSite(t *testing.T) {
	f := "../../configs/examples/three-site-mariadb-k8s.yaml"
	for _, tc := range []struct{ group, site, want string }{
		{"nope", "east", `group "nope": sidecar: unknown group`},
		{"payments", "south", `site "south": sidecar: unknown site`},
		{"payments", "dr", "sidecar: site has no sidecar address"},
	} {
		code, _, errOut := runCLI(t, "sidecar", "-c", f, "--group", tc.group, "--site", tc.site, "--daemon-url", "http://127.0.0.1:1")
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s/%s: exit %d, stderr:\n%s", tc.group, tc.site, code, errOut)
		}
	}
}

// syncBuffer is a goroutine-safe stderr for a command that runs in the background.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// acceptCounter is a TCP listener standing for the local MySQL: it counts
// connections and closes them (the sidecar sees a dead server).
func acceptCounter(t *testing.T) (addr string, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// TestSidecarServesReportsAndStopsOnSIGTERM runs the whole subcommand
// in-process against a STAND-IN daemon (httptest; the real report endpoint
// belongs to package daemon). The configuration names addresses the sidecar
// cannot use itself (a Service name to listen on, a proxy in front of
// MySQL); --listen and --mysql-address (or their FAILOVERD_* variables)
// give the local ones.
func TestSidecarServesReportsAndStopsOnSIGTERM(t *testing.T) {
	for _, viaEnv := range []bool{false, true} {
		name := "flags"
		if viaEnv {
			name = "environment"
		}
		t.Run(name, func(t *testing.T) { runSidecarCmd(t, viaEnv, false) })
	}
}

// The sidecar starts, serves and reports with nothing but its own secrets
// (the view key and the sidecar account's password, as the split Secret of
// deploy/kubernetes holds): the API token, the kubeconfig and the daemon's
// and replication accounts' files the configuration names are absent.
func TestSidecarStartsWithOnlyItsOwnSecrets(t *testing.T) {
	runSidecarCmd(t, false, true)
}

// ownSecretsOnly is the configuration's part naming secrets the sidecar
// never reads (none of these files exists) and the sidecar account.
const ownSecretsOnly = `daemon:
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
`

func runSidecarCmd(t *testing.T, viaEnv, ownOnly bool) {
	dir := t.TempDir()
	key := "sidecar-test-view-key-0123456789abcdef"
	files := map[string]string{"view.key": key, "admin.pw": "pw", "repl.pw": "pw"}
	if ownOnly {
		files = map[string]string{"view.key": key, "sidecar.pw": "pw"}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var reports []view.Report
	daemon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != view.ReportPath || !view.VerifyBytes(body, r.Header.Get(view.SignatureHeader), []byte(key)) {
			http.Error(w, "bad report", http.StatusUnauthorized)
			return
		}
		var rep view.Report
		_ = json.Unmarshal(body, &rep)
		mu.Lock()
		reports = append(reports, rep)
		mu.Unlock()
		sv, _ := view.Sign(view.View{Group: "orders", Epoch: 5, ActiveSite: "west"}, []byte(key))
		_ = json.NewEncoder(w).Encode(sv)
	}))
	defer daemon.Close()
	listenAddr := freeAddr(t)
	localMySQL, accepted := acceptCounter(t)
	proxied, proxiedAccepted := acceptCounter(t) // the configured mysql.address: must stay unused
	cfg := filepath.Join(dir, "failoverd.yaml")
	yaml := `daemon:
  viewSigningKeyFile: view.key
groups:
  - name: orders
    engine: mariadb
    credentials:
      admin: {user: failoverd, passwordFile: admin.pw}
      replication: {user: repl, passwordFile: repl.pw}
    sidecar: {leaseTimeout: 2s, checkInterval: 100ms}
    sites:
      - name: east
        mysql: {address: ` + proxied + `}
        sidecar: {address: east-sidecar.orders.svc.invalid:9300}
      - name: west
        mysql: {address: ` + freeAddr(t) + `}
        sidecar: {address: ` + freeAddr(t) + `}
`
	if ownOnly {
		yaml = ownSecretsOnly + yaml[strings.Index(yaml, "    sidecar: {leaseTimeout"):]
	}
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"sidecar", "-c", cfg, "--group", "orders", "--site", "east", "--daemon-url", daemon.URL,
		"--mysqld-pid-file", filepath.Join(dir, "absent.pid")}
	if viaEnv {
		t.Setenv("FAILOVERD_LISTEN", listenAddr)
		t.Setenv("FAILOVERD_MYSQL_ADDRESS", localMySQL)
	} else {
		args = append(args, "--listen", listenAddr, "--mysql-address", localMySQL)
	}
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- execute(args, &stdout, &stderr) }()
	get := func(path string) (string, bool) {
		resp, err := http.Get("http://" + listenAddr + path)
		if err != nil {
			return "", false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.StatusCode == http.StatusOK
	}
	deadline := time.Now().Add(30 * time.Second) // safety net, not a timing assertion
	for {
		ping, ok := get("/peer/ping")
		mu.Lock()
		n := len(reports)
		mu.Unlock()
		if ok && strings.Contains(ping, `"epoch":5`) && n >= 2 && accepted() > 0 {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("sidecar exited early with %d:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar never served the view on --listen or never dialled --mysql-address; stderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := proxiedAccepted(); n != 0 {
		t.Errorf("the configured mysql.address was dialled %d times despite the override", n)
	}
	if body, _ := get("/metrics"); !strings.Contains(body, "failoverd_sidecar_view_epoch 5") {
		t.Errorf("metrics:\n%s", body)
	}
	mu.Lock()
	last := reports[len(reports)-1]
	mu.Unlock()
	if last.Group != "orders" || last.Site != "east" || last.Epoch != 5 || last.MySQLdUp || last.CanKill {
		t.Errorf("report %+v (mysqld is down, the pid file absent)", last)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after SIGTERM:\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("sidecar did not stop on SIGTERM")
	}
	for _, key := range []string{`"msg":"sidecar.started"`, `"msg":"sidecar.view_adopted"`, `"msg":"sidecar.stopped"`} {
		if !strings.Contains(stderr.String(), key) {
			t.Errorf("logs lack %s:\n%s", key, stderr.String())
		}
	}
	if !strings.Contains(stderr.String(), `"listen":"`+listenAddr+`"`) {
		t.Errorf("sidecar.started does not log the --listen address:\n%s", stderr.String())
	}
}

func TestSidecarRefusesMalformedOverrides(t *testing.T) {
	f := "../../configs/examples/three-site-mariadb-k8s.yaml"
	for _, tc := range []struct{ flag, value string }{{"--listen", "9300"}, {"--mysql-address", "db.local"}} {
		code, _, errOut := runCLI(t, "sidecar", "-c", f, "--group", "payments", "--site", "east",
			"--daemon-url", "http://127.0.0.1:1", tc.flag, tc.value)
		if code != 2 || !strings.Contains(errOut, tc.flag+` "`+tc.value+`": write host:port`) {
			t.Errorf("%s %s: exit %d, stderr:\n%s", tc.flag, tc.value, code, errOut)
		}
	}
}

func TestSidecarRefusesPartialPeerTLS(t *testing.T) {
	f := "../../configs/examples/three-site-mariadb-k8s.yaml"
	code, _, errOut := runCLI(t, "sidecar", "-c", f, "--group", "payments", "--site", "east",
		"--daemon-url", "http://127.0.0.1:1", "--peer-ca-file", "ca.pem")
	if code != 2 || !strings.Contains(errOut, "--peer-cert-file is missing") || !strings.Contains(errOut, "--peer-key-file is missing") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

// Without its own secret the sidecar still refuses to start (exit 1),
// naming the field and the file.
func TestSidecarRefusesWithoutItsOwnSecret(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "view.key"), []byte(strings.Repeat("k", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "failoverd.yaml")
	yaml := ownSecretsOnly + `    sites:
      - name: east
        mysql: {address: 127.0.0.1:3306}
        sidecar: {address: 127.0.0.1:9300}
      - name: west
        mysql: {address: 127.0.0.1:3307}
        sidecar: {address: 127.0.0.1:9301}
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "sidecar", "-c", cfg, "--group", "orders", "--site", "east", "--daemon-url", "http://127.0.0.1:1")
	want := "groups[0].credentials.sidecar.passwordFile: cannot read " + filepath.Join(dir, "sidecar.pw")
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stderr lacks %q:\n%s", code, want, errOut)
	}
	for _, other := range []string{"apiTokenFile", "kubeconfig", "credentials.admin", "credentials.replication"} {
		if strings.Contains(errOut, other) {
			t.Errorf("the sidecar complains about %s, which it does not use:\n%s", other, errOut)
		}
	}
}
