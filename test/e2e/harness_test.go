// Package e2e runs the real failoverd binary against real MariaDB sites
// started by test/testenv on 127.0.0.1: failovers under write load,
// candidate choice, crash recovery at every step, partitions and cooldown.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/store"
	"github.com/failoverd/failoverd/test/testenv"
	"github.com/failoverd/failoverd/test/testenv/promote"
)

// binary is the failoverd built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test here runs real servers: `make test-short` leaves them to `make test`.
		fmt.Println("e2e: skipped with -short (real servers; make test runs them)")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "failoverd-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "failoverd")
	build := exec.Command("go", "build", "-o", binary, "github.com/failoverd/failoverd/cmd/failoverd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build failoverd:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const apiToken = "e2e-api-token-0123456789" // at least preflight.MinAPITokenBytes

// group is one failover group of real sites of one engine (MariaDB or
// MySQL) and a failoverd daemon (the real binary) managing it.
type group struct {
	t      testing.TB
	engine testenv.Engine
	topo   *testenv.Topology
	dir    string
	config string
	listen string
	// proxies[i] is the daemon→site i link when built with proxied links.
	proxies []*testenv.Proxy
	// caches[i] is site i's Redis when built with a cache.
	caches []*testenv.Redis
	// replProxies[i] stands between the replicas and site i (isolatable).
	replProxies []*testenv.Proxy
	// sidecarAddrs[i] is where site i's sidecar listens (with sidecars);
	// sidecars and links are set by startSidecars.
	sidecarAddrs []string
	sidecars     []*sidecarProc
	links        [][]*testenv.Proxy
	// blindSidecars: see groupOptions.
	blindSidecars bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	logs   *lockedBuffer
	exited chan struct{}
	// logTee, when set, also receives the daemon's output (the playground's log file).
	logTee io.Writer
	// pastLogs are the outputs of the daemons started before the current
	// one; events the faults and steps noted (the evidence of a failure).
	pastLogs []*lockedBuffer
	evMu     sync.Mutex
	events   []groupEvent
}

type groupOptions struct {
	// engine of every site and of the daemon's group configuration;
	// required (testenv.ForEachEngine gives one per subtest).
	engine      testenv.Engine
	sites       int
	proxied     bool   // the daemon reaches sites through fault proxies
	cooldown    string // failoverCooldown; default 10m
	priorities  []int
	extraConfig string // appended to the group's YAML
	// kube, when set, holds the state (ConfigMap) and the leader Lease.
	kube *testenv.Kube
	// relayDrainTimeout is the group's; default 20s.
	relayDrainTimeout string
	// etcd, when set, is the etcd client URL holding the state and the
	// election (leader-elected daemons; peers get their own URL, peerAt).
	etcd string
	// cache starts one Redis per site (site0's the primary) that follows
	// the MySQL primary.
	cache bool
	// fencing is the group's fencing mode; default confirmed.
	fencing string
	// semiSyncTimeoutMs, when set, is every server's
	// rpl_semi_sync_master_timeout (as an operator's my.cnf would set it).
	semiSyncTimeoutMs uint64
	// semiSyncEverywhere leaves the semi-sync source side on on every site,
	// replicas included, as guides commonly advise ("so that any site can be
	// promoted"); by default the harness switches it off on the replicas.
	semiSyncEverywhere bool
	// isolatable puts fault proxies on every link of site0: the daemon's
	// (as proxied does) and the replicas' replication links to it.
	isolatable bool
	// sidecars declares a sidecar per site (start them with startSidecars);
	// clientTimeout is the write load's timeout in startUnderLoad (0: 2 s):
	// a client stuck on a hung primary sees at least its own timeout.
	clientTimeout time.Duration
	// lease is the sidecar lease (default 3s, checked every 300ms).
	sidecars bool
	lease    string
	// blindSidecars starts the sidecars without --mysqld-pid-file: they
	// cannot SIGKILL mysqld nor prove it down (canKill=false).
	blindSidecars bool
	// routing, when set, are the Kubernetes clusters routing follows
	// ("route0", "route1", ...), apart from the state store (which stays a
	// file unless kube or etcd is set): site i is placed on cluster
	// route<min(i, len(routing)-1)> (Service default/mysql-primary, pods and
	// nodes labelled site=site<i>) and the DNSEndpoint default/orders-db
	// lives in route0. Not with kube.
	routing []*testenv.Kube
}

func newGroup(t testing.TB, o groupOptions) *group {
	t.Helper()
	if !o.engine.Valid() {
		t.Fatalf("groupOptions.engine is %q: set testenv.MariaDB or testenv.MySQL (testenv.ForEachEngine gives one per subtest)", o.engine)
	}
	topo := testenv.StartTopology(t, o.sites, testenv.TopologyOptions{Engine: o.engine, SemiSync: true})
	// Sites start read-only; the daemon adopts the only writable site at
	// first start, so site0 is made writable the way failoverd does it.
	promote.Site(t, topo.Sites[0])
	g := &group{t: t, engine: o.engine, topo: topo, dir: t.TempDir(), blindSidecars: o.blindSidecars}
	// As configs.SemiSyncSettings says: the primary side on the primary
	// only (on a replica it makes the applier wait for acknowledgements),
	// and the timeout everywhere.
	for i, m := range topo.Sites {
		if i > 0 && !o.semiSyncEverywhere {
			m.Exec(t, "SET GLOBAL "+semiSyncSourceVar(o.engine, "enabled")+" = OFF")
		}
		if o.semiSyncTimeoutMs > 0 {
			m.Exec(t, fmt.Sprintf("SET GLOBAL %s = %d", semiSyncSourceVar(o.engine, "timeout"), o.semiSyncTimeoutMs))
		}
	}
	if o.isolatable {
		o.proxied = true
		// The replicas reach site0 through one proxy, which isolate cuts.
		p := testenv.NewProxy(t, "repl-site0", topo.Sites[0].Addr())
		g.replProxies = []*testenv.Proxy{p}
		for _, r := range topo.Sites[1:] {
			testenv.ReplicateFromAddr(t, r, p.Host(), p.Port())
		}
	}
	if o.fencing == "" {
		o.fencing = "confirmed"
	}
	if o.lease == "" {
		o.lease = "3s"
	}
	// daemon.pw and sidecar.pw are the documented least-privilege accounts'
	// (deploy/accounts), which the daemon and the sidecars log in with;
	// admin.pw the harness administrator's, for what an operator's tools do
	// (a reclone hook).
	for name, content := range map[string]string{"admin.pw": testenv.AdminPassword, "daemon.pw": testenv.DaemonPassword,
		"sidecar.pw": testenv.SidecarPassword, "repl.pw": testenv.ReplPassword, "api.token": apiToken} {
		if err := os.WriteFile(filepath.Join(g.dir, name), []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g.listen = freeAddr(t)
	if o.cooldown == "" {
		o.cooldown = "10m"
	}
	if o.relayDrainTimeout == "" {
		o.relayDrainTimeout = "20s"
	}
	if o.cache {
		for i := range topo.Sites {
			r := testenv.StartRedis(t, testenv.RedisOptions{Name: fmt.Sprintf("cache%d", i)})
			if i > 0 {
				r.ReplicaOf(t, g.caches[0].Host, g.caches[0].Port)
			}
			g.caches = append(g.caches, r)
		}
		o.extraConfig += "    cache:\n      engine: redis\n      maxSyncWait: 2s\n"
	}
	var sites strings.Builder
	for i, m := range topo.Sites {
		addr := m.Addr()
		if o.proxied {
			p := testenv.NewProxy(t, fmt.Sprintf("daemon-site%d", i), m.Addr())
			g.proxies = append(g.proxies, p)
			addr = p.Addr()
		}
		prio := 0
		if i < len(o.priorities) {
			prio = o.priorities[i]
		}
		repl := m.Addr()
		if i < len(g.replProxies) {
			repl = g.replProxies[i].Addr()
		}
		fmt.Fprintf(&sites, "      - name: site%d\n        priority: %d\n        mysql:\n          address: %s\n          replicationAddress: %s\n", i, prio, addr, repl)
		if o.sidecars {
			g.sidecarAddrs = append(g.sidecarAddrs, freeAddr(t))
			fmt.Fprintf(&sites, "        sidecar:\n          address: %s\n", g.sidecarAddrs[i])
		}
		if o.cache {
			fmt.Fprintf(&sites, "        cache:\n          address: %s\n", g.caches[i].Addr())
		}
		if len(o.routing) > 0 {
			fmt.Fprintf(&sites, "        kubernetes:\n          cluster: route%d\n          namespace: default\n          service: mysql-primary\n"+
				"          podSelector:\n            site: site%d\n          nodeSelector:\n            site: site%d\n        dns:\n          target: 127.0.0.%d\n",
				min(i, len(o.routing)-1), i, i, i+1)
		}
		if o.kube != nil {
			// Routing: one Service and DNS record follow the primary (the
			// record's targets are only data, never dialled).
			fmt.Fprintf(&sites, "        kubernetes:\n          cluster: test\n          namespace: default\n          service: mysql-primary\n"+
				"          podSelector:\n            site: site%d\n          nodeSelector:\n            site: site%d\n        dns:\n          target: 127.0.0.%d\n", i, i, i+1)
		}
	}
	if o.kube != nil {
		o.extraConfig += "    dns:\n      cluster: test\n      namespace: default\n      endpointName: orders-db\n      hostname: orders-db.example.test\n"
	}
	daemonCfg := "  stateStore:\n    path: state.json\n"
	clusters := ""
	if o.kube != nil {
		daemonCfg = "  stateStore:\n    type: kubernetes\n    cluster: test\n    namespace: default\n" +
			"  leaderElection:\n    enabled: true\n    cluster: test\n    namespace: default\n" +
			"    leaseDuration: 3s\n    renewDeadline: 2s\n    retryPeriod: 500ms\n"
		clusters = fmt.Sprintf("clusters:\n  - name: test\n    kubeconfig: %s\n    context: %s\n", o.kube.Kubeconfig, o.kube.Context)
	}
	if len(o.routing) > 0 {
		if o.kube != nil {
			t.Fatal("groupOptions: routing and kube are exclusive")
		}
		o.extraConfig += "    dns:\n      cluster: route0\n      namespace: default\n      endpointName: orders-db\n      hostname: orders-db.example.test\n"
		clusters = "clusters:\n"
		for i, k := range o.routing {
			clusters += fmt.Sprintf("  - name: route%d\n    kubeconfig: %s\n    context: %s\n", i, k.Kubeconfig, k.Context)
		}
	}
	if o.etcd != "" {
		daemonCfg = "  stateStore:\n    type: etcd\n    etcd:\n      endpoints: [" + o.etcd + "]\n      prefix: " + etcdPrefix + "\n      dialTimeout: 1s\n" +
			"  leaderElection:\n    enabled: true\n    leaseDuration: 2s\n    retryPeriod: 300ms\n" +
			"  advertiseURL: http://" + g.listen + "\n"
	}
	if o.sidecars {
		if err := os.WriteFile(filepath.Join(g.dir, "view.key"), []byte(viewKey+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		daemonCfg += "  viewSigningKeyFile: view.key\n"
		o.extraConfig += fmt.Sprintf("    sidecar:\n      leaseTimeout: %s\n      checkInterval: 300ms\n", o.lease)
	}
	cfg := fmt.Sprintf(`daemon:
  listen: %s
  apiTokenFile: api.token
%s%sgroups:
  - name: orders
    engine: %s
    pollInterval: 500ms
    probeTimeout: 400ms
    fencing: %s
    failoverCooldown: %s
    relayDrainTimeout: %s
    credentials:
      admin:
        user: %s
        passwordFile: daemon.pw
      replication:
        user: %s
        passwordFile: repl.pw
      sidecar:
        user: %s
        passwordFile: sidecar.pw
%s    sites:
%s`, g.listen, daemonCfg, clusters, o.engine, o.fencing, o.cooldown, o.relayDrainTimeout, testenv.DaemonUser, testenv.ReplUser, testenv.SidecarUser, o.extraConfig, sites.String())
	g.config = filepath.Join(g.dir, "failoverd.yaml")
	if err := os.WriteFile(g.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.stopDaemon)
	return g
}

// peer returns a second daemon for the same sites: same configuration but
// its own listen address (leader-election tests).
func (g *group) peer() *group { return g.peerWith("peer", nil) }

// peerWith is a second daemon named name for the same sites: g's
// configuration with its own listen (and advertise) address, then edit
// applied when not nil.
func (g *group) peerWith(name string, edit func(cfg string) string) *group {
	g.t.Helper()
	b, err := os.ReadFile(g.config)
	if err != nil {
		g.t.Fatal(err)
	}
	p := &group{t: g.t, engine: g.engine, topo: g.topo, dir: g.dir, listen: freeAddr(g.t), proxies: g.proxies}
	p.config = filepath.Join(g.dir, name+".yaml")
	cfg := strings.Replace(string(b), "listen: "+g.listen, "listen: "+p.listen, 1)
	cfg = strings.ReplaceAll(cfg, "advertiseURL: http://"+g.listen, "advertiseURL: http://"+p.listen)
	if edit != nil {
		cfg = edit(cfg)
	}
	if err := os.WriteFile(p.config, []byte(cfg), 0o600); err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(p.stopDaemon)
	return p
}

// handed records the ports freeAddr gave out in this test binary.
var (
	handedMu sync.Mutex
	handed   = map[int]bool{}
)

// freeAddr returns a free address for a process the test starts later (the
// daemon, a sidecar). It picks below the kernel's ephemeral range
// (32768–60999 here): the fault proxies and servers a test starts in
// between bind ephemeral ports, and could otherwise take this one first.
func freeAddr(t testing.TB) string {
	t.Helper()
	handedMu.Lock()
	defer handedMu.Unlock()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		if handed[port] {
			continue // given to an earlier caller that may not have bound it yet
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken: try another
		}
		addr := l.Addr().String()
		l.Close()
		handed[port] = true
		return addr
	}
	t.Fatal("no free port between 20000 and 32000")
	return ""
}

// startDaemon runs failoverd with extra environment (e.g. a failpoint).
func (g *group) startDaemon(env ...string) {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	cmd := exec.Command(binary, "run", "-c", g.config, "--log-format", "json")
	cmd.Env = append(os.Environ(), env...)
	if g.logs != nil {
		g.pastLogs = append(g.pastLogs, g.logs)
	}
	g.logs = &lockedBuffer{tee: g.logTee}
	cmd.Stdout, cmd.Stderr = g.logs, g.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		g.t.Fatalf("start failoverd: %v", err)
	}
	g.cmd = cmd
	exited := make(chan struct{})
	g.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	g.note("daemon started %s", strings.Join(env, " "))
	g.waitFor("daemon answers /healthz", 15*time.Second, answersHealthz(g.listen))
}

// answersHealthz reports whether the server at addr answers GET /healthz.
func answersHealthz(addr string) func() bool {
	return func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// stopDaemon ends the daemon (SIGTERM, then SIGKILL) and logs its output on
// failure.
func (g *group) stopDaemon() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cmd == nil {
		return
	}
	g.note("daemon stopped")
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(10 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.exited
	}
	// Every line the daemon wrote is one JSON object with each key once
	// (a duplicate key is read differently by every log tool).
	for _, line := range strings.Split(g.logs.String(), "\n") {
		if k := duplicateJSONKey(line); k != "" {
			g.t.Errorf("daemon log line with key %q twice: %s", k, line)
			break
		}
	}
	// The daemon logs in with exactly the documented grants
	// (deploy/accounts): a refusal anywhere, even in a step that only
	// warns, means docs/accounts.md is wrong.
	for _, line := range strings.Split(g.logs.String(), "\n") {
		if privilegeRefused(line) {
			g.t.Errorf("the daemon's documented account was refused a privilege: %s", line)
			break
		}
	}
	if g.t.Failed() || os.Getenv("FAILOVERD_E2E_LOGS") == "1" {
		g.t.Logf("failoverd output:\n%s", tail(g.logs.String(), 80))
	}
	g.cmd = nil
}

// privilegeRefused reports whether a log line carries a server's refusal of
// a privilege or a login (errors 1044, 1045, 1142, 1227, 1370).
func privilegeRefused(line string) bool {
	for _, code := range []string{"Error 1044", "Error 1045", "Error 1142", "Error 1227", "Error 1370"} {
		if strings.Contains(line, code) {
			return true
		}
	}
	return false
}

// duplicateJSONKey returns a top-level key that appears twice in line, a
// JSON object; "" when none does or line is not one.
func duplicateJSONKey(line string) string {
	if !strings.HasPrefix(line, "{") {
		return ""
	}
	dec := json.NewDecoder(strings.NewReader(line))
	if _, err := dec.Token(); err != nil {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		k, _ := tok.(string)
		if seen[k] {
			return k
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ""
		}
	}
	return ""
}

// waitCrash waits for the daemon to die by itself (a failpoint).
func (g *group) waitCrash(timeout time.Duration) {
	g.t.Helper()
	select {
	case <-g.exited:
		g.mu.Lock()
		g.cmd = nil
		g.mu.Unlock()
	case <-time.After(timeout):
		g.t.Fatalf("failoverd did not crash at its failpoint within %v; output:\n%s", timeout, tail(g.logs.String(), 60))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// groupStatus is the daemon's status of the group and whether it leads.
type groupStatus struct {
	status.Group
	Leader bool
}

// status returns the daemon's status of the group (GET /v1/groups).
func (g *group) status() (groupStatus, error) {
	resp, err := http.Get("http://" + g.listen + "/v1/groups")
	if err != nil {
		return groupStatus{}, err
	}
	defer resp.Body.Close()
	var out status.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Groups) != 1 {
		return groupStatus{}, fmt.Errorf("decode status: %v (%d groups)", err, len(out.Groups))
	}
	return groupStatus{Group: out.Groups[0], Leader: out.Daemon.Leader}, nil
}

// waitFor polls cond until it holds or fails the test after timeout.
func (g *group) waitFor(what string, timeout time.Duration, cond func() bool) {
	g.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	st, _ := g.status()
	g.t.Fatalf("timed out after %v waiting for %s; status: %+v", timeout, what, st)
}

// waitActive waits until the daemon reports site active and healthy-ish.
func (g *group) waitActive(site string, timeout time.Duration) groupStatus {
	g.t.Helper()
	var st groupStatus
	g.waitFor("active site "+site, timeout, func() bool {
		s, err := g.status()
		st = s
		return err == nil && s.ActiveSite == site && s.InFlight == nil
	})
	return st
}

// waitHealthy waits until the daemon has debounced every site and reports
// site as the healthy primary (operator requests need a settled group).
func (g *group) waitHealthy(site string, timeout time.Duration) groupStatus {
	g.t.Helper()
	var st groupStatus
	g.waitFor(site+" healthy", timeout, func() bool {
		s, err := g.status()
		st = s
		return err == nil && s.ActiveSite == site && s.Reason == "healthy"
	})
	return st
}

// kill SIGKILLs site i's server (mariadbd or mysqld).
func (g *group) kill(i int) {
	g.t.Helper()
	g.note("kill site%d", i)
	if err := g.topo.Sites[i].Kill(); err != nil {
		g.t.Fatalf("kill site%d: %v", i, err)
	}
}

// expectSolePrimary waits until site is the settled active site and checks
// it is the only site accepting writes.
func (g *group) expectSolePrimary(site string) groupStatus {
	g.t.Helper()
	st := g.waitActive(site, failoverTimeout)
	if w := g.writable(); !slices.Equal(w, []string{site}) {
		g.t.Fatalf("writable sites: %v, want [%s]", w, site)
	}
	return st
}

// stateFile reads the daemon's persisted state of the group.
func (g *group) stateFile() store.GroupState {
	g.t.Helper()
	f, err := store.OpenFile(filepath.Join(g.dir, "state.json"), time.Now)
	if err != nil {
		g.t.Fatalf("open state: %v", err)
	}
	st, err := f.Load(context.Background(), "orders")
	if err != nil {
		g.t.Fatal(err)
	}
	return st
}

// writable lists the running sites that accept writes from the app account.
func (g *group) writable() []string {
	var out []string
	for i, m := range g.topo.Sites {
		if !m.Running() || m.Paused() {
			continue
		}
		if readOnly(g.t, m) == "0" {
			out = append(out, fmt.Sprintf("site%d", i))
		}
	}
	return out
}

// readOnly reads @@global.read_only, retrying on a broken pooled
// connection (a fence kills every client session, the harness's too).
func readOnly(t testing.TB, m *testenv.Server) string {
	t.Helper()
	var v string
	var err error
	for range 5 {
		if err = m.AdminDB(t).QueryRow("SELECT @@global.read_only").Scan(&v); err == nil {
			return v
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("read read_only of %s: %v", m.Name, err)
	return ""
}

// follows reports whether replica replicates from source with both threads
// running.
func (g *group) follows(replica, source *testenv.Server) bool {
	rs := replica.ReplicaStatus(g.t)
	return rs != nil && rs["Master_Port"] == fmt.Sprint(source.Port) && rs["Slave_IO_Running"] == "Yes" && rs["Slave_SQL_Running"] == "Yes"
}

// post calls a mutating API endpoint.
func (g *group) post(path string) (int, string) {
	g.t.Helper()
	code, body, err := g.tryPost(path)
	if err != nil {
		g.t.Fatalf("POST %s: %v", path, err)
	}
	return code, body
}

// tryPost is post for a daemon that may die while answering (failpoints).
func (g *group) tryPost(path string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.listen+path, nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// lockedBuffer is the daemon's output, written by exec's copying goroutine
// while a test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	tee io.Writer // optional copy
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tee != nil {
		_, _ = l.tee.Write(p) // a copy for the reader's convenience
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// decisionsAfter returns the reasons of the decisions the daemon logged
// after the first line containing marker.
func (g *group) decisionsAfter(marker string) []string {
	var out []string
	seen := false
	for _, line := range strings.Split(g.logs.String(), "\n") {
		if !seen {
			seen = strings.Contains(line, marker)
			continue
		}
		var l struct{ Msg, Reason string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "decision" {
			out = append(out, l.Reason)
		}
	}
	return out
}

// waitHealthyOrDegraded waits until site is the primary and the decision
// is healthy or degraded (a lost replica), the group settled after a failover.
func (g *group) waitHealthyOrDegraded(site string) {
	g.t.Helper()
	g.waitFor(site+" settled", 30*time.Second, func() bool {
		st, err := g.status()
		return err == nil && st.ActiveSite == site && (st.Class == status.ClassHealthy || st.Class == status.ClassDegraded)
	})
}

// semiSyncSourceVar is the engine's name of a semi-sync primary-side
// variable: rpl_semi_sync_master_<name> on MariaDB, rpl_semi_sync_source_<name>
// on MySQL (name "enabled", "timeout", ...).
func semiSyncSourceVar(e testenv.Engine, name string) string {
	if e == testenv.MySQL {
		return "rpl_semi_sync_source_" + name
	}
	return "rpl_semi_sync_master_" + name
}

// semiSyncReplicaVar is the replica side: rpl_semi_sync_slave_<name> on
// MariaDB, rpl_semi_sync_replica_<name> on MySQL.
func semiSyncReplicaVar(e testenv.Engine, name string) string {
	if e == testenv.MySQL {
		return "rpl_semi_sync_replica_" + name
	}
	return "rpl_semi_sync_slave_" + name
}

// gtidFlavor is the GTID syntax of the engine's servers.
func gtidFlavor(e testenv.Engine) gtid.Flavor {
	if e == testenv.MySQL {
		return gtid.MySQL
	}
	return gtid.MariaDB
}

// operatorExec runs stmts on one admin session of m, as an operator writing
// on a read-only site by hand would: on MariaDB the admin account passes
// read_only (READ_ONLY ADMIN); on MySQL super_read_only stops it too, so the
// operator lifts super_read_only for the statements when it is ON
// (read_only stays ON, the application account stays blocked) and sets it
// back. It retries past
// pooled connections a restart or a fence broke; the error is the last
// attempt's.
func operatorExec(t testing.TB, m *testenv.Server, stmts ...string) error {
	t.Helper()
	var err error
	for range 5 {
		if err = execOnOneSession(t, m, stmts); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func execOnOneSession(t testing.TB, m *testenv.Server, stmts []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := m.AdminDB(t).Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var sro int
	if m.Engine == testenv.MySQL {
		if err := c.QueryRowContext(ctx, "SELECT @@global.super_read_only").Scan(&sro); err != nil {
			return fmt.Errorf("%s: read super_read_only: %w", m.Name, err)
		}
	}
	if sro == 1 {
		if _, err := c.ExecContext(ctx, "SET GLOBAL super_read_only = OFF"); err != nil {
			return fmt.Errorf("%s: lift super_read_only: %w", m.Name, err)
		}
		// Set back even when a statement failed (read_only stays ON).
		defer func() { _, _ = c.ExecContext(context.Background(), "SET GLOBAL super_read_only = ON") }()
	}
	for _, q := range stmts {
		if _, err := c.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %s: %w", m.Name, q, err)
		}
	}
	return nil
}

// received reports whether replica has received (applied, or holds in its
// relay log) everything source executed.
func (g *group) received(replica, source *testenv.Server) bool {
	rs := replica.ReplicaStatus(g.t)
	if g.engine == testenv.MariaDB {
		return rs["Gtid_IO_Pos"] == source.GTIDExecuted(g.t)
	}
	f := gtid.MySQL
	want, err := gtid.Parse(f, source.GTIDExecuted(g.t))
	if err != nil {
		g.t.Fatalf("parse %s's GTIDs: %v", source.Name, err)
	}
	have, err1 := gtid.Parse(f, replica.GTIDExecuted(g.t))
	got, err2 := gtid.Parse(f, rs["Retrieved_Gtid_Set"])
	return err1 == nil && err2 == nil && have.Union(got).Covers(want)
}
