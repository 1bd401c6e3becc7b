package sitepair

import (
	"testing"
	"time"

	"github.com/failoverd/failoverd/statemachine"
)

// exitPolicy is the default policy with the exit shortcut on (the daemon
// sets ExitWindow to its failure window).
func exitPolicy() Policy {
	p := DefaultPolicy()
	p.ExitWindow = time.Second
	return p
}

// crashed is the recorded primary a at epoch 1, its first probe after the
// crash failed (writable, debouncing), last reached 300 ms ago; its sidecar
// holds epoch 1 and reported, 50 ms ago, that mysqld pid 42 exited 100 ms
// ago. b and c lost it.
func crashed(opts ...func(*SiteObservation)) Observed {
	a := site("a", W, bounce, func(o *SiteObservation) {
		o.LastReachableAt = now.Add(-300 * time.Millisecond)
		o.RefusedProbes = 1
		o.Sidecar = SidecarObservation{Configured: true, LastReport: now.Add(-50 * time.Millisecond), Epoch: 1,
			EpochSince: now.Add(-time.Hour), CanKill: true, AliveAt: now.Add(-50 * time.Millisecond),
			Exit: MysqldExit{PID: 42, Start: 7, At: now.Add(-100 * time.Millisecond)}}
	})
	for _, f := range opts {
		f(&a)
	}
	return group(a, site("b", RO, lost("a")), site("c", RO, lost("a")))
}

// TestSidecarExitStartsTheFailoverAtOnce: the primary's own sidecar saw
// its mysqld exit, the daemon's latest probe of it failed and every replica
// lost it: revoke now, with the detection code PrimaryExited, instead of
// waiting for the failure threshold (issue 32).
func TestSidecarExitStartsTheFailoverAtOnce(t *testing.T) {
	d := Decide(crashed(), active("a"), exitPolicy(), now)
	if d.Action != RevokeEpoch || d.Reason != ReasonFailoverRevoke || d.Detection.Code != statemachine.PrimaryExited || d.From != "a" {
		t.Fatalf("decision = %s/%s detection %s from %q (%s), want RevokeEpoch/failover-revoke on PrimaryExited from a", d.Action, d.Reason, d.Detection.Code, d.From, d.Message)
	}
}

// TestSidecarExitGuards: every report that says nothing about the mysqld
// running now leaves detection as it is without sidecars (the primary is
// debounced: no action).
func TestSidecarExitGuards(t *testing.T) {
	tests := []struct {
		name string
		obs  Observed
		st   Persisted
		pol  Policy
	}{
		{"shortcut off (no ExitWindow: no sidecars, or an older daemon policy)", crashed(), active("a"), DefaultPolicy()},
		{"no exit reported", crashed(func(o *SiteObservation) { o.Sidecar.Exit = MysqldExit{} }), active("a"), exitPolicy()},
		{"site declares no sidecar", crashed(func(o *SiteObservation) { o.Sidecar.Configured = false }), active("a"), exitPolicy()},
		// Prevents a restarted mysqld (by hand, by its supervisor) from being failed over on its predecessor's exit.
		{"a probe reached the primary after the exit", crashed(func(o *SiteObservation) { o.LastReachableAt = now.Add(-50 * time.Millisecond) }), active("a"), exitPolicy()},
		{"a probe reached the primary at the exit bound", crashed(func(o *SiteObservation) { o.LastReachableAt = o.Sidecar.Exit.At }), active("a"), exitPolicy()},
		// Prevents a stale report from counting: past the window the probes decide.
		{"exit older than the window", crashed(func(o *SiteObservation) {
			o.Sidecar.Exit.At = now.Add(-1500 * time.Millisecond)
			o.LastReachableAt = now.Add(-2 * time.Second)
		}), active("a"), exitPolicy()},
		{"exit after now (clock went backwards)", crashed(func(o *SiteObservation) { o.Sidecar.Exit.At = now.Add(time.Millisecond) }), active("a"), exitPolicy()},
		// Prevents a sidecar of another epoch (restarted, no view yet; a report from before the last failover) from speaking for this primary.
		{"sidecar holds an older epoch", crashed(func(o *SiteObservation) { o.Sidecar.Epoch = 0 }), active("a"), exitPolicy()},
		{"sidecar holds a newer epoch", crashed(func(o *SiteObservation) { o.Sidecar.Epoch = 2 }), active("a"), exitPolicy()},
		{"group never adopted a primary (epoch 0)", crashed(func(o *SiteObservation) { o.Sidecar.Epoch = 0 }), Persisted{ActiveSite: "a"}, exitPolicy()},
		// The latest probe of the primary succeeded: nothing fails now.
		{"primary not failing probes", crashed(func(o *SiteObservation) { o.Debouncing, o.RefusedProbes = false, 0 }), active("a"), exitPolicy()},
		{"daemon-only detection", crashed(), active("a"), func() Policy { p := exitPolicy(); p.Detection = statemachine.DaemonOnly; return p }()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.obs, tc.st, tc.pol, now)
			if d.Detection.Code == statemachine.PrimaryExited || d.Action == RevokeEpoch {
				t.Fatalf("decision = %s/%s on %s (%s): a report that proves nothing shortened detection", d.Action, d.Reason, d.Detection.Code, d.Message)
			}
		})
	}
}

// TestSidecarExitOfAnotherSiteCountsForNothing: an exit a replica's sidecar
// reported (or a report signed in another site's name) says nothing about
// the primary: the primary is debounced as before.
func TestSidecarExitOfAnotherSiteCountsForNothing(t *testing.T) {
	obs := crashed(func(o *SiteObservation) { o.Sidecar.Exit = MysqldExit{} })
	obs.Sites[1].Sidecar = SidecarObservation{Configured: true, LastReport: now, Epoch: 1, Exit: MysqldExit{PID: 9, At: now.Add(-10 * time.Millisecond)}}
	d := Decide(obs, active("a"), exitPolicy(), now)
	if d.Detection.Code != statemachine.PrimaryDebouncing || d.Action != None {
		t.Fatalf("decision = %s/%s on %s, want no action on PrimaryDebouncing", d.Action, d.Reason, d.Detection.Code)
	}
}

// TestSidecarExitNeedsTheReplicasToHaveLostThePrimary: a replica still
// streaming from the primary means something there serves; the exit report
// (a wrong pid file, another mysqld) does not override it.
func TestSidecarExitNeedsTheReplicasToHaveLostThePrimary(t *testing.T) {
	obs := crashed()
	obs.Sites[2] = site("c", RO, follows("a"))
	obs.Sites[2].Index = 2
	d := Decide(obs, active("a"), exitPolicy(), now)
	if d.Action == RevokeEpoch || d.Detection.Code == statemachine.PrimaryExited {
		t.Fatalf("decision = %s/%s on %s, want no failover while c streams from a", d.Action, d.Reason, d.Detection.Code)
	}
}

// TestSidecarExitKeepsTheAntiFlapRules: the shortcut is a detection, not a
// licence: cooldown and escalation still stop it.
func TestSidecarExitKeepsTheAntiFlapRules(t *testing.T) {
	st := active("a")
	st.FailoverHistory = []time.Time{now.Add(-time.Minute)}
	st.LastFailoverAt = now.Add(-time.Minute)
	d := Decide(crashed(), st, exitPolicy(), now)
	if d.Action != Alert || d.Reason != ReasonCooldown || d.Detection.Code != statemachine.PrimaryExited {
		t.Fatalf("decision = %s/%s on %s, want the cooldown alert", d.Action, d.Reason, d.Detection.Code)
	}
}

// TestSidecarExitIsNoFenceProof: once the failover is in flight the exit
// report proves nothing by itself: the promotion waits for a proof of
// docs/design.md (here the second refused probe: primary-down).
func TestSidecarExitIsNoFenceProof(t *testing.T) {
	st := revoked("a", "b", now.Add(-10*time.Millisecond))
	obs := crashed(func(o *SiteObservation) { o.Sidecar.Epoch = 2 })
	d := Decide(obs, st, exitPolicy(), now)
	if d.Action == Promote {
		t.Fatalf("promoted on the exit report alone: %s/%s proof %s", d.Action, d.Reason, d.FenceProof)
	}
	obs.Sites[0].State, obs.Sites[0].Debouncing, obs.Sites[0].RefusedProbes = UR, false, 2
	d = Decide(obs, st, exitPolicy(), now)
	if d.Action != Promote || d.FenceProof != ProofPrimaryDown {
		t.Fatalf("decision = %s/%s proof %q (%s), want Promote on primary-down", d.Action, d.Reason, d.FenceProof, d.Message)
	}
}

// TestNegativeExitWindowIsInvalid: a negative window is a configuration
// bug, refused like every other negative duration.
func TestNegativeExitWindowIsInvalid(t *testing.T) {
	p := exitPolicy()
	p.ExitWindow = -time.Second
	if err := p.Validate(); err == nil {
		t.Fatal("a negative ExitWindow validated")
	}
}
