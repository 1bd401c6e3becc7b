package mysqlctl

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// processEntry is one SHOW PROCESSLIST row.
type processEntry struct {
	id      uint64
	user    string
	command string
}

// Commands of server-internal threads and of replication: killing a
// replica's Binlog Dump thread would only make it reconnect, killing our own
// replication threads would stop replication.
var internalCommands = map[string]bool{
	"Binlog Dump":      true, // a replica's dump thread on its source
	"Binlog Dump GTID": true,
	"Register Slave":   true,
	"Register Replica": true,
	"Daemon":           true, // event scheduler, background threads
	"Slave_IO":         true, // MariaDB replication threads
	"Slave_SQL":        true,
	"Slave_worker":     true,
	"Killed":           true, // already being killed
}

// internalUsers are the User values of server threads.
var internalUsers = map[string]bool{
	"system user":     true, // replication threads, InnoDB/background threads
	"event_scheduler": true,
}

// isClientConnection decides whether KillClientConnections ends p. Our own
// pool's sessions are recognised by the connection ids recorded when they
// were opened, and only if they still belong to our user (ids restart after
// a server restart, so an id alone could name someone else's session).
func isClientConnection(p processEntry, own *connIDs, ownUser string) bool {
	if p.user == ownUser && own.has(p.id) {
		return false
	}
	if internalUsers[p.user] || internalCommands[p.command] {
		return false
	}
	return true
}

// KillClientConnections ends every client session (KILL CONNECTION): all
// except replication threads (binlog dump on a source, IO/SQL/worker threads
// on a replica), server and event-scheduler threads, and this Instance's own
// pooled sessions. Other sessions of the daemon's account (a human admin,
// another daemon) are killed too: after a fence every session that could
// still write must go. A session the server refuses to let this account
// kill (MySQL: one of an account holding SYSTEM_USER, which the documented
// daemon account does not) is left with a warning; when one of them was
// executing a statement (not Sleep) the call returns the count with an
// error wrapping ErrSessionsNotKilled: super_read_only stops such a session
// writing, so a fence may go on, but it may be in a commit. It returns how many sessions it killed; sessions
// that ended on their own meanwhile are not counted.
func (i *Instance) KillClientConnections(ctx context.Context) (int, error) {
	rs, err := i.q.query(ctx, i.d.processListQuery)
	if err != nil {
		return 0, i.fail("kill client connections", "list processes", err)
	}
	killed := 0
	var spared []string
	for n := range rs.rows {
		r := rs.row(n)
		id, err := strconv.ParseUint(r.str("Id"), 10, 64)
		if err != nil {
			continue
		}
		p := processEntry{id: id, user: r.str("User"), command: r.str("Command")}
		if !isClientConnection(p, i.ids, i.user) {
			continue
		}
		if err := i.q.exec(ctx, i.d.kill(id)); err != nil {
			if errNumber(err) == errNoSuchThread {
				continue // the session ended between listing and KILL
			}
			// Prevents a fence failing on a MySQL SYSTEM_USER account's session
			// (a DBA's root), which the least-privilege daemon may not kill:
			// super_read_only already stops it writing. On MariaDB read_only is
			// the only fence, so an unkillable session stays an error there.
			if errNumber(err) == errKillDenied && i.d.hasSuperReadOnly {
				i.log.Warn("mysqlctl: session not killed: it belongs to a more privileged account", "addr", i.addr, "id", id, "session_user", p.user, "command", p.command)
				// An idle one cannot be committing: the fence's pending global
				// read lock holds back any commit it starts later.
				if p.command != "Sleep" {
					spared = append(spared, fmt.Sprintf("%d (%s, %s)", id, p.user, p.command))
				}
				continue
			}
			return killed, i.fail("kill client connections", "kill "+strconv.FormatUint(id, 10), err)
		}
		killed++
	}
	i.log.Info("mysqlctl: client connections killed", "addr", i.addr, "killed", killed)
	if len(spared) > 0 {
		return killed, i.fail("kill client connections", "kill", fmt.Errorf("%w: %s", ErrSessionsNotKilled, strings.Join(spared, ", ")))
	}
	return killed, nil
}
