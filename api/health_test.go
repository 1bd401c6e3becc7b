package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/status"
)

// snapControl is a fakeControl answering a snapshot the test sets.
type snapControl struct {
	*fakeControl
	snap status.Snapshot
}

func (c *snapControl) Snapshot() status.Snapshot { return c.snap }

// healthSnapshot is group "orders": a the writable active site, b a
// replica of a with lag 2s (no reader decision), c read-only with its SQL
// thread stopped.
func healthSnapshot() status.Snapshot {
	rep := func(io, sql bool, lag float64) *status.Replication {
		return &status.Replication{IORunning: io, SQLRunning: sql, LagSeconds: lag, LagKnown: io && sql}
	}
	return status.Snapshot{
		Daemon: status.Daemon{Identity: "d1", Leader: true, Ready: true},
		Groups: []status.Group{{Name: "orders", Epoch: 7, ActiveSite: "a", Sites: []status.Site{
			{Name: "a", State: status.StateWritable, Active: true},
			{Name: "b", State: status.StateReadOnly, ReplicatingFrom: "a", Replication: rep(true, true, 2)},
			{Name: "c", State: status.StateReadOnly, ReplicatingFrom: "a", Replication: rep(true, false, 0)},
		}}},
	}
}

func serveSnap(t *testing.T, snap status.Snapshot) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(Handler(Options{Control: &snapControl{fakeControl: &fakeControl{}, snap: snap},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	return srv
}

// getHealth returns the status code and the decoded one-line answer.
func getHealth(t *testing.T, srv *httptest.Server, path string) (int, HealthAnswer, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var h HealthAnswer
	_ = json.Unmarshal(b, &h)
	if strings.Count(strings.TrimSpace(string(b)), "\n") != 0 {
		t.Errorf("%s: body is not one line: %q", path, b)
	}
	return resp.StatusCode, h, string(b)
}

func TestHealthAnswersEveryRoleFromTheSnapshot(t *testing.T) {
	srv := serveSnap(t, healthSnapshot())
	for _, c := range []struct {
		path     string
		code     int
		role     string
		inReason string
	}{
		{"/v1/groups/orders/sites/a/health?role=primary", 200, "primary", "active site, writable, epoch 7"},
		{"/v1/groups/orders/sites/b/health?role=primary", 503, "primary", "not the active site (a is"},
		{"/v1/groups/orders/sites/a/health?role=replica", 503, "replica", "writable when last probed, not read-only"},
		{"/v1/groups/orders/sites/b/health?role=replica", 200, "replica", "replicating from a, lag 2s"},
		{"/v1/groups/orders/sites/b/health?role=replica&maxLag=5s", 200, "replica", "lag 2s"},
		{"/v1/groups/orders/sites/b/health?role=replica&maxLag=1s", 503, "replica", "lag 2s over maxLag 1s"},
		{"/v1/groups/orders/sites/c/health?role=replica", 503, "replica", "threads not both running"},
		{"/v1/groups/orders/sites/a/health", 200, "primary", "active site"},
		{"/v1/groups/orders/sites/b/health?role=any", 200, "replica", "replicating"},
		{"/v1/groups/orders/sites/c/health?role=any", 503, "any", "primary: not the active site"},
	} {
		code, h, body := getHealth(t, srv, c.path)
		if code != c.code || h.Role != c.role || !strings.Contains(h.Reason, c.inReason) {
			t.Errorf("%s = %d %s, want %d role %s reason containing %q", c.path, code, body, c.code, c.role, c.inReason)
		}
		if want := map[int]string{200: HealthOK, 503: HealthUnavailable}[c.code]; h.Status != want {
			t.Errorf("%s: status %q, want %q", c.path, h.Status, want)
		}
	}
}

func TestHealthNever200ForAPrimaryWhoseEpochIsRevoked(t *testing.T) {
	snap := healthSnapshot()
	g := &snap.Groups[0]
	// Phase 1 of a failover: the revoked epoch names no active site while
	// the old primary may still be writable.
	g.InFlight = &status.InFlight{ID: "f1", Kind: "failover", From: "a", To: "b", Step: "revoked"}
	g.ActiveSite, g.Epoch = "", 8
	srv := serveSnap(t, snap)
	for _, role := range []string{"primary", "any"} {
		code, h, body := getHealth(t, srv, "/v1/groups/orders/sites/a/health?role="+role)
		if code != 503 || !strings.Contains(h.Reason, "in flight") {
			t.Errorf("revoked epoch, role=%s: %d %s, want 503 in flight", role, code, body)
		}
	}
}

func TestHealthRefusesThePrimaryWhileAFailoverIsInFlight(t *testing.T) {
	snap := healthSnapshot()
	// Even a record that still names a: the in-flight failover wins.
	snap.Groups[0].InFlight = &status.InFlight{ID: "s1", Kind: "switchover", From: "a", To: "b", Step: "fencing"}
	srv := serveSnap(t, snap)
	code, h, body := getHealth(t, srv, "/v1/groups/orders/sites/a/health?role=primary")
	if code != 503 || !strings.Contains(h.Reason, "switchover in flight from a to b") {
		t.Errorf("in-flight switchover: %d %s, want 503", code, body)
	}
}

func TestHealthRefusesAnActiveSiteNotWritable(t *testing.T) {
	snap := healthSnapshot()
	snap.Groups[0].Sites[0].State = status.StateUnreachable
	code, _, body := getHealth(t, serveSnap(t, snap), "/v1/groups/orders/sites/a/health?role=primary")
	if code != 503 || !strings.Contains(body, "unreachable when last probed") {
		t.Errorf("unreachable primary: %d %s, want 503", code, body)
	}
}

func TestHealthFollowsTheReaderDecision(t *testing.T) {
	snap := healthSnapshot()
	sites := snap.Groups[0].Sites
	sites[1].Reader = &status.Reader{Eligible: false, Why: "lag 12s over maxLag 5s", LagSeconds: 12}
	sites[2].Reader = &status.Reader{Eligible: true, Why: "replicating from a, lag 0s", LagSeconds: 0}
	srv := serveSnap(t, snap)
	if code, _, body := getHealth(t, srv, "/v1/groups/orders/sites/b/health?role=replica"); code != 503 || !strings.Contains(body, "not a reader: lag 12s") {
		t.Errorf("ineligible reader: %d %s, want 503 with its why", code, body)
	}
	// The reader decision overrides the fallback's thread check.
	if code, _, body := getHealth(t, srv, "/v1/groups/orders/sites/c/health?role=replica&maxLag=1s"); code != 200 {
		t.Errorf("eligible reader: %d %s, want 200", code, body)
	}
	sites[2].Reader.LagSeconds = -1
	if code, _, body := getHealth(t, serveSnap(t, snap), "/v1/groups/orders/sites/c/health?role=replica&maxLag=1s"); code != 503 || !strings.Contains(body, "lag unknown") {
		t.Errorf("eligible reader of unknown lag under maxLag: %d %s, want 503", code, body)
	}
}

func TestHealthFallbackRefusesAReplicaOfAnotherSource(t *testing.T) {
	snap := healthSnapshot()
	snap.Groups[0].Sites[1].ReplicatingFrom = "c"
	code, _, body := getHealth(t, serveSnap(t, snap), "/v1/groups/orders/sites/b/health?role=replica")
	if code != 503 || !strings.Contains(body, "not from the active site") {
		t.Errorf("replica of c: %d %s, want 503", code, body)
	}
}

// TestHealthRefusesAReplicaTheViewWithholdsFromReads guards the daemon's
// endpoint against passing a diverged (or fenced, held) replica that
// replicates fine when the group routes no readers: the view's safety
// exclusions hold on both endpoints, the daemon's and the sidecar's.
func TestHealthRefusesAReplicaTheViewWithholdsFromReads(t *testing.T) {
	snap := healthSnapshot()
	if code, _, body := getHealth(t, serveSnap(t, snap), "/v1/groups/orders/sites/b/health?role=replica"); code != 200 {
		t.Fatalf("healthy replica b: %d %s, want 200 before the exclusion", code, body)
	}
	snap.Groups[0].Sites[1].ReadsWithheld = "diverged"
	code, _, body := getHealth(t, serveSnap(t, snap), "/v1/groups/orders/sites/b/health?role=replica")
	if code != 503 || !strings.Contains(body, "withheld from reads by the daemon's view: diverged") {
		t.Errorf("diverged replica b: %d %s, want 503 naming the exclusion", code, body)
	}
}

func TestHealthOnAFollowerIs503NotTheLeader(t *testing.T) {
	snap := healthSnapshot()
	snap.Daemon.Leader = false
	code, h, body := getHealth(t, serveSnap(t, snap), "/v1/groups/orders/sites/a/health?role=primary")
	if code != 503 || !strings.Contains(h.Reason, "not the leader") {
		t.Errorf("follower: %d %s, want 503 not the leader", code, body)
	}
}

func TestHealthUnknownGroupOrSiteIs404AndBadQueryIs400(t *testing.T) {
	srv := serveSnap(t, healthSnapshot())
	for path, want := range map[string]int{
		"/v1/groups/nope/sites/a/health":                   404,
		"/v1/groups/orders/sites/z/health":                 404,
		"/v1/groups/orders/sites/a/health?role=writer":     400,
		"/v1/groups/orders/sites/a/health?maxLag=5":        400,
		"/v1/groups/orders/sites/a/health?maxLag=-1s":      400,
		"/v1/groups/orders/sites/b/health?maxLag=0s&role=": 503, // lag 2s > 0s
	} {
		if code, _, body := getHealth(t, srv, path); code != want {
			t.Errorf("%s = %d %s, want %d", path, code, body, want)
		}
	}
}

func TestHealthNeedsNoTokenAndIsNotCached(t *testing.T) {
	srv := serveSnap(t, healthSnapshot())
	resp, err := http.Get(srv.URL + "/v1/groups/orders/sites/a/health?role=primary")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("got %d, Cache-Control %q, Content-Type %q", resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("Content-Type"))
	}
}

func TestParseHealthQuery(t *testing.T) {
	q, err := ParseHealthQuery(map[string][]string{"role": {"replica"}, "maxLag": {"1500ms"}})
	if err != nil || q.Role != HealthRoleReplica || !q.HasMaxLag || q.MaxLag != 1500*time.Millisecond {
		t.Errorf("got %+v, %v", q, err)
	}
	if q, err := ParseHealthQuery(nil); err != nil || q.Role != HealthRoleAny || q.HasMaxLag {
		t.Errorf("defaults: got %+v, %v", q, err)
	}
	if _, err := ParseHealthQuery(map[string][]string{"maxLag": {"soon"}}); err == nil || !strings.Contains(err.Error(), "maxLag") {
		t.Errorf("bad maxLag: %v, want an error naming maxLag", err)
	}
}

// sourceControl implements HealthSource; a health check must not fall back
// to the whole Snapshot (a status read: the readiness of every group).
type sourceControl struct {
	*snapControl
	snapshots int
}

func (c *sourceControl) Snapshot() status.Snapshot { c.snapshots++; return c.snap }

func (c *sourceControl) HealthGroup(name string) (status.Group, bool, bool) {
	g, ok := c.snap.Group(name)
	return g, c.snap.Daemon.Leader, ok
}

func TestHealthReadsOneGroupThroughHealthSource(t *testing.T) {
	c := &sourceControl{snapControl: &snapControl{fakeControl: &fakeControl{}, snap: healthSnapshot()}}
	srv := httptest.NewServer(Handler(Options{Control: c, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	if code, _, body := getHealth(t, srv, "/v1/groups/orders/sites/a/health?role=primary"); code != 200 {
		t.Errorf("a: %d %s, want 200", code, body)
	}
	if code, _, _ := getHealth(t, srv, "/v1/groups/nope/sites/a/health"); code != 404 {
		t.Errorf("unknown group: %d, want 404", code)
	}
	c.snap.Daemon.Leader = false
	if code, _, body := getHealth(t, srv, "/v1/groups/orders/sites/a/health?role=primary"); code != 503 || !strings.Contains(body, "not the leader") {
		t.Errorf("follower: %d %s, want 503", code, body)
	}
	if c.snapshots != 0 {
		t.Errorf("%d whole snapshots read for health checks, want 0", c.snapshots)
	}
}
