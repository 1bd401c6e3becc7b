package daemon

// Operating modes: the operator's pause of a group and holds on its sites
// (requests handled by the loop like every operator request, audited and
// persisted before they count), their expiry each round, and what a pause
// withheld.

import (
	"context"
	"fmt"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/store"
)

// Request kinds of the operating modes.
const (
	kindPause   = store.AuditPause
	kindResume  = store.AuditResume
	kindHold    = store.AuditHold
	kindRelease = store.AuditRelease
)

// Pause implements api.Control.
func (d *Daemon) Pause(ctx context.Context, group string, lasts time.Duration, reason string, by api.Actor) error {
	g, err := d.commandGroup(group)
	if err != nil {
		return err
	}
	// A forgotten pause leaves the group without automatic failover.
	if limit := d.cfg.Daemon.MaxPause; limit > 0 && lasts > limit {
		return fmt.Errorf("%w: pause for %v: longer than daemon.maxPause (%v); pause for less and extend it later", ErrRefused, lasts, limit)
	}
	return g.submit(ctx, request{kind: kindPause, lasts: lasts, reason: reason, by: by.String()})
}

// Resume implements api.Control.
func (d *Daemon) Resume(ctx context.Context, group string, by api.Actor) error {
	g, err := d.commandGroup(group)
	if err != nil {
		return err
	}
	return g.submit(ctx, request{kind: kindResume, by: by.String()})
}

// Hold implements api.Control.
func (d *Daemon) Hold(ctx context.Context, group, site, kind string, lasts time.Duration, reason string, by api.Actor) error {
	g, err := d.commandGroup(group)
	if err != nil {
		return err
	}
	if !g.hasSite(site) {
		return fmt.Errorf("%w: group %s has no site %s", api.ErrNotFound, group, site)
	}
	if _, err := sitepair.ParseHoldKind(kind); err != nil {
		return fmt.Errorf("%w: %w", api.ErrBadRequest, err)
	}
	if limit := d.cfg.Daemon.MaxHold; limit > 0 && lasts > limit {
		return fmt.Errorf("%w: hold for %v: longer than daemon.maxHold (%v)", ErrRefused, lasts, limit)
	}
	return g.submit(ctx, request{kind: kindHold, target: site, holdKind: kind, lasts: lasts, reason: reason, by: by.String()})
}

// Release implements api.Control.
func (d *Daemon) Release(ctx context.Context, group, site string, by api.Actor) error {
	g, err := d.commandGroup(group)
	if err != nil {
		return err
	}
	if !g.hasSite(site) {
		return fmt.Errorf("%w: group %s has no site %s", api.ErrNotFound, group, site)
	}
	return g.submit(ctx, request{kind: kindRelease, target: site, by: by.String()})
}

// changeMode carries out a pause, resume, hold or release request.
func (g *group) changeMode(ctx context.Context, req request, servingSince time.Time, st sitepair.Persisted, entry store.AuditEntry) error {
	now := entry.At
	var next sitepair.Persisted
	var err error
	switch req.kind {
	case kindPause:
		entry.Result = fmt.Sprintf("%s: until %s: %s", store.AuditAccepted, now.Add(req.lasts).UTC().Format(time.RFC3339), req.reason)
		next, err = sitepair.PauseGroup(st, sitepair.Pause{Until: now.Add(req.lasts), By: req.by, Reason: req.reason}, now)
	case kindResume:
		next, err = sitepair.ResumeGroup(st, now)
	case kindHold:
		h := sitepair.Hold{Kind: sitepair.HoldKind(req.holdKind), Until: now.Add(req.lasts), By: req.by, Reason: req.reason}
		entry.Result = fmt.Sprintf("%s: %s until %s: %s", store.AuditAccepted, h.Kind, h.Until.UTC().Format(time.RFC3339), h.Reason)
		if h.Kind == sitepair.HoldMaintenance && req.target == st.ActiveSite {
			return g.maintainPrimary(ctx, req, servingSince, st, h, entry)
		}
		next, err = sitepair.HoldSite(st, req.target, h, now)
	case kindRelease:
		next, err = sitepair.ReleaseSite(st, req.target, now)
	}
	if err != nil {
		g.log.Warn("mode.refused", "request", req.kind, "site", req.target, "by", req.by, "err", err)
		err = fmt.Errorf("%w: %w", ErrRefused, err)
		g.auditRefused(ctx, entry, err)
		return err
	}
	// Persisted before it counts: a restarted daemon, or the next leader,
	// must still hold the group or the site.
	if err := g.audited(ctx, next, entry); err != nil {
		return err
	}
	switch req.kind {
	case kindPause:
		g.log.Warn("pause.started", "by", req.by, "until", next.Pause.Until, "reason", req.reason)
	case kindResume:
		g.log.Warn("pause.ended", "by", req.by)
	case kindHold:
		g.log.Warn("hold.started", "site", req.target, "kind", req.holdKind, "by", req.by, "until", next.Holds[req.target].Until, "reason", req.reason)
	case kindRelease:
		g.log.Warn("hold.ended", "site", req.target, "kind", string(st.Holds[req.target].Kind), "by", req.by)
		g.afterHold(req.target, st.Holds[req.target])
	}
	return nil
}

// maintainPrimary is a maintenance hold on the primary: a planned
// switchover to the best site that accepts one, then the hold (recorded
// once the revoke is, when the site is no longer the active one). Refused
// as a whole when no switchover is possible.
func (g *group) maintainPrimary(ctx context.Context, req request, servingSince time.Time, st sitepair.Persisted, h sitepair.Hold, entry store.AuditEntry) error {
	d := sitepair.MaintenanceSwitchover(g.observed(servingSince), st, g.policy, entry.At)
	if d.Action != sitepair.RevokeEpoch {
		err := fmt.Errorf("%w: maintenance hold on primary %s needs a switchover first, and it is refused: %s (%s)", ErrRefused, req.target, d.Message, d.Reason)
		g.log.Warn("mode.refused", "request", req.kind, "site", req.target, "by", req.by, "err", err)
		g.auditRefused(ctx, entry, err)
		return err
	}
	sw := entry
	sw.Action, sw.Site, sw.Result = store.AuditSwitchover, d.Target, store.AuditAccepted+": before a maintenance hold on "+req.target
	if err := g.startSwitchover(ctx, req, d, st, sw); err != nil {
		return err
	}
	g.mu.Lock()
	cur := g.rec.Persisted
	g.mu.Unlock()
	next, err := sitepair.HoldSite(cur, req.target, h, g.now())
	if err != nil {
		// The switchover runs; only the hold could not be recorded.
		err = fmt.Errorf("%w: switchover from %s to %s started, but the maintenance hold was not recorded: %w", ErrRefused, req.target, d.Target, err)
		g.auditRefused(ctx, entry, err)
		return err
	}
	if err := g.audited(ctx, next, entry); err != nil {
		return err
	}
	g.log.Warn("hold.started", "site", req.target, "kind", string(h.Kind), "by", req.by, "until", h.Until, "reason", h.Reason, "switchover_to", d.Target)
	return nil
}

// expireModes drops the pause and holds that ran out, persisted with one
// audit entry each (best effort: decisions ignore them already).
func (g *group) expireModes(ctx context.Context) {
	g.mu.Lock()
	st := g.rec.Persisted
	g.mu.Unlock()
	now := g.now()
	next, gone := sitepair.ExpireModes(st, now)
	if len(gone) == 0 {
		return
	}
	g.mu.Lock()
	rec := g.rec.advance(g.cfg.Name, next, now)
	g.mu.Unlock()
	for _, e := range gone {
		rec.audit = store.AppendAudit(rec.audit, store.AuditEntry{At: now, Action: store.AuditExpired, Site: e.Site, By: "failoverd",
			Result: fmt.Sprintf("%s set by %s ran out", e.Kind, e.By)})
	}
	if err := g.persist(ctx, rec); err != nil {
		g.log.Warn("mode.expiry_not_saved", "err", err)
		return
	}
	for _, e := range gone {
		if e.Site == "" {
			g.log.Warn("pause.expired", "by", e.By)
			continue
		}
		g.log.Warn("hold.expired", "site", e.Site, "kind", e.Kind, "by", e.By)
		g.afterHold(e.Site, st.Holds[e.Site])
	}
}

// afterHold brings a site back from maintenance: its replication, stopped
// by its operator or by a restart (skip_replica_start), is started again
// once it is seen stopped, pointed at the primary (as after a re-assert).
func (g *group) afterHold(site string, h sitepair.Hold) {
	if h.Kind != sitepair.HoldMaintenance {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.restarts
	if p.primary != g.rec.ActiveSite || p.epoch != g.rec.Epoch {
		p = pendingRestarts{primary: g.rec.ActiveSite, epoch: g.rec.Epoch}
	}
	if p.primary == "" || p.primary == site {
		return
	}
	for _, s := range p.sites {
		if s == site {
			return
		}
	}
	p.sites = append(p.sites, site)
	g.restarts = p
}

// readiness is the failover readiness of the group as of now (status),
// decided on o the way the last round decided.
func (g *group) readiness(o sitepair.Observed, st sitepair.Persisted, now time.Time) []status.Readiness {
	g.mu.Lock()
	o.ServingSince = g.servingSince
	g.mu.Unlock()
	// Detection of a lost primary: failureThreshold failed probes, one
	// poll interval apart, plus the last probe's timeout.
	detect := time.Duration(g.cfg.FailureThreshold)*g.cfg.PollInterval + g.cfg.ProbeTimeout
	var out []status.Readiness
	for _, r := range sitepair.CheckReadiness(o, st, g.policy, now) {
		s := status.Readiness{Fault: string(r.Fault), Ready: r.Ready, Candidate: r.Candidate, Proof: string(r.Proof),
			Reason: string(r.Reason), Message: r.Message}
		if r.Ready {
			s.ExpectedWritableSeconds = (detect + r.ProofAfter).Seconds()
		}
		out = append(out, s)
	}
	return out
}
