package reclone

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrHookFailed is returned when the reclone command exits non-zero, is
// killed, or cannot be started. The error text holds the exit status and the
// command's last output lines.
var ErrHookFailed = errors.New("reclone: hook failed")

// ErrNoCommand is returned by Run when Hook.Command is empty.
var ErrNoCommand = errors.New("reclone: no reclone command configured")

// Job names one reclone: the recipient site and the donor (current primary).
type Job struct {
	Group            string
	Site, SiteAddr   string // recipient name and MySQL host:port
	Donor, DonorAddr string // donor name and MySQL host:port
}

// Hook runs the configured reclone.command for a Job.
type Hook struct {
	Command []string      // argv; Run appends the site and donor names as the last two arguments
	Timeout time.Duration // bounds the whole run; must be > 0
	Logger  *slog.Logger  // nil = slog.Default()

	// grace is how long the process group gets between SIGTERM and SIGKILL
	// once the run is cancelled; 0 = defaultGrace. Tests shorten it.
	grace time.Duration
}

const (
	// defaultGrace lets a cancelled command clean up (remove temp files,
	// stop a transfer) before its process group is SIGKILLed.
	defaultGrace = 5 * time.Second
	// tailLines is how many of the last output lines an error carries.
	tailLines = 20
	// maxLine caps one logged line; a longer run of bytes without a newline
	// is logged in pieces, so a command printing binary data cannot grow
	// memory without bound.
	maxLine = 8 << 10
	// pipeDelay bounds how long Wait keeps reading the output pipes after
	// the process group was killed: a process that escaped the group (setsid)
	// and still holds them must not hang the daemon.
	pipeDelay = 2 * time.Second
)

// Environment variables Run adds for the command.
const (
	EnvGroup        = "FAILOVERD_GROUP"
	EnvSite         = "FAILOVERD_SITE"
	EnvSiteAddress  = "FAILOVERD_SITE_ADDRESS"
	EnvDonor        = "FAILOVERD_DONOR"
	EnvDonorAddress = "FAILOVERD_DONOR_ADDRESS"
)

// Run runs the command with env FAILOVERD_GROUP, FAILOVERD_SITE,
// FAILOVERD_SITE_ADDRESS, FAILOVERD_DONOR, FAILOVERD_DONOR_ADDRESS added to
// the daemon's environment, stdin from /dev/null, and every output line
// logged. It returns nil only when the command exited 0. When Timeout passes
// or ctx ends first, the command's whole process group gets SIGTERM, then
// SIGKILL after a grace period, and the error wraps both ErrHookFailed and
// the context's error (context.DeadlineExceeded on timeout). Whatever the
// command left running in its process group is killed when it exits.
func (h Hook) Run(ctx context.Context, j Job) error {
	if len(h.Command) == 0 || h.Command[0] == "" {
		return ErrNoCommand
	}
	if h.Timeout <= 0 {
		// A reclone without a bound could hold the site fenced forever.
		return fmt.Errorf("reclone: run hook for site %s: timeout must be > 0, got %v", j.Site, h.Timeout)
	}
	log := h.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("group", j.Group, "site", j.Site)
	grace := h.grace
	if grace <= 0 {
		grace = defaultGrace
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: site %s not started: %w", ErrHookFailed, j.Site, err)
	}
	runCtx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()

	argv := append(append([]string{}, h.Command...), j.Site, j.Donor)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(),
		EnvGroup+"="+j.Group,
		EnvSite+"="+j.Site,
		EnvSiteAddress+"="+j.SiteAddr,
		EnvDonor+"="+j.Donor,
		EnvDonorAddress+"="+j.DonorAddr,
	)
	// Setpgid: the command and every process it starts can be signalled as
	// one group, so a killed hook leaves no mariadb-dump or ssh behind.
	// Pdeathsig: a daemon that dies mid-run does not leave the command running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = pipeDelay
	tail := &tailBuffer{max: tailLines}
	stdout := &lineLogger{ctx: ctx, log: log, stream: "stdout", tail: tail}
	stderr := &lineLogger{ctx: ctx, log: log, stream: "stderr", tail: tail}
	cmd.Stdout, cmd.Stderr = stdout, stderr

	start := time.Now()
	if err := cmd.Start(); err != nil {
		log.ErrorContext(ctx, "reclone.hook_start_failed", "command", argv, "donor", j.Donor, "err", err)
		return fmt.Errorf("%w: start %q for site %s: %w", ErrHookFailed, argv[0], j.Site, err)
	}
	pid := cmd.Process.Pid
	log.InfoContext(ctx, "reclone.hook_started", "command", argv, "donor", j.Donor,
		"site_address", j.SiteAddr, "donor_address", j.DonorAddr, "pid", pid, "timeout", h.Timeout)

	exited := make(chan error, 1)
	go func() { exited <- waitExitedNoReap(pid) }()
	var cancelled error
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-runCtx.Done():
		cancelled = runCtx.Err()
		log.WarnContext(ctx, "reclone.hook_cancelled", "pid", pid, "reason", cancelled, "grace", grace)
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case waitErr = <-exited:
		case <-time.After(grace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			waitErr = <-exited
		}
	}
	if waitErr == nil {
		// The leader is a zombie now (not reaped), so its pid, and with it
		// the group id, cannot be reused yet: this SIGKILL reaches only what
		// the command left behind, never an unrelated process group.
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			log.WarnContext(ctx, "reclone.hook_group_kill_failed", "pid", pid, "err", err)
		}
	}
	err := cmd.Wait()
	stdout.flush()
	stderr.flush()
	duration := time.Since(start)
	exitCode := -1
	status := "unknown"
	if cmd.ProcessState != nil {
		exitCode = cmd.ProcessState.ExitCode()
		status = cmd.ProcessState.String()
	}
	log.InfoContext(ctx, "reclone.hook_finished", "duration", duration, "exit_code", exitCode,
		"status", status, "cancelled", cancelled != nil)
	if waitErr != nil && err == nil {
		err = waitErr
	}

	switch {
	case cancelled != nil:
		return fmt.Errorf("%w: site %s: %s after %v, %s (%w): %s", ErrHookFailed, j.Site, status,
			duration.Round(time.Millisecond), describeCancel(cancelled, h.Timeout), cancelled, tail.text())
	case err != nil:
		if errors.Is(err, exec.ErrWaitDelay) {
			// Exit 0 but a process outside the group still held the output:
			// the hook did not finish cleanly, so its result is not trusted.
			return fmt.Errorf("%w: site %s: %s, but a process outside its process group kept its output open: %s",
				ErrHookFailed, j.Site, status, tail.text())
		}
		return fmt.Errorf("%w: site %s: %s: %s", ErrHookFailed, j.Site, status, tail.text())
	}
	return nil
}

func describeCancel(err error, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("reclone timeout %v or the caller's deadline passed", timeout)
	}
	return "cancelled by the caller"
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
	mu    sync.Mutex
	max   int
	lines []string
}

func (b *tailBuffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
	if len(b.lines) > b.max {
		b.lines = append(b.lines[:0], b.lines[len(b.lines)-b.max:]...)
	}
}

// text is "no output" or "last N output lines:\n" and the lines indented.
func (b *tailBuffer) text() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.lines) == 0 {
		return "no output"
	}
	var s strings.Builder
	fmt.Fprintf(&s, "last %d output lines:", len(b.lines))
	for _, l := range b.lines {
		s.WriteString("\n  ")
		s.WriteString(l)
	}
	return s.String()
}

// lineLogger is an io.Writer that logs each complete line as
// "reclone.output". exec.Cmd writes to it from one goroutine per stream.
type lineLogger struct {
	ctx    context.Context
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
	l.log.InfoContext(l.ctx, "reclone.output", "stream", l.stream, "line", line)
}
