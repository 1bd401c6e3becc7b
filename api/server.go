package api

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/failoverd/failoverd/sidecar"
)

// Body size limits: commands are tiny; a sidecar report lists its peers.
const (
	maxCommandBytes = 4 << 10
	maxReportBytes  = 64 << 10
)

// Options configure the handler.
type Options struct {
	// Control is the daemon.
	Control Control
	// Token is the bearer token mutations need; empty disables them (403).
	Token string
	// Metrics serves /metrics; nil answers 404.
	Metrics http.Handler
	// Logger logs refused and failed commands; default slog.Default().
	Logger *slog.Logger
}

// Handler returns the API's http.Handler.
func Handler(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &server{Options: o}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n")) // a failed write means the client left
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	mux.HandleFunc("GET /active-site", s.activeSite)
	mux.HandleFunc("POST "+sidecar.ReportPath, s.sidecarReport)
	mux.HandleFunc("GET /v1/groups", s.groups)
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Deprecation", "true")
		w.Header().Set("Link", `</v1/groups>; rel="successor-version"`)
		s.groups(w, r)
	})
	mux.HandleFunc("GET /v1/groups/{group}", s.group)
	mux.HandleFunc("POST /v1/groups/{group}/switchover", s.command(s.switchover))
	mux.HandleFunc("POST /v1/groups/{group}/acknowledge", s.command(s.acknowledge))
	mux.HandleFunc("POST /v1/groups/{group}/confirm-fence", s.command(s.confirmFence))
	return mux
}

type server struct {
	Options
}

func (s *server) readyz(w http.ResponseWriter, _ *http.Request) {
	d := s.Control.Snapshot().Daemon
	if !d.Ready {
		writeError(w, http.StatusServiceUnavailable, "not ready: "+d.NotReady)
		return
	}
	_, _ = w.Write([]byte("ready\n")) // a failed write means the client left
}

func (s *server) activeSite(w http.ResponseWriter, r *http.Request) {
	v, err := s.Control.ActiveSite(r.URL.Query().Get("group"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *server) sidecarReport(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReportBytes))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("report larger than %d bytes or unreadable: %v", maxReportBytes, err))
		return
	}
	v, err := s.Control.SidecarReport(body, r.Header.Get(sidecar.SignatureHeader))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *server) groups(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Control.Snapshot())
}

func (s *server) group(w http.ResponseWriter, r *http.Request) {
	g, ok := s.Control.Snapshot().Group(r.PathValue("group"))
	if !ok {
		writeError(w, http.StatusNotFound, "unknown group "+r.PathValue("group"))
		return
	}
	writeJSON(w, http.StatusOK, g)
}

// command wraps a mutation: bearer token, known group, bounded body.
func (s *server) command(run func(w http.ResponseWriter, r *http.Request, group string, body []byte) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.Token == "" {
			writeError(w, http.StatusForbidden, "mutating API disabled: set daemon.apiTokenFile")
			return
		}
		// Constant time: the comparison must not leak how much of a guess matched.
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="failoverd"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		group := r.PathValue("group")
		if _, ok := s.Control.Snapshot().Group(group); !ok {
			writeError(w, http.StatusNotFound, "unknown group "+group)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCommandBytes))
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes or unreadable", maxCommandBytes))
			return
		}
		if err := run(w, r, group, body); err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusAccepted, Result{Result: "accepted", Group: group})
	}
}

func (s *server) switchover(_ http.ResponseWriter, r *http.Request, group string, body []byte) error {
	var req SwitchoverRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	if req.Target == "" {
		// The query form of the first release.
		req.Target = r.URL.Query().Get("target")
	}
	if req.Target == "" {
		return fmt.Errorf("%w: target missing: POST {\"target\": \"SITE\"}", ErrBadRequest)
	}
	return s.Control.Switchover(r.Context(), group, req.Target, actor(r, req.By))
}

func (s *server) acknowledge(_ http.ResponseWriter, r *http.Request, group string, body []byte) error {
	var req AcknowledgeRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	return s.Control.Acknowledge(r.Context(), group, actor(r, req.By))
}

func (s *server) confirmFence(_ http.ResponseWriter, r *http.Request, group string, body []byte) error {
	var req ConfirmFenceRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	if req.Site == "" {
		return fmt.Errorf("%w: site missing: POST {\"site\": \"OLD-PRIMARY\"}", ErrBadRequest)
	}
	return s.Control.ConfirmFence(r.Context(), group, req.Site, actor(r, req.By))
}

func actor(r *http.Request, by string) Actor {
	return Actor{Name: by, Remote: r.RemoteAddr}
}

// decode reads one JSON object strictly: unknown fields and trailing data
// are errors (a typo must not become a silently ignored field). An empty
// body is an empty object.
func decode(body []byte, dst any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("%w: malformed JSON body: %v", ErrBadRequest, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: malformed JSON body: data after the object", ErrBadRequest)
	}
	return nil
}

// statusOf maps a Control error onto its HTTP status.
func statusOf(err error) int {
	for _, m := range []struct {
		err  error
		code int
	}{
		{ErrBadRequest, http.StatusBadRequest},
		{ErrUnauthorized, http.StatusUnauthorized},
		{ErrForbidden, http.StatusForbidden},
		{ErrNotFound, http.StatusNotFound},
		{ErrRefused, http.StatusConflict},
		{ErrNotLeader, http.StatusServiceUnavailable},
		{ErrUnavailable, http.StatusServiceUnavailable},
	} {
		if errors.Is(err, m.err) {
			return m.code
		}
	}
	return http.StatusInternalServerError
}

func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	if code == http.StatusInternalServerError {
		s.Logger.Error("api.failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else if r.Method == http.MethodPost && r.URL.Path != sidecar.ReportPath {
		s.Logger.Warn("api.refused", "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
	}
	writeError(w, code, err.Error())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client left
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorBody{Error: msg})
}
