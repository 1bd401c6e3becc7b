package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/reclone"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/store"
)

// kindReclone is the operator request that re-seeds a site.
const kindReclone = store.AuditReclone

// ErrNoRecloneMethod: the group has no way to re-seed a site (MariaDB
// without reclone.command).
var ErrNoRecloneMethod = errors.New("no reclone method configured")

// errInterrupted is the reason recorded for a reclone no daemon runs any
// more (its leader stopped or lost leadership mid-copy).
const errInterrupted = "interrupted: the daemon running it stopped or lost leadership; the site may be half copied, retry the reclone"

// cloner is what CLONE INSTANCE needs of a site's Instance (MySQL;
// *mysqlctl.Instance implements it).
type cloner interface {
	CloneFrom(ctx context.Context, donor mysqlctl.Donor, timeout time.Duration) error
}

// recloneResult is a finished reclone job, handed back to the group's loop.
type recloneResult struct {
	site   string
	failed string // "" on success
}

// recloneProbeTimeout bounds reading one site's GTID set for a reclone
// request (the group's loop waits for it).
const recloneProbeTimeout = 5 * time.Second

// probeReclone reads site's and donor's executed GTID sets for a reclone
// request: the site first, then the donor, so a transaction the site
// received from the donor in between is not taken for one of its own.
func (g *group) probeReclone(ctx context.Context, site, donor string) sitepair.RecloneProbe {
	probe := sitepair.RecloneProbe{Donor: donor}
	read := func(name string) (gtid.Set, error) {
		var set gtid.Set
		err := g.servers.on(ctx, name, recloneProbeTimeout, func(ctx context.Context, in Instance) error {
			st, err := in.Status(ctx)
			set = st.Executed
			return err
		})
		if err != nil {
			return gtid.Set{}, fmt.Errorf("read the GTID set of %s: %w", name, err)
		}
		return set, nil
	}
	var err error
	if probe.SiteExecuted, err = read(site); err != nil {
		probe.Err = err
		return probe
	}
	if probe.DonorExecuted, err = read(donor); err != nil {
		probe.Err = err
	}
	return probe
}

// runReclone copies donor onto site in the background (the site is already
// recorded as recloning) and hands the outcome to the group's loop; term is
// the leadership term's context, so losing it stops the copy.
func (g *group) runReclone(term context.Context, site, donor string) {
	g.mu.Lock()
	g.reclones[site] = true
	g.mu.Unlock()
	go func() {
		failed := ""
		if err := g.reclone(term, site, donor); err != nil {
			failed = err.Error()
		}
		select {
		case g.recloned <- recloneResult{site: site, failed: failed}:
			// Still "running" until the loop recorded the outcome: a round
			// in between must not take it for an interrupted reclone.
		case <-term.Done():
			// The next leader finds it unfinished and records it interrupted.
			g.mu.Lock()
			delete(g.reclones, site)
			g.mu.Unlock()
		}
	}()
}

// recloneByPolicy records and starts the reclone the rejoin policy decided
// (sitepair.ReasonRecloneUnacknowledgedTail). What the site throws away is
// written to the history and the log before anything touches it.
func (g *group) recloneByPolicy(ctx, term context.Context, d sitepair.Decision) error {
	if len(d.Diverged) != 1 {
		return fmt.Errorf("reclone by policy: want one site, got %d", len(d.Diverged))
	}
	x := d.Diverged[0]
	if why := g.recloneUnavailable(); why != "" {
		// Prevents a site with no copy method waiting forever as "recloning":
		// a human decides, as without the policy.
		g.log.Error("reclone.unavailable", "site", x.Site, "err", why)
		md := d
		md.Action, md.Reason = sitepair.MarkDiverged, sitepair.ReasonMarkDiverged
		return g.commit(ctx, md, "", "")
	}
	now := g.now()
	entry := store.AuditEntry{At: now, Action: kindReclone, Site: x.Site, By: sitepair.RecloneByPolicy,
		Result: fmt.Sprintf("%s: discarding %d unacknowledged %s of the old primary: %s", store.AuditAccepted, x.Count, plural(x.Count), x.Set)}
	g.mu.Lock()
	next := sitepair.Apply(g.rec.Persisted, d, now)
	g.mu.Unlock()
	// Persisted first: a restarted daemon must keep a half-copied site out
	// of every decision.
	if err := g.audited(ctx, next, entry); err != nil {
		return err
	}
	g.log.Warn("reclone.started", "site", x.Site, "donor", d.Target, "by", sitepair.RecloneByPolicy,
		"discarded", x.Set.String(), "discarded_count", x.Count)
	g.runReclone(term, x.Site, d.Target)
	return nil
}

func plural(n uint64) string {
	if n == 1 {
		return "transaction"
	}
	return "transactions"
}

// recloneUnavailable says why this group cannot reclone ("" if it can).
func (g *group) recloneUnavailable() string {
	if len(g.cfg.Reclone.Command) > 0 || g.cfg.Engine != configs.EngineMariaDB {
		return ""
	}
	return "MariaDB has no CLONE: set reclone.command to a script that re-seeds the site from the donor " +
		"(example: deploy/reclone/mariadb-backup.sh), or re-seed it by hand: copy the primary with mariadb-backup " +
		"or mariadb-dump --gtid, RESET MASTER on the site, SET GLOBAL gtid_slave_pos to the copy's position and keep " +
		"read_only ON; failoverd clears the divergence once the site's GTID set is contained in the primary's and rejoins it"
}

// reclone re-seeds site from donor: detach it, copy (reclone.command, or
// CLONE INSTANCE on MySQL), then wait until it answers read-only with a
// history the primary contains. Bounded by reclone.timeout.
func (g *group) reclone(ctx context.Context, site, donor string) error {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Reclone.Timeout)
	defer cancel()
	start := g.now()
	// The copy replaces everything: the site must take no writes meanwhile.
	if err := g.servers.fence(ctx, site); err != nil {
		return fmt.Errorf("reclone %s: fence before the copy: %w", site, err)
	}
	// A replication thread still applying would write into the copy.
	err := g.servers.on(ctx, site, stepTimeout, func(ctx context.Context, in Instance) error {
		if err := in.StopReplica(ctx); err != nil {
			return err
		}
		return in.ResetReplicaAll(ctx)
	})
	if err != nil {
		return fmt.Errorf("reclone %s: detach from its source: %w", site, err)
	}
	if err := g.copySite(ctx, site, donor); err != nil {
		return fmt.Errorf("reclone %s from %s: %w", site, donor, err)
	}
	// The copy restarted or rewrote the server: open a fresh connection.
	g.servers.conns.drop(site)
	if err := g.awaitRecloned(ctx, site); err != nil {
		return fmt.Errorf("reclone %s from %s: after the copy: %w", site, donor, err)
	}
	g.log.Warn("reclone.copied", "site", site, "donor", donor, "duration", g.now().Sub(start).String())
	return nil
}

// copySite runs reclone.command, or CLONE INSTANCE on MySQL without one.
func (g *group) copySite(ctx context.Context, site, donor string) error {
	s, d := g.siteConfig(site), g.siteConfig(donor)
	if len(g.cfg.Reclone.Command) > 0 {
		h := reclone.Hook{Command: g.cfg.Reclone.Command, Timeout: g.cfg.Reclone.Timeout, Logger: g.log}
		return h.Run(ctx, reclone.Job{Group: g.cfg.Name, Site: site, SiteAddr: s.MySQL.Address, Donor: donor, DonorAddr: d.MySQL.Address})
	}
	pw, err := g.cfg.Credentials.Admin.Password()
	if err != nil {
		return fmt.Errorf("read the admin password: %w", err)
	}
	// The recipient dials the donor the way replicas do.
	addr := d.MySQL.ReplicationAddress
	if addr == "" {
		addr = d.MySQL.Address
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("donor address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fmt.Errorf("donor address %q: %w", addr, err)
	}
	in, err := g.servers.conns.get(ctx, site)
	if err != nil {
		return err
	}
	c, ok := in.(cloner)
	if !ok {
		return fmt.Errorf("%w: this site's connection cannot CLONE", ErrNoRecloneMethod)
	}
	deadline, _ := ctx.Deadline()
	return c.CloneFrom(ctx, mysqlctl.Donor{Host: host, Port: port, User: g.cfg.Credentials.Admin.User, Password: pw, TLS: g.cfg.TLS.Enabled}, time.Until(deadline))
}

// awaitRecloned waits until site answers read-only and the active site
// contains everything it holds (the copy is a prefix of the primary's
// history), so it may rejoin.
func (g *group) awaitRecloned(ctx context.Context, site string) error {
	last := "not observed yet"
	for {
		if k, ok := g.obs.(kicker); ok {
			k.Kick()
		}
		g.mu.Lock()
		active := g.rec.ActiveSite
		g.mu.Unlock()
		var s, p *sitepair.SiteObservation
		obs := g.obs.Observed()
		for i := range obs.Sites {
			switch obs.Sites[i].Name {
			case site:
				s = &obs.Sites[i]
			case active:
				p = &obs.Sites[i]
			}
		}
		switch {
		case s == nil || p == nil:
			last = "no primary recorded"
		case s.State != statemachine.ReadOnly:
			last = fmt.Sprintf("%s is %s", site, s.State)
		case !p.Executed.Covers(s.Executed):
			last = fmt.Sprintf("%s holds %s that primary %s lacks", site, p.Executed.Uncovered(s.Executed).Compact(), active)
		default:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %s)", ctx.Err(), last)
		case <-time.After(g.cfg.PollInterval):
		}
	}
}

// finishReclone records a finished reclone job (in the loop).
func (g *group) finishReclone(ctx context.Context, res recloneResult) {
	g.mu.Lock()
	st := g.rec.Persisted
	delete(g.reclones, res.site)
	g.mu.Unlock()
	r, ok := st.Recloning[res.site]
	if !ok || r.Failed != "" {
		return
	}
	entry := store.AuditEntry{At: g.now(), Action: kindReclone, Site: res.site, By: r.By, Result: "succeeded"}
	if res.failed != "" {
		entry.Result = "failed: " + res.failed
		g.log.Error("reclone.failed", "site", res.site, "donor", r.Donor, "err", res.failed)
	} else {
		g.log.Warn("reclone.succeeded", "site", res.site, "donor", r.Donor, "note", "the site rejoins the primary next")
	}
	if err := g.audited(ctx, sitepair.FinishReclone(st, res.site, res.failed), entry); err != nil {
		g.log.Warn("reclone.record_failed", "site", res.site, "err", err)
	}
}

// interruptedReclones records as failed every reclone the store says runs
// but no job of this daemon runs: its leader stopped or lost leadership.
func (g *group) interruptedReclones(ctx context.Context) {
	g.mu.Lock()
	st := g.rec.Persisted
	var stale []string
	for site, r := range st.Recloning {
		if r.Failed == "" && !g.reclones[site] {
			stale = append(stale, site)
		}
	}
	g.mu.Unlock()
	for _, site := range stale {
		g.finishReclone(ctx, recloneResult{site: site, failed: errInterrupted})
	}
}

func (g *group) siteConfig(name string) configs.Site {
	for _, s := range g.cfg.Sites {
		if s.Name == name {
			return s
		}
	}
	return configs.Site{Name: name}
}
