package sidecar

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Process identifies one mysqld process: a pid alone is reused.
type Process struct {
	PID int
	// StartTicks is field 22 of /proc/PID/stat: the process's start time in
	// clock ticks after boot.
	StartTicks uint64
}

// ProcessWatcher watches the local mysqld process.
type ProcessWatcher interface {
	// Watch runs until ctx ends. It calls running with each mysqld process
	// it starts watching and exited once that process has exited, then
	// looks for the next one. It never reports a process it did not see
	// running: an exit is only ever one it witnessed. clean says the exit
	// was a shutdown mysqld carried out itself (it removed its pid file),
	// not a crash or a kill.
	Watch(ctx context.Context, running func(Process), exited func(p Process, clean bool))
}

// PIDFileWatcher is the ProcessWatcher of the mysqld named by a pid file
// (--mysqld-pid-file): it pins the process with a pidfd and learns of its
// exit the instant the pidfd becomes readable. A mysqld in another pid
// namespace (the pid names another process or none) is never seen running,
// so it never reports an exit.
type PIDFileWatcher struct {
	// Path is the pid file mysqld writes (--pid-file).
	Path string
	// Names are the accepted process names; empty means DefaultMySQLDNames.
	Names []string
	// ProcDir is the proc file system; empty means /proc (tests).
	ProcDir string
	// Retry is the wait before looking again when the pid file names no
	// running mysqld; 0 means 100 ms.
	Retry time.Duration
}

// Watch implements ProcessWatcher.
func (w *PIDFileWatcher) Watch(ctx context.Context, running func(Process), exited func(p Process, clean bool)) {
	var last Process
	for ctx.Err() == nil {
		p, fd, err := w.open()
		// A pid file still naming the process that exited (a crash leaves
		// it behind; a zombie not yet reaped keeps its pid) is no new one.
		if err == nil && p == last {
			unix.Close(fd)
			err = errSameProcess
		}
		if err != nil {
			t := time.NewTimer(w.retry())
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		running(p)
		err = waitExit(ctx, fd)
		unix.Close(fd)
		if err != nil {
			return // ctx ended: stopping is no exit
		}
		last = p
		// mysqld removes its pid file on a clean shutdown, before it exits;
		// a crash, a SIGKILL or the OOM killer leaves it naming the pid.
		// Read at once: a supervisor may soon remove or rewrite it.
		exited(p, !w.names(p.PID))
	}
}

// names reports whether the pid file still names pid.
func (w *PIDFileWatcher) names(pid int) bool {
	got, err := (&PIDFileKiller{Path: w.Path}).pid()
	return err == nil && got == pid
}

var errSameProcess = errors.New("the pid file names the process that exited")

func (w *PIDFileWatcher) retry() time.Duration {
	if w.Retry <= 0 {
		return 100 * time.Millisecond
	}
	return w.Retry
}

// open pins the running mysqld the pid file names with a pidfd and reads
// its identity; the caller closes the fd.
func (w *PIDFileWatcher) open() (Process, int, error) {
	k := PIDFileKiller{Path: w.Path, Names: w.Names, ProcDir: w.ProcDir}
	pid, err := k.pid()
	if err != nil {
		return Process{}, -1, err
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return Process{}, -1, fmt.Errorf("watch mysqld %d: open pidfd: %w", pid, err)
	}
	// Read after pinning: the name and start time are the pinned process's
	// (a pid reused in between would be another name or start time, and a
	// pidfd of an exited process is readable at once).
	p, err := processOf(k.proc(), pid, k.names())
	if err != nil {
		unix.Close(fd)
		return Process{}, -1, err
	}
	return p, fd, nil
}

// processOf reads pid's identity from /proc/PID/stat, refusing a process
// that is not one of names or has already exited (a zombie).
func processOf(proc string, pid int, names []string) (Process, error) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", proc, pid))
	if err != nil {
		return Process{}, fmt.Errorf("watch mysqld %d: %w", pid, err)
	}
	// "PID (COMM) STATE PPID ...": comm may hold spaces and parentheses.
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return Process{}, fmt.Errorf("watch mysqld %d: unreadable stat %q", pid, s)
	}
	if comm := s[open+1 : closing]; !slices.Contains(names, comm) {
		return Process{}, fmt.Errorf("watch mysqld %d: %w: %q", pid, ErrNotMySQLD, comm)
	}
	fields := strings.Fields(s[closing+1:])
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 {
		return Process{}, fmt.Errorf("watch mysqld %d: short stat %q", pid, s)
	}
	if st := fields[0]; st == "Z" || st == "X" {
		return Process{}, fmt.Errorf("watch mysqld %d: %w (state %s)", pid, ErrNoProcess, st)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return Process{}, fmt.Errorf("watch mysqld %d: start time %q: %w", pid, fields[19], err)
	}
	return Process{PID: pid, StartTicks: start}, nil
}
