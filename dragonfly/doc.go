// Package dragonfly makes a group's cache servers (Dragonfly, or Redis and
// Valkey) follow the MySQL primary: the active site's cache becomes the
// cache primary and every other site's cache replicates from it.
//
// Follower implements the daemon's follower contract (Name, Follow). A
// Follow first reads INFO replication from every site's cache, then:
//
//  1. If the active site's cache is a replica and its master answers, it
//     waits (at most Cache.MaxSyncWait) for the replica to catch up: for
//     Redis/Valkey until slave_repl_offset reaches the master_repl_offset
//     read from the master; for Dragonfly, whose offsets are per shard and
//     not comparable, until the replica is in stable sync (link up, no sync
//     in progress, slave_repl_offset reported). On timeout OnSyncTimeout
//     "proceed" promotes anyway (logged as cache.sync_timeout with
//     possible_loss=true) and "fail" returns ErrSyncTimeout.
//  2. It promotes the active cache: Redis/Valkey with FAILOVER TO run on
//     its master when that is a live site cache and the wait succeeded
//     (no acknowledged write lost; the old master's normal clients are then
//     killed), else with REPLICAOF NO ONE;
//     Dragonfly with REPLTAKEOVER <ceil(MaxSyncWait) seconds> run on the
//     replica (the master blocks writes until the replica has everything,
//     then shuts itself down), or REPLICAOF NO ONE when the master is
//     unreachable, not in stable sync (with "proceed"), or refused the
//     takeover (with "proceed").
//  3. Every other reachable cache gets REPLICAOF <active host> <port>,
//     except ones already replicating from it with the link up or the sync
//     in progress. An unreachable one is reported (ErrUnreachable) but never
//     blocks the promotion; the daemon retries.
//
// Every step is idempotent: following the same view again sends no command
// that changes anything. An active cache replicating from its own replica
// (restarted with a stale replicaof) is promoted without a wait.
//
// Switchover (switchover.go) moves the cache primary for a planned
// switchover, before MySQL is touched: WaitingForCacheSync, then
// PromotingCache (FAILOVER TO on the Redis master, REPLTAKEOVER on the
// Dragonfly replica), or nothing at all with onSyncTimeout "fail".
//
// The engine-specific commands sit behind the unexported conn and engine
// interfaces. Dragonfly cannot be installed on the development machines, so
// the REPLTAKEOVER path is tested only against a test double (fakeDragonfly
// in fakes_test.go), never against a real Dragonfly; the Redis path is tested
// against real redis-server 7 as well. See docs/cache.md.
package dragonfly
