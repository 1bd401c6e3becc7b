// Package store persists each group's state: its epoch, active site, failover
// history, known-diverged sites and the failover in flight. The daemon writes
// it before and after every step of an action, so a daemon killed at any
// point resumes from what it had durably done, never from in-memory defaults.
//
// Three backends: File (default; one JSON document written atomically with
// temp file + fsync + rename), ConfigMap (Kubernetes, optimistic
// concurrency on the resourceVersion, fenced by the leader term a new Lease
// leader claims in it) for Deployment installs, and Etcd (one
// key per group in an etcd cluster spread over the sites; every write is a
// transaction fenced by the elected leader's token, so a deposed leader
// cannot write, whatever it believes). A state that
// cannot be read is an error that stops startup: the store never resets
// silently, because a forgotten epoch or in-flight failover can let two sites
// be writable.
package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// SchemaVersion is the version of the persisted document. Loading a newer
// version is refused (ErrNewerSchema) so an old binary cannot drop fields.
//
// Version 2 added the fence proof and operator confirmation of a failover
// (Failover.Proof, Failover.FenceConfirmation, InFlight.FenceConfirmation)
// and the operator audit (GroupState.Audit). A version 1 document loads as
// is (the fields are absent); the next save writes version 2, which a
// version 1 binary refuses rather than decoding it without those fields.
//
// GroupState.DivergedCount was added within version 2: it is only the
// count shown for a diverged site, so a version 2 binary that drops it on
// rewrite loses nothing a decision needs (readers then fall back to the
// Diverged set), and refusing older binaries for it would block rollbacks.
//
// InFlight.LostHolders was added within version 2 as well: it is written
// only while a failover in flight holds an operator's confirmation that an
// unreachable replica is lost (ack-holder-unreachable), and losing it only
// makes that failover wait for the confirmation again. A binary without it
// refuses such a document (unknown field): roll back while no failover is
// in flight.
//
// GroupState.Pause, GroupState.Holds and InFlight.AllowDROnly were added
// within version 2 too: they are written only while an operator's pause or
// hold is in effect (or a switchover to a dr-only site is in flight), and a
// binary without them refuses such a document rather than silently ending
// a pause an operator relies on: roll back after resume and release.
// The failover history was added within version 2 as well:
// GroupState.Failovers and, on the action in flight, InFlight.Timeline, By
// and Reason. No decision reads them (failoverd history shows them), so a
// document without them loads as an empty history. A binary without them
// refuses a document holding them (unknown field, reported as corrupt): to
// roll back, delete every group's "failovers" key and the in-flight
// action's "timeline", "by" and "reason" first; only the history is lost.
//
// GroupState.GroupReplication was added within version 2 as well: the
// sticky denominator of a replication: group group's majorities. A
// document without it loads as "unknown" (the daemon takes the configured
// members, as before it was kept). A binary without it refuses a document
// holding it (unknown field): to roll back, delete the group's
// "groupReplication" key, and remove from the group's sites any member
// left out by a forced membership first (the denominator falls back to the
// configured members).
const SchemaVersion = 2

// Sentinel errors.
var (
	// ErrCorrupt means the persisted state exists but cannot be decoded.
	ErrCorrupt = errors.New("state is corrupt")
	// ErrNewerSchema means the state was written by a newer failoverd.
	ErrNewerSchema = errors.New("state was written by a newer failoverd")
	// ErrConflict means another writer changed the state since we read it.
	ErrConflict = errors.New("state changed concurrently")
	// ErrEpochRegression means a save would lower the epoch.
	ErrEpochRegression = errors.New("epoch would go backwards")
	// ErrInFlightMismatch means a save at the stored epoch would replace or
	// drop a different in-flight action than the one stored.
	ErrInFlightMismatch = errors.New("save would replace another in-flight action at the same epoch")
)

// Store loads and saves group states. Implementations are safe for
// concurrent use by the independent group loops.
type Store interface {
	// Load returns the group's state; a group never saved yields a zero
	// GroupState with Exists false.
	Load(ctx context.Context, group string) (GroupState, error)
	// Save durably replaces the group's state, following the write rules of
	// checkWrite: it refuses an epoch lower than the one stored
	// (ErrEpochRegression) and, at the stored epoch, a state that replaces or
	// drops the stored in-flight action (ErrInFlightMismatch). ConfigMap
	// and Etcd also refuse a state the caller did not base on the current
	// stored one (ErrConflict): Load again before retrying. Etcd refuses
	// every Save, and a Load while a token is set, when this process does not
	// hold the leadership (ErrNotLeader); ConfigMap does the same once a
	// term was claimed (ConfigMap.Claim) and a newer one claimed it since.
	Save(ctx context.Context, st GroupState) error
	// Describe names the backend and location for messages ("file /var/...").
	Describe() string
}

// GroupState is the persisted state of one group. GTID sets are kept as text
// in the engine's own syntax so the document stays readable by operators.
type GroupState struct {
	// Group is the group's name.
	Group string `json:"group"`
	// Exists is false for a group that was never saved (not persisted).
	Exists bool `json:"-"`
	// Epoch only grows; every authoritative view carries it.
	Epoch uint64 `json:"epoch"`
	// ActiveSite is the site allowed to accept writes; empty while a failover
	// has revoked the old primary and not yet promoted the new one.
	ActiveSite string `json:"activeSite"`
	// LastFailover is the most recent completed failover or switchover.
	LastFailover *Failover `json:"lastFailover,omitempty"`
	// Failovers lists the latest failovers and switchovers that ended,
	// completed or abandoned, with their timelines, newest last, at most
	// MaxFailovers (see AppendFailover). For operators only.
	Failovers []FailoverRecord `json:"failovers,omitempty"`
	// History holds the start times of recent failovers (for escalation).
	History []time.Time `json:"history,omitempty"`
	// Halted stops automatic failover until a human acknowledges.
	Halted bool `json:"halted,omitempty"`
	// HaltedReason says why automatic failover was halted.
	HaltedReason string `json:"haltedReason,omitempty"`
	// Diverged maps a site to the GTID set it has that the primary lacks.
	Diverged map[string]string `json:"diverged,omitempty"`
	// DivergedCount maps a diverged site to how many transactions it held
	// that the primary lacked when it was marked (exact, unlike the MariaDB
	// count of its Diverged set); absent for sites marked before it was
	// kept.
	DivergedCount map[string]uint64 `json:"divergedCount,omitempty"`
	// OperatorFenced lists sites an operator excluded from promotion.
	OperatorFenced []string `json:"operatorFenced,omitempty"`
	// Recloning maps a site a human asked to re-seed from the primary to
	// that request, until it succeeded; a failed one keeps its reason.
	Recloning map[string]Reclone `json:"recloning,omitempty"`
	// InFlight is the action under way, if any.
	InFlight *InFlight `json:"inFlight,omitempty"`
	// Audit lists the latest operator requests (switchover, acknowledge,
	// confirm-fence), accepted or refused, newest last, at most MaxAudit
	// (see AppendAudit).
	Audit []AuditEntry `json:"audit,omitempty"`
	// Pause is an operator's pause of the group, until it ends.
	Pause *Pause `json:"pause,omitempty"`
	// Holds maps a site to an operator's hold (no-promote, maintenance).
	Holds map[string]Hold `json:"holds,omitempty"`
	// GroupReplication is what a replication: group group keeps across
	// restarts; nil for an async group and in documents written before it
	// was kept ("unknown").
	GroupReplication *GroupReplication `json:"groupReplication,omitempty"`
	// UpdatedAt is when this state was saved (daemon clock).
	UpdatedAt time.Time `json:"updatedAt"`
	// UpdatedBy is the identity of the daemon that saved this state (which
	// leader wrote what, in a store's history).
	UpdatedBy string `json:"updatedBy,omitempty"`
}

// Audit actions: the operator requests GroupState.Audit records.
const (
	AuditSwitchover   = "switchover"
	AuditAcknowledge  = "acknowledge"
	AuditConfirmFence = "confirm-fence"
	AuditReclone      = "reclone"
	AuditPause        = "pause"
	AuditResume       = "resume"
	AuditHold         = "hold"
	AuditRelease      = "release"
	// AuditExpired records a pause or hold that ran out (By "failoverd").
	AuditExpired = "expired"
)

// GroupReplication is the persisted part of a Group Replication group's
// verdict state (grview.State).
type GroupReplication struct {
	// MaxViewSize is the sticky denominator of every majority: the largest
	// view a quorate verdict counted, only ever lowered by a human's
	// force-members (to the survivors) or bootstrap-group (0: the
	// configured members again).
	MaxViewSize int `json:"maxViewSize"`
}

// Pause is an operator's pause of a group: no failover, switchover or
// fence until Until.
type Pause struct {
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
}

// Hold is an operator's hold on a site until Until: Kind "no-promote"
// or "maintenance".
type Hold struct {
	Kind   string    `json:"kind"`
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
}

// Reclone is a human's request to re-seed a site from the primary.
type Reclone struct {
	// Donor is the primary the site is copied from.
	Donor string `json:"donor"`
	// Epoch is the group epoch the request was accepted at.
	Epoch uint64 `json:"epoch"`
	// At is when it was accepted (daemon clock); By who asked.
	At time.Time `json:"at"`
	By string    `json:"by,omitempty"`
	// Failed says why the last attempt failed; "" while it runs.
	Failed string `json:"failed,omitempty"`
}

// AuditAccepted is AuditEntry.Result for a request that was carried out
// (followed by ": " and what it did where that matters, e.g. the
// transactions a policy reclone discards); a refused one says "refused: "
// and why.
const AuditAccepted = "accepted"

// MaxAudit bounds GroupState.Audit: the oldest entries are dropped.
const MaxAudit = 50

// AuditEntry is one operator request and its outcome.
type AuditEntry struct {
	// At is when the daemon handled it (daemon clock).
	At time.Time `json:"at"`
	// Action is AuditSwitchover, AuditAcknowledge or AuditConfirmFence.
	Action string `json:"action"`
	// Site is the switchover target or the site confirmed dead; "" for an
	// acknowledgement.
	Site string `json:"site,omitempty"`
	// By names who asked, as the API identified them.
	By string `json:"by,omitempty"`
	// Result is AuditAccepted (maybe followed by ": " and what was done) or
	// "refused: " and the reason.
	Result string `json:"result"`
}

// AppendAudit returns audit with e appended, newest last, keeping the newest
// MaxAudit entries. It always returns a new slice and never modifies audit,
// so a state a store handed out is never changed behind its back.
func AppendAudit(audit []AuditEntry, e AuditEntry) []AuditEntry {
	keep := audit[max(0, len(audit)+1-MaxAudit):]
	out := make([]AuditEntry, 0, len(keep)+1)
	return append(append(out, keep...), e)
}

// FenceConfirmation is an operator's assertion that the old primary of a
// failover was dead (it could no longer acknowledge writes), which the
// daemon accepted while the failover waited for a fence proof.
type FenceConfirmation struct {
	// Site is the old primary confirmed dead.
	Site string `json:"site"`
	// Epoch is the revoked epoch of the failover it was made in.
	Epoch uint64 `json:"epoch"`
	// At is when the daemon accepted it (daemon clock).
	At time.Time `json:"at"`
	// By names who confirmed it.
	By string `json:"by"`
}

// Failover records a completed failover or switchover.
type Failover struct {
	// Kind is "failover" (automatic) or "switchover" (planned).
	Kind string `json:"kind"`
	// From is the old primary, To the promoted site.
	From string `json:"from"`
	// To is the site promoted.
	To string `json:"to"`
	// At is when the new primary was confirmed writable.
	At time.Time `json:"at"`
	// Epoch is the epoch that named To active.
	Epoch uint64 `json:"epoch"`
	// PromotionGTID is To's executed GTID set right before it became writable.
	PromotionGTID string `json:"promotionGTID"`
	// Proof is the fence proof the promotion rested on (a sitepair
	// FenceProof: "fence-confirmed", "primary-down", "sidecar-fenced",
	// "lease-expired", "semisync", "operator-confirmed", "no-fencing");
	// "" when recorded before schema version 2.
	Proof string `json:"proof,omitempty"`
	// FenceConfirmation is who confirmed the old primary dead, and when,
	// when Proof is "operator-confirmed".
	FenceConfirmation *FenceConfirmation `json:"fenceConfirmation,omitempty"`
}

// InFlight is an action under way; its Step is persisted before and after
// each step so a restarted daemon resumes it.
type InFlight struct {
	// ID identifies the action in logs.
	ID string `json:"id"`
	// Kind is "failover" or "switchover".
	Kind string `json:"kind"`
	// From is the old primary, To the chosen candidate.
	From string `json:"from"`
	// To is the chosen candidate.
	To string `json:"to"`
	// Step is the last step started or completed (see daemon).
	Step string `json:"step"`
	// StepDone tells whether Step completed.
	StepDone bool `json:"stepDone"`
	// StartedAt is when the action began.
	StartedAt time.Time `json:"startedAt"`
	// RevokedAt is when the revoking epoch was published (daemon clock);
	// the sidecar lease deadline is measured from it.
	RevokedAt time.Time `json:"revokedAt,omitzero"`
	// RevokedEpoch is the epoch that revoked the old primary.
	RevokedEpoch uint64 `json:"revokedEpoch,omitempty"`
	// PromotionGTID is recorded once replication on To was stopped.
	PromotionGTID string `json:"promotionGTID,omitempty"`
	// PublishedEpoch and PublishedTo are the view published right before
	// To was made writable (its sidecar must hold a view naming it first).
	PublishedEpoch uint64 `json:"publishedEpoch,omitempty"`
	PublishedTo    string `json:"publishedTo,omitempty"`
	// FenceConfirmation is an operator's confirmation that From is dead,
	// recorded while the failover awaited one; nil until then.
	FenceConfirmation *FenceConfirmation `json:"fenceConfirmation,omitempty"`
	// LostHolders are operators' confirmations that an unreachable replica
	// is lost (what only it may hold is given up), recorded while the
	// failover waited at ack-holder-unreachable; Site names the replica.
	LostHolders []FenceConfirmation `json:"lostHolders,omitempty"`
	// AllowDROnly: the switchover's operator allowed a dr-only target.
	AllowDROnly bool `json:"allowDROnly,omitempty"`
	// Timeline lists the steps reached so far, in time order; it becomes
	// the FailoverRecord's when the action ends. By names who asked for a
	// switchover; Reason is the reason of the decision that started it.
	Timeline []TimelineStep `json:"timeline,omitempty"`
	By       string         `json:"by,omitempty"`
	Reason   string         `json:"reason,omitempty"`
}

// document is the whole persisted JSON: every group of the daemon.
type document struct {
	Version int                    `json:"version"`
	Groups  map[string]*GroupState `json:"groups"`
}

func (d *document) check(where string) error {
	if d.Version > SchemaVersion {
		return fmt.Errorf("%s: %w (schema %d, this binary knows %d); upgrade failoverd", where, ErrNewerSchema, d.Version, SchemaVersion)
	}
	if d.Version < 1 {
		return fmt.Errorf("%s: %w: no schema version", where, ErrCorrupt)
	}
	for name, g := range d.Groups {
		if g == nil || g.Group != name {
			return fmt.Errorf("%s: %w: entry %q does not describe group %q", where, ErrCorrupt, name, name)
		}
	}
	return nil
}

// keyDocument is one group's state stored under its own key (ConfigMap and
// Etcd): {"version": SchemaVersion, "state": {...}}.
type keyDocument struct {
	Version int        `json:"version"`
	State   GroupState `json:"state"`
}

// encodeKey returns st's key document at the current schema version.
func encodeKey(st GroupState) ([]byte, error) {
	return json.MarshalIndent(keyDocument{SchemaVersion, st}, "", "  ")
}

// decodeKey reads one group's key document, refusing a newer schema and
// anything that does not describe group; where names the key for messages.
func decodeKey(raw []byte, group, where string) (*GroupState, error) {
	var doc keyDocument
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w: %v; failoverd will not guess the epoch or an in-flight failover: restore the key from a backup, "+
			"or check every site by hand (exactly one writable) and delete the key to start from an empty state", where, ErrCorrupt, err)
	}
	d := document{Version: doc.Version, Groups: map[string]*GroupState{group: &doc.State}}
	if err := d.check(where); err != nil {
		return nil, err
	}
	return &doc.State, nil
}

// checkWrite holds the write rules of every backend: next may replace
// stored (nil: never saved) when its epoch is strictly greater, or when it
// keeps the epoch and does not replace a different in-flight action (stored
// InFlight with ID X: next carries InFlight with ID X, the same action being
// advanced). The backend guarantees next is based on stored being the current
// revision: ConfigMap and Etcd by compare-and-swap, File by being
// single-process.
func checkWrite(stored *GroupState, next GroupState) error {
	if stored == nil {
		return nil
	}
	// Guards against a stale writer re-publishing an old epoch, which would let
	// sidecars trust a revoked primary again.
	if next.Epoch < stored.Epoch {
		return fmt.Errorf("save group %s: %w (stored %d, new %d)", next.Group, ErrEpochRegression, stored.Epoch, next.Epoch)
	}
	// Guards against a second failover overwriting (or clearing) the record of
	// one under way at the same epoch, which would lose its revocation time,
	// step and promotion GTID and let the resumed decision skip a fence.
	if next.Epoch == stored.Epoch && stored.InFlight != nil && (next.InFlight == nil || next.InFlight.ID != stored.InFlight.ID) {
		got := "none"
		if next.InFlight != nil {
			got = fmt.Sprintf("%q", next.InFlight.ID)
		}
		return fmt.Errorf("save group %s: %w (epoch %d, stored in-flight %q, new %s); a new action needs a greater epoch",
			next.Group, ErrInFlightMismatch, next.Epoch, stored.InFlight.ID, got)
	}
	return nil
}

// snapshot copies st deep enough for the write rules (epoch, in-flight), so
// a caller changing its value after a Load or Save cannot change what the
// store compares the next write with.
func snapshot(st GroupState) *GroupState {
	if st.InFlight != nil {
		f := *st.InFlight
		f.FenceConfirmation = cloneConfirmation(f.FenceConfirmation)
		f.LostHolders = slices.Clone(f.LostHolders)
		f.Timeline = slices.Clone(f.Timeline)
		st.InFlight = &f
	}
	if st.LastFailover != nil {
		lf := *st.LastFailover
		lf.FenceConfirmation = cloneConfirmation(lf.FenceConfirmation)
		st.LastFailover = &lf
	}
	st.Audit = slices.Clone(st.Audit)
	st.Holds = maps.Clone(st.Holds)
	if st.Pause != nil {
		p := *st.Pause
		st.Pause = &p
	}
	if st.GroupReplication != nil {
		gr := *st.GroupReplication
		st.GroupReplication = &gr
	}
	st.Failovers = cloneFailovers(st.Failovers)
	st.Diverged = maps.Clone(st.Diverged)
	st.DivergedCount = maps.Clone(st.DivergedCount)
	return &st
}

func cloneConfirmation(c *FenceConfirmation) *FenceConfirmation {
	if c == nil {
		return nil
	}
	cc := *c
	return &cc
}
