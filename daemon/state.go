package daemon

import (
	"fmt"
	"slices"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
)

// toPersisted converts the stored group state into the decision layer's
// input. GTID text that does not parse is an error: deciding on a guessed
// promotion GTID could promote a site that lacks acknowledged writes.
func toPersisted(st store.GroupState, flavor gtid.Flavor) (sitepair.Persisted, error) {
	p := sitepair.Persisted{
		Epoch:            st.Epoch,
		ActiveSite:       st.ActiveSite,
		OperatorFenced:   slices.Clone(st.OperatorFenced),
		FailoverHistory:  slices.Clone(st.History),
		EscalationHalted: st.Halted,
	}
	if lf := st.LastFailover; lf != nil {
		p.LastFailoverAt = lf.At
		p.LastFailoverTarget = lf.To
		p.LastFailoverFrom = lf.From
		set, err := gtid.Parse(flavor, lf.PromotionGTID)
		if err != nil {
			return p, fmt.Errorf("group %s: stored promotion GTID: %w", st.Group, err)
		}
		p.PromotionGTID = set
		p.LastFailoverProof = sitepair.FenceProof(lf.Proof)
		p.LastFailoverConfirmation = confirmationIn(lf.FenceConfirmation)
	}
	for site, text := range st.Diverged {
		set, err := gtid.Parse(flavor, text)
		if err != nil {
			return p, fmt.Errorf("group %s: stored divergent set of %s: %w", st.Group, site, err)
		}
		if p.Diverged == nil {
			p.Diverged = map[string]gtid.Set{}
		}
		p.Diverged[site] = set
		// A count outlives no entry: a human who deleted a site's
		// divergent set from the document cleared its count with it.
		if n, ok := st.DivergedCount[site]; ok {
			if p.DivergedCount == nil {
				p.DivergedCount = map[string]uint64{}
			}
			p.DivergedCount[site] = n
		}
	}
	for site, r := range st.Recloning {
		if p.Recloning == nil {
			p.Recloning = map[string]sitepair.Reclone{}
		}
		p.Recloning[site] = sitepair.Reclone{Donor: r.Donor, Epoch: r.Epoch, At: r.At, By: r.By, Failed: r.Failed}
	}
	if f := st.InFlight; f != nil && f.RevokedEpoch > 0 {
		p.InFlight = &sitepair.InFlight{Epoch: f.RevokedEpoch, RevokedAt: f.RevokedAt, From: f.From, To: f.To, Planned: f.Kind == kindSwitchover,
			PublishedEpoch: f.PublishedEpoch, PublishedTo: f.PublishedTo, OperatorConfirmed: confirmationIn(f.FenceConfirmation)}
		for _, c := range f.LostHolders {
			p.InFlight.LostHolders = append(p.InFlight.LostHolders, *confirmationIn(&c))
		}
	}
	return p, nil
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

// Action kinds recorded in the store.
const (
	kindFailover   = "failover"
	kindSwitchover = "switchover"
)

// fromPersisted writes the decision layer's state back into the stored
// form, keeping the executor's bookkeeping (step, promotion GTID) of the
// in-flight action and the operator audit of prev (the daemon appends to it
// with store.AppendAudit).
func fromPersisted(group string, p sitepair.Persisted, prev store.GroupState, now time.Time) store.GroupState {
	st := store.GroupState{
		Group:          group,
		Epoch:          p.Epoch,
		ActiveSite:     p.ActiveSite,
		History:        slices.Clone(p.FailoverHistory),
		Halted:         p.EscalationHalted,
		HaltedReason:   prev.HaltedReason,
		OperatorFenced: slices.Clone(p.OperatorFenced),
		LastFailover:   prev.LastFailover,
		Audit:          slices.Clone(prev.Audit),
	}
	if !p.EscalationHalted {
		st.HaltedReason = ""
	}
	for site, set := range p.Diverged {
		if st.Diverged == nil {
			st.Diverged = map[string]string{}
		}
		st.Diverged[site] = set.String()
		if n, ok := p.DivergedCount[site]; ok {
			if st.DivergedCount == nil {
				st.DivergedCount = map[string]uint64{}
			}
			st.DivergedCount[site] = n
		}
	}
	for site, r := range p.Recloning {
		if st.Recloning == nil {
			st.Recloning = map[string]store.Reclone{}
		}
		st.Recloning[site] = store.Reclone{Donor: r.Donor, Epoch: r.Epoch, At: r.At, By: r.By, Failed: r.Failed}
	}
	if p.LastFailoverTarget != "" && (prev.LastFailover == nil || !prev.LastFailover.At.Equal(p.LastFailoverAt)) {
		kind := kindFailover
		from := ""
		if prev.InFlight != nil {
			kind, from = prev.InFlight.Kind, prev.InFlight.From
		}
		st.LastFailover = &store.Failover{Kind: kind, From: from, To: p.LastFailoverTarget, At: p.LastFailoverAt, Epoch: p.Epoch, PromotionGTID: p.PromotionGTID.String(),
			Proof: string(p.LastFailoverProof), FenceConfirmation: confirmationOut(p.LastFailoverConfirmation)}
	}
	if f := p.InFlight; f != nil {
		in := &store.InFlight{Kind: kindFailover, From: f.From, To: f.To, RevokedAt: f.RevokedAt, RevokedEpoch: f.Epoch, StartedAt: now,
			PublishedEpoch: f.PublishedEpoch, PublishedTo: f.PublishedTo, FenceConfirmation: confirmationOut(f.OperatorConfirmed)}
		for _, c := range f.LostHolders {
			in.LostHolders = append(in.LostHolders, *confirmationOut(&c))
		}
		if f.Planned {
			in.Kind = kindSwitchover
		}
		if old := prev.InFlight; old != nil && old.RevokedEpoch == f.Epoch {
			in.ID, in.StartedAt, in.Step, in.StepDone, in.PromotionGTID = old.ID, old.StartedAt, old.Step, old.StepDone, old.PromotionGTID
		} else {
			in.ID = fmt.Sprintf("%s-%d", group, f.Epoch)
		}
		st.InFlight = in
	}
	return st
}
