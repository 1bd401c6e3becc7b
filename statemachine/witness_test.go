package statemachine

import (
	"slices"
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
			primary := site("a", Unreachable)
			primary.LastReachableAt = seen
			in := group("a", primary, tc.replica)
			in.CorroborationWindow = window
			if got := Detect(in).Code; got != tc.want {
				t.Errorf("Detect = %s, want %s", got, tc.want)
			}
			if got := in.Witness(tc.replica, primary); got != tc.witness {
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

// TestMaintenanceSiteIsNoWitnessAndNoReplicaProblem: a site an operator
// holds for maintenance is stopped, restarted and lagging by hand. Its lost
// source must not corroborate an outage, its streaming must not veto one,
// and its own state must not read as a degraded group; it still counts
// where it could be writable.
func TestMaintenanceSiteIsNoWitnessAndNoReplicaProblem(t *testing.T) {
	maint := func(s *SiteInput) { s.Maintenance = true }
	stopped := func(s *SiteInput) { s.IOStopped = true }
	for _, tc := range []struct {
		name  string
		sites []SiteInput
		want  Code
	}{
		{"the only witness is under maintenance and lost the primary", []SiteInput{site("a", Unreachable), site("b", ReadOnly, lostIO("a"), maint)}, PrimaryDownUncorroborated},
		{"a maintenance site still streaming does not veto the others' loss", []SiteInput{site("a", Unreachable), site("b", ReadOnly, follows("a"), maint), site("c", ReadOnly, lostIO("a"))}, PrimaryDown},
		{"maintenance site unreachable (mysqld stopped)", []SiteInput{site("a", Writable), site("b", Unreachable, maint), site("c", ReadOnly, follows("a"))}, Healthy},
		{"maintenance site restarted, replication stopped", []SiteInput{site("a", Writable), site("b", ReadOnly, lostIO("a"), stopped, maint), site("c", ReadOnly, follows("a"))}, Healthy},
		{"maintenance site with broken replication", []SiteInput{site("a", Writable), site("b", ReadOnly, follows("a"), broken, maint)}, Healthy},
		{"the same replica without the hold is a problem", []SiteInput{site("a", Writable), site("b", Unreachable), site("c", ReadOnly, follows("a"))}, ReplicaUnreachable},
		{"a maintenance site made writable is still a split brain", []SiteInput{site("a", Writable), site("b", Writable, maint)}, SplitBrain},
		{"a maintenance site without a debounced state still waits", []SiteInput{site("a", Writable), site("b", Unknown, maint)}, Undetermined},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Detect(group("a", tc.sites...)).Code; got != tc.want {
				t.Errorf("Detect = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestStreamingReadBeforeThePrimaryWasGivenUpIsPending: a replica read right
// after its primary crashed, before its receiver saw the connection close,
// still looks streaming when the primary's next probe debounces it
// unreachable. That read refutes nothing: the group waits for the replica's
// next probe (AwaitingWitnesses) instead of reporting a partition, and a
// streaming read made after the primary was given up is a partition.
func TestStreamingReadBeforeThePrimaryWasGivenUpIsPending(t *testing.T) {
	before, after := readAt(t0.Add(-490*time.Millisecond)), readAt(t0.Add(2*time.Millisecond))
	primary := site("a", Unreachable, gaveUpAt(t0))
	for _, tc := range []struct {
		name     string
		replicas []SiteInput
		want     Code
		pending  []string
	}{
		{"the only witness streamed when read before", []SiteInput{site("b", ReadOnly, follows("a"), before)}, AwaitingWitnesses, []string{"b"}},
		{"one lost, one streamed when read before: not yet down", []SiteInput{site("b", ReadOnly, lostIO("a"), after), site("c", ReadOnly, follows("a"), before)}, AwaitingWitnesses, []string{"c"}},
		{"streaming when read after: a partition", []SiteInput{site("b", ReadOnly, follows("a"), after)}, UnreachablePrimary, nil},
		{"a fresh streaming read outranks a pending one", []SiteInput{site("b", ReadOnly, follows("a"), after), site("c", ReadOnly, follows("a"), before)}, UnreachablePrimary, []string{"c"}},
		{"a lost read is news whenever it was made", []SiteInput{site("b", ReadOnly, lostIO("a"), before)}, PrimaryDown, nil},
		{"the next probe found it lost", []SiteInput{site("b", ReadOnly, lostIO("a"), after), site("c", ReadOnly, lostIO("a"), after)}, PrimaryDown, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Detect(group("a", append([]SiteInput{primary}, tc.replicas...)...))
			if r.Code != tc.want || !slices.Equal(r.Pending, tc.pending) {
				t.Errorf("Detect = %s pending %v, want %s pending %v", r.Code, r.Pending, tc.want, tc.pending)
			}
		})
	}
	// Without the time the primary was given up (an older caller) a
	// streaming witness is streaming, as before.
	if got := Detect(group("a", site("a", Unreachable), site("b", ReadOnly, follows("a"), before))).Code; got != UnreachablePrimary {
		t.Errorf("no StateSince: Detect = %s, want %s", got, UnreachablePrimary)
	}
}
