package daemon

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/store"
)

// healthGet asks the daemon's API for a site's health.
func healthGet(t *testing.T, srv *httptest.Server, site, role string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/v1/groups/g/sites/" + site + "/health?role=" + role)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The health endpoint over the real daemon's snapshot: a follower answers
// 503 "not the leader"; once leading, the recorded, writable primary is
// 200 as primary and a replica is not.
func TestHealthEndpointFollowsTheDaemonSnapshot(t *testing.T) {
	st := newTestStore(t, store.GroupState{Group: "g", Epoch: 1, ActiveSite: "a"})
	m := newModeGroup(t, configs.ModeActive, st)
	srv := httptest.NewServer(api.Handler(api.Options{Control: m.d, Logger: m.d.log}))
	t.Cleanup(srv.Close)
	m.round(healthyObs())
	if code, body := healthGet(t, srv, "a", "primary"); code != 503 || !strings.Contains(body, "not the leader") {
		t.Errorf("follower: %d %s, want 503 not the leader", code, body)
	}
	m.d.lead.begin(context.Background(), t0, nil)
	if code, body := healthGet(t, srv, "a", "primary"); code != 200 || !strings.Contains(body, `"role":"primary"`) {
		t.Errorf("leader, a: %d %s, want 200 primary", code, body)
	}
	if code, body := healthGet(t, srv, "b", "primary"); code != 503 || !strings.Contains(body, "not the active site") {
		t.Errorf("leader, b: %d %s, want 503", code, body)
	}
}

// A failover whose revoke is persisted (no active site, epoch 2 revoked):
// no site is 200 as primary, the old one included.
func TestHealthEndpointRefusesEveryPrimaryWhileTheEpochIsRevoked(t *testing.T) {
	st := newTestStore(t, store.GroupState{Group: "g", Epoch: 2, InFlight: &store.InFlight{
		ID: "g-2", Kind: kindFailover, From: "a", To: "b", RevokedEpoch: 2, RevokedAt: t0, Step: StepRevoked, StepDone: true}})
	m := newModeGroup(t, configs.ModeActive, st)
	m.d.lead.begin(context.Background(), t0, nil)
	// Observed, not acted on (no round): a still writable, as a revoke
	// finds the old primary before its fence.
	m.obs.set(healthyObs())
	srv := httptest.NewServer(api.Handler(api.Options{Control: m.d, Logger: m.d.log}))
	t.Cleanup(srv.Close)
	for _, site := range []string{"a", "b", "c"} {
		if code, body := healthGet(t, srv, site, "primary"); code != 503 || !strings.Contains(body, "in flight") {
			t.Errorf("%s during the revoke: %d %s, want 503 in flight", site, code, body)
		}
	}
}
