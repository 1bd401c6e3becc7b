package daemon

// A human's recovery of a Group Replication group: forcing the membership
// of a group that lost its majority to a provable survivor
// (grForceMembers), and re-bootstrapping a group after a total outage on
// the member whose GTID set contains every other's (grBootstrap). Both are
// planned by sitepair (pure) on every member's report read when the
// request arrives, and need the plan's confirmation token.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/failoverd/failoverd/grview"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
)

// kindForceMembers is the audit kind of a human's recovery of a Group
// Replication group that lost its majority.
const kindForceMembers = "force-members"

// grForceTimeout bounds group_replication_force_members.
const grForceTimeout = 60 * time.Second

// grForceMembers carries out a human's recovery of a Group Replication
// group that lost its majority: every member is read now, the plan
// (sitepair.PlanGroupRecovery) must hold and req.token must repeat its
// confirmation token (a refusal answers the consequence summary and the
// token); then group_replication_force_members runs on the survivor with
// the survivors' group communication addresses, and the majority's
// denominator is lowered to them (grview.State.MaxViewSize), so the next
// round follows the forced group's primary.
func (g *group) grForceMembers(ctx context.Context, req request, entry store.AuditEntry) error {
	refuse := g.grRefuser(ctx, "group.force_members_refused", req, entry)
	v, executed, statuses := g.grReadForRecovery(ctx)
	plan, err := sitepair.PlanGroupRecovery(v, executed, req.target)
	if err != nil {
		return refuse(err)
	}
	if req.token != plan.Token {
		// Prevents forcing on a plan the human did not see: the token
		// changes with the view, the survivors and the survivor's set.
		return refuse(fmt.Errorf("%w: confirmation-needed: %s. To do it, repeat with the confirmation token %s", sitepair.ErrGroupRecoveryRefused, plan.Summary, plan.Token))
	}
	var addrs []string
	for _, m := range plan.Members {
		a := statuses[m].LocalAddress
		if a == "" {
			return refuse(fmt.Errorf("%w: %s has no group_replication_local_address", sitepair.ErrGroupRecoveryRefused, m))
		}
		addrs = append(addrs, a)
	}
	g.log.Warn("group.force_members", "survivor", plan.Survivor, "members", plan.Members, "excluded", plan.Excluded, "by", req.by, "addresses", addrs)
	err = g.servers.conns.do(ctx, plan.Survivor, func(in Instance) error {
		m, ok := in.(grMember)
		if !ok {
			return fmt.Errorf("force members on %s: %w", plan.Survivor, mysqlctl.ErrNotSupported)
		}
		return m.ForceMembers(ctx, addrs, grForceTimeout)
	})
	if err != nil {
		err = fmt.Errorf("force members on %s: %w (read failoverd status: the membership may have been forced)", plan.Survivor, err)
		g.log.Error("group.force_members_failed", "err", err)
		g.auditRefused(ctx, entry, err)
		return err
	}
	entry.Result = fmt.Sprintf("%s: %s", store.AuditAccepted, plan.Summary)
	g.mu.Lock()
	// The human lowered the group to its survivors: their majority is the
	// group's from now on (grview.State.MaxViewSize).
	g.gr.state.MaxViewSize = len(plan.Members)
	next := g.rec
	// Persisted, so a restarted daemon keeps the lowered denominator (the
	// one way it shrinks besides bootstrap-group).
	next.gr = &grRecord{maxViewSize: len(plan.Members)}
	g.mu.Unlock()
	next.audit = store.AppendAudit(next.audit, entry)
	if err := g.persist(ctx, next); err != nil {
		g.log.Warn("audit.write_failed", "action", entry.Action, "err", err)
	}
	if k, ok := g.obs.(kicker); ok {
		k.Kick()
	}
	return nil
}

// kindBootstrapGroup is the audit kind of a human's re-bootstrap of a
// Group Replication group after a total outage.
const kindBootstrapGroup = "bootstrap-group"

// grBootstrapTimeout bounds bootstrapping the group on its first member
// and each joiner's START GROUP_REPLICATION.
const grBootstrapTimeout = 2 * time.Minute

// grBootstrap carries out a human's re-bootstrap of a Group Replication
// group after a total outage: every member is read now, the plan
// (sitepair.PlanGroupBootstrap: every member reached and stopped, one
// group name, the chosen member's GTID set containing every other's) must
// hold and req.token must repeat its confirmation token (a refusal answers
// the plan and the token); then the chosen member bootstraps the group
// (bootstrap_group ON, START GROUP_REPLICATION, OFF, always reset) and
// the others start Group Replication one after the other and join it. The
// majority's denominator is every configured member again, so routing
// follows the new group's primary once a majority of them is ONLINE.
func (g *group) grBootstrap(ctx context.Context, req request, entry store.AuditEntry) error {
	refuse := g.grRefuser(ctx, "group.bootstrap_refused", req, entry)
	v, executed, _ := g.grReadForRecovery(ctx)
	plan, err := sitepair.PlanGroupBootstrap(v, executed, req.target)
	if err != nil {
		return refuse(err)
	}
	if req.token != plan.Token {
		// Prevents bootstrapping on a plan the human did not see: the
		// token changes with the members and every member's set.
		return refuse(fmt.Errorf("%w: confirmation-needed: %s. To do it, repeat with the confirmation token %s", sitepair.ErrGroupBootstrapRefused, plan.Summary, plan.Token))
	}
	g.log.Warn("group.bootstrap", "member", plan.Member, "joiners", plan.Joiners, "by", req.by)
	run := func(site, what string, f func(grMember) error) error {
		return g.servers.conns.do(ctx, site, func(in Instance) error {
			m, ok := in.(grMember)
			if !ok {
				return fmt.Errorf("%s on %s: %w", what, site, mysqlctl.ErrNotSupported)
			}
			return f(m)
		})
	}
	if err := run(plan.Member, "bootstrap group", func(m grMember) error { return m.BootstrapGroup(ctx, grBootstrapTimeout) }); err != nil {
		err = fmt.Errorf("bootstrap the group on %s: %w (read failoverd status: the group may have started)", plan.Member, err)
		g.log.Error("group.bootstrap_failed", "member", plan.Member, "err", err)
		g.auditRefused(ctx, entry, err)
		return err
	}
	// One joiner at a time: members joining together slow each other's
	// distributed recovery. A joiner that fails does not stop the others:
	// the group needs a majority of them.
	var failed []error
	for _, s := range plan.Joiners {
		if err := run(s, "start group replication", func(m grMember) error { return m.StartGroupReplication(ctx, grBootstrapTimeout) }); err != nil {
			g.log.Error("group.join_failed", "member", s, "err", err)
			failed = append(failed, fmt.Errorf("%s: %w", s, err))
		}
	}
	g.mu.Lock()
	// The group is every configured member again: a majority of them, not
	// of a forced minority, makes a view routing follows.
	g.gr.state.MaxViewSize = 0
	next := g.rec
	next.gr = &grRecord{maxViewSize: 0}
	g.mu.Unlock()
	if k, ok := g.obs.(kicker); ok {
		defer k.Kick()
	}
	if len(failed) > 0 {
		// The group is bootstrapped all the same: a restarted daemon must
		// not take a forced minority's denominator for the new group's.
		if err := g.persist(ctx, next); err != nil {
			g.log.Warn("group.denominator_persist_failed", "denominator", 0, "err", err)
		}
		err := fmt.Errorf("the group is bootstrapped on %s, but these members did not join it (start them by hand: START GROUP_REPLICATION): %w", plan.Member, errors.Join(failed...))
		g.auditRefused(ctx, entry, err)
		return err
	}
	entry.Result = fmt.Sprintf("%s: %s", store.AuditAccepted, plan.Summary)
	next.audit = store.AppendAudit(next.audit, entry)
	if err := g.persist(ctx, next); err != nil {
		g.log.Warn("audit.write_failed", "action", entry.Action, "err", err)
	}
	return nil
}

// grRefuser logs (msg), audits and wraps in ErrRefused a refusal of a
// human's recovery request.
func (g *group) grRefuser(ctx context.Context, msg string, req request, entry store.AuditEntry) func(error) error {
	return func(err error) error {
		g.log.Warn(msg, "site", req.target, "by", req.by, "err", err)
		err = fmt.Errorf("%w: %w", ErrRefused, err)
		g.auditRefused(ctx, entry, err)
		return err
	}
}

// grReadForRecovery reads every member now and evaluates their reports
// (without advancing the loop's state): what a recovery plan rests on.
func (g *group) grReadForRecovery(ctx context.Context) (grview.Verdict, map[string]gtid.Set, map[string]mysqlctl.GroupStatus) {
	reports, _, _, statuses := g.readMembers(ctx)
	g.mu.Lock()
	v, _ := grview.Evaluate(g.gr.state, g.gr.sites, reports, g.now())
	g.mu.Unlock()
	executed := map[string]gtid.Set{}
	for site, gs := range statuses {
		executed[site] = gs.Executed
	}
	return v, executed, statuses
}
