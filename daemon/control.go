package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/view"
)

// The daemon is the API's Control and the source of /healthz's verdict.
var (
	_ api.Control        = (*Daemon)(nil)
	_ api.LivenessSource = (*Daemon)(nil)
)

// ActiveSite implements api.Control: the group's signed view.
func (d *Daemon) ActiveSite(name string) (view.Signed, error) {
	// A follower's view may be stale; a sidecar must not renew its lease on it.
	if !d.isLeader() {
		return view.Signed{}, fmt.Errorf("%w: this daemon does not serve views", api.ErrNotLeader)
	}
	if groups := d.groupList(); name == "" && len(groups) == 1 {
		name = groups[0].cfg.Name
	}
	s, ok := d.pub.get(name)
	if !ok {
		return view.Signed{}, fmt.Errorf("%w: unknown group %s", api.ErrNotFound, name)
	}
	return s, nil
}

// SidecarReport implements api.Control: it records a sidecar's report (its
// lease renewal) and answers the group's signed view, bound to the report.
func (d *Daemon) SidecarReport(body []byte, sig string) (view.Answer, error) {
	// A follower's view may be stale; a sidecar must not renew its lease on it.
	if !d.isLeader() {
		return view.Answer{}, fmt.Errorf("%w: this daemon does not take sidecar reports", api.ErrNotLeader)
	}
	return acceptReport(d.pub, d.group, body, sig)
}

// acceptReport is the one way a sidecar's report is taken, by the daemon's
// API and by the harness: check its signature, find its group (group
// returns nil for one this daemon does not run), record it, and answer the
// group's signed view bound to the report, with a receipt token.
func acceptReport(pub *publisher, group func(name string) *group, body []byte, sig string) (view.Answer, error) {
	rep, err := pub.verifyReport(body, sig)
	if err != nil {
		return view.Answer{}, err
	}
	g := group(rep.Group)
	if g == nil {
		return view.Answer{}, fmt.Errorf("%w: unknown group %s", api.ErrNotFound, rep.Group)
	}
	s, tok, err := g.takeReport(rep)
	if err != nil {
		return view.Answer{}, err
	}
	a, err := pub.answer(s, rep)
	a.Token = tok
	return a, err
}

// verifyReport checks a sidecar report's signature and decodes it.
func (p *publisher) verifyReport(body []byte, sig string) (view.Report, error) {
	var rep view.Report
	// An unsigned report could claim a fence that never happened.
	if err := p.verifySigned(body, sig, "report", &rep); err != nil {
		return view.Report{}, err
	}
	// Checked before the report is recorded: its answer could not be bound.
	if rep.Nonce != "" {
		if err := view.CheckNonce(rep.Nonce); err != nil {
			return view.Report{}, fmt.Errorf("%w: report field nonce: %v", api.ErrBadRequest, err)
		}
	}
	return rep, nil
}

// verifySigned checks that body, a sidecar's message (what: "report",
// "watch"), is signed with the view key (sig, view.SignatureHeader) and
// decodes it strictly into into.
func (p *publisher) verifySigned(body []byte, sig, what string, into any) error {
	if len(p.key) == 0 {
		return fmt.Errorf("%w: sidecar %ss need daemon.viewSigningKeyFile", api.ErrForbidden, what)
	}
	if !view.VerifyBytes(body, sig, p.key) {
		return fmt.Errorf("%w: bad or missing %s", api.ErrUnauthorized, view.SignatureHeader)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("%w: malformed %s: %v", api.ErrBadRequest, what, err)
	}
	return nil
}

// answer binds s to the report's nonce, the reporting site and this daemon:
// only an answer made for this very report may renew the sidecar's lease
// (a recorded one replayed to a later report must not). A report without a
// nonce (a sidecar of an older version) gets s unbound, as before.
func (p *publisher) answer(s view.Signed, rep view.Report) (view.Answer, error) {
	if rep.Nonce == "" {
		return view.Answer{Signed: s}, nil
	}
	a, err := view.Bind(s, view.Request{Nonce: rep.Nonce, From: rep.Site, By: view.ByDaemon}, p.key)
	if err != nil {
		return view.Answer{}, fmt.Errorf("bind the answer to %s's report: %w", rep.Site, err)
	}
	return a, nil
}

// takeReport records a verified report of one of g's sidecars and answers
// g's signed view and a receipt token for the sidecar to echo.
func (g *group) takeReport(rep view.Report) (view.Signed, string, error) {
	if !g.sidecars.known(rep.Site) {
		return view.Signed{}, "", fmt.Errorf("%w: unknown group or site without a sidecar: %s/%s", api.ErrNotFound, rep.Group, rep.Site)
	}
	s, ok := g.pub.get(rep.Group)
	if !ok {
		return view.Signed{}, "", fmt.Errorf("%w: no view yet for group %s", api.ErrUnavailable, rep.Group)
	}
	if before := g.sidecars.observation(rep.Site); rep.FencedEpoch > before.FencedEpoch {
		g.ev().Fenced(g.cfg.Name, rep.Site, "sidecar")
	}
	at := g.now()
	switch newExit, changed := g.sidecars.record(rep, at); {
	case newExit:
		g.mysqldExited(rep)
	case changed:
		if w, ok := g.obs.(reportWaker); ok {
			w.SidecarChanged()
		}
	}
	return s, g.sidecars.issue(rep.Site, rep.Boot, at), nil
}

// reportWaker is the poller-backed Observations: a sidecar's report
// changed what the decisions read of it; decide now (probe nothing).
type reportWaker interface{ SidecarChanged() }

// exitNotifier is the poller-backed Observations: on a sidecar's exit
// report, probe every other site now and wake the loop.
type exitNotifier interface{ MysqldExited(site string) }

// mysqldExited logs a sidecar's new exit report and asks for what the
// PrimaryExited detection needs: the replicas' fresh view of the site and
// a decision now, not at the next tick. Whether the report counts is
// sitepair's to decide (its guards); nothing here acts on it.
func (g *group) mysqldExited(rep view.Report) {
	x := rep.MySQLdExit
	g.log.Warn("sidecar.mysqld_exited", "site", rep.Site, "pid", x.PID, "start_ticks", x.StartTicks, "ago_ms", x.AgoMs, "epoch", rep.Epoch)
	if n, ok := g.obs.(exitNotifier); ok {
		n.MysqldExited(rep.Site)
	}
}

// leaderURL is the leading daemon's API URL when another daemon leads and
// advertises one (its identity is its daemon.advertiseURL), else "".
func (d *Daemon) leaderURL() string {
	l := d.lead.leader()
	if l == "" || l == d.opts.Identity || d.isLeader() {
		return ""
	}
	if u, err := url.Parse(l); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return l
}

// serve runs the HTTP server until ctx ends.
func (d *Daemon) serve(ctx context.Context, log *slog.Logger) error {
	h := api.Handler(api.Options{Control: d, Token: d.tokens.Operate, ReadToken: d.tokens.Read, AdminToken: d.tokens.Admin, Metrics: d.opts.Metrics, Logger: log, Leader: d.leaderURL})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, TLSConfig: d.tls,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() {
		if d.tls != nil {
			// Certificates are loaded in TLSConfig already.
			errc <- srv.ServeTLS(d.listener, "", "")
			return
		}
		errc <- srv.Serve(d.listener)
	}()
	log.Info("http.listening", "addr", d.listener.Addr().String(), "tls", d.tls != nil)
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
