package daemon

import (
	"maps"
	"sync"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/sidecar"
	"github.com/failoverd/failoverd/sitepair"
)

// sidecars keeps the latest report of every sidecar of a group, stamped
// with the daemon's clock at receipt (never the sidecar's).
type sidecars struct {
	mu         sync.Mutex
	configured map[string]bool
	latest     map[string]sitepair.SidecarObservation
}

func newSidecars(g configs.Group) *sidecars {
	s := &sidecars{configured: map[string]bool{}, latest: map[string]sitepair.SidecarObservation{}}
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

// record stores r as received at at.
func (s *sidecars) record(r sidecar.Report, at time.Time) {
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
	if prev, ok := s.latest[r.Site]; ok && prev.Epoch == r.Epoch {
		o.EpochSince = prev.EpochSince
	}
	s.latest[r.Site] = o
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
