package sidecar

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/preflight"
)

// Sentinel errors.
var (
	// ErrInvalidConfig: a Config field is missing or unusable.
	ErrInvalidConfig = errors.New("sidecar: invalid configuration")
	// ErrUnknownGroup: --group names no group of the configuration.
	ErrUnknownGroup = errors.New("sidecar: unknown group")
	// ErrUnknownSite: --site names no site of the group.
	ErrUnknownSite = errors.New("sidecar: unknown site")
	// ErrNoSidecarAddress: the site declares no sidecar.address to listen on.
	ErrNoSidecarAddress = errors.New("sidecar: site has no sidecar address")
	// ErrShortViewKey: the view signing key is shorter than preflight.MinViewKeyBytes.
	ErrShortViewKey = errors.New("sidecar: view signing key too short")
	// ErrNoLeader: no daemon URL answered 200 with a view.
	ErrNoLeader = errors.New("sidecar: no daemon answered with a view")
	// ErrNoView: a peer holds no view yet (404).
	ErrNoView = errors.New("sidecar: peer holds no view")
	// ErrMalformedView: a daemon or peer answered 200 with a body that is not
	// a signed view.
	ErrMalformedView = errors.New("sidecar: malformed view")
	// ErrNoProcess: the pid file names no running process. Not by itself
	// a proof that mysqld is down (it may run in another pid namespace);
	// see Killer.Gone.
	ErrNoProcess = errors.New("sidecar: no such process")
	// ErrNotMySQLD: the pid file names a process that is not mysqld/mariadbd.
	ErrNotMySQLD = errors.New("sidecar: pid file names another program")
)

// maxFenceTimeout caps the fence timeout: a healthy server fences in
// milliseconds, a hung one never does. The daemon's lease proof waits
// sitepair.LeaseMargin past the lease for this fence and the SIGKILL after
// it: keep it at half that margin or less.
const maxFenceTimeout = 400 * time.Millisecond

// Peer is another site's sidecar.
type Peer struct {
	// Site is the peer's site name (what it sends as ?from=).
	Site string
	// URL is its base URL, e.g. http://10.0.0.7:9300.
	URL string
}

// Config is what one sidecar needs: its group and site, the key that signs
// views (and its reports), the lease timings and where the daemon and the
// peers are.
type Config struct {
	Group, Site string
	// Key is the HMAC key of daemon.viewSigningKeyFile.
	Key []byte
	// LeaseTimeout and CheckInterval are groups[G].sidecar.*.
	LeaseTimeout, CheckInterval time.Duration
	// FenceTimeout bounds one fence (status, Fence, KillClientConnections);
	// zero means min(400ms, LeaseTimeout/4).
	FenceTimeout time.Duration
	// DaemonURLs are the base URLs of every daemon replica (only the leader
	// answers 200).
	DaemonURLs []string
	// Peers are the other sites' sidecars.
	Peers []Peer
	// ListenAddr is the address to listen on: sites[S].sidecar.address or
	// Overrides.Listen (unused when Options.Listener is set).
	ListenAddr string
}

func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Group == "" || c.Site == "" {
		bad("group and site are required")
	}
	if len(c.Key) == 0 {
		bad("no view signing key")
	}
	if c.LeaseTimeout <= 0 || c.CheckInterval <= 0 {
		bad("leaseTimeout %s and checkInterval %s must be positive", c.LeaseTimeout, c.CheckInterval)
	}
	for _, u := range c.DaemonURLs {
		if err := checkURL(u); err != nil {
			bad("daemon URL: %v", err)
		}
	}
	for _, p := range c.Peers {
		if p.Site == "" || p.Site == c.Site {
			bad("peer %q: a peer needs its own site name", p.Site)
		}
		if err := checkURL(p.URL); err != nil {
			bad("peer %s: %v", p.Site, err)
		}
	}
	return errors.Join(errs...)
}

// checkURL accepts absolute http(s) URLs with a host.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: write http://host:port", raw)
	}
	return nil
}

// fenceTimeout is Config.FenceTimeout or its default.
func (c Config) fenceTimeout() time.Duration {
	if c.FenceTimeout > 0 {
		return c.FenceTimeout
	}
	return min(maxFenceTimeout, c.LeaseTimeout/4)
}

// Overrides replace, for this sidecar only, addresses the configuration
// holds as the other components dial them. Empty fields keep the
// configuration's address.
type Overrides struct {
	// Listen is the address the sidecar binds (--listen) instead of
	// sites[S].sidecar.address, which may be a Service DNS name its peers
	// dial.
	Listen string
	// MySQLAddress is how the sidecar reaches its local server
	// (--mysql-address) instead of sites[S].mysql.address, which may go
	// through a proxy or a Service and so reach another server.
	MySQLAddress string
}

func (o Overrides) validate() error {
	var errs []error
	for _, a := range []struct{ flag, addr string }{{"listen", o.Listen}, {"mysql-address", o.MySQLAddress}} {
		if a.addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("%w: --%s %q: write host:port: %v", ErrInvalidConfig, a.flag, a.addr, err))
		}
	}
	return errors.Join(errs...)
}

// FromConfig builds the sidecar Config of site in group from the daemon's
// configuration (configs.LoadSidecar, which checks only what this reads),
// plus the mysqlctl options that reach the site's MySQL as the group's
// sidecar account (credentials.sidecar, else credentials.admin; password
// read from its file, the group's TLS), with ov's addresses in place of the
// configured ones. It reads no other secret: not the API token, a
// kubeconfig or another account's password. DaemonURLs are left for the
// caller (--daemon-url).
func FromConfig(c *configs.Config, group, site string, ov Overrides) (Config, mysqlctl.Options, error) {
	if err := ov.validate(); err != nil {
		return Config{}, mysqlctl.Options{}, err
	}
	var g *configs.Group
	for i := range c.Groups {
		if c.Groups[i].Name == group {
			g = &c.Groups[i]
		}
	}
	if g == nil {
		return Config{}, mysqlctl.Options{}, fmt.Errorf("group %q: %w", group, ErrUnknownGroup)
	}
	var me *configs.Site
	var peers []Peer
	for i, s := range g.Sites {
		switch {
		case s.Name == site:
			me = &g.Sites[i]
		case s.Sidecar != nil && s.Sidecar.Address != "":
			peers = append(peers, Peer{Site: s.Name, URL: "http://" + s.Sidecar.Address})
		}
	}
	if me == nil {
		return Config{}, mysqlctl.Options{}, fmt.Errorf("group %s site %q: %w", group, site, ErrUnknownSite)
	}
	if me.Sidecar == nil || me.Sidecar.Address == "" {
		return Config{}, mysqlctl.Options{}, fmt.Errorf("group %s site %s: %w: set sites[].sidecar.address", group, site, ErrNoSidecarAddress)
	}
	key, err := configs.ReadSecret(c.Daemon.ViewSigningKeyFile)
	if err != nil {
		return Config{}, mysqlctl.Options{}, fmt.Errorf("view signing key: %w", err)
	}
	// The daemon refuses a short key at start (preflight); a sidecar given
	// another, shorter file would verify views anyone could forge sooner.
	if len(key) < preflight.MinViewKeyBytes {
		return Config{}, mysqlctl.Options{}, fmt.Errorf("view signing key %s holds %d bytes, fewer than %d: %w; point daemon.viewSigningKeyFile at the daemon's key",
			c.Daemon.ViewSigningKeyFile, len(key), preflight.MinViewKeyBytes, ErrShortViewKey)
	}
	acct := g.Credentials.SidecarAccount()
	pw, err := acct.Password()
	if err != nil {
		return Config{}, mysqlctl.Options{}, fmt.Errorf("%s password: %w", acct.User, err)
	}
	tlsCfg, err := g.TLS.ClientConfig()
	if err != nil {
		return Config{}, mysqlctl.Options{}, err
	}
	listen := cmp.Or(ov.Listen, me.Sidecar.Address)
	mysqlAddr := cmp.Or(ov.MySQLAddress, me.MySQL.Address)
	if tlsCfg != nil && ov.MySQLAddress != "" && tlsCfg.ServerName == "" && !tlsCfg.InsecureSkipVerify {
		// The server's certificate names the configured address, not the
		// local one dialled instead: verify that name, as the daemon does.
		if host, _, err := net.SplitHostPort(me.MySQL.Address); err == nil {
			tlsCfg.ServerName = host
		}
	}
	cfg := Config{
		Group:         group,
		Site:          site,
		Key:           []byte(key),
		LeaseTimeout:  g.Sidecar.LeaseTimeout,
		CheckInterval: g.Sidecar.CheckInterval,
		Peers:         peers,
		ListenAddr:    listen,
	}
	opts := mysqlctl.Options{
		Addr: mysqlAddr, User: acct.User, Password: pw, TLS: tlsCfg,
		// A dial to a hung server must end within one fence.
		DialTimeout: cfg.fenceTimeout(), MaxOpenConns: 2,
	}
	return cfg, opts, nil
}
