package sidecar

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/view"
)

// replayer stands between a sidecar and the daemon or a peer, as anyone on
// the network path can: it forwards requests and records the first answer
// until replay is called, and from then on answers every request with the
// recorded bytes verbatim (an old, validly signed answer).
type replayer struct {
	t      *testing.T
	target string
	srv    *httptest.Server

	mu       sync.Mutex
	replay   bool
	recorded []byte
	replayed int
}

func newReplayer(t *testing.T, target string) *replayer {
	r := &replayer{t: t, target: target}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *replayer) URL() string { return r.srv.URL }

func (r *replayer) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	replay, recorded := r.replay, r.recorded
	if replay {
		r.replayed++
	}
	r.mu.Unlock()
	if replay {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(recorded)
		return
	}
	body, _ := io.ReadAll(req.Body)
	fwd, err := http.NewRequestWithContext(req.Context(), req.Method, r.target+req.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	fwd.Header = req.Header.Clone()
	resp, err := http.DefaultClient.Do(fwd)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		r.mu.Lock()
		if r.recorded == nil {
			r.recorded = answer
		}
		r.mu.Unlock()
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// replayFromNowOn answers every later request with the first recorded answer.
func (r *replayer) replayFromNowOn() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recorded == nil {
		r.t.Fatal("replayer: nothing recorded to replay")
	}
	r.replay = true
}

func (r *replayer) replays() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.replayed
}

func leaseLeft(h *harness) time.Duration {
	return time.Duration(h.s.Report().LeaseRemainingMs) * time.Millisecond
}

// TestReplayedDaemonAnswerRenewsNothing: the daemon revoked east (epoch 2
// names west) but someone on the path answers east's later reports with
// the daemon's earlier answer (epoch 1 names east, validly signed). That
// answer was not made for the later report: it must not renew the lease.
func TestReplayedDaemonAnswerRenewsNothing(t *testing.T) {
	d := newStandInDaemon(t)
	d.set(sign(t, 1, "east"))
	r := newReplayer(t, d.URL())
	h := newHarness(t, func(c *Config, o *Options) {
		c.DaemonURLs, c.Peers = []string{r.URL()}, nil
		o.Daemon = nil // the real HTTP client
	})
	h.step(t)
	if got := leaseLeft(h); got != testLease {
		t.Fatalf("the daemon's fresh answer left %s of lease, want %s", got, testLease)
	}
	d.set(sign(t, 2, "west")) // the failover revokes east
	r.replayFromNowOn()
	h.clock.Advance(time.Second)
	h.step(t)
	if r.replays() == 0 {
		t.Fatal("no request reached the replayer")
	}
	if got, want := leaseLeft(h), testLease-time.Second; got != want {
		t.Fatalf("a replayed daemon answer renewed the lease: %s left, want %s", got, want)
	}
	if got := metric(t, h.s, `failoverd_sidecar_unbound_answers_total{why="bad-binding"}`); got != "1" {
		t.Errorf("bad-binding answers counted %s, want 1", got)
	}
	h.clock.Advance(testLease)
	h.step(t)
	if f, _, _, ro := h.mysql.counts(); f != 1 || !ro {
		t.Fatalf("not fenced at lease expiry under replay: fences %d, read-only %v", f, ro)
	}
}

// TestReplayedPeerAnswerRenewsNothing: north served east a view naming east
// (epoch 1), then adopted the revocation (epoch 2 names west); someone on
// the path answers east's later peer requests with north's earlier answer.
// Only an answer made for the request may renew the lease.
func TestReplayedPeerAnswerRenewsNothing(t *testing.T) {
	north := newHarness(t, func(c *Config, _ *Options) {
		c.Site = "north"
		c.Peers = []Peer{{Site: "east", URL: "http://east.invalid:9300"}}
	})
	north.daemon.answer(sign(t, 1, "east"))
	north.step(t)
	northSrv := httptest.NewServer(north.s.Handler())
	t.Cleanup(northSrv.Close)
	r := newReplayer(t, northSrv.URL)

	h := newHarness(t, func(c *Config, o *Options) {
		c.Peers = []Peer{{Site: "north", URL: r.URL()}}
		o.Peers = nil // the real HTTP client
	})
	h.daemon.down()
	h.step(t)
	if got := leaseLeft(h); got != testLease {
		t.Fatalf("north's fresh answer left %s of lease, want %s", got, testLease)
	}
	north.daemon.answer(sign(t, 2, "west"))
	north.step(t)
	r.replayFromNowOn()
	h.clock.Advance(time.Second)
	h.step(t)
	if r.replays() == 0 {
		t.Fatal("no request reached the replayer")
	}
	if got, want := leaseLeft(h), testLease-time.Second; got != want {
		t.Fatalf("a replayed peer answer renewed the lease: %s left, want %s", got, want)
	}
}

// oldServer answers every request with sv and no binding: a daemon or peer
// sidecar of the version before answers were bound to their request.
func oldServer(t *testing.T, sv view.Signed) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, sv)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestUnboundAnswersRenewNothing: a daemon and a peer of the older version
// answer without binding; their view naming east (the current epoch)
// renews nothing and does not lift east's boot read-only, since such an
// answer cannot be told from a replayed one.
func TestUnboundAnswersRenewNothing(t *testing.T) {
	d, peer := oldServer(t, sign(t, 1, "east")), oldServer(t, sign(t, 1, "east"))
	h := newHarness(t, func(c *Config, o *Options) {
		c.DaemonURLs, c.Peers = []string{d.URL}, []Peer{{Site: "north", URL: peer.URL}}
		o.Daemon, o.Peers = nil, nil // the real HTTP clients
	})
	h.step(t)
	if e := epochOfSidecar(h); e != 1 {
		t.Fatalf("epoch %d: an unbound newer view is still adopted", e)
	}
	if got := leaseLeft(h); got > 0 {
		t.Fatalf("unbound answers renewed the lease: %s left", got)
	}
	if _, _, p, ro := h.mysql.counts(); p != 0 || !ro {
		t.Fatal("an unbound daemon answer lifted the boot read-only")
	}
}

// TestUnboundNewerRevokingViewIsAdopted: a peer of the older version (no
// binding) serves a newer epoch that names west: east adopts it and fences
// at once (rule 1). Fencing more is always safe, whoever delivered the view.
func TestUnboundNewerRevokingViewIsAdopted(t *testing.T) {
	peer := oldServer(t, sign(t, 2, "west"))
	h := newHarness(t, func(c *Config, o *Options) {
		c.Peers = []Peer{{Site: "north", URL: peer.URL}}
		o.Peers = nil // the real HTTP client
	})
	h.mysql.set(func(f *fakeMySQL) { f.readOnly = false })
	h.daemon.answer(sign(t, 1, "east"))
	h.daemon.down() // the revocation reaches east only through the old peer
	h.step(t)
	if e := epochOfSidecar(h); e != 2 {
		t.Fatalf("epoch %d, want the unbound revoking view's 2", e)
	}
	if f, _, _, ro := h.mysql.counts(); f != 1 || !ro {
		t.Fatalf("not fenced on the adopted revocation: fences %d, read-only %v", f, ro)
	}
}

// TestPeerBindsOnlyRecordedServings: /peer/active-site binds its answer
// only for a configured peer (whose serving it records and reports, which
// the daemon's lease bound counts) that sent a well-formed nonce; others
// get the plain signed view, as a sidecar of the older version does.
func TestPeerBindsOnlyRecordedServings(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 4, "east"))
	h.step(t)
	nonce := view.NewNonce()
	get := func(query string) view.Answer {
		t.Helper()
		rec := httptest.NewRecorder()
		h.s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/peer/active-site?"+query, nil))
		var a view.Answer
		if err := json.Unmarshal(rec.Body.Bytes(), &a); rec.Code != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %s", query, rec.Code, rec.Body)
		}
		if _, err := a.Verify(testKey); err != nil {
			t.Fatalf("%s: served view does not verify: %v", query, err)
		}
		return a
	}
	a := get("from=west&nonce=" + nonce)
	if err := a.VerifyBinding(view.Request{Nonce: nonce, From: "west", By: view.ByPeer("east")}, testKey); err != nil {
		t.Errorf("a configured peer's answer: %v", err)
	}
	for _, q := range []string{"from=stranger&nonce=" + nonce, "from=west", "from=west&nonce=short"} {
		if a := get(q); a.Binding != "" {
			t.Errorf("%s: bound (%s), want the plain view", q, a.Binding)
		}
	}
}
