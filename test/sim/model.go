// Package sim is failoverd's deterministic simulation: seeded histories of
// one failover group on a fake clock, where an in-memory model of N MySQL
// sites (GTID sets, read_only, semi-sync acknowledgements, replication
// links with relay backlogs, crashes, hangs, partitions) is driven by the
// daemon's own loop (daemon.Harness: the group's decide, act, persist and
// publish code, its executor, the tracker-backed observations it decides
// on) configured through configs.Parse and saving to store.Memory.
// Invariants are checked after every step. See docs/simulation.md.
package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/failoverd/failoverd/gtid"
)

// txn is one transaction: the index of the server that originated it and
// its sequence number on that server (MySQL uuid:n).
type txn struct {
	origin int
	seq    uint64
}

// txnSet is a set of transactions with its gtid.Set form cached: the
// cache is extended by the transactions added since it was built.
type txnSet struct {
	m     map[txn]struct{}
	cache *gtid.Set
	added []txn // added after cache was built
}

func newTxnSet() *txnSet { return &txnSet{m: map[txn]struct{}{}} }

func (s *txnSet) has(t txn) bool { _, ok := s.m[t]; return ok }

func (s *txnSet) add(t txn) {
	if _, ok := s.m[t]; !ok {
		s.m[t] = struct{}{}
		if s.cache != nil {
			s.added = append(s.added, t)
		}
	}
}

func (s *txnSet) clear() {
	if len(s.m) > 0 {
		s.m = map[txn]struct{}{}
		s.cache, s.added = nil, nil
	}
}

// uuidOf is server i's @@server_uuid.
func uuidOf(i int) string { return fmt.Sprintf("00000000-0000-0000-0000-%012x", i+1) }

// gtidSet returns the set in gtid form (MySQL flavor).
func (s *txnSet) gtidSet() gtid.Set {
	if s.cache == nil {
		all := make([]txn, 0, len(s.m))
		for t := range s.m {
			all = append(all, t)
		}
		set := gtidOf(all)
		s.cache, s.added = &set, nil
	} else if len(s.added) > 0 {
		set := s.cache.Union(gtidOf(s.added))
		s.cache, s.added = &set, nil
	}
	return *s.cache
}

// gtidOf is the gtid form of txns (any order).
func gtidOf(txns []txn) gtid.Set {
	per := map[int][]uint64{}
	for _, t := range txns {
		per[t.origin] = append(per[t.origin], t.seq)
	}
	origins := make([]int, 0, len(per))
	for o := range per {
		origins = append(origins, o)
	}
	slices.Sort(origins)
	var b strings.Builder
	for i, o := range origins {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(uuidOf(o))
		seqs := per[o]
		slices.Sort(seqs)
		for j := 0; j < len(seqs); {
			k := j
			for k+1 < len(seqs) && seqs[k+1] == seqs[k]+1 {
				k++
			}
			b.WriteByte(':')
			b.WriteString(strconv.FormatUint(seqs[j], 10))
			if k > j {
				b.WriteByte('-')
				b.WriteString(strconv.FormatUint(seqs[k], 10))
			}
			j = k + 1
		}
	}
	return gtid.MustParse(gtid.MySQL, b.String())
}

// server is the model of one site's mysqld.
type server struct {
	name  string
	index int
	dr    bool // dr-only role

	up bool // mysqld runs
	// incarnation counts mysqld's starts: with the site's index it is the
	// process identity a sidecar's exit report names.
	incarnation uint64
	hostDown    bool // with !up: the host is gone (probes time out, not refused)
	hung        bool // runs but answers nothing and does nothing
	readOnly    bool
	// semiSource is the semi-sync source side (rpl_semi_sync_source_enabled):
	// on at start and after a restart, on every site (the my.cnf guides
	// often advise, issue 26 hole 9), else as the daemon last set it (off
	// on replicas, on on the primary it promotes once a replica acknowledges).
	semiSource bool

	// executed is @@gtid_executed; log is the binlog order of it.
	executed *txnSet
	log      []txn
	// nextSeq numbers this server's own transactions.
	nextSeq uint64

	// Replication channel: source "" means none configured.
	source    string
	ioRunning bool // IO thread running (as opposed to stopped)
	sqlStall  int  // steps during which the applier applies nothing
	retrieved *txnSet
	relay     []txn // received, not applied, in order

	// pending are commits waiting for a semi-sync acknowledgement; each
	// is acknowledged to its client once a replica received it, or never
	// if its session is killed (fence, crash, restart).
	pending []txn
}

func (s *server) reachableHost() bool { return s.up && !s.hung }

// commit executes t locally (binlog order).
func (s *server) commit(t txn) {
	if s.executed.has(t) {
		return
	}
	s.executed.add(t)
	s.log = append(s.log, t)
}

// dropSessions kills every client session: their pending commits are never
// acknowledged (they stay committed locally, AFTER_SYNC).
func (s *server) dropSessions() []txn {
	p := s.pending
	s.pending = nil
	return p
}

func (s *server) String() string {
	state := "up"
	switch {
	case !s.up && s.hostDown:
		state = "host-down"
	case !s.up:
		state = "down"
	case s.hung:
		state = "hung"
	}
	ro := "rw"
	if s.readOnly {
		ro = "ro"
	}
	return fmt.Sprintf("%s[%s %s src=%q io=%v relay=%d exec=%s]", s.name, state, ro, s.source, s.ioRunning, len(s.relay), s.executed.gtidSet().Compact())
}
