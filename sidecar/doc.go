// Package sidecar is the self-fencing sidecar that runs beside one site's
// MySQL (docs/design.md; protocol: issue 12). It keeps the newest view it
// trusts (view.Signed, HMAC with daemon.viewSigningKeyFile, ordered by epoch
// for fencing) and a lease deadline on its own monotonic clock, and fences its MySQL
// when the view names another site (or none) or when the lease runs out.
//
// # Rounds
//
// Every checkInterval, and at once at start, a round:
//
//  1. reads the local MySQL's status (for the report);
//  2. POSTs a signed view.Report to the daemon (each --daemon-url until one
//     answers 200 with its signed view) and GETs
//     /peer/active-site?from=SITE&nonce=N from every peer sidecar, all at the
//     same time; each request carries a fresh random nonce (the report in
//     its body), all made at one instant taken before anything is sent;
//  3. adopts a trusted view (signature verifies, group matches) only when its
//     epoch is strictly newer; equal epochs never flip anything, and bad
//     signatures, other groups, older epochs and conflicting equal epochs are
//     counted in failoverd_sidecar_rejected_views_total and change nothing.
//     A view of the current epoch and active site with a higher Seq replaces
//     the one held for its read exclusions (view.View.NoReads) only: fencing
//     sees no change, and a lower Seq (a peer's older copy) is ignored;
//  4. renews the lease, L = max(L, nonceTime + leaseTimeout), from any
//     trusted view (the daemon's or a peer's) whose epoch is the current one
//     and which, like the current view, names this site, and only when its
//     answer is bound to the request (view.Answer: an HMAC with the same key
//     over the nonce, this site, the answerer and the view's signature). A
//     replayed or unbound answer (from a daemon or peer of an older version)
//     renews nothing and is counted in
//     failoverd_sidecar_unbound_answers_total; a newer view in it is still
//     adopted (it can only fence more).
//
// During a failover rounds come faster: while the newest view names no site
// (the daemon revoked the primary and has not published the promotion yet),
// and once right after a round that adopted a newer view, the next round
// starts max(checkInterval/5, 50ms) (at most checkInterval) after the last
// one ends instead of checkInterval. The daemon waits (at most 3 x
// checkInterval) for the target's sidecar to report the promotion's epoch
// before it makes the target writable; fast rounds let the sidecar fetch that
// view and report it within two fast intervals. The rules and the lease are
// the same in both paces.
//
// A separate guard goroutine enforces the rules, so a round stuck on a slow
// daemon or peer never delays a fence:
//
//   - rule 1: the view names another site or none → fence now (checked after
//     every round and immediately after a new view is adopted);
//   - rule 2: the lease deadline passed → fence (a timer armed at L, not only
//     the round tick). The lease starts expired: a (re)started sidecar holds
//     no lease until a daemon or peer view naming its site renews it.
//
// # Fence
//
// A fence reads the status and, unless the flavor's fence is already in
// effect (super_read_only on MySQL, read_only on MariaDB) or a newer view
// adopted meanwhile no longer demands it, runs
// Instance.Fence then KillClientConnections, all within the fence timeout
// (min(400ms, leaseTimeout/4)). When that fails or times out (a hung,
// SIGSTOPped mysqld) and a pid file is configured, the sidecar SIGKILLs the
// mysqld named there (only a process whose name is mysqld or mariadbd: a
// stale pid file must not kill a reused pid) and reports it down. A refused
// connection means no mysqld listens (stopped or still starting read-only):
// there is nothing to fence or kill. The sidecar never lifts a fence itself
// afterwards.
//
// # Deployment
//
// The server must start read-only. In my.cnf:
//
//	[mysqld]
//	read_only=ON
//	super_read_only=ON   # MySQL only; MariaDB has no super_read_only
//
// The SIGKILL escalation needs the sidecar to be able to signal mysqld: the
// same host, or the same Kubernetes pod with shareProcessNamespace: true (a
// container has its own pid namespace otherwise, where the pid in mysqld's pid
// file names another process or none), and the same user or CAP_KILL, plus
// --mysqld-pid-file pointing at mysqld's pid file (a shared volume in a pod).
// Each report says canKill=true only while those hold: the pid file names a
// running mysqld or mariadbd that the sidecar sees and may signal (probed with
// signal 0); canKill=false otherwise (and after a kill, until mysqld runs
// again). Without a kill a hung mysqld stays as it is; the sidecar retries the
// fence every round and it takes effect once mysqld resumes.
//
// With PeerTLSFiles (--peer-ca-file, --peer-cert-file, --peer-key-file, on
// every sidecar of the group) it serves HTTPS and dials its peers at
// https://, verifying them with that CA; the certificate must name the host
// of sites[S].sidecar.address.
//
// The sidecar listens on sites[S].sidecar.address and fences the server at
// sites[S].mysql.address; the command's --listen and --mysql-address
// (Overrides) replace them for this sidecar when the configured addresses are
// how others dial (a Service name, a proxy).
//
// # Boot
//
// A (re)started sidecar holds no view and no lease: it cannot know when its
// previous run last renewed. Its first round runs at once; if no trusted view
// from that round (the daemon's or a peer's) names its site, the guard fences
// a writable server (rule 1 when the view names another site or none, rule 2,
// the expired lease, when there is no view at all). A read-only server stays
// as it is.
//
// The sidecar lifts the start-up read-only (Instance.Promote) only during
// its boot phase, only on a view obtained directly from the daemon (a peer may
// still hold a revoked epoch) that is the newest view, names this site and
// whose own lease is still running, and only when no replication runs. The
// boot phase ends at the first such decision (unfenced; or skipped because
// the daemon named another site, replication runs or the server is already
// writable) or at the sidecar's first fence. While mysqld is not up yet the
// decision waits. After the boot phase it never unfences: only the daemon's
// promotion makes the server writable.
//
// # HTTP (sites[S].sidecar.address, or --listen)
//
//	GET /healthz           200 "ok"
//	GET /health            ?role=primary|replica|any&maxLag=5s: 200 or 503
//	                       with {"status","role","reason"} for this site,
//	                       from the last local read and the view held (no
//	                       SQL per request): primary needs the view to name
//	                       this site, the lease running and mysqld writable;
//	                       replica needs the view held not to withhold this
//	                       site from reads (its NoReads: "withheld from
//	                       reads by the daemon's view: diverged"; without a
//	                       view only the local read counts), mysqld
//	                       read-only, both threads running and the lag
//	                       known (within maxLag); a
//	                       local read older than max(leaseTimeout,
//	                       3 x checkInterval) counts as none
//	GET /peer/ping         {"site":S,"epoch":E}
//	GET /peer/active-site  the newest signed view (404 without one); records
//	                       when and which epoch was served to ?from=PEER,
//	                       and for a configured PEER binds the answer to
//	                       ?nonce= (32 to 128 hex digits)
//	GET /metrics           failoverd_sidecar_fences_total{reason},
//	                       failoverd_sidecar_lease_remaining_seconds,
//	                       failoverd_sidecar_view_epoch,
//	                       failoverd_sidecar_rejected_views_total{why},
//	                       failoverd_sidecar_unbound_answers_total{why}
//
// # Logs
//
// JSON (log/slog) with stable message keys: sidecar.view_adopted,
// sidecar.view_rejected, sidecar.answer_unbound (debug; warn for a binding
// that does not match), sidecar.lease_renewed (debug), sidecar.fenced,
// sidecar.fence_skipped, sidecar.fence_failed, sidecar.mysqld_killed,
// sidecar.mysqld_down, sidecar.unfenced, sidecar.boot_unfence_skipped,
// sidecar.boot_unfence_failed, sidecar.daemon_unreachable,
// sidecar.daemon_reachable, sidecar.peer_unreachable (debug),
// sidecar.reads_withheld (warn), sidecar.reads_allowed,
// sidecar.started, sidecar.stopped.
package sidecar
