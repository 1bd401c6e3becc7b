package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/failoverd/failoverd/configs"
)

// Environment variables a command hook gets besides the daemon's own.
const (
	EnvEvent  = "FAILOVERD_EVENT"
	EnvGroup  = "FAILOVERD_GROUP"
	EnvEpoch  = "FAILOVERD_EPOCH"
	EnvFrom   = "FAILOVERD_FROM"
	EnvTo     = "FAILOVERD_TO"
	EnvSite   = "FAILOVERD_SITE"
	EnvReason = "FAILOVERD_REASON"
	EnvGTID   = "FAILOVERD_GTID"
)

const (
	// defaultGrace lets a timed-out command clean up before its process
	// group is SIGKILLed; short because hooks are short.
	defaultGrace = 2 * time.Second
	// pipeDelay bounds how long Wait keeps reading the output pipes after
	// the process group was killed: a process that escaped the group (setsid)
	// and still holds them must not hang the hook's queue.
	pipeDelay = 2 * time.Second
	// maxLine caps one logged line, so a command printing binary data
	// cannot grow memory without bound.
	maxLine = 8 << 10
	// tailLines and tailLineLen bound the output kept for Result.Err, which
	// ends up in the status API.
	tailLines   = 5
	tailLineLen = 256
)

// runCommand runs h.Command once (argv, no shell) in its own process group
// with payload on stdin and the FAILOVERD_* variables; when ctx ends first
// the whole group gets SIGTERM, then SIGKILL after r.grace. Whatever the
// command left running in its group is killed when it exits.
func (r *Runner) runCommand(ctx context.Context, h configs.Hook, ev Event, payload []byte, log *slog.Logger) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("not started: %w", err)
	}
	cmd := exec.Command(h.Command[0], h.Command[1:]...)
	cmd.Env = append(os.Environ(),
		EnvEvent+"="+ev.Type,
		EnvGroup+"="+ev.Group,
		EnvEpoch+"="+strconv.FormatUint(ev.Epoch, 10),
		EnvFrom+"="+ev.From,
		EnvTo+"="+ev.To,
		EnvSite+"="+ev.Site,
		EnvReason+"="+ev.Reason,
		EnvGTID+"="+ev.GTID,
	)
	cmd.Stdin = bytes.NewReader(payload)
	// Setpgid: the command and everything it starts are signalled as one
	// group, so a timed-out hook leaves no mysql client or socat behind.
	// Pdeathsig: a daemon that dies mid-run does not leave the command running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = pipeDelay
	tail := &tailBuffer{}
	stdout := &lineLogger{log: log, stream: "stdout", tail: tail}
	stderr := &lineLogger{log: log, stream: "stderr", tail: tail}
	cmd.Stdout, cmd.Stderr = stdout, stderr

	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: start %q: %w", ErrFailed, h.Command[0], err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- waitExitedNoReap(pid) }()
	var cancelled, waitErr error
	select {
	case waitErr = <-exited:
	case <-ctx.Done():
		cancelled = ctx.Err()
		log.Warn("hook.killing", "pid", pid, "reason", cancelled, "grace", r.grace)
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case waitErr = <-exited:
		case <-time.After(r.grace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			waitErr = <-exited
		}
	}
	if waitErr == nil {
		// The leader is a zombie (not reaped yet), so its pid, and with it
		// the group id, cannot be reused: this SIGKILL reaches only what the
		// command left behind, never an unrelated process group.
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			log.Warn("hook.group_kill_failed", "pid", pid, "err", err)
		}
	}
	err := cmd.Wait()
	stdout.flush()
	stderr.flush()
	if waitErr != nil && err == nil {
		err = waitErr
	}
	status := "unknown status"
	if cmd.ProcessState != nil {
		status = cmd.ProcessState.String()
	}
	switch {
	case cancelled != nil:
		return fmt.Errorf("%s (%w); %s", status, cancelled, tail.text())
	case errors.Is(err, exec.ErrWaitDelay):
		// Exit 0 but a process outside the group kept the output open: the
		// hook did not finish cleanly, so its success is not trusted.
		return fmt.Errorf("%w: %s, but a process outside its process group kept its output open; %s", ErrFailed, status, tail.text())
	case err != nil:
		return fmt.Errorf("%w: %s; %s", ErrFailed, status, tail.text())
	}
	return nil
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

// tailBuffer keeps the last tailLines output lines of both streams.
type tailBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *tailBuffer) add(line string) {
	if len(line) > tailLineLen {
		line = line[:tailLineLen] + "..."
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
	if len(b.lines) > tailLines {
		b.lines = append(b.lines[:0], b.lines[len(b.lines)-tailLines:]...)
	}
}

// text is "no output" or "last output: " and the lines joined by " | ".
func (b *tailBuffer) text() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.lines) == 0 {
		return "no output"
	}
	return "last output: " + strings.Join(b.lines, " | ")
}

// lineLogger is an io.Writer that logs each complete line as "hook.output".
// exec.Cmd writes to it from one goroutine per stream.
type lineLogger struct {
	log    *slog.Logger
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
	l.log.Info("hook.output", "stream", l.stream, "line", line)
}
