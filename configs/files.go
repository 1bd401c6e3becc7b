package configs

import (
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
	abs(&c.Daemon.ViewSigningKeyFile)
	for i := range c.Clusters {
		abs(&c.Clusters[i].Kubeconfig)
	}
	for i := range c.Groups {
		g := &c.Groups[i]
		abs(&g.Credentials.Admin.PasswordFile)
		abs(&g.Credentials.Replication.PasswordFile)
		abs(&g.TLS.CAFile)
		abs(&g.TLS.CertFile)
		abs(&g.TLS.KeyFile)
		if g.Cache != nil {
			abs(&g.Cache.PasswordFile)
		}
	}
}
