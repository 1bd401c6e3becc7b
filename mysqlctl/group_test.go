package mysqlctl

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/grview"
)

// The exact Group Replication statements, spelled out once so a change in
// any of them fails a test.
const (
	mysqlGroupStatus = "SELECT @@GLOBAL.server_uuid AS server_uuid, @@GLOBAL.read_only AS read_only, " +
		"@@GLOBAL.super_read_only AS super_read_only, @@GLOBAL.gtid_executed AS gtid_executed, " +
		"(SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'group_replication' AND PLUGIN_STATUS = 'ACTIVE') AS gr_plugin, " +
		"(SELECT GROUP_CONCAT(CONCAT(LOWER(VARIABLE_NAME), '=', VARIABLE_VALUE)) FROM performance_schema.global_variables " +
		"WHERE VARIABLE_NAME IN ('group_replication_group_name', 'group_replication_single_primary_mode', 'group_replication_local_address', " +
		"'group_replication_consistency', 'group_replication_exit_state_action', 'group_replication_autorejoin_tries', " +
		"'group_replication_unreachable_majority_timeout', 'group_replication_member_expel_timeout')) AS gr_variables, " +
		"(SELECT VIEW_ID FROM performance_schema.replication_group_member_stats WHERE MEMBER_ID = @@GLOBAL.server_uuid LIMIT 1) AS view_id, " +
		"m.MEMBER_ID AS member_id, m.MEMBER_HOST AS member_host, m.MEMBER_PORT AS member_port, m.MEMBER_STATE AS member_state, " +
		"m.MEMBER_ROLE AS member_role, m.MEMBER_VERSION AS member_version, " +
		"s.COUNT_TRANSACTIONS_IN_QUEUE AS certify_queue, s.COUNT_TRANSACTIONS_REMOTE_IN_APPLIER_QUEUE AS applier_queue " +
		"FROM (SELECT 1 AS one) AS one_row " +
		"LEFT JOIN performance_schema.replication_group_members AS m ON TRUE " +
		"LEFT JOIN performance_schema.replication_group_member_stats AS s ON s.MEMBER_ID = m.MEMBER_ID " +
		"ORDER BY m.MEMBER_ID"

	uuidC     = "5f0c1d2e-3a4b-11ef-9c8d-0242ac120003"
	groupName = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	grVars    = "group_replication_group_name=" + groupName + ",group_replication_single_primary_mode=ON," +
		"group_replication_local_address=127.0.0.1:33061,group_replication_consistency=BEFORE_ON_PRIMARY_FAILOVER," +
		"group_replication_exit_state_action=OFFLINE_MODE,group_replication_autorejoin_tries=3," +
		"group_replication_unreachable_majority_timeout=10,group_replication_member_expel_timeout=5"
)

// groupMember is one member row: id, port, state, role.
type groupMember struct{ id, port, state, role string }

// groupRows answers mysqlGroupStatus as the server self (uuidA) in view
// with members and the plugin active; no members gives the one row of an
// empty member table.
func groupRows(self, view, vars string, members ...groupMember) fakeResponse {
	return groupRowsPlugin("1", self, view, vars, members...)
}

func groupRowsPlugin(plugin, self, view, vars string, members ...groupMember) fakeResponse {
	b := table("server_uuid", "read_only", "super_read_only", "gtid_executed", "gr_plugin", "gr_variables", "view_id",
		"member_id", "member_host", "member_port", "member_state", "member_role", "member_version", "certify_queue", "applier_queue")
	if len(members) == 0 {
		return b.row(self, "1", "1", "", plugin, vars, "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL").ok()
	}
	for _, m := range members {
		b = b.row(self, "0", "0", uuidA+":1-10", plugin, vars, view, m.id, "127.0.0.1", m.port, m.state, m.role, "9.7.4", "0", "2")
	}
	return b.ok()
}

var threeOnline = []groupMember{{uuidA, "3301", "ONLINE", "PRIMARY"}, {uuidB, "3302", "ONLINE", "SECONDARY"}, {uuidC, "3303", "ONLINE", "SECONDARY"}}

// GroupStatus sends one statement (one round trip) and reads every field
// of it: the member table with queues, the view id, the group's name and
// settings, the GTIDs and the read-only state.
func TestGroupStatusSQL(t *testing.T) {
	inst, db, _ := newFake(mysql84)
	db.on("SELECT @@GLOBAL.server_uuid", groupRows(uuidA, "17000000000000000:3", grVars, threeOnline...))
	g, err := inst.GroupStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(db.stmts, []string{mysqlGroupStatus}) {
		t.Fatalf("statements:\n got  %q\n want %q", db.stmts, []string{mysqlGroupStatus})
	}
	want := grview.Settings{SinglePrimaryMode: true, Consistency: "BEFORE_ON_PRIMARY_FAILOVER", ExitStateAction: "OFFLINE_MODE",
		AutoRejoinTries: 3, UnreachableMajorityTimeout: 10 * time.Second, MemberExpelTimeout: 5 * time.Second}
	if g.ServerUUID != uuidA || g.GroupName != groupName || g.ViewID != "17000000000000000:3" || g.LocalAddress != "127.0.0.1:33061" ||
		g.Settings != want || g.ReadOnly || g.SuperReadOnly || g.Executed.String() != uuidA+":1-10" {
		t.Fatalf("status %+v", g)
	}
	if len(g.Members) != 3 || g.Members[1] != (grview.Member{ID: uuidB, Host: "127.0.0.1", Port: 3302, State: grview.StateOnline,
		Role: grview.RoleSecondary, Version: "9.7.4", ApplierQueue: 2}) {
		t.Fatalf("members %+v", g.Members)
	}
	if p, ok := g.Primary(); !ok || p.ID != uuidA || !g.HasQuorum() {
		t.Fatalf("primary %v %t, quorum %t", p, ok, g.HasQuorum())
	}
	if r := g.Report("site0"); r.Site != "site0" || r.Self != uuidA || !r.SinglePrimary || len(r.Members) != 3 || r.ViewID != g.ViewID {
		t.Fatalf("report %+v", r)
	}
}

// hasQuorum comes from the member's own table: reachable (ONLINE or
// RECOVERING) members against the view's size; a member outside any group
// has none.
func TestGroupStatusHasQuorum(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []groupMember
		want    bool
		self    grview.MemberState
	}{
		{"all online", threeOnline, true, grview.StateOnline},
		{"one unreachable", []groupMember{threeOnline[0], threeOnline[1], {uuidC, "3303", "UNREACHABLE", "SECONDARY"}}, true, grview.StateOnline},
		{"cut off in a minority", []groupMember{threeOnline[0], {uuidB, "3302", "UNREACHABLE", "SECONDARY"}, {uuidC, "3303", "UNREACHABLE", "SECONDARY"}}, false, grview.StateOnline},
		{"recovering counts", []groupMember{threeOnline[0], {uuidB, "3302", "RECOVERING", "SECONDARY"}, {uuidC, "3303", "UNREACHABLE", "SECONDARY"}}, true, grview.StateOnline},
		// Group Replication stopped: the member lists itself alone, without an id.
		{"offline", []groupMember{{"", "3301", "OFFLINE", ""}}, false, grview.StateOffline},
		{"error", []groupMember{{uuidA, "3301", "ERROR", ""}}, false, grview.StateError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, db, _ := newFake(mysql84)
			db.on("SELECT @@GLOBAL.server_uuid", groupRows(uuidA, "v1", grVars, tc.members...))
			g, err := inst.GroupStatus(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			self, ok := g.Self()
			if g.HasQuorum() != tc.want || !ok || self.State != tc.self {
				t.Fatalf("HasQuorum %t (want %t), self %+v %t (want %s)", g.HasQuorum(), tc.want, self, ok, tc.self)
			}
		})
	}
}

// Without the plugin (not active, an empty member table; MySQL 8.4+ still
// has group_replication_consistency, seen on 9.7) or on MariaDB (which sends
// nothing) GroupStatus is ErrNotSupported.
func TestGroupStatusNotSupported(t *testing.T) {
	inst, db, _ := newFake(mysql84)
	db.on("SELECT @@GLOBAL.server_uuid", groupRowsPlugin("0", uuidA, "", "group_replication_consistency=BEFORE_ON_PRIMARY_FAILOVER"))
	if _, err := inst.GroupStatus(context.Background()); !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "group_replication.so") {
		t.Fatalf("without the plugin: %v, want ErrNotSupported naming the plugin", err)
	}
	inst, db, _ = newFake(mariadb)
	_, err := inst.GroupStatus(context.Background())
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "MariaDB") || len(db.stmts) != 0 {
		t.Fatalf("MariaDB: %v after %q, want ErrNotSupported and no statement", err, db.stmts)
	}
	for _, op := range []func(*Instance) error{
		func(i *Instance) error { return i.SetAsPrimary(context.Background(), uuidB, time.Second) },
		func(i *Instance) error { return i.ForceMembers(context.Background(), []string{"h:1"}, time.Second) },
	} {
		if err := op(inst); !errors.Is(err, ErrNotSupported) {
			t.Errorf("MariaDB group operation: %v, want ErrNotSupported", err)
		}
	}
}

// A status-only instance (a poller's prober) may send GroupStatus.
func TestStatusOnlyAllowsGroupStatus(t *testing.T) {
	if !statusOnlyAllowed(newDialect(mysql84))[mysqlGroupStatus] {
		t.Fatal("a status-only MySQL instance refuses GroupStatus")
	}
	if statusOnlyAllowed(newDialect(mariadb))[""] {
		t.Fatal("the empty statement is allowed on MariaDB")
	}
}

// SetAsPrimary reads the view, calls group_replication_set_as_primary with
// the running-transactions timeout in whole seconds (capped at 3600; no
// argument before MySQL 8.0.29), reads the view back, and is a no-op on
// the current primary.
func TestSetAsPrimarySQL(t *testing.T) {
	oldView := groupRows(uuidA, "v1", grVars, threeOnline...)
	newView := groupRows(uuidA, "v1", grVars, groupMember{uuidA, "3301", "ONLINE", "SECONDARY"}, groupMember{uuidB, "3302", "ONLINE", "PRIMARY"}, threeOnline[2])
	for _, tc := range []struct {
		name    string
		f       Flavor
		timeout time.Duration
		call    string
	}{
		{"9.x", mysql84, 1500 * time.Millisecond, "SELECT group_replication_set_as_primary('" + uuidB + "', 2) AS result"},
		{"capped", mysql84, 2 * time.Hour, "SELECT group_replication_set_as_primary('" + uuidB + "', 3600) AS result"},
		{"before 8.0.29", mysql25, time.Minute, "SELECT group_replication_set_as_primary('" + uuidB + "') AS result"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, db, _ := newFake(tc.f)
			db.on("SELECT @@GLOBAL.server_uuid", oldView, newView)
			db.on("SELECT group_replication_set_as_primary", table("result").row("Primary server switched to: "+uuidB).ok())
			if err := inst.SetAsPrimary(context.Background(), uuidB, tc.timeout); err != nil {
				t.Fatal(err)
			}
			if want := []string{mysqlGroupStatus, tc.call, mysqlGroupStatus}; !slices.Equal(db.stmts, want) {
				t.Fatalf("statements:\n got  %q\n want %q", db.stmts, want)
			}
		})
	}
	t.Run("already primary", func(t *testing.T) {
		inst, db, _ := newFake(mysql84)
		db.on("SELECT @@GLOBAL.server_uuid", oldView)
		if err := inst.SetAsPrimary(context.Background(), uuidA, time.Second); err != nil || len(db.stmts) != 1 {
			t.Fatalf("%v after %q, want nil after the one read", err, db.stmts)
		}
	})
	t.Run("not elected", func(t *testing.T) {
		inst, db, _ := newFake(mysql84)
		db.on("SELECT @@GLOBAL.server_uuid", oldView)
		if err := inst.SetAsPrimary(context.Background(), uuidB, time.Second); !errors.Is(err, ErrNotElected) || !strings.Contains(err.Error(), "read back") {
			t.Fatalf("%v, want ErrNotElected at read back", err)
		}
	})
	t.Run("refused by the group", func(t *testing.T) {
		inst, db, _ := newFake(mysql84)
		db.on("SELECT @@GLOBAL.server_uuid", oldView)
		db.on("SELECT group_replication_set_as_primary", fails(serverErr(3910, "The requested member is not ONLINE")))
		if err := inst.SetAsPrimary(context.Background(), uuidB, time.Second); err == nil || !strings.Contains(err.Error(), "elect: ") {
			t.Fatalf("%v, want the server's error at step elect", err)
		}
	})
	for _, bad := range []struct {
		uuid    string
		timeout time.Duration
	}{{"'); DROP TABLE x; --", time.Second}, {"", time.Second}, {uuidB, 0}} {
		inst, db, _ := newFake(mysql84)
		if err := inst.SetAsPrimary(context.Background(), bad.uuid, bad.timeout); !errors.Is(err, ErrInvalidArgument) || len(db.stmts) != 0 {
			t.Errorf("SetAsPrimary(%q, %v) = %v after %q, want ErrInvalidArgument and nothing sent", bad.uuid, bad.timeout, err, db.stmts)
		}
	}
}

// ForceMembers sets group_replication_force_members to the listed
// addresses and clears it once the forced view is in place, each set
// again while the plugin answers it is busy (ER_UNABLE_TO_SET_OPTION,
// nothing set); a failed force
// leaves nothing to clear; a list that could name other members is refused
// before anything is sent.
func TestForceMembersSQL(t *testing.T) {
	const (
		force = "SET GLOBAL group_replication_force_members = '10.0.0.1:33061,db-b.example:33061'"
		unset = "SET GLOBAL group_replication_force_members = ''"
	)
	inst, db, _ := newFake(mysql84)
	if err := inst.ForceMembers(context.Background(), []string{"10.0.0.1:33061", "db-b.example:33061"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if want := []string{force, unset}; !slices.Equal(db.stmts, want) {
		t.Fatalf("statements:\n got  %q\n want %q", db.stmts, want)
	}
	// The plugin busy a moment (its lock held elsewhere): set again.
	inst, db, _ = newFake(mysql84)
	busy := fails(serverErr(3724, "This option cannot be set while START or STOP GROUP_REPLICATION is ongoing or other Group Replication options are being set."))
	db.on(force, busy, fakeResponse{})
	db.on(unset, busy, busy, fakeResponse{})
	if err := inst.ForceMembers(context.Background(), []string{"10.0.0.1:33061", "db-b.example:33061"}, time.Minute); err != nil {
		t.Fatalf("ForceMembers with the plugin busy a moment: %v", err)
	}
	if want := []string{force, force, unset, unset, unset}; !slices.Equal(db.stmts, want) {
		t.Fatalf("statements with the plugin busy:\n got  %q\n want %q", db.stmts, want)
	}
	inst, db, _ = newFake(mysql84)
	db.on("SET GLOBAL group_replication_force_members = '10", fails(serverErr(1231, "majority of the members are reachable")))
	if err := inst.ForceMembers(context.Background(), []string{"10.0.0.1:33061", "db-b.example:33061"}, time.Minute); err == nil ||
		!strings.Contains(err.Error(), "force: ") || len(db.stmts) != 1 {
		t.Fatalf("%v after %q, want the error at step force and no clear", err, db.stmts)
	}
	for _, bad := range [][]string{nil, {"a:1,b:2"}, {"a:1 b:2"}, {"noport"}, {"a:0"}, {"a:1'"}} {
		inst, db, _ := newFake(mysql84)
		if err := inst.ForceMembers(context.Background(), bad, time.Minute); !errors.Is(err, ErrInvalidArgument) || len(db.stmts) != 0 {
			t.Errorf("ForceMembers(%q) = %v after %q, want ErrInvalidArgument and nothing sent", bad, err, db.stmts)
		}
	}
}

// BootstrapGroup reads the member's state, then sets bootstrap_group ON,
// starts Group Replication and sets it OFF again; OFF runs even when the
// start fails; a member in a view is refused before anything is written;
// MariaDB has no Group Replication.
func TestBootstrapGroupSQL(t *testing.T) {
	const (
		on    = "SET GLOBAL group_replication_bootstrap_group = ON"
		start = "START GROUP_REPLICATION"
		off   = "SET GLOBAL group_replication_bootstrap_group = OFF"
	)
	offline := groupRows(uuidA, "NULL", grVars, groupMember{uuidA, "3301", "OFFLINE", ""})
	inst, db, _ := newFake(mysql84)
	db.on("SELECT @@GLOBAL.server_uuid", offline)
	if err := inst.BootstrapGroup(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if want := []string{mysqlGroupStatus, on, start, off}; !slices.Equal(db.stmts, want) {
		t.Fatalf("statements:\n got  %q\n want %q", db.stmts, want)
	}
	t.Run("failed start still resets", func(t *testing.T) {
		inst, db, _ := newFake(mysql84)
		db.on("SELECT @@GLOBAL.server_uuid", offline)
		db.on(start, fails(serverErr(3092, "The server is not configured properly to be an active member of the group")))
		err := inst.BootstrapGroup(context.Background(), time.Minute)
		if err == nil || !strings.Contains(err.Error(), "start: ") {
			t.Fatalf("%v, want the server's error at step start", err)
		}
		if want := []string{mysqlGroupStatus, on, start, off}; !slices.Equal(db.stmts, want) {
			t.Fatalf("statements:\n got  %q\n want %q", db.stmts, want)
		}
	})
	t.Run("failed reset is reported", func(t *testing.T) {
		inst, db, _ := newFake(mysql84)
		db.on("SELECT @@GLOBAL.server_uuid", offline)
		db.on(off, fails(serverErr(2013, "Lost connection")))
		err := inst.BootstrapGroup(context.Background(), time.Minute)
		if err == nil || !strings.Contains(err.Error(), "reset bootstrap_group") {
			t.Fatalf("%v, want the reset's error", err)
		}
		// Once on the session, once more on the pool.
		if want := []string{mysqlGroupStatus, on, start, off, off}; !slices.Equal(db.stmts, want) {
			t.Fatalf("statements:\n got  %q\n want %q", db.stmts, want)
		}
	})
	t.Run("member in a group", func(t *testing.T) {
		inst, db, _ := newFake(mysql84)
		db.on("SELECT @@GLOBAL.server_uuid", groupRows(uuidA, "v1", grVars, threeOnline...))
		if err := inst.BootstrapGroup(context.Background(), time.Minute); !errors.Is(err, ErrGroupRunning) || len(db.stmts) != 1 {
			t.Fatalf("%v after %q, want ErrGroupRunning after the one read", err, db.stmts)
		}
	})
	t.Run("bad timeout", func(t *testing.T) {
		inst, db, _ := newFake(mysql84)
		if err := inst.BootstrapGroup(context.Background(), 0); !errors.Is(err, ErrInvalidArgument) || len(db.stmts) != 0 {
			t.Fatalf("%v after %q, want ErrInvalidArgument and nothing sent", err, db.stmts)
		}
	})
	t.Run("mariadb", func(t *testing.T) {
		inst, db, _ := newFake(mariadb)
		if err := inst.BootstrapGroup(context.Background(), time.Minute); !errors.Is(err, ErrNotSupported) || len(db.stmts) != 0 {
			t.Fatalf("%v after %q, want ErrNotSupported and nothing sent", err, db.stmts)
		}
		if err := inst.StartGroupReplication(context.Background(), time.Minute); !errors.Is(err, ErrNotSupported) || len(db.stmts) != 0 {
			t.Fatalf("%v after %q, want ErrNotSupported and nothing sent", err, db.stmts)
		}
	})
}

// StartGroupReplication sends START GROUP_REPLICATION alone (never the
// bootstrap variable: a joiner must not start a group of its own).
func TestStartGroupReplicationSQL(t *testing.T) {
	inst, db, _ := newFake(mysql84)
	if err := inst.StartGroupReplication(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if want := []string{"START GROUP_REPLICATION"}; !slices.Equal(db.stmts, want) {
		t.Fatalf("statements:\n got  %q\n want %q", db.stmts, want)
	}
	inst, db, _ = newFake(mysql84)
	db.on("START", fails(serverErr(3093, "START GROUP_REPLICATION command failed since the group is already running")))
	if err := inst.StartGroupReplication(context.Background(), time.Minute); err == nil || !strings.Contains(err.Error(), "start: ") {
		t.Fatalf("%v, want the server's error at step start", err)
	}
}
