package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/view"
)

// pki writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA, into dir.
func pki(t *testing.T, dir string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.pem", "CERTIFICATE", caDER)
	for i, name := range []string{"server", "client"} {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		write(name+".pem", "CERTIFICATE", der)
		write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
}

type statusOnly struct{ api.Control }

func (statusOnly) Snapshot() status.Snapshot {
	return status.Snapshot{Daemon: status.Daemon{Identity: "tls-daemon", Leader: true, Ready: true},
		Groups: []status.Group{{Name: "orders", Epoch: 1, ActiveSite: "a", Class: status.ClassHealthy, Reason: "healthy"}}}
}

func (statusOnly) ActiveSite(string) (view.Signed, error) { return view.Signed{}, nil }

// The API over HTTPS with client certificates (daemon.tls with
// clientCAFile): the CLI reaches it with --ca-file and its certificate, and
// is turned away without one.
func TestStatusOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	pki(t, dir)
	p := func(n string) string { return filepath.Join(dir, n) }
	srvTLS, err := configs.APITLS{CertFile: p("server.pem"), KeyFile: p("server-key.pem"), ClientCAFile: p("ca.pem")}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.Handler(api.Options{Control: statusOnly{}}), TLSConfig: srvTLS, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "https://" + ln.Addr().String()

	code, out, errOut := runCLI(t, "status", "--server", url, "--ca-file", p("ca.pem"), "--cert-file", p("client.pem"), "--key-file", p("client-key.pem"))
	if code != 0 || !strings.Contains(out, "tls-daemon") || !strings.Contains(out, "orders") {
		t.Fatalf("status over mTLS: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "status", "--server", url, "--ca-file", p("ca.pem")); code != 3 || !strings.Contains(errOut, "certificate") {
		t.Fatalf("status without a client certificate: exit %d %q, want 3 naming the certificate", code, errOut)
	}
	if code, _, errOut := runCLI(t, "status", "--server", url); code != 3 || !strings.Contains(errOut, "certificate") {
		t.Fatalf("status without trusting the CA: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "status", "--server", url, "--cert-file", p("client.pem")); code != 2 || !strings.Contains(errOut, "key") {
		t.Fatalf("a certificate without its key: exit %d %q, want 2", code, errOut)
	}
}
