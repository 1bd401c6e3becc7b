package sidecar

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tlsFiles writes the certificate and key of an httptest TLS server (a
// self-signed certificate for 127.0.0.1) as PEM files; the certificate is
// also the CA that verifies it.
func tlsFiles(t *testing.T) PeerTLSFiles {
	t.Helper()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	srv.Close()
	pair := srv.TLS.Certificates[0]
	key, err := x509.MarshalPKCS8PrivateKey(pair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := PeerTLSFiles{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}
	for file, b := range map[string]*pem.Block{
		f.CAFile:   {Type: "CERTIFICATE", Bytes: pair.Certificate[0]},
		f.CertFile: {Type: "CERTIFICATE", Bytes: pair.Certificate[0]},
		f.KeyFile:  {Type: "PRIVATE KEY", Bytes: key},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// TestPeerGossipOverTLS: north serves HTTPS with --peer-cert-file and
// --peer-key-file; east dials it at https:// and verifies it with
// --peer-ca-file, and north's bound answer renews east's lease. A client
// without that CA gets nothing from north.
func TestPeerGossipOverTLS(t *testing.T) {
	files := tlsFiles(t)
	serverTLS, client, err := files.Load()
	if err != nil {
		t.Fatal(err)
	}
	lnNorth := listen(t)
	northCfg := Config{Group: testGroup, Site: "north", Key: testKey, LeaseTimeout: 2 * time.Second, CheckInterval: 50 * time.Millisecond,
		DaemonURLs: []string{newStandInDaemonWith(t, sign(t, 1, "east")).URL()},
		Peers:      []Peer{{Site: "east", URL: "http://127.0.0.1:1"}}}
	northCfg.PeersOverTLS()
	if u := northCfg.Peers[0].URL; u != "https://127.0.0.1:1" {
		t.Fatalf("peer URL %s after PeersOverTLS", u)
	}
	north := startReal(t, northCfg, Options{MySQL: newFakeMySQL(true), ServerTLS: serverTLS, PeerHTTPClient: client}, lnNorth)
	waitFor(t, "north to adopt epoch 1", func() bool { return north.epoch() == 1 })

	h := newHarness(t, func(c *Config, o *Options) {
		c.Peers = []Peer{{Site: "north", URL: "http://" + lnNorth.Addr().String()}}
		c.PeersOverTLS()
		o.Peers, o.PeerHTTPClient = nil, client
	})
	h.daemon.down()
	h.step(t)
	if e, got := epochOfSidecar(h), leaseLeft(h); e != 1 || got != testLease {
		t.Fatalf("over TLS: epoch %d, lease %s; want 1 and %s", e, got, testLease)
	}

	plain := newHarness(t, func(c *Config, o *Options) {
		c.Peers = []Peer{{Site: "north", URL: "https://" + lnNorth.Addr().String()}}
		o.Peers = nil // the default client: north's certificate is unknown to it
	})
	plain.daemon.down()
	plain.step(t)
	if e := epochOfSidecar(plain); e != 0 {
		t.Fatalf("a client without the CA got epoch %d from north", e)
	}
}

// TestPeerTLSFilesAllOrNone: the three files go together; a partial or
// unreadable set names every missing or bad flag.
func TestPeerTLSFilesAllOrNone(t *testing.T) {
	if s, c, err := (PeerTLSFiles{}).Load(); s != nil || c != nil || err != nil {
		t.Fatalf("no files: %v %v %v", s, c, err)
	}
	_, _, err := PeerTLSFiles{CAFile: "ca.pem"}.Load()
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "--peer-cert-file is missing") || !strings.Contains(err.Error(), "--peer-key-file is missing") {
		t.Errorf("partial set: %v", err)
	}
	good := tlsFiles(t)
	bad := good
	bad.CAFile, bad.KeyFile = good.KeyFile, good.CAFile // swapped: neither loads
	_, _, err = bad.Load()
	if !strings.Contains(err.Error(), "--peer-ca-file") || !strings.Contains(err.Error(), "--peer-key-file") {
		t.Errorf("bad files: %v", err)
	}
}
