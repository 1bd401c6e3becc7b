package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/failoverd/failoverd/status"
)

// ErrDaemonUnreachable: no answer from the daemon at all (not running,
// wrong address, network).
var ErrDaemonUnreachable = errors.New("daemon unreachable")

// Client talks to a daemon's API (the CLI uses it).
type Client struct {
	// Server is the base URL, e.g. http://127.0.0.1:8080.
	Server string
	// Token is the bearer token sent with every request: the operate or
	// admin token for commands, any of the three for status reads (which
	// need one only when the daemon has a read token).
	Token string
	// HTTP is the client to use; default http.DefaultClient.
	HTTP *http.Client
}

// HTTPError is an answer with a non-2xx status.
type HTTPError struct {
	Code    int
	Message string
	// Problems are the answer's problems, one line each (ErrorBody.Problems).
	Problems []string
	// Need is the token a 401 or 403 asks for (ErrorBody.Need): "read",
	// "operate" or "admin"; "" otherwise.
	Need string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// Status returns the daemon and every group.
func (c *Client) Status(ctx context.Context) (status.Snapshot, error) {
	var s status.Snapshot
	err := c.do(ctx, http.MethodGet, "/v1/groups", nil, &s)
	return s, err
}

// Group returns one group.
func (c *Client) Group(ctx context.Context, name string) (status.Group, error) {
	var g status.Group
	err := c.do(ctx, http.MethodGet, "/v1/groups/"+url.PathEscape(name), nil, &g)
	return g, err
}

// History returns group's failovers, switchovers and operator requests.
func (c *Client) History(ctx context.Context, group string) (status.History, error) {
	var h status.History
	err := c.do(ctx, http.MethodGet, "/v1/groups/"+url.PathEscape(group)+"/history", nil, &h)
	return h, err
}

// Switchover asks for a planned switchover of group to target; force
// allows it within the failover cooldown.
func (c *Client) Switchover(ctx context.Context, group, target string, force bool, by string) error {
	_, err := c.SwitchoverWith(ctx, group, target, SwitchoverOptions{Force: force}, by)
	return err
}

// SwitchoverWith starts (or, with DryRun, only decides) a switchover with
// every option; it returns the daemon's answer (the dry run's verdict).
func (c *Client) SwitchoverWith(ctx context.Context, group, target string, opt SwitchoverOptions, by string) (string, error) {
	var res Result
	err := c.do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(group)+"/switchover",
		SwitchoverRequest{Target: target, Force: opt.Force, AllowDROnly: opt.AllowDROnly, DryRun: opt.DryRun, By: by}, &res)
	return res.Result, err
}

// Pause pauses group for d (see PauseRequest).
func (c *Client) Pause(ctx context.Context, group string, d time.Duration, reason, by string) error {
	return c.do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(group)+"/pause", PauseRequest{For: d.String(), Reason: reason, By: by}, nil)
}

// Resume ends group's pause.
func (c *Client) Resume(ctx context.Context, group, by string) error {
	return c.do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(group)+"/resume", ResumeRequest{By: by}, nil)
}

// Hold puts a hold of kind on site for d (see HoldRequest).
func (c *Client) Hold(ctx context.Context, group, site, kind string, d time.Duration, reason, by string) error {
	return c.do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(group)+"/sites/"+url.PathEscape(site)+"/hold", HoldRequest{Kind: kind, For: d.String(), Reason: reason, By: by}, nil)
}

// Release ends site's hold.
func (c *Client) Release(ctx context.Context, group, site, by string) error {
	return c.do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(group)+"/sites/"+url.PathEscape(site)+"/release", ReleaseRequest{By: by}, nil)
}

// Acknowledge clears group's escalation halt.
func (c *Client) Acknowledge(ctx context.Context, group, by string) error {
	return c.do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(group)+"/acknowledge", AcknowledgeRequest{By: by}, nil)
}

// BootstrapGroup re-forms a Group Replication group after a total outage
// on site (see BootstrapGroupRequest for confirm).
func (c *Client) BootstrapGroup(ctx context.Context, group, site, confirm, by string) error {
	return c.do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(group)+"/bootstrap", BootstrapGroupRequest{Site: site, Confirm: confirm, By: by}, nil)
}

// ForceMembers recovers a Group Replication group that lost its majority
// from the survivor site (see ForceMembersRequest for confirm).
func (c *Client) ForceMembers(ctx context.Context, group, site, confirm, by string) error {
	return c.do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(group)+"/force-members", ForceMembersRequest{Site: site, Confirm: confirm, By: by}, nil)
}

// Reclone starts re-seeding site of group from the primary (see
// RecloneRequest for the token).
func (c *Client) Reclone(ctx context.Context, group, site, token, by string) error {
	return c.do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(group)+"/reclone", RecloneRequest{Site: site, Token: token, By: by}, nil)
}

// ConfirmFence asserts site, group's old primary, can no longer accept writes.
func (c *Client) ConfirmFence(ctx context.Context, group, site, by string) error {
	return c.do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(group)+"/confirm-fence", ConfirmFenceRequest{Site: site, By: by}, nil)
}

// Reload asks the daemon to re-read its configuration file. A refused
// file is an *HTTPError (409) whose Problems list what is wrong.
func (c *Client) Reload(ctx context.Context, by string) (ReloadResult, error) {
	var res ReloadResult
	err := c.do(ctx, http.MethodPost, "/v1/reload", ReloadRequest{By: by}, &res)
	return res, err
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Server, "/")+path, body)
	if err != nil {
		return fmt.Errorf("request %s: %w", path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// Sent on reads too: a daemon with a read token needs one there.
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w at %s: %w", ErrDaemonUnreachable, c.Server, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("read answer of %s: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e ErrorBody
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		return &HTTPError{Code: resp.StatusCode, Message: e.Error, Problems: e.Problems, Need: e.Need}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decode answer of %s: %w", path, err)
		}
	}
	return nil
}
