package daemon

import (
	"sync"

	"github.com/failoverd/failoverd/view"
)

// publisher holds the latest signed view of every group.
type publisher struct {
	key []byte

	mu    sync.RWMutex
	views map[string]view.Signed
}

func (p *publisher) set(v view.View) {
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
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.views == nil {
		p.views = map[string]view.Signed{}
	}
	p.views[v.Group] = s
}

// remove drops a group's view (a reload removed the group).
func (p *publisher) remove(group string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.views, group)
}

func (p *publisher) get(group string) (view.Signed, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s, ok := p.views[group]
	return s, ok
}

// publish signs and publishes the group's current view: the persisted one,
// or the one naming the target of a promotion about to make it writable.
// Routing and the cache only follow a completed promotion.
func (g *group) publish() {
	g.mu.Lock()
	v := view.View{Group: g.cfg.Name, Epoch: g.rec.Epoch, ActiveSite: g.rec.ActiveSite, IssuedAt: g.now()}
	served := v
	if f := g.rec.InFlight; f != nil && f.PublishedTo != "" {
		served.Epoch, served.ActiveSite = f.PublishedEpoch, f.PublishedTo
	}
	g.mu.Unlock()
	g.pub.set(served)
	g.follow.want(v)
}
