package daemon

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
)

// Converting the daemon's record to the store's document and back loses
// nothing: a record that survives a save and a reload is the record that
// was saved (random records of both flavors, every field set or not).
func TestRecordRoundTripsThroughTheStoreShape(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	for i := range 2000 {
		flavor := gtid.MariaDB
		if i%2 == 1 {
			flavor = gtid.MySQL
		}
		r := randomRecord(rng, flavor)
		st := toStore("orders", r)
		back, err := toRecord(st, flavor)
		if err != nil {
			t.Fatalf("record %d: %v\nrecord %+v\nstored %+v", i, err, r, st)
		}
		if why := recordDiff(r, back); why != "" {
			t.Fatalf("record %d changed across the store shape: %s\nrecord %+v\nback   %+v", i, why, r, back)
		}
		if again := toStore("orders", back); !reflect.DeepEqual(again, st) {
			t.Fatalf("record %d: store shape not stable:\n%+v\n%+v", i, st, again)
		}
	}
}

// recordDiff says how a and b differ ("" if they do not): GTID sets by
// their content, everything else exactly.
func recordDiff(a, b record) string {
	if !a.PromotionGTID.Equal(b.PromotionGTID) {
		return fmt.Sprintf("promotion GTID %s != %s", a.PromotionGTID, b.PromotionGTID)
	}
	if len(a.Diverged) != len(b.Diverged) {
		return fmt.Sprintf("diverged %v != %v", a.Diverged, b.Diverged)
	}
	for site, set := range a.Diverged {
		if o, ok := b.Diverged[site]; !ok || !set.Equal(o) {
			return fmt.Sprintf("diverged %s: %s != %s", site, set, o)
		}
	}
	a.PromotionGTID, b.PromotionGTID = gtid.Set{}, gtid.Set{}
	a.Diverged, b.Diverged = nil, nil
	if !reflect.DeepEqual(a, b) {
		return "fields differ"
	}
	return ""
}

func randomRecord(rng *rand.Rand, flavor gtid.Flavor) record {
	sites := []string{"a", "b", "c", "d"}
	site := func() string { return sites[rng.IntN(len(sites))] }
	at := func() time.Time { return t0.Add(time.Duration(rng.IntN(1e6)) * time.Second) }
	maybe := func() bool { return rng.IntN(2) == 0 }
	set := func() gtid.Set {
		n := 1 + rng.IntN(100)
		if flavor == gtid.MySQL {
			return gtid.MustParse(flavor, fmt.Sprintf("3e11fa47-71ca-11e1-9e33-c80aa942956%d:1-%d", rng.IntN(10), n))
		}
		return gtid.MustParse(flavor, fmt.Sprintf("%d-%d-%d", rng.IntN(3), 1+rng.IntN(5), n))
	}
	confirmation := func(epoch uint64) *sitepair.FenceConfirmation {
		return &sitepair.FenceConfirmation{Site: site(), Epoch: epoch, At: at(), By: "op" + site()}
	}
	r := record{Persisted: sitepair.Persisted{Epoch: uint64(rng.IntN(100))}}
	if maybe() {
		r.ActiveSite = site()
	}
	if maybe() {
		r.LastFailoverAt, r.LastFailoverTarget, r.PromotionGTID = at(), site(), set()
		if maybe() {
			r.LastFailoverFrom = site()
		}
		if maybe() {
			r.LastFailoverProof = sitepair.ProofSemiSync
			if maybe() {
				r.LastFailoverProof = sitepair.ProofOperatorConfirmed
				r.LastFailoverConfirmation = confirmation(r.Epoch)
			}
		}
		r.last = &lastFailover{kind: []string{kindFailover, kindSwitchover}[rng.IntN(2)], epoch: uint64(rng.IntN(100))}
	}
	for _, s := range sites {
		if rng.IntN(4) == 0 {
			if r.Diverged == nil {
				r.Diverged, r.DivergedCount = map[string]gtid.Set{}, map[string]uint64{}
			}
			r.Diverged[s] = set()
			if maybe() {
				r.DivergedCount[s] = uint64(rng.IntN(50))
			}
		}
		if rng.IntN(4) == 0 {
			r.OperatorFenced = append(r.OperatorFenced, s)
		}
		if rng.IntN(4) == 0 {
			if r.Holds == nil {
				r.Holds = map[string]sitepair.Hold{}
			}
			r.Holds[s] = sitepair.Hold{Kind: sitepair.HoldKinds()[rng.IntN(2)], Since: at(), Until: at(), By: "op", Reason: "work"}
		}
		if rng.IntN(4) == 0 {
			if r.Recloning == nil {
				r.Recloning = map[string]sitepair.Reclone{}
			}
			rc := sitepair.Reclone{Donor: site(), Epoch: r.Epoch, At: at(), By: "op"}
			if maybe() {
				rc.Failed = "copy failed"
			}
			r.Recloning[s] = rc
		}
	}
	if len(r.DivergedCount) == 0 {
		r.DivergedCount = nil
	}
	for range rng.IntN(4) {
		r.FailoverHistory = append(r.FailoverHistory, at())
	}
	if maybe() {
		r.Pause = &sitepair.Pause{Since: at(), Until: at(), By: "op" + site(), Reason: "upgrade"}
	}
	if maybe() {
		r.gr = &grRecord{maxViewSize: rng.IntN(10)}
	}
	if maybe() {
		r.EscalationHalted = true
		if maybe() {
			r.haltedReason = "too many failovers"
		}
	}
	if maybe() {
		epoch := 1 + r.Epoch
		r.Epoch = epoch
		r.ActiveSite = ""
		f := &sitepair.InFlight{Epoch: epoch, RevokedAt: at(), From: site(), To: site(), Planned: maybe()}
		f.AllowDROnly = f.Planned && maybe()
		if maybe() {
			f.PublishedEpoch, f.PublishedTo = epoch, f.To
		}
		if maybe() {
			f.OperatorConfirmed = confirmation(epoch)
		}
		for range rng.IntN(3) {
			f.LostHolders = append(f.LostHolders, *confirmation(epoch))
		}
		r.InFlight = f
		r.progress = &progress{id: fmt.Sprintf("orders-%d", epoch), startedAt: at()}
		if maybe() {
			r.progress.step, r.progress.stepDone = StepPromotionRecorded, maybe()
			r.progress.promotionGTID = set().String()
		}
		for _, step := range []string{TimelineDetected, StepRevoked, StepOldPrimaryFenced}[:rng.IntN(4)] {
			r.progress.timeline = append(r.progress.timeline, store.TimelineStep{Step: step, At: at()})
		}
		if maybe() {
			r.progress.by, r.progress.reason = "op", string(sitepair.ReasonFailoverRevoke)
		}
	}
	for i := range rng.IntN(3) {
		f := store.FailoverRecord{ID: fmt.Sprintf("orders-%d", i), Kind: kindSwitchover, From: site(), To: site(), RevokedEpoch: uint64(i),
			Epoch: uint64(i + 1), Outcome: store.OutcomeCompleted, EndedAt: at(), Proof: string(sitepair.ProofSemiSync), PromotionGTID: set().String(),
			Timeline: []store.TimelineStep{{Step: TimelineRequested, At: at()}, {Step: StepPromoted, At: at()}}}
		if maybe() {
			f.Outcome, f.Why, f.Proof, f.PromotionGTID = store.OutcomeAbandoned, "target-lost: gone", "", ""
		}
		if maybe() {
			f.FenceConfirmation = &store.FenceConfirmation{Site: site(), Epoch: f.RevokedEpoch, At: at(), By: "op"}
		}
		r.failovers = store.AppendFailover(r.failovers, f)
	}
	for range rng.IntN(5) {
		r.audit = store.AppendAudit(r.audit, store.AuditEntry{At: at(), Action: store.AuditAcknowledge, By: "op", Result: store.AuditAccepted})
	}
	return r
}
