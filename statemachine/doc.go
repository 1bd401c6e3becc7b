// Package statemachine is the per-site and per-group detection half of
// failoverd's pure core. It performs no I/O and reads time only through an
// injected clock.
//
// # Per-site debouncing
//
// A [Machine] is fed one [Probe] per poll of a site and keeps a debounced
// [State]:
//
//   - [Unreachable] only after Config.FailureThreshold consecutive failed
//     probes (a network blip must not start a failover);
//   - [Writable] only after Config.RecoveryThreshold consecutive writable
//     probes (a flapping server must not be trusted as primary);
//   - [ReadOnly] at once on a single read-only probe (it is the safe state).
//
// Any probe of another kind interrupts a streak. Every transition is
// reported as a typed [Event] for metrics and logs.
//
// # Group detection
//
// [Detect] classifies a whole group ([GroupInput]: every site's debounced
// state plus what each replica says about its replication source) with a
// declarative table of [Row]s (see [Table]), evaluated in priority order; the
// first row whose Match function holds gives the group's [Code]. The most
// important distinction is between [PrimaryDown] (the daemon cannot reach
// the primary and, under the default [Corroborated] policy, every replica
// following it lost it too), [UnreachablePrimary] (some replica still streams
// from it: a daemon↔primary partition, never a reason to fail over) and
// [PrimaryDownUncorroborated] (nobody can confirm).
//
// Deciding what to do about a code is the job of package sitepair.
package statemachine
