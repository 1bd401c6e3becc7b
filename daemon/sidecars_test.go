package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/view"
)

func reportDaemon(t *testing.T, now time.Time) (*Daemon, *group, *httptest.Server) {
	t.Helper()
	cfg := configs.Group{Name: "g", Sites: []configs.Site{
		{Name: "a", Sidecar: &configs.Endpoint{Address: "127.0.0.1:1"}},
		{Name: "b", Sidecar: &configs.Endpoint{Address: "127.0.0.1:2"}},
		{Name: "c"},
	}}
	g := &group{cfg: cfg, sidecars: newSidecars(cfg), now: func() time.Time { return now }}
	d := &Daemon{cfg: &configs.Config{}, log: slog.New(slog.DiscardHandler), groups: []*group{g}, pub: &publisher{key: []byte("secret")}}
	g.pub = d.pub // as newGroup does
	d.pub.set(view.View{Group: "g", Epoch: 7, ActiveSite: "a"})
	srv := httptest.NewServer(api.Handler(api.Options{Control: d, Logger: d.log}))
	t.Cleanup(srv.Close)
	return d, g, srv
}

func postReport(t *testing.T, url string, body []byte, sig string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+view.ReportPath, bytes.NewReader(body))
	if sig != "" {
		req.Header.Set(view.SignatureHeader, sig)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSidecarReport(t *testing.T) {
	now := t0.Add(time.Hour)
	d, g, srv := reportDaemon(t, now)
	key := []byte("secret")
	body, _ := json.Marshal(view.Report{Group: "g", Site: "b", Epoch: 7, MySQLdUp: true,
		Peers: map[string]view.PeerServed{"a": {ServedEpoch: 7, ServedAgoMs: 1500}}})

	if code, _ := postReport(t, srv.URL, body, view.SignBytes(body, key)); code != http.StatusServiceUnavailable {
		t.Fatalf("follower answered %d, want 503 (a sidecar must not renew from a follower)", code)
	}
	d.lead.begin(context.Background(), t0, nil)
	if code, _ := postReport(t, srv.URL, body, ""); code != http.StatusUnauthorized {
		t.Fatalf("unsigned report: %d, want 401", code)
	}
	if code, _ := postReport(t, srv.URL, body, view.SignBytes(body, []byte("forged"))); code != http.StatusUnauthorized {
		t.Fatalf("forged report: %d, want 401", code)
	}
	if o := g.sidecars.observation("b"); !o.LastReport.IsZero() {
		t.Fatalf("a refused report was recorded: %+v", o)
	}
	code, resp := postReport(t, srv.URL, body, view.SignBytes(body, key))
	if code != http.StatusOK {
		t.Fatalf("signed report: %d %s", code, resp)
	}
	var s view.Signed
	if err := json.Unmarshal([]byte(resp), &s); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Verify(key); err != nil || v.Epoch != 7 || v.ActiveSite != "a" {
		t.Fatalf("answer %+v, %v; want the signed view of epoch 7", v, err)
	}
	o := g.sidecars.observation("b")
	if !o.Configured || !o.LastReport.Equal(now) || o.Epoch != 7 || o.MysqldDown {
		t.Fatalf("recorded %+v", o)
	}
	if o.CanKill {
		t.Fatalf("recorded canKill for a report without it: %+v", o)
	}
	if got, want := o.Served["a"], (sitepair.Served{At: now.Add(-1500 * time.Millisecond), Epoch: 7}); got != want {
		t.Fatalf("served a at %v, want receipt minus age %v", got, want)
	}
	for name, c := range map[string]struct {
		body []byte
		want int
	}{
		"site without a sidecar": {[]byte(`{"group":"g","site":"c"}`), http.StatusNotFound},
		"unknown group":          {[]byte(`{"group":"x","site":"a"}`), http.StatusNotFound},
		"unknown field":          {[]byte(`{"group":"g","site":"a","bogus":1}`), http.StatusBadRequest},
		"oversized":              {[]byte(`{"group":"g","site":"a","executed":"` + strings.Repeat("x", 64<<10) + `"}`), http.StatusRequestEntityTooLarge},
	} {
		if code, resp := postReport(t, srv.URL, c.body, view.SignBytes(c.body, key)); code != c.want {
			t.Errorf("%s: %d %s, want %d", name, code, resp, c.want)
		}
	}
}

// Issue 26 hole 1: "not up" is not "down". A hung primary's sidecar whose
// status read timed out was recorded down, and the daemon promoted on it.
func TestSidecarReportDownOnlyWhenProven(t *testing.T) {
	g := newSidecars(configs.Group{Sites: []configs.Site{{Name: "a", Sidecar: &configs.Endpoint{}}}})
	for _, c := range []struct {
		name          string
		r             view.Report
		down, canKill bool
	}{
		{name: "status read failed (hung, auth, too many connections)", r: view.Report{Site: "a", Epoch: 2, MySQLdUp: false}},
		{name: "process proven gone", r: view.Report{Site: "a", Epoch: 2, MySQLdDown: true}, down: true},
		{name: "can kill", r: view.Report{Site: "a", Epoch: 2, MySQLdUp: true, CanKill: true}, canKill: true},
	} {
		g.record(c.r, t0)
		if o := g.observation("a"); o.MysqldDown != c.down || o.CanKill != c.canKill {
			t.Errorf("%s: recorded %+v, want mysqldDown=%v canKill=%v", c.name, o, c.down, c.canKill)
		}
	}
}

// TestSidecarReportAnswerIsBoundToItsNonce: the daemon's answer to a report
// carries a binding over the report's nonce, the reporting site and the
// view, so that an answer recorded earlier cannot renew a later report's
// lease; a report without a nonce (a sidecar of an older version) gets the
// plain signed view, and a malformed nonce is refused before recording.
func TestSidecarReportAnswerIsBoundToItsNonce(t *testing.T) {
	d, g, srv := reportDaemon(t, t0.Add(time.Hour))
	d.lead.begin(context.Background(), t0, nil)
	key := []byte("secret")
	post := func(body []byte) view.Answer {
		t.Helper()
		code, resp := postReport(t, srv.URL, body, view.SignBytes(body, key))
		if code != http.StatusOK {
			t.Fatalf("report %s: %d %s", body, code, resp)
		}
		var a view.Answer
		if err := json.Unmarshal([]byte(resp), &a); err != nil {
			t.Fatal(err)
		}
		if v, err := a.Verify(key); err != nil || v.Epoch != 7 {
			t.Fatalf("answer %s: %v", resp, err)
		}
		return a
	}
	nonce := view.NewNonce()
	a := post([]byte(`{"group":"g","site":"b","epoch":7,"nonce":"` + nonce + `"}`))
	if err := a.VerifyBinding(view.Request{Nonce: nonce, From: "b", By: view.ByDaemon}, key); err != nil {
		t.Fatalf("answer not bound to its report: %v", err)
	}
	if err := a.VerifyBinding(view.Request{Nonce: view.NewNonce(), From: "b", By: view.ByDaemon}, key); err == nil {
		t.Fatal("the answer verifies for another report's nonce")
	}
	if a := post([]byte(`{"group":"g","site":"a","epoch":7}`)); a.Binding != "" {
		t.Fatalf("a report without a nonce got a binding %q", a.Binding)
	}
	bad := []byte(`{"group":"g","site":"a","epoch":8,"nonce":"not-hex"}`)
	if code, resp := postReport(t, srv.URL, bad, view.SignBytes(bad, key)); code != http.StatusBadRequest || !strings.Contains(resp, "nonce") {
		t.Fatalf("malformed nonce: %d %s, want 400 naming the nonce", code, resp)
	}
	if o := g.sidecars.observation("a"); o.Epoch == 8 {
		t.Fatal("a report with a malformed nonce was recorded")
	}
}

// Issue 26 hole 2: what a peer sidecar said counts only within one run of
// it. A new boot resets EpochSince; echoing a receipt of this boot proves it
// still ran then (AliveAt); a receipt of another boot, or unknown, proves
// nothing.
func TestSidecarBootsAndReceipts(t *testing.T) {
	g := newSidecars(configs.Group{Sites: []configs.Site{{Name: "b", Sidecar: &configs.Endpoint{}}}})
	t1, t2, t3, t4 := t0, t0.Add(time.Second), t0.Add(2*time.Second), t0.Add(3*time.Second)
	g.record(view.Report{Site: "b", Epoch: 2, Boot: "x"}, t1)
	tok := g.issue("b", "x", t1)
	g.record(view.Report{Site: "b", Epoch: 2, Boot: "x", Echo: tok}, t2)
	if o := g.observation("b"); !o.EpochSince.Equal(t1) || !o.AliveAt.Equal(t1) {
		t.Fatalf("same boot: epochSince %v aliveAt %v, want both %v", o.EpochSince, o.AliveAt, t1)
	}
	g.record(view.Report{Site: "b", Epoch: 2, Boot: "y", Echo: tok}, t3)
	if o := g.observation("b"); !o.EpochSince.Equal(t3) || !o.AliveAt.IsZero() {
		t.Fatalf("new boot echoing the old boot's receipt: epochSince %v aliveAt %v, want %v and zero", o.EpochSince, o.AliveAt, t3)
	}
	g.record(view.Report{Site: "b", Epoch: 2, Boot: "y", Echo: "forged"}, t4)
	if o := g.observation("b"); !o.AliveAt.IsZero() || !o.EpochSince.Equal(t3) {
		t.Fatalf("unknown receipt: aliveAt %v, epochSince %v", o.AliveAt, o.EpochSince)
	}
	if g.issue("b", "", t4) != "" {
		t.Fatal("a receipt for a sidecar that sends no boot (an older version)")
	}
}
