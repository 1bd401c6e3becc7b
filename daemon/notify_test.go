package daemon

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/sdnotify"
)

// notifySocket stands for systemd's notify socket: a unixgram socket whose
// datagrams the test reads.
type notifySocket struct {
	path string
	conn *net.UnixConn
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn") // short: socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &notifySocket{path: path, conn: conn}
}

// next is the next datagram within wait, or "" when none came.
func (s *notifySocket) next(wait time.Duration) string {
	_ = s.conn.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 4096)
	n, err := s.conn.Read(buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// The daemon tells systemd it is ready once its API serves and its groups
// run (READY=1 first, with a STATUS line), then pings the watchdog while
// its loops make progress.
func TestSystemdNotifyReadyThenWatchdog(t *testing.T) {
	sock := newNotifySocket(t)
	w := startWedgeDaemon(t, sdnotify.New(sock.path, 40*time.Millisecond))
	first := sock.next(5 * time.Second)
	if !strings.HasPrefix(first, "READY=1\nSTATUS=1 group(s), API on ") {
		t.Fatalf("first notification %q, want READY=1 with a STATUS", first)
	}
	// Ready means the API answers.
	if code, body := w.healthz(t); code != 200 {
		t.Fatalf("healthz after READY=1: %d %s", code, body)
	}
	for range 3 {
		if got := sock.next(5 * time.Second); got != "WATCHDOG=1" {
			t.Fatalf("notification %q, want WATCHDOG=1", got)
		}
	}
}

// While a group loop is wedged (the same signal as /healthz) the daemon
// sends no WATCHDOG=1, so systemd restarts it; the pings resume once the
// loop turns again.
func TestSystemdWatchdogWithheldWhileALoopIsWedged(t *testing.T) {
	sock := newNotifySocket(t)
	const interval = 40 * time.Millisecond
	w := startWedgeDaemon(t, sdnotify.New(sock.path, interval))
	if got := sock.next(5 * time.Second); !strings.HasPrefix(got, "READY=1") {
		t.Fatalf("first notification %q, want READY=1", got)
	}
	w.wedge(t)
	g := w.d.groupList()[0]
	w.clock.advance(g.actionTimeout + stallBound(g.cfg) + time.Second)
	if code, _ := w.healthz(t); code != 503 {
		t.Fatalf("healthz of the wedged loop: %d, want 503", code)
	}
	// Pings sent before the wedge showed may still be queued.
	for sock.next(interval) != "" {
	}
	if got := sock.next(10 * interval); got != "" {
		t.Fatalf("a wedged loop, yet systemd got %q", got)
	}
	w.unblock()
	if got := sock.next(5 * time.Second); got != "WATCHDOG=1" {
		t.Fatalf("after the loop turned again: %q, want WATCHDOG=1", got)
	}
}
