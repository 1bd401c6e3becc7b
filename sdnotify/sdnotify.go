// Package sdnotify speaks systemd's notification protocol (sd_notify(3))
// for a unit of Type=notify with WatchdogSec=: one datagram per message,
// "KEY=VALUE" lines, to the unix socket named by $NOTIFY_SOCKET (a path,
// or an abstract socket when it starts with "@"). It is the few lines
// failoverd needs (READY=1, WATCHDOG=1, STOPPING=1, STATUS=...), without a
// dependency.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The messages failoverd sends.
const (
	Ready    = "READY=1"
	Watchdog = "WATCHDOG=1"
	Stopping = "STOPPING=1"
)

// Notifier sends notifications to one socket. The nil *Notifier (not run
// by systemd, or a unit without Type=notify) sends nothing.
type Notifier struct {
	socket string
	// WatchdogInterval is the unit's WatchdogSec (0: no watchdog): the
	// service must send WATCHDOG=1 more often than that, or systemd kills
	// it (SIGABRT: Go prints every goroutine's stack) and restarts it.
	WatchdogInterval time.Duration
}

// New is a Notifier sending to socket (a path, or "@name" for an abstract
// socket) that expects watchdog pings every interval (0: none).
func New(socket string, interval time.Duration) *Notifier {
	return &Notifier{socket: socket, WatchdogInterval: interval}
}

// ErrBadEnvironment means $WATCHDOG_USEC or $WATCHDOG_PID is not a number.
var ErrBadEnvironment = errors.New("sdnotify: malformed systemd environment")

// FromEnv is the Notifier systemd asks for through $NOTIFY_SOCKET,
// $WATCHDOG_USEC and $WATCHDOG_PID, or nil without $NOTIFY_SOCKET. It
// unsets the three variables, so the processes failoverd starts (hooks,
// reclone commands) do not notify in its name. A watchdog meant for
// another process ($WATCHDOG_PID) is ignored.
func FromEnv() (*Notifier, error) {
	socket := os.Getenv("NOTIFY_SOCKET")
	usec, pid := os.Getenv("WATCHDOG_USEC"), os.Getenv("WATCHDOG_PID")
	for _, v := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"} {
		_ = os.Unsetenv(v) // cannot fail for a valid name
	}
	if socket == "" {
		return nil, nil
	}
	n := &Notifier{socket: socket}
	if usec == "" {
		return n, nil
	}
	us, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || us == 0 {
		return n, fmt.Errorf("%w: WATCHDOG_USEC=%q: want a positive number of microseconds", ErrBadEnvironment, usec)
	}
	if pid != "" {
		p, err := strconv.Atoi(pid)
		if err != nil {
			return n, fmt.Errorf("%w: WATCHDOG_PID=%q: want a process id", ErrBadEnvironment, pid)
		}
		if p != os.Getpid() {
			return n, nil // the watchdog is another process's
		}
	}
	n.WatchdogInterval = time.Duration(us) * time.Microsecond
	return n, nil
}

// Notify sends the messages (e.g. Ready, "STATUS=...") in one datagram.
// A nil Notifier sends nothing.
func (n *Notifier) Notify(messages ...string) error {
	if n == nil || len(messages) == 0 {
		return nil
	}
	name := n.socket
	if strings.HasPrefix(name, "@") {
		name = "\x00" + name[1:] // an abstract socket
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sdnotify: dial %s: %w", n.socket, err)
	}
	defer conn.Close() // a datagram socket: nothing to flush
	if _, err := conn.Write([]byte(strings.Join(messages, "\n"))); err != nil {
		return fmt.Errorf("sdnotify: send to %s: %w", n.socket, err)
	}
	return nil
}
