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

func (p *publisher) get(group string) (view.Signed, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s, ok := p.views[group]
	return s, ok
}
