package daemon

// Observe-only groups (configs.Group.Mode "observe", docs/design.md
// "Observe-only groups"): the loop polls and decides exactly as an active
// group's would, and each decision that would act is logged as
// "decision.would" instead of carried out. Nothing is changed anywhere:
//
//   - decisions: carryOut stops every acting decision (observeOnly), so no
//     action, store write, hook, barrier or failover step ever runs;
//   - MySQL: the group's admin connections are read-only (readOnlyInstance):
//     any write statement is refused before it is sent, whichever path asks;
//   - routing and the cache: the group gets no followers (followersOf);
//   - operator commands that would act are refused (refuseObserving);
//   - the store and the view: persist refuses, so the signed view keeps the
//     persisted epoch and active site (see publish) and a group switched to
//     active later starts from the real persisted state. The view is still
//     served, unchanged: a sidecar adopts only a newer epoch, so it can make
//     none fence (docs/design.md says why, and why not serving is worse).
//
// The one thing kept beyond the persisted state is a shadow of the
// decisions that only record what is observed (adopting the sole writable
// site, marking or clearing a divergence, an escalation halt): an active
// group would have recorded them at once, so the later would-decisions
// rest on them as an active group's decisions would. The shadow lives in
// memory only: it is never persisted or published, so it cannot mislead the
// active daemon the group becomes.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/status"
)

// ErrObserveOnly is returned by an observing group's admin connections for
// every statement that would change the server.
var ErrObserveOnly = errors.New("observe mode: the daemon changes nothing")

// observing reports whether the group is in observe mode.
func (g *group) observing() bool { return g.cfg.Observing() }

// modeOf is the group's mode as the status shows it.
func modeOf(gc configs.Group) string {
	if gc.Observing() {
		return status.ModeObserve
	}
	return status.ModeActive
}

// refuseObserving is the refusal (409) of an operator command that would
// act on an observing group; nil for an active group.
func (g *group) refuseObserving() error {
	if !g.observing() {
		return nil
	}
	return fmt.Errorf("%w: group %s is in observe mode: it decides and logs what it would do (decision.would) but changes nothing; set mode: active to let it act",
		ErrRefused, g.cfg.Name)
}

// recordOnly reports whether a decision only records what is observed
// (nothing outside the record changes): an observing group keeps it in its
// shadow record.
func recordOnly(a sitepair.Action) bool {
	switch a {
	case sitepair.AdoptPrimary, sitepair.MarkDiverged, sitepair.ClearDiverged, sitepair.HaltFailover:
		return true
	}
	return false
}

// observeOnly handles a decision of an observing group in place of carrying
// it out: a decision that acts is logged, when it changed, as what an active
// group would do ("decision.would"), one that does not (none, alert) as the
// plain "decision" an active group logs, and a record-only decision is kept
// in the shadow record. No hook fires. It reports whether the group
// observes (the caller then does nothing else).
func (g *group) observeOnly(ctx context.Context, d sitepair.Decision, changed bool) bool {
	if !g.observing() {
		return false
	}
	if d.Action == sitepair.None || d.Action == sitepair.Alert {
		if changed {
			g.logDecision(ctx, d)
		}
		return true
	}
	if recordOnly(d.Action) {
		g.mu.Lock()
		st := g.rec.Persisted
		if g.shadow != nil {
			st = *g.shadow
		}
		next := sitepair.Apply(st, d, g.now())
		g.shadow = &next
		g.mu.Unlock()
	}
	if !changed {
		return true
	}
	level := slog.LevelWarn
	if recordOnly(d.Action) {
		level = slog.LevelInfo
	}
	g.log.Log(ctx, level, "decision.would", "mode", configs.ModeObserve, "action", string(d.Action), "reason", string(d.Reason),
		"target", d.Target, "from", d.From, "epoch", d.Epoch, "fence", d.Fence, "proof", string(d.FenceProof),
		"repoint", d.Repoint, "message", d.Message)
	return true
}

// decisionState is the state a round decides on: the persisted one, or for
// an observing group its shadow record once it has one.
func (g *group) decisionState() sitepair.Persisted {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shadow != nil && g.observing() {
		return *g.shadow
	}
	return g.rec.Persisted
}

// followersOf is what follows gc's primary: nothing for an observing group,
// which must move no Service, taint, DNS record or cache.
func followersOf(gc configs.Group, fs []Follower) []Follower {
	if gc.Observing() {
		return nil
	}
	return fs
}

// observeOnlyDial gives an observing group read-only admin connections:
// the last line of defence against any path that would write to MySQL.
func observeOnlyDial(gc configs.Group, dial Dialer) Dialer {
	if !gc.Observing() {
		return dial
	}
	return func(ctx context.Context, s configs.Site) (Instance, error) {
		in, err := dial(ctx, s)
		if err != nil {
			return nil, err
		}
		return readOnlyInstance{in: in, site: s.Name}, nil
	}
}

// readOnlyInstance passes reads through and refuses every statement that
// would change the server (it does not implement cloner: no CLONE either).
type readOnlyInstance struct {
	in   Instance
	site string
}

func (r readOnlyInstance) refuse(op string) error {
	return fmt.Errorf("%s on %s: %w", op, r.site, ErrObserveOnly)
}

func (r readOnlyInstance) Status(ctx context.Context) (mysqlctl.Status, error) {
	return r.in.Status(ctx)
}
func (r readOnlyInstance) Close() error                { return r.in.Close() }
func (r readOnlyInstance) Fence(context.Context) error { return r.refuse("fence") }
func (r readOnlyInstance) KillClientConnections(context.Context) (int, error) {
	return 0, r.refuse("kill client connections")
}
func (r readOnlyInstance) StopReplicaIO(context.Context) error {
	return r.refuse("stop replica IO thread")
}
func (r readOnlyInstance) StartReplicaIO(context.Context) error {
	return r.refuse("start replica IO thread")
}
func (r readOnlyInstance) WaitRelayDrained(context.Context, gtid.Set, time.Duration) error {
	return r.refuse("relay drain") // only ever part of a promotion
}
func (r readOnlyInstance) StopReplica(context.Context) error     { return r.refuse("stop replica") }
func (r readOnlyInstance) ResetReplicaAll(context.Context) error { return r.refuse("reset replica") }
func (r readOnlyInstance) Promote(context.Context) error         { return r.refuse("make writable") }
func (r readOnlyInstance) ReplicateFrom(context.Context, mysqlctl.Source) error {
	return r.refuse("repoint")
}
func (r readOnlyInstance) SetSemiSync(context.Context, bool, bool) error {
	return r.refuse("set semi-sync roles")
}
