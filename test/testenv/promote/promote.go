// Package promote makes a test site writable the way failoverd does it:
// through mysqlctl's Instance.Promote, the code under test.
//
// test/testenv starts every server read-only (MySQL super_read_only too), as production sites must
// start (docs/design.md, "Start read-only"), and never makes one writable
// itself: a harness that did would hide a daemon or an executor that fails
// to. A test that needs a writable primary before the code it exercises
// runs (a topology's initial primary, a restarted site) calls Site.
//
// It lives outside package testenv because mysqlctl's own tests import
// testenv: testenv importing mysqlctl would be an import cycle.
package promote

import (
	"context"
	"log/slog"
	"time"

	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/test/testenv"
)

// timeout bounds opening the session and the promotion.
const timeout = 30 * time.Second

// Site makes m writable with mysqlctl.Instance.Promote as the admin account,
// over TCP to m's own address; t.Fatalf on error. Promote refuses a site
// whose replication threads still run (ErrReplicaRunning): stop them first.
// Promoting a writable site is a no-op.
func Site(t testenv.T, m *testenv.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	inst, err := mysqlctl.Open(ctx, mysqlctl.Options{
		Addr: m.Addr(), User: testenv.AdminUser, Password: testenv.AdminPassword,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("promote %s: open: %v", m.Name, err)
	}
	defer inst.Close()
	if err := inst.Promote(ctx); err != nil {
		t.Fatalf("promote %s: %v", m.Name, err)
	}
}
