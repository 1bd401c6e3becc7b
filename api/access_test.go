package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/failoverd/failoverd/view"
)

// Tokens of the access tests: each role its own.
const (
	readTok    = "read-token-0123456789"
	operateTok = "operate-token-0123456789"
	adminTok   = "admin-token-0123456789"
)

// presentations are the bearer tokens a request of the access table offers.
var presentations = []struct{ name, auth string }{
	{"no token", ""},
	{"read", "Bearer " + readTok},
	{"operate", "Bearer " + operateTok},
	{"admin", "Bearer " + adminTok},
	{"wrong", "Bearer " + operateTok + "x"},
	{"empty bearer", "Bearer "},
}

// routeAccess is the token level every route must take, written out here
// rather than read from Routes, so that a route moved to a lower level
// fails TestEveryRouteTakesItsToken.
var routeAccess = map[string]Access{
	"GET /healthz":            Open,
	"GET /readyz":             Open,
	"GET /metrics":            Open,
	"GET /active-site":        Open,
	"POST /v1/sidecar/report": Open,
	"POST /v1/sidecar/watch":  Open,
	"GET /v1/groups/{group}/sites/{site}/health": Open,
	"GET /v1/groups":                               Read,
	"GET /status":                                  Read,
	"GET /v1/groups/{group}":                       Read,
	"GET /v1/groups/{group}/history":               Read,
	"POST /v1/groups/{group}/switchover":           Operate,
	"POST /v1/groups/{group}/acknowledge":          Operate,
	"POST /v1/groups/{group}/pause":                Operate,
	"POST /v1/groups/{group}/resume":               Operate,
	"POST /v1/groups/{group}/sites/{site}/hold":    Operate,
	"POST /v1/groups/{group}/sites/{site}/release": Operate,
	"POST /v1/reload":                              Operate,
	"POST /v1/groups/{group}/confirm-fence":        Admin,
	"POST /v1/groups/{group}/reclone":              Admin,
	"POST /v1/groups/{group}/force-members":        Admin,
	"POST /v1/groups/{group}/bootstrap":            Admin,
}

// routeCall is a request of route that its handler accepts (2xx) once its
// token passes: a known group and site, a valid body.
func routeCall(r Route) call {
	path := strings.NewReplacer("{group}", "orders", "{site}", "a").Replace(r.Path)
	c := call{method: r.Method, path: path}
	switch {
	case strings.HasSuffix(path, "/switchover"):
		c.body = `{"target":"b"}`
	case strings.HasSuffix(path, "/confirm-fence"):
		c.body = `{"site":"a"}`
	case strings.HasSuffix(path, "/reclone"):
		c.body = `{"site":"b","token":"b"}`
	case strings.HasSuffix(path, "/force-members"), strings.HasSuffix(path, "/bootstrap"):
		c.body = `{"site":"b","confirm":"0123456789ab"}`
	case strings.HasSuffix(path, "/pause"):
		c.body = `{"for":"1m"}`
	case strings.HasSuffix(path, "/hold"):
		c.body = `{"kind":"no-promote","for":"1m"}`
	case path == view.ReportPath, path == view.WatchPath:
		c.body = `{"group":"orders"}`
		c.header = map[string]string{view.SignatureHeader: "good"}
	case strings.HasSuffix(path, "/health"):
		c.path += "?role=any"
	}
	return c
}

// TestEveryRouteTakesItsToken: every route × every token a request can
// offer, for each set of configured tokens, answers as documented: the
// open routes always pass; reads pass without a read token and otherwise
// take any of the three; commands take the operate or admin token; the
// admin routes (confirm-fence, reclone) refuse the operate token with 403
// once an admin token exists; a token of too few rights is a 403, no or an
// unknown token a 401, and commands without an operate token are disabled
// (403). It guards against a route answering with fewer rights than its
// level (a reader running reclone) and against a configuration change
// locking out what it should not (load balancers, sidecars).
func TestEveryRouteTakesItsToken(t *testing.T) {
	const pass = 0
	// Per configured tokens and access level: the answer to each of
	// presentations, in order (pass: the handler ran and answered 2xx).
	type want map[Access][6]int
	deny := [6]int{403, 403, 403, 403, 403, 403}
	open := [6]int{}
	for _, cfg := range []struct {
		name                 string
		read, operate, admin string
		want                 want
	}{
		{name: "no tokens", want: want{Open: open, Read: open, Operate: deny, Admin: deny}},
		{name: "operate only", operate: operateTok, want: want{
			Open: open, Read: open,
			Operate: {401, 401, pass, 401, 401, 401},
			Admin:   {401, 401, pass, 401, 401, 401},
		}},
		{name: "read only", read: readTok, want: want{
			Open: open, Read: {401, pass, 401, 401, 401, 401},
			Operate: deny, Admin: deny,
		}},
		{name: "operate and read", read: readTok, operate: operateTok, want: want{
			Open: open, Read: {401, pass, pass, 401, 401, 401},
			Operate: {401, 403, pass, 401, 401, 401},
			Admin:   {401, 403, pass, 401, 401, 401},
		}},
		{name: "operate and admin", operate: operateTok, admin: adminTok, want: want{
			Open: open, Read: open,
			Operate: {401, 401, pass, pass, 401, 401},
			Admin:   {401, 401, 403, pass, 401, 401},
		}},
		{name: "all three", read: readTok, operate: operateTok, admin: adminTok, want: want{
			Open: open, Read: {401, pass, pass, pass, 401, 401},
			Operate: {401, 403, pass, pass, 401, 401},
			Admin:   {401, 403, 403, pass, 401, 401},
		}},
	} {
		f := &fakeControl{ready: true, leader: true}
		metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "failoverd_up 1\n") })
		srv := httptest.NewServer(Handler(Options{Control: f, Token: cfg.operate, ReadToken: cfg.read, AdminToken: cfg.admin,
			Metrics: metrics, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
		routes := Routes()
		if len(routes) != len(routeAccess) {
			t.Errorf("the API serves %d routes, the test knows %d: give a new route its level in routeAccess", len(routes), len(routeAccess))
		}
		for _, r := range routes {
			access, known := routeAccess[r.Method+" "+r.Path]
			if !known {
				t.Errorf("%s %s: not in routeAccess; give it its token level there", r.Method, r.Path)
				continue
			}
			for i, p := range presentations {
				c := routeCall(r)
				c.auth = p.auth
				code, body := do(t, srv, c)
				expect := cfg.want[access][i]
				name := cfg.name + ": " + r.Method + " " + r.Path + " with " + p.name
				if expect == pass {
					if code/100 != 2 {
						t.Errorf("%s: %d %s, want it to pass (2xx)", name, code, body)
					}
					continue
				}
				if code != expect {
					t.Errorf("%s: %d %s, want %d", name, code, body, expect)
				}
			}
		}
		srv.Close()
	}
}

// TestTokenRefusalsSayWhichTokenIsNeeded: a 401 or 403 names the token the
// route needs and its configuration field, in words and in "need" (the
// CLI's hint rests on it), and the operate token's 403 on an admin route
// says the command can lose data. Without it an operator holding the
// operate token cannot tell why confirm-fence is refused.
func TestTokenRefusalsSayWhichTokenIsNeeded(t *testing.T) {
	f := &fakeControl{ready: true, leader: true}
	srv := httptest.NewServer(Handler(Options{Control: f, Token: operateTok, ReadToken: readTok, AdminToken: adminTok,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name     string
		c        call
		code     int
		need     string
		contains []string
	}{
		{"operate token on confirm-fence", call{method: "POST", path: "/v1/groups/orders/confirm-fence", auth: "Bearer " + operateTok, body: `{"site":"a"}`},
			403, "admin", []string{"operate token cannot run this command", "admin token", "daemon.apiAdminTokenFile", "lose data"}},
		{"operate token on reclone", call{method: "POST", path: "/v1/groups/orders/reclone", auth: "Bearer " + operateTok, body: `{"site":"b","token":"b"}`},
			403, "admin", []string{"admin token", "daemon.apiAdminTokenFile"}},
		{"no token on reclone", call{method: "POST", path: "/v1/groups/orders/reclone", body: `{"site":"b","token":"b"}`},
			401, "admin", []string{"missing or wrong bearer token", "admin token"}},
		{"read token on switchover", call{method: "POST", path: "/v1/groups/orders/switchover", auth: "Bearer " + readTok, body: `{"target":"b"}`},
			403, "operate", []string{"read token cannot run commands", "operate token", "daemon.apiTokenFile"}},
		{"no token on a read", call{method: "GET", path: "/v1/groups"},
			401, "read", []string{"reads need the read, operate or admin token", "daemon.apiReadTokenFile"}},
	} {
		code, body := do(t, srv, tc.c)
		var e ErrorBody
		_ = json.Unmarshal([]byte(body), &e)
		if code != tc.code || e.Need != tc.need {
			t.Errorf("%s: %d need %q (%s), want %d need %q", tc.name, code, e.Need, body, tc.code, tc.need)
		}
		for _, s := range tc.contains {
			if !strings.Contains(e.Error, s) {
				t.Errorf("%s: %q lacks %q", tc.name, e.Error, s)
			}
		}
	}
	if len(f.calls) != 0 {
		t.Errorf("refused requests reached the daemon: %v", f.calls)
	}
}

// TestClientSendsItsTokenOnReads: the client library offers its token on
// GETs too, so `failoverd status --token-file F` works against a daemon
// with a read token (it sent it on commands only).
func TestClientSendsItsTokenOnReads(t *testing.T) {
	f := &fakeControl{ready: true, leader: true}
	srv := httptest.NewServer(Handler(Options{Control: f, Token: operateTok, ReadToken: readTok,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	for _, tok := range []string{readTok, operateTok} {
		cl := &Client{Server: srv.URL, Token: tok}
		if _, err := cl.Status(t.Context()); err != nil {
			t.Errorf("status with a valid token: %v", err)
		}
	}
	_, err := (&Client{Server: srv.URL}).Status(t.Context())
	he, ok := err.(*HTTPError)
	if !ok || he.Code != 401 || he.Need != "read" {
		t.Fatalf("status without a token: %v, want a 401 needing the read token", err)
	}
}

// docsRoute is a route as docs/api.md's endpoint table writes it:
// "`GET /v1/groups/{g}/sites/{s}/health?role=...`" with its token column.
var docsRoute = regexp.MustCompile("^\\| `(GET|POST) ([^ `?]+)[^`]*` \\| ([a-z]+) \\|")

// apiDoc reads docs/api.md.
func apiDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docPath is a documented path in the code's pattern form.
func docPath(p string) string {
	return strings.NewReplacer("{g}", "{group}", "{s}", "{site}").Replace(p)
}

// TestDocsGiveEveryRouteItsToken: docs/api.md's endpoint table lists every
// route with the token it takes, exactly as the code serves it, so the
// documented least privilege cannot drift from the handler.
func TestDocsGiveEveryRouteItsToken(t *testing.T) {
	documented := map[string]string{}
	for line := range strings.SplitSeq(apiDoc(t), "\n") {
		if m := docsRoute.FindStringSubmatch(line); m != nil {
			documented[m[1]+" "+docPath(m[2])] = m[3]
		}
	}
	for _, r := range Routes() {
		key := r.Method + " " + r.Path
		got, ok := documented[key]
		switch {
		case !ok:
			t.Errorf("docs/api.md: %s missing from the endpoint table", key)
		case got != r.Access.String():
			t.Errorf("docs/api.md: %s documented with token %q, the code takes %q", key, got, r.Access)
		}
		delete(documented, key)
	}
	for key := range documented {
		t.Errorf("docs/api.md documents %s, which the code does not serve", key)
	}
}

// adminDocRoute is a line of docs/api.md's list of admin routes.
var adminDocRoute = regexp.MustCompile("^- `POST ([^`]+)`")

// TestDocsListTheAdminRoutesOfTheCode: the list of dangerous commands in
// docs/api.md ("Tokens") is exactly the code's Admin routes: a command made
// dangerous in code but not in the docs (or the reverse) would leave
// operators giving out the wrong token.
func TestDocsListTheAdminRoutesOfTheCode(t *testing.T) {
	doc := apiDoc(t)
	start := strings.Index(doc, "Commands that need the admin token")
	if start < 0 {
		t.Fatal(`docs/api.md lacks "Commands that need the admin token"`)
	}
	var documented []string
	for line := range strings.SplitSeq(doc[start:], "\n") {
		if m := adminDocRoute.FindStringSubmatch(line); m != nil {
			documented = append(documented, docPath(m[1]))
		} else if len(documented) > 0 && strings.TrimSpace(line) == "" {
			break // the list ended
		}
	}
	var code []string
	for _, r := range Routes() {
		if r.Access == Admin {
			code = append(code, r.Path)
		}
	}
	slices.Sort(documented)
	slices.Sort(code)
	if !slices.Equal(documented, code) {
		t.Fatalf("docs/api.md lists admin routes %v, the code has %v", documented, code)
	}
}
