package gtid

import (
	"cmp"
	"math"
	"slices"
)

// interval is the inclusive range [lo, hi] of transaction numbers, 1 ≤ lo ≤ hi.
// Interval lists are canonical when sorted, disjoint and non-adjacent.
type interval struct{ lo, hi uint64 }

func (v interval) size() uint64 { return v.hi - v.lo + 1 }

// mergeable reports whether b (with b.lo ≥ a.lo) overlaps or touches a.
func mergeable(a, b interval) bool { return a.hi == math.MaxUint64 || b.lo <= a.hi+1 }

// normalize sorts and merges ivs in place and returns the canonical list.
func normalize(ivs []interval) []interval {
	canonical := true
	for i := 1; i < len(ivs) && canonical; i++ {
		canonical = !mergeable(ivs[i-1], ivs[i]) // also false when out of order
	}
	if canonical {
		return ivs
	}
	slices.SortFunc(ivs, func(a, b interval) int { return cmp.Compare(a.lo, b.lo) })
	out := ivs[:1]
	for _, v := range ivs[1:] {
		if last := &out[len(out)-1]; mergeable(*last, v) {
			last.hi = max(last.hi, v.hi)
		} else {
			out = append(out, v)
		}
	}
	return out
}

// containsIv reports whether canonical a ⊇ canonical b.
func containsIv(a, b []interval) bool {
	i := 0
	for _, v := range b {
		for i < len(a) && a[i].hi < v.lo {
			i++
		}
		// a is merged, so v must lie inside a single interval of a.
		if i == len(a) || a[i].lo > v.lo || a[i].hi < v.hi {
			return false
		}
	}
	return true
}

// unionIv returns the canonical union of canonical a and b.
func unionIv(a, b []interval) []interval {
	out := make([]interval, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var v interval
		if j == len(b) || (i < len(a) && a[i].lo <= b[j].lo) {
			v, i = a[i], i+1
		} else {
			v, j = b[j], j+1
		}
		if n := len(out); n > 0 && mergeable(out[n-1], v) {
			out[n-1].hi = max(out[n-1].hi, v.hi)
		} else {
			out = append(out, v)
		}
	}
	return slices.Clip(out)
}

// intersectIv returns the canonical intersection of canonical a and b.
func intersectIv(a, b []interval) []interval {
	var out []interval
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if lo, hi := max(a[i].lo, b[j].lo), min(a[i].hi, b[j].hi); lo <= hi {
			out = push(out, interval{lo, hi}, min(len(a), len(b)))
		}
		if a[i].hi < b[j].hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// subtractIv returns the canonical difference a − b of canonical a and b.
func subtractIv(a, b []interval) []interval {
	var out []interval
	j := 0
	for _, v := range a {
		for j < len(b) && b[j].hi < v.lo {
			j++
		}
		lo, covered := v.lo, false
		for k := j; k < len(b) && b[k].lo <= v.hi; k++ {
			if b[k].lo > lo {
				out = push(out, interval{lo, b[k].lo - 1}, len(a))
			}
			if b[k].hi >= v.hi {
				covered = true
				break
			}
			lo = b[k].hi + 1 // b[k].hi < v.hi, cannot overflow
		}
		if !covered {
			out = push(out, interval{lo, v.hi}, len(a))
		}
	}
	return out
}

// push appends v to out, allocating capacity hint on first use so that empty
// results cost nothing.
func push(out []interval, v interval, hint int) []interval {
	if out == nil {
		out = make([]interval, 0, hint)
	}
	return append(out, v)
}
