package configs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
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
)

// writeCert writes a self-signed certificate and its key as PEM files
// name.crt and name.key into dir.
func writeCert(t *testing.T, dir, name string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		DNSNames:              []string{"localhost"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{
		name + ".crt": {Type: "CERTIFICATE", Bytes: der},
		name + ".key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// withAPITLS returns validYAML with a daemon.tls section of the given lines.
func withAPITLS(lines ...string) string {
	tlsSection := "  tls:\n"
	for _, l := range lines {
		tlsSection += "    " + l + "\n"
	}
	return strings.Replace(validYAML, "  listen: 127.0.0.1:8080\n", "  listen: 127.0.0.1:8080\n"+tlsSection, 1)
}

func TestAPITLS(t *testing.T) {
	dir := secrets(t)
	writeCert(t, dir, "server")
	writeCert(t, dir, "clients")
	cfg, err := Parse(withAPITLS("certFile: server.crt", "keyFile: server.key", "clientCAFile: clients.crt"), dir)
	if err != nil {
		t.Fatal(err)
	}
	at := cfg.Daemon.TLS
	if !at.Enabled() || at.CertFile != filepath.Join(dir, "server.crt") || at.KeyFile != filepath.Join(dir, "server.key") ||
		at.ClientCAFile != filepath.Join(dir, "clients.crt") {
		t.Fatalf("daemon.tls = %+v, want enabled with paths resolved against %s", at, dir)
	}
	sc, err := at.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Certificates) != 1 || sc.ClientAuth != tls.RequireAndVerifyClientCert || sc.ClientCAs == nil || sc.MinVersion != tls.VersionTLS12 {
		t.Errorf("server TLS config %+v", sc)
	}

	cfg, err = Parse(withAPITLS("certFile: server.crt", "keyFile: server.key"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if sc, err := cfg.Daemon.TLS.ServerConfig(); err != nil || sc.ClientAuth != tls.NoClientCert {
		t.Errorf("without clientCAFile: %+v, %v; want no client certificates asked", sc, err)
	}

	cfg, err = Parse(validYAML, dir)
	if err != nil {
		t.Fatal(err)
	}
	if sc, err := cfg.Daemon.TLS.ServerConfig(); cfg.Daemon.TLS.Enabled() || sc != nil || err != nil {
		t.Errorf("no daemon.tls: enabled %v, %v, %v; want plain HTTP", cfg.Daemon.TLS.Enabled(), sc, err)
	}
}

func TestAPITLSProblems(t *testing.T) {
	dir := secrets(t)
	writeCert(t, dir, "server")
	writeCert(t, dir, "other")
	if err := os.WriteFile(filepath.Join(dir, "garbage.pem"), []byte("not pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		lines []string
		path  string
		words string
	}{
		{"cert without key", []string{"certFile: server.crt"}, "daemon.tls.keyFile", "set both or neither"},
		{"key without cert", []string{"keyFile: server.key"}, "daemon.tls.keyFile", "set both or neither"},
		{"client CA alone", []string{"clientCAFile: server.crt"}, "daemon.tls.clientCAFile", "without certFile and keyFile"},
		{"missing cert file", []string{"certFile: nope.crt", "keyFile: server.key"}, "daemon.tls.certFile", "cannot read"},
		{"missing client CA file", []string{"certFile: server.crt", "keyFile: server.key", "clientCAFile: nope.crt"}, "daemon.tls.clientCAFile", "cannot read"},
		{"key of another certificate", []string{"certFile: server.crt", "keyFile: other.key"}, "daemon.tls.certFile", "no certificate and matching key"},
		{"client CA not PEM", []string{"certFile: server.crt", "keyFile: server.key", "clientCAFile: garbage.pem"}, "daemon.tls.clientCAFile", "no PEM certificate"},
		{"unknown key", []string{"caFile: server.crt"}, "daemon.tls.caFile", "did you mean"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(withAPITLS(tc.lines...), dir)
			if err == nil {
				t.Fatal("accepted")
			}
			list := err.(*Problems).List
			p := findProblem(t, list, tc.path, tc.words)
			if p.Line == 0 {
				t.Errorf("problem without a position: %s", p)
			}
		})
	}
}

func TestAPITLSFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "server")
	t.Setenv("FAILOVERD_DAEMON_TLS_CERTFILE", filepath.Join(dir, "server.crt"))
	t.Setenv("FAILOVERD_DAEMON_TLS_KEYFILE", filepath.Join(dir, "server.key"))
	cfg, err := Load("examples/two-site-mysql.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Daemon.TLS.Enabled() || cfg.Daemon.TLS.CertFile != filepath.Join(dir, "server.crt") {
		t.Errorf("daemon.tls from the environment: %+v", cfg.Daemon.TLS)
	}
}

// TestTLSClientConfig: a group's MySQL client TLS (poller, daemon actions,
// sidecar) is off unless enabled, uses the system roots without a CA file,
// and fails on a CA file, certificate or key it cannot use.
func TestTLSClientConfig(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "db")
	cert, key := filepath.Join(dir, "db.crt"), filepath.Join(dir, "db.key")
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}

	if c, err := (TLS{CAFile: cert}).ClientConfig(); c != nil || err != nil {
		t.Errorf("disabled TLS: %v, %v; want nil, nil", c, err)
	}
	c, err := TLS{Enabled: true, CAFile: cert, CertFile: cert, KeyFile: key, ServerName: "db.example"}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.RootCAs == nil || len(c.Certificates) != 1 || c.ServerName != "db.example" || c.InsecureSkipVerify || c.MinVersion != tls.VersionTLS12 {
		t.Errorf("TLS config: roots %v, %d certs, server name %q, skip verify %v, min version %x",
			c.RootCAs != nil, len(c.Certificates), c.ServerName, c.InsecureSkipVerify, c.MinVersion)
	}
	if c, err := (TLS{Enabled: true}).ClientConfig(); err != nil || c.RootCAs != nil {
		t.Errorf("TLS without CA must use the system roots: %v, %v", c, err)
	}
	for name, bad := range map[string]TLS{
		"missing CA": {Enabled: true, CAFile: filepath.Join(dir, "none.pem")},
		"junk CA":    {Enabled: true, CAFile: junk},
		"bad pair":   {Enabled: true, CertFile: cert, KeyFile: junk},
	} {
		if _, err := bad.ClientConfig(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := (TLS{Enabled: true, CAFile: junk}).ClientConfig(); !errors.Is(err, ErrInvalid) {
		t.Errorf("junk CA: %v, want ErrInvalid", err)
	}
}
