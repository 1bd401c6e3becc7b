package mysqlctl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/failoverd/failoverd/grview"
	"github.com/failoverd/failoverd/gtid"
)

// GroupStatus is one member's view of its MySQL Group Replication group,
// read in one statement (Instance.GroupStatus). It is what this member
// says: package grview cross-checks the reports of every member.
type GroupStatus struct {
	// ServerUUID is the member's own @@server_uuid (its MEMBER_ID).
	ServerUUID string
	// GroupName is group_replication_group_name ("" when unset).
	GroupName string
	// ViewID is the member's current view id ("" when it is in no group).
	ViewID string
	// LocalAddress is group_replication_local_address: the member's group
	// communication address, which ForceMembers lists (not its SQL address).
	LocalAddress string
	// Members is the member's replication_group_members table, ordered by
	// member id: the whole view while the member is in the group, itself
	// alone (OFFLINE, ERROR) otherwise.
	Members []grview.Member
	// Settings are the member's Group Replication settings that following
	// the group relies on (grview.Settings.Unsafe checks them).
	Settings grview.Settings
	// Executed is @@gtid_executed; ExecutedRaw its text.
	Executed    gtid.Set
	ExecutedRaw string
	// ReadOnly and SuperReadOnly are the server's: the group keeps
	// super_read_only on every member but the primary.
	ReadOnly, SuperReadOnly bool
}

// Self returns the member's own row of its member table.
func (g GroupStatus) Self() (grview.Member, bool) { return g.Report("").SelfMember() }

// HasQuorum reports whether the member is ONLINE or RECOVERING in a view
// whose members are in majority reachable (ONLINE or RECOVERING, not
// UNREACHABLE): the group's quorum rule as this member sees it.
func (g GroupStatus) HasQuorum() bool { return g.Report("").Quorate() }

// Primary returns the view's single ONLINE primary as this member reports it.
func (g GroupStatus) Primary() (grview.Member, bool) { return g.Report("").Primary() }

// Report is this status as site's report for grview.Evaluate.
func (g GroupStatus) Report(site string) grview.Report {
	return grview.Report{Site: site, Self: g.ServerUUID, GroupName: g.GroupName, ViewID: g.ViewID,
		SinglePrimary: g.Settings.SinglePrimaryMode, Members: g.Members, Executed: g.Executed}
}

// ErrNotElected: after SetAsPrimary returned, the member's view does not
// name the requested member primary.
var ErrNotElected = errors.New("mysqlctl: the group did not elect the requested member")

// maxSetAsPrimaryWait is the largest running-transactions timeout
// group_replication_set_as_primary takes (seconds).
const maxSetAsPrimaryWait = 3600

// setAsPrimaryMargin bounds SetAsPrimary beyond its timeout: the election
// itself, after the old primary's transactions finished or were rolled back.
const setAsPrimaryMargin = 10 * time.Second

// uuidRE is a server_uuid.
var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// GroupStatus reads the member's Group Replication state in one statement:
// its replication_group_members table with each member's queues, its own
// view id, group name, settings, gtid_executed and read-only state. Without
// the group_replication plugin (or on MariaDB) it returns an error wrapping
// ErrNotSupported. A member outside any group is no error: its table holds
// itself alone, OFFLINE or ERROR, and HasQuorum is false.
func (i *Instance) GroupStatus(ctx context.Context) (GroupStatus, error) {
	const op = "group status"
	if i.d.groupStatusQuery == "" {
		return GroupStatus{}, i.fail(op, "", fmt.Errorf("%w: %s", ErrNotSupported, i.d.groupUnsupported))
	}
	rs, err := i.q.query(ctx, i.d.groupStatusQuery)
	if err != nil {
		return GroupStatus{}, i.fail(op, "read", err)
	}
	g, err := parseGroupStatus(rs)
	if err != nil {
		return GroupStatus{}, i.fail(op, "parse", err)
	}
	return g, nil
}

// parseGroupStatus reads the rows of groupStatusQuery.
func parseGroupStatus(rs *resultSet) (GroupStatus, error) {
	if len(rs.rows) == 0 {
		return GroupStatus{}, errors.New("no row")
	}
	first := rs.row(0)
	if first.integer("gr_plugin") == 0 {
		return GroupStatus{}, fmt.Errorf("%w: the group_replication plugin is not loaded (plugin-load-add=group_replication.so)", ErrNotSupported)
	}
	kv := pairs(first.str("gr_variables"))
	g := GroupStatus{
		ServerUUID:    first.str("server_uuid"),
		ViewID:        first.str("view_id"),
		GroupName:     kv["group_replication_group_name"],
		LocalAddress:  kv["group_replication_local_address"],
		ReadOnly:      first.boolean("read_only"),
		SuperReadOnly: first.boolean("super_read_only"),
		ExecutedRaw:   first.str("gtid_executed"),
		Settings: grview.Settings{
			SinglePrimaryMode:          parseBool(kv["group_replication_single_primary_mode"]),
			Consistency:                strings.ToUpper(strings.TrimSpace(kv["group_replication_consistency"])),
			ExitStateAction:            strings.ToUpper(strings.TrimSpace(kv["group_replication_exit_state_action"])),
			AutoRejoinTries:            atoi(kv["group_replication_autorejoin_tries"]),
			UnreachableMajorityTimeout: time.Duration(atoi(kv["group_replication_unreachable_majority_timeout"])) * time.Second,
			MemberExpelTimeout:         time.Duration(atoi(kv["group_replication_member_expel_timeout"])) * time.Second,
		},
	}
	var err error
	if g.Executed, err = gtid.Parse(gtid.MySQL, g.ExecutedRaw); err != nil {
		return GroupStatus{}, fmt.Errorf("gtid_executed: %w", err)
	}
	for n := range rs.rows {
		r := rs.row(n)
		state, _ := r.get("member_state")
		if !state.Valid { // the LEFT JOIN's row of an empty member table
			continue
		}
		id := r.str("member_id")
		if id == "" {
			// A member whose Group Replication never started lists itself
			// without an id.
			id = g.ServerUUID
		}
		g.Members = append(g.Members, grview.Member{
			ID: id, Host: r.str("member_host"), Port: atoi(r.str("member_port")),
			State: grview.MemberState(strings.ToUpper(state.String)), Role: grview.Role(strings.ToUpper(r.str("member_role"))),
			Version: r.str("member_version"), CertifyQueue: r.integer("certify_queue"), ApplierQueue: r.integer("applier_queue"),
		})
	}
	return g, nil
}

func atoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

// SetAsPrimary asks the group to elect the member uuid (a server_uuid) its
// primary: SELECT group_replication_set_as_primary(uuid, timeout), run on
// this member (any ONLINE member of the group). The old primary's running
// transactions get timeout (whole seconds, at most 3600; MySQL 8.0.29+) to
// finish before they are rolled back; the whole call, election included,
// is bounded by timeout plus 10 s, after which the error wraps
// context.DeadlineExceeded and the outcome is unknown: read GroupStatus.
// The member's view is read back: ErrNotElected when it does not name uuid
// primary. Electing the current primary is a no-op. It decides nothing:
// whether uuid is a safe choice is the caller's rule. Needs the
// GROUP_REPLICATION_ADMIN privilege; ErrNotSupported on MariaDB.
func (i *Instance) SetAsPrimary(ctx context.Context, uuid string, timeout time.Duration) error {
	const op = "set as primary"
	if i.d.setAsPrimary == nil {
		return i.fail(op, "", fmt.Errorf("%w: %s", ErrNotSupported, i.d.groupUnsupported))
	}
	if !uuidRE.MatchString(uuid) || timeout <= 0 {
		return i.fail(op, "check arguments", fmt.Errorf("%w: member %q is no server_uuid or timeout %v is not positive", ErrInvalidArgument, uuid, timeout))
	}
	stmt, err := i.d.setAsPrimary(uuid, timeout)
	if err != nil {
		return i.fail(op, "build statement", err)
	}
	// The long session has no read timeout: this deadline is the bound.
	ctx, cancel := context.WithTimeout(ctx, timeout+setAsPrimaryMargin)
	defer cancel()
	if g, err := i.GroupStatus(ctx); err == nil {
		if p, ok := g.Primary(); ok && strings.EqualFold(p.ID, uuid) {
			return nil // already the primary: the call would fail
		}
	}
	q, closeSession, err := i.openLong(ctx)
	if err != nil {
		return i.fail(op, "open session", err)
	}
	defer func() { _ = closeSession() }()
	rs, err := q.query(ctx, stmt)
	if err != nil {
		return i.fail(op, "elect", err)
	}
	result := ""
	if len(rs.rows) > 0 {
		result = rs.row(0).str("result")
	}
	g, err := i.GroupStatus(ctx)
	if err != nil {
		return i.fail(op, "read back", err)
	}
	// A call that returned without electing uuid must not be reported done.
	if p, ok := g.Primary(); !ok || !strings.EqualFold(p.ID, uuid) {
		return i.fail(op, "read back", fmt.Errorf("%w: %s asked, the member's view names %q (%s)", ErrNotElected, uuid, p.ID, result))
	}
	i.log.Info("mysqlctl: group primary set", "addr", i.addr, "primary", uuid, "result", result)
	return nil
}

// ForceMembers unblocks a group that lost its majority by forcing its
// membership to the members at addrs (their group_replication_local_address,
// host:port each): SET GLOBAL group_replication_force_members, run on one of
// them, which returns once the forced view is installed; then it clears the
// variable again (MySQL wants it empty afterwards, and START
// GROUP_REPLICATION refuses it set). The server refuses while the group
// still has a majority. Every member left out must be stopped first, or the
// group splits: choosing the survivors and proving them safe is the
// caller's rule, not this primitive's. The call is bounded by timeout (a
// session without read timeout); needs SYSTEM_VARIABLES_ADMIN and
// GROUP_REPLICATION_ADMIN. ErrNotSupported on MariaDB.
func (i *Instance) ForceMembers(ctx context.Context, addrs []string, timeout time.Duration) error {
	const op = "force members"
	if i.d.forceMembers == nil {
		return i.fail(op, "", fmt.Errorf("%w: %s", ErrNotSupported, i.d.groupUnsupported))
	}
	if len(addrs) == 0 || timeout <= 0 {
		return i.fail(op, "check arguments", fmt.Errorf("%w: no member addresses, or timeout %v is not positive", ErrInvalidArgument, timeout))
	}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		n, perr := strconv.Atoi(port)
		// A comma or a space would split one address into two members.
		if err != nil || perr != nil || host == "" || n < 1 || n > 65535 || strings.ContainsAny(a, ", ") {
			return i.fail(op, "check arguments", fmt.Errorf("%w: %q is not host:port", ErrInvalidArgument, a))
		}
	}
	set, err := i.d.forceMembers(strings.Join(addrs, ","))
	if err != nil {
		return i.fail(op, "build statement", err)
	}
	unset, err := i.d.forceMembers("")
	if err != nil {
		return i.fail(op, "build statement", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	q, closeSession, err := i.openLong(ctx)
	if err != nil {
		return i.fail(op, "open session", err)
	}
	defer func() { _ = closeSession() }()
	if err := execGroupOption(ctx, q, set); err != nil {
		return i.fail(op, "force", err)
	}
	i.log.Warn("mysqlctl: group membership forced", "addr", i.addr, "members", strings.Join(addrs, ","))
	if err := execGroupOption(ctx, q, unset); err != nil {
		return i.fail(op, "clear group_replication_force_members", err)
	}
	return nil
}

// groupOptionRetry is how long execGroupOption waits before setting a
// busy Group Replication option again.
const groupOptionRetry = 50 * time.Millisecond

// execGroupOption runs stmt, a SET GLOBAL of a group_replication_*
// variable, again every groupOptionRetry while the server answers that
// the plugin is busy (ER_UNABLE_TO_SET_OPTION: another session holds the
// plugin's lock a moment, e.g. the group reconfiguring after a forced
// membership, or a concurrent read of its performance_schema tables), until
// ctx ends. Nothing is set by a refused attempt, so repeating it is safe;
// without it, the clear of group_replication_force_members could fail
// right after the force and leave the forced list set.
func execGroupOption(ctx context.Context, q querier, stmt string) error {
	for {
		err := q.exec(ctx, stmt)
		if errNumber(err) != errGroupOptionBusy {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-time.After(groupOptionRetry):
		}
	}
}

// ErrGroupRunning: BootstrapGroup was asked of a member that is in a group
// (ONLINE, RECOVERING or UNREACHABLE in a view): bootstrapping it would
// start a second group beside the running one.
var ErrGroupRunning = errors.New("mysqlctl: the member is in a group")

// groupResetTimeout bounds resetting group_replication_bootstrap_group
// after a failed or timed-out bootstrap.
const groupResetTimeout = 10 * time.Second

// BootstrapGroup starts a new group on this member after every member
// stopped (a total outage): it reads the member's own state first and
// refuses (ErrGroupRunning) when the member is in a group; then SET GLOBAL
// group_replication_bootstrap_group = ON, START GROUP_REPLICATION, and SET
// GLOBAL group_replication_bootstrap_group = OFF, which always runs, even
// after a failed start or past timeout (a member left with the variable ON
// bootstraps a second group at its next start). The group it starts has
// this member alone, primary, with its gtid_executed; the others join it
// with StartGroupReplication. Bootstrapping a group that still runs
// elsewhere splits it: proving every member stopped and this member's
// GTID set the largest is the caller's rule. Bounded by timeout (a session
// without read timeout); needs SYSTEM_VARIABLES_ADMIN and
// GROUP_REPLICATION_ADMIN. ErrNotSupported on MariaDB.
func (i *Instance) BootstrapGroup(ctx context.Context, timeout time.Duration) (err error) {
	const op = "bootstrap group"
	if i.d.groupBootstrapOn == "" {
		return i.fail(op, "", fmt.Errorf("%w: %s", ErrNotSupported, i.d.groupUnsupported))
	}
	if timeout <= 0 {
		return i.fail(op, "check arguments", fmt.Errorf("%w: timeout %v is not positive", ErrInvalidArgument, timeout))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	g, err := i.GroupStatus(ctx)
	if err != nil {
		return i.fail(op, "read state", err)
	}
	// Prevents a second group: a member in a view already is in one.
	if self, ok := g.Self(); ok && g.ViewID != "" && self.State != grview.StateOffline && self.State != grview.StateError {
		return i.fail(op, "read state", fmt.Errorf("%w: %s in view %s", ErrGroupRunning, self.State, g.ViewID))
	}
	q, closeSession, err := i.openLong(ctx)
	if err != nil {
		return i.fail(op, "open session", err)
	}
	defer func() { _ = closeSession() }()
	if err := execGroupOption(ctx, q, i.d.groupBootstrapOn); err != nil {
		return i.fail(op, "set bootstrap_group", err)
	}
	defer func() {
		// Prevents a second bootstrap at the member's next start: the
		// variable goes back OFF whatever happened, on a fresh deadline
		// (and on the pool when the session broke).
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), groupResetTimeout)
		defer rcancel()
		rerr := execGroupOption(rctx, q, i.d.groupBootstrapOff)
		if rerr != nil {
			rerr = execGroupOption(rctx, i.q, i.d.groupBootstrapOff)
		}
		if rerr != nil {
			err = errors.Join(err, i.fail(op, "reset bootstrap_group", rerr))
		}
	}()
	if err := q.exec(ctx, i.d.groupStart); err != nil {
		return i.fail(op, "start", err)
	}
	i.log.Warn("mysqlctl: group bootstrapped", "addr", i.addr)
	return nil
}

// StartGroupReplication runs START GROUP_REPLICATION on this member, which
// joins the group its group_replication_group_seeds reach (and, with
// group_replication_bootstrap_group OFF, never starts one); it returns once
// the member is in the group's view (RECOVERING or ONLINE). Bounded by
// timeout (a session without read timeout); needs GROUP_REPLICATION_ADMIN.
// ErrNotSupported on MariaDB.
func (i *Instance) StartGroupReplication(ctx context.Context, timeout time.Duration) error {
	const op = "start group replication"
	if i.d.groupStart == "" {
		return i.fail(op, "", fmt.Errorf("%w: %s", ErrNotSupported, i.d.groupUnsupported))
	}
	if timeout <= 0 {
		return i.fail(op, "check arguments", fmt.Errorf("%w: timeout %v is not positive", ErrInvalidArgument, timeout))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	q, closeSession, err := i.openLong(ctx)
	if err != nil {
		return i.fail(op, "open session", err)
	}
	defer func() { _ = closeSession() }()
	if err := q.exec(ctx, i.d.groupStart); err != nil {
		return i.fail(op, "start", err)
	}
	i.log.Info("mysqlctl: group replication started", "addr", i.addr)
	return nil
}
