package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/view"
)

// fakeControl is a daemon with one group "orders" (sites a, b) whose
// commands answer err and are recorded.
type fakeControl struct {
	ready  bool
	leader bool
	err    error
	calls  []string
}

func (f *fakeControl) Snapshot() status.Snapshot {
	return status.Snapshot{
		Daemon: status.Daemon{Identity: "d1", Leader: f.leader, Ready: f.ready, NotReady: "first probes pending"},
		Groups: []status.Group{{Name: "orders", Epoch: 4, ActiveSite: "a", Reason: "healthy", Class: status.ClassHealthy,
			Sites: []status.Site{{Name: "a", State: status.StateWritable, Active: true}, {Name: "b", State: status.StateReadOnly}}}},
	}
}

func (f *fakeControl) ActiveSite(group string) (view.Signed, error) {
	switch {
	case !f.leader:
		return view.Signed{}, fmt.Errorf("%w: follower", ErrNotLeader)
	case group != "orders" && group != "":
		return view.Signed{}, fmt.Errorf("%w: unknown group %s", ErrNotFound, group)
	}
	return view.Signed{View: view.View{Group: "orders", Epoch: 4, ActiveSite: "a"}}, nil
}

func (f *fakeControl) SidecarReport(body []byte, sig string) (view.Answer, error) {
	if !f.leader {
		return view.Answer{}, fmt.Errorf("%w: follower", ErrNotLeader)
	}
	if sig != "good" {
		return view.Answer{}, fmt.Errorf("%w: bad signature", ErrUnauthorized)
	}
	f.calls = append(f.calls, "report "+string(body))
	return view.Answer{Signed: view.Signed{View: view.View{Group: "orders", Epoch: 4, ActiveSite: "a"}}}, nil
}

func (f *fakeControl) SidecarWatch(_ context.Context, body []byte, sig string) (view.WatchAnswer, error) {
	if !f.leader {
		return view.WatchAnswer{}, fmt.Errorf("%w: follower", ErrNotLeader)
	}
	if sig != "good" {
		return view.WatchAnswer{}, fmt.Errorf("%w: bad signature", ErrUnauthorized)
	}
	f.calls = append(f.calls, "watch "+string(body))
	return view.WatchAnswer{Epoch: 4, Seq: 1, Newer: true}, nil
}

func (f *fakeControl) Switchover(_ context.Context, group, target string, opt SwitchoverOptions, by Actor) (string, error) {
	if !f.leader {
		return "", fmt.Errorf("%w: follower", ErrNotLeader)
	}
	if opt.Force {
		target += " (forced)"
	}
	if opt.AllowDROnly {
		target += " (dr-only allowed)"
	}
	if opt.DryRun {
		target += " (dry run)"
	}
	f.calls = append(f.calls, fmt.Sprintf("switchover %s %s by %s", group, target, by.Name))
	return "would switch over to " + target, f.err
}

func (f *fakeControl) Pause(_ context.Context, group string, d time.Duration, reason string, by Actor) error {
	f.calls = append(f.calls, fmt.Sprintf("pause %s for %v (%s) by %s", group, d, reason, by.Name))
	return f.err
}

func (f *fakeControl) Resume(_ context.Context, group string, by Actor) error {
	f.calls = append(f.calls, fmt.Sprintf("resume %s by %s", group, by.Name))
	return f.err
}

func (f *fakeControl) Hold(_ context.Context, group, site, kind string, d time.Duration, reason string, by Actor) error {
	f.calls = append(f.calls, fmt.Sprintf("hold %s %s %s for %v (%s) by %s", group, site, kind, d, reason, by.Name))
	return f.err
}

func (f *fakeControl) Release(_ context.Context, group, site string, by Actor) error {
	f.calls = append(f.calls, fmt.Sprintf("release %s %s by %s", group, site, by.Name))
	return f.err
}

func (f *fakeControl) Acknowledge(_ context.Context, group string, by Actor) error {
	f.calls = append(f.calls, fmt.Sprintf("acknowledge %s by %s", group, by.Name))
	return f.err
}

func (f *fakeControl) Reclone(_ context.Context, group, site, token string, by Actor) error {
	f.calls = append(f.calls, fmt.Sprintf("reclone %s %s %s by %s", group, site, token, by.Name))
	return f.err
}

func (f *fakeControl) BootstrapGroup(_ context.Context, group, site, confirm string, by Actor) error {
	f.calls = append(f.calls, fmt.Sprintf("bootstrap %s %s %s by %s", group, site, confirm, by.Name))
	return f.err
}

func (f *fakeControl) ForceMembers(_ context.Context, group, site, confirm string, by Actor) error {
	f.calls = append(f.calls, fmt.Sprintf("force-members %s %s %s by %s", group, site, confirm, by.Name))
	return f.err
}

func (f *fakeControl) ConfirmFence(_ context.Context, group, site string, by Actor) error {
	f.calls = append(f.calls, fmt.Sprintf("confirm-fence %s %s by %s", group, site, by.Name))
	return f.err
}

// History answers one failover and one request for "orders" on the leader.
func (f *fakeControl) History(group string) (status.History, error) {
	switch {
	case group != "orders":
		return status.History{}, fmt.Errorf("%w: unknown group %s", ErrNotFound, group)
	case !f.leader:
		return status.History{}, fmt.Errorf("%w: follower", ErrNotLeader)
	}
	f.calls = append(f.calls, "history "+group)
	return status.History{Group: group, Entries: []status.HistoryEntry{
		{Action: &status.AuditEntry{Action: "acknowledge", By: "ann", Result: "accepted"}},
		{Failover: &status.FailoverRecord{ID: "orders-5", Kind: "failover", From: "a", To: "b", Outcome: status.OutcomeCompleted,
			Proof: "semisync", Timeline: []status.TimelineStep{{Step: "detected"}, {Step: "revoked"}}}},
	}}, nil
}

// reloadProblems is the refusal the fake answers to a reload while err is set.
type reloadProblems struct{ lines []string }

func (e reloadProblems) Error() string     { return "reload refused: 2 configuration problem(s)" }
func (e reloadProblems) Details() []string { return e.lines }
func (e reloadProblems) Unwrap() error     { return ErrRefused }

func (f *fakeControl) Reload(_ context.Context, by Actor) (ReloadResult, error) {
	f.calls = append(f.calls, "reload by "+by.Name)
	if f.err != nil {
		return ReloadResult{}, f.err
	}
	return ReloadResult{Result: "reloaded", File: "/etc/failoverd.yaml", Digest: "abc", Added: []string{"billing"},
		Deferred: []Deferred{{Group: "orders", Reason: "a failover from a to b is in flight"}}}, nil
}

const token = "s3cret"

func serve(t *testing.T, f *fakeControl, tok string) *httptest.Server {
	t.Helper()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "failoverd_up 1\n") })
	srv := httptest.NewServer(Handler(Options{Control: f, Token: tok, Metrics: metrics,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	return srv
}

type call struct {
	method, path, auth, body string
	header                   map[string]string
}

func do(t *testing.T, srv *httptest.Server, c call) (int, string) {
	t.Helper()
	req, err := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestReadEndpoints(t *testing.T) {
	f := &fakeControl{ready: true, leader: true}
	srv := serve(t, f, token)
	for _, tc := range []struct {
		name, path string
		code       int
		contains   string
	}{
		{"healthz", "/healthz", 200, "ok"},
		{"readyz", "/readyz", 200, "ready"},
		{"metrics", "/metrics", 200, "failoverd_up 1"},
		{"active-site", "/active-site?group=orders", 200, `"activeSite":"a"`},
		{"active-site only group", "/active-site", 200, `"activeSite":"a"`},
		{"active-site unknown group", "/active-site?group=nope", 404, "unknown group nope"},
		{"groups", "/v1/groups", 200, `"name":"orders"`},
		{"group", "/v1/groups/orders", 200, `"activeSite":"a"`},
		{"unknown group", "/v1/groups/nope", 404, "unknown group nope"},
		{"status alias", "/status", 200, `"name":"orders"`},
		{"unknown path", "/v2/nothing", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, srv, call{method: "GET", path: tc.path})
			if code != tc.code || !strings.Contains(body, tc.contains) {
				t.Fatalf("GET %s = %d %q, want %d containing %q", tc.path, code, body, tc.code, tc.contains)
			}
		})
	}
}

func TestNotReadyAndFollower(t *testing.T) {
	f := &fakeControl{}
	srv := serve(t, f, token)
	if code, body := do(t, srv, call{method: "GET", path: "/readyz"}); code != 503 || !strings.Contains(body, "first probes pending") {
		t.Fatalf("readyz on a daemon not ready: %d %s", code, body)
	}
	if code, body := do(t, srv, call{method: "GET", path: "/active-site?group=orders"}); code != 503 || !strings.Contains(body, "not the leader") {
		t.Fatalf("active-site on a follower: %d %s", code, body)
	}
	if code, _ := do(t, srv, call{method: "GET", path: "/healthz"}); code != 200 {
		t.Fatalf("healthz must answer whatever the state: %d", code)
	}
}

func TestSidecarReport(t *testing.T) {
	f := &fakeControl{leader: true}
	srv := serve(t, f, token)
	good := map[string]string{view.SignatureHeader: "good"}
	if code, _ := do(t, srv, call{method: "POST", path: view.ReportPath, body: `{"group":"orders"}`, header: good}); code != 200 {
		t.Fatalf("signed report: %d", code)
	}
	if code, _ := do(t, srv, call{method: "POST", path: view.ReportPath, body: `{}`}); code != 401 {
		t.Fatalf("unsigned report: %d, want 401", code)
	}
	big := strings.Repeat("x", maxReportBytes+1)
	if code, _ := do(t, srv, call{method: "POST", path: view.ReportPath, body: big, header: good}); code != 413 {
		t.Fatalf("oversized report: %d, want 413", code)
	}
}

func TestCommands(t *testing.T) {
	bearer := "Bearer " + token
	for _, tc := range []struct {
		name     string
		token    string // the daemon's
		err      error  // what the control answers
		c        call
		code     int
		contains string
		called   string // the control call expected, "" for none
	}{
		{name: "switchover", token: token, c: call{path: "switchover", auth: bearer, body: `{"target":"b","by":"ann@host"}`},
			code: 202, contains: "accepted", called: "switchover orders b by ann@host"},
		{name: "forced switchover", token: token, c: call{path: "switchover", auth: bearer, body: `{"target":"b","force":true,"by":"ann"}`},
			code: 202, called: "switchover orders b (forced) by ann"},
		{name: "forced switchover, query form", token: token, c: call{path: "switchover?target=b&force=true", auth: bearer},
			code: 202, called: "switchover orders b (forced) by "},
		{name: "switchover query form", token: token, c: call{path: "switchover?target=b", auth: bearer},
			code: 202, called: "switchover orders b by "},
		{name: "acknowledge empty body", token: token, c: call{path: "acknowledge", auth: bearer},
			code: 202, called: "acknowledge orders by "},
		{name: "confirm-fence", token: token, c: call{path: "confirm-fence", auth: bearer, body: `{"site":"a","by":"ann"}`},
			code: 202, called: "confirm-fence orders a by ann"},
		{name: "API disabled", token: "", c: call{path: "switchover", auth: bearer, body: `{"target":"b"}`},
			code: 403, contains: "apiTokenFile"},
		{name: "no token", token: token, c: call{path: "switchover", body: `{"target":"b"}`}, code: 401, contains: "bearer token"},
		{name: "wrong token", token: token, c: call{path: "switchover", auth: "Bearer s3creT", body: `{"target":"b"}`}, code: 401},
		{name: "token without Bearer", token: token, c: call{path: "switchover", auth: token, body: `{"target":"b"}`}, code: 401},
		{name: "unknown group", token: token, c: call{path: "switchover", auth: bearer, body: `{"target":"b"}`}, code: 404},
		{name: "malformed body", token: token, c: call{path: "switchover", auth: bearer, body: `{"target":`}, code: 400, contains: "malformed"},
		{name: "unknown field", token: token, c: call{path: "switchover", auth: bearer, body: `{"targt":"b"}`}, code: 400, contains: "unknown field"},
		{name: "trailing data", token: token, c: call{path: "switchover", auth: bearer, body: `{"target":"b"} {}`}, code: 400, contains: "after the object"},
		{name: "wrong type", token: token, c: call{path: "confirm-fence", auth: bearer, body: `{"site":1}`}, code: 400},
		{name: "oversized body", token: token, c: call{path: "switchover", auth: bearer, body: `{"target":"` + strings.Repeat("b", maxCommandBytes) + `"}`}, code: 413},
		{name: "missing target", token: token, c: call{path: "switchover", auth: bearer, body: `{}`}, code: 400, contains: "target missing"},
		{name: "missing site", token: token, c: call{path: "confirm-fence", auth: bearer, body: `{}`}, code: 400, contains: "site missing"},
		{name: "reclone", token: token, c: call{path: "reclone", auth: bearer, body: `{"site":"c","token":"0-3-12","by":"ann"}`},
			code: 202, called: "reclone orders c 0-3-12 by ann"},
		{name: "force-members", token: token, c: call{path: "force-members", auth: bearer, body: `{"site":"c","confirm":"0123456789ab","by":"ann"}`},
			code: 202, called: "force-members orders c 0123456789ab by ann"},
		{name: "force-members without a site", token: token, c: call{path: "force-members", auth: bearer, body: `{"confirm":"x"}`}, code: 400, contains: "site missing"},
		{name: "bootstrap", token: token, c: call{path: "bootstrap", auth: bearer, body: `{"site":"b","confirm":"0123456789ab","by":"ann"}`},
			code: 202, called: "bootstrap orders b 0123456789ab by ann"},
		{name: "bootstrap without a site", token: token, c: call{path: "bootstrap", auth: bearer, body: `{"confirm":"x"}`}, code: 400, contains: "site missing"},
		{name: "reclone without a token", token: token, c: call{path: "reclone", auth: bearer, body: `{"site":"c"}`}, code: 400, contains: "token missing"},
		{name: "reclone without the bearer token", token: token, c: call{path: "reclone", body: `{"site":"c","token":"c"}`}, code: 401},
		{name: "refused", token: token, err: fmt.Errorf("%w: cooldown", ErrRefused), c: call{path: "switchover", auth: bearer, body: `{"target":"b"}`},
			code: 409, contains: "cooldown", called: "switchover orders b by "},
		{name: "unknown site", token: token, err: fmt.Errorf("%w: unknown site z", ErrNotFound), c: call{path: "switchover", auth: bearer, body: `{"target":"z"}`},
			code: 404, contains: "unknown site z", called: "switchover orders z by "},
		{name: "not leader", token: token, err: fmt.Errorf("%w: ask the leader", ErrNotLeader), c: call{path: "acknowledge", auth: bearer},
			code: 503, called: "acknowledge orders by "},
		{name: "internal error", token: token, err: errors.New("disk full"), c: call{path: "acknowledge", auth: bearer},
			code: 500, contains: "disk full", called: "acknowledge orders by "},
		{name: "GET on a command", token: token, c: call{method: "GET", path: "switchover", auth: bearer}, code: 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeControl{leader: true, err: tc.err}
			srv := serve(t, f, tc.token)
			group := "orders"
			if tc.name == "unknown group" {
				group = "nope"
			}
			c := tc.c
			c.path = "/v1/groups/" + group + "/" + c.path
			if c.method == "" {
				c.method = "POST"
			}
			code, body := do(t, srv, c)
			if code != tc.code || !strings.Contains(body, tc.contains) {
				t.Fatalf("%s %s = %d %s, want %d containing %q", c.method, c.path, code, body, tc.code, tc.contains)
			}
			if code != 405 {
				var e map[string]string
				if err := json.Unmarshal([]byte(body), &e); err != nil {
					t.Fatalf("answer is not a JSON object: %q", body)
				}
			}
			switch {
			case tc.called == "" && len(f.calls) > 0:
				t.Fatalf("control called although the request was refused: %v", f.calls)
			case tc.called != "" && (len(f.calls) != 1 || f.calls[0] != tc.called):
				t.Fatalf("control calls %q, want [%q]", f.calls, tc.called)
			}
		})
	}
}

func TestClient(t *testing.T) {
	f := &fakeControl{leader: true}
	srv := serve(t, f, token)
	c := &Client{Server: srv.URL + "/", Token: token}
	ctx := context.Background()
	s, err := c.Status(ctx)
	if err != nil || len(s.Groups) != 1 || s.Daemon.Identity != "d1" {
		t.Fatalf("Status = %+v, %v", s, err)
	}
	g, err := c.Group(ctx, "orders")
	if err != nil || g.ActiveSite != "a" {
		t.Fatalf("Group = %+v, %v", g, err)
	}
	var he *HTTPError
	if _, err := c.Group(ctx, "nope"); !errors.As(err, &he) || he.Code != 404 || he.Message != "unknown group nope" {
		t.Fatalf("Group(nope) = %v", err)
	}
	if err := c.Switchover(ctx, "orders", "b", false, "ann"); err != nil {
		t.Fatal(err)
	}
	if err := c.Acknowledge(ctx, "orders", "ann"); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfirmFence(ctx, "orders", "a", "ann"); err != nil {
		t.Fatal(err)
	}
	want := []string{"switchover orders b by ann", "acknowledge orders by ann", "confirm-fence orders a by ann"}
	if fmt.Sprint(f.calls) != fmt.Sprint(want) {
		t.Fatalf("calls %q, want %q", f.calls, want)
	}
	bad := &Client{Server: srv.URL, Token: "wrong"}
	if err := bad.Acknowledge(ctx, "orders", ""); !errors.As(err, &he) || he.Code != 401 {
		t.Fatalf("wrong token: %v", err)
	}
	srv.Close()
	if _, err := c.Status(ctx); !errors.Is(err, ErrDaemonUnreachable) {
		t.Fatalf("stopped daemon: %v, want ErrDaemonUnreachable", err)
	}
}

// A follower forwards what only the leader answers (views, sidecar
// reports, commands) to the leader it knows, once: clients behind one
// Service reach the leader whichever replica they hit.
func TestFollowerForwardsToTheLeader(t *testing.T) {
	lead := &fakeControl{leader: true}
	leaderSrv := serve(t, lead, token)
	follow := &fakeControl{}
	followerSrv := httptest.NewServer(Handler(Options{Control: follow, Token: token, Leader: func() string { return leaderSrv.URL },
		Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(followerSrv.Close)

	code, body := do(t, followerSrv, call{method: "GET", path: "/active-site?group=orders"})
	if code != 200 || !strings.Contains(body, `"activeSite":"a"`) {
		t.Fatalf("active-site through a follower: %d %s", code, body)
	}
	if code, _ := do(t, followerSrv, call{method: "POST", path: view.ReportPath, body: `{"site":"b"}`, header: map[string]string{view.SignatureHeader: "good"}}); code != 200 {
		t.Fatalf("sidecar report through a follower: %d", code)
	}
	if code, body := do(t, followerSrv, call{method: "POST", path: "/v1/groups/orders/switchover", auth: "Bearer " + token, body: `{"target":"b","by":"ann"}`}); code != 202 {
		t.Fatalf("switchover through a follower: %d %s", code, body)
	}
	if code, _ := do(t, followerSrv, call{method: "POST", path: "/v1/groups/orders/acknowledge", auth: "Bearer wrong"}); code != 401 {
		t.Fatalf("a wrong token is refused before any forwarding: %d", code)
	}
	want := []string{`report {"site":"b"}`, "switchover orders b by ann"}
	if fmt.Sprint(lead.calls) != fmt.Sprint(want) || len(follow.calls) != 0 {
		t.Fatalf("leader calls %q (want %q), follower calls %q", lead.calls, want, follow.calls)
	}

	// Two followers that each think the other leads: one hop, then 503.
	var other string
	a := httptest.NewServer(Handler(Options{Control: &fakeControl{}, Leader: func() string { return other }, Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(a.Close)
	b := httptest.NewServer(Handler(Options{Control: &fakeControl{}, Leader: func() string { return a.URL }, Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(b.Close)
	other = b.URL
	if code, body := do(t, a, call{method: "GET", path: "/active-site"}); code != 503 || !strings.Contains(body, "not the leader") {
		t.Fatalf("a forwarding loop: %d %s, want 503 after one hop", code, body)
	}
	// The leader it knows is gone: 503 saying so.
	leaderSrv.Close()
	if code, body := do(t, followerSrv, call{method: "GET", path: "/active-site"}); code != 503 || !strings.Contains(body, "forwarding to the leader") {
		t.Fatalf("leader gone: %d %s", code, body)
	}
}

// GET /v1/groups/{g}/history is read-only: no bearer token, even with
// commands enabled; unknown group 404; a follower forwards it to the leader
// (only the leader holds the current record) or answers 503.
func TestHistoryEndpoint(t *testing.T) {
	lead := &fakeControl{leader: true}
	leaderSrv := serve(t, lead, token)
	code, body := do(t, leaderSrv, call{method: "GET", path: "/v1/groups/orders/history"})
	var h status.History
	if code != 200 || json.Unmarshal([]byte(body), &h) != nil || h.Group != "orders" || len(h.Entries) != 2 ||
		h.Entries[1].Failover == nil || h.Entries[1].Failover.Proof != "semisync" || len(h.Entries[1].Failover.Timeline) != 2 {
		t.Fatalf("history: %d %s", code, body)
	}
	if code, body := do(t, leaderSrv, call{method: "GET", path: "/v1/groups/nope/history"}); code != 404 || !strings.Contains(body, "unknown group nope") {
		t.Fatalf("history of an unknown group: %d %s", code, body)
	}
	if code, _ := do(t, leaderSrv, call{method: "POST", path: "/v1/groups/orders/history", auth: "Bearer " + token}); code != 405 {
		t.Fatalf("POST history: %d, want 405", code)
	}
	follower := &fakeControl{}
	alone := serve(t, follower, token)
	if code, body := do(t, alone, call{method: "GET", path: "/v1/groups/orders/history"}); code != 503 || !strings.Contains(body, "not the leader") {
		t.Fatalf("history on a follower without a leader: %d %s", code, body)
	}
	forwarding := httptest.NewServer(Handler(Options{Control: follower, Token: token, Leader: func() string { return leaderSrv.URL },
		Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(forwarding.Close)
	if code, body := do(t, forwarding, call{method: "GET", path: "/v1/groups/orders/history"}); code != 200 || !strings.Contains(body, `"orders-5"`) {
		t.Fatalf("history through a follower: %d %s", code, body)
	}
	c := &Client{Server: leaderSrv.URL}
	got, err := c.History(context.Background(), "orders")
	if err != nil || len(got.Entries) != 2 || got.Entries[0].Action == nil || got.Entries[0].Action.By != "ann" {
		t.Fatalf("Client.History = %+v, %v", got, err)
	}
	if want := []string{"history orders", "history orders", "history orders"}; fmt.Sprint(lead.calls) != fmt.Sprint(want) || len(follower.calls) != 0 {
		t.Fatalf("leader calls %q, follower calls %q", lead.calls, follower.calls)
	}
}

// POST /v1/reload: the bearer token is required as for every mutation, the
// answer says what changed, and a refused file answers 409 with every
// problem in its own line (the CLI prints them as validate does). A
// follower reloads its own file: never forwarded to the leader.
func TestReload(t *testing.T) {
	f := &fakeControl{ready: true, leader: false}
	srv := serve(t, f, token)
	if code, body := do(t, srv, call{method: "POST", path: "/v1/reload"}); code != 401 || !strings.Contains(body, "bearer") {
		t.Fatalf("reload without the token: %d %s", code, body)
	}
	if code, _ := do(t, srv, call{method: "POST", path: "/v1/reload", auth: "Bearer " + token, body: `{"by":"ann","force":true}`}); code != 400 {
		t.Fatalf("reload with an unknown field: %d, want 400", code)
	}
	code, body := do(t, srv, call{method: "POST", path: "/v1/reload", auth: "Bearer " + token, body: `{"by":"ann"}`})
	var res ReloadResult
	if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil {
		t.Fatalf("reload: %d %s (%v)", code, body, err)
	}
	if res.Result != "reloaded" || len(res.Added) != 1 || len(res.Deferred) != 1 || res.Deferred[0].Group != "orders" {
		t.Fatalf("reload answer %+v", res)
	}
	if len(f.calls) != 1 || f.calls[0] != "reload by ann" {
		t.Fatalf("calls %v: the follower must reload itself", f.calls)
	}
	lines := []string{"/etc/failoverd.yaml:7:5: groups[0].sites[1].priority: want an integer", "/etc/failoverd.yaml:9:3: groups[1].name: duplicate group name"}
	f.err = reloadProblems{lines}
	code, body = do(t, srv, call{method: "POST", path: "/v1/reload", auth: "Bearer " + token})
	var e ErrorBody
	if err := json.Unmarshal([]byte(body), &e); code != 409 || err != nil || len(e.Problems) != 2 || e.Problems[0] != lines[0] || !strings.Contains(e.Error, "reload refused") {
		t.Fatalf("refused reload: %d %s", code, body)
	}
	cl := &Client{Server: srv.URL, Token: token}
	_, err := cl.Reload(context.Background(), "bob")
	var he *HTTPError
	if !errors.As(err, &he) || he.Code != 409 || len(he.Problems) != 2 || he.Problems[1] != lines[1] {
		t.Fatalf("client: %v, want a 409 HTTPError with both problems", err)
	}
}

// stallingControl is a fakeControl whose loops Stalled reports.
type stallingControl struct {
	*fakeControl
	stalled []string
}

func (s *stallingControl) Stalled() []string { return s.stalled }

// /healthz follows the Control's liveness: 200 while nothing is stalled,
// 503 naming each stalled group loop otherwise (a liveness probe must
// restart a daemon whose loop is wedged).
func TestHealthzNamesStalledLoops(t *testing.T) {
	c := &stallingControl{fakeControl: &fakeControl{ready: true, leader: true}}
	srv := httptest.NewServer(Handler(Options{Control: c, Token: token, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	if code, body := do(t, srv, call{method: "GET", path: "/healthz"}); code != 200 || body != "ok\n" {
		t.Fatalf("healthz with every loop live: %d %q, want 200 ok", code, body)
	}
	c.stalled = []string{"group orders: no loop iteration for 1m0s (bound 30s)"}
	code, body := do(t, srv, call{method: "GET", path: "/healthz"})
	var eb ErrorBody
	if err := json.Unmarshal([]byte(body), &eb); err != nil {
		t.Fatalf("healthz body %q: %v", body, err)
	}
	if code != 503 || !strings.Contains(eb.Error, "group orders") || len(eb.Problems) != 1 {
		t.Fatalf("healthz with a stalled loop: %d %q, want 503 naming group orders", code, body)
	}
}
