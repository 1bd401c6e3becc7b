package sitepair

import (
	"errors"
	"fmt"
	"time"
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
func ConfirmFence(obs Observed, p Persisted, pol Policy, site string, now time.Time, by string) (Persisted, error) {
	inf := p.InFlight
	if inf == nil {
		return p, fmt.Errorf("confirm fence of %s: %w: no failover is in flight", site, ErrNothingToConfirm)
	}
	if site != inf.From {
		return p, fmt.Errorf("confirm fence of %s: %w: the failover in flight at epoch %d is from %s to %s", site, ErrNotOldPrimary, inf.Epoch, inf.From, inf.To)
	}
	if by == "" {
		return p, fmt.Errorf("confirm fence of %s: %w", site, ErrNoOperator)
	}
	// Only a failover blocked on a human may rest on one.
	if d := Decide(obs, p, pol, now); d.Reason != ReasonAwaitFenceConfirmation {
		return p, fmt.Errorf("confirm fence of %s: %w: the failover to %s at epoch %d is at %s (%s): %s",
			site, ErrNothingToConfirm, inf.To, inf.Epoch, d.Reason, d.Action, d.Message)
	}
	next := Apply(p, Decision{Action: None}, now)
	next.InFlight.OperatorConfirmed = &FenceConfirmation{Site: site, Epoch: inf.Epoch, At: now, By: by}
	return next, nil
}
