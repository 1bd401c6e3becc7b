// Package api is failoverd's HTTP API: health and readiness, the Prometheus
// metrics, the signed view sidecars renew their lease on, the status of
// every group and the operator's commands (switchover, acknowledge,
// confirm-fence, reclone, reload). It reads the status.Snapshot the daemon publishes and
// hands commands to a Control; it owns no state of its own.
//
// Each route takes one level of bearer token (Access; Routes lists them):
//
//	GET  /healthz                            the process answers and every group loop makes progress (open; 503 names a stalled one)
//	GET  /readyz                             state loaded, leader known, first probes done (open)
//	GET  /metrics                            Prometheus metrics                       (open)
//	GET  /active-site?group=G                signed view (503 on a follower)          (open)
//	POST /v1/sidecar/report                  a sidecar's signed report                (open: HMAC-signed)
//	GET  /v1/groups/{g}/sites/{s}/health     ?role=primary|replica|any&maxLag=5s: 200 or 503 (open: load balancers)
//	GET  /v1/groups                          the daemon and every group               (read)
//	GET  /v1/groups/{g}                      one group                                (read)
//	GET  /v1/groups/{g}/history              its failovers, switchovers and requests  (read)
//	GET  /status                             alias of /v1/groups (deprecated)         (read)
//	POST /v1/groups/{g}/switchover           {"target": "SITE", "force": false}       (operate)
//	POST /v1/groups/{g}/acknowledge          {}                                       (operate)
//	POST /v1/groups/{g}/pause                {"for": "30m", "reason": "..."}          (operate)
//	POST /v1/groups/{g}/resume               {}                                       (operate)
//	POST /v1/groups/{g}/sites/{s}/hold       {"kind": "no-promote" or "maintenance", "for": "2h", "reason": "..."} (operate)
//	POST /v1/groups/{g}/sites/{s}/release    {}                                       (operate)
//	POST /v1/reload                          {} re-read the configuration file        (operate)
//	POST /v1/groups/{g}/confirm-fence        {"site": "OLD-PRIMARY" or a lost replica} (admin)
//	POST /v1/groups/{g}/reclone              {"site": "S", "token": "T"}              (admin)
//	POST /v1/groups/{g}/force-members        {"site": "S", "confirm": "T"}            (admin)
//	POST /v1/groups/{g}/bootstrap            {"site": "S", "confirm": "T"}            (admin)
//
// Read routes are open without a read token; admin routes take the operate
// token without an admin token.
package api

import (
	"context"
	"errors"
	"time"

	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/view"
)

// Errors a Control returns, each mapped onto one HTTP status. Wrap them
// with %w and a message that says why: the message is the JSON reason.
var (
	// ErrNotFound: unknown group or site (404).
	ErrNotFound = errors.New("not found")
	// ErrRefused: the group refuses the command in its current state (409).
	ErrRefused = errors.New("refused")
	// ErrNotLeader: this daemon does not lead; ask the leader (503).
	ErrNotLeader = errors.New("not the leader")
	// ErrUnavailable: not yet able to answer, e.g. no view yet (503).
	ErrUnavailable = errors.New("unavailable")
	// ErrUnauthorized: a signature or credential does not verify (401).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: the daemon is not configured to allow this (403).
	ErrForbidden = errors.New("forbidden")
	// ErrBadRequest: the request is malformed (400).
	ErrBadRequest = errors.New("bad request")
)

// SidecarWatcher is a Control that holds sidecars' watches (see
// view.Watch): SidecarWatch answers once the group publishes a view newer
// than the watched one, or when its wait or ctx ends. A Control without it
// answers 404 on view.WatchPath, and sidecars fall back to their rounds.
type SidecarWatcher interface {
	SidecarWatch(ctx context.Context, body []byte, sig string) (view.WatchAnswer, error)
}

// Control is what the API asks of the daemon. Every method returns one of
// the errors above (wrapped) or another error (500).
type Control interface {
	// Snapshot is the daemon's latest published status.
	Snapshot() status.Snapshot
	// ActiveSite is the group's signed view ("" picks the only group).
	ActiveSite(group string) (view.Signed, error)
	// SidecarReport records a sidecar's report (body, signed with sig)
	// and answers the group's signed view, bound to the report's nonce.
	SidecarReport(body []byte, sig string) (view.Answer, error)
	// Switchover starts a planned switchover to target (see
	// SwitchoverOptions). It returns what the group decided, in words: the
	// accepted switchover's plan, or with DryRun what it would do.
	Switchover(ctx context.Context, group, target string, opt SwitchoverOptions, by Actor) (string, error)
	// Acknowledge clears an escalation halt.
	Acknowledge(ctx context.Context, group string, by Actor) error
	// ConfirmFence records an operator's assertion that site, the old
	// primary of the failover in flight, can no longer accept writes; or,
	// while the failover waits at ack-holder-unreachable, that site, an
	// unreachable replica it waits for, is lost (what only it holds is
	// given up).
	ConfirmFence(ctx context.Context, group, site string, by Actor) error
	// Reclone starts re-seeding site from the primary, throwing away what
	// it holds; token must repeat the start of the GTID set site holds that
	// the primary lacks, read from both when the request arrives (the site
	// name when there is none).
	Reclone(ctx context.Context, group, site, token string, by Actor) error
	// ForceMembers recovers a Group Replication group that lost its
	// majority: it forces the membership to the survivors of site's view,
	// from site, whose GTID set must contain every other survivor's;
	// confirm must repeat the plan's confirmation token, which a refusal
	// names with the plan's consequences.
	ForceMembers(ctx context.Context, group, site, confirm string, by Actor) error
	// BootstrapGroup re-forms a Group Replication group after a total
	// outage on site, whose GTID set must contain every other member's,
	// every member reached and stopped; confirm must repeat the plan's
	// confirmation token, which a refusal names with the plan.
	BootstrapGroup(ctx context.Context, group, site, confirm string, by Actor) error
	// Pause stops the group's automatic actions (failover, switchover,
	// fence, re-assert, rejoin) for d, for reason; observing, reporting and
	// routing repair go on.
	Pause(ctx context.Context, group string, d time.Duration, reason string, by Actor) error
	// Resume ends the group's pause.
	Resume(ctx context.Context, group string, by Actor) error
	// Hold puts a no-promote or maintenance hold on site for d; a
	// maintenance hold on the primary first switches over to the best
	// candidate.
	Hold(ctx context.Context, group, site, kind string, d time.Duration, reason string, by Actor) error
	// Release ends site's hold.
	Release(ctx context.Context, group, site string, by Actor) error
	// History is the group's latest failovers and switchovers, with their
	// timelines, and its operator requests, oldest first; only the leader
	// answers (ErrNotLeader on a follower, which forwards it).
	History(group string) (status.History, error)
	// Reload re-reads the configuration file the daemon was started with
	// and applies its groups; a file it refuses (invalid, or changing what
	// needs a restart) changes nothing and its error lists every problem
	// (Detailed).
	Reload(ctx context.Context, by Actor) (ReloadResult, error)
}

// LivenessSource is implemented by a Control whose work can wedge (the
// daemon's group loops): GET /healthz answers 503 while Stalled lists
// anything, one line each, and 200 otherwise.
type LivenessSource interface {
	Stalled() []string
}

// Detailed is an error that lists its problems, one line each (a refused
// reload's configuration problems, FILE:LINE:COL: PATH: what and the fix):
// the error answer carries them in ErrorBody.Problems.
type Detailed interface {
	error
	Details() []string
}

// SwitchoverOptions are the operator's switches on a switchover.
type SwitchoverOptions struct {
	// Force allows it within failoverCooldown of the last automatic failover.
	Force bool
	// AllowDROnly allows a dr-only target (never chosen automatically).
	AllowDROnly bool
	// DryRun decides and answers, changing nothing.
	DryRun bool
}

// Actor says who asked for a command, for the history.
type Actor struct {
	// Name is what the client says of itself (the CLI sends user@host);
	// free text, never trusted for authorization.
	Name string `json:"name"`
	// Remote is the client's network address as the server saw it.
	Remote string `json:"remote"`
}

func (a Actor) String() string {
	if a.Name == "" {
		return a.Remote
	}
	return a.Name + " from " + a.Remote
}

// SwitchoverRequest is the body of POST /v1/groups/{g}/switchover.
type SwitchoverRequest struct {
	Target string `json:"target"`
	// Force allows the switchover within failoverCooldown of the last
	// failover or switchover (refused otherwise).
	Force bool `json:"force,omitempty"`
	// AllowDROnly allows a dr-only target.
	AllowDROnly bool `json:"allowDROnly,omitempty"`
	// DryRun answers what the switchover would do (200, Result says it)
	// without doing it.
	DryRun bool `json:"dryRun,omitempty"`
	// By names the operator (recorded in the history).
	By string `json:"by,omitempty"`
}

// PauseRequest is the body of POST /v1/groups/{g}/pause.
type PauseRequest struct {
	// For is how long the pause lasts (a Go duration, e.g. "30m";
	// required, at most daemon.maxPause).
	For string `json:"for"`
	// Reason says why (required; shown in status and the history).
	Reason string `json:"reason"`
	By     string `json:"by,omitempty"`
}

// ResumeRequest is the body of POST /v1/groups/{g}/resume.
type ResumeRequest struct {
	By string `json:"by,omitempty"`
}

// HoldRequest is the body of POST /v1/groups/{g}/sites/{s}/hold.
type HoldRequest struct {
	// Kind is "no-promote" or "maintenance".
	Kind string `json:"kind"`
	// For is how long the hold lasts (required, at most daemon.maxHold).
	For    string `json:"for"`
	Reason string `json:"reason"`
	By     string `json:"by,omitempty"`
}

// ReleaseRequest is the body of POST /v1/groups/{g}/sites/{s}/release.
type ReleaseRequest struct {
	By string `json:"by,omitempty"`
}

// AcknowledgeRequest is the body of POST /v1/groups/{g}/acknowledge.
type AcknowledgeRequest struct {
	By string `json:"by,omitempty"`
}

// ConfirmFenceRequest is the body of POST /v1/groups/{g}/confirm-fence.
type ConfirmFenceRequest struct {
	// Site is the old primary the operator asserts is dead or fenced, or
	// (at ack-holder-unreachable) the unreachable replica asserted lost.
	Site string `json:"site"`
	By   string `json:"by,omitempty"`
}

// ForceMembersRequest is the body of POST /v1/groups/{g}/force-members.
type ForceMembersRequest struct {
	// Site is the survivor to force the membership on.
	Site string `json:"site"`
	// Confirm is the plan's confirmation token; without it (or with an
	// old one) the request is refused (409) with the plan and its token.
	Confirm string `json:"confirm,omitempty"`
	By      string `json:"by,omitempty"`
}

// BootstrapGroupRequest is the body of POST /v1/groups/{g}/bootstrap.
type BootstrapGroupRequest struct {
	// Site is the member to bootstrap the group on.
	Site string `json:"site"`
	// Confirm is the plan's confirmation token; without it (or with an
	// old one) the request is refused (409) with the plan and its token.
	Confirm string `json:"confirm,omitempty"`
	By      string `json:"by,omitempty"`
}

// RecloneRequest is the body of POST /v1/groups/{g}/reclone.
type RecloneRequest struct {
	// Site is the site to re-seed from the primary.
	Site string `json:"site"`
	// Token is the first 8 or more characters of what the site holds that
	// the primary lacks (its recorded divergent GTID set with whatever both
	// servers, read when the request arrives, show it holds beyond the
	// primary), or the site name when it holds nothing the primary lacks.
	// A wrong token is refused (409) with the set to repeat.
	Token string `json:"token"`
	By    string `json:"by,omitempty"`
}

// ReloadRequest is the body of POST /v1/reload.
type ReloadRequest struct {
	By string `json:"by,omitempty"`
}

// ReloadResult is the answer of POST /v1/reload: the file the daemon now
// runs and what the reload changed.
type ReloadResult struct {
	// Result is "reloaded", or "unchanged" when no group changed.
	Result string `json:"result"`
	// File is the configuration file; Digest its SHA-256 (hex).
	File   string `json:"file"`
	Digest string `json:"digest"`
	// Added, Removed and Changed are the groups started, stopped and
	// rebuilt with their new configuration by this reload.
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Changed []string `json:"changed,omitempty"`
	// Deferred are the groups whose change or removal waits, each with
	// why: a failover or switchover is under way (or a reclone this daemon
	// runs); the daemon applies it once that ends.
	Deferred []Deferred `json:"deferred,omitempty"`
}

// Deferred is a group whose new configuration waits.
type Deferred struct {
	Group  string `json:"group"`
	Reason string `json:"reason"`
}

// Result is the body of a successful command.
type Result struct {
	Result string `json:"result"`
	Group  string `json:"group"`
}

// ErrorBody is the body of every error answer.
type ErrorBody struct {
	Error string `json:"error"`
	// Problems lists the problems behind Error, one line each, when there
	// are several (a refused reload's configuration problems).
	Problems []string `json:"problems,omitempty"`
	// Need names the token a 401 or 403 asks for: "read", "operate" or
	// "admin" (absent on other answers).
	Need string `json:"need,omitempty"`
}
