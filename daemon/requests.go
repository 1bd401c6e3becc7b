package daemon

// Operator requests: the API's Switchover, Acknowledge, ConfirmFence and
// Reclone hand a request to the group's loop (submit), which carries it out
// between two rounds (handle), one at a time, and records it in the
// group's history whether it is accepted or refused.

import (
	"context"
	"fmt"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
)

// ErrRefused is wrapped by errors of operator requests the group refuses
// (the API answers 409 with the message).
var ErrRefused = api.ErrRefused

// request is an operator action handed to the loop (one action at a time).
type request struct {
	kind   string // kindSwitchover, kindAcknowledge, kindConfirmFence, kindReclone or a mode kind (modes.go)
	target string // the switchover's target, the site whose fence is confirmed, to reclone or to hold
	token  string // the reclone's token
	force  bool   // a switchover within the failover cooldown
	// allowDR and dryRun: a switchover to a dr-only site; one only decided.
	allowDR, dryRun bool
	// holdKind, lasts and reason: a pause's or hold's kind, duration and why.
	holdKind string
	lasts    time.Duration
	reason   string
	by       string // who asked (for the history)
	reply    chan error
	// answer receives what the group decided, in words (switchover).
	answer *string
}

// Operator request kinds besides kindSwitchover.
const (
	kindAcknowledge  = store.AuditAcknowledge
	kindConfirmFence = store.AuditConfirmFence
)

// Switchover implements api.Control.
func (d *Daemon) Switchover(ctx context.Context, group, target string, opt api.SwitchoverOptions, by api.Actor) (string, error) {
	g, err := d.commandGroup(group)
	if err != nil {
		return "", err
	}
	if !g.hasSite(target) {
		return "", fmt.Errorf("%w: group %s has no site %s", api.ErrNotFound, group, target)
	}
	var answer string
	err = g.submit(ctx, request{kind: kindSwitchover, target: target, force: opt.Force, allowDR: opt.AllowDROnly, dryRun: opt.DryRun,
		by: by.String(), answer: &answer})
	return answer, err
}

// ForceMembers implements api.Control: a human's recovery of a Group
// Replication group that lost its majority (grForceMembers).
func (d *Daemon) ForceMembers(ctx context.Context, group, site, confirm string, by api.Actor) error {
	return d.grRecovery(ctx, request{kind: kindForceMembers, target: site, token: confirm, by: by.String()}, group,
		"force-members is for a Group Replication group that lost its majority")
}

// BootstrapGroup implements api.Control: a human's re-bootstrap of a Group
// Replication group after a total outage (grBootstrap).
func (d *Daemon) BootstrapGroup(ctx context.Context, group, site, confirm string, by api.Actor) error {
	return d.grRecovery(ctx, request{kind: kindBootstrapGroup, target: site, token: confirm, by: by.String()}, group,
		"bootstrap-group re-forms a Group Replication group after a total outage")
}

// grRecovery submits a human's Group Replication recovery request to
// group, refusing an unknown site and a group that is not replication:
// group (what names the command's purpose).
func (d *Daemon) grRecovery(ctx context.Context, req request, group, what string) error {
	g, err := d.commandGroup(group)
	if err != nil {
		return err
	}
	if !g.hasSite(req.target) {
		return fmt.Errorf("%w: group %s has no site %s", api.ErrNotFound, group, req.target)
	}
	if g.gr == nil {
		return fmt.Errorf("%w: group %s is no replication: group group: %s", ErrRefused, group, what)
	}
	return g.submit(ctx, req)
}

// Acknowledge implements api.Control.
func (d *Daemon) Acknowledge(ctx context.Context, group string, by api.Actor) error {
	g, err := d.commandGroup(group)
	if err != nil {
		return err
	}
	return g.submit(ctx, request{kind: kindAcknowledge, by: by.String()})
}

// ConfirmFence implements api.Control.
func (d *Daemon) ConfirmFence(ctx context.Context, group, site string, by api.Actor) error {
	g, err := d.commandGroup(group)
	if err != nil {
		return err
	}
	if !g.hasSite(site) {
		return fmt.Errorf("%w: group %s has no site %s", api.ErrNotFound, group, site)
	}
	return g.submit(ctx, request{kind: kindConfirmFence, target: site, by: by.String()})
}

// Reclone implements api.Control.
func (d *Daemon) Reclone(ctx context.Context, group, site, token string, by api.Actor) error {
	g, err := d.commandGroup(group)
	if err != nil {
		return err
	}
	if !g.hasSite(site) {
		return fmt.Errorf("%w: group %s has no site %s", api.ErrNotFound, group, site)
	}
	return g.submit(ctx, request{kind: kindReclone, target: site, token: token, by: by.String()})
}

func (d *Daemon) commandGroup(name string) (*group, error) {
	g := d.group(name)
	if g == nil {
		return nil, fmt.Errorf("%w: unknown group %s", api.ErrNotFound, name)
	}
	// Only the leader acts; a follower's command would race the leader's loop.
	if !d.isLeader() {
		return nil, fmt.Errorf("%w: send commands to the leading daemon", api.ErrNotLeader)
	}
	// Prevents an operator command from moving an observing group.
	if err := g.refuseObserving(); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *group) hasSite(name string) bool {
	for _, s := range g.cfg.Sites {
		if s.Name == name {
			return true
		}
	}
	return false
}

// submit hands an operator request to the loop and waits for its outcome.
func (g *group) submit(ctx context.Context, req request) error {
	req.reply = make(chan error, 1)
	select {
	case g.requests <- req:
	case <-g.gone:
		// A reload removed or rebuilt the group: its loop takes no request.
		return fmt.Errorf("%w: group %s was reloaded; send the request again", api.ErrUnavailable, g.cfg.Name)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handle carries out an operator request inside the loop.
func (g *group) handle(req request, lead func() (context.Context, time.Time, bool)) error {
	ctx, since, ok := lead()
	if !ok {
		return fmt.Errorf("%w: this daemon is not the leader", api.ErrNotLeader)
	}
	g.mu.Lock()
	st := g.rec.Persisted
	g.mu.Unlock()
	entry := store.AuditEntry{At: g.now(), Action: req.kind, Site: req.target, By: req.by, Result: store.AuditAccepted}
	if g.gr != nil {
		switch req.kind {
		case kindSwitchover:
			return g.grSwitchover(ctx, req, st, entry)
		case kindForceMembers:
			return g.grForceMembers(ctx, req, entry)
		case kindBootstrapGroup:
			return g.grBootstrap(ctx, req, entry)
		case kindConfirmFence, kindReclone, kindHold:
			// Prevents a human step of the async loop (a promotion on a
			// confirmed fence, a reclone, a no-promote or maintenance
			// hold) on a group whose members the group itself elects.
			err := fmt.Errorf("%w: %s is not used with replication: group (the group elects, fences and recovers its members itself)", ErrRefused, req.kind)
			g.auditRefused(ctx, entry, err)
			return err
		}
	}
	switch req.kind {
	case kindSwitchover:
		return g.switchover(ctx, req, since, st, entry)
	case kindAcknowledge:
		g.log.Warn("escalation.acknowledged", "by", req.by)
		return g.audited(ctx, sitepair.Acknowledge(st), entry)
	case kindConfirmFence:
		return g.confirmFence(ctx, req, since, st, entry)
	case kindReclone:
		return g.startReclone(ctx, req, g.observed(since), st, entry)
	case kindPause, kindResume, kindHold, kindRelease:
		return g.changeMode(ctx, req, since, st, entry)
	}
	return fmt.Errorf("%w: unknown request %q", ErrRefused, req.kind)
}

// switchover starts a planned switchover to req.target: the revoke, carried
// out like any decision once the cache moved. servingSince is when this
// daemon's term began.
func (g *group) switchover(ctx context.Context, req request, servingSince time.Time, st sitepair.Persisted, entry store.AuditEntry) error {
	opt := sitepair.SwitchoverOptions{Force: req.force, AllowDROnly: req.allowDR}
	d := sitepair.DecideSwitchoverWith(g.observed(servingSince), st, g.policy, req.target, opt, entry.At)
	if req.answer != nil {
		*req.answer = d.Message
	}
	if req.dryRun {
		// Decided only: nothing is recorded, nothing moves.
		if d.Action != sitepair.RevokeEpoch {
			return fmt.Errorf("%w: switchover to %s would be refused: %s (%s)", ErrRefused, req.target, d.Message, d.Reason)
		}
		*req.answer = fmt.Sprintf("would switch over: %s", d.Message)
		return nil
	}
	return g.startSwitchover(ctx, req, d, st, entry)
}

// startSwitchover carries out an accepted switchover decision d (the
// revoke), or records its refusal.
func (g *group) startSwitchover(ctx context.Context, req request, d sitepair.Decision, st sitepair.Persisted, entry store.AuditEntry) error {
	if d.Action != sitepair.RevokeEpoch {
		g.log.Warn("switchover.refused", "target", req.target, "by", req.by, "reason", string(d.Reason), "message", d.Message)
		err := fmt.Errorf("%w: switchover to %s: %s (%s)", ErrRefused, req.target, d.Message, d.Reason)
		g.auditRefused(ctx, entry, err)
		return err
	}
	// The cache moves first, before MySQL is touched: with
	// onSyncTimeout=fail a cache that cannot follow leaves everything as
	// it was.
	if err := g.switchCache(ctx, st.ActiveSite, d.Target); err != nil {
		g.log.Warn("switchover.refused", "target", d.Target, "by", req.by, "reason", "cache", "err", err)
		err = fmt.Errorf("%w: switchover to %s: the cache could not follow: %w", ErrRefused, d.Target, err)
		g.auditRefused(ctx, entry, err)
		return err
	}
	g.log.Warn("switchover.accepted", "target", d.Target, "by", req.by, "forced", req.force, "allow_dr_only", req.allowDR)
	// The revoke's durable write carries the entry, and the history its
	// steps so far.
	g.mu.Lock()
	g.rec.audit = store.AppendAudit(g.rec.audit, entry)
	g.starting = &actionStart{by: req.by, steps: []store.TimelineStep{{Step: TimelineRequested, At: entry.At}}}
	if m := g.cacheMove; m != nil && !m.At.Before(entry.At) {
		g.starting.steps = append(g.starting.steps, store.TimelineStep{Step: TimelineCacheMoved, At: g.now()})
	}
	g.mu.Unlock()
	g.carryOut(ctx, d)
	g.mu.Lock()
	g.starting = nil
	g.mu.Unlock()
	return nil
}

// confirmFence records a human's confirmation that req.target, the old
// primary of the failover in flight (or a replica that may hold its
// acknowledged writes), is dead.
func (g *group) confirmFence(ctx context.Context, req request, servingSince time.Time, st sitepair.Persisted, entry store.AuditEntry) error {
	next, err := sitepair.ConfirmFence(g.observed(servingSince), st, g.policy, req.target, entry.At, req.by)
	if err != nil {
		g.log.Warn("fence.confirmation_refused", "site", req.target, "by", req.by, "err", err)
		err = fmt.Errorf("%w: %w", ErrRefused, err)
		g.auditRefused(ctx, entry, err)
		return err
	}
	// Recorded before the promotion it allows: a restarted daemon
	// still knows a human took responsibility for the old primary.
	if err := g.audited(ctx, next, entry); err != nil {
		return err
	}
	if next.InFlight != nil && len(next.InFlight.LostHolders) > len(st.InFlight.LostHolders) {
		g.log.Warn("ackholder.lost_confirmed_by_operator", "site", req.target, "by", req.by, "epoch", st.Epoch)
		return nil
	}
	g.log.Warn("fence.confirmed_by_operator", "site", req.target, "by", req.by, "epoch", st.Epoch)
	return nil
}

// startReclone records a human's reclone request (before anything touches
// the site) and starts the copy in the background; ctx is the leadership
// term's, so losing it stops the copy.
func (g *group) startReclone(ctx context.Context, req request, obs sitepair.Observed, st sitepair.Persisted, entry store.AuditEntry) error {
	refuse := func(err error) error {
		g.log.Warn("reclone.refused", "site", req.target, "by", req.by, "err", err)
		err = fmt.Errorf("%w: %w", ErrRefused, err)
		g.auditRefused(ctx, entry, err)
		return err
	}
	if why := g.recloneUnavailable(); why != "" {
		return refuse(fmt.Errorf("reclone %s: %w: %s", req.target, ErrNoRecloneMethod, why))
	}
	// No server is read for a request the state refuses anyway (a failover
	// in flight must not wait on a probe).
	if err := sitepair.CheckReclone(obs, st, req.target, req.by); err != nil {
		return refuse(err)
	}
	// Read now, not from the last round: a site holding transactions the
	// donor lacks must not be wiped on a token that predates them.
	probe := g.probeReclone(ctx, req.target, st.ActiveSite)
	next, r, err := sitepair.StartReclone(obs, st, req.target, req.token, probe, entry.At, req.by)
	if err != nil {
		return refuse(err)
	}
	lost, _ := sitepair.RecloneDiscards(st, req.target, probe) // StartReclone compared them
	if !lost.IsEmpty() {
		entry.Result = fmt.Sprintf("%s: discarding what the donor %s lacks: %s", store.AuditAccepted, r.Donor, lost)
	}
	// Persisted first: a restarted daemon must keep a half-copied site out
	// of every decision.
	if err := g.audited(ctx, next, entry); err != nil {
		return err
	}
	g.log.Warn("reclone.started", "site", req.target, "donor", r.Donor, "by", req.by, "discarded", lost.String())
	g.runReclone(ctx, req.target, r.Donor)
	return nil
}

// audited persists the core's next state with entry appended to the
// group's history.
func (g *group) audited(ctx context.Context, next sitepair.Persisted, entry store.AuditEntry) error {
	g.mu.Lock()
	rec := g.rec.advance(g.cfg.Name, next, entry.At)
	g.mu.Unlock()
	rec.audit = store.AppendAudit(rec.audit, entry)
	return g.persist(ctx, rec)
}

// auditRefused records a refused request in the history (best effort: the
// refusal stands whether or not the record is written).
func (g *group) auditRefused(ctx context.Context, entry store.AuditEntry, why error) {
	entry.Result = "refused: " + why.Error()
	g.mu.Lock()
	st := g.rec.Persisted
	g.mu.Unlock()
	if err := g.audited(ctx, st, entry); err != nil {
		g.log.Warn("audit.write_failed", "action", entry.Action, "err", err)
	}
}
