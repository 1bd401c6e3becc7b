package sidecar

import (
	"fmt"
	"net/http"
	"time"

	"github.com/failoverd/failoverd/api"
)

// serveHealth is GET /health?role=primary|replica|any&maxLag=5s for this
// sidecar's own site, answered from what it already holds (its last local
// status read and the newest signed view): no SQL per request, so a load
// balancer may poll it often, and it keeps answering while the daemon is
// replaced.
func (s *Sidecar) serveHealth(w http.ResponseWriter, r *http.Request) {
	q, err := api.ParseHealthQuery(r.URL.Query())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	api.WriteHealth(w, s.Health(q))
}

// Health is this site's health answer for q, as /health gives it.
func (s *Sidecar) Health(q api.HealthQuery) api.HealthAnswer {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return q.Answer(func() api.HealthAnswer { return s.primaryHealthLocked(now) }, func() api.HealthAnswer { return s.replicaHealthLocked(now, q) })
}

// staleAfter is how old the last local status read may be before /health
// stops trusting it: a round stuck on a hung mysqld must not keep the site
// in a pool on an old read.
func (s *Sidecar) staleAfter() time.Duration {
	return max(s.cfg.LeaseTimeout, 3*s.cfg.CheckInterval)
}

// localFreshLocked says why the last local read cannot be used ("" when
// it can).
func (s *Sidecar) localFreshLocked(now time.Time) string {
	switch {
	case s.local.at.IsZero():
		return "mysqld not read yet"
	case now.Sub(s.local.at) > s.staleAfter():
		return fmt.Sprintf("last mysqld read %s ago", now.Sub(s.local.at).Round(time.Millisecond))
	case !s.local.up:
		return "mysqld did not answer its last status read"
	}
	return ""
}

// primaryHealthLocked: 200 only while the view held names this site, its
// lease runs and mysqld was writable when last read.
func (s *Sidecar) primaryHealthLocked(now time.Time) api.HealthAnswer {
	no := func(why string) api.HealthAnswer {
		return api.HealthAnswer{Status: api.HealthUnavailable, Role: api.HealthRolePrimary, Reason: why}
	}
	switch {
	case s.v == nil:
		return no("no view yet")
	case s.v.View.ActiveSite != s.cfg.Site:
		// Another site (or none, a failover in flight) holds the epoch: this
		// one is being or has been fenced.
		return no(fmt.Sprintf("view epoch %d names %q, not this site", s.v.View.Epoch, s.v.View.ActiveSite))
	case !now.Before(s.lease):
		// A lease ran out: the daemon may have promoted another site.
		return no(fmt.Sprintf("lease expired %s ago", now.Sub(s.lease).Round(time.Millisecond)))
	}
	if why := s.localFreshLocked(now); why != "" {
		return no(why)
	}
	if !s.local.writable {
		return no("mysqld read-only")
	}
	return api.HealthAnswer{Status: api.HealthOK, Role: api.HealthRolePrimary,
		Reason: fmt.Sprintf("view epoch %d names this site, lease %s left, writable", s.v.View.Epoch, s.lease.Sub(now).Round(time.Millisecond))}
}

// replicaHealthLocked: 200 only while the newest view held does not
// withhold this site from reads and mysqld is read-only and replicating
// with both threads running and its lag known (within q.MaxLag when
// asked). Without a view, only the local read counts.
func (s *Sidecar) replicaHealthLocked(now time.Time, q api.HealthQuery) api.HealthAnswer {
	no := func(why string) api.HealthAnswer {
		return api.HealthAnswer{Status: api.HealthUnavailable, Role: api.HealthRoleReplica, Reason: why}
	}
	// A diverged (or recloning, operator-fenced, held, wrongly sourced)
	// replica streams and lags like a good one: only the daemon can tell.
	if s.v != nil {
		if why, ok := s.v.View.Withheld(s.cfg.Site); ok {
			return no("withheld from reads by the daemon's view: " + why)
		}
	}
	if why := s.localFreshLocked(now); why != "" {
		return no(why)
	}
	rep := s.local.replica
	switch {
	case s.local.writable:
		// A writable site serving reads as a replica may hold writes the
		// primary lacks.
		return no("mysqld writable, not read-only")
	case rep == nil:
		return no("no replication channel")
	case !rep.ioRunning || !rep.sqlRunning:
		return no("replication threads not both running")
	case !rep.lagKnown:
		return no("lag unknown")
	case q.HasMaxLag && rep.lag > q.MaxLag:
		return no(fmt.Sprintf("lag %s over maxLag %s", rep.lag, q.MaxLag))
	}
	return api.HealthAnswer{Status: api.HealthOK, Role: api.HealthRoleReplica, Reason: fmt.Sprintf("replicating, lag %s", rep.lag)}
}
