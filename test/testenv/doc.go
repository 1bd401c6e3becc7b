// Package testenv starts and stops the real servers that failoverd's e2e
// tests, benchmarks and playground run against, all on 127.0.0.1:
//
//   - MariaDB 10.11 and MySQL 9.7 sites (StartServer, StartMariaDB,
//     StartMySQL, StartTopology, ReplicateFrom; ForEachEngine runs a test on
//     every engine FAILOVERD_TEST_ENGINE selects): each with its own
//     datadir, port, server id, binlog with GTIDs and the AdminUser /
//     ReplUser / AppUser accounts. The datadir is a copy of a per-engine
//     template built once per machine (accounts created through the unix
//     socket) and cached in CacheDir(); an instance is ready in about 1 s
//     (MariaDB) or 2-3 s (MySQL, which runs from the root scripts/deps
//     builds: MySQLRoot). Every site starts read-only, like a production
//     site; the code under test makes one writable (package
//     test/testenv/promote does it through mysqlctl for tests that need a
//     writable primary up front).
//   - A single-primary MySQL Group Replication group of n members
//     (StartGroupReplication, MySQL only): the settings `failoverd
//     validate` recommends, member 0 bootstraps, the others join.
//   - Redis (StartRedis, StartRedisPair).
//   - etcd clusters of n members, one per site (StartEtcdCluster,
//     StartEtcdClusterWith: Kill, Restart, Isolate from the quorum).
//   - Kubernetes API servers with etcd (StartKube, StartKubes), with the
//     external-dns DNSEndpoint CRD installed (DNSEndpointGVR).
//   - A fault proxy per network link (NewProxy: Cut, Blackhole, Latency,
//     Restore), built on Shopify toxiproxy used as a library.
//   - A write-load generator (StartWriteLoad) recording every acknowledged
//     commit, so a test can prove no acknowledged write was lost.
//
// Everything registers its teardown with T.Cleanup. Server processes run in
// their own process group with Pdeathsig=SIGKILL (forked from one dedicated,
// never-released OS thread), so none outlives even a SIGKILLed test binary;
// cleanup SIGKILLs the group (which also ends a SIGSTOPped server), waits
// for it, and removes the instance's temp dir. Temp dirs are short
// ("/tmp/fo-NNN", unix socket paths are limited to ~107 bytes) and record
// their owner and every process started for them; a later run removes
// those whose owner died before cleanup, and scripts/leftovers checks those
// records (and only those) for survivors.
//
// Missing binaries are fatal errors telling to run scripts/deps, never skips.
// Functions taking a T call T.Fatalf on failure, so call them from the test's
// goroutine; methods without a T (Stop, Kill, Restart, ...) return errors.
package testenv
