// Package procgroup runs a child command in its own process group: every
// output line is logged, the last lines are kept for the caller's error, the
// whole group gets SIGTERM then SIGKILL when the context ends, and whatever
// the command left running in its group is killed once it exits. The hook
// runner (hooks) and the reclone command (reclone) run their commands
// through it; each passes its own log message keys and formats its own
// errors from the Result.
package procgroup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// pipeDelay bounds how long Wait keeps reading the output pipes after
	// the process group was killed: a process that escaped the group (setsid)
	// and still holds them must not hang the caller.
	pipeDelay = 2 * time.Second
	// maxLine caps one logged line; a longer run of bytes without a newline
	// is logged in pieces, so a command printing binary data cannot grow
	// memory without bound.
	maxLine = 8 << 10
)

// Keys are the log message keys a Cmd's records use; each caller keeps its
// own (e.g. "hook.output", "reclone.output").
type Keys struct {
	Output          string // one record per output line: "stream", "line"
	Killing         string // the context ended while it ran: "pid", "reason", "grace"
	GroupKillFailed string // the group kill after exit failed: "pid", "err"
}

// Cmd is one command to run; its zero value is not usable (Argv, Log and
// Keys are required).
type Cmd struct {
	Argv  []string     // program and arguments, no shell
	Env   []string     // KEY=value added to the daemon's environment; a later one wins
	Stdin io.Reader    // nil = /dev/null
	Log   *slog.Logger // output lines, the kill and a failed group kill
	Keys  Keys
	// Grace is how long the group gets between SIGTERM and SIGKILL once the
	// context ends.
	Grace time.Duration
	// TailLines is how many of the last output lines (both streams, in the
	// order they were read) Result.Tail keeps.
	TailLines int
	// TailLineLen cuts a longer kept line there, followed by "..."; 0 keeps
	// lines whole. Logged lines are never cut below maxLine.
	TailLineLen int
	// OnStart, when set, is called with the pid once the command runs.
	OnStart func(pid int)
}

// Result is how a started command ended.
type Result struct {
	// Status is the exit status as os.ProcessState prints it ("exit status
	// 3", "signal: killed"); "" when unknown.
	Status string
	// ExitCode is the exit code; -1 when unknown or killed by a signal.
	ExitCode int
	// Cancelled is the context's error when it ended before the command
	// exited (the group was then signalled); nil otherwise.
	Cancelled error
	// Err is nil only when the command exited 0 and nothing held its output
	// open afterwards; see OutputHeld.
	Err error
	// Tail holds the last TailLines output lines, oldest first.
	Tail []string
}

// OutputHeld reports that the command exited but a process outside its
// process group kept its output open past the pipe delay: the run did not
// finish cleanly, so its success must not be trusted.
func (r Result) OutputHeld() bool { return errors.Is(r.Err, exec.ErrWaitDelay) }

// Run starts the command in its own process group and waits for it. The
// error is non-nil only when the command could not be started; how a started
// command ended is in the Result. When ctx ends first the group gets
// SIGTERM, then SIGKILL after Grace. Run does not check ctx before starting:
// callers that must not start a command after ctx ended check it themselves.
func (c *Cmd) Run(ctx context.Context) (Result, error) {
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stdin = c.Stdin
	// Setpgid: the command and every process it starts are signalled as one
	// group, so a killed command leaves no mysql client, mariadb-dump or ssh
	// behind. Pdeathsig: a daemon that dies mid-run does not leave the
	// command running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = pipeDelay
	tail := &tailBuffer{max: c.TailLines, lineLen: c.TailLineLen}
	stdout := &lineLogger{ctx: ctx, log: c.Log, key: c.Keys.Output, stream: "stdout", tail: tail}
	stderr := &lineLogger{ctx: ctx, log: c.Log, key: c.Keys.Output, stream: "stderr", tail: tail}
	cmd.Stdout, cmd.Stderr = stdout, stderr

	if err := cmd.Start(); err != nil {
		return Result{ExitCode: -1}, err
	}
	pid := cmd.Process.Pid
	if c.OnStart != nil {
		c.OnStart(pid)
	}
	exited := make(chan error, 1)
	go func() { exited <- waitExitedNoReap(pid) }()
	var res Result
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-ctx.Done():
		res.Cancelled = ctx.Err()
		c.Log.WarnContext(ctx, c.Keys.Killing, "pid", pid, "reason", res.Cancelled, "grace", c.Grace)
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case waitErr = <-exited:
		case <-time.After(c.Grace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			waitErr = <-exited
		}
	}
	if waitErr == nil {
		// The leader is a zombie now (not reaped), so its pid, and with it
		// the group id, cannot be reused yet: this SIGKILL reaches only what
		// the command left behind, never an unrelated process group.
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			c.Log.WarnContext(ctx, c.Keys.GroupKillFailed, "pid", pid, "err", err)
		}
	}
	res.Err = cmd.Wait()
	stdout.flush()
	stderr.flush()
	if waitErr != nil && res.Err == nil {
		res.Err = waitErr
	}
	res.ExitCode = -1
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
		res.Status = cmd.ProcessState.String()
	}
	res.Tail = tail.all()
	return res, nil
}

// waitExitedNoReap blocks until process pid has exited, leaving it a zombie
// (WNOWAIT) so that cmd.Wait reaps it later.
func waitExitedNoReap(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for hook pid %d: %w", pid, err)
		}
		return nil
	}
}

// tailBuffer keeps the last max output lines of both streams, in the order
// they were written.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	lineLen int
	lines   []string
}

func (b *tailBuffer) add(line string) {
	if b.lineLen > 0 && len(line) > b.lineLen {
		line = line[:b.lineLen] + "..."
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
	if len(b.lines) > b.max {
		b.lines = append(b.lines[:0], b.lines[len(b.lines)-b.max:]...)
	}
}

func (b *tailBuffer) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.lines...)
}

// lineLogger is an io.Writer that logs each complete line under key.
// exec.Cmd writes to it from one goroutine per stream.
type lineLogger struct {
	ctx    context.Context
	log    *slog.Logger
	key    string
	stream string
	tail   *tailBuffer
	buf    []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.buf = append(l.buf, p...)
			for len(l.buf) >= maxLine {
				l.emit(l.buf[:maxLine])
				l.buf = append(l.buf[:0], l.buf[maxLine:]...)
			}
			break
		}
		l.buf = append(l.buf, p[:i]...)
		l.emit(l.buf)
		l.buf = l.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

// flush logs a last line that had no newline; call after cmd.Wait.
func (l *lineLogger) flush() {
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = l.buf[:0]
	}
}

func (l *lineLogger) emit(b []byte) {
	line := strings.TrimSuffix(string(b), "\r")
	l.tail.add(line)
	l.log.InfoContext(l.ctx, l.key, "stream", l.stream, "line", line)
}
