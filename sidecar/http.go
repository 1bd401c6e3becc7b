package sidecar

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/failoverd/failoverd/view"
)

// Handler serves /healthz, /health (load balancers), /peer/ping,
// /peer/active-site and /metrics.
func (s *Sidecar) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok")) // a failed write means the client left
	})
	mux.HandleFunc("GET /health", s.serveHealth)
	mux.HandleFunc("GET /peer/ping", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"site": s.cfg.Site, "epoch": s.epoch()})
	})
	mux.HandleFunc("GET /peer/active-site", s.serveActiveSite)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{}))
	return mux
}

// serveActiveSite answers the newest view and records, for a known peer,
// which epoch was served and when (the daemon bounds the peer's lease with
// it); the answer is bound to ?nonce= for a known peer.
func (s *Sidecar) serveActiveSite(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a, ok := s.PeerView(q.Get("from"), q.Get("nonce"))
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no view yet"})
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// PeerView is what /peer/active-site?from=from&nonce=nonce answers: the
// newest view, recorded as served to from and bound to (nonce, from, this
// site) when from is a configured peer and nonce is well-formed; false
// without a view yet.
func (s *Sidecar) PeerView(from, nonce string) (view.Answer, bool) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.v == nil {
		return view.Answer{}, false
	}
	a := view.Answer{Signed: *s.v}
	// Only configured peers are recorded: arbitrary ?from= values must not
	// grow the map or appear in reports.
	if !slices.ContainsFunc(s.cfg.Peers, func(p Peer) bool { return p.Site == from }) {
		return a, true
	}
	s.served[from] = served{epoch: a.View.Epoch, at: now}
	// Only a serving recorded here (and so reported to the daemon, which
	// bounds the peer's lease with it) may renew a lease: bind no other.
	if view.CheckNonce(nonce) == nil {
		if b, err := view.Bind(a.Signed, view.Request{Nonce: nonce, From: from, By: view.ByPeer(s.cfg.Site)}, s.cfg.Key); err == nil {
			a = b
		}
	}
	return a, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client left
}
