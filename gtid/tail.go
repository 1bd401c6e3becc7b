package gtid

// TailOf reports whether s is a non-empty tail of base: for every source of
// s (MySQL a server UUID and tag, MariaDB a domain and server) s holds a
// single interval that starts right after the highest sequence number base
// holds for that source (at 1 when base holds none of it). A crashed
// primary's transactions that never reached the promoted site are such a
// tail of the promoted site's set; a gap, or a transaction older than what
// base already holds from that source, is not. Sets of different flavors
// are never tails of each other.
func (s Set) TailOf(base Set) bool {
	if s.IsEmpty() || (!base.IsEmpty() && s.f != base.f) {
		return false
	}
	top := make(map[key]uint64, len(base.runs))
	for _, r := range base.runs {
		top[r.k] = r.iv[len(r.iv)-1].hi
	}
	for _, r := range s.runs {
		if len(r.iv) != 1 || r.iv[0].lo != top[r.k]+1 {
			return false
		}
	}
	return true
}
