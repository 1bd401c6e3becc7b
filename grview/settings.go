package grview

import (
	"fmt"
	"strings"
	"time"
)

// Settings are the Group Replication variables of one member that decide
// whether following the group is safe (mysqlctl.GroupStatus.Settings).
type Settings struct {
	// SinglePrimaryMode is group_replication_single_primary_mode.
	SinglePrimaryMode bool
	// Consistency is group_replication_consistency (upper case).
	Consistency string
	// ExitStateAction is group_replication_exit_state_action (upper case).
	ExitStateAction string
	// AutoRejoinTries is group_replication_autorejoin_tries.
	AutoRejoinTries int
	// UnreachableMajorityTimeout is
	// group_replication_unreachable_majority_timeout (0: wait for ever).
	UnreachableMajorityTimeout time.Duration
	// MemberExpelTimeout is group_replication_member_expel_timeout.
	MemberExpelTimeout time.Duration
}

// SafeConsistencies are the group_replication_consistency levels with
// which a newly elected primary applies its backlog before it takes new
// transactions (BEFORE_ON_PRIMARY_FAILOVER or stronger).
var SafeConsistencies = []string{"BEFORE_ON_PRIMARY_FAILOVER", "BEFORE", "AFTER", "BEFORE_AND_AFTER"}

// SafeExitStateActions are the group_replication_exit_state_action values
// that keep a member that left the group from taking writes while staying
// up for a human to look at.
var SafeExitStateActions = []string{"READ_ONLY", "OFFLINE_MODE"}

// Unsafe lists, one line each, the settings failoverd's following of the
// group relies on that s does not hold, naming the variable, its value and
// the recommended one; nil when all hold. configs.GroupReplicationSettings
// gives the same recommendations as my.cnf lines.
func (s Settings) Unsafe() []string {
	var out []string
	if !s.SinglePrimaryMode {
		out = append(out, "group_replication_single_primary_mode is OFF: in multi-primary mode every member takes writes and there is no primary to follow; set it ON")
	}
	if !contains(SafeConsistencies, s.Consistency) {
		out = append(out, fmt.Sprintf("group_replication_consistency is %s: a new primary takes writes and serves reads before it applied what the old one committed; "+
			"set BEFORE_ON_PRIMARY_FAILOVER (or %s)", orUnset(s.Consistency), strings.Join(SafeConsistencies[1:], ", ")))
	}
	if !contains(SafeExitStateActions, s.ExitStateAction) {
		out = append(out, fmt.Sprintf("group_replication_exit_state_action is %s: set READ_ONLY or OFFLINE_MODE, so a member that leaves the group stays up and takes no writes",
			orUnset(s.ExitStateAction)))
	}
	if s.AutoRejoinTries < 1 {
		out = append(out, "group_replication_autorejoin_tries is 0: a member expelled by a short network fault stays out until a human restarts Group Replication; set 3")
	}
	if s.UnreachableMajorityTimeout <= 0 {
		out = append(out, "group_replication_unreachable_majority_timeout is 0: a member cut off in a minority waits for ever, holding its clients' commits; "+
			"set a few seconds above group_replication_member_expel_timeout, e.g. 10")
	}
	return out
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if strings.EqualFold(x, v) {
			return true
		}
	}
	return false
}

func orUnset(v string) string {
	if v == "" {
		return "unset"
	}
	return v
}
