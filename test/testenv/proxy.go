package testenv

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// toxiServer is the in-process toxiproxy "server" every Proxy hangs off; the
// HTTP API is never started.
var (
	toxiOnce   sync.Once
	toxiServer *toxiproxy.ApiServer
)

// Proxy is a TCP fault proxy for one link (daemon→site, replica→primary,
// sidecar→daemon, ...), built on Shopify toxiproxy used as a library.
// Point the client at Addr() instead of the upstream.
type Proxy struct {
	Name     string // label given to NewProxy
	Upstream string // "host:port" the proxy forwards to

	t     T
	mu    sync.Mutex
	proxy *toxiproxy.Proxy
	addr  string
	cut   bool
}

// NewProxy starts a proxy on a free 127.0.0.1 port forwarding to upstream
// ("host:port"); closed at t's cleanup.
func NewProxy(t T, name, upstream string) *Proxy {
	t.Helper()
	toxiOnce.Do(func() {
		toxiServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	})
	p := toxiproxy.NewProxy(toxiServer, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("testenv: start proxy %s → %s: %v", name, upstream, err)
	}
	px := &Proxy{Name: name, Upstream: upstream, t: t, proxy: p, addr: p.Listen}
	t.Cleanup(p.Stop)
	return px
}

// Retarget makes the proxy forward new connections to upstream instead,
// on the same address (existing connections are dropped): a test points a
// client at an impostor without reconfiguring it.
func (p *Proxy) Retarget(upstream string) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.proxy.Stop()
	p.proxy.Upstream = upstream
	p.Upstream = upstream
	if p.cut {
		return
	}
	if err := p.proxy.Start(); err != nil {
		p.t.Fatalf("testenv: retarget proxy %s on %s to %s: %v", p.Name, p.addr, upstream, err)
	}
}

// Addr returns the proxy's "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.addr }

// Host returns "127.0.0.1".
func (p *Proxy) Host() string { h, _, _ := net.SplitHostPort(p.addr); return h }

// Port returns the proxy's port.
func (p *Proxy) Port() int {
	_, port, _ := net.SplitHostPort(p.addr)
	n, _ := strconv.Atoi(port)
	return n
}

// Cut drops every existing connection and closes the listener, so new
// connections are refused, until Restore.
func (p *Proxy) Cut() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.proxy.Stop()
	p.cut = true
}

// Blackhole keeps accepting connections but never delivers a byte in
// either direction (toxiproxy's timeout toxic with timeout 0), for existing
// and new connections, until Restore: the peer sees a hang, not an error.
func (p *Proxy) Blackhole() {
	p.t.Helper()
	for _, dir := range []string{"upstream", "downstream"} {
		name := "blackhole_" + dir
		_ = p.proxy.Toxics.RemoveToxic(context.Background(), name) // idempotent
		p.addToxic(name, "timeout", dir, `{"timeout":0}`)
	}
}

// Latency delays every chunk of data by d in each direction, so a
// request/response round trip gains about 2*d. Calling it again replaces d.
func (p *Proxy) Latency(d time.Duration) {
	p.t.Helper()
	ms := d.Milliseconds()
	for _, dir := range []string{"upstream", "downstream"} {
		name := "latency_" + dir
		_ = p.proxy.Toxics.RemoveToxic(context.Background(), name)
		p.addToxic(name, "latency", dir, fmt.Sprintf(`{"latency":%d}`, ms))
	}
}

// Restore removes every toxic and, after Cut, listens again on the same port.
func (p *Proxy) Restore() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.proxy.Toxics.ResetToxics(context.Background())
	if p.cut {
		// Same port: clients keep their configured address across the cut.
		if err := p.proxy.Start(); err != nil {
			p.t.Fatalf("testenv: restore proxy %s on %s: %v", p.Name, p.addr, err)
		}
		p.cut = false
	}
}

func (p *Proxy) addToxic(name, typ, stream, attrs string) {
	p.t.Helper()
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		p.t.Fatalf("testenv: proxy %s: add %s toxic: %v", p.Name, typ, err)
	}
}
