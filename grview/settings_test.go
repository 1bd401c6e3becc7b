package grview

import (
	"strings"
	"testing"
	"time"
)

// Recommended is what configs.GroupReplicationSettings advises.
var recommended = Settings{SinglePrimaryMode: true, Consistency: "BEFORE_ON_PRIMARY_FAILOVER", ExitStateAction: "OFFLINE_MODE",
	AutoRejoinTries: 3, UnreachableMajorityTimeout: 10 * time.Second, MemberExpelTimeout: 5 * time.Second}

// Each setting following the group relies on is reported by name when it
// does not hold, and the recommended ones (and the stronger consistency
// levels) pass.
func TestSettingsUnsafeNamesEachVariable(t *testing.T) {
	if u := recommended.Unsafe(); u != nil {
		t.Fatalf("recommended settings reported unsafe: %q", u)
	}
	for _, c := range SafeConsistencies {
		s := recommended
		s.Consistency = c
		if u := s.Unsafe(); u != nil {
			t.Errorf("consistency %s reported unsafe: %q", c, u)
		}
	}
	for _, tc := range []struct {
		name string
		mod  func(*Settings)
		want string
	}{
		{"multi-primary", func(s *Settings) { s.SinglePrimaryMode = false }, "group_replication_single_primary_mode is OFF"},
		{"eventual consistency", func(s *Settings) { s.Consistency = "EVENTUAL" }, "group_replication_consistency is EVENTUAL"},
		{"abort server", func(s *Settings) { s.ExitStateAction = "ABORT_SERVER" }, "group_replication_exit_state_action is ABORT_SERVER"},
		{"no auto-rejoin", func(s *Settings) { s.AutoRejoinTries = 0 }, "group_replication_autorejoin_tries is 0"},
		{"waits for ever in a minority", func(s *Settings) { s.UnreachableMajorityTimeout = 0 }, "group_replication_unreachable_majority_timeout is 0"},
	} {
		s := recommended
		tc.mod(&s)
		u := s.Unsafe()
		if len(u) != 1 || !strings.Contains(u[0], tc.want) {
			t.Errorf("%s: Unsafe() = %q, want one line containing %q", tc.name, u, tc.want)
		}
	}
}
