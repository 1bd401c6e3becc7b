// Package grview cross-validates what the members of a MySQL Group
// Replication group (single-primary) report about it, and computes the
// group's verdict: its current view, its primary, its members per state and
// whether it has quorum. It is pure: no I/O, no goroutines, no clock (the
// caller passes the time); the state it keeps between rounds is passed in
// and returned (State), never hidden.
//
// The group elects its primary itself (Paxos); failoverd only follows. What
// it must not do is follow a member that is wrong: one cut off from the
// others still names the old primary until its failure detector fires, one
// in a minority partition keeps its last view, a member of a second group
// bootstrapped by mistake names its own primary. So no single report is
// trusted: a view counts only when a majority of the group's members, each
// ONLINE and each seeing a majority of its own view reachable, report that
// same view (group name, view id and primary). See Evaluate for the rules
// and docs/design.md, "Group Replication groups".
//
// mysqlctl.GroupStatus reads one member's report in one statement
// (GroupStatus.Report turns it into a Report).
package grview

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/failoverd/failoverd/gtid"
)

// MemberState is a member's MEMBER_STATE in
// performance_schema.replication_group_members.
type MemberState string

// Member states. Other values are kept verbatim and count as not reachable.
const (
	// StateOnline: a full member, in the view, applying the group's
	// transactions.
	StateOnline MemberState = "ONLINE"
	// StateRecovering: joining; in the view and taking part in the group's
	// consensus, still copying what it missed (distributed recovery).
	StateRecovering MemberState = "RECOVERING"
	// StateUnreachable: in the view, but the reporting member's failure
	// detector lost it; it is expelled after group_replication_member_expel_timeout.
	StateUnreachable MemberState = "UNREACHABLE"
	// StateError: the member left the group on an error (seen only in its
	// own table).
	StateError MemberState = "ERROR"
	// StateOffline: Group Replication is not running on the member (seen
	// only in its own table).
	StateOffline MemberState = "OFFLINE"
)

// Reachable reports whether a member in this state takes part in the
// group's consensus, so counts towards its majority: ONLINE and RECOVERING.
func (s MemberState) Reachable() bool { return s == StateOnline || s == StateRecovering }

// Role is a member's MEMBER_ROLE.
type Role string

// Member roles.
const (
	RolePrimary   Role = "PRIMARY"
	RoleSecondary Role = "SECONDARY"
)

// Member is one row of performance_schema.replication_group_members as a
// member reports it, with the group's transaction queues for that member
// from performance_schema.replication_group_member_stats.
type Member struct {
	// ID is MEMBER_ID, the member's server_uuid.
	ID string
	// Host and Port are MEMBER_HOST and MEMBER_PORT: the member's SQL
	// address as it advertises it (report_host, else its hostname), not its
	// group communication address (group_replication_local_address).
	Host string
	Port int
	// State and Role are MEMBER_STATE and MEMBER_ROLE.
	State MemberState
	Role  Role
	// Version is MEMBER_VERSION (e.g. 9.7.4).
	Version string
	// CertifyQueue is COUNT_TRANSACTIONS_IN_QUEUE (waiting for
	// certification) and ApplierQueue COUNT_TRANSACTIONS_REMOTE_IN_APPLIER_QUEUE
	// (certified, not yet applied): the member's backlog. 0 when unknown.
	CertifyQueue, ApplierQueue int64
}

// Addr returns Host:Port.
func (m Member) Addr() string { return net.JoinHostPort(m.Host, strconv.Itoa(m.Port)) }

// Report is what one member says about the group, read from it in one
// statement (mysqlctl.GroupStatus.Report).
type Report struct {
	// Site is the configured site the report was read from.
	Site string
	// Self is the member's own server_uuid.
	Self string
	// GroupName is group_replication_group_name ("" when unset).
	GroupName string
	// ViewID is the member's current view id (VIEW_ID in
	// replication_group_member_stats; "" when it is in no group).
	ViewID string
	// SinglePrimary is group_replication_single_primary_mode.
	SinglePrimary bool
	// Members is the member's replication_group_members table: the whole
	// view while it is in the group, only itself (OFFLINE or ERROR)
	// otherwise.
	Members []Member
	// Executed is the member's gtid_executed (for recovery decisions).
	Executed gtid.Set
}

// SelfMember returns the reporting member's own row.
func (r Report) SelfMember() (Member, bool) {
	for _, m := range r.Members {
		if m.ID == r.Self && r.Self != "" {
			return m, true
		}
	}
	return Member{}, false
}

// Quorate reports whether the member's own view has a majority of its
// members reachable (ONLINE or RECOVERING): the group's own quorum rule as
// this member sees it. A member outside any group (OFFLINE, ERROR) has no
// quorate view.
func (r Report) Quorate() bool {
	self, ok := r.SelfMember()
	if !ok || !self.State.Reachable() {
		return false
	}
	reachable := 0
	for _, m := range r.Members {
		if m.State.Reachable() {
			reachable++
		}
	}
	return 2*reachable > len(r.Members)
}

// Primary returns the view's primary as this member reports it: the one
// ONLINE member with role PRIMARY. None when there is no such member, or
// several (multi-primary mode).
func (r Report) Primary() (Member, bool) {
	var p Member
	n := 0
	for _, m := range r.Members {
		if m.Role == RolePrimary && m.State == StateOnline {
			p, n = m, n+1
		}
	}
	return p, n == 1
}

// Counts returns how many members of the report's table are in each state.
func (r Report) Counts() map[MemberState]int {
	c := map[MemberState]int{}
	for _, m := range r.Members {
		c[m.State]++
	}
	return c
}

// SameServer reports whether two host:port addresses name the same server
// as far as their text tells: host case-insensitive, localhost as
// 127.0.0.1, IP addresses in canonical form, the port as a number. Aliases
// (a DNS name and its IP) do not match.
func SameServer(a, b string) bool {
	ka, oka := ServerKey(a)
	kb, okb := ServerKey(b)
	return oka && okb && ka == kb
}

// ServerKey is the server a host:port address names, for comparing
// addresses (SameServer, and configs' one-server-per-site rule): the host
// in lower case, localhost as 127.0.0.1, an IP address in its canonical
// form, the port as a number; false when addr is not host:port.
func ServerKey(addr string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || host == "" {
		return "", false
	}
	host = strings.ToLower(host)
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	return net.JoinHostPort(host, strconv.Itoa(n)), true
}
