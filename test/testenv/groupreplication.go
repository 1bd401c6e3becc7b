package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/failoverd/failoverd/configs"
)

// GroupReplication is a single-primary MySQL Group Replication group on
// 127.0.0.1 started by StartGroupReplication.
type GroupReplication struct {
	// Name is group_replication_group_name (a random UUID).
	Name string
	// Members are the MySQL servers, named member<i>. Members[0]
	// bootstrapped the group and is its first primary.
	Members []*Server
	// LocalAddresses[i] is Members[i]'s group_replication_local_address
	// (127.0.0.1:PORT): the addresses group_replication_force_members takes.
	LocalAddresses []string

	// isolated holds the links of the members started in a network
	// namespace of their own (GroupReplicationOptions.Isolated).
	isolated map[*Server]*memberLinks
}

// GroupReplicationOptions configures StartGroupReplicationWith.
type GroupReplicationOptions struct {
	// Isolated lists the members (indexes) started each in a network
	// namespace of its own, so CutOff can block them from the others
	// (which a proxy on the shared loopback cannot: the group's
	// communication listens on every address of its port and members dial
	// each other directly). Such a member's SQL port is linked to the same
	// 127.0.0.1 port outside (Addr is unchanged), and so is its group
	// communication port; inside, the other members' group communication
	// and SQL ports are linked to theirs outside. Needs root
	// (unshare(CLONE_NEWNET)); the start fails without it.
	Isolated []int
}

// memberLinks are an isolated member's links to and from the others (its
// SQL link, Server.sqlLink, is not among them: CutOff leaves it up).
type memberLinks struct {
	ns    *netns
	peers []*link
}

// groupReplicationStart bounds bringing a whole group up.
const groupReplicationStart = 3 * time.Minute

// StartGroupReplication starts n MySQL 9.7 servers (in parallel) as one
// single-primary Group Replication group: every member gets the settings
// `failoverd validate` recommends (configs.GroupReplicationSettings: the
// group_replication plugin, single-primary mode, consistency
// BEFORE_ON_PRIMARY_FAILOVER, exit state action OFFLINE_MODE, three
// auto-rejoin tries, a 10 s unreachable-majority timeout, bootstrap_group
// OFF), its own free group communication port on 127.0.0.1 (the seeds list
// every member), report_host 127.0.0.1 (so MEMBER_HOST:MEMBER_PORT is the
// member's Addr) and the recovery channel's credentials (ReplUser over TLS).
// Member 0 bootstraps the group, the others join one after the other; it
// returns once every member is ONLINE. Group Replication does not start on
// boot here (group_replication_start_on_boot=OFF, unlike the
// recommendation): a test that restarts a member runs START
// GROUP_REPLICATION itself (StartMember). MySQL only: Group Replication does
// not exist in MariaDB.
func StartGroupReplication(t T, n int) *GroupReplication {
	t.Helper()
	return StartGroupReplicationWith(t, n, GroupReplicationOptions{})
}

// StartGroupReplicationWith is StartGroupReplication with opts: members
// in network namespaces of their own, which CutOff can cut from the rest.
func StartGroupReplicationWith(t T, n int, opts GroupReplicationOptions) *GroupReplication {
	t.Helper()
	skipIfShort(t)
	if n < 1 || n > configs.MaxGroupReplicationMembers {
		t.Fatalf("testenv: StartGroupReplication: n must be 1 to %d, got %d", configs.MaxGroupReplicationMembers, n)
	}
	for _, i := range opts.Isolated {
		if i < 0 || i >= n {
			t.Fatalf("testenv: StartGroupReplication: GroupReplicationOptions.Isolated names member %d of %d", i, n)
		}
	}
	g, err := startGroupReplication(t, n, opts)
	if err != nil {
		t.Fatalf("testenv: start group replication: %v", err)
	}
	return g
}

func startGroupReplication(t T, n int, opts GroupReplicationOptions) (*GroupReplication, error) {
	g := &GroupReplication{Name: newUUID(), isolated: map[*Server]*memberLinks{}}
	namespaces := make([]*netns, n)
	for _, i := range opts.Isolated {
		if namespaces[i] != nil {
			continue
		}
		ns, err := newNetns(fmt.Sprintf("member%d", i))
		if err != nil {
			return nil, err
		}
		// Registered before the server's cleanup, so it runs after it:
		// the namespace's thread outlives the member (its Pdeathsig).
		t.Cleanup(ns.close)
		namespaces[i] = ns
	}
	seen := map[int]bool{}
	for len(g.LocalAddresses) < n {
		port, err := pickPort()
		if err != nil {
			return nil, err
		}
		if !seen[port] {
			seen[port] = true
			g.LocalAddresses = append(g.LocalAddresses, fmt.Sprintf("127.0.0.1:%d", port))
		}
	}
	members, err := startServers(t, n, func(i int) ServerOptions {
		return ServerOptions{Engine: MySQL, Name: fmt.Sprintf("member%d", i), ExtraArgs: groupReplicationArgs(g.Name, g.LocalAddresses[i], g.LocalAddresses),
			netns: namespaces[i]}
	})
	if err != nil {
		return nil, err
	}
	g.Members = members
	for i, ns := range namespaces {
		if ns != nil {
			if err := g.linkIsolated(t, i, ns); err != nil {
				return nil, err
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupReplicationStart)
	defer cancel()
	for i, m := range members {
		db, err := m.adminPool()
		if err != nil {
			return nil, err
		}
		stmts := []string{fmt.Sprintf("CHANGE REPLICATION SOURCE TO SOURCE_USER=%s, SOURCE_PASSWORD=%s FOR CHANNEL 'group_replication_recovery'",
			sqlQuote(ReplUser), sqlQuote(ReplPassword))}
		if i == 0 {
			stmts = append(stmts, "SET GLOBAL group_replication_bootstrap_group=ON", "START GROUP_REPLICATION", "SET GLOBAL group_replication_bootstrap_group=OFF")
		} else {
			stmts = append(stmts, "START GROUP_REPLICATION")
		}
		for _, q := range stmts {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return nil, fmt.Errorf("%s: %s: %w\n--- tail of %s ---\n%s", m.Name, q, err, m.errLog, tailFile(m.errLog, 20))
			}
		}
		// One joiner at a time: members joining together slow each other's
		// distributed recovery.
		if err := g.waitOnline(ctx, m, i+1); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// linkIsolated links member i, in ns, with the others: its group
// communication port from outside, and inside, every other member's group
// communication port (the group's traffic) and SQL port (distributed
// recovery's donor connections) to the same ports outside.
func (g *GroupReplication) linkIsolated(t T, i int, ns *netns) error {
	ml := &memberLinks{ns: ns}
	g.isolated[g.Members[i]] = ml
	add := func(name string, l net.Listener, dial func() (net.Conn, error)) {
		k := newLink(name, l, dial)
		t.Cleanup(k.close)
		ml.peers = append(ml.peers, k)
	}
	local := g.LocalAddresses[i]
	l, err := net.Listen("tcp", local)
	if err != nil {
		return fmt.Errorf("member%d: listen on %s for its group communication: %w", i, local, err)
	}
	add(fmt.Sprintf("member%d xcom in", i), l, func() (net.Conn, error) { return ns.dial(local) })
	for j, m := range g.Members {
		if j == i {
			continue
		}
		for _, addr := range []string{g.LocalAddresses[j], m.Addr()} {
			l, err := ns.listen(addr)
			if err != nil {
				return fmt.Errorf("member%d: listen on %s in its network namespace for member%d: %w", i, addr, j, err)
			}
			add(fmt.Sprintf("member%d → %s", i, addr), l, func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 2*time.Second) })
		}
	}
	return nil
}

// CutOff blocks m (a member started Isolated) from the other members:
// every connection between them is dropped and new ones are refused, in
// both directions, until Reconnect. Its SQL port stays reachable, so m
// keeps answering with its own, now stale, view of the group; it is
// blocked from the others, as behind a failed network link.
func (g *GroupReplication) CutOff(t T, m *Server) {
	t.Helper()
	g.setCut(t, m, true)
}

// Reconnect undoes CutOff: the group's traffic flows again (whether m is
// let back into the view is the group's business: see WaitOnline,
// StartMember).
func (g *GroupReplication) Reconnect(t T, m *Server) {
	t.Helper()
	g.setCut(t, m, false)
}

func (g *GroupReplication) setCut(t T, m *Server, cut bool) {
	t.Helper()
	ml := g.isolated[m]
	if ml == nil {
		t.Fatalf("testenv: %s was not started isolated (GroupReplicationOptions.Isolated)", m.Name)
	}
	for _, k := range ml.peers {
		k.setCut(cut)
	}
}

// groupReplicationArgs are the mysqld flags of one member: the
// recommended my.cnf lines (placeholders filled in), then what the harness
// needs.
func groupReplicationArgs(name, local string, seeds []string) []string {
	fill := strings.NewReplacer("<the group's UUID>", name, "<this member's host>:33061", local,
		"<every member's local address, comma-separated>", strings.Join(seeds, ","))
	var args []string
	for _, line := range configs.GroupReplicationSettings() {
		line, _, _ = strings.Cut(line, "#")
		args = append(args, "--"+strings.TrimSpace(fill.Replace(line)))
	}
	return append(args,
		"--group-replication-start-on-boot=OFF", // the harness bootstraps and joins (startGroupReplication)
		"--group-replication-ip-allowlist=127.0.0.1",
		"--group-replication-recovery-use-ssl=ON", // caching_sha2_password; mysqld makes its own certificates
		"--report-host=127.0.0.1",
	)
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// waitOnline waits until m sees at least want members ONLINE, itself among them.
func (g *GroupReplication) waitOnline(ctx context.Context, m *Server, want int) error {
	db, err := m.adminPool()
	if err != nil {
		return err
	}
	var online, self int
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = db.QueryRowContext(qctx, "SELECT COUNT(*), COUNT(IF(MEMBER_ID = @@server_uuid, 1, NULL)) FROM performance_schema.replication_group_members "+
			"WHERE MEMBER_STATE = 'ONLINE'").Scan(&online, &self)
		cancel()
		if err == nil && online >= want && self == 1 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %d members ONLINE (itself %d), want %d: %w (last error %v)\n--- tail of %s ---\n%s",
				m.Name, online, self, want, ctx.Err(), err, m.errLog, tailFile(m.errLog, 20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitOnline waits until m sees at least want members ONLINE, itself among
// them; t.Fatalf after timeout.
func (g *GroupReplication) WaitOnline(t T, m *Server, want int, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := g.waitOnline(ctx, m, want); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// Primary returns the member the group names primary, as the first running,
// not paused member that answers sees it; nil when none answers or it names
// no ONLINE primary.
func (g *GroupReplication) Primary(t T) *Server {
	t.Helper()
	for _, m := range g.Members {
		if !m.Running() || m.Paused() {
			continue
		}
		db, err := m.adminPool()
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var port int
		err = db.QueryRowContext(ctx, "SELECT MEMBER_PORT FROM performance_schema.replication_group_members "+
			"WHERE MEMBER_ROLE = 'PRIMARY' AND MEMBER_STATE = 'ONLINE'").Scan(&port)
		cancel()
		if err == sql.ErrNoRows {
			return nil
		}
		if err != nil {
			continue
		}
		for _, p := range g.Members {
			if p.Port == port {
				return p
			}
		}
		return nil
	}
	return nil
}

// StartMember runs START GROUP_REPLICATION on m (e.g. after its Restart)
// and waits until it is ONLINE; t.Fatalf after timeout. The statement runs
// on a session of its own without the pool's 5 s read timeout: a member
// rejoining after SIGKILL can take longer to be let into the view.
func (g *GroupReplication) StartMember(t T, m *Server, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cfg, err := mysql.ParseDSN(m.DSN(AdminUser, AdminPassword))
	if err != nil {
		t.Fatalf("testenv: %s: %v", m.Name, err)
	}
	cfg.ReadTimeout = 0 // bounded by ctx
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("testenv: %s: %v", m.Name, err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	if _, err := db.ExecContext(ctx, "START GROUP_REPLICATION"); err != nil {
		t.Fatalf("testenv: %s: START GROUP_REPLICATION: %v", m.Name, err)
	}
	if err := g.waitOnline(ctx, m, 1); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}
