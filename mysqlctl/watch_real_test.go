package mysqlctl

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/testenv"
)

// A watch session on a real server (each engine) stands while mysqld runs and ends as
// soon as mysqld is SIGKILLed (the kernel closes its sockets), well within
// a poll interval; it never ends on its own while the server is idle.
func TestRealWatchEndsWhenMysqldIsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real server")
	}
	testenv.ForEachEngine(t, testWatchEndsWhenKilled)
}

func testWatchEndsWhenKilled(t *testing.T, e testenv.Engine) {
	m := testenv.StartServer(t, testenv.ServerOptions{Engine: e, Name: "watched"})
	opts := Options{Addr: fmt.Sprintf("%s:%d", m.Host, m.Port), User: testenv.AdminUser, Password: testenv.AdminPassword,
		Logger: slog.New(slog.DiscardHandler)}
	established := make(chan struct{})
	ended := make(chan error, 1)
	ctx := ctxFor(t, time.Minute)
	go func() { ended <- Watch(ctx, opts, func() { close(established) }) }()
	select {
	case <-established:
	case err := <-ended:
		t.Fatalf("watch ended before it stood: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("watch not established")
	}
	select {
	case err := <-ended:
		t.Fatalf("watch ended while the server runs: %v", err)
	case <-time.After(1500 * time.Millisecond):
	}
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	select {
	case err := <-ended:
		if err == nil || ctx.Err() != nil {
			t.Fatalf("watch ended with %v (ctx %v), want the session's error", err, ctx.Err())
		}
		t.Logf("watch ended %v after SIGKILL: %v", time.Since(killed), err)
	case <-time.After(5 * time.Second):
		t.Fatal("watch still standing 5s after SIGKILL of mysqld")
	}
}
