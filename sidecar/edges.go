package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/view"
)

// MySQL is the local server as the sidecar uses it; *mysqlctl.Instance
// satisfies it, and DialMySQL returns one that connects lazily.
type MySQL interface {
	Status(ctx context.Context) (mysqlctl.Status, error)
	Fence(ctx context.Context) error
	KillClientConnections(ctx context.Context) (int, error)
	Promote(ctx context.Context) error
}

// DaemonClient sends a report to the daemon and returns the view it answers.
type DaemonClient interface {
	// Report sends body (a JSON view.Report carrying the round's nonce) with its
	// signature and returns the daemon's answer: its signed view, bound to
	// the nonce by a daemon that knows bindings.
	Report(ctx context.Context, body []byte, signature string) (view.Answer, error)
}

// DaemonWatcher is a DaemonClient that can hold a watch at the daemon (see
// view.Watch): Watch sends body (a JSON view.Watch) with its signature and
// returns once the daemon answers; ErrWatchUnsupported from a daemon
// without watches.
type DaemonWatcher interface {
	Watch(ctx context.Context, body []byte, signature string) (view.WatchAnswer, error)
}

// ErrWatchUnsupported: the daemon answered 404 on view.WatchPath (a version
// without watches); the sidecar relies on its rounds alone.
var ErrWatchUnsupported = errors.New("the daemon holds no sidecar watches")

// PeerClient asks a peer sidecar for the newest view it holds.
type PeerClient interface {
	// ActiveSite GETs /peer/active-site?from=from&nonce=nonce and returns
	// the peer's answer (bound to the nonce by a peer that knows bindings
	// and has from among its peers); ErrNoView on 404.
	ActiveSite(ctx context.Context, peer Peer, from, nonce string) (view.Answer, error)
}

// Killer SIGKILLs the local mysqld.
type Killer interface {
	// CanKill reports whether a kill could be attempted (pid file configured
	// and readable).
	CanKill() bool
	// Kill SIGKILLs mysqld and waits (within ctx) until it is gone; it
	// returns the pid, or ErrNoProcess when none runs.
	Kill(ctx context.Context) (int, error)
	// Gone reports whether mysqld provably does not run (false when it
	// cannot tell): only then may a failed status read be reported as
	// "mysqld down", a proof the daemon promotes on.
	Gone() bool
}

// Clock is the monotonic clock and timers; tests inject a fake one.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is a stoppable one-shot timer.
type Timer interface {
	C() <-chan time.Time
	Stop()
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop()               { t.t.Stop() }

// maxBody bounds what the sidecar reads from a daemon or peer answer.
const maxBody = 64 << 10

// httpDaemon is the DaemonClient over HTTP.
type httpDaemon struct {
	urls    []string
	client  *http.Client
	timeout time.Duration // per attempt

	mu   sync.Mutex
	last int // index of the URL that last answered 200: tried first
}

func (d *httpDaemon) Report(ctx context.Context, body []byte, signature string) (view.Answer, error) {
	if len(d.urls) == 0 {
		return view.Answer{}, fmt.Errorf("report: %w: no daemon URL configured", ErrNoLeader)
	}
	d.mu.Lock()
	first := d.last
	d.mu.Unlock()
	var errs []error
	for n := range d.urls {
		i := (first + n) % len(d.urls)
		a, err := d.try(ctx, d.urls[i], body, signature)
		if err == nil {
			d.mu.Lock()
			d.last = i
			d.mu.Unlock()
			return a, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return view.Answer{}, fmt.Errorf("report: %w: %w", ErrNoLeader, errors.Join(errs...))
}

func (d *httpDaemon) try(ctx context.Context, base string, body []byte, signature string) (view.Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+view.ReportPath, bytes.NewReader(body))
	if err != nil {
		return view.Answer{}, fmt.Errorf("%s: build request: %w", base, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(view.SignatureHeader, signature)
	a, err := doView(d.client, req)
	if err != nil {
		return view.Answer{}, fmt.Errorf("%s: %w", base, err)
	}
	return a, nil
}

// Watch implements DaemonWatcher on the URL that last answered a report
// (the leader): a watch is never forwarded between daemons.
func (d *httpDaemon) Watch(ctx context.Context, body []byte, signature string) (view.WatchAnswer, error) {
	if len(d.urls) == 0 {
		return view.WatchAnswer{}, fmt.Errorf("watch: %w: no daemon URL configured", ErrNoLeader)
	}
	d.mu.Lock()
	base := d.urls[d.last]
	d.mu.Unlock()
	// Held up to view.MaxWatchWait by the daemon, then one attempt's time.
	ctx, cancel := context.WithTimeout(ctx, view.MaxWatchWait*time.Millisecond+d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+view.WatchPath, bytes.NewReader(body))
	if err != nil {
		return view.WatchAnswer{}, fmt.Errorf("watch %s: build request: %w", base, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(view.SignatureHeader, signature)
	resp, err := d.client.Do(req)
	if err != nil {
		return view.WatchAnswer{}, fmt.Errorf("watch %s: %w", base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return view.WatchAnswer{}, fmt.Errorf("watch %s: read answer: %w", base, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return view.WatchAnswer{}, fmt.Errorf("watch %s: %w (%d: %s)", base, ErrWatchUnsupported, resp.StatusCode, strings.TrimSpace(string(b)))
	default:
		return view.WatchAnswer{}, fmt.Errorf("watch %s: status %d: %s", base, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var a view.WatchAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return view.WatchAnswer{}, fmt.Errorf("watch %s: malformed answer: %w", base, err)
	}
	return a, nil
}

// httpPeers is the PeerClient over HTTP (HTTPS with Options.PeerHTTPClient
// from PeerTLSFiles.Load).
type httpPeers struct {
	client  *http.Client
	timeout time.Duration
}

func (p *httpPeers) ActiveSite(ctx context.Context, peer Peer, from, nonce string) (view.Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	u := strings.TrimSuffix(peer.URL, "/") + "/peer/active-site?" + url.Values{"from": {from}, "nonce": {nonce}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return view.Answer{}, fmt.Errorf("peer %s: build request: %w", peer.Site, err)
	}
	a, err := doView(p.client, req)
	if err != nil {
		return view.Answer{}, fmt.Errorf("peer %s: %w", peer.Site, err)
	}
	return a, nil
}

// doView sends req and decodes a 200 answer as a signed view with its
// binding, if any; 404 is ErrNoView.
func doView(c *http.Client, req *http.Request) (view.Answer, error) {
	resp, err := c.Do(req)
	if err != nil {
		return view.Answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return view.Answer{}, fmt.Errorf("read answer: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return view.Answer{}, fmt.Errorf("%w (404: %s)", ErrNoView, strings.TrimSpace(string(b)))
	default:
		return view.Answer{}, fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var a view.Answer
	if err := json.Unmarshal(b, &a); err != nil || a.Signature == "" {
		return view.Answer{}, fmt.Errorf("%w: %v", ErrMalformedView, err)
	}
	return a, nil
}

// lazyMySQL opens its mysqlctl.Instance on first use and retries the open on
// later calls while it fails, so the sidecar can start before mysqld.
type lazyMySQL struct {
	opts mysqlctl.Options
	sem  chan struct{} // held while opening; waits respect contexts

	inst *mysqlctl.Instance // guarded by sem
}

// DialMySQL returns a MySQL for opts that connects on first use (and again
// after a failed attempt). Close it with CloseMySQL.
func DialMySQL(opts mysqlctl.Options) MySQL {
	return &lazyMySQL{opts: opts, sem: make(chan struct{}, 1)}
}

// CloseMySQL closes a MySQL from DialMySQL (or anything with Close).
func CloseMySQL(m MySQL) error {
	if c, ok := m.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

func (l *lazyMySQL) get(ctx context.Context) (*mysqlctl.Instance, error) {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-l.sem }()
	if l.inst != nil {
		return l.inst, nil
	}
	inst, err := mysqlctl.Open(ctx, l.opts)
	if err != nil {
		return nil, err
	}
	l.inst = inst
	return inst, nil
}

func (l *lazyMySQL) Status(ctx context.Context) (mysqlctl.Status, error) {
	i, err := l.get(ctx)
	if err != nil {
		return mysqlctl.Status{}, err
	}
	return i.Status(ctx)
}

func (l *lazyMySQL) Fence(ctx context.Context) error {
	i, err := l.get(ctx)
	if err != nil {
		return err
	}
	return i.Fence(ctx)
}

func (l *lazyMySQL) KillClientConnections(ctx context.Context) (int, error) {
	i, err := l.get(ctx)
	if err != nil {
		return 0, err
	}
	return i.KillClientConnections(ctx)
}

func (l *lazyMySQL) Promote(ctx context.Context) error {
	i, err := l.get(ctx)
	if err != nil {
		return err
	}
	return i.Promote(ctx)
}

func (l *lazyMySQL) Close() error {
	l.sem <- struct{}{}
	defer func() { <-l.sem }()
	if l.inst == nil {
		return nil
	}
	err := l.inst.Close()
	l.inst = nil
	return err
}
