package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
)

// The connection guard of a replication: group group: every statement
// that would change a member (fence, promote, read_only, replica, CLONE)
// is refused before it reaches the server; only set_as_primary,
// force_members and a re-bootstrap, asked by an operator, pass.

// groupReplicationDial wraps a group's dial so that no statement that would
// change a member ever reaches one (grInstance).
func groupReplicationDial(gc configs.Group, dial Dialer) Dialer {
	return func(ctx context.Context, s configs.Site) (Instance, error) {
		in, err := dial(ctx, s)
		if err != nil {
			return nil, err
		}
		return grInstance{in: in, site: s.Name, observing: gc.Observing()}, nil
	}
}

// grInstance passes a member's reads through and refuses every write but
// set_as_primary (and that one too for an observing group). It does not
// implement cloner: no CLONE either.
type grInstance struct {
	in        Instance
	site      string
	observing bool
}

func (r grInstance) refuse(op string) error {
	return fmt.Errorf("%s on %s: %w", op, r.site, ErrGroupReplicationNoWrite)
}

func (r grInstance) Status(ctx context.Context) (mysqlctl.Status, error) { return r.in.Status(ctx) }
func (r grInstance) Close() error                                        { return r.in.Close() }
func (r grInstance) Fence(context.Context) error                         { return r.refuse("fence") }
func (r grInstance) KillClientConnections(context.Context) (int, error) {
	return 0, r.refuse("kill client connections")
}
func (r grInstance) StopReplicaIO(context.Context) error  { return r.refuse("stop replica IO thread") }
func (r grInstance) StartReplicaIO(context.Context) error { return r.refuse("start replica IO thread") }
func (r grInstance) WaitRelayDrained(context.Context, gtid.Set, time.Duration) error {
	return r.refuse("relay drain")
}
func (r grInstance) StopReplica(context.Context) error     { return r.refuse("stop replica") }
func (r grInstance) ResetReplicaAll(context.Context) error { return r.refuse("reset replica") }
func (r grInstance) Promote(context.Context) error         { return r.refuse("make writable") }
func (r grInstance) ReplicateFrom(context.Context, mysqlctl.Source) error {
	return r.refuse("repoint")
}
func (r grInstance) SetSemiSync(context.Context, bool, bool) error {
	return r.refuse("set semi-sync roles")
}

// GroupStatus reads the member's report.
func (r grInstance) GroupStatus(ctx context.Context) (mysqlctl.GroupStatus, error) {
	m, ok := r.in.(grMember)
	if !ok {
		return mysqlctl.GroupStatus{}, fmt.Errorf("group status of %s: %w", r.site, mysqlctl.ErrNotSupported)
	}
	return m.GroupStatus(ctx)
}

// SetAsPrimary asks the group to elect uuid (an operator's switchover).
func (r grInstance) SetAsPrimary(ctx context.Context, uuid string, timeout time.Duration) error {
	// Prevents an observing group from moving the group's primary.
	if r.observing {
		return fmt.Errorf("set as primary on %s: %w", r.site, ErrObserveOnly)
	}
	m, ok := r.in.(grMember)
	if !ok {
		return fmt.Errorf("set as primary on %s: %w", r.site, mysqlctl.ErrNotSupported)
	}
	return m.SetAsPrimary(ctx, uuid, timeout)
}

// ForceMembers forces the group's membership (a human's recovery).
func (r grInstance) ForceMembers(ctx context.Context, addrs []string, timeout time.Duration) error {
	// Prevents an observing group from changing the group's membership.
	if r.observing {
		return fmt.Errorf("force members on %s: %w", r.site, ErrObserveOnly)
	}
	m, ok := r.in.(grMember)
	if !ok {
		return fmt.Errorf("force members on %s: %w", r.site, mysqlctl.ErrNotSupported)
	}
	return m.ForceMembers(ctx, addrs, timeout)
}

// BootstrapGroup starts a new group on the member (a human's re-bootstrap
// after a total outage).
func (r grInstance) BootstrapGroup(ctx context.Context, timeout time.Duration) error {
	// Prevents an observing group from starting a group.
	if r.observing {
		return fmt.Errorf("bootstrap group on %s: %w", r.site, ErrObserveOnly)
	}
	m, ok := r.in.(grMember)
	if !ok {
		return fmt.Errorf("bootstrap group on %s: %w", r.site, mysqlctl.ErrNotSupported)
	}
	return m.BootstrapGroup(ctx, timeout)
}

// StartGroupReplication makes the member join its group (after a human's
// re-bootstrap).
func (r grInstance) StartGroupReplication(ctx context.Context, timeout time.Duration) error {
	// Prevents an observing group from changing the group's membership.
	if r.observing {
		return fmt.Errorf("start group replication on %s: %w", r.site, ErrObserveOnly)
	}
	m, ok := r.in.(grMember)
	if !ok {
		return fmt.Errorf("start group replication on %s: %w", r.site, mysqlctl.ErrNotSupported)
	}
	return m.StartGroupReplication(ctx, timeout)
}
