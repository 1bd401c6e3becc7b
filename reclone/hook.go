package reclone

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/failoverd/failoverd/procgroup"
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
	log = log.With("site", j.Site) // the caller's logger names the group
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
	cmd := procgroup.Cmd{
		Argv: argv,
		Env: []string{
			EnvGroup + "=" + j.Group,
			EnvSite + "=" + j.Site,
			EnvSiteAddress + "=" + j.SiteAddr,
			EnvDonor + "=" + j.Donor,
			EnvDonorAddress + "=" + j.DonorAddr,
		},
		Log:       log,
		Keys:      procgroup.Keys{Output: "reclone.output", Killing: "reclone.hook_cancelled", GroupKillFailed: "reclone.hook_group_kill_failed"},
		Grace:     grace,
		TailLines: tailLines,
		OnStart: func(pid int) {
			log.InfoContext(ctx, "reclone.hook_started", "command", argv, "donor", j.Donor,
				"site_address", j.SiteAddr, "donor_address", j.DonorAddr, "pid", pid, "timeout", h.Timeout)
		},
	}
	start := time.Now()
	res, err := cmd.Run(runCtx)
	if err != nil {
		log.ErrorContext(ctx, "reclone.hook_start_failed", "command", argv, "donor", j.Donor, "err", err)
		return fmt.Errorf("%w: start %q for site %s: %w", ErrHookFailed, argv[0], j.Site, err)
	}
	duration := time.Since(start)
	status := res.Status
	if status == "" {
		status = "unknown"
	}
	log.InfoContext(ctx, "reclone.hook_finished", "duration", duration, "exit_code", res.ExitCode,
		"status", status, "cancelled", res.Cancelled != nil)

	switch {
	case res.Cancelled != nil:
		return fmt.Errorf("%w: site %s: %s after %v, %s (%w): %s", ErrHookFailed, j.Site, status,
			duration.Round(time.Millisecond), describeCancel(res.Cancelled, h.Timeout), res.Cancelled, tailText(res.Tail))
	case res.OutputHeld():
		// Exit 0 but a process outside the group still held the output:
		// the hook did not finish cleanly, so its result is not trusted.
		return fmt.Errorf("%w: site %s: %s, but a process outside its process group kept its output open: %s",
			ErrHookFailed, j.Site, status, tailText(res.Tail))
	case res.Err != nil:
		return fmt.Errorf("%w: site %s: %s: %s", ErrHookFailed, j.Site, status, tailText(res.Tail))
	}
	return nil
}

func describeCancel(err error, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("reclone timeout %v or the caller's deadline passed", timeout)
	}
	return "cancelled by the caller"
}

// tailText is "no output" or "last N output lines:\n" and the lines indented.
func tailText(lines []string) string {
	if len(lines) == 0 {
		return "no output"
	}
	var s strings.Builder
	fmt.Fprintf(&s, "last %d output lines:", len(lines))
	for _, l := range lines {
		s.WriteString("\n  ")
		s.WriteString(l)
	}
	return s.String()
}
