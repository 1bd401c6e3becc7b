package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// dirPrefix names every temp dir testenv creates, so a later run can find the
// ones a killed test binary could not remove.
const dirPrefix = "fo-"

// ownerFile, inside each temp dir, names the process that owns it.
const ownerFile = "owner"

// childrenFile, inside each temp dir, lists "pid starttime" of every process
// started for it, so a sweep can kill survivors if Pdeathsig ever failed.
const childrenFile = "children"

// maxSocketDir keeps "<dir>/mysqld.sock" under the ~107-byte sun_path limit.
const maxSocketDir = 80

var sweepOnce sync.Once

// newRunDir creates a short temp dir owned by this process. The caller
// registers its removal with the test's cleanup.
func newRunDir() (string, error) {
	sweepOnce.Do(func() { sweepStaleDirs() })
	base := os.TempDir()
	if len(base) > maxSocketDir-len(dirPrefix)-12 {
		base = "/tmp" // prevents unix sockets too long to bind under a deep $TMPDIR
	}
	dir, err := os.MkdirTemp(base, dirPrefix)
	if err != nil {
		return "", fmt.Errorf("create temp dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(selfIdentity()), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("create temp dir: %w", err)
	}
	return dir, nil
}

// selfIdentity is "pid starttime": the start time defeats pid reuse.
func selfIdentity() string {
	pid := os.Getpid()
	return fmt.Sprintf("%d %s", pid, procStartTime(pid))
}

// procStartTime returns field 22 of /proc/PID/stat, or "" if the process is gone.
func procStartTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// procAlive reports whether pid exists and is not a zombie.
func procAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

// sweepStaleDirs removes testenv temp dirs whose owning process is gone (a
// test binary killed before its cleanups ran). Its children died with it
// through Pdeathsig; only their files remain.
func sweepStaleDirs() {
	for _, base := range uniq(os.TempDir(), "/tmp") {
		entries, err := os.ReadDir(base)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPrefix) {
				continue
			}
			dir := filepath.Join(base, e.Name())
			b, err := os.ReadFile(filepath.Join(dir, ownerFile))
			if err != nil {
				continue // not ours, or still being created
			}
			var pid int
			var start string
			if _, err := fmt.Sscanf(string(b), "%d %s", &pid, &start); err != nil {
				continue
			}
			if procStartTime(pid) == start && procAlive(pid) {
				continue // owner still running
			}
			killRecordedChildren(dir)
			_ = os.RemoveAll(dir)
		}
	}
}

// recordChild appends "pid starttime" to dir's children file. The records
// are what the sweep and scripts/leftovers check; a process without one
// would go unnoticed, so the caller kills it when recording fails.
func recordChild(dir string, pid int) error {
	start := procStartTime(pid)
	if start == "" {
		return fmt.Errorf("record child %d: no start time in /proc (exited at once?)", pid)
	}
	f, err := os.OpenFile(filepath.Join(dir, childrenFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("record child %d: %w", pid, err)
	}
	if _, err := fmt.Fprintf(f, "%d %s\n", pid, start); err != nil {
		f.Close()
		return fmt.Errorf("record child %d: %w", pid, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record child %d: %w", pid, err)
	}
	return nil
}

// killRecordedChildren SIGKILLs the process groups listed in dir's children
// file that still run: defense in depth should Pdeathsig not have fired.
func killRecordedChildren(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, childrenFile))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		var pid int
		var start string
		if _, err := fmt.Sscanf(line, "%d %s", &pid, &start); err != nil {
			continue
		}
		// Start time check prevents killing an unrelated process that reused the pid.
		if start != "" && procStartTime(pid) == start && procAlive(pid) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func uniq(a, b string) []string {
	if filepath.Clean(a) == filepath.Clean(b) {
		return []string{a}
	}
	return []string{a, b}
}

// removeDirOnceStopped kills p (nil: none was started) and removes dir,
// unless p survived the kill: then dir and its children file stay, so
// scripts/leftovers reports the survivor and the next run's sweep kills it.
func removeDirOnceStopped(dir string, p *process) {
	if p != nil {
		if err := p.cleanup(); err != nil {
			return // keeps the record of a process that may still run
		}
	}
	_ = removeDir(dir)
}

// removeDir removes dir, retrying briefly: a process killed a moment ago may
// still be releasing files.
func removeDir(dir string) error {
	var err error
	for range 5 {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("remove %s: %w", dir, err)
}

// freePort returns a port on 127.0.0.1 that was free a moment ago. Callers
// retry on a bind failure: another process may take it in between.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// pickPort is the port source of every start; a test swaps it to force a
// port race.
var pickPort = freePort

// errPortTaken marks a start failure caused by a port race; the caller retries
// with a new port.
var errPortTaken = errors.New("port already in use")

// isPortInUseLog reports whether a server log says its bind failed.
func isPortInUseLog(log string) bool {
	l := strings.ToLower(log)
	return strings.Contains(l, "address already in use") ||
		strings.Contains(l, strings.ToLower(syscall.EADDRINUSE.Error()))
}

// startAttempts bounds retries after a port race.
const startAttempts = 5

func strconvI(i int) string { return strconv.Itoa(i) }
