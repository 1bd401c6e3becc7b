package dragonfly

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// This file holds test doubles, not servers: they implement the conn
// interface in memory (no RESP). fakeDragonfly is a TEST DOUBLE of
// Dragonfly: Dragonfly cannot be installed on the development machines, so
// REPLTAKEOVER is only ever exercised against this simulation of its
// documented behaviour (accepted only on a replica in stable sync; the
// master blocks writes until the replica has its offset, at most the
// timeout; then the replica is master and the old master shuts down, or,
// with takeoverStaysUp, becomes its replica). fakeRedis simulates FAILOVER
// TO the same way. Neither sleeps: a replica that never catches up fails
// (REPLTAKEOVER) or aborts (FAILOVER) as if the timeout had passed.

// fakeReplyError is a server's error reply (like a redis.Error).
type fakeReplyError string

func (e fakeReplyError) Error() string { return string(e) }

// fakeNet is a set of fake cache servers by address. It records every
// command that changes replication, in order, as "addr CMD args".
type fakeNet struct {
	mu      sync.Mutex
	servers map[string]*fakeServer
	cmds    []string
}

func newFakeNet() *fakeNet { return &fakeNet{servers: map[string]*fakeServer{}} }

// add creates a fake master at addr; dragonfly picks fakeDragonfly.
func (n *fakeNet) add(addr string, dragonfly bool) *fakeServer {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := &fakeServer{net: n, addr: addr, dragonfly: dragonfly, role: roleMaster, offset: 1000}
	n.servers[addr] = s
	return s
}

// dial is the Follower's dialer: an unknown address is unreachable.
func (n *fakeNet) dial(addr string) conn {
	n.mu.Lock()
	s := n.servers[addr]
	n.mu.Unlock()
	switch {
	case s == nil:
		return fakeNowhere{addr: addr}
	case s.dragonfly:
		return fakeDragonfly{s}
	default:
		return fakeRedis{s}
	}
}

// commands returns the recorded commands and forgets them.
func (n *fakeNet) commands() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.cmds
	n.cmds = nil
	return out
}

// fakeServer is the replication state shared by fakeRedis and fakeDragonfly.
// All fields are guarded by net.mu.
type fakeServer struct {
	net       *fakeNet
	addr      string
	dragonfly bool
	down      bool

	role   string
	master string // addr a replica follows
	// linkUp and syncing are the replica's link state; stuck keeps a
	// replica in full sync forever.
	linkUp, syncing, stuck bool
	// broken keeps a replica's link down (not syncing) while its master runs.
	broken     bool
	offset     int64 // master_repl_offset
	replOffset int64 // slave_repl_offset
	// catchUpAfter is how many INFO reads a lagging replica needs to reach
	// its master's offset; negative: never.
	catchUpAfter int
	// takeoverErr, when set, is REPLTAKEOVER's reply (e.g. a timeout);
	// failoverErr is FAILOVER's.
	takeoverErr, failoverErr error
	// promotedBehind is how far behind its master the server was when it
	// was promoted (by REPLICAOF NO ONE or REPLTAKEOVER).
	promotedBehind int64
	// clients is the number of connected normal clients.
	clients int
	// takeoverStaysUp: after a REPLTAKEOVER from its replica this master
	// becomes the replica's replica instead of shutting down.
	takeoverStaysUp bool
}

// write is a client's write on s: acknowledged only by a live master.
func (s *fakeServer) write() error {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	switch {
	case s.down:
		return s.unreachable()
	case s.role != roleMaster:
		return fakeReplyError("READONLY You can't write against a read only replica.")
	}
	s.offset++
	return nil
}

// catchUpNow advances s until it holds its master's offset, as a master
// blocking writes for a takeover waits; false if it never would. Called
// with net.mu held.
func (s *fakeServer) catchUpNow() bool {
	m := s.net.servers[s.master]
	for range 1000 {
		if m != nil && s.replOffset >= m.offset {
			return true
		}
		if s.catchUpAfter < 0 {
			return false
		}
		s.advance()
	}
	return false
}

// replicate makes s a replica of master, in sync at once unless stuck.
func (s *fakeServer) replicate(master *fakeServer) {
	s.role, s.master = roleReplica, master.addr
	s.linkUp = !master.down && !s.broken && !master.feedsOn(s)
	s.syncing = s.stuck
	if !s.stuck && s.linkUp {
		s.replOffset = master.offset
	}
}

// feedsOn reports a replication cycle: m replicates from s, so nothing
// feeds either (their links stay down). Called with net.mu held.
func (m *fakeServer) feedsOn(s *fakeServer) bool {
	return m.role == roleReplica && m.master == s.addr
}

// lag makes the replica behind its master; it catches up after polls INFO
// reads (never when negative).
func (s *fakeServer) lag(polls int) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	s.replOffset = s.offset - 100
	if m := s.net.servers[s.master]; m != nil {
		s.replOffset = m.offset - 100
	}
	s.catchUpAfter = polls
}

// set runs fn under the net's lock.
func (s *fakeServer) set(fn func(s *fakeServer)) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	fn(s)
}

// state returns a copy of the fields a test asserts.
func (s *fakeServer) state() (role, master string, linkUp bool) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	return s.role, s.master, s.linkUp
}

func (s *fakeServer) unreachable() error {
	return fmt.Errorf("%s: %w: connection refused", s.addr, ErrUnreachable)
}

// advance moves a lagging replica towards its master on each INFO read.
// Called with net.mu held.
func (s *fakeServer) advance() {
	m := s.net.servers[s.master]
	if s.role != roleReplica || m == nil || m.down || s.stuck || s.broken || m.feedsOn(s) {
		return
	}
	s.linkUp = true
	if s.replOffset >= m.offset || s.catchUpAfter < 0 {
		return
	}
	if s.catchUpAfter == 0 {
		s.replOffset = m.offset
		return
	}
	s.catchUpAfter--
}

// behind is how far s is behind its master. Called with net.mu held.
func (s *fakeServer) behind() int64 {
	if m := s.net.servers[s.master]; m != nil && s.role == roleReplica {
		return m.offset - s.replOffset
	}
	return 0
}

func (s *fakeServer) record(cmd string) {
	s.net.cmds = append(s.net.cmds, s.addr+" "+cmd)
}

func (s *fakeServer) ReplicaOf(_ context.Context, host, port string) error {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if s.down {
		return s.unreachable()
	}
	s.record("REPLICAOF " + host + " " + port)
	addr := net.JoinHostPort(host, port)
	s.broken = false
	if m := s.net.servers[addr]; m != nil {
		s.replicate(m)
	} else {
		s.role, s.master, s.linkUp, s.syncing = roleReplica, addr, false, false
	}
	return nil
}

func (s *fakeServer) ReplicaOfNoOne(context.Context) error {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if s.down {
		return s.unreachable()
	}
	s.record("REPLICAOF NO ONE")
	if s.role == roleReplica {
		s.promotedBehind = s.behind()
		s.offset = s.replOffset
	}
	s.role, s.master, s.linkUp, s.syncing = roleMaster, "", false, false
	return nil
}

func (s *fakeServer) KillNormalClients(context.Context) error {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if s.down {
		return s.unreachable()
	}
	s.record("CLIENT KILL TYPE normal")
	s.clients = 0
	return nil
}

func (s *fakeServer) Close() error { return nil }

// info renders INFO replication; dragonfly follows Dragonfly's format
// (role:replica, no master_repl_offset, slave_repl_offset only in stable
// sync). Called with net.mu held.
func (s *fakeServer) info() string {
	var b strings.Builder
	role := "master"
	if s.role == roleReplica {
		role = "slave"
		if s.dragonfly {
			role = "replica"
		}
	}
	fmt.Fprintf(&b, "# Replication\r\nrole:%s\r\n", role)
	if s.role == roleReplica {
		host, port, _ := net.SplitHostPort(s.master)
		link, syncing := "down", 0
		if s.linkUp && !s.syncing {
			link = "up"
		}
		if s.syncing {
			syncing = 1
		}
		fmt.Fprintf(&b, "master_host:%s\r\nmaster_port:%s\r\nmaster_link_status:%s\r\nmaster_sync_in_progress:%d\r\n", host, port, link, syncing)
		if !s.dragonfly || link == "up" {
			fmt.Fprintf(&b, "slave_repl_offset:%d\r\n", s.replOffset)
		}
	}
	if !s.dragonfly {
		off := s.offset
		if s.role == roleReplica {
			off = s.replOffset
		}
		fmt.Fprintf(&b, "master_repl_offset:%d\r\n", off)
	}
	return b.String()
}

func (s *fakeServer) replication() (replication, error) {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if s.down {
		return replication{}, s.unreachable()
	}
	s.advance()
	return parseReplication(s.info())
}

// fakeRedis is a FAKE Redis/Valkey server for unit tests.
type fakeRedis struct{ *fakeServer }

func (r fakeRedis) Replication(context.Context) (replication, error) { return r.replication() }

// TakeOver fails like Redis, which has no REPLTAKEOVER.
func (r fakeRedis) TakeOver(context.Context, int) error {
	r.net.mu.Lock()
	defer r.net.mu.Unlock()
	r.record("REPLTAKEOVER")
	return fakeReplyError("ERR unknown command 'REPLTAKEOVER'")
}

// Failover simulates FAILOVER TO host port TIMEOUT ms on a master: the
// target must be its replica; writes are blocked (net.mu is held) while the
// target catches up, then the roles swap. A target that never catches up
// makes the failover abort (roles unchanged) after an OK, as Redis does at
// the timeout.
func (r fakeRedis) Failover(_ context.Context, host, port string, timeout time.Duration) error {
	r.net.mu.Lock()
	defer r.net.mu.Unlock()
	if r.down {
		return r.unreachable()
	}
	r.record(fmt.Sprintf("FAILOVER TO %s %s TIMEOUT %d", host, port, timeout.Milliseconds()))
	t := r.net.servers[net.JoinHostPort(host, port)]
	switch {
	case r.failoverErr != nil:
		return r.failoverErr
	case r.role != roleMaster:
		return fakeReplyError("ERR FAILOVER is not valid when server is a replica.")
	case t == nil || t.down || t.role != roleReplica || t.master != r.addr:
		return fakeReplyError("ERR FAILOVER target HOST and PORT is not a replica.")
	case !t.linkUp || t.syncing:
		return fakeReplyError("ERR FAILOVER target replica is not online.")
	}
	if !t.catchUpNow() {
		return nil
	}
	t.promotedBehind = 0
	t.offset = r.offset
	t.role, t.master, t.linkUp = roleMaster, "", false
	r.replicate(t)
	return nil
}

// fakeDragonfly is a TEST DOUBLE of a Dragonfly server for unit tests: no
// real Dragonfly runs anywhere in this package's tests.
type fakeDragonfly struct{ *fakeServer }

func (d fakeDragonfly) Replication(context.Context) (replication, error) { return d.replication() }

// Failover fails like Dragonfly, which has no FAILOVER.
func (d fakeDragonfly) Failover(context.Context, string, string, time.Duration) error {
	d.net.mu.Lock()
	defer d.net.mu.Unlock()
	d.record("FAILOVER")
	return fakeReplyError("ERR unknown command 'FAILOVER'")
}

// TakeOver simulates REPLTAKEOVER seconds: refused on a master; the replica
// must be in stable sync with a live Dragonfly master, which blocks its
// clients' writes (net.mu is held) until the replica has its offset or the
// timeout passes (an error). Then the replica is master and the old master
// shuts down (non-cluster mode), or with takeoverStaysUp replicates from it.
func (d fakeDragonfly) TakeOver(_ context.Context, seconds int) error {
	d.net.mu.Lock()
	defer d.net.mu.Unlock()
	if d.down {
		return d.unreachable()
	}
	d.record(fmt.Sprintf("REPLTAKEOVER %d", seconds))
	if d.role == roleMaster {
		return fakeReplyError("ERR Already a master instance")
	}
	m := d.net.servers[d.master]
	switch {
	case d.takeoverErr != nil:
		return d.takeoverErr
	case m == nil || m.down || !m.dragonfly:
		return fakeReplyError("ERR takeover: master unavailable")
	case !d.linkUp || d.syncing:
		return fakeReplyError("ERR Replica not in stable sync")
	case !d.catchUpNow():
		return fakeReplyError(fmt.Sprintf("ERR Couldn't execute takeover: replica did not catch up in %d s", seconds))
	}
	d.promotedBehind = 0
	d.offset = m.offset
	d.role, d.master, d.linkUp = roleMaster, "", false
	if m.takeoverStaysUp {
		m.replicate(d.fakeServer)
	} else {
		m.down = true
	}
	return nil
}

// fakeNowhere is an address where nothing listens.
type fakeNowhere struct{ addr string }

func (n fakeNowhere) err() error {
	return fmt.Errorf("%s: %w: no such host", n.addr, ErrUnreachable)
}
func (n fakeNowhere) Replication(context.Context) (replication, error) {
	return replication{}, n.err()
}
func (n fakeNowhere) ReplicaOf(context.Context, string, string) error { return n.err() }
func (n fakeNowhere) ReplicaOfNoOne(context.Context) error            { return n.err() }
func (n fakeNowhere) TakeOver(context.Context, int) error             { return n.err() }
func (n fakeNowhere) KillNormalClients(context.Context) error         { return n.err() }
func (n fakeNowhere) Failover(context.Context, string, string, time.Duration) error {
	return n.err()
}
func (n fakeNowhere) Close() error { return nil }
