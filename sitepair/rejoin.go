package sitepair

import (
	"fmt"
	"strings"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/statemachine"
)

// RejoinPolicy says what happens to an old primary that comes back holding
// transactions the new primary lacks.
type RejoinPolicy string

const (
	// RejoinManual (the default) marks it diverged: a human decides
	// (failoverd reclone, or reconciling by hand).
	RejoinManual RejoinPolicy = "manual"
	// RejoinRecloneUnacknowledged reclones it from the primary without a
	// human when every transaction it holds beyond the primary is provably
	// unacknowledged (UnacknowledgedTail); otherwise it is marked diverged
	// as with RejoinManual.
	RejoinRecloneUnacknowledged RejoinPolicy = "reclone-unacknowledged"
)

// RecloneByPolicy is the By of a reclone the rejoin policy started.
const RecloneByPolicy = "failoverd (rejoin: reclone-unacknowledged)"

func (p Policy) validateRejoin() error {
	switch p.Rejoin {
	case "", RejoinManual:
		return nil
	case RejoinRecloneUnacknowledged:
		// Only semi-sync without fallback proves that a transaction no
		// replica received was never acknowledged to a client.
		if !p.Fencing.UsesSemiSync() {
			return fmt.Errorf("rejoin %q needs fencing semisync or semisync+sidecar (semi-sync is what proves the discarded transactions unacknowledged), not %q: %w",
				p.Rejoin, p.Fencing, ErrInvalidPolicy)
		}
		return nil
	}
	return fmt.Errorf("rejoin %q: want %q or %q: %w", p.Rejoin, RejoinManual, RejoinRecloneUnacknowledged, ErrInvalidPolicy)
}

// UnacknowledgedTail reports whether old primary s, back read-only and not
// replicating, holds beyond primary p only transactions no client saw
// committed, and returns them. All of these must hold:
//
//   - the policy is RejoinRecloneUnacknowledged (so fencing uses semi-sync);
//   - s is the old primary of the last failover, which promoted p: only a
//     primary's trailing writes wait for a replica's acknowledgement (a
//     replica's errant write was acknowledged to whoever made it);
//   - s is configured for semi-sync as the semisync proof requires
//     (enabled, the infinite timeout, waiting with no replica) with the
//     AFTER_SYNC wait point: a commit returns to its client only once a
//     replica received the transaction, and crash recovery keeps the
//     transactions that were binlogged but never acknowledged;
//   - every transaction s holds beyond p is one s originated, and they
//     start right after the newest one p has from s (gtid.Set.TailOf):
//     the trailing writes cut off by the crash, nothing older;
//   - every other site is observed (writable or read-only), and none holds
//     or received any of them: a site that received one may have
//     acknowledged it, and an unobserved one might have.
func (v *view) unacknowledgedTail(s, p SiteObservation) (gtid.Set, bool) {
	// Policy.Validate, checked before any decision, ties the policy to
	// semi-sync fencing.
	if v.pol.Rejoin != RejoinRecloneUnacknowledged {
		return gtid.Set{}, false
	}
	if s.Name != v.st.LastFailoverFrom || p.Name != v.st.LastFailoverTarget || s.ServerID == "" {
		return gtid.Set{}, false
	}
	ss := s.SemiSync
	if !ss.Known || !ss.Enabled || ss.Timeout < MinSemiSyncTimeout || !ss.WaitNoReplica || !strings.EqualFold(ss.WaitPoint, "AFTER_SYNC") {
		return gtid.Set{}, false
	}
	extra := p.Executed.Uncovered(s.Executed)
	own, err := extra.OriginatedBy(s.ServerID)
	if err != nil || extra.IsEmpty() || !own.Equal(extra) || !extra.TailOf(p.Executed) {
		return gtid.Set{}, false
	}
	for _, o := range v.sites {
		if o.Name == s.Name {
			continue
		}
		if o.State != statemachine.Writable && o.State != statemachine.ReadOnly {
			return gtid.Set{}, false
		}
		if !o.Executed.Union(o.Retrieved).Intersect(extra).IsEmpty() {
			return gtid.Set{}, false
		}
	}
	return extra, true
}

// recloneTail is the decision that re-seeds old primary s from primary p,
// throwing away its unacknowledged tail.
func (v *view) recloneTail(s, p SiteObservation, tail gtid.Set) Decision {
	n := gtid.DivergentCount(s.Executed, p.Executed)
	noun := "transactions"
	if n == 1 {
		noun = "transaction"
	}
	d := v.decision(ReasonRecloneUnacknowledgedTail,
		"old primary %s came back with %d %s primary %s lacks that no site received (%s), unacknowledged under semi-sync AFTER_SYNC: recloning it from %s and discarding them (rejoin: %s)",
		s.Name, n, noun, p.Name, tail.Compact(), p.Name, RejoinRecloneUnacknowledged)
	d.Target = p.Name
	d.Diverged = []Divergence{{Site: s.Name, Set: tail, Count: n}}
	return d
}
