package sidecar

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/api"
)

// getSidecarHealth asks the sidecar's own /health over its Handler.
func getSidecarHealth(t *testing.T, s *Sidecar, query string) (int, api.HealthAnswer, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health"+query, nil))
	b, _ := io.ReadAll(rec.Body)
	var h api.HealthAnswer
	_ = json.Unmarshal(b, &h)
	return rec.Code, h, string(b)
}

func wantHealth(t *testing.T, s *Sidecar, query string, code int, inReason string) {
	t.Helper()
	got, h, body := getSidecarHealth(t, s, query)
	if got != code || !strings.Contains(h.Reason, inReason) {
		t.Errorf("/health%s = %d %s, want %d with %q", query, got, body, code, inReason)
	}
}

func TestSidecarHealthPrimaryNeedsItsViewItsLeaseAndWritableMySQL(t *testing.T) {
	h := newHarness(t, nil)
	h.mysql.set(func(f *fakeMySQL) { f.readOnly = false })
	// Before any view: never a primary.
	wantHealth(t, h.s, "?role=primary", 503, "no view yet")
	h.daemon.answer(sign(t, 3, "east"))
	h.step(t)
	wantHealth(t, h.s, "?role=primary", 200, "view epoch 3 names this site")
	wantHealth(t, h.s, "", 200, "names this site") // role defaults to any
	wantHealth(t, h.s, "?role=replica", 503, "mysqld writable")

	// The lease runs out (daemon and peers silent): no longer a primary,
	// even before the guard fences.
	h.daemon.down()
	h.clock.Advance(testLease)
	wantHealth(t, h.s, "?role=primary", 503, "lease expired")
}

func TestSidecarHealthNever200ForAPrimaryWhoseViewNamesAnother(t *testing.T) {
	h := newHarness(t, nil)
	h.mysql.set(func(f *fakeMySQL) { f.readOnly = false })
	h.daemon.answer(sign(t, 3, "east"))
	h.step(t)
	// The revoking view (no site), then the next primary's: the local read
	// may still say writable, the answer is 503.
	h.s.mu.Lock()
	revoked := sign(t, 4, "")
	h.s.v = &revoked
	h.s.mu.Unlock()
	wantHealth(t, h.s, "?role=primary", 503, `names "", not this site`)
	h.daemon.answer(sign(t, 5, "west"))
	h.s.round(t.Context()) // adopt without the guard: mysqld still writable
	wantHealth(t, h.s, "?role=primary", 503, `names "west", not this site`)
}

func TestSidecarHealthPrimaryRefusesReadOnlyOrUnreadMySQL(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 3, "east"))
	h.step(t) // the boot unfence makes it writable
	// Someone sets read_only by hand: the next read sees it.
	h.mysql.set(func(f *fakeMySQL) { f.readOnly = true })
	h.step(t)
	wantHealth(t, h.s, "?role=primary", 503, "mysqld read-only")
	h.mysql.set(func(f *fakeMySQL) { f.readOnly, f.statusErr = false, io.ErrUnexpectedEOF })
	h.step(t)
	wantHealth(t, h.s, "?role=primary", 503, "did not answer its last status read")
}

func TestSidecarHealthReplicaNeedsThreadsAndLagWithinMaxLag(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 3, "west"))
	h.step(t)
	wantHealth(t, h.s, "?role=replica", 503, "no replication channel")
	h.mysql.set(func(f *fakeMySQL) { f.replicaRun, f.lag = true, 3*time.Second })
	h.step(t)
	wantHealth(t, h.s, "?role=replica", 200, "replicating, lag 3s")
	wantHealth(t, h.s, "?role=replica&maxLag=5s", 200, "lag 3s")
	wantHealth(t, h.s, "?role=replica&maxLag=2s", 503, "lag 3s over maxLag 2s")
	wantHealth(t, h.s, "?role=any", 200, "replicating")
	wantHealth(t, h.s, "?role=primary", 503, `names "west"`)
	h.mysql.set(func(f *fakeMySQL) { f.sqlStopped = true })
	h.step(t)
	wantHealth(t, h.s, "?role=replica", 503, "threads not both running")
}

func TestSidecarHealthDistrustsAStaleLocalRead(t *testing.T) {
	h := newHarness(t, nil)
	h.mysql.set(func(f *fakeMySQL) { f.replicaRun = true })
	h.daemon.answer(sign(t, 3, "west"))
	h.step(t)
	wantHealth(t, h.s, "?role=replica", 200, "replicating")
	// No round since (stuck on a hung mysqld): the old read stops counting.
	h.clock.Advance(h.s.staleAfter() + time.Millisecond)
	wantHealth(t, h.s, "?role=replica", 503, "last mysqld read")
}

func TestSidecarHealthBadQueryIs400AndAsksMySQLNothing(t *testing.T) {
	h := newHarness(t, nil)
	calls := 0
	h.mysql.set(func(f *fakeMySQL) { f.onStatus = func() { calls++ } })
	if code, _, body := getSidecarHealth(t, h.s, "?role=leader"); code != 400 || !strings.Contains(body, "role") {
		t.Errorf("bad role: %d %s, want 400 naming role", code, body)
	}
	if code, _, body := getSidecarHealth(t, h.s, "?maxLag=x"); code != 400 || !strings.Contains(body, "maxLag") {
		t.Errorf("bad maxLag: %d %s, want 400 naming maxLag", code, body)
	}
	for range 5 {
		getSidecarHealth(t, h.s, "?role=any")
	}
	if calls != 0 {
		t.Errorf("/health read mysqld %d times; it must answer from the last round's read", calls)
	}
}
