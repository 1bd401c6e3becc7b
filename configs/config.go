// Package configs holds failoverd's typed configuration, its defaults and its
// validation. The whole product is described by one YAML file (see
// configs/examples). Every field's default sits in its `default` tag, next to
// the comment that explains it; Load applies them and reports every problem
// at once, each with its file:line:col, the YAML path and the fix.
//
// Keys are case-sensitive: a struct key must be written exactly as its yaml
// name (pollInterval; pollinterval is an unknown key), and the keys of
// selectors and labels are kept as written.
package configs

import (
	"time"
)

// Config is the root of the YAML file.
type Config struct {
	// Daemon configures the failoverd process itself.
	Daemon Daemon `yaml:"daemon"`
	// Clusters names the Kubernetes clusters that sites, DNS, the state store
	// and leader election refer to.
	Clusters []Cluster `yaml:"clusters"`
	// Groups are the independent MySQL failover groups this daemon manages.
	Groups []Group `yaml:"groups"`

	// src remembers where Load or Parse found each path, so that Validate's
	// problems carry a file position.
	src *source
	// digest is the SHA-256 (hex) of the YAML it was decoded from.
	digest string
}

// Daemon configures the failoverd process. Every scalar field can be
// overridden by an environment variable FAILOVERD_DAEMON_<PATH> (upper case,
// dots as underscores), e.g. FAILOVERD_DAEMON_LISTEN=:9090 or
// FAILOVERD_DAEMON_TLS_CERTFILE=/etc/failoverd/tls.crt (see EnvName).
type Daemon struct {
	// Listen is the address of the HTTP server: API, /active-site, /metrics,
	// /healthz.
	Listen string `yaml:"listen" default:"127.0.0.1:8080"`
	// StateStore is where the group state (epoch, active site, history) lives.
	StateStore StateStore `yaml:"stateStore"`
	// LeaderElection lets several daemon replicas run with one acting.
	LeaderElection LeaderElection `yaml:"leaderElection"`
	// APITokenFile holds the operate token: the bearer token every command
	// needs (switchover, acknowledge, pause, hold, reload, ...; and
	// confirm-fence and reclone unless apiAdminTokenFile is set). Empty
	// disables the commands (403). At least 16 bytes (preflight.MinAPITokenBytes;
	// run and validate refuse less).
	APITokenFile string `yaml:"apiTokenFile"`
	// APIReadTokenFile, optional, holds the read token: with it, the status
	// reads (GET /v1/groups..., GET /status) need a bearer token, this one or
	// the operate or admin token. Empty: they need none, as before. Health
	// checks, /readyz, /metrics and /active-site never need a token.
	APIReadTokenFile string `yaml:"apiReadTokenFile"`
	// APIAdminTokenFile, optional, holds the admin token: with it, the
	// commands that can lose data or override fencing (confirm-fence,
	// reclone; api.Routes marks them) take only this token and refuse the
	// operate token (403). Empty: they take the operate token. Needs
	// apiTokenFile.
	APIAdminTokenFile string `yaml:"apiAdminTokenFile"`
	// ViewSigningKeyFile holds the HMAC key that signs the authoritative view
	// served at /active-site, so sidecars can trust gossiped copies. Required
	// when any site has a sidecar. At least 32 bytes (preflight.MinViewKeyBytes).
	ViewSigningKeyFile string `yaml:"viewSigningKeyFile"`
	// TLS serves the HTTP server over HTTPS (optional; plain HTTP without it).
	TLS APITLS `yaml:"tls"`
	// AdvertiseURL is how the other daemons reach this one's API, e.g.
	// http://10.0.3.7:8080 (in a pod: http://$(POD_IP):8080). With leader
	// election it is this daemon's identity, and followers forward views,
	// sidecar reports and commands to the leader's URL instead of answering
	// 503, so sidecars and the CLI may use one Service for every replica.
	AdvertiseURL string `yaml:"advertiseURL"`
	// MaxPause bounds `failoverd pause --for`: a longer pause is refused
	// (a forgotten pause leaves a group without automatic failover).
	MaxPause time.Duration `yaml:"maxPause" default:"24h"`
	// MaxHold bounds `failoverd hold --for` (no-promote, maintenance).
	MaxHold time.Duration `yaml:"maxHold" default:"168h"`
}

// APITLS serves the daemon's HTTP server (API, /active-site, /metrics,
// /healthz) over HTTPS. Set certFile and keyFile together, or neither.
type APITLS struct {
	// CertFile is the server certificate (PEM, leaf first, then any
	// intermediates).
	CertFile string `yaml:"certFile"`
	// KeyFile is the certificate's private key (PEM).
	KeyFile string `yaml:"keyFile"`
	// ClientCAFile, when set, makes the server require client certificates
	// signed by these CAs (PEM); only with certFile and keyFile.
	ClientCAFile string `yaml:"clientCAFile"`
}

// Enabled reports whether the HTTP server serves HTTPS.
func (t APITLS) Enabled() bool { return t.CertFile != "" && t.KeyFile != "" }

// StateStore selects the persistence backend of the group state.
type StateStore struct {
	// Type is "file" (default: one JSON file written atomically) or
	// "kubernetes" (a ConfigMap, for Deployment installs).
	Type string `yaml:"type" default:"file"`
	// Path is the state file for type file.
	Path string `yaml:"path" default:"/var/lib/failoverd/state.json"`
	// Cluster names the cluster holding the ConfigMap for type kubernetes.
	Cluster string `yaml:"cluster"`
	// Namespace of the ConfigMap for type kubernetes.
	Namespace string `yaml:"namespace" default:"failoverd"`
	// ConfigMap is the ConfigMap's name for type kubernetes.
	ConfigMap string `yaml:"configMap" default:"failoverd-state"`
	// Etcd is the etcd cluster for type etcd: state and leader election in
	// one cluster with a member per site, so the control plane survives the
	// loss of any one site (docs/design.md, "Placing daemons and etcd").
	Etcd Etcd `yaml:"etcd"`
}

// Etcd is an etcd cluster the daemon stores its state and elects its leader in.
type Etcd struct {
	// Endpoints are the client URLs of the members (http:// or https://);
	// list this site's member first.
	Endpoints []string `yaml:"endpoints"`
	// Prefix is the key prefix of everything failoverd writes.
	Prefix string `yaml:"prefix" default:"/failoverd"`
	// DialTimeout bounds connecting to a member.
	DialTimeout time.Duration `yaml:"dialTimeout" default:"2s"`
	// TLS for https:// endpoints: the CA of the members' certificates and,
	// when the members require them, a client certificate and key (PEM).
	TLS EtcdTLS `yaml:"tls"`
}

// EtcdTLS configures TLS to etcd.
type EtcdTLS struct {
	CAFile   string `yaml:"caFile"`
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

// Store types.
const (
	StoreFile       = "file"
	StoreKubernetes = "kubernetes"
	StoreEtcd       = "etcd"
)

// LeaderElection lets only one of several daemon replicas act; the others
// serve read-only status. It runs on a Kubernetes Lease with the kubernetes
// store, and in etcd (a session lease and an election key) with the etcd
// store: the state store and the election must live in one place, so a
// deposed leader's writes can be refused.
type LeaderElection struct {
	// Enabled turns leader election on. Off by default (single daemon).
	Enabled bool `yaml:"enabled"`
	// Cluster names the cluster holding the Lease.
	Cluster string `yaml:"cluster"`
	// Namespace of the Lease.
	Namespace string `yaml:"namespace" default:"failoverd"`
	// LeaseName is the Lease object's name.
	LeaseName string `yaml:"leaseName" default:"failoverd-leader"`
	// LeaseDuration is how long a leader's claim lasts without renewal
	// (with etcd: the session lease's TTL, whole seconds).
	LeaseDuration time.Duration `yaml:"leaseDuration" default:"15s"`
	// RenewDeadline is how long the leader keeps trying to renew before it
	// steps down. RenewDeadline + RetryPeriod + StepDownMargin must be
	// shorter than LeaseDuration in whole seconds (HeldLease).
	RenewDeadline time.Duration `yaml:"renewDeadline" default:"10s"`
	// RetryPeriod is the interval between acquisition attempts.
	RetryPeriod time.Duration `yaml:"retryPeriod" default:"2s"`
}

// Cluster is one Kubernetes cluster the daemon talks to.
type Cluster struct {
	// Name is how sites, DNS and the state store refer to this cluster.
	Name string `yaml:"name"`
	// Kubeconfig is the kubeconfig file path. Empty with InCluster false uses
	// the default loading rules ($KUBECONFIG, ~/.kube/config).
	Kubeconfig string `yaml:"kubeconfig"`
	// Context is the kubeconfig context; empty means its current context.
	Context string `yaml:"context"`
	// InCluster uses the pod's service account instead of a kubeconfig.
	InCluster bool `yaml:"inCluster"`
}

// Group modes (Group.Mode).
const (
	// ModeActive groups act on their decisions (the default).
	ModeActive = "active"
	// ModeObserve groups decide as an active group would and log every
	// decision that would act ("decision.would"), but change nothing: no
	// MySQL statement that writes, no routing, cache or hook, no new epoch.
	ModeObserve = "observe"
)

// Rejoin policies (Group.Rejoin).
const (
	RejoinManual                = "manual"
	RejoinRecloneUnacknowledged = "reclone-unacknowledged"
)

// Engine flavors.
const (
	EngineMySQL   = "mysql"
	EngineMariaDB = "mariadb"
)

// Site roles.
const (
	// RolePrimaryCandidate sites may become the primary.
	RolePrimaryCandidate = "primary-candidate"
	// RoleDROnly sites replicate but are never promoted automatically.
	RoleDROnly = "dr-only"
)

// Detection policies (see docs/design.md).
const (
	// DetectionCorroborated needs the daemon and every reachable replica to
	// lose the primary before it counts as down.
	DetectionCorroborated = "corroborated"
	// DetectionDaemonOnly trusts the daemon's own probes alone.
	DetectionDaemonOnly = "daemon-only"
)

// Fencing policies (see docs/design.md).
const (
	// FencingSidecar promotes once the old primary is fenced, seen down, or
	// its sidecar's self-fence lease has provably expired.
	FencingSidecar = "sidecar"
	// FencingConfirmed promotes only after a fence was read back or mysqld was
	// seen down; it blocks on total host loss.
	FencingConfirmed = "confirmed"
	// FencingNone promotes after corroborated detection: a durability risk.
	FencingNone = "none"
	// FencingSemiSync also promotes once the unreachable old primary can no
	// longer get a semi-sync acknowledgement: it runs semi-sync that never
	// falls back to async, and every replica stopped its IO thread from it.
	FencingSemiSync = "semisync"
	// FencingSemiSyncSidecar accepts either the semi-sync or the sidecar proof.
	FencingSemiSyncSidecar = "semisync+sidecar"
	// FencingGroup is not written in a configuration: it is the effective
	// mode (FencingMode) of a replication: group group, whose members the
	// group itself keeps from writing (a member without the majority blocks
	// its commits, one that leaves goes read-only or offline); failoverd
	// never fences or promotes one.
	FencingGroup = "group"
)

// Replication modes (Group.Replication).
const (
	// ReplicationAsync: asynchronous or semi-synchronous replication from
	// one primary; failoverd detects, fences, elects and promotes.
	ReplicationAsync = "async"
	// ReplicationGroup: MySQL Group Replication, single-primary; the group
	// elects its primary and failoverd observes it, cross-checks every
	// member's report and moves routing, cache, DNS, hooks and readers after
	// the group (docs/design.md, "Group Replication groups").
	ReplicationGroup = "group"
)

// MaxGroupReplicationMembers is the most members a MySQL Group Replication
// group may have.
const MaxGroupReplicationMembers = 9

// Group is one MySQL failover group: two or more sites, one writable primary.
type Group struct {
	// Name identifies the group in logs, metrics, the API and the state.
	Name string `yaml:"name"`
	// Engine is the database flavor: "mysql" (8.0.23+, 8.4, 9.x, Percona
	// Server) or "mariadb" (10.11+).
	Engine string `yaml:"engine" default:"mysql"`
	// Replication is "async" (default: asynchronous or semi-synchronous
	// replication; failoverd elects and promotes) or "group": the sites are
	// the members of a single-primary MySQL Group Replication group, which
	// elects its primary itself; failoverd follows it, never fences or
	// promotes (engine mysql only; fencing and site sidecars are not set, and the settings
	// that steer failoverd's own elections — detection, failoverCooldown,
	// escalation, relayDrainTimeout, maxLagWait, maxCandidateLag, site
	// priority — are not used). `failoverd validate` prints the my.cnf
	// lines the group needs (docs/design.md, "Group Replication groups").
	Replication string `yaml:"replication" default:"async"`
	// Mode is "active" (default: the daemon acts on its decisions) or
	// "observe": it polls and decides exactly as an active group would and
	// logs each decision that would act as "decision.would", but changes
	// nothing on MySQL, routing, the cache or hooks, and never moves the
	// group's epoch or active site (how to trial failoverd against
	// production; docs/design.md, "Observe-only groups").
	Mode string `yaml:"mode" default:"active"`
	// PollInterval is how often each site is probed. Short by default so a
	// dead primary is detected in about a second.
	PollInterval time.Duration `yaml:"pollInterval" default:"500ms"`
	// ProbeTimeout bounds one probe; it must be shorter than PollInterval.
	ProbeTimeout time.Duration `yaml:"probeTimeout" default:"400ms"`
	// FailureThreshold is how many consecutive failed probes mark a site
	// unreachable.
	FailureThreshold int `yaml:"failureThreshold" default:"2"`
	// RecoveryThreshold is how many consecutive writable probes mark a site
	// writable again (read-only is trusted at once: it is safe).
	RecoveryThreshold int `yaml:"recoveryThreshold" default:"3"`
	// Detection is "corroborated" (default: replicas must also have lost the
	// primary) or "daemon-only".
	Detection string `yaml:"detection" default:"corroborated"`
	// Fencing is "confirmed", "semisync", "sidecar", "semisync+sidecar" or
	// "none" (see docs/design.md, "Choosing a fencing mode"). Empty picks "sidecar" when
	// every primary-candidate site has a sidecar, else "confirmed". Not set
	// with replication: group (the group fences itself; FencingGroup).
	Fencing string `yaml:"fencing"`
	// FailoverCooldown is the minimum time between two automatic failovers
	// (planned switchovers count as failovers here).
	FailoverCooldown time.Duration `yaml:"failoverCooldown" default:"10m"`
	// Escalation stops automatic failover after too many in a window.
	Escalation Escalation `yaml:"escalation"`
	// RelayDrainTimeout bounds waiting for a candidate to apply what it had
	// already received from the old primary.
	RelayDrainTimeout time.Duration `yaml:"relayDrainTimeout" default:"30s"`
	// MaxLagWait bounds a planned switchover's wait, with the source fenced,
	// for the target to hold everything the source committed; when it
	// passes, the switchover is abandoned and the source made writable
	// again (nothing lost, nothing else changed).
	MaxLagWait time.Duration `yaml:"maxLagWait" default:"10s"`
	// OnDrainTimeout is "abort" (default: keep the data, try a better
	// candidate or wait for a human) or "promote" (accept the loss).
	OnDrainTimeout string `yaml:"onDrainTimeout" default:"abort"`
	// MaxCandidateLag excludes replicas lagging more than this from promotion.
	MaxCandidateLag time.Duration `yaml:"maxCandidateLag" default:"30s"`
	// SplitBrain decides who stays writable when several sites are.
	SplitBrain SplitBrain `yaml:"splitBrain"`
	// Credentials are the accounts the daemon uses. Passwords live in files,
	// never in this YAML, logs or errors.
	Credentials Credentials `yaml:"credentials"`
	// TLS configures connections to MySQL and replication channels.
	TLS TLS `yaml:"tls"`
	// Sites are the members of the group, in declaration order (the final
	// tie-breaker between equal candidates).
	Sites []Site `yaml:"sites"`
	// DNS is the external-dns DNSEndpoint that follows the primary (optional).
	DNS *DNS `yaml:"dns"`
	// Cache makes a Dragonfly/Redis deployment follow the MySQL primary
	// (optional).
	Cache *Cache `yaml:"cache"`
	// Sidecar configures the self-fencing sidecars beside each MySQL.
	Sidecar SidecarPolicy `yaml:"sidecar"`
	// Reclone configures how a site is re-seeded from the primary when a
	// human asks (POST /v1/groups/{g}/reclone), or the rejoin policy does.
	Reclone Reclone `yaml:"reclone"`
	// Rejoin is what happens to an old primary that comes back holding
	// transactions the new primary lacks: "manual" (default: it is marked
	// diverged and a human decides) or "reclone-unacknowledged" (it is
	// re-seeded from the primary without a human when those transactions
	// are provably unacknowledged: its trailing writes under semi-sync
	// AFTER_SYNC with no fallback, received by no site; needs fencing
	// semisync or semisync+sidecar, and reclone.command on MariaDB). The
	// discarded transactions are logged and kept in the history.
	Rejoin string `yaml:"rejoin" default:"manual"`
	// RoutingReconcileInterval is how often the routing and cache followers
	// (Service selector, node taints, DNSEndpoint, cache roles) are
	// re-checked against the active site and repaired when they drifted
	// (hand edits, a recreated object, an API server that was down).
	RoutingReconcileInterval time.Duration `yaml:"routingReconcileInterval" default:"30s"`
	// Hooks run a command or call a webhook on group events (routing
	// outside Kubernetes: ProxySQL, HAProxy, ...). They never block or undo
	// a MySQL promotion.
	Hooks []Hook `yaml:"hooks"`
	// Readers computes, every poll round, which sites may serve reads
	// (status, metrics, logs, hook events); off by default.
	Readers Readers `yaml:"readers"`
}

// Read routing's includePrimary values (Readers.IncludePrimary).
const (
	// IncludePrimaryWhenNoReplica: the primary serves reads only while no
	// replica does.
	IncludePrimaryWhenNoReplica = "whenNoReplica"
	// IncludePrimaryAlways: the primary serves reads whenever healthy.
	IncludePrimaryAlways = "always"
	// IncludePrimaryNever: the primary never serves reads.
	IncludePrimaryNever = "never"
)

// Readers is a group's read-routing policy: a site is a reader while it
// replicates from the current primary with both threads running, lag known
// and at most MaxLag, and is not diverged, recloning, fenced by the operator
// or held for maintenance (docs/routing.md, "Readers").
type Readers struct {
	// Enabled turns reader eligibility on (status site.reader, the
	// failoverd_site_reader metric, reader.added/removed logs and the
	// reader-added/reader-removed hook events).
	Enabled bool `yaml:"enabled" default:"false"`
	// MaxLag is the most replication lag a reader may have (the larger of
	// Seconds_Behind and the GTID-measured backlog).
	MaxLag time.Duration `yaml:"maxLag" default:"5s"`
	// UpAfter is how many consecutive good poll rounds make a site a
	// reader; DownAfter how many consecutive bad ones end it. Safety reasons
	// (diverged, fenced, recloning, maintenance, wrong source) end it at once.
	UpAfter   int `yaml:"upAfter" default:"3"`
	DownAfter int `yaml:"downAfter" default:"2"`
	// IncludePrimary is when the primary serves reads too: "whenNoReplica"
	// (default), "always" or "never".
	IncludePrimary string `yaml:"includePrimary" default:"whenNoReplica"`
	// Kubernetes, when set, makes a reader Service in every (cluster,
	// namespace) of the sites' kubernetes placements follow the reader set
	// (follower kube-reader-service).
	Kubernetes *ReaderService `yaml:"kubernetes"`
	// DNS, when set, makes a reader DNSEndpoint list the eligible sites'
	// dns.target (follower dns-readers).
	DNS *ReaderDNS `yaml:"dns"`
}

// ReaderService is the reader Service of each (cluster, namespace) among
// the sites' kubernetes placements: failoverd sets its selector to
// {failoverd.io/reader: <group>} and puts that label on the pods (matched
// by each site's kubernetes.podSelector) of the eligible sites only.
type ReaderService struct {
	// Service is the reader Service's name (created by the application's
	// manifests; failoverd never creates it).
	Service string `yaml:"service"`
}

// ReaderDNS is the reader DNSEndpoint, in the cluster and namespace of the
// group's dns section and with its recordType and ttl: one record whose
// targets are the eligible sites' dns.target.
type ReaderDNS struct {
	// EndpointName is the reader DNSEndpoint object's name.
	EndpointName string `yaml:"endpointName"`
	// Hostname is the DNS name that lists the readers.
	Hostname string `yaml:"hostname"`
}

// Hook events (Hook.Events).
const (
	// HookBeforePromote: a failover or switchover is about to make its
	// target writable (the old primary is fenced or proven down).
	HookBeforePromote = "before-promote"
	// HookAfterPromote: the new primary is writable.
	HookAfterPromote = "after-promote"
	// HookFailoverFailed: a failover or switchover ended without promoting.
	HookFailoverFailed = "failover-failed"
	// HookSplitBrain: more than one site is writable.
	HookSplitBrain = "split-brain"
	// HookRecoveryBlocked: a site was found diverged and stays fenced.
	HookRecoveryBlocked = "recovery-blocked"
	// HookReaderAdded: a site joined the reader set (readers.enabled); the
	// event carries the full set.
	HookReaderAdded = "reader-added"
	// HookReaderRemoved: a site left the reader set; the event carries the
	// full set.
	HookReaderRemoved = "reader-removed"
)

// HookEvents lists every hook event.
func HookEvents() []string {
	return []string{HookBeforePromote, HookAfterPromote, HookFailoverFailed, HookSplitBrain, HookRecoveryBlocked, HookReaderAdded, HookReaderRemoved}
}

// Hook is a command or webhook run on some of a group's events, with a JSON
// payload (group, event, epoch, from, to, reason, GTID, time).
type Hook struct {
	// Name identifies the hook in logs, status and metrics; unique in the
	// group.
	Name string `yaml:"name"`
	// Events it runs on (see HookEvents).
	Events []string `yaml:"events"`
	// Command (argv, no shell) gets the payload on stdin and as
	// FAILOVERD_EVENT, FAILOVERD_GROUP, FAILOVERD_EPOCH, FAILOVERD_FROM,
	// FAILOVERD_TO, FAILOVERD_SITE, FAILOVERD_REASON and FAILOVERD_GTID.
	// Exactly one of Command and URL.
	Command []string `yaml:"command"`
	// URL receives the payload as a JSON POST; a non-2xx answer or no
	// answer is retried.
	URL string `yaml:"url"`
	// Timeout bounds the whole run, retries included.
	Timeout time.Duration `yaml:"timeout" default:"10s"`
	// Retries is how many times a failed webhook call is retried within
	// Timeout (commands run once).
	Retries int `yaml:"retries" default:"3"`
}

// Reclone configures the human-triggered re-seed of a site from the primary.
type Reclone struct {
	// Command, when set, re-seeds a site: the daemon runs it (argv, no
	// shell) with the site and the donor names appended and FAILOVERD_GROUP,
	// FAILOVERD_SITE, FAILOVERD_SITE_ADDRESS, FAILOVERD_DONOR and
	// FAILOVERD_DONOR_ADDRESS in its environment; it must leave the site
	// read-only with the donor's data and GTID position. Required for
	// MariaDB (no CLONE; see deploy/reclone/mariadb-backup.sh); MySQL uses
	// CLONE INSTANCE without it.
	Command []string `yaml:"command"`
	// Timeout bounds one reclone: the copy, a restart and the check that
	// the site came back read-only and contained in the primary.
	Timeout time.Duration `yaml:"timeout" default:"2h"`
}

// Escalation halts automatic failover after MaxFailovers within Window, until
// a human acknowledges.
type Escalation struct {
	// MaxFailovers within Window before automatic failover stops.
	MaxFailovers int `yaml:"maxFailovers" default:"3"`
	// Window is the sliding window that failovers are counted in.
	Window time.Duration `yaml:"window" default:"1h"`
}

// SplitBrain configures who wins when more than one site is writable and no
// failover of ours says which one should be.
type SplitBrain struct {
	// PreferSite names the site that stays writable; empty means the highest
	// priority, then declaration order.
	PreferSite string `yaml:"preferSite"`
}

// Credentials are the daemon's MySQL accounts.
type Credentials struct {
	// Admin is the daemon's own account (fences, promotes, repoints).
	Admin Account `yaml:"admin"`
	// Replication is the account replicas use to connect to the primary.
	Replication Account `yaml:"replication"`
	// Sidecar, when set, is the account the sidecars use instead of Admin:
	// it only reads status, fences, ends sessions and lifts its own fence,
	// so it needs fewer privileges (deploy/accounts).
	Sidecar *Account `yaml:"sidecar"`
}

// SidecarAccount is the account a sidecar logs in with: Sidecar, or Admin
// when no sidecar account is configured.
func (c Credentials) SidecarAccount() Account {
	if c.Sidecar != nil {
		return *c.Sidecar
	}
	return c.Admin
}

// Account is a user name plus the file holding its password.
type Account struct {
	// User is the MySQL user name.
	User string `yaml:"user"`
	// PasswordFile holds the password (a trailing newline is ignored).
	PasswordFile string `yaml:"passwordFile"`
}

// TLS configures TLS to MySQL.
type TLS struct {
	// Enabled turns TLS on for the daemon's connections and replication.
	Enabled bool `yaml:"enabled"`
	// CAFile verifies the server certificates; empty uses the system pool.
	CAFile string `yaml:"caFile"`
	// CertFile and KeyFile are an optional client certificate.
	CertFile string `yaml:"certFile"`
	// KeyFile is the client certificate's private key.
	KeyFile string `yaml:"keyFile"`
	// ServerName overrides the name checked in server certificates.
	ServerName string `yaml:"serverName"`
	// InsecureSkipVerify disables certificate checks (testing only).
	InsecureSkipVerify bool `yaml:"insecureSkipVerify"`
}

// Site is one member of a group.
type Site struct {
	// Name identifies the site; unique within the group.
	Name string `yaml:"name"`
	// Role is "primary-candidate" (default) or "dr-only".
	Role string `yaml:"role" default:"primary-candidate"`
	// Priority breaks ties between equally up-to-date candidates; higher wins.
	Priority int `yaml:"priority"`
	// MySQL is how the daemon reaches this site's server.
	MySQL MySQLEndpoint `yaml:"mysql"`
	// Kubernetes places the site in a cluster (optional).
	Kubernetes *Placement `yaml:"kubernetes"`
	// DNS is this site's record target when it is primary (optional).
	DNS *SiteDNS `yaml:"dns"`
	// Cache is this site's Dragonfly/Redis server (optional).
	Cache *Endpoint `yaml:"cache"`
	// Sidecar is this site's failoverd sidecar (optional).
	Sidecar *Endpoint `yaml:"sidecar"`
}

// MySQLEndpoint addresses a site's MySQL server.
type MySQLEndpoint struct {
	// Address is host:port as the daemon dials it.
	Address string `yaml:"address"`
	// ReplicationAddress is host:port as other sites' replicas dial it; empty
	// means Address.
	ReplicationAddress string `yaml:"replicationAddress"`
}

// Placement says where a site runs in Kubernetes.
type Placement struct {
	// Cluster names an entry of clusters.
	Cluster string `yaml:"cluster"`
	// Namespace of the site's Service and pods.
	Namespace string `yaml:"namespace"`
	// Service is the primary Service whose selector follows the primary.
	Service string `yaml:"service"`
	// PodSelector is the selector the Service gets while this site is primary.
	PodSelector map[string]string `yaml:"podSelector"`
	// NodeSelector selects this site's nodes, tainted when the site loses.
	NodeSelector map[string]string `yaml:"nodeSelector"`
}

// SiteDNS is the DNS target of a site.
type SiteDNS struct {
	// Target is an IP address (A/AAAA) or a hostname (CNAME).
	Target string `yaml:"target"`
}

// Endpoint is a plain host:port.
type Endpoint struct {
	// Address is host:port.
	Address string `yaml:"address"`
}

// DNS configures the external-dns DNSEndpoint that follows the primary.
type DNS struct {
	// Cluster names an entry of clusters holding the DNSEndpoint.
	Cluster string `yaml:"cluster"`
	// Namespace of the DNSEndpoint.
	Namespace string `yaml:"namespace"`
	// EndpointName is the DNSEndpoint object's name.
	EndpointName string `yaml:"endpointName"`
	// Hostname is the DNS name that points at the primary.
	Hostname string `yaml:"hostname"`
	// RecordType is A, AAAA or CNAME.
	RecordType string `yaml:"recordType" default:"A"`
	// TTL of the record; short, so clients follow a failover quickly.
	TTL time.Duration `yaml:"ttl" default:"30s"`
}

// Cache engines.
const (
	CacheDragonfly = "dragonfly"
	CacheRedis     = "redis"
)

// Cache configures Dragonfly/Redis follow-along.
type Cache struct {
	// Engine is "dragonfly" (default) or "redis" (also Valkey).
	Engine string `yaml:"engine" default:"dragonfly"`
	// PasswordFile holds the cache's AUTH password (optional).
	PasswordFile string `yaml:"passwordFile"`
	// MaxSyncWait bounds waiting for the new cache primary to catch up.
	MaxSyncWait time.Duration `yaml:"maxSyncWait" default:"5s"`
	// OnSyncTimeout is "proceed" (default: switch anyway) or "fail".
	OnSyncTimeout string `yaml:"onSyncTimeout" default:"proceed"`
}

// SidecarPolicy configures the self-fencing sidecars of a group.
type SidecarPolicy struct {
	// LeaseTimeout is how long a sidecar keeps its site writable without a
	// fresh authoritative view; after it, the sidecar fences its MySQL. The
	// daemon waits this long (plus a margin) before promoting when it cannot
	// confirm the old primary's fence.
	LeaseTimeout time.Duration `yaml:"leaseTimeout" default:"10s"`
	// CheckInterval is how often a sidecar fetches the view and checks its
	// lease. Must be well below LeaseTimeout.
	CheckInterval time.Duration `yaml:"checkInterval" default:"1s"`
}
