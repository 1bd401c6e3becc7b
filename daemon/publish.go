package daemon

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/failoverd/failoverd/readers"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/view"
)

// publisher holds the latest signed view of every group.
type publisher struct {
	key []byte

	mu    sync.RWMutex
	views map[string]view.Signed
	// seqs is the last view.View.Seq issued per group; kept when a group
	// is removed or rebuilt, so its next view still orders after the last.
	seqs map[string]uint64
	// next is closed and replaced at each publish of the group: a sidecar's
	// held watch waits on it (see view.Watch).
	next map[string]chan struct{}
}

// watch returns the group's published view and a channel closed at its
// next publish (or removal), taken together.
func (p *publisher) watch(group string) (view.Signed, bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == nil {
		p.next = map[string]chan struct{}{}
	}
	ch, ok := p.next[group]
	if !ok {
		ch = make(chan struct{})
		p.next[group] = ch
	}
	s, has := p.views[group]
	return s, has, ch
}

// wakeLocked wakes the group's watchers (p.mu held).
func (p *publisher) wakeLocked(group string) {
	if ch, ok := p.next[group]; ok {
		close(ch)
		delete(p.next, group)
	}
}

// set stamps v with the group's next Seq (its IssuedAt in Unix
// milliseconds, kept strictly above the last one issued), signs and
// publishes it.
func (p *publisher) set(v view.View) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seqs == nil {
		p.seqs = map[string]uint64{}
	}
	// Prevents a gossiped older view of the same epoch from undoing newer
	// read exclusions (sidecars order same-epoch views by Seq), also when
	// two publishes fall in one millisecond or the clock steps back.
	v.Seq = max(p.seqs[v.Group]+1, uint64(max(v.IssuedAt.UnixMilli(), 0)))
	p.seqs[v.Group] = v.Seq
	var s view.Signed
	if len(p.key) > 0 {
		signed, err := view.Sign(v, p.key)
		if err != nil {
			return // unreachable: the key is non-empty
		}
		s = signed
	} else {
		s = view.Signed{View: v}
	}
	if p.views == nil {
		p.views = map[string]view.Signed{}
	}
	p.views[v.Group] = s
	p.wakeLocked(v.Group)
}

// remove drops a group's view (a reload removed the group).
func (p *publisher) remove(group string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.views, group)
	p.wakeLocked(group)
}

func (p *publisher) get(group string) (view.Signed, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s, ok := p.views[group]
	return s, ok
}

// publish signs and publishes the group's current view: the persisted one,
// or the one naming the target of a promotion about to make it writable,
// with the sites withheld from reads (noReadsLocked). Routing and the cache
// only follow a completed promotion.
func (g *group) publish() {
	now := g.now()
	g.mu.Lock()
	v := view.View{Group: g.cfg.Name, Epoch: g.rec.Epoch, ActiveSite: g.rec.ActiveSite, IssuedAt: now}
	served := v
	if f := g.rec.InFlight; f != nil && f.PublishedTo != "" {
		served.Epoch, served.ActiveSite = f.PublishedEpoch, f.PublishedTo
	}
	served.NoReads = g.noReadsLocked(g.readSites, now)
	before := g.noReads
	g.noReads = served.NoReads
	g.mu.Unlock()
	g.pub.set(served)
	if !maps.Equal(served.NoReads, before) {
		g.log.Info("view.no_reads_changed", "epoch", served.Epoch, "no_reads", served.NoReads, "before", before)
	}
	g.follow.want(v)
}

// noReadsLocked is what the view withholds from reads (g.mu held): the
// sites readers.Withheld gives for the persisted record at now, each
// site's reason from sites (the last round's observations; without them,
// the record's reasons only). Nil for an observing group, which changes
// no view.
func (g *group) noReadsLocked(sites []sitepair.SiteObservation, now time.Time) map[string]string {
	if g.observing() {
		return nil
	}
	if sites == nil {
		// No round yet (a start, a new leader): the record's reasons hold
		// already, and a view without them would lift them for a round.
		for _, s := range g.cfg.Sites {
			sites = append(sites, sitepair.SiteObservation{Name: s.Name})
		}
	}
	return readers.Withheld(sites, g.rec.Persisted, now)
}

// refreshNoReads records a round's observations for the read exclusions
// and republishes the view when the sites it withholds from reads changed
// (a site found diverged, a hold placed or ended, a replica repointed), so
// each site's sidecar answers its load balancer's read checks accordingly.
func (g *group) refreshNoReads(o sitepair.Observed) {
	now := g.now()
	g.mu.Lock()
	g.readSites = slices.Clone(o.Sites)
	changed := !maps.Equal(g.noReadsLocked(g.readSites, now), g.noReads)
	g.mu.Unlock()
	if changed {
		g.publish()
	}
}
