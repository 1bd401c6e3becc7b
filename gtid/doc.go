// Package gtid is the GTID set algebra every failover decision is built on:
// parsing, printing, comparing and combining the GTID sets of MySQL and
// MariaDB servers. It is pure: no I/O, no clock, no global mutable state.
//
// # Sets
//
// A [Set] is an immutable value: operations return new sets and never modify
// their operands, so sets may be shared freely between goroutines. The zero
// Set is the empty set of unknown flavor and is usable everywhere.
//
// Internally a set maps a source key to a sorted list of disjoint,
// non-adjacent, inclusive intervals of transaction numbers (all ≥ 1):
//
//   - MySQL: key = (server UUID, tag); the numbers are GNOs.
//   - MariaDB: key = (domain_id, server_id); the numbers are seq_nos.
//
// [Set.Contains], [Set.Subtract], [Set.Union] and [Set.Intersect] are the
// same interval algebra for both flavors, computed by linear merges.
//
// # Flavors
//
// Every set parsed by [Parse] carries its [Flavor]. Combining two non-empty
// sets of different flavors (Equal, Contains, Subtract, Union, Intersect,
// Comparable) is a programming error and panics with an error wrapping
// [ErrFlavorMismatch]; use [CheckFlavor] first when the inputs come from
// differently configured servers. An empty set of any flavor (including the
// zero Set) combines with anything; the result takes the flavor of the
// non-empty operand.
//
// # MySQL syntax
//
// Parse accepts @@gtid_executed / @@gtid_purged text, including the tagged
// GTIDs of MySQL 8.3+/8.4:
//
//	set      = [ uuid_set { "," uuid_set } ]
//	uuid_set = uuid ":" [ tag ":" ] ivs { ":" tag ":" ivs }
//	ivs      = interval { ":" interval }
//	interval = n [ "-" m ]          1 ≤ n ≤ m ≤ 2^63-2
//	tag      = [a-z_][a-z0-9_]{0,31}   (case-insensitive)
//
// A tag applies to the intervals that follow it up to the next tag; the
// intervals before the first tag are untagged. UUIDs are the 36-character
// dashed form. Whitespace (including the newline MySQL prints after each
// comma) is allowed around every token, empty elements (",,") are skipped as
// MySQL does, UUIDs and tags are normalised to lower case. A UUID or tag
// without intervals and a reversed interval ("5-3") are errors.
//
// [Set.String] prints the canonical form: UUIDs in ascending order, the
// untagged intervals of a UUID first, then its tags in ascending order,
// intervals merged and sorted, sets separated by "," (no newline), e.g.
//
//	3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7:domain_1:1-3,4d8b2e3a-0f1c-11ef-8b2a-0242ac120002:1-9
//
// # MariaDB model
//
// MariaDB prints GTID lists of "domain-server-seq" triples: @@gtid_current_pos
// and @@gtid_slave_pos hold one triple per domain, @@gtid_binlog_state one
// triple per (domain, server_id) pair. Parse reads all of them with one rule:
//
//	the triple d-s-n means "every transaction that server s originated in
//	domain d with sequence number ≤ n", i.e. the interval [1, n] under the
//	key (d, s).
//
// Several triples are combined by union, so "0-1-50,0-2-100" is
// {(0,1): [1,50], (0,2): [1,100]}. d-s-0 denotes no transactions. Domains and
// server ids are 32-bit, seq_nos 64-bit unsigned.
//
// This model is an over-approximation (server s did not originate every seq
// ≤ n; seq_nos of a domain are shared by all its servers), but it is applied
// identically to every server, so comparisons are meaningful. Consequences:
//
//   - Errant transactions: a replica (server_id 3) that wrote locally in
//     domain 0 has binlog state "0-1-50,0-3-51"; the key (0,3) is absent
//     from the primary's "0-1-50", so the primary does not contain it and
//     Replica.Subtract(Primary) is "0-3-51".
//   - Failover to a new server id in the same domain is fine: after server 2
//     takes over from server 1 at seq 50 and writes up to 100, its binlog
//     state is "0-1-50,0-2-100", which contains the old primary's "0-1-50".
//     If the old primary had also written seq 51-52 that never replicated,
//     its "0-1-52" is not contained: those transactions are lost/diverged.
//   - Domains are independent keys; nothing in domain 1 compensates for
//     anything missing in domain 0.
//   - Compare like with like: use @@gtid_binlog_state on every server. A
//     one-triple-per-domain position ("0-2-100") lacks the older servers'
//     triples and is therefore not contained in a binlog state that has them.
//   - [Set.Count] is only an upper bound for MariaDB, because the intervals
//     of different servers in one domain cover the same shared seq_nos:
//     "0-1-50,0-2-100" really holds 100 transactions but counts 150.
//     [DivergentCount] counts what one server holds that another lacks
//     exactly, from the point where their histories fork (it assumes
//     gtid_strict_mode).
//
// Results of Subtract or Intersect may hold intervals that do not start at 1.
// [Set.String] prints an interval [1, n] as the plain triple "d-s-n" and any
// other interval [a, b] as "d-s-a..b" (also for a = b, e.g. "0-1-7..7"); a key
// with several intervals is printed as several elements, so
// {(0,1): [1,4], [10,20]} is "0-1-4,0-1-10..20". Parse accepts this
// extension, but MariaDB itself does not: only sets whose intervals all start
// at 1 may be sent back to a server.
package gtid
