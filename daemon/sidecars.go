package daemon

import (
	"maps"
	"sync"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/view"
)

// sidecars keeps the latest report of every sidecar of a group, stamped
// with the daemon's clock at receipt (never the sidecar's).
type sidecars struct {
	mu         sync.Mutex
	configured map[string]bool
	latest     map[string]sitepair.SidecarObservation
	boots      map[string]string // site → boot of its latest report
	// tokens are the receipts this daemon gave each site's latest reports
	// (see view.Answer.Token), newest last.
	tokens map[string][]token
}

// token is one receipt: issued at at (daemon clock) to a report of boot.
type token struct {
	id, boot string
	at       time.Time
}

// keptTokens bounds the receipts remembered per site: a sidecar echoes the
// newest it received, and answers may arrive out of order.
const keptTokens = 8

func newSidecars(g configs.Group) *sidecars {
	s := &sidecars{configured: map[string]bool{}, latest: map[string]sitepair.SidecarObservation{},
		boots: map[string]string{}, tokens: map[string][]token{}}
	for _, site := range g.Sites {
		s.configured[site.Name] = site.Sidecar != nil
	}
	return s
}

// known reports whether site is one of the group's sites with a sidecar.
func (s *sidecars) known(site string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.configured[site]
}

// record stores r as received at at. It reports whether r carries an exit
// of mysqld that the site's previous report did not (a new exit: the loop
// should decide, and the other sites be probed, now), and whether r changed
// what a decision reads of the sidecar (its epoch, its fence, mysqld down,
// a new boot: a failover waiting for a proof or for the target's sidecar
// should decide now, not at its next tick).
func (s *sidecars) record(r view.Report, at time.Time) (newExit, changed bool) {
	o := sitepair.SidecarObservation{
		Configured: true, LastReport: at, Epoch: r.Epoch, EpochSince: at, FencedEpoch: r.FencedEpoch, MysqldDown: r.MySQLdDown, CanKill: r.CanKill,
	}
	for peer, p := range r.Peers {
		if o.Served == nil {
			o.Served = map[string]sitepair.Served{}
		}
		// The serving happened at least ServedAgoMs before the report was
		// sent, which is before it arrived: an upper bound on our clock.
		o.Served[peer] = sitepair.Served{At: at.Add(-time.Duration(max(p.ServedAgoMs, 0)) * time.Millisecond), Epoch: p.ServedEpoch}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, seen := s.latest[r.Site]
	// A new boot starts without a view: what the previous one held (its
	// epoch since when, its servings) says nothing about this one.
	sameBoot := seen && s.boots[r.Site] == r.Boot
	if sameBoot && prev.Epoch == r.Epoch {
		o.EpochSince = prev.EpochSince
	}
	if sameBoot {
		o.AliveAt = prev.AliveAt
	}
	if x := r.MySQLdExit; x != nil && x.PID > 0 {
		o.Exit = sitepair.MysqldExit{PID: x.PID, Start: x.StartTicks,
			// Sent at least AgoMs after the exit, received after it was sent.
			At: at.Add(-time.Duration(max(x.AgoMs, 0)) * time.Millisecond)}
		// The same exit told again keeps its first bound: a later one would
		// let a probe that reached a restarted mysqld in between pass for
		// one before the exit.
		if sameBoot && prev.Exit.PID == x.PID && prev.Exit.Start == x.StartTicks && prev.Exit.At.Before(o.Exit.At) {
			o.Exit.At = prev.Exit.At
		}
		newExit = !sameBoot || prev.Exit.PID != x.PID || prev.Exit.Start != x.StartTicks
	}
	if r.Boot != "" {
		for _, t := range s.tokens[r.Site] {
			if t.id == r.Echo && t.boot == r.Boot && t.at.After(o.AliveAt) {
				o.AliveAt = t.at
			}
		}
	}
	changed = !sameBoot || prev.Epoch != o.Epoch || prev.FencedEpoch != o.FencedEpoch || prev.MysqldDown != o.MysqldDown
	s.boots[r.Site] = r.Boot
	s.latest[r.Site] = o
	return newExit, changed
}

// issue returns a new receipt for site's report of boot received at at.
func (s *sidecars) issue(site, boot string, at time.Time) string {
	if boot == "" {
		return "" // a sidecar of an older version echoes nothing
	}
	id := view.NewNonce()
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := append(s.tokens[site], token{id: id, boot: boot, at: at})
	if len(ts) > keptTokens {
		ts = ts[len(ts)-keptTokens:]
	}
	s.tokens[site] = ts
	return id
}

// observation returns what the daemon knows of site's sidecar.
func (s *sidecars) observation(site string) sitepair.SidecarObservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.configured[site] {
		return sitepair.SidecarObservation{}
	}
	o, ok := s.latest[site]
	if !ok {
		return sitepair.SidecarObservation{Configured: true}
	}
	o.Served = maps.Clone(o.Served)
	return o
}
