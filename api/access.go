package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/failoverd/failoverd/view"
)

// Access is what a route asks of a request's bearer token. The daemon has
// up to three tokens (configs.APITokens): operate (daemon.apiTokenFile),
// read (daemon.apiReadTokenFile, optional) and admin
// (daemon.apiAdminTokenFile, optional); each one grants what the ones below
// it grant: admin ⊇ operate ⊇ read.
type Access int

const (
	// Open routes never take a token: liveness, readiness, metrics, load
	// balancers' health checks, the signed view and sidecar reports (signed
	// with the view key). Load balancers, probes and sidecars hold no API
	// token.
	Open Access = iota
	// Read routes are the status reads. Without a read token they are open
	// (as before there was one); with it they take any of the three tokens.
	Read
	// Operate routes are the commands: the operate or the admin token.
	Operate
	// Admin routes are the commands that can lose data or override
	// fencing. With an admin token they take only it (the operate token is
	// refused, 403); without one they are Operate routes.
	Admin
)

func (a Access) String() string {
	switch a {
	case Open:
		return "open"
	case Read:
		return "read"
	case Operate:
		return "operate"
	case Admin:
		return "admin"
	}
	return "unknown"
}

// Route is one endpoint of the API and the token it takes.
type Route struct {
	// Method and Path as the handler's pattern, e.g. POST and
	// /v1/groups/{group}/reclone.
	Method, Path string
	Access       Access
}

// Routes lists every endpoint Handler serves with the token it takes
// (/metrics included, which Handler serves only with Options.Metrics).
func Routes() []Route {
	s := &server{}
	var out []Route
	for _, r := range s.routes() {
		out = append(out, r.Route)
	}
	return out
}

// route is a Route with its handler.
type route struct {
	Route
	h http.HandlerFunc
}

// routes is the API's table; Handler serves it and Routes documents it.
func (s *server) routes() []route {
	deprecatedStatus := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Deprecation", "true")
		w.Header().Set("Link", `</v1/groups>; rel="successor-version"`)
		s.groups(w, r)
	}
	return []route{
		{Route{"GET", "/healthz", Open}, s.healthz},
		{Route{"GET", "/readyz", Open}, s.readyz},
		{Route{"GET", "/metrics", Open}, s.metrics},
		{Route{"GET", "/active-site", Open}, s.activeSite},
		{Route{"POST", view.ReportPath, Open}, s.sidecarReport},
		{Route{"POST", view.WatchPath, Open}, s.sidecarWatch},
		{Route{"GET", "/v1/groups/{group}/sites/{site}/health", Open}, s.health},
		{Route{"GET", "/v1/groups", Read}, s.groups},
		{Route{"GET", "/status", Read}, deprecatedStatus},
		{Route{"GET", "/v1/groups/{group}", Read}, s.group},
		{Route{"GET", "/v1/groups/{group}/history", Read}, s.history},
		{Route{"POST", "/v1/groups/{group}/switchover", Operate}, s.command(s.switchover)},
		{Route{"POST", "/v1/groups/{group}/acknowledge", Operate}, s.command(s.acknowledge)},
		{Route{"POST", "/v1/groups/{group}/pause", Operate}, s.command(s.pause)},
		{Route{"POST", "/v1/groups/{group}/resume", Operate}, s.command(s.resume)},
		{Route{"POST", "/v1/groups/{group}/sites/{site}/hold", Operate}, s.command(s.hold)},
		{Route{"POST", "/v1/groups/{group}/sites/{site}/release", Operate}, s.command(s.release)},
		{Route{"POST", "/v1/reload", Operate}, s.reload},
		// Asserts a site dead or lost: a wrong assertion promotes beside a
		// writable primary, or gives up what only the lost replica holds.
		{Route{"POST", "/v1/groups/{group}/confirm-fence", Admin}, s.command(s.confirmFence)},
		// Throws away what the site holds that the primary lacks.
		{Route{"POST", "/v1/groups/{group}/reclone", Admin}, s.command(s.reclone)},
		// Forces a Group Replication group's membership to its survivors.
		{Route{"POST", "/v1/groups/{group}/force-members", Admin}, s.command(s.forceMembers)},
		{Route{"POST", "/v1/groups/{group}/bootstrap", Admin}, s.command(s.bootstrapGroup)},
	}
}

// Token levels a request can present: the rights of the best configured
// token it matches.
type held int

const (
	heldNone  held = iota // no Authorization: Bearer header
	heldWrong             // a bearer token that matches none configured
	heldRead
	heldOperate
	heldAdmin
)

// presented is the token r's Authorization header matches. Every configured
// token is compared, each in constant time over SHA-256 digests (so neither
// how much of a guess matched nor the token's length leaks), and all of
// them always, so the time taken does not say which one matched either.
func (s *server) presented(r *http.Request) held {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return heldNone
	}
	sum := sha256.Sum256([]byte(got))
	match := func(want string) bool {
		w := sha256.Sum256([]byte(want))
		// An unconfigured token never matches, not even an empty one sent.
		return subtle.ConstantTimeCompare(sum[:], w[:])&boolInt(want != "") == 1
	}
	admin, operate, read := match(s.AdminToken), match(s.Token), match(s.ReadToken)
	switch {
	case admin:
		return heldAdmin
	case operate:
		return heldOperate
	case read:
		return heldRead
	}
	return heldWrong
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Token names in answers, as the configuration calls their files.
const (
	needRead    = "read"
	needOperate = "operate"
	needAdmin   = "admin"
)

// authorize checks that r's token may use a route of access a, or answers
// 401 (no or an unknown token), or 403 (commands disabled, or a token
// whose rights do not reach: which token is needed is said, in words and in
// ErrorBody.Need).
func (s *server) authorize(w http.ResponseWriter, r *http.Request, a Access) bool {
	// Without a read token the reads stay open, as before it existed: an
	// upgrade must not lock out dashboards and scripts.
	if a == Open || (a == Read && s.ReadToken == "") {
		return true
	}
	// No operate token: the commands are off, never open to anyone.
	if a != Read && s.Token == "" {
		writeJSON(w, http.StatusForbidden, ErrorBody{Error: "mutating API disabled: set daemon.apiTokenFile"})
		return false
	}
	need, field, want := needOperate, "daemon.apiTokenFile", heldOperate
	switch {
	case a == Read:
		need, field, want = needRead, "daemon.apiReadTokenFile", heldRead
	case a == Admin && s.AdminToken != "":
		// The operate token must not declare a site dead or wipe one
		// once an admin token exists.
		need, field, want = needAdmin, "daemon.apiAdminTokenFile", heldAdmin
	}
	h := s.presented(r)
	switch {
	case h >= want:
		return true
	case h == heldNone || h == heldWrong:
		w.Header().Set("WWW-Authenticate", `Bearer realm="failoverd"`)
		writeJSON(w, http.StatusUnauthorized, ErrorBody{Error: "missing or wrong bearer token: " + describe(need, field), Need: need})
		return false
	}
	// A valid token of too few rights: say which one is needed.
	s.Logger.Warn("api.forbidden", "method", r.Method, "path", r.URL.Path, "token", h.String(), "need", need)
	writeJSON(w, http.StatusForbidden, ErrorBody{Error: "the " + h.String() + " token cannot " + verb(a) + ": " + describe(need, field), Need: need})
	return false
}

func (h held) String() string {
	switch h {
	case heldRead:
		return needRead
	case heldOperate:
		return needOperate
	case heldAdmin:
		return needAdmin
	}
	return "no"
}

// describe says which token a route needs and where it is configured.
func describe(need, field string) string {
	switch need {
	case needRead:
		return "reads need the read, operate or admin token (" + field + " is set)"
	case needAdmin:
		return "this command can lose data or override fencing and needs the admin token (" + field + ")"
	}
	return "commands need the operate token (" + field + ") or the admin token"
}

func verb(a Access) string {
	if a == Admin {
		return "run this command"
	}
	return "run commands"
}
