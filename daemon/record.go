package daemon

// The group's one persisted record (record): the decision core's state
// plus what only the daemon keeps (the in-flight action's progress, the
// last failover's kind and epoch, the halted reason, the operator audit).
// toRecord and toStore are pure conversions to and from the store's
// document (store.GroupState, the JSON shape); advance carries the
// daemon's fields across a decision.

import (
	"fmt"
	"slices"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
)

// record is what the group persists, saved whole (persist). Invariants
// (kept by toRecord and advance): progress is set exactly when
// Persisted.InFlight is; last is set when a failover was recorded;
// haltedReason is "" unless EscalationHalted.
type record struct {
	sitepair.Persisted
	// progress is the bookkeeping of the failover in flight.
	progress *progress
	// last is what the core does not keep of the last failover.
	last *lastFailover
	// haltedReason says why automatic failover was halted.
	haltedReason string
	// audit holds the latest operator requests, newest last (store.AppendAudit).
	audit []store.AuditEntry
	// failovers holds the latest failovers and switchovers that ended,
	// newest last (store.AppendFailover; history.go).
	failovers []store.FailoverRecord
	// gr is what a Group Replication group keeps across restarts; nil when
	// unknown (an async group, a record written before it was kept).
	gr *grRecord
}

// grRecord is the persisted part of a Group Replication group's verdict
// state (store.GroupReplication).
type grRecord struct {
	// maxViewSize is grview.State.MaxViewSize: the sticky denominator (0:
	// the configured members).
	maxViewSize int
}

// progress is the executor's bookkeeping of a failover in flight, persisted
// before and after each step so a restarted daemon resumes it.
type progress struct {
	id            string
	startedAt     time.Time
	step          string // the last step recorded (Step* names)
	stepDone      bool
	promotionGTID string // the target's set once its replication stopped
	// timeline lists the steps reached so far (history.go); by names who
	// asked for a switchover; reason is the starting decision's reason.
	timeline []store.TimelineStep
	by       string
	reason   string
}

// lastFailover is the kind and epoch of the last failover or switchover.
type lastFailover struct {
	kind  string // kindFailover or kindSwitchover
	epoch uint64 // the epoch that named its target active
}

// Action kinds recorded in the store.
const (
	kindFailover   = "failover"
	kindSwitchover = "switchover"
)

// advance returns r moved to the core's next state, decided at now: a new
// failover in flight starts its progress, a new promotion records its kind
// and epoch, an ended halt drops its reason.
func (r record) advance(group string, next sitepair.Persisted, now time.Time) record {
	out := record{Persisted: next, last: r.last, haltedReason: r.haltedReason, audit: r.audit, failovers: r.failovers, gr: r.gr}
	if !next.EscalationHalted {
		out.haltedReason = ""
	}
	if next.LastFailoverTarget != "" && (r.last == nil || !r.LastFailoverAt.Equal(next.LastFailoverAt)) {
		kind := kindFailover
		if r.InFlight != nil && r.InFlight.Planned {
			kind = kindSwitchover
		}
		out.last = &lastFailover{kind: kind, epoch: next.Epoch}
	}
	if f := next.InFlight; f != nil {
		out.progress = &progress{id: fmt.Sprintf("%s-%d", group, f.Epoch), startedAt: now}
		// The same failover (same revoked epoch) keeps its progress.
		if r.progress != nil && r.InFlight != nil && r.InFlight.Epoch == f.Epoch {
			out.progress = r.progress
		}
	}
	return out
}

// stepped returns r with step (if any) recorded as done in the failover in
// flight, and promotion (if any) as its promotion GTID.
func (r record) stepped(step, promotion string) record {
	if r.progress == nil || step == "" {
		return r
	}
	p := *r.progress
	p.step, p.stepDone = step, true
	if promotion != "" {
		p.promotionGTID = promotion
	}
	r.progress = &p
	return r
}

// inFlightID identifies the failover in flight ("" if none).
func (r record) inFlightID() string {
	if r.progress == nil {
		return ""
	}
	return r.progress.id
}

// toRecord converts the stored group state into the daemon's record. GTID
// text that does not parse is an error: deciding on a guessed promotion
// GTID could promote a site that lacks acknowledged writes. An in-flight
// action without a revoked epoch is not a failover the core can resume and
// is left out (the next save drops it).
func toRecord(st store.GroupState, flavor gtid.Flavor) (record, error) {
	r := record{Persisted: sitepair.Persisted{
		Epoch:            st.Epoch,
		ActiveSite:       st.ActiveSite,
		OperatorFenced:   slices.Clone(st.OperatorFenced),
		FailoverHistory:  slices.Clone(st.History),
		EscalationHalted: st.Halted,
	}, audit: slices.Clone(st.Audit), failovers: slices.Clone(st.Failovers)}
	if st.Halted {
		r.haltedReason = st.HaltedReason
	}
	if gr := st.GroupReplication; gr != nil {
		r.gr = &grRecord{maxViewSize: gr.MaxViewSize}
	}
	if lf := st.LastFailover; lf != nil {
		r.LastFailoverAt = lf.At
		r.LastFailoverTarget = lf.To
		r.LastFailoverFrom = lf.From
		set, err := gtid.Parse(flavor, lf.PromotionGTID)
		if err != nil {
			return r, fmt.Errorf("group %s: stored promotion GTID: %w", st.Group, err)
		}
		r.PromotionGTID = set
		r.LastFailoverProof = sitepair.FenceProof(lf.Proof)
		r.LastFailoverConfirmation = confirmationIn(lf.FenceConfirmation)
		r.last = &lastFailover{kind: lf.Kind, epoch: lf.Epoch}
	}
	for site, text := range st.Diverged {
		set, err := gtid.Parse(flavor, text)
		if err != nil {
			return r, fmt.Errorf("group %s: stored divergent set of %s: %w", st.Group, site, err)
		}
		if r.Diverged == nil {
			r.Diverged = map[string]gtid.Set{}
		}
		r.Diverged[site] = set
		// A count outlives no entry: a human who deleted a site's
		// divergent set from the document cleared its count with it.
		if n, ok := st.DivergedCount[site]; ok {
			if r.DivergedCount == nil {
				r.DivergedCount = map[string]uint64{}
			}
			r.DivergedCount[site] = n
		}
	}
	for site, c := range st.Recloning {
		if r.Recloning == nil {
			r.Recloning = map[string]sitepair.Reclone{}
		}
		r.Recloning[site] = sitepair.Reclone{Donor: c.Donor, Epoch: c.Epoch, At: c.At, By: c.By, Failed: c.Failed}
	}
	if p := st.Pause; p != nil {
		r.Pause = &sitepair.Pause{Since: p.Since, Until: p.Until, By: p.By, Reason: p.Reason}
	}
	for site, h := range st.Holds {
		if r.Holds == nil {
			r.Holds = map[string]sitepair.Hold{}
		}
		r.Holds[site] = sitepair.Hold{Kind: sitepair.HoldKind(h.Kind), Since: h.Since, Until: h.Until, By: h.By, Reason: h.Reason}
	}
	if f := st.InFlight; f != nil && f.RevokedEpoch > 0 {
		r.InFlight = &sitepair.InFlight{Epoch: f.RevokedEpoch, RevokedAt: f.RevokedAt, From: f.From, To: f.To, Planned: f.Kind == kindSwitchover, AllowDROnly: f.AllowDROnly,
			PublishedEpoch: f.PublishedEpoch, PublishedTo: f.PublishedTo, OperatorConfirmed: confirmationIn(f.FenceConfirmation)}
		for _, c := range f.LostHolders {
			r.InFlight.LostHolders = append(r.InFlight.LostHolders, *confirmationIn(&c))
		}
		r.progress = &progress{id: f.ID, startedAt: f.StartedAt, step: f.Step, stepDone: f.StepDone, promotionGTID: f.PromotionGTID,
			timeline: slices.Clone(f.Timeline), by: f.By, reason: f.Reason}
	}
	return r, nil
}

// toStore converts the record into the store's document of group (the
// store stamps UpdatedAt; the caller sets UpdatedBy).
func toStore(group string, r record) store.GroupState {
	st := store.GroupState{
		Group:          group,
		Epoch:          r.Epoch,
		ActiveSite:     r.ActiveSite,
		History:        slices.Clone(r.FailoverHistory),
		Halted:         r.EscalationHalted,
		OperatorFenced: slices.Clone(r.OperatorFenced),
		Audit:          slices.Clone(r.audit),
		Failovers:      slices.Clone(r.failovers),
	}
	if r.EscalationHalted {
		st.HaltedReason = r.haltedReason
	}
	if r.gr != nil {
		st.GroupReplication = &store.GroupReplication{MaxViewSize: r.gr.maxViewSize}
	}
	for site, set := range r.Diverged {
		if st.Diverged == nil {
			st.Diverged = map[string]string{}
		}
		st.Diverged[site] = set.String()
		if n, ok := r.DivergedCount[site]; ok {
			if st.DivergedCount == nil {
				st.DivergedCount = map[string]uint64{}
			}
			st.DivergedCount[site] = n
		}
	}
	if p := r.Pause; p != nil {
		st.Pause = &store.Pause{Since: p.Since, Until: p.Until, By: p.By, Reason: p.Reason}
	}
	for site, h := range r.Holds {
		if st.Holds == nil {
			st.Holds = map[string]store.Hold{}
		}
		st.Holds[site] = store.Hold{Kind: string(h.Kind), Since: h.Since, Until: h.Until, By: h.By, Reason: h.Reason}
	}
	for site, c := range r.Recloning {
		if st.Recloning == nil {
			st.Recloning = map[string]store.Reclone{}
		}
		st.Recloning[site] = store.Reclone{Donor: c.Donor, Epoch: c.Epoch, At: c.At, By: c.By, Failed: c.Failed}
	}
	if l := r.last; l != nil {
		st.LastFailover = &store.Failover{Kind: l.kind, From: r.LastFailoverFrom, To: r.LastFailoverTarget, At: r.LastFailoverAt, Epoch: l.epoch,
			PromotionGTID: r.PromotionGTID.String(), Proof: string(r.LastFailoverProof), FenceConfirmation: confirmationOut(r.LastFailoverConfirmation)}
	}
	if f := r.InFlight; f != nil {
		in := &store.InFlight{Kind: kindFailover, From: f.From, To: f.To, RevokedAt: f.RevokedAt, RevokedEpoch: f.Epoch, AllowDROnly: f.AllowDROnly,
			PublishedEpoch: f.PublishedEpoch, PublishedTo: f.PublishedTo, FenceConfirmation: confirmationOut(f.OperatorConfirmed)}
		if f.Planned {
			in.Kind = kindSwitchover
		}
		for _, c := range f.LostHolders {
			in.LostHolders = append(in.LostHolders, *confirmationOut(&c))
		}
		if p := r.progress; p != nil {
			in.ID, in.StartedAt, in.Step, in.StepDone, in.PromotionGTID = p.id, p.startedAt, p.step, p.stepDone, p.promotionGTID
			in.Timeline, in.By, in.Reason = slices.Clone(p.timeline), p.by, p.reason
		}
		st.InFlight = in
	}
	return st
}

// confirmationIn and confirmationOut convert an operator's fence
// confirmation between the store and the decision layer (nil stays nil).
func confirmationIn(c *store.FenceConfirmation) *sitepair.FenceConfirmation {
	if c == nil {
		return nil
	}
	return &sitepair.FenceConfirmation{Site: c.Site, Epoch: c.Epoch, At: c.At, By: c.By}
}

func confirmationOut(c *sitepair.FenceConfirmation) *store.FenceConfirmation {
	if c == nil {
		return nil
	}
	return &store.FenceConfirmation{Site: c.Site, Epoch: c.Epoch, At: c.At, By: c.By}
}
