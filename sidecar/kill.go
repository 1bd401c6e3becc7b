package sidecar

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultMySQLDNames are the process names PIDFileKiller accepts.
var DefaultMySQLDNames = []string{"mysqld", "mariadbd"}

// PIDFileKiller SIGKILLs the process named by mysqld's pid file
// (--mysqld-pid-file). SIGKILL also ends a SIGSTOPped process. Use it by
// pointer: it remembers whether it ever saw mysqld (see Gone).
type PIDFileKiller struct {
	// Path is the pid file mysqld writes (--pid-file).
	Path string
	// Names are the accepted process names (/proc/PID/comm); empty means
	// DefaultMySQLDNames.
	Names []string
	// ProcDir is the proc file system; empty means /proc (tests).
	ProcDir string

	// seen: the pid file once named a live mysqld this process could
	// signal, so mysqld runs in this pid namespace and its absence here
	// means it runs nowhere.
	seen atomic.Bool
}

// CanKill reports whether a kill could work now: the pid file names a
// running mysqld (or mariadbd) that this process sees and may signal. It is
// false when mysqld runs in another pid namespace (another container of the
// pod without shareProcessNamespace: true: the pid names another process or
// none), under another user without CAP_KILL, or not at all.
func (k *PIDFileKiller) CanKill() bool {
	if k.Path == "" {
		return false
	}
	pid, err := k.pid()
	if err != nil {
		return false
	}
	if !slices.Contains(k.names(), k.comm(pid)) {
		return false
	}
	// Signal 0 checks that the process exists and that we may signal it.
	if unix.Kill(pid, 0) != nil {
		return false
	}
	k.seen.Store(true)
	return true
}

// Gone reports whether mysqld provably runs no more: this killer once saw
// it in its own pid namespace (CanKill or Kill succeeded) and no process of
// an accepted name runs there now. Without that sighting it is false: in
// another pid namespace mysqld is invisible, not gone.
func (k *PIDFileKiller) Gone() bool {
	if !k.seen.Load() {
		return false
	}
	entries, err := os.ReadDir(k.proc())
	if err != nil {
		return false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if slices.Contains(k.names(), k.comm(pid)) {
			return false
		}
	}
	return true
}

func (k *PIDFileKiller) proc() string {
	if k.ProcDir == "" {
		return "/proc"
	}
	return k.ProcDir
}

// comm is /proc/PID/comm ("" when unreadable).
func (k *PIDFileKiller) comm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/comm", k.proc(), pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (k *PIDFileKiller) names() []string {
	if len(k.Names) == 0 {
		return DefaultMySQLDNames
	}
	return k.Names
}

func (k *PIDFileKiller) pid() (int, error) {
	b, err := os.ReadFile(k.Path)
	if err != nil {
		return 0, fmt.Errorf("read pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("pid file %s: no pid in %q", k.Path, strings.TrimSpace(string(b)))
	}
	return pid, nil
}

// Kill SIGKILLs the pid of the pid file and waits until it has exited.
func (k *PIDFileKiller) Kill(ctx context.Context) (int, error) {
	pid, err := k.pid()
	if errors.Is(err, os.ErrNotExist) {
		// mysqld removes its pid file on a clean shutdown.
		return 0, fmt.Errorf("kill mysqld: %w: %w", ErrNoProcess, err)
	}
	if err != nil {
		return 0, fmt.Errorf("kill mysqld: %w", err)
	}
	// A pidfd pins the process: once opened, the name check and the signal
	// address the same process even if the pid is reused meanwhile.
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return pid, fmt.Errorf("kill mysqld %d: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return pid, fmt.Errorf("kill mysqld %d: open pidfd: %w", pid, err)
	}
	defer unix.Close(fd)
	comm, err := os.ReadFile(fmt.Sprintf("%s/%d/comm", k.proc(), pid))
	if err != nil {
		return pid, fmt.Errorf("kill mysqld %d: %w: %w", pid, ErrNoProcess, err)
	}
	// A stale pid file (mysqld crashed) may name a reused pid: never kill a
	// process that is not mysqld.
	if name := strings.TrimSpace(string(comm)); !slices.Contains(k.names(), name) {
		return pid, fmt.Errorf("kill mysqld %d: %w: %q", pid, ErrNotMySQLD, name)
	}
	k.seen.Store(true)
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return pid, fmt.Errorf("kill mysqld %d: %w", pid, ErrNoProcess)
		}
		return pid, fmt.Errorf("kill mysqld %d: send SIGKILL: %w", pid, err)
	}
	if err := waitExit(ctx, fd); err != nil {
		return pid, fmt.Errorf("kill mysqld %d: wait for exit: %w", pid, err)
	}
	return pid, nil
}

// waitExit waits until the pidfd's process has exited (the pidfd becomes
// readable) or ctx ends.
func waitExit(ctx context.Context, fd int) error {
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 20)
		if err != nil && !errors.Is(err, syscall.EINTR) {
			return err
		}
		if n > 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// killWait bounds waiting for a SIGKILLed mysqld to exit.
const killWait = 5 * time.Second
