package statemachine

import (
	"testing"
	"time"
)

// TestOnlyRunningIOThreadsThatLostThePrimaryRecentlyCorroborate: a replica
// whose IO thread is stopped or broken, or that lost the primary long before
// the daemon did, must not turn "the daemon cannot reach the primary" into
// PrimaryDown.
func TestOnlyRunningIOThreadsThatLostThePrimaryRecentlyCorroborate(t *testing.T) {
	seen := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const window = 3 * time.Second
	stopped := func(s *SiteInput) { s.IOStopped = true }
	streamedAt := func(at time.Time) opt { return func(s *SiteInput) { s.LastStreamingAt = at } }
	for _, tc := range []struct {
		name    string
		replica SiteInput
		want    Code
		witness Witness
	}{
		{"running IO thread lost the primary with the daemon", site("b", ReadOnly, lostIO("a"), streamedAt(seen.Add(-time.Second))), PrimaryDown, WitnessLost},
		{"IO thread stopped (STOP REPLICA)", site("b", ReadOnly, lostIO("a"), stopped, streamedAt(seen)), PrimaryDownUncorroborated, NoWitness},
		{"IO thread stopped on error 1236", site("b", ReadOnly, lostIO("a"), stopped, broken, streamedAt(seen)), PrimaryDownUncorroborated, NoWitness},
		{"IO thread reconnecting after error 1045", site("b", ReadOnly, lostIO("a"), broken, streamedAt(seen)), PrimaryDownUncorroborated, NoWitness},
		{"lost the primary an hour before the daemon did", site("b", ReadOnly, lostIO("a"), streamedAt(seen.Add(-time.Hour))), PrimaryDownUncorroborated, NoWitness},
		{"never seen streaming by this daemon (just started): benefit of the doubt", site("b", ReadOnly, lostIO("a")), PrimaryDown, WitnessLost},
		{"still streaming", site("b", ReadOnly, follows("a"), streamedAt(seen)), UnreachablePrimary, WitnessStreaming},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := group("a", site("a", Unreachable), tc.replica)
			in.PrimaryLastSeen, in.CorroborationWindow = seen, window
			if got := Detect(in).Code; got != tc.want {
				t.Errorf("Detect = %s, want %s", got, tc.want)
			}
			if got := in.Witness(tc.replica, "a", seen); got != tc.witness {
				t.Errorf("Witness = %d, want %d", got, tc.witness)
			}
		})
	}
	// A daemon that never reached the primary (started during the outage)
	// has no anchor: a running IO thread that lost it still corroborates.
	in := group("a", site("a", Unreachable), site("b", ReadOnly, lostIO("a")))
	in.CorroborationWindow = window
	if got := Detect(in).Code; got != PrimaryDown {
		t.Errorf("without an anchor: Detect = %s, want %s", got, PrimaryDown)
	}
}
