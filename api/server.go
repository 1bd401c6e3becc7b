package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/failoverd/failoverd/view"
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
	// Token is the operate token (daemon.apiTokenFile): every command
	// needs it or AdminToken; empty disables the commands (403).
	Token string
	// ReadToken (daemon.apiReadTokenFile), when set, makes the status reads
	// take a bearer token: it, Token or AdminToken. Empty: reads are open.
	ReadToken string
	// AdminToken (daemon.apiAdminTokenFile), when set, is the only token
	// the Admin routes take (confirm-fence, reclone); it also runs every
	// other command and read. Empty: Admin routes take Token.
	AdminToken string
	// Metrics serves /metrics; nil answers 404.
	Metrics http.Handler
	// Logger logs refused and failed commands; default slog.Default().
	Logger *slog.Logger
	// Leader returns the base URL of the leading daemon when another
	// daemon leads and its URL is known ("" otherwise): a follower then
	// forwards what only the leader answers (views, sidecar reports,
	// commands) instead of answering 503, so clients behind one Service
	// reach the leader whichever replica they hit.
	Leader func() string
	// Client forwards requests to the leader; default a client with a 5 s timeout.
	Client *http.Client
}

// ForwardedHeader marks a request a follower forwarded; it is never
// forwarded again (two daemons that each think the other leads).
const ForwardedHeader = "X-Failoverd-Forwarded-By"

// Handler returns the API's http.Handler.
func Handler(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 5 * time.Second}
	}
	s := &server{Options: o}
	mux := http.NewServeMux()
	for _, r := range s.routes() {
		if r.Path == "/metrics" && o.Metrics == nil {
			continue // no metrics: 404
		}
		mux.HandleFunc(r.Method+" "+r.Path, s.guard(r.Access, r.h))
	}
	return mux
}

type server struct {
	Options
}

// guard runs h for the requests whose bearer token may use a route of
// access a (see authorize).
func (s *server) guard(a Access, h http.HandlerFunc) http.HandlerFunc {
	if a == Open {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		// Least privilege: a token is checked before anything else is
		// read, so a reader's token never runs a command.
		if s.authorize(w, r, a) {
			h(w, r)
		}
	}
}

func (s *server) metrics(w http.ResponseWriter, r *http.Request) { s.Metrics.ServeHTTP(w, r) }

// healthz answers 200 while the process runs and every group loop makes
// progress, 503 naming each stalled loop otherwise: a liveness probe (or
// the systemd watchdog, fed by the same signal) restarts a daemon whose
// loop is wedged instead of keeping it for a live one.
func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	if ls, ok := s.Control.(LivenessSource); ok {
		if stalled := ls.Stalled(); len(stalled) > 0 {
			// Prevents a wedged loop (no probe acted on, no failover) from
			// passing for a live daemon.
			writeJSON(w, http.StatusServiceUnavailable, ErrorBody{
				Error: "unhealthy: " + strings.Join(stalled, "; "), Problems: stalled})
			return
		}
	}
	_, _ = w.Write([]byte("ok\n")) // a failed write means the client left
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
		s.failOrForward(w, r, err, nil)
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
	v, err := s.Control.SidecarReport(body, r.Header.Get(view.SignatureHeader))
	if err != nil {
		s.failOrForward(w, r, err, body)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// sidecarWatch holds a sidecar's signed watch (view.Watch) until the
// group publishes a newer view; never forwarded (a held request through a
// follower would tie up two daemons): a sidecar watches the daemon its
// reports reach.
func (s *server) sidecarWatch(w http.ResponseWriter, r *http.Request) {
	sw, ok := s.Control.(SidecarWatcher)
	if !ok {
		writeError(w, http.StatusNotFound, "this daemon holds no sidecar watches")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCommandBytes))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("watch larger than %d bytes or unreadable: %v", maxCommandBytes, err))
		return
	}
	a, err := sw.SidecarWatch(r.Context(), body, r.Header.Get(view.SignatureHeader))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
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

// history is read-only like the other GETs (the read token), but only the
// leader holds the current record: a follower forwards it.
func (s *server) history(w http.ResponseWriter, r *http.Request) {
	h, err := s.Control.History(r.PathValue("group"))
	if err != nil {
		s.failOrForward(w, r, err, nil)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

// command wraps a mutation (its token checked by guard): known group,
// bounded body.
func (s *server) command(run func(w http.ResponseWriter, r *http.Request, group string, body []byte) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
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
		answer, err := run(w, r, group, body)
		if err != nil {
			s.failOrForward(w, r, err, body)
			return
		}
		if answer != "" {
			// A dry run: nothing was accepted, this is what would happen.
			writeJSON(w, http.StatusOK, Result{Result: answer, Group: group})
			return
		}
		writeJSON(w, http.StatusAccepted, Result{Result: "accepted", Group: group})
	}
}

// reload re-reads the configuration file of this daemon. Never forwarded:
// every daemon, leader or follower, runs its own file (a follower's must
// match for when it leads).
func (s *server) reload(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCommandBytes))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes or unreadable", maxCommandBytes))
		return
	}
	var req ReloadRequest
	if err := decode(body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.Control.Reload(r.Context(), actor(r, req.By))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *server) switchover(_ http.ResponseWriter, r *http.Request, group string, body []byte) (string, error) {
	var req SwitchoverRequest
	if err := decode(body, &req); err != nil {
		return "", err
	}
	if req.Target == "" {
		// The query form of the first release.
		req.Target = r.URL.Query().Get("target")
		req.Force = req.Force || r.URL.Query().Get("force") == "true"
	}
	if req.Target == "" {
		return "", fmt.Errorf("%w: target missing: POST {\"target\": \"SITE\"}", ErrBadRequest)
	}
	opt := SwitchoverOptions{Force: req.Force, AllowDROnly: req.AllowDROnly, DryRun: req.DryRun}
	answer, err := s.Control.Switchover(r.Context(), group, req.Target, opt, actor(r, req.By))
	if !req.DryRun {
		answer = ""
	}
	return answer, err
}

func (s *server) acknowledge(_ http.ResponseWriter, r *http.Request, group string, body []byte) (string, error) {
	var req AcknowledgeRequest
	if err := decode(body, &req); err != nil {
		return "", err
	}
	return "", s.Control.Acknowledge(r.Context(), group, actor(r, req.By))
}

func (s *server) confirmFence(_ http.ResponseWriter, r *http.Request, group string, body []byte) (string, error) {
	var req ConfirmFenceRequest
	if err := decode(body, &req); err != nil {
		return "", err
	}
	if req.Site == "" {
		return "", fmt.Errorf("%w: site missing: POST {\"site\": \"OLD-PRIMARY\"}", ErrBadRequest)
	}
	return "", s.Control.ConfirmFence(r.Context(), group, req.Site, actor(r, req.By))
}

func (s *server) reclone(_ http.ResponseWriter, r *http.Request, group string, body []byte) (string, error) {
	var req RecloneRequest
	if err := decode(body, &req); err != nil {
		return "", err
	}
	if req.Site == "" || req.Token == "" {
		return "", fmt.Errorf("%w: site or token missing: POST {\"site\": \"SITE\", \"token\": \"first 8+ characters of the GTID set it holds that the primary lacks, or the site name\"}", ErrBadRequest)
	}
	return "", s.Control.Reclone(r.Context(), group, req.Site, req.Token, actor(r, req.By))
}

func (s *server) forceMembers(_ http.ResponseWriter, r *http.Request, group string, body []byte) (string, error) {
	var req ForceMembersRequest
	if err := decode(body, &req); err != nil {
		return "", err
	}
	if req.Site == "" {
		return "", fmt.Errorf("%w: site missing: POST {\"site\": \"SURVIVOR\", \"confirm\": \"TOKEN\"} (without confirm the answer names the plan and its token)", ErrBadRequest)
	}
	return "", s.Control.ForceMembers(r.Context(), group, req.Site, req.Confirm, actor(r, req.By))
}

func (s *server) bootstrapGroup(_ http.ResponseWriter, r *http.Request, group string, body []byte) (string, error) {
	var req BootstrapGroupRequest
	if err := decode(body, &req); err != nil {
		return "", err
	}
	if req.Site == "" {
		return "", fmt.Errorf("%w: site missing: POST {\"site\": \"MEMBER\", \"confirm\": \"TOKEN\"} (without confirm the answer names the plan and its token)", ErrBadRequest)
	}
	return "", s.Control.BootstrapGroup(r.Context(), group, req.Site, req.Confirm, actor(r, req.By))
}

// duration parses a request's "for": a positive Go duration is required,
// every pause and hold ends by itself.
func duration(field, text string) (time.Duration, error) {
	if text == "" {
		return 0, fmt.Errorf("%w: %s missing: every pause and hold has an expiry, e.g. \"30m\"", ErrBadRequest, field)
	}
	d, err := time.ParseDuration(text)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: %s %q: want a positive duration such as 30m or 2h", ErrBadRequest, field, text)
	}
	return d, nil
}

func (s *server) pause(_ http.ResponseWriter, r *http.Request, group string, body []byte) (string, error) {
	var req PauseRequest
	if err := decode(body, &req); err != nil {
		return "", err
	}
	d, err := duration("for", req.For)
	if err != nil {
		return "", err
	}
	return "", s.Control.Pause(r.Context(), group, d, req.Reason, actor(r, req.By))
}

func (s *server) resume(_ http.ResponseWriter, r *http.Request, group string, body []byte) (string, error) {
	var req ResumeRequest
	if err := decode(body, &req); err != nil {
		return "", err
	}
	return "", s.Control.Resume(r.Context(), group, actor(r, req.By))
}

func (s *server) hold(_ http.ResponseWriter, r *http.Request, group string, body []byte) (string, error) {
	var req HoldRequest
	if err := decode(body, &req); err != nil {
		return "", err
	}
	if req.Kind == "" {
		return "", fmt.Errorf("%w: kind missing: POST {\"kind\": \"no-promote\" or \"maintenance\", \"for\": \"2h\", \"reason\": \"...\"}", ErrBadRequest)
	}
	d, err := duration("for", req.For)
	if err != nil {
		return "", err
	}
	return "", s.Control.Hold(r.Context(), group, r.PathValue("site"), req.Kind, d, req.Reason, actor(r, req.By))
}

func (s *server) release(_ http.ResponseWriter, r *http.Request, group string, body []byte) (string, error) {
	var req ReleaseRequest
	if err := decode(body, &req); err != nil {
		return "", err
	}
	return "", s.Control.Release(r.Context(), group, r.PathValue("site"), actor(r, req.By))
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

// failOrForward forwards a request only the leader answers to the leader
// when this daemon does not lead and knows who does; otherwise it fails.
func (s *server) failOrForward(w http.ResponseWriter, r *http.Request, err error, body []byte) {
	leader := ""
	if s.Leader != nil {
		leader = s.Leader()
	}
	// Forwarded once at most: two daemons that each believe the other
	// leads must not bounce a request between them.
	if !errors.Is(err, ErrNotLeader) || leader == "" || r.Header.Get(ForwardedHeader) != "" {
		s.fail(w, r, err)
		return
	}
	if ferr := s.forward(w, r, leader, body); ferr != nil {
		s.Logger.Warn("api.forward_failed", "path", r.URL.Path, "leader", leader, "err", ferr)
		s.fail(w, r, fmt.Errorf("%w; forwarding to the leader %s failed: %v", err, leader, ferr))
	}
}

// forward sends r (with body) to the leader and copies its answer back.
func (s *server) forward(w http.ResponseWriter, r *http.Request, leader string, body []byte) error {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, strings.TrimRight(leader, "/")+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	for _, h := range []string{"Authorization", "Content-Type", view.SignatureHeader} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(ForwardedHeader, r.Host)
	resp, err := s.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.Header().Set("X-Failoverd-Answered-By", leader)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, 16<<20)) // a failed copy means the client left
	return nil
}

func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	if code == http.StatusInternalServerError {
		s.Logger.Error("api.failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else if r.Method == http.MethodPost && r.URL.Path != view.ReportPath && r.URL.Path != view.WatchPath {
		s.Logger.Warn("api.refused", "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
	}
	body := ErrorBody{Error: err.Error()}
	var d Detailed
	if errors.As(err, &d) {
		body.Problems = d.Details()
	}
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client left
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorBody{Error: msg})
}
