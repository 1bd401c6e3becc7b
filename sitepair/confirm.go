package sitepair

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/failoverd/failoverd/statemachine"
)

// Sentinel errors of ConfirmFence: each is an expected refusal, not a fault.
var (
	// ErrNothingToConfirm: no failover is in flight, or the one in flight is
	// not waiting for a human (its decision is not await-fence-confirmation:
	// it has a proof, waits for one that will come by itself, or is blocked
	// by something a confirmation cannot fix).
	ErrNothingToConfirm = errors.New("sitepair: no failover is awaiting a fence confirmation")
	// ErrNotOldPrimary: the site named is not the old primary of the failover
	// in flight.
	ErrNotOldPrimary = errors.New("sitepair: the site is not the old primary of the failover in flight")
	// ErrNotAckHolder: the failover waits at ack-holder-unreachable and the
	// site named is not one of the unreachable replicas it waits for.
	ErrNotAckHolder = errors.New("sitepair: the site is not an unreachable replica the failover waits for")
	// ErrNoOperator: the confirmation does not say who made it.
	ErrNoOperator = errors.New("sitepair: a fence confirmation must name who made it")
)

// ConfirmFence records an operator's assertion that site, the old primary of
// the failover in flight, is dead: it can no longer acknowledge writes. by
// names who confirmed (kept in the history and the audit); now is the
// daemon's clock. It is pure: it returns the next persisted state, never
// modifying p, and the daemon persists it like any other.
//
// It is accepted only while Decide(obs, p, pol, now) is
// await-fence-confirmation, that is when the daemon itself found no proof
// and none can come without a human: the old primary is unreachable, not
// seen down, and no read-back, sidecar report, lease or semi-sync proof
// holds or is on its way. Earlier (a lease still running, a reachable old
// primary about to be fenced) a confirmation would replace a proof the
// daemon is about to have by a human's belief, so it is refused
// (ErrNothingToConfirm), as it is once a proof holds. The confirmation then
// backs the operator-confirmed proof for this failover only: its old primary,
// its revoked epoch (a new revoke starts without one), and only while that
// site stays unreachable (one that answers again is fenced and read back
// instead, and Apply drops the confirmation when the old primary is fenced).
//
// While Decide is ack-holder-unreachable (the old primary's fence is proven,
// but unreachable replicas may hold an acknowledged write the target lacks),
// site names one of those replicas instead: the operator asserts it is lost
// and accepts losing what only it may hold. It is recorded in
// InFlight.LostHolders for this failover's epoch and counts only while the
// site stays unreachable (one that answers is covered like any reachable
// site); naming any other site is refused (ErrNotAckHolder).
func ConfirmFence(obs Observed, p Persisted, pol Policy, site string, now time.Time, by string) (Persisted, error) {
	inf := p.InFlight
	if inf == nil {
		return p, fmt.Errorf("confirm fence of %s: %w: no failover is in flight", site, ErrNothingToConfirm)
	}
	d := Decide(obs, p, pol, now)
	// A failover waiting for unreachable replicas that may hold an
	// acknowledged write takes a human's word that one of them is lost.
	if d.Reason == ReasonAckHolderUnreachable {
		if by == "" {
			return p, fmt.Errorf("confirm fence of %s: %w", site, ErrNoOperator)
		}
		if !slices.Contains(ackHolders(obs, p), site) {
			return p, fmt.Errorf("confirm fence of %s: %w: %s", site, ErrNotAckHolder, d.Message)
		}
		next := Apply(p, Decision{Action: None}, now)
		next.InFlight.LostHolders = append(next.InFlight.LostHolders, FenceConfirmation{Site: site, Epoch: inf.Epoch, At: now, By: by})
		return next, nil
	}
	if site != inf.From {
		return p, fmt.Errorf("confirm fence of %s: %w: the failover in flight at epoch %d is from %s to %s", site, ErrNotOldPrimary, inf.Epoch, inf.From, inf.To)
	}
	if by == "" {
		return p, fmt.Errorf("confirm fence of %s: %w", site, ErrNoOperator)
	}
	// Only a failover blocked on a human may rest on one.
	if d.Reason != ReasonAwaitFenceConfirmation {
		return p, fmt.Errorf("confirm fence of %s: %w: the failover to %s at epoch %d is at %s (%s): %s",
			site, ErrNothingToConfirm, inf.To, inf.Epoch, d.Reason, d.Action, d.Message)
	}
	next := Apply(p, Decision{Action: None}, now)
	next.InFlight.OperatorConfirmed = &FenceConfirmation{Site: site, Epoch: inf.Epoch, At: now, By: by}
	return next, nil
}

// ackHolders are the sites a confirmation may name while the failover in
// flight waits at ack-holder-unreachable: unreachable, not its old primary,
// among the replicas that acknowledge (not recorded diverged or recloning)
// and not already confirmed lost in this epoch.
func ackHolders(obs Observed, p Persisted) []string {
	var out []string
	for _, s := range obs.Sites {
		if s.State != statemachine.Unreachable || s.Name == p.InFlight.From {
			continue
		}
		if _, ok := p.Diverged[s.Name]; ok {
			continue
		}
		if _, ok := p.Recloning[s.Name]; ok {
			continue
		}
		if slices.ContainsFunc(p.InFlight.LostHolders, func(c FenceConfirmation) bool {
			return c.Site == s.Name && c.Epoch == p.InFlight.Epoch
		}) {
			continue
		}
		out = append(out, s.Name)
	}
	return out
}
