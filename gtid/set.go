package gtid

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// Flavor is the GTID dialect of a server.
type Flavor int

// The supported flavors. The zero Flavor is "unknown" (the zero Set).
const (
	MySQL Flavor = iota + 1
	MariaDB
)

// String returns "mysql", "mariadb" or "unknown".
func (f Flavor) String() string {
	switch f {
	case MySQL:
		return "mysql"
	case MariaDB:
		return "mariadb"
	}
	return "unknown"
}

// ParseFlavor parses "mysql" or "mariadb" (case-insensitive).
func ParseFlavor(s string) (Flavor, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "mysql":
		return MySQL, nil
	case "mariadb":
		return MariaDB, nil
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownFlavor, s)
}

// MarshalText implements encoding.TextMarshaler.
func (f Flavor) MarshalText() ([]byte, error) {
	if f != MySQL && f != MariaDB {
		return nil, fmt.Errorf("%w: %d", ErrUnknownFlavor, int(f))
	}
	return []byte(f.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler via [ParseFlavor].
func (f *Flavor) UnmarshalText(b []byte) error {
	v, err := ParseFlavor(string(b))
	if err != nil {
		return err
	}
	*f = v
	return nil
}

var (
	// ErrParse is wrapped by every error Parse returns (a *ParseError).
	ErrParse = errors.New("gtid: malformed GTID set")
	// ErrFlavorMismatch is wrapped by CheckFlavor's error and by the panic
	// value of binary operations on non-empty sets of different flavors.
	ErrFlavorMismatch = errors.New("gtid: flavor mismatch")
	// ErrUnknownFlavor is returned for a flavor that is neither MySQL nor MariaDB.
	ErrUnknownFlavor = errors.New("gtid: unknown flavor")
)

// key identifies the source of a sequence of transactions.
// MySQL: major/minor are the big-endian halves of the server UUID, tag the
// (lower-case) GTID tag or "". MariaDB: major = domain_id, minor = server_id.
type key struct {
	major, minor uint64
	tag          string
}

func cmpKey(a, b key) int {
	if c := cmp.Compare(a.major, b.major); c != 0 {
		return c
	}
	if c := cmp.Compare(a.minor, b.minor); c != 0 {
		return c
	}
	return strings.Compare(a.tag, b.tag)
}

// run is the non-empty, canonical interval list of one key.
type run struct {
	k  key
	iv []interval
}

// Set is an immutable set of GTIDs of one flavor; see the package doc.
// The zero value is the empty set of unknown flavor.
type Set struct {
	f    Flavor
	runs []run // sorted by key, no duplicate keys, no empty runs; never mutated
}

// Flavor returns the flavor the set was parsed with (0 for the zero Set).
func (s Set) Flavor() Flavor { return s.f }

// IsEmpty reports whether the set holds no transactions.
func (s Set) IsEmpty() bool { return len(s.runs) == 0 }

// Count returns the number of transactions in the set, saturating at
// math.MaxUint64. For MariaDB it is an upper bound (see the package doc);
// use DivergentCount to count what one server has that another lacks.
func (s Set) Count() uint64 {
	var n, carry uint64
	for _, r := range s.runs {
		for _, v := range r.iv {
			if n, carry = bits.Add64(n, v.size(), 0); carry != 0 {
				return math.MaxUint64
			}
		}
	}
	return n
}

// CheckFlavor returns an error wrapping ErrFlavorMismatch if a and b are both
// non-empty and of different flavors, i.e. if a binary operation would panic.
func CheckFlavor(a, b Set) error {
	if !a.IsEmpty() && !b.IsEmpty() && a.f != b.f {
		return fmt.Errorf("%w: %s set with %s set", ErrFlavorMismatch, a.f, b.f)
	}
	return nil
}

// resultFlavor returns the flavor of op(a, b) and panics on mismatched
// non-empty operands.
func resultFlavor(op string, a, b Set) Flavor {
	// Comparing a MySQL UUID with a MariaDB domain would silently yield
	// nonsense that could promote the wrong site; fail loudly instead.
	if err := CheckFlavor(a, b); err != nil {
		panic(fmt.Errorf("gtid: %s: %w", op, err))
	}
	switch {
	case !a.IsEmpty():
		return a.f
	case !b.IsEmpty():
		return b.f
	case a.f != 0:
		return a.f
	}
	return b.f
}

// Equal reports whether s and o hold exactly the same transactions. Two empty
// sets are equal whatever their flavors.
func (s Set) Equal(o Set) bool {
	resultFlavor("Equal", s, o)
	return slices.EqualFunc(s.runs, o.runs, func(a, b run) bool {
		return a.k == b.k && slices.Equal(a.iv, b.iv)
	})
}

// Contains reports whether s ⊇ o (every transaction of o is in s).
// It runs in linear time and does not allocate.
func (s Set) Contains(o Set) bool {
	resultFlavor("Contains", s, o)
	i := 0
	for _, r := range o.runs {
		for i < len(s.runs) && cmpKey(s.runs[i].k, r.k) < 0 {
			i++
		}
		if i == len(s.runs) || s.runs[i].k != r.k || !containsIv(s.runs[i].iv, r.iv) {
			return false
		}
	}
	return true
}

// Comparable reports whether a ⊇ b or b ⊇ a, i.e. whether the two histories
// have not diverged.
func Comparable(a, b Set) bool { return a.Contains(b) || b.Contains(a) }

// Union returns s ∪ o.
func (s Set) Union(o Set) Set {
	f := resultFlavor("Union", s, o)
	if o.IsEmpty() {
		return Set{f: f, runs: s.runs}
	}
	if s.IsEmpty() {
		return Set{f: f, runs: o.runs}
	}
	out := make([]run, 0, max(len(s.runs), len(o.runs)))
	join(s.runs, o.runs, func(k key, x, y []interval) {
		switch {
		case y == nil || (x != nil && containsIv(x, y)):
			out = append(out, run{k, x}) // shared: runs are immutable
		case x == nil || containsIv(y, x):
			out = append(out, run{k, y})
		default:
			out = append(out, run{k, unionIv(x, y)})
		}
	})
	return Set{f: f, runs: out}
}

// Intersect returns s ∩ o.
func (s Set) Intersect(o Set) Set {
	f := resultFlavor("Intersect", s, o)
	var out []run
	join(s.runs, o.runs, func(k key, x, y []interval) {
		if x != nil && y != nil {
			if iv := intersectIv(x, y); len(iv) > 0 {
				out = append(out, run{k, iv})
			}
		}
	})
	return Set{f: f, runs: out}
}

// Subtract returns s − o: the transactions of s that are not in o.
func (s Set) Subtract(o Set) Set {
	f := resultFlavor("Subtract", s, o)
	if o.IsEmpty() {
		return Set{f: f, runs: s.runs}
	}
	var out []run
	join(s.runs, o.runs, func(k key, x, y []interval) {
		switch {
		case x == nil:
		case y == nil:
			out = append(out, run{k, x})
		default:
			if iv := subtractIv(x, y); len(iv) > 0 {
				out = append(out, run{k, iv})
			}
		}
	})
	return Set{f: f, runs: out}
}

// join walks two key-sorted run lists in step and calls fn once per key with
// that key's intervals on each side (nil where the key is absent).
func join(a, b []run, fn func(k key, x, y []interval)) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		c := 0
		switch {
		case i == len(a):
			c = 1
		case j == len(b):
			c = -1
		default:
			c = cmpKey(a[i].k, b[j].k)
		}
		switch {
		case c < 0:
			fn(a[i].k, a[i].iv, nil)
			i++
		case c > 0:
			fn(b[j].k, nil, b[j].iv)
			j++
		default:
			fn(a[i].k, a[i].iv, b[j].iv)
			i++
			j++
		}
	}
}

// builder accumulates (key, interval) pairs in any order and produces the
// canonical run list. Pairs arriving in key order (as servers print them) are
// stored in one shared backing array and need no sorting.
type builder struct {
	ivs   []interval // all intervals, grouped by run in arrival order
	runs  []run      // one per group; iv is filled in by set
	ends  []int      // ivs index where each group ends
	dirty bool       // a key arrived after a larger one
}

// grow pre-sizes the builder for about n intervals in about m groups.
func (b *builder) grow(n, m int) {
	b.ivs = slices.Grow(b.ivs, n)
	b.runs = slices.Grow(b.runs, m)
	b.ends = slices.Grow(b.ends, m)
}

func (b *builder) add(k key, v interval) {
	n := len(b.runs)
	switch {
	case n > 0 && b.runs[n-1].k == k:
		b.ends[n-1]++
	default:
		b.dirty = b.dirty || (n > 0 && cmpKey(b.runs[n-1].k, k) > 0)
		b.runs = append(b.runs, run{k: k})
		b.ends = append(b.ends, len(b.ivs)+1)
	}
	b.ivs = append(b.ivs, v)
}

func (b *builder) set(f Flavor) Set {
	runs, start := b.runs, 0
	for i, end := range b.ends {
		// Full slice expression: a later append must never write into a neighbour.
		runs[i].iv = b.ivs[start:end:end]
		start = end
	}
	if b.dirty {
		slices.SortStableFunc(runs, func(x, y run) int { return cmpKey(x.k, y.k) })
		out := runs[:1]
		for _, r := range runs[1:] {
			if last := &out[len(out)-1]; last.k == r.k {
				last.iv = append(last.iv, r.iv...) // reallocates: cap == len
			} else {
				out = append(out, r)
			}
		}
		runs = out
	}
	for i := range runs {
		runs[i].iv = normalize(runs[i].iv)
	}
	*b = builder{}
	return Set{f: f, runs: slices.Clip(runs)}
}

// OriginatedBy returns the transactions of s that one server originated:
// MySQL the server's @@server_uuid (every tag), MariaDB its @@server_id
// (every domain), given in decimal. A replica's errant transactions are the
// ones it originated that its primary lacks; unlike a plain difference this
// is immune to the two servers having been observed at different moments.
func (s Set) OriginatedBy(server string) (Set, error) {
	var match func(k key) bool
	switch s.f {
	case 0:
		return Set{}, nil
	case MySQL:
		u, ok := parseUUID(strings.ToLower(strings.TrimSpace(server)))
		if !ok {
			return Set{}, fmt.Errorf("originated by %q: %w: not a server UUID", server, ErrParse)
		}
		match = func(k key) bool { return k.major == u.major && k.minor == u.minor }
	case MariaDB:
		id, err := strconv.ParseUint(strings.TrimSpace(server), 10, 32)
		if err != nil {
			return Set{}, fmt.Errorf("originated by %q: %w: not a server id", server, ErrParse)
		}
		match = func(k key) bool { return k.minor == id }
	}
	out := Set{f: s.f}
	for _, r := range s.runs {
		if match(r.k) {
			out.runs = append(out.runs, r)
		}
	}
	if len(out.runs) == 0 {
		out.runs = nil
	}
	return out, nil
}

// Heads returns what identifies s's history. MySQL: s itself (every GTID is
// independent). MariaDB: for each domain, the (domain, server) entries whose
// newest seq_no is the domain's highest, i.e. the domain's position as
// @@gtid_current_pos reports it. Under gtid_strict_mode a domain's history
// is one chain, so a server that holds a domain's head holds everything
// before it, whoever originated it.
func (s Set) Heads() Set {
	if s.f != MariaDB || len(s.runs) == 0 {
		return s
	}
	top := map[uint64]uint64{} // domain → highest seq_no
	for _, r := range s.runs {
		top[r.k.major] = max(top[r.k.major], r.iv[len(r.iv)-1].hi)
	}
	out := Set{f: s.f}
	for _, r := range s.runs {
		if r.iv[len(r.iv)-1].hi == top[r.k.major] {
			out.runs = append(out.runs, r)
		}
	}
	return out
}

// Covers reports whether s holds o's history: MySQL s ⊇ o; MariaDB s holds
// every head of o (see Heads), compared per domain. Use it, not Contains,
// to ask "does this server have everything that one has": a MariaDB server
// whose binlog state lost an old server's entry (restored from a backup,
// RESET MASTER) still covers a peer at the same position, while a peer whose
// newest GTID of a domain the server lacks (an errant or unreplicated
// transaction, even at the same seq_no) is not covered.
func (s Set) Covers(o Set) bool { return s.Contains(o.Heads()) }

// Uncovered returns what s lacks of o's history: MySQL o − s; MariaDB the
// part of o's heads that s lacks (empty exactly when s.Covers(o)).
func (s Set) Uncovered(o Set) Set { return o.Heads().Subtract(s) }

// DivergentCount returns how many transactions site holds that primary
// lacks, saturating at math.MaxUint64. Like the other binary operations it
// panics with an error wrapping ErrFlavorMismatch on non-empty sets of
// different flavors (see CheckFlavor); an empty set combines with anything.
//
// MySQL: exactly site.Subtract(primary).Count().
//
// MariaDB: Count over-counts (the servers of one domain share its seq_nos),
// so the count is computed per domain d from the fork point instead. It
// assumes gtid_strict_mode: a domain's history on one server is one chain
// whose seq_nos are consecutive, so "d-s-n" on both sides means both hold
// that chain up to n. The last position both histories share is
// fork_d = max over servers s of min(site's top seq_no for (d,s),
// primary's top seq_no for (d,s) or 0), and the site's divergent
// transactions are its seq_nos of d above fork_d: max(0, siteTop_d − fork_d)
// for a site whose intervals start at 1, as a server reports them. A domain
// the primary lacks entirely counts all of the site's seq_nos in it.
// When a binlog state lost a server's entry (purged binlogs, RESET MASTER, a
// restore from a backup) the shared prefix can be found shorter than it is,
// so the result is an upper bound; without strict mode it is an estimate.
// It is never more than site.Subtract(primary).Count().
func DivergentCount(site, primary Set) uint64 {
	if resultFlavor("DivergentCount", site, primary) != MariaDB {
		return site.Subtract(primary).Count()
	}
	var n, carry uint64
	i := 0
	for lo := 0; lo < len(site.runs); {
		d := site.runs[lo].k.major
		hi := lo
		for hi < len(site.runs) && site.runs[hi].k.major == d {
			hi++
		}
		// fork: the highest seq_no of d both histories hold under one
		// server; every seq_no of the site above it is the site's alone.
		var fork uint64
		var held []interval
		for _, r := range site.runs[lo:hi] {
			for i < len(primary.runs) && cmpKey(primary.runs[i].k, r.k) < 0 {
				i++
			}
			if i < len(primary.runs) && primary.runs[i].k == r.k {
				p := primary.runs[i].iv
				fork = max(fork, min(r.iv[len(r.iv)-1].hi, p[len(p)-1].hi))
			}
			held = unionIv(held, r.iv)
		}
		if fork > 0 {
			held = subtractIv(held, []interval{{1, fork}})
		}
		for _, v := range held {
			if n, carry = bits.Add64(n, v.size(), 0); carry != 0 {
				return math.MaxUint64
			}
		}
		lo = hi
	}
	return n
}
