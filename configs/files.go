package configs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Password reads the account's password from its file. A trailing newline is
// not part of the password. The error names the file, never its content.
func (a Account) Password() (string, error) {
	return ReadSecret(a.PasswordFile)
}

// ReadSecret reads a secret (password, token, key) from file, without its
// trailing newline.
func ReadSecret(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read secret file: %w", err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("read secret file %s: %w: the file is empty", file, ErrInvalid)
	}
	return s, nil
}

// resolvePaths makes every relative file path in c relative to dir (the
// config file's directory), so a config and its secrets can move together.
func (c *Config) resolvePaths(dir string) {
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	abs(&c.Daemon.StateStore.Path)
	abs(&c.Daemon.APITokenFile)
	abs(&c.Daemon.APIReadTokenFile)
	abs(&c.Daemon.APIAdminTokenFile)
	abs(&c.Daemon.ViewSigningKeyFile)
	abs(&c.Daemon.TLS.CertFile)
	abs(&c.Daemon.TLS.KeyFile)
	abs(&c.Daemon.TLS.ClientCAFile)
	abs(&c.Daemon.StateStore.Etcd.TLS.CAFile)
	abs(&c.Daemon.StateStore.Etcd.TLS.CertFile)
	abs(&c.Daemon.StateStore.Etcd.TLS.KeyFile)
	for i := range c.Clusters {
		abs(&c.Clusters[i].Kubeconfig)
	}
	for i := range c.Groups {
		g := &c.Groups[i]
		abs(&g.Credentials.Admin.PasswordFile)
		abs(&g.Credentials.Replication.PasswordFile)
		if g.Credentials.Sidecar != nil {
			abs(&g.Credentials.Sidecar.PasswordFile)
		}
		abs(&g.TLS.CAFile)
		abs(&g.TLS.CertFile)
		abs(&g.TLS.KeyFile)
		if g.Cache != nil {
			abs(&g.Cache.PasswordFile)
		}
	}
}

// ClientConfig is the *tls.Config of a group's MySQL clients (the poller,
// the daemon's actions and the sidecar); nil when TLS is disabled. CAFile
// replaces the system roots; CertFile/KeyFile add a client certificate;
// ServerName overrides the name checked (otherwise each site's host).
func (t TLS) ClientConfig() (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, // configuration's explicit testing-only switch
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: CA file %s: %w: no PEM certificate", t.CAFile, ErrInvalid)
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: load client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// ServerConfig is the *tls.Config the daemon's HTTP server serves HTTPS with,
// or nil when t is not enabled. It loads the key pair once; with a
// clientCAFile, clients must present a certificate signed by one of its CAs.
func (t APITLS) ServerConfig() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load daemon.tls certificate %s: %w", t.CertFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if t.ClientCAFile != "" {
		pool, err := t.clientCAs()
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// clientCAs reads ClientCAFile into a pool.
func (t APITLS) clientCAs() (*x509.CertPool, error) {
	pem, err := os.ReadFile(t.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("read daemon.tls.clientCAFile: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("read daemon.tls.clientCAFile %s: %w: no PEM certificate in it", t.ClientCAFile, ErrInvalid)
	}
	return pool, nil
}

// ClientTLS is the TLS configuration of a client that trusts caFile's CAs
// (the system pool when empty) and, with certFile and keyFile, presents that
// certificate: the CLI and sidecars to an HTTPS API, the daemon to etcd.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("a client certificate needs both its certificate and its key file")
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
