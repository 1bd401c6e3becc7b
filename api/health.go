package api

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/failoverd/failoverd/status"
)

// Health roles (?role=): what a load balancer asks a site to be.
const (
	HealthRolePrimary = "primary"
	HealthRoleReplica = "replica"
	HealthRoleAny     = "any"
)

// Health statuses (HealthAnswer.Status).
const (
	HealthOK          = "ok"
	HealthUnavailable = "unavailable"
)

// HealthAnswer is the one-line JSON body of a health check, on the daemon
// (GET /v1/groups/{g}/sites/{s}/health) and on a sidecar (GET /health):
// Status is HealthOK (200) or HealthUnavailable (503); Role is the role
// the site passed as, or the one it was checked for; Reason says why, in
// words.
type HealthAnswer struct {
	Status string `json:"status"`
	Role   string `json:"role"`
	Reason string `json:"reason"`
}

// OK reports whether the answer lets the site serve.
func (h HealthAnswer) OK() bool { return h.Status == HealthOK }

// HealthQuery is a health check's parameters.
type HealthQuery struct {
	// Role is HealthRolePrimary, HealthRoleReplica or HealthRoleAny.
	Role string
	// MaxLag bounds a replica's lag when HasMaxLag (the request gave
	// one; maxLag=0s asks for no lag at all).
	MaxLag    time.Duration
	HasMaxLag bool
}

// ParseHealthQuery reads ?role= (default any) and ?maxLag= (a Go
// duration, e.g. 5s): an error wraps ErrBadRequest and names the field.
func ParseHealthQuery(q url.Values) (HealthQuery, error) {
	h := HealthQuery{Role: q.Get("role")}
	switch h.Role {
	case "":
		h.Role = HealthRoleAny
	case HealthRolePrimary, HealthRoleReplica, HealthRoleAny:
	default:
		return h, fmt.Errorf("%w: role %q: want primary, replica or any", ErrBadRequest, h.Role)
	}
	if text := q.Get("maxLag"); text != "" {
		d, err := time.ParseDuration(text)
		if err != nil || d < 0 {
			return h, fmt.Errorf("%w: maxLag %q: want a non-negative duration such as 5s", ErrBadRequest, text)
		}
		h.MaxLag, h.HasMaxLag = d, true
	}
	return h, nil
}

// Answer combines a primary and a replica verdict into the answer for q's
// role: any passes when either passes (primary first).
func (q HealthQuery) Answer(primary, replica func() HealthAnswer) HealthAnswer {
	switch q.Role {
	case HealthRolePrimary:
		return primary()
	case HealthRoleReplica:
		return replica()
	}
	p := primary()
	if p.OK() {
		return p
	}
	r := replica()
	if r.OK() {
		return r
	}
	return HealthAnswer{Status: HealthUnavailable, Role: HealthRoleAny, Reason: "primary: " + p.Reason + "; replica: " + r.Reason}
}

// WriteHealth writes h as 200 (ok) or 503 with a one-line JSON body that
// no cache keeps.
func WriteHealth(w http.ResponseWriter, h HealthAnswer) {
	code := http.StatusServiceUnavailable
	if h.OK() {
		code = http.StatusOK
	}
	// A cached 200 would keep a deposed primary in the pool.
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, code, h)
}

// HealthSource is implemented by a Control that can give one group's
// status cheaper than a whole Snapshot (the daemon: without the readiness
// a status read computes); the health check uses it when present.
type HealthSource interface {
	// HealthGroup is group name as Snapshot would list it (Readiness may
	// be left out), whether this daemon leads, and whether the group exists.
	HealthGroup(name string) (g status.Group, leading, ok bool)
}

// healthGroup is the group a health check reads and whether this daemon
// leads.
func (s *server) healthGroup(name string) (status.Group, bool, bool) {
	if hs, ok := s.Control.(HealthSource); ok {
		return hs.HealthGroup(name)
	}
	snap := s.Control.Snapshot()
	g, ok := snap.Group(name)
	return g, snap.Daemon.Leader, ok
}

// health answers a load balancer from the published snapshot only: no
// SQL, no store read, no forwarding, so polling every daemon replica
// often stays cheap.
func (s *server) health(w http.ResponseWriter, r *http.Request) {
	q, err := ParseHealthQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	g, leading, ok := s.healthGroup(r.PathValue("group"))
	if !ok {
		writeError(w, http.StatusNotFound, "unknown group "+r.PathValue("group"))
		return
	}
	site, ok := g.Site(r.PathValue("site"))
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown site %s in group %s", r.PathValue("site"), g.Name))
		return
	}
	// A follower's snapshot is not the current state (it neither probes
	// nor decides): it must not vouch for a primary, and forwarding would
	// make a health check as slow as the leader's network path.
	if !leading {
		WriteHealth(w, HealthAnswer{Status: HealthUnavailable, Role: q.Role, Reason: "not the leader: poll the leading daemon or the site's sidecar"})
		return
	}
	WriteHealth(w, SiteHealth(g, site, q))
}

// SiteHealth is the daemon's health answer for site of g, from the
// snapshot alone.
func SiteHealth(g status.Group, site status.Site, q HealthQuery) HealthAnswer {
	return q.Answer(func() HealthAnswer { return primaryHealth(g, site) }, func() HealthAnswer { return replicaHealth(g, site, q) })
}

// primaryHealth: 200 only for the recorded active site, writable when last
// observed, with no failover in flight (whose revoked epoch names no
// active site).
func primaryHealth(g status.Group, s status.Site) HealthAnswer {
	no := func(why string) HealthAnswer {
		return HealthAnswer{Status: HealthUnavailable, Role: HealthRolePrimary, Reason: why}
	}
	switch {
	case g.InFlight != nil:
		// The epoch is revoked: the old primary may be fenced any moment
		// and the new one is not writable yet.
		return no(fmt.Sprintf("%s in flight from %s to %s (epoch %d revoked)", g.InFlight.Kind, g.InFlight.From, g.InFlight.To, g.Epoch))
	case g.ActiveSite == "":
		return no(fmt.Sprintf("no active site recorded at epoch %d", g.Epoch))
	case g.ActiveSite != s.Name:
		// A site that still accepts writes but is not the recorded primary
		// is split brain, not a writer.
		return no(fmt.Sprintf("not the active site (%s is, epoch %d)", g.ActiveSite, g.Epoch))
	case s.State != status.StateWritable:
		return no(fmt.Sprintf("active site but %s when last probed", s.State))
	}
	return HealthAnswer{Status: HealthOK, Role: HealthRolePrimary, Reason: fmt.Sprintf("active site, writable, epoch %d", g.Epoch)}
}

// replicaHealth follows the reader decision (status.Site.Reader) when the
// daemon computes one; without it, a site read-only and replicating from
// the active site with both threads running and its lag known.
func replicaHealth(g status.Group, s status.Site, q HealthQuery) HealthAnswer {
	no := func(why string) HealthAnswer {
		return HealthAnswer{Status: HealthUnavailable, Role: HealthRoleReplica, Reason: why}
	}
	// The view's safety exclusions hold with or without read routing: a
	// diverged replica serves rows the group never committed.
	if s.ReadsWithheld != "" {
		return no("withheld from reads by the daemon's view: " + s.ReadsWithheld)
	}
	lag := -1.0
	why := ""
	if r := s.Reader; r != nil {
		if !r.Eligible {
			return no("not a reader: " + r.Why)
		}
		lag, why = r.LagSeconds, r.Why
	} else {
		rep := s.Replication
		switch {
		case s.State != status.StateReadOnly:
			return no(fmt.Sprintf("%s when last probed, not read-only", s.State))
		case g.ActiveSite == "" || s.ReplicatingFrom != g.ActiveSite:
			// A replica of a deposed primary serves what the group lost.
			return no(fmt.Sprintf("replicating from %q, not from the active site %q", s.ReplicatingFrom, g.ActiveSite))
		case rep == nil || !rep.IORunning || !rep.SQLRunning || rep.Broken:
			return no("replication threads not both running")
		case !rep.LagKnown:
			return no("lag unknown")
		}
		lag = max(rep.LagSeconds, rep.GTIDLagSeconds)
		why = fmt.Sprintf("replicating from %s, lag %gs", s.ReplicatingFrom, lag)
	}
	if q.HasMaxLag {
		switch {
		case lag < 0:
			// An unknown lag may be any lag.
			return no(fmt.Sprintf("lag unknown, maxLag %s asked", q.MaxLag))
		case lag > q.MaxLag.Seconds():
			return no(fmt.Sprintf("lag %gs over maxLag %s", lag, q.MaxLag))
		}
	}
	return HealthAnswer{Status: HealthOK, Role: HealthRoleReplica, Reason: why}
}
