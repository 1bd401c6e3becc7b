package daemon

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/failoverd/failoverd/sidecar"
	"github.com/failoverd/failoverd/store"
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

// GroupStatus is the JSON status of one group (GET /status).
type GroupStatus struct {
	Group        string            `json:"group"`
	Leader       bool              `json:"leader"`
	Epoch        uint64            `json:"epoch"`
	ActiveSite   string            `json:"activeSite"`
	InFlight     any               `json:"inFlight,omitempty"`
	Halted       bool              `json:"halted"`
	Action       string            `json:"action"`
	Reason       string            `json:"reason"`
	Message      string            `json:"message"`
	Detection    string            `json:"detection"`
	Sites        map[string]string `json:"sites"`
	LastError    string            `json:"lastError,omitempty"`
	LastFailover *store.Failover   `json:"lastFailover,omitempty"`
	// Followers is each follower's state: "ok", "pending" or its last error.
	Followers map[string]string `json:"followers,omitempty"`
}

func (g *group) status(leader bool) GroupStatus {
	o := g.obs.Observed()
	g.mu.Lock()
	defer g.mu.Unlock()
	s := GroupStatus{
		Group: g.cfg.Name, Leader: leader, Epoch: g.state.Epoch, ActiveSite: g.state.ActiveSite,
		Halted: g.state.EscalationHalted, Action: string(g.last.Action), Reason: string(g.last.Reason),
		Message: g.last.Message, Detection: string(g.last.Detection.Code), Sites: map[string]string{},
		InFlight: g.stored.InFlight, LastFailover: g.stored.LastFailover,
	}
	if g.lastErr != nil {
		s.LastError = g.lastErr.Error()
	}
	for _, site := range o.Sites {
		s.Sites[site.Name] = site.State.String()
	}
	s.Followers = g.follow.status()
	return s
}

// handler serves the daemon's HTTP API:
//
//	GET  /healthz                          process is up
//	GET  /active-site?group=G              signed view (503 on followers)
//	GET  /status                           every group's status
//	POST /v1/groups/G/switchover?target=S  planned switchover (bearer token)
//	POST /v1/groups/G/acknowledge          clear an escalation halt (bearer token)
func (d *Daemon) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n")) // a failed write means the client left
	})
	mux.HandleFunc("GET /active-site", d.serveActiveSite)
	mux.HandleFunc("POST "+sidecar.ReportPath, d.serveSidecarReport)
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		out := make([]GroupStatus, 0, len(d.groups))
		for _, g := range d.groups {
			out = append(out, g.status(d.isLeader()))
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /v1/groups/{group}/switchover", d.authorized(func(w http.ResponseWriter, r *http.Request, g *group) {
		target := r.URL.Query().Get("target")
		if target == "" {
			writeError(w, http.StatusBadRequest, "target missing: POST /v1/groups/"+g.cfg.Name+"/switchover?target=SITE")
			return
		}
		d.reply(w, r, g.submit(r.Context(), kindSwitchover, target))
	}))
	mux.HandleFunc("POST /v1/groups/{group}/acknowledge", d.authorized(func(w http.ResponseWriter, r *http.Request, g *group) {
		d.reply(w, r, g.submit(r.Context(), "acknowledge", ""))
	}))
	return mux
}

func (d *Daemon) serveActiveSite(w http.ResponseWriter, r *http.Request) {
	// A follower's view may be stale; a sidecar must not renew its lease on it.
	if !d.isLeader() {
		writeError(w, http.StatusServiceUnavailable, "not the leader")
		return
	}
	name := r.URL.Query().Get("group")
	if name == "" && len(d.groups) == 1 {
		name = d.groups[0].cfg.Name
	}
	s, ok := d.pub.get(name)
	if !ok {
		writeError(w, http.StatusNotFound, "unknown group "+name)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

// maxReportBytes bounds a sidecar report body.
const maxReportBytes = 64 << 10

// serveSidecarReport records a sidecar's report (its lease renewal) and
// answers the group's signed view.
func (d *Daemon) serveSidecarReport(w http.ResponseWriter, r *http.Request) {
	// A follower's view may be stale; a sidecar must not renew its lease on it.
	if !d.isLeader() {
		writeError(w, http.StatusServiceUnavailable, "not the leader")
		return
	}
	if len(d.pub.key) == 0 {
		writeError(w, http.StatusForbidden, "sidecar reports need daemon.viewSigningKeyFile")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReportBytes))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "report too large or unreadable: "+err.Error())
		return
	}
	// An unsigned report could claim a fence that never happened.
	if !view.VerifyBytes(body, r.Header.Get(sidecar.SignatureHeader), d.pub.key) {
		writeError(w, http.StatusUnauthorized, "bad or missing "+sidecar.SignatureHeader)
		return
	}
	var rep sidecar.Report
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		writeError(w, http.StatusBadRequest, "malformed report: "+err.Error())
		return
	}
	g := d.group(rep.Group)
	if g == nil || !g.sidecars.known(rep.Site) {
		writeError(w, http.StatusNotFound, "unknown group or site without a sidecar: "+rep.Group+"/"+rep.Site)
		return
	}
	s, ok := d.pub.get(rep.Group)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "no view yet for group "+rep.Group)
		return
	}
	g.sidecars.record(rep, g.now())
	writeJSON(w, http.StatusOK, s)
}

// authorized checks the bearer token and resolves the group of the path.
func (d *Daemon) authorized(next func(http.ResponseWriter, *http.Request, *group)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if d.token == "" {
			writeError(w, http.StatusForbidden, "mutating API disabled: set daemon.apiTokenFile")
			return
		}
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(got), []byte(d.token)) != 1 {
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		g := d.group(r.PathValue("group"))
		if g == nil {
			writeError(w, http.StatusNotFound, "unknown group "+r.PathValue("group"))
			return
		}
		next(w, r, g)
	}
}

func (d *Daemon) reply(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusAccepted, map[string]string{"result": "accepted"})
	case errors.Is(err, ErrRefused):
		writeError(w, http.StatusConflict, err.Error())
	default:
		d.log.Error("api.failed", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client left
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// serve runs the HTTP server until ctx ends.
func (d *Daemon) serve(ctx context.Context, log *slog.Logger) error {
	srv := &http.Server{Addr: d.cfg.Daemon.Listen, Handler: d.handler(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(d.listener) }()
	log.Info("http.listening", "addr", d.listener.Addr().String())
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	case err := <-errc:
		return err
	}
}
