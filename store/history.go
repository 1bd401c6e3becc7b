package store

import (
	"slices"
	"time"
)

// The failover history: GroupState.Failovers keeps the latest failovers
// and switchovers, completed or abandoned, each with the timeline of its
// steps; the one in flight builds its timeline in InFlight.Timeline. For
// operators only (failoverd history): no decision reads it.

// MaxFailovers bounds GroupState.Failovers: the oldest records are dropped.
// Fifty covers months of a healthy group and several escalation windows of
// a flapping one, while keeping the document (written at every step of a
// failover) a few tens of KiB at most.
const MaxFailovers = 50

// Outcomes of a FailoverRecord.
const (
	// OutcomeCompleted: the target was made writable and the epoch naming
	// it committed.
	OutcomeCompleted = "completed"
	// OutcomeAbandoned: the action ended without promoting its target (the
	// old primary re-asserted, another primary adopted, a newer revoke);
	// FailoverRecord.Why says which decision ended it.
	OutcomeAbandoned = "abandoned"
)

// TimelineStep is one step of a failover or switchover and when the daemon
// reached it (daemon clock; for a persisted step, when its record was
// written). Step names are the daemon's (its Step* and Timeline* names).
type TimelineStep struct {
	Step string    `json:"step"`
	At   time.Time `json:"at"`
}

// FailoverRecord is one failover or switchover that ended.
type FailoverRecord struct {
	// ID is the action's InFlight.ID ("<group>-<revoked epoch>").
	ID string `json:"id"`
	// Kind is "failover" (automatic) or "switchover" (planned).
	Kind string `json:"kind"`
	// From is the old primary ("" if there was none), To the target
	// (promoted when completed).
	From string `json:"from"`
	To   string `json:"to"`
	// RevokedEpoch is the epoch that revoked From.
	RevokedEpoch uint64 `json:"revokedEpoch"`
	// Epoch is the epoch the outcome was committed at: the one naming To
	// (completed) or the one the abandoning decision committed.
	Epoch uint64 `json:"epoch"`
	// Reason is the reason of the decision that started it (sitepair.Reason).
	Reason string `json:"reason,omitempty"`
	// By names who asked for a switchover, as the API identified them.
	By string `json:"by,omitempty"`
	// Outcome is OutcomeCompleted or OutcomeAbandoned; EndedAt when it was
	// committed (daemon clock).
	Outcome string    `json:"outcome"`
	EndedAt time.Time `json:"endedAt"`
	// Why says, for an abandoned action, which decision ended it ("reason:
	// message").
	Why string `json:"why,omitempty"`
	// Proof is the fence proof the promotion rested on (sitepair.FenceProof);
	// FenceConfirmation who confirmed the old primary dead when it is
	// "operator-confirmed". Empty when abandoned.
	Proof             string             `json:"proof,omitempty"`
	FenceConfirmation *FenceConfirmation `json:"fenceConfirmation,omitempty"`
	// PromotionGTID is To's executed set right before it became writable.
	PromotionGTID string `json:"promotionGTID,omitempty"`
	// Timeline lists the steps reached, in time order.
	Timeline []TimelineStep `json:"timeline,omitempty"`
}

// AppendFailover returns records with r appended, newest last, keeping the
// newest MaxFailovers. Like AppendAudit it always returns a new slice and
// never modifies records.
func AppendFailover(records []FailoverRecord, r FailoverRecord) []FailoverRecord {
	keep := records[max(0, len(records)+1-MaxFailovers):]
	out := make([]FailoverRecord, 0, len(keep)+1)
	return append(append(out, keep...), r)
}

// cloneFailovers copies records deep enough that a caller changing a
// returned record's timeline or confirmation cannot change the store's.
func cloneFailovers(records []FailoverRecord) []FailoverRecord {
	if records == nil {
		return nil
	}
	out := slices.Clone(records)
	for i := range out {
		out[i].Timeline = slices.Clone(out[i].Timeline)
		out[i].FenceConfirmation = cloneConfirmation(out[i].FenceConfirmation)
	}
	return out
}
