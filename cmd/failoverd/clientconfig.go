package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/failoverd/failoverd/configs"
)

// daemonConfig is the daemon section of the configuration file, as the
// client commands use it (as patronictl -c reads Patroni's file): the
// server URL from daemon.listen, the token from daemon.apiTokenFile, TLS
// from daemon.tls.
type daemonConfig struct {
	path string
	d    *configs.Daemon // nil when the file is not used
	err  error           // why it is not used (nil: the default file does not exist)
}

// configExplicit: -c or FAILOVERD_CONFIG named the file.
func configExplicit(cmd *cobra.Command) bool {
	if f := cmd.Flags().Lookup("config"); f != nil && f.Changed {
		return true
	}
	_, ok := os.LookupEnv(configs.EnvPrefix + "_CONFIG")
	return ok
}

// daemonSection loads the daemon section once per run. A file named by -c
// or FAILOVERD_CONFIG must be usable (an error otherwise: exit 2). The
// default file is used when it exists; when it cannot be used (not
// readable by this user, a broken daemon section) a warning says so and the
// command goes on with its flags: `status` must not fail because the file
// is being edited.
func (c *cli) daemonSection(cmd *cobra.Command) (*daemonConfig, error) {
	if c.daemonCfg != nil {
		return c.daemonCfg, nil
	}
	dc := &daemonConfig{path: c.configPath()}
	d, err := configs.LoadDaemonSection(dc.path)
	switch {
	case err == nil:
		dc.d = &d
	case configExplicit(cmd):
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("-c %s: %w", dc.path, err)}
	case errors.Is(err, fs.ErrNotExist):
		// No daemon on this host: flags and defaults only.
	default:
		dc.err = err
		if !c.completing {
			fmt.Fprintf(c.stderr, "failoverd: warning: not using %s for the server and token: %v\n", dc.path, err)
		}
	}
	c.daemonCfg = dc
	return dc, nil
}

// fromConfig is the value of a client flag taken from the daemon section,
// and where it comes from ("" when the file sets none).
func (dc *daemonConfig) fromConfig(name string) (value, origin string) {
	if dc == nil || dc.d == nil {
		return "", ""
	}
	d := dc.d
	at := func(key string) string { return key + " of " + dc.path }
	switch name {
	case "server":
		if u := serverFromListen(*d); u != "" {
			return u, at("daemon.listen")
		}
	case "token-file":
		if d.APITokenFile != "" {
			return d.APITokenFile, at("daemon.apiTokenFile")
		}
	case "ca-file":
		// The daemon's own certificate is the trust anchor: the client
		// accepts exactly that server (its host must still be named in it).
		if d.TLS.Enabled() {
			return d.TLS.CertFile, at("daemon.tls.certFile")
		}
	case "cert-file":
		// A daemon that requires client certificates is offered its own,
		// as patronictl offers the REST API's (it needs clientAuth usage).
		if d.TLS.Enabled() && d.TLS.ClientCAFile != "" {
			return d.TLS.CertFile, at("daemon.tls.certFile")
		}
	case "key-file":
		if d.TLS.Enabled() && d.TLS.ClientCAFile != "" {
			return d.TLS.KeyFile, at("daemon.tls.keyFile")
		}
	}
	return "", ""
}

// serverFromListen is the URL a client on the daemon's host uses: https
// with daemon.tls, and a wildcard listen address reached on the loopback.
func serverFromListen(d configs.Daemon) string {
	host, port, err := net.SplitHostPort(d.Listen)
	if err != nil || port == "" {
		return ""
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	scheme := "http"
	if d.TLS.Enabled() {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// setting is a client flag's value: the flag when given, else
// FAILOVERD_<NAME>, else the daemon's configuration file, else the flag's
// default.
type setting struct {
	value  string
	origin string // where a non-default value came from, e.g. "daemon.apiTokenFile of FILE"
	inFile bool   // taken from the configuration file
}

func (c *cli) setting(cmd *cobra.Command, name string) (setting, error) {
	f := cmd.Flags().Lookup(name)
	if f.Changed {
		return setting{value: f.Value.String(), origin: "--" + name}, nil
	}
	env := configs.EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	if v, ok := os.LookupEnv(env); ok {
		return setting{value: v, origin: env}, nil
	}
	dc, err := c.daemonSection(cmd)
	if err != nil {
		return setting{}, err
	}
	// confirm-fence and reclone take only the admin token once the daemon
	// has one: the operate token from the same file would be refused (403).
	if d := dc.section(); name == "token-file" && cmd.Annotations[annotationToken] == tokenAdmin && d != nil && d.APIAdminTokenFile != "" {
		return setting{value: d.APIAdminTokenFile, origin: "daemon.apiAdminTokenFile of " + dc.path, inFile: true}, nil
	}
	if v, origin := dc.fromConfig(name); v != "" {
		return setting{value: v, origin: origin, inFile: true}, nil
	}
	return setting{value: f.Value.String()}, nil
}

// annotationToken marks, on a command, the token it needs when it is not
// the operate token (tokenAdmin: confirm-fence and reclone).
const (
	annotationToken = "failoverd.io/token"
	tokenAdmin      = "admin"
)

// section is the daemon section read from the file, nil when none.
func (dc *daemonConfig) section() *configs.Daemon {
	if dc == nil {
		return nil
	}
	return dc.d
}

// noTokenError says where a command looked for the API token.
func (c *cli) noTokenError() error {
	why := "no API token: pass --token-file FILE (env FAILOVERD_TOKEN_FILE), or -c the daemon's configuration file to use its daemon.apiTokenFile"
	switch dc := c.daemonCfg; {
	case dc == nil:
	case dc.d != nil:
		why += fmt.Sprintf(" (%s sets none)", dc.path)
	case dc.err != nil:
		why += fmt.Sprintf(" (%s is not usable: %v)", dc.path, dc.err)
	default:
		why += fmt.Sprintf(" (%s does not exist)", dc.path)
	}
	return &exitError{code: exitUsage, err: errors.New(why)}
}

// caHint names where the trusted certificate came from when the daemon's
// certificate is refused: trusting the local daemon's own certificate
// fails for a --server whose daemon has another one, or a host name the
// certificate does not hold.
type caHint struct {
	next   http.RoundTripper
	origin string
}

func (h caHint) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(req)
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	if err != nil && (errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname)) {
		err = fmt.Errorf("%w (the daemon's certificate was checked against %s: give --ca-file for a daemon with another certificate, or --server with a host name it holds)", err, h.origin)
	}
	return resp, err
}
