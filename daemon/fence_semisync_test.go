package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/mysqlctl"
)

// stuckFenceSite is a MySQL primary whose killed sessions' commits wait for
// semi-sync acknowledgements: its fence (SET GLOBAL super_read_only) waits
// until the semi-sync primary side is switched off, then applies, or fails
// with failAfter when set.
type stuckFenceSite struct {
	Instance  // operations a test does not expect panic
	failAfter error
	stuck     bool // the fence waits (else it applies at once)
	// spared: KillClientConnections leaves a session it may not kill
	// (mysqlctl.ErrSessionsNotKilled), as a SYSTEM_USER account's.
	spared bool

	mu      sync.Mutex
	ops     []string
	release chan struct{}
	once    sync.Once
}

func newStuckFenceSite(stuck bool, failAfter error) *stuckFenceSite {
	return &stuckFenceSite{stuck: stuck, failAfter: failAfter, release: make(chan struct{})}
}

func (f *stuckFenceSite) note(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, op)
}

func (f *stuckFenceSite) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ops)
}

func (f *stuckFenceSite) Close() error { return nil }

func (f *stuckFenceSite) Status(context.Context) (mysqlctl.Status, error) {
	f.note("status")
	return mysqlctl.Status{SemiSync: mysqlctl.SemiSyncStatus{Available: true, PrimaryEnabled: true, ReplicaEnabled: true}}, nil
}

func (f *stuckFenceSite) KillClientConnections(context.Context) (int, error) {
	f.note("kill")
	if f.spared {
		return 1, fmt.Errorf("kill client connections: %w: 42 (root)", mysqlctl.ErrSessionsNotKilled)
	}
	return 1, nil
}

func (f *stuckFenceSite) SetSemiSync(_ context.Context, primary, replica bool) error {
	f.note(fmt.Sprintf("semisync(%t,%t)", primary, replica))
	if !primary {
		f.once.Do(func() { close(f.release) })
	}
	return nil
}

func (f *stuckFenceSite) Fence(ctx context.Context) error {
	f.note("fence")
	if !f.stuck {
		f.note("fenced")
		return nil
	}
	select {
	case <-f.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	if f.failAfter != nil {
		return f.failAfter
	}
	f.note("fenced")
	return nil
}

func fenceServers(engine string, site Instance) *servers {
	cfg := configs.Group{Name: "g", Engine: engine, Sites: []configs.Site{{Name: "site0"}}}
	dial := func(context.Context, configs.Site) (Instance, error) { return site, nil }
	return &servers{group: cfg, conns: newConnections(dial, cfg.Sites), log: slog.New(slog.DiscardHandler)}
}

// On MySQL a fence blocked by killed sessions' commits waiting for semi-sync
// acknowledgements switches the semi-sync primary side off only after
// killing the sessions again, with the fence statement already pending.
func TestFenceReleasesKilledSemiSyncWaitsOnMySQL(t *testing.T) {
	site := newStuckFenceSite(true, nil)
	if err := fenceServers(configs.EngineMySQL, site).fence(t.Context(), "site0"); err != nil {
		t.Fatalf("fence: %v (ops %v)", err, site.list())
	}
	want := []string{"kill", "status", "fence", "kill", "semisync(false,true)", "fenced", "kill"}
	if got := site.list(); !slices.Equal(got, want) {
		t.Fatalf("ops %v, want %v", got, want)
	}
}

// A fence that applies at once changes no semi-sync setting.
func TestFenceWithoutWaitsKeepsSemiSync(t *testing.T) {
	site := newStuckFenceSite(false, nil)
	if err := fenceServers(configs.EngineMySQL, site).fence(t.Context(), "site0"); err != nil {
		t.Fatal(err)
	}
	if got := site.list(); slices.ContainsFunc(got, func(op string) bool { return op == "semisync(false,true)" }) {
		t.Fatalf("semi-sync switched off for a fence that was not blocked: %v", got)
	}
}

// A fence that still fails once the waits are released switches the
// semi-sync primary side back on: a writable site never runs without it.
func TestFenceFailingAfterReleaseRestoresSemiSync(t *testing.T) {
	boom := errors.New("fence failed")
	site := newStuckFenceSite(true, boom)
	err := fenceServers(configs.EngineMySQL, site).fence(t.Context(), "site0")
	if !errors.Is(err, boom) {
		t.Fatalf("fence: %v, want %v", err, boom)
	}
	got := site.list()
	if n := len(got); n < 2 || got[n-2] != "semisync(false,true)" || got[n-1] != "semisync(true,true)" {
		t.Fatalf("ops %v: want the primary side switched off, then back on", got)
	}
}

// A session the daemon could not kill keeps its client: switching semi-sync
// off would tell it that its waiting commit succeeded on a deposed primary.
// The release is refused (the fence fails and is retried) while one exists.
func TestFenceReleaseRefusedWhileASessionCouldNotBeKilled(t *testing.T) {
	site := newStuckFenceSite(true, nil)
	site.spared = true
	ctx, cancel := context.WithTimeout(t.Context(), 2*semiSyncFenceGrace)
	defer cancel()
	err := fenceServers(configs.EngineMySQL, site).fence(ctx, "site0")
	if !errors.Is(err, mysqlctl.ErrSessionsNotKilled) {
		t.Fatalf("fence: %v, want the release refused with ErrSessionsNotKilled (ops %v)", err, site.list())
	}
	if got := site.list(); slices.ContainsFunc(got, func(op string) bool { return op == "semisync(false,true)" }) {
		t.Fatalf("semi-sync switched off with a session left alive: %v", got)
	}
}

// A plain fence (nothing waits) goes on when a session could not be killed:
// super_read_only stops it writing.
func TestFenceToleratesASessionItCouldNotKill(t *testing.T) {
	site := newStuckFenceSite(false, nil)
	site.spared = true
	if err := fenceServers(configs.EngineMySQL, site).fence(t.Context(), "site0"); err != nil {
		t.Fatalf("fence: %v (ops %v)", err, site.list())
	}
}

// MariaDB ends a killed session's semi-sync wait itself: its fence is the
// plain one.
func TestFenceOnMariaDBIsPlain(t *testing.T) {
	site := newStuckFenceSite(false, nil)
	if err := fenceServers(configs.EngineMariaDB, site).fence(t.Context(), "site0"); err != nil {
		t.Fatal(err)
	}
	if got, want := site.list(), []string{"kill", "fence", "fenced", "kill"}; !slices.Equal(got, want) {
		t.Fatalf("ops %v, want %v", got, want)
	}
}
