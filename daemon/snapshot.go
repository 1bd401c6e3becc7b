package daemon

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/failoverd/failoverd/dragonfly"
	"github.com/failoverd/failoverd/poller"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/status"
)

// Snapshot implements api.Control: the daemon and every group as of now,
// built from what the loops published (it never waits on an action).
func (d *Daemon) Snapshot() status.Snapshot {
	now := d.opts.Clock()
	_, since, leading := d.lead.current()
	s := status.Snapshot{At: now, Daemon: status.Daemon{
		Identity: d.opts.Identity, Version: d.opts.Version, Commit: d.opts.Commit, StartedAt: d.started,
		LeaderElection: d.cfg.Daemon.LeaderElection.Enabled, Leader: leading, Store: d.store.Describe(),
		LeaderIdentity: d.lead.leader(), Session: d.lead.session(), StoreType: d.cfg.Daemon.StateStore.Type,
	}}
	if leading {
		s.Daemon.LeaderSince = since
	}
	s.Daemon.Config = d.configStatus()
	for _, g := range d.groupList() {
		s.Groups = append(s.Groups, g.snapshot(now))
	}
	s.Daemon.Ready, s.Daemon.NotReady = d.ready(leading, s.Groups)
	return s
}

// ready is /readyz: the state is loaded (New refuses to start otherwise),
// leadership is known and every site was probed at least once.
func (d *Daemon) ready(leading bool, groups []status.Group) (bool, string) {
	if !leading && d.lead.leader() == "" {
		return false, "no leader known yet"
	}
	for _, g := range groups {
		for _, s := range g.Sites {
			if s.LastProbeAt.IsZero() {
				return false, "no probe of " + g.Name + "/" + s.Name + " finished yet"
			}
		}
	}
	return true, ""
}

// siteViewer is implemented by the poller-backed Observations: the raw
// view of a site for status (threads, errors), beyond decision input.
type siteViewer interface {
	SiteView(name string) (poller.SiteView, bool)
}

// snapshot is the group's status as of now.
func (g *group) snapshot(now time.Time) status.Group { return g.snapshotOf(now, true) }

// snapshotOf is snapshot, with its readiness (the decision rules run once
// per supposed fault, the costly part) only when withReadiness.
func (g *group) snapshotOf(now time.Time, withReadiness bool) status.Group {
	var o sitepair.Observed
	if g.obs != nil {
		o = g.observed(time.Time{})
	}
	g.mu.Lock()
	rec, last, lastErr, decidedAt := g.rec, g.last, g.lastErr, g.decidedAt
	noReads := maps.Clone(g.noReads)
	g.mu.Unlock()
	st, stored := rec.Persisted, toStore(g.cfg.Name, rec)
	out := status.Group{
		Name: g.cfg.Name, Engine: g.cfg.Engine, Fencing: g.cfg.FencingMode(), Mode: modeOf(g.cfg),
		Epoch: st.Epoch, ActiveSite: st.ActiveSite,
		Action: string(last.Action), Reason: string(last.Reason), Class: classOf(last.Reason),
		Message: last.Message, Detection: string(last.Detection.Code), DecidedAt: decidedAt,
		EscalationHalted: st.EscalationHalted, OperatorFenced: slices.Clone(st.OperatorFenced),
		GroupReplication: g.grStatus(),
	}
	if last.Reason == "" {
		out.Class = status.ClassWaiting
	}
	if lastErr != nil {
		out.LastError = lastErr.Error()
	}
	// Armed by automatic failovers only (a planned switchover does not).
	if last, ok := st.CooldownFrom(); ok {
		if left := g.policy.FailoverCooldown - now.Sub(last); left > 0 {
			out.CooldownRemainingSeconds = left.Seconds()
		}
	}
	if p := st.Pause; p.ActiveAt(now) {
		out.Pause = &status.Pause{By: p.By, Reason: p.Reason, Since: p.Since, Until: p.Until}
	}
	if w := last.Withheld; w != nil {
		out.Withheld = &status.Withheld{Action: string(w.Action), Reason: string(w.Reason), Target: w.Target, Message: w.Message}
	}
	// A Group Replication group never fails over by itself (the group
	// elects): readiness of failoverd's own failover does not apply.
	if withReadiness && g.gr == nil && !decidedAt.IsZero() && len(o.Sites) > 0 {
		out.Readiness = g.readiness(o, st, now)
	}
	if f := stored.LastFailover; f != nil {
		out.LastFailover = &status.Failover{Kind: f.Kind, From: f.From, To: f.To, At: f.At, Epoch: f.Epoch, PromotionGTID: f.PromotionGTID, Proof: f.Proof}
		if c := f.FenceConfirmation; c != nil {
			out.LastFailover.ConfirmedBy = c.By
		}
	}
	for _, e := range stored.Audit[max(0, len(stored.Audit)-10):] {
		out.Audit = append(out.Audit, status.AuditEntry{At: e.At, Action: e.Action, Site: e.Site, By: e.By, Result: e.Result})
	}
	if f := st.InFlight; f != nil && f.OperatorConfirmed != nil {
		out.FenceConfirmedBy = f.OperatorConfirmed.By
	}
	out.RPO, out.RPONote = rpo(o, st.ActiveSite)
	if g.gr != nil {
		// Semi-sync says nothing of a Group Replication group: a commit is
		// acknowledged once a majority of the group certified it.
		out.RPO, out.RPONote = status.RPOZero, "Group Replication: a commit is acknowledged once a majority of the group certified it; "+
			"the group elects a member that has it (group_replication_consistency BEFORE_ON_PRIMARY_FAILOVER or stronger applies it before taking writes)"
	}
	if f := stored.InFlight; f != nil {
		out.InFlight = &status.InFlight{ID: f.ID, Kind: f.Kind, From: f.From, To: f.To, Step: f.Step, StepDone: f.StepDone, StartedAt: f.StartedAt}
	}
	for _, site := range slices.Sorted(maps.Keys(st.Diverged)) {
		set := st.Diverged[site]
		n, ok := st.DivergedCount[site]
		if !ok {
			n = set.Count() // marked before counts were kept: an upper bound for MariaDB
		}
		out.Diverged = append(out.Diverged, status.Divergence{Site: site, GTID: set.String(), Transactions: n})
	}
	viewer, _ := g.obs.(siteViewer)
	cacheMaster := g.follow.followed(dragonfly.FollowerName)
	oldPrimary := ""
	if f := stored.LastFailover; f != nil {
		oldPrimary = f.From
	}
	for i, so := range o.Sites {
		site := g.siteStatus(so, st, viewer, now)
		site.Reader = g.readerStatus(so.Name, now)
		site.ReadsWithheld = noReads[so.Name]
		if h, ok := st.HoldAt(so.Name, now); ok {
			site.Hold = &status.Pause{Kind: string(h.Kind), By: h.By, Reason: h.Reason, Since: h.Since, Until: h.Until}
		}
		if g.gr == nil { // the old primary of a Group Replication group rejoins by the group's own recovery
			site.Recovery = recovery(site, so, st, oldPrimary)
		}
		// The role failoverd last gave the site's cache (not re-read).
		if i < len(g.cfg.Sites) && g.cfg.Sites[i].Cache != nil && cacheMaster != "" {
			site.CacheRole = "replica"
			if so.Name == cacheMaster {
				site.CacheRole = "master"
			}
		}
		out.Sites = append(out.Sites, site)
	}
	out.Routing = append(g.follow.report(), g.readFollow.report()...)
	out.Hooks = g.hookRuns()
	g.mu.Lock()
	if m := g.cacheMove; m != nil {
		cm := *m
		out.CacheSwitchover = &cm
	}
	g.mu.Unlock()
	return out
}

func (g *group) siteStatus(so sitepair.SiteObservation, st sitepair.Persisted, viewer siteViewer, now time.Time) status.Site {
	s := status.Site{
		Name: so.Name, Role: string(so.Role), State: so.State.String(), Active: so.Name == st.ActiveSite,
		Executed: so.Executed.String(), Retrieved: so.Retrieved.String(), ReplicatingFrom: so.ReplicatingFrom,
		LastReachableAt: so.LastReachableAt,
	}
	if set, ok := st.Diverged[so.Name]; ok {
		s.Diverged = set.String()
	}
	if r, ok := st.Recloning[so.Name]; ok {
		s.Reclone = &status.Reclone{Donor: r.Donor, StartedAt: r.At, By: r.By, Failed: r.Failed}
	}
	// Only while the site answers: an unreachable site's last view would
	// read as current.
	if so.State.Reachable() {
		s.ApplierBlocked = g.policy.ApplierBlocked(so)
		s.WritesStalled = g.policy.WritesStalled(so)
		if ss := so.SemiSync; ss.Known {
			w := so.AckWaits
			s.SemiSync = &status.SemiSync{SourceEnabled: ss.Enabled, WaitingSessions: w.Sessions, WaitingAppliers: w.Appliers, LongestWaitSeconds: w.Longest.Seconds()}
		}
	}
	if sc := so.Sidecar; sc.Configured {
		s.Sidecar = &status.Sidecar{LastReportAt: sc.LastReport, LeaseAgeSeconds: -1, Epoch: sc.Epoch, FencedEpoch: sc.FencedEpoch, MysqldDown: sc.MysqldDown, CanKill: sc.CanKill}
		if !sc.LastReport.IsZero() {
			s.Sidecar.LeaseAgeSeconds = now.Sub(sc.LastReport).Seconds()
		}
	}
	if viewer == nil {
		return s
	}
	v, ok := viewer.SiteView(so.Name)
	if !ok {
		return s
	}
	if v.HasLatest {
		s.LastProbeAt = v.Latest.At
		if v.Latest.Err != nil {
			s.ProbeError = v.Latest.Err.Error()
		}
	}
	// Threads and lag as last read, and only while the site answers: an
	// unreachable replica's old "running" would hide that nobody knows.
	if v.HasReachable && v.HasLatest && v.Latest.Reachable {
		if rep := v.LastReachable.Status.Replica; rep != nil {
			r := &status.Replication{IORunning: rep.IOThread.Running(), SQLRunning: rep.SQLThread.Running(),
				Broken: v.LastReachable.ReplicationBroken, LagKnown: so.LagKnown, GTIDLagSeconds: so.BacklogAge.Seconds()}
			if so.LagKnown {
				r.LagSeconds = so.Lag.Seconds()
			}
			switch {
			case rep.LastSQLError != "":
				r.LastError = rep.LastSQLError
			case rep.LastIOError != "":
				r.LastError = rep.LastIOError
			}
			s.Replication = r
		}
	}
	return s
}

// recovery says where the last failover's old primary stands, or that a
// site is blocked as diverged (see status.Site.Recovery).
func recovery(s status.Site, so sitepair.SiteObservation, st sitepair.Persisted, oldPrimary string) string {
	switch {
	case s.Reclone != nil && s.Reclone.Failed != "":
		return status.RecoveryRecloneFailed
	case s.Reclone != nil:
		return status.RecoveryRecloning
	case s.Diverged != "":
		return status.RecoveryBlocked
	case oldPrimary == "" || st.ActiveSite == "" || so.Name == st.ActiveSite || so.Name != oldPrimary:
		return ""
	}
	r := s.Replication
	if so.ReplicatingFrom == st.ActiveSite && r != nil && r.IORunning && r.SQLRunning && !r.Broken && r.LagKnown && r.LagSeconds == 0 && so.IOConnected {
		return ""
	}
	return status.RecoveryInProgress
}

// classOf sorts a decision reason for operators and alerts: its class in
// sitepair's reason table (invalid for an unknown reason).
func classOf(r sitepair.Reason) string { return string(sitepair.ClassOf(r)) }

// rpo says whether the primary's acknowledged writes survive its loss, as
// its last reachable probe found its semi-sync ("" when no primary is
// recorded or it was never reached).
func rpo(o sitepair.Observed, active string) (string, string) {
	const lost = "a write is acknowledged once the primary alone committed it, and a failover loses what no reachable replica received"
	for _, s := range o.Sites {
		if s.Name != active || s.LastReachableAt.IsZero() {
			continue
		}
		ss := s.SemiSync
		switch {
		case !ss.Known:
			return status.RPONotZero, "the primary runs no semi-sync (its variables do not exist: plugin not loaded): " + lost
		case !ss.Enabled:
			return status.RPONotZero, "semi-sync is off on the primary: " + lost
		case !ss.Active:
			return status.RPONotZero, "semi-sync is enabled on the primary but fell back to asynchronous commits (its timeout passed with no acknowledgement): " + lost
		}
		k := max(1, ss.WaitForReplicas)
		noun := "replica"
		if k > 1 {
			noun = "replicas"
		}
		return status.RPOZero, fmt.Sprintf("semi-sync: each acknowledged write is on the primary and %d %s; a failover waits while %d or more of the replicas that may hold one are unreachable (ack-holder-unreachable)", k, noun, k)
	}
	return "", ""
}
