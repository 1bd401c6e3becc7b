package daemon

import (
	"context"
	"fmt"
	"sync"

	"github.com/failoverd/failoverd/configs"
)

// connections keeps one admin Instance per site, opened on demand and
// dropped after an error so the next action redials.
type connections struct {
	dial  Dialer
	sites map[string]configs.Site

	mu    sync.Mutex
	conns map[string]Instance
}

func newConnections(dial Dialer, sites []configs.Site) *connections {
	m := make(map[string]configs.Site, len(sites))
	for _, s := range sites {
		m[s.Name] = s
	}
	return &connections{dial: dial, sites: m, conns: map[string]Instance{}}
}

func (c *connections) get(ctx context.Context, site string) (Instance, error) {
	c.mu.Lock()
	in, ok := c.conns[site]
	s, known := c.sites[site]
	c.mu.Unlock()
	if ok {
		return in, nil
	}
	if !known {
		return nil, fmt.Errorf("site %q is not configured", site)
	}
	// Dial without the lock: a hung site must not hold up the others
	// (a failover fences one and detaches the rest at the same time).
	in, err := c.dial(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", site, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.conns[site]; ok {
		_ = in.Close() // lost a race with another dial: keep one
		return cur, nil
	}
	c.conns[site] = in
	return in, nil
}

// drop closes and forgets site's connection after a failed operation.
func (c *connections) drop(site string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in, ok := c.conns[site]; ok {
		_ = in.Close() // the connection is suspect; nothing to do with its error
		delete(c.conns, site)
	}
}

func (c *connections) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, in := range c.conns {
		_ = in.Close() // shutting down
		delete(c.conns, name)
	}
}

// do runs op on site's Instance, dropping the connection when op fails.
func (c *connections) do(ctx context.Context, site string, op func(Instance) error) error {
	in, err := c.get(ctx, site)
	if err != nil {
		return err
	}
	if err := op(in); err != nil {
		c.drop(site)
		return err
	}
	return nil
}
