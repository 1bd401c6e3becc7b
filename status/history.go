package status

import "time"

// History is a group's history (GET /v1/groups/{g}/history, failoverd
// history): its latest failovers and switchovers with their timelines, and
// the operator requests of its audit, merged by time, oldest first.
type History struct {
	Group string `json:"group"`
	// At is when the daemon answered (its clock).
	At time.Time `json:"at"`
	// Entries are oldest first; each has Failover or Action set.
	Entries []HistoryEntry `json:"entries"`
}

// HistoryEntry is one failover or switchover (Failover) or one operator
// request (Action), at At: when the action began (its first step), or when
// the request was handled.
type HistoryEntry struct {
	At       time.Time       `json:"at"`
	Failover *FailoverRecord `json:"failover,omitempty"`
	Action   *AuditEntry     `json:"action,omitempty"`
}

// Outcomes of a FailoverRecord: "completed" and "abandoned" (ended, as the
// store records them), or OutcomeInFlight.
const (
	OutcomeCompleted = "completed"
	OutcomeAbandoned = "abandoned"
	// OutcomeInFlight: the action is under way (its timeline so far).
	OutcomeInFlight = "in-flight"
)

// FailoverRecord is one failover or switchover with its timeline.
type FailoverRecord struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // "failover" or "switchover"
	From string `json:"from"`
	To   string `json:"to"`
	// RevokedEpoch revoked From; Epoch is the one the outcome was committed
	// at (naming To when completed; 0 while in flight).
	RevokedEpoch uint64 `json:"revokedEpoch"`
	Epoch        uint64 `json:"epoch,omitempty"`
	// Reason is the starting decision's reason; By who asked (switchover).
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
	// Outcome is OutcomeCompleted, OutcomeAbandoned or OutcomeInFlight;
	// EndedAt when it ended; Why which decision abandoned it.
	Outcome string    `json:"outcome"`
	EndedAt time.Time `json:"endedAt,omitzero"`
	Why     string    `json:"why,omitempty"`
	// Proof is the fence proof the promotion rested on; ConfirmedBy names
	// the operator when it was operator-confirmed.
	Proof         string `json:"proof,omitempty"`
	ConfirmedBy   string `json:"confirmedBy,omitempty"`
	PromotionGTID string `json:"promotionGTID,omitempty"`
	// Timeline lists the steps reached, in time order.
	Timeline []TimelineStep `json:"timeline"`
	// TookSeconds is from the first step to the last one reached;
	// RevokedToWritableSeconds from the revoke to the new primary being
	// writable, when no site was allowed to accept writes (absent unless
	// both were reached; a failover's writes stopped at the crash, before).
	TookSeconds              float64 `json:"tookSeconds"`
	RevokedToWritableSeconds float64 `json:"revokedToWritableSeconds,omitempty"`
}

// TimelineStep is one step reached, with the time since the previous step
// and since the first.
type TimelineStep struct {
	Step                 string    `json:"step"`
	At                   time.Time `json:"at"`
	SincePreviousSeconds float64   `json:"sincePreviousSeconds"`
	SinceStartSeconds    float64   `json:"sinceStartSeconds"`
}
