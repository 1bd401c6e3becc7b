// Package sidecar is the self-fencing sidecar that runs beside one site's
// MySQL (docs/design.md; protocol: issue 12). It keeps the newest view it
// trusts (view.Signed, HMAC with daemon.viewSigningKeyFile, ordered by epoch
// only) and a lease deadline on its own monotonic clock, and fences its MySQL
// when the view names another site (or none) or when the lease runs out.
//
// # Rounds
//
// Every checkInterval, and at once at start, a round:
//
//  1. reads the local MySQL's status (for the report);
//  2. POSTs a signed Report to the daemon (each --daemon-url until one
//     answers 200 with its signed view) and GETs /peer/active-site?from=SITE
//     from every peer sidecar, all at the same time, each send time taken
//     before sending;
//  3. adopts a trusted view (signature verifies, group matches) only when its
//     epoch is strictly newer; equal epochs never flip anything, and bad
//     signatures, other groups, older epochs and conflicting equal epochs are
//     counted in failoverd_sidecar_rejected_views_total and change nothing;
//  4. renews the lease, L = max(L, sendTime + leaseTimeout), from any trusted
//     view (the daemon's or a peer's) whose epoch is the current one and which,
//     like the current view, names this site.
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
// (min(500ms, leaseTimeout/4)). When that fails or times out (a hung,
// SIGSTOPped mysqld) and a pid file is configured, the sidecar SIGKILLs the
// mysqld named there (only a process whose name is mysqld or mariadbd: a
// stale pid file must not kill a reused pid) and reports it down. A refused
// connection means no mysqld listens (stopped or still starting read-only):
// there is nothing to fence or kill. The sidecar never lifts a fence itself
// afterwards.
//
// # Boot
//
// A server starts read-only (my.cnf read_only=ON, MySQL also
// super_read_only=ON). The sidecar lifts that (Instance.Promote) only during
// its boot phase, only on a view obtained directly from the daemon (a peer may
// still hold a revoked epoch) that is the newest view, names this site and
// whose own lease is still running, and only when no replication runs. The
// boot phase ends at the first such decision (or the first fence).
//
// # HTTP (sites[S].sidecar.address)
//
//	GET /healthz           200 "ok"
//	GET /peer/ping         {"site":S,"epoch":E}
//	GET /peer/active-site  the newest signed view (404 without one); records
//	                       when and which epoch was served to ?from=PEER
//	GET /metrics           failoverd_sidecar_fences_total{reason},
//	                       failoverd_sidecar_lease_remaining_seconds,
//	                       failoverd_sidecar_view_epoch,
//	                       failoverd_sidecar_rejected_views_total{why}
//
// # Logs
//
// JSON (log/slog) with stable message keys: sidecar.view_adopted,
// sidecar.view_rejected, sidecar.lease_renewed (debug), sidecar.fenced,
// sidecar.fence_skipped, sidecar.fence_failed, sidecar.mysqld_killed,
// sidecar.mysqld_down, sidecar.unfenced, sidecar.boot_unfence_skipped,
// sidecar.boot_unfence_failed, sidecar.daemon_unreachable,
// sidecar.daemon_reachable, sidecar.peer_unreachable (debug),
// sidecar.started, sidecar.stopped.
package sidecar
