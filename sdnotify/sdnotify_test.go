package sdnotify

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// listen is a unixgram socket standing for systemd's notify socket (under
// a short directory: socket paths are limited to 108 bytes).
func listen(t *testing.T) (string, *net.UnixConn) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn")
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
	return path, conn
}

func receive(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}

// Several messages go in one datagram, one per line, as sd_notify(3) sends.
func TestNotifySendsOneDatagram(t *testing.T) {
	path, conn := listen(t)
	if err := New(path, 0).Notify(Ready, "STATUS=2 groups"); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, conn); got != "READY=1\nSTATUS=2 groups" {
		t.Errorf("got %q", got)
	}
}

// An abstract socket ("@name") is reached without a file.
func TestNotifyAbstractSocket(t *testing.T) {
	name := "failoverd-sdnotify-test-" + strconv.Itoa(os.Getpid())
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: "\x00" + name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := New("@"+name, 0).Notify(Watchdog); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, conn); got != Watchdog {
		t.Errorf("got %q, want %q", got, Watchdog)
	}
}

// Not run by systemd: nothing to notify, and a nil Notifier sends nothing.
func TestNilNotifierSendsNothing(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n, err := FromEnv()
	if n != nil || err != nil {
		t.Fatalf("FromEnv without NOTIFY_SOCKET: %v, %v; want nil, nil", n, err)
	}
	if err := n.Notify(Ready); err != nil {
		t.Errorf("nil Notify: %v", err)
	}
}

// FromEnv reads the socket and the watchdog's interval for this process,
// ignores a watchdog meant for another, rejects malformed values, and
// unsets the variables so child processes (hooks) cannot notify.
func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name, usec, pid string
		want            time.Duration
		bad             bool
	}{
		{"no watchdog", "", "", 0, false},
		{"watchdog for us", "30000000", strconv.Itoa(os.Getpid()), 30 * time.Second, false},
		{"watchdog without pid", "2500000", "", 2500 * time.Millisecond, false},
		{"watchdog for another process", "30000000", "1", 0, false},
		{"malformed interval", "soon", "", 0, true},
		{"zero interval", "0", "", 0, true},
		{"malformed pid", "30000000", "me", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify")
			t.Setenv("WATCHDOG_USEC", tc.usec)
			t.Setenv("WATCHDOG_PID", tc.pid)
			n, err := FromEnv()
			if tc.bad != errors.Is(err, ErrBadEnvironment) {
				t.Fatalf("err %v, want bad %v", err, tc.bad)
			}
			if n == nil || n.socket != "/run/systemd/notify" || n.WatchdogInterval != tc.want {
				t.Fatalf("got %+v, want socket /run/systemd/notify, watchdog %v", n, tc.want)
			}
			for _, v := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"} {
				if _, set := os.LookupEnv(v); set {
					t.Errorf("%s still set: a hook would inherit it", v)
				}
			}
		})
	}
}

// A socket nobody listens on is an error naming it.
func TestNotifyWithoutListener(t *testing.T) {
	err := New(filepath.Join(t.TempDir(), "none"), 0).Notify(Ready)
	if err == nil {
		t.Fatal("no error for a missing socket")
	}
}
