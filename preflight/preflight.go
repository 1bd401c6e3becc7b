// Package preflight runs the checks `failoverd run` makes before it starts,
// on a configuration configs.Load accepted: it reads every file the daemon
// will read (API token, view signing key, MySQL and cache passwords, TLS
// files, kubeconfigs) the way the daemon reads it, and refuses what the
// daemon would refuse or could not use. `failoverd validate`, `failoverd
// run` and a reload all call Check, so what validate accepts is what run
// starts with and a reload applies.
//
// configs.Validate checks the file's own rules; Check checks the files it
// names. It opens no connection, binds no port and reads no persisted
// state: a port in use, an unreachable server or a corrupt state file are
// found by the start itself.
package preflight

import (
	"errors"
	"fmt"
	"net"
	"os"

	"k8s.io/client-go/rest"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/kube"
)

// Minimum lengths of the daemon's own secrets, in bytes of the file
// without its trailing newline (what the daemon uses). A length cannot
// measure randomness; it refuses the obviously weak: a test value, a word,
// "changeme". docs/operations.md ("Before a start") explains the numbers.
const (
	// MinAPITokenBytes: the bearer token is all that stands between the
	// network and switchover, reclone and confirm-fence. 16 random bytes
	// (128 bits) cannot be guessed through an API.
	MinAPITokenBytes = configs.MinAPITokenLength
	// MinViewKeyBytes: the HMAC-SHA256 key sidecars trust views with.
	// RFC 2104 asks for a key at least as long as the hash's output (32
	// bytes for SHA-256); a shorter key makes forging a view (which fences
	// or unfences a primary) easier than the MAC is designed to be.
	MinViewKeyBytes = 32
)

// Check runs the pre-start checks on cfg. It returns every problem at once
// as a *configs.Problems error (each placed at its key in cfg's file, with
// what is wrong and the fix), or nil; and the warnings: risky but workable
// settings (a secret every user of the host can read, the API served over
// plain HTTP to the network).
func Check(cfg *configs.Config) (warnings []configs.Problem, err error) {
	c := &checker{}
	c.daemon(cfg.Daemon)
	for i, cl := range cfg.Clusters {
		c.kubeconfig(fmt.Sprintf("clusters[%d]", i), cl)
	}
	for i, g := range cfg.Groups {
		c.group(fmt.Sprintf("groups[%d]", i), g)
	}
	// Placed and in file order, as the problems.
	var placed *configs.Problems
	if errors.As(cfg.Problems(c.warnings), &placed) {
		warnings = placed.List
	}
	return warnings, cfg.Problems(c.problems)
}

type checker struct {
	problems, warnings []configs.Problem
}

func (c *checker) fail(path, format string, args ...any) {
	c.problems = append(c.problems, configs.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) warn(path, format string, args ...any) {
	c.warnings = append(c.warnings, configs.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// daemon checks what daemon.New reads: the token, the view key, the API's
// TLS files and the etcd store's.
func (c *checker) daemon(d configs.Daemon) {
	seen := map[string]string{} // token → the field that holds it
	for _, t := range []struct{ path, file string }{
		{"daemon.apiTokenFile", d.APITokenFile},
		{"daemon.apiReadTokenFile", d.APIReadTokenFile},
		{"daemon.apiAdminTokenFile", d.APIAdminTokenFile},
	} {
		if t.file == "" {
			continue
		}
		tok := c.secret(t.path, t.file, MinAPITokenBytes,
			fmt.Sprintf("write a random token of at least %d bytes, e.g. openssl rand -hex 32 > %s", MinAPITokenBytes, t.file))
		if tok == "" {
			continue
		}
		// Two roles sharing one token are one role: a read token equal to the
		// operate token would let every reader run commands.
		if other, dup := seen[tok]; dup {
			c.fail(t.path, "holds the same token as %s: each token grants its own rights, so one shared token grants both; write a different random token", other)
		}
		seen[tok] = t.path
	}
	if d.ViewSigningKeyFile != "" {
		c.secret("daemon.viewSigningKeyFile", d.ViewSigningKeyFile, MinViewKeyBytes,
			fmt.Sprintf("write a random key of at least %d bytes, e.g. openssl rand -hex 32 > %s (every sidecar reads the same file)", MinViewKeyBytes, d.ViewSigningKeyFile))
	}
	if _, err := d.TLS.ServerConfig(); err != nil {
		c.fail("daemon.tls", "%v; write PEM files: certFile and keyFile a certificate and its key, clientCAFile CA certificates", err)
	}
	if d.TLS.KeyFile != "" {
		c.private("daemon.tls.keyFile", d.TLS.KeyFile)
	}
	// The bearer token and every command would cross the network in clear.
	if !d.TLS.Enabled() && OpenToNetwork(d.Listen) {
		c.warn("daemon.listen", "%q serves the API to other hosts over plain HTTP: the API token and every command cross the network in clear; "+
			"set daemon.tls.certFile and keyFile, or listen on 127.0.0.1 (ignore this when a service mesh or tunnel encrypts the traffic)", d.Listen)
	}
	if d.StateStore.Type == configs.StoreEtcd {
		t := d.StateStore.Etcd.TLS
		// The calls daemon's openEtcd makes, one per key so the problem names it.
		if _, err := configs.ClientTLS(t.CAFile, "", ""); err != nil {
			c.fail("daemon.stateStore.etcd.tls.caFile", "%v; write the PEM certificates of the CA that signed the etcd members' certificates", err)
		}
		if _, err := configs.ClientTLS("", t.CertFile, t.KeyFile); err != nil {
			c.fail("daemon.stateStore.etcd.tls.certFile", "%v; write a PEM certificate and its key", err)
		}
		if t.KeyFile != "" {
			c.private("daemon.stateStore.etcd.tls.keyFile", t.KeyFile)
		}
	}
}

// kubeconfig loads a cluster's kubeconfig as the Kubernetes clients will:
// they connect lazily, so a kubeconfig that does not load would otherwise
// surface at the first failover that moves routing. The in-cluster account
// and the default loading rules ($KUBECONFIG, ~/.kube/config) depend on
// where the daemon runs and are left to it.
func (c *checker) kubeconfig(path string, cl configs.Cluster) {
	if cl.Kubeconfig == "" || cl.InCluster {
		return
	}
	if !c.readable(path+".kubeconfig", cl.Kubeconfig) {
		return
	}
	c.private(path+".kubeconfig", cl.Kubeconfig) // it holds the cluster's credentials
	rc, err := kube.RESTConfig(cl)
	if err == nil {
		_, err = rest.HTTPClientFor(rc) // parses its certificates and keys
	}
	if err != nil {
		c.fail(path+".kubeconfig", "%s does not load (%v); fix the file, or name one of its contexts in %s.context", cl.Kubeconfig, err, path)
	}
}

// group checks what a group's poller, actions and cache follower read: the
// admin and replication passwords (the replication one is first read at a
// failover, when repointing replicas), the cache password and the MySQL TLS
// files. The sidecar account's password is the sidecars' to read.
func (c *checker) group(path string, g configs.Group) {
	for _, a := range []struct {
		key  string
		acct configs.Account
	}{{"admin", g.Credentials.Admin}, {"replication", g.Credentials.Replication}} {
		c.secret(path+".credentials."+a.key+".passwordFile", a.acct.PasswordFile, 1,
			fmt.Sprintf("write the password of MySQL account %q into it", a.acct.User))
	}
	if g.Cache != nil && g.Cache.PasswordFile != "" {
		c.secret(path+".cache.passwordFile", g.Cache.PasswordFile, 1,
			"write the cache's AUTH password into it, or remove cache.passwordFile when the cache needs none")
	}
	if t := g.TLS; t.Enabled {
		// The calls the poller and the actions make (configs.TLS.ClientConfig),
		// one per key so the problem names it.
		if _, err := (configs.TLS{Enabled: true, CAFile: t.CAFile}).ClientConfig(); err != nil {
			c.fail(path+".tls.caFile", "%v; write the PEM certificates of the CA that signed the servers' certificates", err)
		}
		if _, err := (configs.TLS{Enabled: true, CertFile: t.CertFile, KeyFile: t.KeyFile}).ClientConfig(); err != nil {
			c.fail(path+".tls.certFile", "%v; write a PEM certificate and its key", err)
		}
		if t.KeyFile != "" {
			c.private(path+".tls.keyFile", t.KeyFile)
		}
	}
}

// secret reads file as the daemon reads a secret (configs.ReadSecret) and
// refuses it unreadable, empty or shorter than minBytes; fix says how to
// write a good one.
func (c *checker) secret(path, file string, minBytes int, fix string) string {
	s, err := configs.ReadSecret(file)
	var pe *os.PathError
	switch {
	case errors.As(err, &pe):
		c.fail(path, "cannot read %s (%v); fix the path or the file's permissions", file, pe.Err)
		return ""
	case errors.Is(err, configs.ErrInvalid):
		c.fail(path, "%s is empty (a trailing newline does not count); %s", file, fix)
		s = ""
	case err != nil:
		c.fail(path, "cannot read %s (%v); %s", file, err, fix)
		s = ""
	case len(s) < minBytes:
		c.fail(path, "%s holds %d bytes, fewer than the %d this secret needs; %s", file, len(s), minBytes, fix)
		s = ""
	}
	c.private(path, file)
	return s
}

// readable opens file as configs.Validate does, and reports it when it
// cannot.
func (c *checker) readable(path, file string) bool {
	f, err := os.Open(file)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		c.fail(path, "cannot read %s (%v); fix the path or the file's permissions", file, err)
		return false
	}
	_ = f.Close() // opened only to prove it is readable
	return true
}

// private warns when every user of the host can read a file holding a
// secret. Group-readable is fine: the documented install is root:failoverd
// 0640, and a Kubernetes Secret volume with defaultMode 0440.
func (c *checker) private(path, file string) {
	fi, err := os.Stat(file) // through symlinks: a Secret volume's files are links
	if err != nil || fi.Mode().Perm()&0o004 == 0 {
		return
	}
	c.warn(path, "%s is readable by every user of this host (mode %04o); chmod o-rwx it: the daemon needs only its user or group "+
		"(root:failoverd 0640, or defaultMode: 0440 on a Kubernetes Secret volume)", file, fi.Mode().Perm())
}

// OpenToNetwork reports whether a listen address accepts connections from
// other hosts: any host but localhost and loopback addresses (an empty
// host, 0.0.0.0 and :: listen on every interface; a host name is taken to
// be another host's interface).
func OpenToNetwork(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false // not an address: configs.Validate reports it
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}
