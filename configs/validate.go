package configs

import (
	"crypto/tls"
	"fmt"
	"github.com/failoverd/failoverd/grview"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limits of a group's size.
const (
	MinSites = 2
	MaxSites = 16
)

// nameRE is what group and site names may look like: they appear in metric
// labels, ConfigMap keys, taint values and URLs.
var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate reports every problem of c at once as a *Problems error (wrapping
// ErrInvalid), or nil. It reads credential and key files to check that they
// are readable, and changes nothing. For a Config from Load or Parse, each
// problem carries the position of the key its path names (or of the section
// a missing key belongs in).
func (c *Config) Validate() error {
	v := &validator{problems: &Problems{}, clusters: map[string]bool{}, src: c.src}
	v.clustersSection(c.Clusters)
	v.daemon(c)
	if len(c.Groups) == 0 {
		v.add("groups", "no group defined; add at least one group with two or more sites")
	}
	groupNames := map[string]int{}
	for i, g := range c.Groups {
		path := fmt.Sprintf("groups[%d]", i)
		if prev, dup := groupNames[g.Name]; dup && g.Name != "" {
			v.add(path+".name", "duplicate group name %q (also groups[%d]); give each group its own name", g.Name, prev)
		}
		groupNames[g.Name] = i
		v.group(path, g)
		v.leaderVsSidecarLease(path, c.Daemon.LeaderElection, g)
	}
	v.oneServerPerSite(c.Groups)
	return c.located(v.problems)
}

// leaderRetryJitter is client-go's leaderelection.JitterFactor: a candidate
// retries acquisition every retryPeriod × (1 + up to 1.2), and NewLeaderElector
// refuses renewDeadline <= 1.2 × retryPeriod.
const leaderRetryJitter = 1.2

// HeldLease is how long after a renewal another daemon may take the
// Kubernetes Lease: leaseDuration in whole seconds, as client-go records it
// (leaseDurationSeconds).
func (le LeaderElection) HeldLease() time.Duration { return le.LeaseDuration.Truncate(time.Second) }

// StepDownMargin is how much earlier than HeldLease after its last renewal
// a Lease leader must have stopped acting: it covers the renewal's own
// round trip (the Lease runs from when the API server wrote it, the leader
// only knows when it sent it), clock rate differences between daemons and
// cancelling a step in flight. A twentieth of leaseDuration, at least 250ms.
func (le LeaderElection) StepDownMargin() time.Duration {
	return max(250*time.Millisecond, le.LeaseDuration/20)
}

// LeaderChangeBound is the longest a leader change can take after the last
// renewal of a dead leader: the lease must run out (leaseDuration), then a
// follower's next, jittered, acquisition attempt (up to (1+1.2) × retryPeriod)
// takes it.
func (le LeaderElection) LeaderChangeBound() time.Duration {
	return le.LeaseDuration + time.Duration((1+leaderRetryJitter)*float64(le.RetryPeriod))
}

// usesSidecarLease tells whether a sidecar lease is in play for g: its
// fencing trusts the lease, or a site runs a sidecar, which fences its own
// MySQL when it gets no fresh view for leaseTimeout whatever the fencing.
func (g Group) usesSidecarLease() bool {
	if UsesSidecarProof(g.FencingMode()) {
		return true
	}
	for _, s := range g.Sites {
		if s.Sidecar != nil {
			return true
		}
	}
	return false
}

// leaderVsSidecarLease checks that a leader change fits in the sidecar lease.
func (v *validator) leaderVsSidecarLease(path string, le LeaderElection, g Group) {
	if !le.Enabled || !g.usesSidecarLease() || le.LeaseDuration <= 0 || le.RetryPeriod <= 0 || g.Sidecar.LeaseTimeout <= 0 ||
		!v.intact("daemon.leaderElection", path+".sidecar", path+".fencing", path+".sites") {
		return
	}
	// Followers serve no view (503) while the leader changes; a change longer
	// than the lease makes every sidecar fence its healthy primary.
	if bound := le.LeaderChangeBound(); bound >= g.Sidecar.LeaseTimeout {
		v.add(path+".sidecar.leaseTimeout", "%s is not above the longest leader change, %s (daemon.leaderElection.leaseDuration %s + %.1f × retryPeriod %s): "+
			"no daemon serves the view during a leader change, and a leader change must not outlast a sidecar lease or every sidecar fences its healthy primary; "+
			"raise leaseTimeout above %s, or shorten daemon.leaderElection.leaseDuration and retryPeriod",
			g.Sidecar.LeaseTimeout, bound, le.LeaseDuration, 1+leaderRetryJitter, le.RetryPeriod, bound)
	}
}

// Warnings lists risky but valid choices, for `failoverd validate` and status.
func (c *Config) Warnings() []string {
	var w []string
	for i, g := range c.Groups {
		if UsesSemiSyncProof(g.FencingMode()) {
			// Checked again at run time on every healthy probe of the primary.
			w = append(w, fmt.Sprintf("groups[%d].fencing: %s relies on these settings on every server (the daemon checks the primary's on every probe and reports semisync-settings-unsafe when they do not hold): %s",
				i, g.FencingMode(), SemiSyncSettings(g.Engine)))
		}
		// After a failover the promoted primary has len(Sites)-2 replicas:
		// with fewer than the one acknowledgement semi-sync waits for, no
		// acknowledged write it takes is on a second site.
		if UsesSemiSyncProof(g.FencingMode()) && len(g.Sites) < 3 {
			w = append(w, fmt.Sprintf("groups[%d].sites: %d sites with fencing %s: an acknowledged write is on the primary and its replica, so it survives one failure; "+
				"but after a failover the new primary has no replica left to acknowledge its commits (semi-sync waits for one; k acknowledgements need k+2 sites): "+
				"it commits asynchronously, and the group's RPO is not zero, until the lost site is back and replicating. Use at least 3 sites (a dr-only replica counts)",
				i, len(g.Sites), g.FencingMode()))
		}
		if g.FencingMode() == FencingNone {
			w = append(w, fmt.Sprintf("groups[%d].fencing: none promotes without proof that the old primary stopped accepting writes; acknowledged writes can be lost (durability risk)", i))
		}
		if g.FailoverCooldown == 0 && g.Replication != ReplicationGroup {
			w = append(w, fmt.Sprintf("groups[%d].failoverCooldown: 0 disables anti-flap protection", i))
		}
		if g.Replication == ReplicationGroup {
			w = append(w, g.groupReplicationWarnings(i)...)
		}
	}
	return w
}

// groupReplicationWarnings are the warnings of the replication: group
// group at index i: the my.cnf lines it relies on, and what the group
// decides rather than failoverd.
func (g Group) groupReplicationWarnings(i int) []string {
	w := []string{fmt.Sprintf("groups[%d].replication: group: failoverd follows the group's own elections and relies on these lines in the [mysqld] section of every member's my.cnf "+
		"(bootstrap the group once, by hand; docs/design.md, \"Group Replication groups\"):\n    %s", i, strings.Join(GroupReplicationSettings(), "\n    "))}
	// A two-member group has no majority left after either fails.
	if len(g.Sites) < 3 {
		w = append(w, fmt.Sprintf("groups[%d].sites: %d members: a Group Replication group keeps its majority, so its primary, only while more than half of its members are up; "+
			"with %d it loses it whenever one fails and then blocks every write until a human forces the membership. Use at least 3 members", i, len(g.Sites), len(g.Sites)))
	}
	for j, s := range g.Sites {
		if s.Role == RoleDROnly {
			w = append(w, fmt.Sprintf("groups[%d].sites[%d].role: dr-only does not stop the group electing %s: set group_replication_member_weight=0 on it "+
				"(then it is elected only when no other member is left)", i, j, s.Name))
		}
	}
	return w
}

// GroupReplicationSettings are the my.cnf lines (section [mysqld]) every
// member of a replication: group group needs, as failoverd recommends them
// (package grview checks the same values at run time:
// grview.Settings.Unsafe).
func GroupReplicationSettings() []string {
	return []string{
		"plugin-load-add=group_replication.so",
		"gtid_mode=ON",
		"enforce_gtid_consistency=ON",
		"super_read_only=ON  # every member starts read-only; the group lifts it on its primary only",
		"group_replication_single_primary_mode=ON",
		"group_replication_enforce_update_everywhere_checks=OFF",
		"group_replication_consistency=BEFORE_ON_PRIMARY_FAILOVER  # or BEFORE, AFTER, BEFORE_AND_AFTER: a new primary applies its backlog first",
		"group_replication_exit_state_action=OFFLINE_MODE  # or READ_ONLY: a member that leaves takes no writes",
		"group_replication_autorejoin_tries=3",
		"group_replication_member_expel_timeout=5",
		"group_replication_unreachable_majority_timeout=10  # a member cut off in a minority leaves instead of holding its clients",
		"group_replication_start_on_boot=ON",
		"group_replication_bootstrap_group=OFF  # never ON in a file: bootstrap once, by hand",
		"group_replication_group_name=<the group's UUID>",
		"group_replication_local_address=<this member's host>:33061",
		"group_replication_group_seeds=<every member's local address, comma-separated>",
	}
}

// UsesSidecarProof reports whether a fencing mode trusts sidecar proofs.
func UsesSidecarProof(mode string) bool {
	return mode == FencingSidecar || mode == FencingSemiSyncSidecar
}

// UsesSemiSyncProof reports whether a fencing mode trusts the semi-sync proof.
func UsesSemiSyncProof(mode string) bool {
	return mode == FencingSemiSync || mode == FencingSemiSyncSidecar
}

// SemiSyncSettings are the server settings the semi-sync proof needs, per
// engine, as my.cnf lines.
func SemiSyncSettings(engine string) string {
	// The primary side stays off in my.cnf: failoverd turns it on on the
	// primary it promotes and off on the replicas it repoints (a replica with
	// it on makes its own applier wait for acknowledgements nobody sends).
	if engine == EngineMariaDB {
		return "rpl_semi_sync_slave_enabled=ON, rpl_semi_sync_master_timeout=4294967295, " +
			"rpl_semi_sync_master_wait_no_slave=ON, rpl_semi_sync_master_wait_point=AFTER_SYNC (recommended), skip_slave_start=ON; " +
			"rpl_semi_sync_master_enabled=ON on the primary only (failoverd moves it with the primary)"
	}
	return "plugin-load-add=semisync_source.so, plugin-load-add=semisync_replica.so, " +
		"rpl_semi_sync_replica_enabled=ON, rpl_semi_sync_source_timeout=4294967295, rpl_semi_sync_source_wait_for_replica_count=1, " +
		"rpl_semi_sync_source_wait_no_replica=ON, rpl_semi_sync_source_wait_point=AFTER_SYNC, skip_replica_start=ON; " +
		"rpl_semi_sync_source_enabled=ON on the primary only (failoverd moves it with the primary)"
}

// FencingMode is the effective fencing policy: FencingGroup for a
// replication: group group, else the configured one, or "sidecar" when
// every primary-candidate site declares a sidecar, else "confirmed". Whether a sidecar really runs is checked at run time: the
// lease proof needs the daemon to have received its reports.
func (g Group) FencingMode() string {
	if g.Replication == ReplicationGroup {
		return FencingGroup
	}
	if g.Fencing != "" {
		return g.Fencing
	}
	for _, s := range g.Sites {
		if s.Role == RolePrimaryCandidate && s.Sidecar == nil {
			return FencingConfirmed
		}
	}
	return FencingSidecar
}

// Observing reports whether the group is in observe mode: it decides but
// changes nothing (ModeObserve).
func (g Group) Observing() bool { return g.Mode == ModeObserve }

// Summary is a one-line description of the group for `failoverd validate`.
func (g Group) Summary() string {
	sites := make([]string, 0, len(g.Sites))
	for _, s := range g.Sites {
		sites = append(sites, fmt.Sprintf("%s(%s,p%d)", s.Name, s.Role, s.Priority))
	}
	extras := ""
	if g.DNS != nil {
		extras += ", dns " + g.DNS.Hostname
	}
	if g.Cache != nil {
		extras += ", cache " + g.Cache.Engine
	}
	if g.Observing() {
		extras += ", mode observe (decides and logs, changes nothing)"
	}
	if g.Replication == ReplicationGroup {
		return fmt.Sprintf("group %s: %s, replication group (the group elects; failoverd follows), %d members [%s], poll %s%s",
			g.Name, g.Engine, len(g.Sites), strings.Join(sites, " "), g.PollInterval, extras)
	}
	return fmt.Sprintf("group %s: %s, %d sites [%s], poll %s, detection %s, fencing %s%s",
		g.Name, g.Engine, len(g.Sites), strings.Join(sites, " "), g.PollInterval, g.Detection, g.FencingMode(), extras)
}

type validator struct {
	problems *Problems
	clusters map[string]bool
	// src, when the Config was decoded, tells which values had the wrong
	// type: checks comparing against them are skipped (the comparison would
	// be with a stand-in, and the value is already reported).
	src *source
}

// intact reports whether no value at, under or above any of paths had the
// wrong type.
func (v *validator) intact(paths ...string) bool {
	if v.src == nil {
		return true
	}
	within := func(a, b string) bool { // a lies at or under b
		return a == b || strings.HasPrefix(a, b+".") || strings.HasPrefix(a, b+"[")
	}
	for b := range v.src.broken {
		for _, p := range paths {
			if within(b, p) || within(p, b) {
				return false
			}
		}
	}
	return true
}

func (v *validator) add(path, format string, args ...any) { v.problems.add(path, format, args...) }

func (v *validator) clustersSection(clusters []Cluster) {
	for i, cl := range clusters {
		path := fmt.Sprintf("clusters[%d]", i)
		switch {
		case cl.Name == "":
			v.add(path+".name", "missing; name the cluster so sites can refer to it")
		case v.clusters[cl.Name]:
			v.add(path+".name", "duplicate cluster name %q; give each cluster its own name", cl.Name)
		}
		v.clusters[cl.Name] = true
		if cl.InCluster && cl.Kubeconfig != "" {
			v.add(path+".kubeconfig", "set together with inCluster: true; use one or the other")
		}
		if cl.Kubeconfig != "" {
			v.readable(path+".kubeconfig", cl.Kubeconfig)
		}
	}
}

func (v *validator) clusterRef(path, name string) {
	switch {
	case name == "":
		v.add(path, "missing; name one of the clusters defined under clusters")
	case !v.clusters[name] && v.intact("clusters"):
		v.add(path, "cluster %q is not defined; add it under clusters or fix the name", name)
	}
}

func (v *validator) daemon(c *Config) {
	d := c.Daemon
	v.hostPort("daemon.listen", d.Listen, true)
	v.positive("daemon.maxPause", d.MaxPause)
	v.positive("daemon.maxHold", d.MaxHold)
	switch d.StateStore.Type {
	case "file":
		if d.StateStore.Path == "" {
			v.add("daemon.stateStore.path", "missing; give the state file's path")
		}
	case "kubernetes":
		v.clusterRef("daemon.stateStore.cluster", d.StateStore.Cluster)
		v.nonEmpty("daemon.stateStore.namespace", d.StateStore.Namespace)
		v.nonEmpty("daemon.stateStore.configMap", d.StateStore.ConfigMap)
	case StoreEtcd:
		v.etcd("daemon.stateStore.etcd", d.StateStore.Etcd)
		if !d.LeaderElection.Enabled && v.intact("daemon.leaderElection") {
			// The etcd store fences writes with the election's token.
			v.add("daemon.leaderElection.enabled", "must be true with stateStore type etcd: the etcd store only accepts writes from the elected leader "+
				"(its writes are fenced by the election key), so even a single daemon runs the election; set enabled: true")
		}
	default:
		v.add("daemon.stateStore.type", "%q is not a store type; write file, kubernetes or etcd", d.StateStore.Type)
	}
	if le := d.LeaderElection; le.Enabled {
		if d.StateStore.Type == "file" && v.intact("daemon.stateStore.type") {
			// Each daemon would write its own file: a new leader would start
			// from its own stale epoch and in-flight record, not the last leader's.
			v.add("daemon.stateStore.type", "file cannot be shared by leader-elected daemons (daemon.leaderElection.enabled: true): "+
				"each daemon would read and write its own file, so a new leader would act on a stale epoch; write type: etcd (a member per site) or kubernetes (one cluster)")
		}
		if d.StateStore.Type == StoreEtcd {
			v.etcdElection(le)
		} else {
			v.clusterRef("daemon.leaderElection.cluster", le.Cluster)
			v.nonEmpty("daemon.leaderElection.namespace", le.Namespace)
			v.nonEmpty("daemon.leaderElection.leaseName", le.LeaseName)
			v.leaderTimings(le)
		}
	}
	if d.APITokenFile != "" {
		v.readable("daemon.apiTokenFile", d.APITokenFile)
	}
	if d.APIReadTokenFile != "" {
		v.readable("daemon.apiReadTokenFile", d.APIReadTokenFile)
	}
	if d.APIAdminTokenFile != "" {
		v.readable("daemon.apiAdminTokenFile", d.APIAdminTokenFile)
		if d.APITokenFile == "" {
			// An admin token alone would enable the dangerous commands while
			// the everyday ones stay disabled: almost surely a mistake.
			v.add("daemon.apiAdminTokenFile", "set without daemon.apiTokenFile: the admin token only raises confirm-fence and reclone above the operate token; "+
				"set apiTokenFile too (the operate token), or remove apiAdminTokenFile")
		}
	}
	needKey := false
	for _, g := range c.Groups {
		for _, s := range g.Sites {
			needKey = needKey || s.Sidecar != nil
		}
	}
	switch {
	case d.ViewSigningKeyFile != "":
		v.readable("daemon.viewSigningKeyFile", d.ViewSigningKeyFile)
	case needKey:
		v.add("daemon.viewSigningKeyFile", "missing; sites have sidecars, which only trust views signed with this key: point it at a file with a random secret")
	}
	v.apiTLS("daemon.tls", d.TLS)
	if d.AdvertiseURL != "" {
		if u, err := url.Parse(d.AdvertiseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			v.add("daemon.advertiseURL", "%q is not a base URL; write http://host:port (in a pod http://$(POD_IP):8080 through the environment)", d.AdvertiseURL)
		}
	}
}

// apiTLS checks the HTTPS settings of the daemon's HTTP server, and that the
// files load, so the server does not fail after the daemon started.
func (v *validator) apiTLS(path string, t APITLS) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.add(path+".keyFile", "certFile and keyFile go together; set both or neither")
	}
	if t.ClientCAFile != "" && !t.Enabled() {
		v.add(path+".clientCAFile", "set without certFile and keyFile; client certificates are only checked over HTTPS: set both, or remove clientCAFile")
	}
	ok := true
	for _, f := range []struct{ key, file string }{{"certFile", t.CertFile}, {"keyFile", t.KeyFile}, {"clientCAFile", t.ClientCAFile}} {
		if f.file != "" {
			ok = v.readable(path+"."+f.key, f.file) && ok
		}
	}
	if !ok || !t.Enabled() {
		return
	}
	if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
		v.add(path+".certFile", "%s and %s are no certificate and matching key (%v); write PEM files", t.CertFile, t.KeyFile, err)
	}
	if t.ClientCAFile != "" {
		if _, err := t.clientCAs(); err != nil {
			v.add(path+".clientCAFile", "%v; write PEM certificates", err)
		}
	}
}

// etcd checks the etcd store's settings.
func (v *validator) etcd(path string, e Etcd) {
	if len(e.Endpoints) == 0 {
		v.add(path+".endpoints", "missing; list the client URLs of the etcd members, e.g. [http://etcd-site0:2379, http://etcd-site1:2379, http://etcd-site2:2379]")
	}
	for i, ep := range e.Endpoints {
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(fmt.Sprintf("%s.endpoints[%d]", path, i), "%q is not an etcd client URL; write http://host:2379 or https://host:2379", ep)
		}
	}
	if !strings.HasPrefix(e.Prefix, "/") || strings.HasSuffix(e.Prefix, "/") {
		v.add(path+".prefix", "%q must start with / and not end with one, e.g. /failoverd", e.Prefix)
	}
	v.positive(path+".dialTimeout", e.DialTimeout)
	if (e.TLS.CertFile == "") != (e.TLS.KeyFile == "") {
		v.add(path+".tls.keyFile", "certFile and keyFile go together; set both or neither")
	}
	for _, f := range []struct{ key, file string }{{"caFile", e.TLS.CAFile}, {"certFile", e.TLS.CertFile}, {"keyFile", e.TLS.KeyFile}} {
		if f.file != "" {
			v.readable(path+".tls."+f.key, f.file)
		}
	}
}

// etcdElection checks the election timings in etcd: the session lease TTL
// is whole seconds, and the leader gives up acting after a third of it
// without a confirmed renewal (so it stops before the lease can expire and
// another daemon be elected).
func (v *validator) etcdElection(le LeaderElection) {
	const p = "daemon.leaderElection."
	if le.LeaseDuration < 2*time.Second || le.LeaseDuration%time.Second != 0 {
		v.add(p+"leaseDuration", "%s: with the etcd store it is the session lease's TTL, whole seconds and at least 2s (the leader steps down after a third of it without renewal); write e.g. 5s", le.LeaseDuration)
	}
	v.positive(p+"retryPeriod", le.RetryPeriod)
}

// leaderTimings refuses what client-go's leaderelection.NewLeaderElector
// refuses, so the daemon never fails (RunOrDie panics) after it started, and
// timings with which a leader could still act once another daemon may have
// taken the Lease.
func (v *validator) leaderTimings(le LeaderElection) {
	const p = "daemon.leaderElection."
	v.positive(p+"leaseDuration", le.LeaseDuration)
	v.positive(p+"renewDeadline", le.RenewDeadline)
	v.positive(p+"retryPeriod", le.RetryPeriod)
	if le.RenewDeadline >= le.LeaseDuration && le.LeaseDuration > 0 && le.RenewDeadline > 0 && v.intact(p+"leaseDuration", p+"renewDeadline") {
		v.add(p+"renewDeadline", "%s must be shorter than leaseDuration %s (a leader must step down before its lease can pass to another daemon); "+
			"lower renewDeadline or raise leaseDuration, e.g. leaseDuration 15s, renewDeadline 10s", le.RenewDeadline, le.LeaseDuration)
	} else if stop := le.RenewDeadline + le.RetryPeriod + le.StepDownMargin(); stop >= le.HeldLease() && le.RenewDeadline > 0 && le.RetryPeriod > 0 &&
		le.LeaseDuration > 0 && v.intact(p+"leaseDuration", p+"renewDeadline", p+"retryPeriod") {
		// Guards against two leaders: client-go steps down only at the last
		// renewal + retryPeriod + renewDeadline, another daemon may take the
		// Lease HeldLease after that renewal.
		held := ""
		if le.HeldLease() != le.LeaseDuration {
			held = fmt.Sprintf(" (the Lease records %s)", le.HeldLease())
		}
		v.add(p+"renewDeadline", "renewDeadline %s + retryPeriod %s + margin %s = %s must be below leaseDuration %s%s: the leader steps down only "+
			"renewDeadline after the retryPeriod that follows its last renewal, while another daemon may take the Lease leaseDuration after it, so both would lead; "+
			"lower renewDeadline or retryPeriod, or raise leaseDuration, e.g. leaseDuration 15s, renewDeadline 10s, retryPeriod 2s",
			le.RenewDeadline, le.RetryPeriod, le.StepDownMargin(), stop, le.LeaseDuration, held)
	}
	if jittered := time.Duration(leaderRetryJitter * float64(le.RetryPeriod)); jittered >= le.RenewDeadline && le.RetryPeriod > 0 && le.RenewDeadline > 0 &&
		v.intact(p+"renewDeadline", p+"retryPeriod") {
		v.add(p+"retryPeriod", "%s × %.1f (the retry jitter of the leader election) = %s must be shorter than renewDeadline %s, or the leader cannot renew in time; "+
			"lower retryPeriod below %s or raise renewDeadline", le.RetryPeriod, leaderRetryJitter, jittered, le.RenewDeadline,
			time.Duration(float64(le.RenewDeadline)/leaderRetryJitter))
	}
}

func (v *validator) group(path string, g Group) {
	v.name(path+".name", g.Name)
	switch g.Engine {
	case EngineMySQL, EngineMariaDB:
	default:
		v.add(path+".engine", "%q is not supported; write mysql or mariadb", g.Engine)
	}
	v.oneOf(path+".mode", g.Mode, ModeActive, ModeObserve)
	v.oneOf(path+".replication", g.Replication, ReplicationAsync, ReplicationGroup)
	if g.Replication == ReplicationGroup {
		v.groupReplication(path, g)
	}
	v.positive(path+".pollInterval", g.PollInterval)
	v.positive(path+".probeTimeout", g.ProbeTimeout)
	if g.ProbeTimeout >= g.PollInterval && g.PollInterval > 0 && v.intact(path+".pollInterval", path+".probeTimeout") {
		// A probe longer than the poll interval would pile up probes on a hung site.
		v.add(path+".probeTimeout", "%s must be shorter than pollInterval %s", g.ProbeTimeout, g.PollInterval)
	}
	v.atLeastOne(path+".failureThreshold", g.FailureThreshold)
	v.atLeastOne(path+".recoveryThreshold", g.RecoveryThreshold)
	v.oneOf(path+".detection", g.Detection, DetectionCorroborated, DetectionDaemonOnly)
	if g.Fencing != "" && g.Replication != ReplicationGroup { // refused whole for a GR group (groupReplication)
		v.oneOf(path+".fencing", g.Fencing, FencingConfirmed, FencingSemiSync, FencingSidecar, FencingSemiSyncSidecar, FencingNone)
	}
	if g.FailoverCooldown < 0 {
		v.add(path+".failoverCooldown", "%s is negative; write a positive duration such as 10m", g.FailoverCooldown)
	}
	v.atLeastOne(path+".escalation.maxFailovers", g.Escalation.MaxFailovers)
	v.positive(path+".escalation.window", g.Escalation.Window)
	v.positive(path+".relayDrainTimeout", g.RelayDrainTimeout)
	v.positive(path+".maxLagWait", g.MaxLagWait)
	v.positive(path+".reclone.timeout", g.Reclone.Timeout)
	v.positive(path+".routingReconcileInterval", g.RoutingReconcileInterval)
	v.hooks(path+".hooks", g.Hooks)
	v.readers(path+".readers", g)
	if len(g.Reclone.Command) > 0 && strings.TrimSpace(g.Reclone.Command[0]) == "" {
		v.add(path+".reclone.command", "the first element must be the program to run (absolute path or a name on PATH)")
	}
	v.oneOf(path+".onDrainTimeout", g.OnDrainTimeout, "abort", "promote")
	v.oneOf(path+".rejoin", g.Rejoin, RejoinManual, RejoinRecloneUnacknowledged)
	if g.Rejoin == RejoinRecloneUnacknowledged && g.Replication != ReplicationGroup { // a GR group: groupReplication says why
		// Prevents discarding transactions no proof shows unacknowledged.
		if f := g.FencingMode(); f != FencingSemiSync && f != FencingSemiSyncSidecar {
			v.add(path+".rejoin", "%q needs fencing semisync or semisync+sidecar (semi-sync is what proves the discarded transactions unacknowledged), not %q; set fencing, or use rejoin: manual", g.Rejoin, f)
		}
		// Prevents a site recloned by policy waiting forever for a copy method.
		if g.Engine == EngineMariaDB && len(g.Reclone.Command) == 0 {
			v.add(path+".rejoin", "%q on MariaDB needs reclone.command (MariaDB has no CLONE; see deploy/reclone/mariadb-backup.sh), or use rejoin: manual", g.Rejoin)
		}
	}
	v.positive(path+".maxCandidateLag", g.MaxCandidateLag)
	v.account(path+".credentials.admin", g.Credentials.Admin)
	v.account(path+".credentials.replication", g.Credentials.Replication)
	if g.Credentials.Sidecar != nil {
		v.account(path+".credentials.sidecar", *g.Credentials.Sidecar)
	}
	v.tls(path+".tls", g.TLS)
	v.positive(path+".sidecar.leaseTimeout", g.Sidecar.LeaseTimeout)
	v.positive(path+".sidecar.checkInterval", g.Sidecar.CheckInterval)
	if g.Sidecar.CheckInterval > 0 && 2*g.Sidecar.CheckInterval > g.Sidecar.LeaseTimeout && v.intact(path+".sidecar") {
		// A lease checked too rarely could outlive its timeout before the sidecar fences.
		v.add(path+".sidecar.checkInterval", "%s must be at most half of leaseTimeout %s", g.Sidecar.CheckInterval, g.Sidecar.LeaseTimeout)
	}
	v.sites(path, g)
	if g.DNS != nil {
		v.dns(path+".dns", *g.DNS)
	}
	if g.Cache != nil {
		c := *g.Cache
		v.oneOf(path+".cache.engine", c.Engine, CacheDragonfly, CacheRedis)
		v.positive(path+".cache.maxSyncWait", c.MaxSyncWait)
		v.oneOf(path+".cache.onSyncTimeout", c.OnSyncTimeout, "proceed", "fail")
		if c.PasswordFile != "" {
			v.readable(path+".cache.passwordFile", c.PasswordFile)
		}
	}
}

// groupReplication checks what replication: group rules out: failoverd
// follows the group's own elections and never fences, elects or promotes,
// so every setting that would have it do one is refused, naming why.
func (v *validator) groupReplication(path string, g Group) {
	const why = "replication: group: the group elects its primary and keeps the others from writing itself; failoverd follows it and never fences or promotes a member"
	if g.Engine != EngineMySQL && v.intact(path+".engine") {
		// Prevents a MariaDB group waiting for a Group Replication that cannot exist.
		v.add(path+".engine", "%q has no Group Replication; replication: group needs engine: mysql (MySQL 8.0.23+), or use replication: async", g.Engine)
	}
	// Prevents an operator believing a fencing mode protects the group.
	if g.Fencing != "" {
		v.add(path+".fencing", "%q is not used with %s; remove fencing", g.Fencing, why)
	}
	// Prevents discarding transactions on a proof only async semi-sync gives.
	if g.Rejoin == RejoinRecloneUnacknowledged {
		v.add(path+".rejoin", "%q is not used with %s, and the group recovers a rejoining member itself (distributed recovery); use rejoin: manual", g.Rejoin, why)
	}
	if g.OnDrainTimeout == "promote" {
		v.add(path+".onDrainTimeout", "\"promote\" (accept a loss to promote) is not used with %s; use abort", why)
	}
	if g.SplitBrain.PreferSite != "" {
		v.add(path+".splitBrain.preferSite", "is not used with %s: a single-primary group has one writer; remove it", why)
	}
	for j, s := range g.Sites {
		// Prevents a sidecar from fencing a member the group made primary
		// (or unfencing one it expelled): the group alone decides who
		// writes, and failoverd's view only follows it.
		if s.Sidecar != nil {
			v.add(fmt.Sprintf("%s.sites[%d].sidecar", path, j), "is not used with %s: a sidecar fences its MySQL when the view names another site, "+
				"which would fight the group's own election; remove the sidecar", why)
		}
	}
	if len(g.Sites) > MaxGroupReplicationMembers && v.intact(path+".sites") {
		v.add(path+".sites", "%d sites; a Group Replication group has at most %d members", len(g.Sites), MaxGroupReplicationMembers)
	}
}

func (v *validator) sites(path string, g Group) {
	if len(g.Sites) < MinSites || len(g.Sites) > MaxSites {
		v.add(path+".sites", "%d site(s); a group needs %d to %d sites", len(g.Sites), MinSites, MaxSites)
	}
	names := map[string]int{}
	candidates := 0
	for i, s := range g.Sites {
		sp := fmt.Sprintf("%s.sites[%d]", path, i)
		v.name(sp+".name", s.Name)
		if prev, dup := names[s.Name]; dup && s.Name != "" {
			v.add(sp+".name", "duplicate site name %q (also %s.sites[%d]); give each site its own name", s.Name, path, prev)
		}
		names[s.Name] = i
		switch s.Role {
		case RolePrimaryCandidate:
			candidates++
		case RoleDROnly:
		default:
			v.add(sp+".role", "%q is not a role; write %s or %s", s.Role, RolePrimaryCandidate, RoleDROnly)
		}
		v.hostPort(sp+".mysql.address", s.MySQL.Address, false)
		if s.MySQL.ReplicationAddress != "" {
			v.hostPort(sp+".mysql.replicationAddress", s.MySQL.ReplicationAddress, false)
		}
		if k := s.Kubernetes; k != nil {
			v.clusterRef(sp+".kubernetes.cluster", k.Cluster)
			v.nonEmpty(sp+".kubernetes.namespace", k.Namespace)
			if k.Service != "" && len(k.PodSelector) == 0 {
				v.add(sp+".kubernetes.podSelector", "missing; the Service %q needs the pod labels of this site's primary", k.Service)
			}
			if k.Service == "" && len(k.NodeSelector) == 0 {
				v.add(sp+".kubernetes", "neither service nor nodeSelector set; give at least one, or remove the kubernetes section")
			}
		}
		if v.intact(path + ".dns") {
			v.siteDNS(path, sp, s, g.DNS)
		}
		if s.Cache != nil {
			v.hostPort(sp+".cache.address", s.Cache.Address, false)
			if g.Cache == nil && v.intact(path+".cache") {
				v.add(sp+".cache", "set but %s.cache is missing; add the group's cache section (engine, maxSyncWait)", path)
			}
		} else if g.Cache != nil && s.Role == RolePrimaryCandidate {
			v.add(sp+".cache.address", "missing; the group's cache follows the MySQL primary, so every primary-candidate needs its cache address")
		}
		if s.Sidecar != nil {
			v.hostPort(sp+".sidecar.address", s.Sidecar.Address, false)
		} else if UsesSidecarProof(g.Fencing) && g.Replication != ReplicationGroup && s.Role == RolePrimaryCandidate && v.intact(sp+".role") {
			v.add(sp+".sidecar.address", "missing; fencing: %s needs a sidecar at every primary-candidate (or choose fencing: confirmed or semisync)", g.Fencing)
		}
	}
	if candidates < 2 && len(g.Sites) > 0 && v.intact(path+".sites") {
		v.add(path+".sites", "%d primary-candidate site(s); failover needs at least 2 (set role: primary-candidate on another site)", candidates)
	}
	if p := g.SplitBrain.PreferSite; p != "" && v.intact(path+".sites") {
		if _, ok := names[p]; !ok {
			v.add(path+".splitBrain.preferSite", "site %q is not in this group; name one of its sites", p)
		}
	}
}

// oneServerPerSite refuses two sites, of one group or of two, whose
// mysql.address names the same server: the daemon would count one server
// as two members (a "replica" that is the primary itself, a failover onto
// the server that failed), and two groups would fence, promote and repoint
// the same server against each other.
func (v *validator) oneServerPerSite(groups []Group) {
	seen := map[string]string{}
	for i, g := range groups {
		for j, s := range g.Sites {
			path := fmt.Sprintf("groups[%d].sites[%d].mysql.address", i, j)
			key, ok := grview.ServerKey(s.MySQL.Address)
			if !ok || !v.intact(path) {
				continue // not host:port: reported by hostPort
			}
			if prev, dup := seen[key]; dup {
				v.add(path, "%q is the server of %s too; every site is its own MySQL server: give each site its server's address", s.MySQL.Address, prev)
				continue
			}
			seen[key] = path
		}
	}
}

func (v *validator) siteDNS(path, sp string, s Site, group *DNS) {
	if s.DNS == nil {
		if group != nil && s.Role == RolePrimaryCandidate {
			v.add(sp+".dns.target", "missing; the group's DNS record follows the primary, so every primary-candidate needs its target")
		}
		return
	}
	if group == nil {
		v.add(sp+".dns", "set but the group has no dns section; add it (cluster, namespace, endpointName, hostname)")
		return
	}
	t := s.DNS.Target
	ip := net.ParseIP(t)
	switch {
	case t == "":
		v.add(sp+".dns.target", "missing; write an IP address or a hostname")
	case !v.intact(path + ".dns.recordType"):
		// The record type is reported; the target cannot be checked against it.
	case group.RecordType == "A" && (ip == nil || ip.To4() == nil):
		v.add(sp+".dns.target", "%q is not an IPv4 address, which recordType A needs", t)
	case group.RecordType == "AAAA" && (ip == nil || ip.To4() != nil):
		v.add(sp+".dns.target", "%q is not an IPv6 address, which recordType AAAA needs", t)
	case group.RecordType == "CNAME" && ip != nil:
		v.add(sp+".dns.target", "%q is an IP address; recordType CNAME needs a hostname", t)
	}
}

func (v *validator) dns(path string, d DNS) {
	v.clusterRef(path+".cluster", d.Cluster)
	v.nonEmpty(path+".namespace", d.Namespace)
	v.nonEmpty(path+".endpointName", d.EndpointName)
	v.nonEmpty(path+".hostname", d.Hostname)
	v.oneOf(path+".recordType", d.RecordType, "A", "AAAA", "CNAME")
	v.positive(path+".ttl", d.TTL)
}

func (v *validator) account(path string, a Account) {
	v.nonEmpty(path+".user", a.User)
	if a.PasswordFile == "" {
		v.add(path+".passwordFile", "missing; point it at a file holding the password (never put passwords in this file)")
		return
	}
	v.readable(path+".passwordFile", a.PasswordFile)
}

func (v *validator) tls(path string, t TLS) {
	if !t.Enabled {
		return
	}
	for _, f := range []struct{ key, file string }{{"caFile", t.CAFile}, {"certFile", t.CertFile}, {"keyFile", t.KeyFile}} {
		if f.file != "" {
			v.readable(path+"."+f.key, f.file)
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.add(path+".keyFile", "certFile and keyFile go together; set both or neither")
	}
}

func (v *validator) name(path, name string) {
	switch {
	case name == "":
		v.add(path, "missing; give a name of lower-case letters, digits and dashes")
	case !nameRE.MatchString(name):
		v.add(path, "%q is not a valid name; use lower-case letters, digits and dashes (at most 63)", name)
	}
}

func (v *validator) nonEmpty(path, s string) {
	if strings.TrimSpace(s) == "" {
		v.add(path, "missing; it is required here")
	}
}

func (v *validator) positive(path string, d time.Duration) {
	if d <= 0 {
		v.add(path, "%s is not positive; write a duration above zero such as 500ms or 10s", d)
	}
}

func (v *validator) atLeastOne(path string, n int) {
	if n < 1 {
		v.add(path, "%d is below 1; write a whole number of at least 1", n)
	}
}

func (v *validator) oneOf(path, got string, allowed ...string) {
	for _, a := range allowed {
		if got == a {
			return
		}
	}
	v.add(path, "%q is not allowed; write one of %s", got, strings.Join(allowed, ", "))
}

// hostPort checks a host:port address; listen addresses may omit the host.
func (v *validator) hostPort(path, addr string, listen bool) {
	if addr == "" {
		v.add(path, "missing; write host:port")
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			v.add(path, "%q is missing a port; write host:port", addr)
		} else {
			v.add(path, "%q is not host:port (%s)", addr, strings.TrimPrefix(err.Error(), "address "+addr+": "))
		}
		return
	}
	if host == "" && !listen {
		v.add(path, "%q has no host; write host:port", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		v.add(path, "port %q is not a number from 1 to 65535", port)
	}
}

func (v *validator) readable(path, file string) bool {
	f, err := os.Open(file)
	if err != nil {
		v.add(path, "cannot read %s (%s); fix the path or the file's permissions", file, reason(err))
		return false
	}
	_ = f.Close() // opened only to prove it is readable
	return true
}

// reason strips the path from an *os.PathError's text.
func reason(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// hooks checks a group's event hooks.
func (v *validator) hooks(path string, hooks []Hook) {
	seen := map[string]bool{}
	for i, h := range hooks {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case h.Name == "":
			v.add(p+".name", "required: a name for logs, status and metrics")
		case seen[h.Name]:
			v.add(p+".name", "%q is used by another hook of this group; names must be unique", h.Name)
		}
		seen[h.Name] = true
		if len(h.Events) == 0 {
			v.add(p+".events", "required: one or more of %s", strings.Join(HookEvents(), ", "))
		}
		for j, e := range h.Events {
			if !slices.Contains(HookEvents(), e) {
				v.add(fmt.Sprintf("%s.events[%d]", p, j), "unknown event %q: use one of %s", e, strings.Join(HookEvents(), ", "))
			}
		}
		switch {
		case len(h.Command) == 0 && h.URL == "":
			v.add(p, "set command (argv) or url (webhook)")
		case len(h.Command) > 0 && h.URL != "":
			v.add(p, "set command or url, not both")
		case len(h.Command) > 0 && strings.TrimSpace(h.Command[0]) == "":
			v.add(p+".command", "the first element must be the program to run")
		case h.URL != "":
			if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.add(p+".url", "%q is not an http:// or https:// URL", h.URL)
			}
		}
		v.positive(p+".timeout", h.Timeout)
		if h.Retries < 0 {
			v.add(p+".retries", "must not be negative")
		}
	}
}

// readers checks the read-routing policy (checked even while disabled, so
// turning it on never meets a surprise).
func (v *validator) readers(path string, g Group) {
	r := g.Readers
	v.positive(path+".maxLag", r.MaxLag)
	v.atLeastOne(path+".upAfter", r.UpAfter)
	v.atLeastOne(path+".downAfter", r.DownAfter)
	v.oneOf(path+".includePrimary", r.IncludePrimary, IncludePrimaryWhenNoReplica, IncludePrimaryAlways, IncludePrimaryNever)
	// A reader target without eligibility would stay empty forever.
	if (r.Kubernetes != nil || r.DNS != nil) && !r.Enabled {
		v.add(path+".enabled", "false but reader targets (readers.kubernetes or readers.dns) are set; write enabled: true or remove them")
	}
	if k := r.Kubernetes; k != nil {
		v.nonEmpty(path+".kubernetes.service", k.Service)
		placed := false
		for _, s := range g.Sites {
			placed = placed || (s.Kubernetes != nil && len(s.Kubernetes.PodSelector) > 0)
		}
		if !placed {
			v.add(path+".kubernetes", "no site has kubernetes.podSelector, so no pod can be labelled a reader; give each site its pods' podSelector")
		}
	}
	if d := r.DNS; d != nil {
		v.nonEmpty(path+".dns.endpointName", d.EndpointName)
		v.nonEmpty(path+".dns.hostname", d.Hostname)
		if g.DNS == nil {
			v.add(path+".dns", "set but the group has no dns section; add it (cluster, namespace, endpointName, hostname): the reader record lives beside the writer's")
		} else if d.EndpointName == g.DNS.EndpointName && d.EndpointName != "" {
			v.add(path+".dns.endpointName", "%q is the writer's DNSEndpoint; name another object (e.g. %s-readers)", d.EndpointName, d.EndpointName)
		}
	}
}
