package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/preflight"
	"github.com/failoverd/failoverd/sidecar"
)

func newSidecarCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sidecar",
		Short: "Run the self-fencing sidecar beside one MySQL server",
		Long: `sidecar runs next to one site's MySQL. It follows the daemon's signed view of
the active site (and its peers' gossiped copies) and fences its MySQL when
another site is active or when it has been cut off longer than the lease
(groups[].sidecar.leaseTimeout). It reads the same configuration file as the
daemon but checks and opens only what it uses: the view signing key
(daemon.viewSigningKeyFile), the group's sidecar account
(credentials.sidecar, else credentials.admin) and MySQL TLS, the group's
sidecar timings, the site's MySQL address and sidecar address (where it
listens), and every other site's sidecar address (its peers). The API token,
kubeconfigs, the daemon's and replication accounts (with
credentials.sidecar), other groups and caches are never read: a database
host or namespace needs only the view signing key and the sidecar
account's password (deploy/kubernetes/sidecar-secret.example.yaml).

The configured addresses are how the other components dial: the site's
sidecar.address may be a Service DNS name and its mysql.address may go
through a proxy or a Service. --listen sets the address the sidecar binds
instead (e.g. 0.0.0.0:9300), and --mysql-address the address of the LOCAL
server it fences (e.g. 127.0.0.1:3306); peers and the daemon keep dialling the
configured ones. With TLS and no tls.serverName, the local server's
certificate is still checked against the host of the configured mysql.address.

Every checkInterval (every max(checkInterval/5, 50ms) while a failover is in
flight) it POSTs a signed report to the daemon (each --daemon-url until the
leader answers) and asks each peer for its newest view. Each request carries
a fresh nonce, and only an answer bound to it (an HMAC with the view signing
key) renews the lease: a replayed answer, or one from a daemon or sidecar of
a version before bindings, only ever fences. Upgrade the daemon replicas
before the sidecars.

With --peer-ca-file, --peer-cert-file and --peer-key-file (all three, on
every sidecar of the group) the sidecar serves HTTPS and dials its peers with
https://, verifying them with that CA.

With --mysqld-pid-file it SIGKILLs a mysqld that cannot be fenced in time
(hung). That needs mysqld in the sidecar's process namespace: the same host,
or the same pod with shareProcessNamespace: true, and the right to signal it
(same user, or CAP_KILL). Without that its reports say canKill=false, and
the daemon accepts neither its lease nor a "mysqld down" from it as proof
that a hung primary stopped: a hung mysqld is not a down one. Down is only
reported once a mysqld process it saw in its own pid namespace is gone.

The server must start read-only: in my.cnf, read_only=ON (MySQL also
super_read_only=ON). A starting sidecar holds no lease: it fences a writable
server unless the daemon or a peer names its site, and it lifts the start-up
read-only only then, once, when the daemon itself names the site and no
replication runs.`,
		Args: namedArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := c.logger()
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			group, site := c.v.GetString("group"), c.v.GetString("site")
			urls := c.v.GetStringSlice("daemon-url")
			if group == "" || site == "" || len(urls) == 0 {
				return &exitError{code: 2, err: errors.New("sidecar: --group, --site and at least one --daemon-url are required")}
			}
			// Only this site's settings and secrets: the MySQL pod holds no
			// API token, kubeconfig or daemon account to read.
			cfg, err := configs.LoadSidecar(c.configPath(), group, site)
			if err != nil {
				log.Error("config.invalid", "path", c.configPath(), "err", err)
				return &exitError{code: 1, err: err}
			}
			slog.SetDefault(log) // libraries logging to the default logger use our format
			ov := sidecar.Overrides{Listen: c.v.GetString("listen"), MySQLAddress: c.v.GetString("mysql-address")}
			scfg, mysqlOpts, err := sidecar.FromConfig(cfg, group, site, ov)
			if err != nil {
				if errors.Is(err, sidecar.ErrUnknownGroup) || errors.Is(err, sidecar.ErrUnknownSite) ||
					errors.Is(err, sidecar.ErrNoSidecarAddress) || errors.Is(err, sidecar.ErrInvalidConfig) {
					return &exitError{code: 2, err: err}
				}
				return &exitError{code: 1, err: err}
			}
			scfg.DaemonURLs = urls
			mysqlOpts.Logger = log
			local := sidecar.DialMySQL(mysqlOpts)
			defer func() { _ = sidecar.CloseMySQL(local) }() // the process is exiting
			hc, err := httpClient(c.v.GetString("daemon-ca-file"), c.v.GetString("daemon-cert-file"), c.v.GetString("daemon-key-file"))
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("sidecar: %w", err)}
			}
			peerTLS := sidecar.PeerTLSFiles{CAFile: c.v.GetString("peer-ca-file"), CertFile: c.v.GetString("peer-cert-file"), KeyFile: c.v.GetString("peer-key-file")}
			serverTLS, peerClient, err := peerTLS.Load()
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("sidecar: %w", err)}
			}
			if serverTLS != nil {
				scfg.PeersOverTLS()
			} else if preflight.OpenToNetwork(scfg.ListenAddr) {
				// Views and reports are signed, so plain HTTP cannot forge them,
				// but their content crosses the network in clear (validate's
				// warning for the daemon's listen, here for the sidecar's).
				log.Warn("sidecar.plain_http", "listen", scfg.ListenAddr,
					"fix", "set --peer-cert-file/--peer-key-file/--peer-ca-file (peer TLS), or listen on 127.0.0.1 when nothing else must reach it; ignore when a mesh encrypts the traffic")
			}
			opts := sidecar.Options{MySQL: local, Logger: log, HTTPClient: hc, PeerHTTPClient: peerClient, ServerTLS: serverTLS}
			if f := c.v.GetString("mysqld-pid-file"); f != "" {
				opts.Killer = &sidecar.PIDFileKiller{Path: f}
				// Its exit is reported the instant it happens (the daemon
				// may then fail over without waiting for its failure window).
				opts.Watcher = &sidecar.PIDFileWatcher{Path: f}
			}
			s, err := sidecar.New(scfg, opts)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := s.Run(ctx); err != nil {
				log.Error("sidecar.failed", "err", err)
				return &exitError{code: 1, err: err}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.String("group", "", "name of the group the site belongs to")
	f.String("site", "", "name of the site this sidecar guards")
	f.StringArray("daemon-url", nil, "base URL of a daemon replica, e.g. http://failoverd:8080 (repeat for every replica; only the leader answers)")
	f.String("mysqld-pid-file", "", "mysqld's pid file: SIGKILL a mysqld that cannot be fenced within the fence timeout, and report its exit to the daemon at once (optional)")
	f.String("listen", "", "host:port the sidecar listens on (default: the site's sidecar.address from the configuration)")
	f.String("daemon-ca-file", "", "CA that signed the daemon's certificate, for https:// --daemon-url (daemon.tls)")
	f.String("daemon-cert-file", "", "client certificate for the daemon, when daemon.tls.clientCAFile is set")
	f.String("daemon-key-file", "", "key of --daemon-cert-file")
	f.String("mysql-address", "", "host:port of the LOCAL MySQL server the sidecar fences (default: the site's mysql.address from the configuration)")
	f.String("peer-ca-file", "", "CA that signed the peer sidecars' certificates: peers are dialled with https:// (needs --peer-cert-file and --peer-key-file; set on every sidecar of the group)")
	f.String("peer-cert-file", "", "certificate this sidecar serves HTTPS with; it must name the host of the site's sidecar.address")
	f.String("peer-key-file", "", "key of --peer-cert-file")
	markRequired(cmd, "group", "site", "daemon-url")
	// FAILOVERD_GROUP, FAILOVERD_SITE, FAILOVERD_DAEMON_URL, FAILOVERD_MYSQLD_PID_FILE,
	// FAILOVERD_LISTEN, FAILOVERD_MYSQL_ADDRESS, FAILOVERD_DAEMON_CA_FILE,
	// FAILOVERD_PEER_CA_FILE, ...
	_ = c.v.BindPFlags(f)
	return cmd
}
