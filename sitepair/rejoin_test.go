package sitepair

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The old primary a crashed after writing srcUUID:11-12 (binlogged, never
// acknowledged); b was promoted with a's 1-10 and wrote 3 of its own; c
// follows b.
func tailCase() (Observed, Persisted, Policy) {
	semi := func(o *SiteObservation) {
		o.ServerID = srcUUID
		o.SemiSync = SemiSyncObservation{Known: true, Enabled: true, Timeout: MinSemiSyncTimeout, WaitNoReplica: true, WaitPoint: "AFTER_SYNC"}
	}
	newer := upto(10).Union(errant("b", 3))
	obs := group(
		site("a", RO, exec(upto(12)), semi),
		site("b", W, exec(newer), withID(errantUUID("b"))),
		site("c", RO, exec(newer), retr(newer), follows("b")),
	)
	st := with(promoted("b"), func(p *Persisted) { p.LastFailoverFrom = "a" })
	pol := polWith(func(p *Policy) { p.Fencing = FencingSemiSync; p.Rejoin = RejoinRecloneUnacknowledged })
	return obs, st, pol
}

func TestRejoinReclonesTheUnacknowledgedTail(t *testing.T) {
	obs, st, pol := tailCase()
	d := Decide(obs, st, pol, now)
	want{action: RecloneSite, reason: ReasonRecloneUnacknowledgedTail, target: "b"}.check(t, d)
	if len(d.Diverged) != 1 || d.Diverged[0].Site != "a" || !d.Diverged[0].Set.Equal(gs(srcUUID+":11-12")) || d.Diverged[0].Count != 2 {
		t.Fatalf("diverged %+v, want a discarding %s:11-12 (2)", d.Diverged, srcUUID)
	}
	if !strings.Contains(d.Message, "11-12") {
		t.Errorf("message does not name what is discarded: %s", d.Message)
	}
	next := Apply(st, d, now)
	r, ok := next.Recloning["a"]
	if !ok || r.Donor != "b" || r.By != RecloneByPolicy || r.Failed != "" || !r.At.Equal(now) {
		t.Fatalf("recloning after apply: %+v (ok %t)", next.Recloning, ok)
	}
	if _, ok := st.Recloning["a"]; ok {
		t.Fatal("Apply changed its input")
	}
	// Once recorded, the recloning site is out of every decision.
	if d := Decide(obs, next, pol, now); d.Reason == ReasonRecloneUnacknowledgedTail || d.Reason == ReasonMarkDiverged {
		t.Fatalf("after the reclone was recorded: %s", d)
	}
}

// Each condition of the proof, broken alone, leaves the default: marked
// diverged for a human.
func TestRejoinMarksDivergedWithoutTheProof(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(obs *Observed, st *Persisted, pol *Policy)
	}{
		{"policy manual", func(_ *Observed, _ *Persisted, pol *Policy) { pol.Rejoin = RejoinManual }},
		{"policy unset", func(_ *Observed, _ *Persisted, pol *Policy) { pol.Rejoin = "" }},
		{"fencing without semi-sync", func(_ *Observed, _ *Persisted, pol *Policy) { pol.Fencing = FencingSidecar }},
		{"not the old primary of the last failover", func(_ *Observed, st *Persisted, _ *Policy) { st.LastFailoverFrom = "c" }},
		{"old primary unknown", func(_ *Observed, st *Persisted, _ *Policy) { st.LastFailoverFrom = "" }},
		{"wait point AFTER_COMMIT", func(obs *Observed, _ *Persisted, _ *Policy) { obs.Sites[0].SemiSync.WaitPoint = "AFTER_COMMIT" }},
		{"a finite semi-sync timeout", func(obs *Observed, _ *Persisted, _ *Policy) { obs.Sites[0].SemiSync.Timeout = 10 * time.Second }},
		{"semi-sync does not wait without replicas", func(obs *Observed, _ *Persisted, _ *Policy) { obs.Sites[0].SemiSync.WaitNoReplica = false }},
		{"semi-sync disabled", func(obs *Observed, _ *Persisted, _ *Policy) { obs.Sites[0].SemiSync.Enabled = false }},
		{"semi-sync settings unknown", func(obs *Observed, _ *Persisted, _ *Policy) { obs.Sites[0].SemiSync.Known = false }},
		{"its identity unknown", func(obs *Observed, _ *Persisted, _ *Policy) { obs.Sites[0].ServerID = "" }},
		{"a transaction it did not originate", func(obs *Observed, _ *Persisted, _ *Policy) {
			obs.Sites[0].Executed = upto(12).Union(errant("x", 1))
		}},
		{"not a tail: a gap after what the primary has", func(obs *Observed, _ *Persisted, _ *Policy) {
			obs.Sites[0].Executed = gs(srcUUID + ":1-10:12")
		}},
		{"a site received one of them", func(obs *Observed, _ *Persisted, _ *Policy) {
			obs.Sites[2].Retrieved = obs.Sites[2].Retrieved.Union(gs(srcUUID + ":11"))
		}},
		{"a site is unreachable", func(obs *Observed, _ *Persisted, _ *Policy) { obs.Sites[2].State = UR }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs, st, pol := tailCase()
			tc.edit(&obs, &st, &pol)
			d := Decide(obs, st, pol, now)
			if d.Action == RecloneSite {
				t.Fatalf("recloned without the proof: %s", d)
			}
			switch tc.name {
			case "a site is unreachable":
				return // the group is degraded; a is not rejoined either way
			case "fencing without semi-sync":
				// Validate refuses the policy: nothing is decided on it.
				want{action: Alert, reason: ReasonInvalidPolicy}.check(t, d)
				return
			}
			want{action: MarkDiverged, reason: ReasonMarkDiverged, target: "b"}.check(t, d)
		})
	}
}

func TestApplyPromoteRecordsTheOldPrimary(t *testing.T) {
	st := revoked("a", "b", now.Add(-time.Second))
	next := Apply(st, Decision{Action: Promote, Reason: ReasonPromote, Target: "b", Epoch: 3}, now)
	if next.LastFailoverFrom != "a" || next.LastFailoverTarget != "b" {
		t.Fatalf("last failover from %q to %q, want a to b", next.LastFailoverFrom, next.LastFailoverTarget)
	}
}

func TestRejoinPolicyNeedsSemiSync(t *testing.T) {
	pol := polWith(func(p *Policy) { p.Rejoin = RejoinRecloneUnacknowledged })
	if err := pol.Validate(); !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), "semisync") {
		t.Fatalf("reclone-unacknowledged with sidecar fencing: %v", err)
	}
	pol.Fencing = FencingSemiSyncSidecar
	if err := pol.Validate(); err != nil {
		t.Fatal(err)
	}
	pol.Rejoin = "always"
	if err := pol.Validate(); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("unknown rejoin policy: %v", err)
	}
}
