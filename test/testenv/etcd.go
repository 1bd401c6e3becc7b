package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdClusterOptions configures StartEtcdClusterWith.
type EtcdClusterOptions struct {
	// ProxiedPeers puts an in-process proxy in front of every member's peer
	// URL (the URL the other members dial), so EtcdMember.Isolate can cut
	// one member off the quorum while its client URL keeps answering.
	ProxiedPeers bool
	// ExtraArgs are appended to every member's etcd command line.
	ExtraArgs []string
}

// EtcdCluster is a cluster of real etcd members on 127.0.0.1 started by
// StartEtcdCluster: one member per site, named site0, site1, ...
type EtcdCluster struct {
	Members []*EtcdMember

	peers *peerNet // nil without ProxiedPeers
}

// EtcdMember is one etcd process of an EtcdCluster. Its data dir, client
// port and peer port are kept across Kill and Restart.
type EtcdMember struct {
	Name string // "site0", "site1", ...

	idx        int
	cluster    *EtcdCluster
	dir        string // testenv run dir: log, owner and children records
	dataDir    string
	log        string
	clientPort int
	peerPort   int    // the port etcd listens on for peers
	peerURL    string // the URL the other members dial (the proxy's with ProxiedPeers)
	args       []string

	mu   sync.Mutex
	proc *process
}

// etcdHeartbeat and etcdElection are the raft timings of every member
// (milliseconds): short, so a lost leader is replaced within about a second.
const (
	etcdHeartbeat = 50
	etcdElection  = 500
)

var etcdClusters atomic.Int64

// StartEtcdCluster starts n etcd members (etcd from BinDir(), see
// scripts/deps) forming one cluster, each with its own data dir and client
// and peer ports, --unsafe-no-fsync and short raft timings, and returns
// once every member answers /health. Everything is removed at t's cleanup.
func StartEtcdCluster(t T, n int) *EtcdCluster {
	t.Helper()
	return StartEtcdClusterWith(t, n, EtcdClusterOptions{})
}

// StartEtcdClusterWith is StartEtcdCluster with options.
func StartEtcdClusterWith(t T, n int, opts EtcdClusterOptions) *EtcdCluster {
	t.Helper()
	skipIfShort(t)
	c, err := startEtcdCluster(t, n, opts)
	if err != nil {
		t.Fatalf("testenv: start etcd cluster: %v", err)
	}
	return c
}

func startEtcdCluster(t T, n int, opts EtcdClusterOptions) (*EtcdCluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("%d members: want at least one", n)
	}
	bin, err := kubeBinary("etcd")
	if err != nil {
		return nil, err
	}
	c := &EtcdCluster{}
	if opts.ProxiedPeers {
		c.peers = &peerNet{isolated: map[int]bool{}, byURL: map[string]int{}, active: map[*peerRequest]struct{}{}}
		// Registered first, so it runs after the members are killed.
		t.Cleanup(c.peers.close)
	}
	for i := range n {
		dir, err := newRunDir()
		if err != nil {
			return nil, err
		}
		m := &EtcdMember{
			Name: fmt.Sprintf("site%d", i), idx: i, cluster: c, dir: dir,
			dataDir: filepath.Join(dir, "data"), log: filepath.Join(dir, "etcd.log"),
		}
		t.Cleanup(func() { removeDirOnceStopped(m.dir, m.current()) })
		if c.peers != nil {
			if m.peerURL, err = c.peers.listen(i); err != nil {
				return nil, err
			}
		}
		c.Members = append(c.Members, m)
	}
	token := fmt.Sprintf("testenv-%d-%d", os.Getpid(), etcdClusters.Add(1))
	for attempt := 1; ; attempt++ {
		err := c.bootstrap(bin, token, opts.ExtraArgs)
		if err == nil {
			return c, nil
		}
		for _, m := range c.Members {
			if p := m.current(); p != nil {
				_ = p.cleanup()
			}
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			return nil, err
		}
	}
}

// bootstrap starts every member of a new cluster on fresh ports and data
// dirs and waits until each is healthy.
func (c *EtcdCluster) bootstrap(bin, token string, extra []string) error {
	var initial []string
	for _, m := range c.Members {
		var err error
		if m.clientPort, err = pickPort(); err != nil {
			return err
		}
		if m.peerPort, err = pickPort(); err != nil {
			return err
		}
		if c.peers != nil {
			c.peers.retarget(m.idx, fmt.Sprintf("http://127.0.0.1:%d", m.peerPort))
		} else {
			m.peerURL = fmt.Sprintf("http://127.0.0.1:%d", m.peerPort)
		}
		initial = append(initial, m.Name+"="+m.peerURL)
		// A previous attempt's data names other ports: a new cluster starts empty.
		if err := os.RemoveAll(m.dataDir); err != nil {
			return fmt.Errorf("start etcd %s: %w", m.Name, err)
		}
		_ = os.Truncate(m.log, 0)
	}
	for _, m := range c.Members {
		m.args = append([]string{
			"--name=" + m.Name, "--data-dir=" + m.dataDir,
			"--listen-client-urls=" + m.ClientURL(), "--advertise-client-urls=" + m.ClientURL(),
			fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", m.peerPort),
			"--initial-advertise-peer-urls=" + m.peerURL,
			"--initial-cluster=" + strings.Join(initial, ","),
			"--initial-cluster-state=new", "--initial-cluster-token=" + token,
			fmt.Sprintf("--heartbeat-interval=%d", etcdHeartbeat),
			fmt.Sprintf("--election-timeout=%d", etcdElection),
			"--unsafe-no-fsync", "--log-level=warn",
		}, extra...)
		p, err := startProcess("etcd "+m.Name, m.log, bin, m.args...)
		if err != nil {
			return err
		}
		m.setProc(p)
	}
	// Members come up together: each waits for a quorum of the others.
	for _, m := range c.Members {
		if err := m.waitHealthy(context.Background(), 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// waitHealthy waits until the member answers /health with a leader.
func (m *EtcdMember) waitHealthy(ctx context.Context, timeout time.Duration) error {
	p := m.current()
	err := waitHTTP(ctx, p, timeout, func(ctx context.Context) error {
		return httpGetContains(ctx, http.DefaultClient, m.ClientURL()+"/health", "", `"health":"true"`)
	})
	if err == nil {
		return nil
	}
	tail := tailFile(m.log, 20)
	if isPortInUseLog(tail) {
		return fmt.Errorf("%w: etcd %s (client port %d, peer port %d)", errPortTaken, m.Name, m.clientPort, m.peerPort)
	}
	return fmt.Errorf("etcd %s: %w\n--- tail of %s ---\n%s", m.Name, err, m.log, tail)
}

// Endpoints returns every member's client URL, in member order.
func (c *EtcdCluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.ClientURL()
	}
	return out
}

// Client returns a client of every member (5 s dial timeout, no logging),
// closed at t's cleanup.
func (c *EtcdCluster) Client(t T) *clientv3.Client {
	t.Helper()
	return newEtcdClient(t, c.Endpoints()...)
}

// Client returns a client of this member only, closed at t's cleanup.
func (m *EtcdMember) Client(t T) *clientv3.Client {
	t.Helper()
	return newEtcdClient(t, m.ClientURL())
}

func newEtcdClient(t T, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("testenv: etcd client of %v: %v", endpoints, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// ClientURL returns "http://127.0.0.1:PORT", the member's client URL.
func (m *EtcdMember) ClientURL() string { return "http://" + m.ClientAddr() }

// ClientAddr returns "127.0.0.1:PORT", the member's client address (the
// upstream of a NewProxy in front of it; a client given only the proxy's
// address reaches this member through it).
func (m *EtcdMember) ClientAddr() string { return fmt.Sprintf("127.0.0.1:%d", m.clientPort) }

// PeerURL returns the URL the other members dial to reach this one (its
// peer proxy's with ProxiedPeers).
func (m *EtcdMember) PeerURL() string { return m.peerURL }

// DataDir returns the member's data dir.
func (m *EtcdMember) DataDir() string { return m.dataDir }

func (m *EtcdMember) current() *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

func (m *EtcdMember) setProc(p *process) {
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
}

// Kill sends SIGKILL and waits for the exit.
func (m *EtcdMember) Kill() error { return m.current().kill() }

// Stop sends SIGTERM and waits for the exit.
func (m *EtcdMember) Stop() error { return m.current().terminate(30 * time.Second) }

// Pause sends SIGSTOP: the member neither answers nor takes part in raft.
func (m *EtcdMember) Pause() error { return m.current().pause() }

// Resume sends SIGCONT.
func (m *EtcdMember) Resume() error { return m.current().resume() }

// Running reports whether the member's process runs (paused counts).
func (m *EtcdMember) Running() bool { return m.current().running() }

// Restart stops the member if it runs and starts it again with the same
// data dir and ports; it returns once the member answers /health, i.e. it
// rejoined the cluster and sees a leader (so with a majority down, restart
// the members concurrently). ctx bounds the wait.
func (m *EtcdMember) Restart(ctx context.Context) error {
	if p := m.current(); p != nil && p.running() {
		if err := p.terminate(30 * time.Second); err != nil && !errors.Is(err, ErrNotRunning) {
			return fmt.Errorf("restart etcd %s: %w", m.Name, err)
		}
	}
	bin, err := kubeBinary("etcd")
	if err != nil {
		return fmt.Errorf("restart etcd %s: %w", m.Name, err)
	}
	p, err := startProcess("etcd "+m.Name, m.log, bin, m.args...)
	if err != nil {
		return fmt.Errorf("restart etcd %s: %w", m.Name, err)
	}
	m.setProc(p)
	if err := m.waitHealthy(ctx, 60*time.Second); err != nil {
		return fmt.Errorf("restart etcd %s: %w", m.Name, err)
	}
	return nil
}

// Isolate cuts the member off every other member (needs ProxiedPeers): raft
// traffic between them is dropped, in both directions, existing
// connections included, until Heal. Its client URL keeps answering, so a
// client of this member sees what a daemon on a partitioned site sees: no
// leader, linearizable requests failing, its lease expiring elsewhere. A
// lease renewal the member forwards to the leader in the moment before it
// notices the partition (about one election timeout) may still pass: those
// requests do not name their sender.
func (m *EtcdMember) Isolate() error {
	if m.cluster.peers == nil {
		return fmt.Errorf("isolate etcd %s: the cluster was started without ProxiedPeers", m.Name)
	}
	m.cluster.peers.setIsolated(m.idx, true)
	return nil
}

// Heal undoes Isolate.
func (m *EtcdMember) Heal() error {
	if m.cluster.peers == nil {
		return fmt.Errorf("heal etcd %s: the cluster was started without ProxiedPeers", m.Name)
	}
	m.cluster.peers.setIsolated(m.idx, false)
	return nil
}

// peerNet is the set of peer proxies of a cluster started with
// ProxiedPeers. Each member's proxy forwards the HTTP requests the other
// members send it (raft streams, raft messages, snapshots, probes) to the
// member's real peer port. etcd names the sender of every raft request in
// X-PeerURLs (its advertised peer URLs, here the sender's proxy URL), which
// is what lets a proxy drop the traffic of one isolated member: a plain TCP
// proxy cannot, because a member receives the messages of a peer over
// connections it dialed itself as well as over connections the peer dialed.
type peerNet struct {
	mu       sync.Mutex
	isolated map[int]bool
	byURL    map[string]int // advertised peer URL → member index
	active   map[*peerRequest]struct{}
	proxies  []*peerProxy
}

type peerProxy struct {
	net    *peerNet
	idx    int
	srv    *http.Server
	rp     *httputil.ReverseProxy
	target atomic.Pointer[url.URL]
}

// peerRequest is one request being proxied; cancel aborts it.
type peerRequest struct {
	to, from int // member indexes; from is -1 when the request names no sender
	cancel   context.CancelFunc
}

// listen starts member idx's peer proxy and returns its URL.
func (n *peerNet) listen(idx int) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("peer proxy of member %d: %w", idx, err)
	}
	p := &peerProxy{net: n, idx: idx}
	tr := &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext, MaxIdleConnsPerHost: 16, DisableCompression: true}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(p.target.Load()) },
		Transport:     tr,
		FlushInterval: -1, // raft streams: every write goes through at once
		// A member down or a request cut looks like a network failure to
		// the sender (connection aborted), not like an HTTP error.
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) },
		ErrorLog:     log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{Handler: p, ErrorLog: log.New(io.Discard, "", 0), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	u := "http://" + ln.Addr().String()
	n.mu.Lock()
	n.byURL[u] = idx
	n.proxies = append(n.proxies, p)
	n.mu.Unlock()
	return u, nil
}

// retarget points member idx's proxy at its etcd's peer URL.
func (n *peerNet) retarget(idx int, upstream string) {
	u, _ := url.Parse(upstream)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.proxies[idx].target.Store(u)
}

func (p *peerProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	req := &peerRequest{to: p.idx, from: p.net.sender(r), cancel: cancel}
	if !p.net.admit(req) {
		panic(http.ErrAbortHandler) // closes the connection: the sender sees the network fail
	}
	defer p.net.done(req)
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// sender returns the member that sent r, from its X-PeerURLs header, or -1.
func (n *peerNet) sender(r *http.Request) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, u := range strings.Split(r.Header.Get("X-PeerURLs"), ",") {
		if i, ok := n.byURL[strings.TrimSpace(u)]; ok {
			return i
		}
	}
	return -1
}

// cutLocked tells whether traffic from → to is dropped. Call with n.mu held.
func (n *peerNet) cutLocked(to, from int) bool {
	return to != from && (n.isolated[to] || (from >= 0 && n.isolated[from]))
}

func (n *peerNet) admit(r *peerRequest) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cutLocked(r.to, r.from) {
		return false
	}
	n.active[r] = struct{}{}
	return true
}

func (n *peerNet) done(r *peerRequest) {
	n.mu.Lock()
	delete(n.active, r)
	n.mu.Unlock()
}

func (n *peerNet) setIsolated(idx int, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.isolated[idx] = on
	for r := range n.active {
		if n.cutLocked(r.to, r.from) {
			r.cancel() // raft streams are long-lived: cut them too
		}
	}
}

func (n *peerNet) close() {
	n.mu.Lock()
	proxies := n.proxies
	n.mu.Unlock()
	for _, p := range proxies {
		_ = p.srv.Close()
		p.rp.Transport.(*http.Transport).CloseIdleConnections()
	}
}
