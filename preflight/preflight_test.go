package preflight

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
)

// Secrets long enough for every check.
const (
	goodToken = "0123456789abcdef"                 // MinAPITokenBytes
	goodKey   = "0123456789abcdef0123456789abcdef" // MinViewKeyBytes
)

// base is a valid configuration naming every secret the daemon reads; the
// files are written by setup with the content of files.
const base = `daemon:
  listen: 127.0.0.1:8080
  apiTokenFile: api.token
  viewSigningKeyFile: view.key
groups:
  - name: orders
    credentials:
      admin: {user: failoverd, passwordFile: admin.pw}
      replication: {user: repl, passwordFile: repl.pw}
    cache: {engine: redis, passwordFile: cache.pw}
    sites:
      - name: east
        mysql: {address: db-east:3306}
        cache: {address: cache-east:6379}
        sidecar: {address: east:9300}
      - name: west
        mysql: {address: db-west:3306}
        cache: {address: cache-west:6379}
        sidecar: {address: west:9300}
`

// goodFiles are base's secret files, good ones, mode 0600.
func goodFiles() map[string]string {
	return map[string]string{"api.token": goodToken + "\n", "view.key": goodKey + "\n", "admin.pw": "pw\n", "repl.pw": "pw\n", "cache.pw": "pw\n"}
}

// check writes files (0600) into a temporary directory, loads yaml from
// there and runs Check on it.
func check(t *testing.T, yaml string, files map[string]string) ([]configs.Problem, []configs.Problem) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := configs.Parse(yaml, dir)
	if err != nil {
		t.Fatalf("configs.Parse: %v", err)
	}
	warnings, err := Check(cfg)
	if err == nil {
		return nil, warnings
	}
	var ps *configs.Problems
	if !errors.As(err, &ps) || !errors.Is(err, configs.ErrInvalid) {
		t.Fatalf("error is not a *configs.Problems wrapping ErrInvalid: %v", err)
	}
	return ps.List, warnings
}

// find returns the problem at path whose message has every word, or fails.
func find(t *testing.T, list []configs.Problem, path string, words ...string) {
	t.Helper()
next:
	for _, p := range list {
		if p.Path != path {
			continue
		}
		for _, w := range words {
			if !strings.Contains(p.Message, w) {
				continue next
			}
		}
		if p.Line == 0 {
			t.Errorf("%s: no position in the file: %v", path, p)
		}
		return
	}
	t.Errorf("nothing at %s mentioning %q in:\n%v", path, words, (&configs.Problems{List: list}).Error())
}

// TestGoodSecretsPass guards against refusing what the daemon starts with:
// base with secrets exactly at the minimum lengths, mode 0600, passes
// without a warning.
func TestGoodSecretsPass(t *testing.T) {
	problems, warnings := check(t, base, goodFiles())
	if len(problems)+len(warnings) != 0 {
		t.Fatalf("problems %v, warnings %v", problems, warnings)
	}
}

// TestSecretsRunRefusesAreRefused covers each secret the issue found
// validate accepting while the daemon refused or could not use it: an empty
// token file, empty password files, a 3-byte API token, a 5-byte view
// signing key. Each problem names the key and the fix.
func TestSecretsRunRefusesAreRefused(t *testing.T) {
	cases := []struct {
		name, file, content, path string
		words                     []string
	}{
		{"empty token file", "api.token", "\n", "daemon.apiTokenFile", []string{"is empty", "openssl rand -hex 32"}},
		{"3-byte token", "api.token", "abc\n", "daemon.apiTokenFile", []string{"holds 3 bytes, fewer than the 16", "openssl rand"}},
		{"5-byte view key", "view.key", "abcde", "daemon.viewSigningKeyFile", []string{"holds 5 bytes, fewer than the 32", "every sidecar reads the same file"}},
		{"31-byte view key", "view.key", goodKey[1:], "daemon.viewSigningKeyFile", []string{"holds 31 bytes"}},
		{"empty admin password", "admin.pw", "", "groups[0].credentials.admin.passwordFile", []string{"is empty", `account "failoverd"`}},
		{"empty replication password", "repl.pw", "\r\n", "groups[0].credentials.replication.passwordFile", []string{"is empty", `account "repl"`}},
		{"empty cache password", "cache.pw", "", "groups[0].cache.passwordFile", []string{"is empty", "AUTH password"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := goodFiles()
			files[c.file] = c.content
			problems, _ := check(t, base, files)
			find(t, problems, c.path, c.words...)
			if len(problems) != 1 {
				t.Errorf("%d problems, want 1: %v", len(problems), problems)
			}
		})
	}
}

// TestEveryProblemAtOnce guards against fixing one file at a time: every
// bad secret is reported in one run, in file order.
func TestEveryProblemAtOnce(t *testing.T) {
	problems, _ := check(t, base, map[string]string{"api.token": "x", "view.key": "y", "admin.pw": "", "repl.pw": "", "cache.pw": ""})
	var paths []string
	for _, p := range problems {
		paths = append(paths, p.Path)
	}
	want := "daemon.apiTokenFile daemon.viewSigningKeyFile groups[0].credentials.admin.passwordFile groups[0].credentials.replication.passwordFile groups[0].cache.passwordFile"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("problems at\n  %s\nwant\n  %s", got, want)
	}
}

// TestWorldReadableSecretWarns guards the secrets' mode: a secret file
// every user of the host can read is a warning naming it and the fix;
// group-readable (the documented root:failoverd 0640) is not.
func TestWorldReadableSecretWarns(t *testing.T) {
	dir := t.TempDir()
	for name, content := range goodFiles() {
		mode := os.FileMode(0o640)
		if name == "repl.pw" {
			mode = 0o644
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	cfg, err := configs.Parse(base, dir)
	if err != nil {
		t.Fatal(err)
	}
	warnings, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	find(t, warnings, "groups[0].credentials.replication.passwordFile", "readable by every user of this host (mode 0644)", "chmod o-rwx")
	if len(warnings) != 1 {
		t.Errorf("%d warnings, want 1 (0640 is fine): %v", len(warnings), warnings)
	}
}

// TestPlainHTTPToTheNetworkWarns guards the API token's exposure: a
// daemon.listen other hosts can reach without daemon.tls is a warning; a
// loopback address, or HTTPS, is not.
func TestPlainHTTPToTheNetworkWarns(t *testing.T) {
	files := goodFiles()
	files["tls.crt"], files["tls.key"] = selfSigned(t)
	for _, c := range []struct {
		listen, tls string
		warns       bool
	}{
		{"0.0.0.0:8080", "", true},
		{":8080", "", true},
		{"10.1.2.3:8080", "", true},
		{"[::]:8080", "", true},
		{"failoverd.example.internal:8080", "", true},
		{"127.0.0.1:8080", "", false},
		{"127.0.0.53:8080", "", false},
		{"localhost:8080", "", false},
		{"[::1]:8080", "", false},
		{"0.0.0.0:8443", "  tls: {certFile: tls.crt, keyFile: tls.key}\n", false},
	} {
		y := strings.Replace(base, "  listen: 127.0.0.1:8080\n", "  listen: \""+c.listen+"\"\n"+c.tls, 1)
		problems, warnings := check(t, y, files)
		if len(problems) != 0 {
			t.Fatalf("%s: %v", c.listen, problems)
		}
		if c.warns {
			find(t, warnings, "daemon.listen", "plain HTTP", "daemon.tls.certFile")
		}
		if !c.warns && len(warnings) != 0 {
			t.Errorf("%s (tls %q): warned %v", c.listen, c.tls, warnings)
		}
	}
}

// TestFilesThatDoNotLoadAreRefused guards against a start that fails, or
// a failover that fails, on a file the daemon only reads later: a
// kubeconfig (its clients connect at the first routing change), the
// group's MySQL TLS files (read by the poller at start) and the etcd
// store's.
func TestFilesThatDoNotLoadAreRefused(t *testing.T) {
	files := goodFiles()
	files["junk.pem"] = "not a certificate\n"
	files["empty.kubeconfig"] = "apiVersion: v1\nkind: Config\n"
	files["good.kubeconfig"] = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
`
	clusters := `clusters:
  - name: good
    kubeconfig: good.kubeconfig
  - name: empty
    kubeconfig: empty.kubeconfig
  - name: nocontext
    kubeconfig: good.kubeconfig
    context: absent
  - name: pod
    inCluster: true
`
	y := strings.Replace(base, "groups:\n", clusters+"groups:\n", 1)
	y = strings.Replace(y, "    cache: {", "    tls: {enabled: true, caFile: junk.pem}\n    cache: {", 1)
	y = strings.Replace(y, "  viewSigningKeyFile: view.key\n", `  viewSigningKeyFile: view.key
  stateStore:
    type: etcd
    etcd: {endpoints: ["https://127.0.0.1:2379"], tls: {caFile: junk.pem}}
  leaderElection: {enabled: true, leaseDuration: 6s, renewDeadline: 4s, retryPeriod: 1s}
`, 1)
	problems, _ := check(t, y, files)
	find(t, problems, "clusters[1].kubeconfig", "does not load")
	find(t, problems, "clusters[2].kubeconfig", "does not load", `"absent"`)
	find(t, problems, "groups[0].tls.caFile", "no PEM certificate")
	find(t, problems, "daemon.stateStore.etcd.tls.caFile", "no PEM certificate")
	if len(problems) != 4 {
		t.Errorf("%d problems, want 4 (the good kubeconfig and the in-cluster one pass): %v", len(problems), problems)
	}
}

// TestOpenToNetwork pins which listen addresses count as reachable from
// other hosts.
func TestOpenToNetwork(t *testing.T) {
	for addr, want := range map[string]bool{
		":80": true, "0.0.0.0:80": true, "[::]:80": true, "192.0.2.1:80": true, "host:80": true,
		"127.0.0.1:80": false, "localhost:80": false, "[::1]:80": false, "nonsense": false,
	} {
		if got := OpenToNetwork(addr); got != want {
			t.Errorf("OpenToNetwork(%q) = %v, want %v", addr, got, want)
		}
	}
}

// selfSigned returns a PEM certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "failoverd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
}

// TestReadAndAdminTokensAreCheckedLikeTheOperateToken guards validate against
// accepting what run refuses for the optional tokens: a short read or admin
// token, and two roles sharing one token (daemon.New refuses both).
func TestReadAndAdminTokensAreCheckedLikeTheOperateToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	operate := write("api.token", strings.Repeat("o", 32))
	cfg := &configs.Config{Daemon: configs.Daemon{
		APITokenFile:      operate,
		APIReadTokenFile:  write("read.token", "short"),
		APIAdminTokenFile: write("admin.token", strings.Repeat("o", 32)),
	}}
	_, err := Check(cfg)
	if err == nil {
		t.Fatal("a short read token and an admin token equal to the operate token passed")
	}
	for _, want := range []string{"daemon.apiReadTokenFile", "fewer than the 16", "daemon.apiAdminTokenFile", "same token as daemon.apiTokenFile"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
}
