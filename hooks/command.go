package hooks

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/procgroup"
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
	// EnvReaders is the reader set of a reader-added or reader-removed
	// event, comma-separated ("" when none).
	EnvReaders = "FAILOVERD_READERS"
)

const (
	// defaultGrace lets a timed-out command clean up before its process
	// group is SIGKILLed; short because hooks are short.
	defaultGrace = 2 * time.Second
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
	cmd := procgroup.Cmd{
		Argv: h.Command,
		Env: []string{
			EnvEvent + "=" + ev.Type,
			EnvGroup + "=" + ev.Group,
			EnvEpoch + "=" + strconv.FormatUint(ev.Epoch, 10),
			EnvFrom + "=" + ev.From,
			EnvTo + "=" + ev.To,
			EnvSite + "=" + ev.Site,
			EnvReason + "=" + ev.Reason,
			EnvGTID + "=" + ev.GTID,
			EnvReaders + "=" + strings.Join(ev.Readers, ","),
		},
		Stdin:       bytes.NewReader(payload),
		Log:         log,
		Keys:        procgroup.Keys{Output: "hook.output", Killing: "hook.killing", GroupKillFailed: "hook.group_kill_failed"},
		Grace:       r.grace,
		TailLines:   tailLines,
		TailLineLen: tailLineLen,
	}
	res, err := cmd.Run(ctx)
	if err != nil {
		return fmt.Errorf("%w: start %q: %w", ErrFailed, h.Command[0], err)
	}
	status := res.Status
	if status == "" {
		status = "unknown status"
	}
	switch {
	case res.Cancelled != nil:
		return fmt.Errorf("%s (%w); %s", status, res.Cancelled, tailText(res.Tail))
	case res.OutputHeld():
		// Exit 0 but a process outside the group kept the output open: the
		// hook did not finish cleanly, so its success is not trusted.
		return fmt.Errorf("%w: %s, but a process outside its process group kept its output open; %s", ErrFailed, status, tailText(res.Tail))
	case res.Err != nil:
		return fmt.Errorf("%w: %s; %s", ErrFailed, status, tailText(res.Tail))
	}
	return nil
}

// tailText is "no output" or "last output: " and the lines joined by " | ".
func tailText(lines []string) string {
	if len(lines) == 0 {
		return "no output"
	}
	return "last output: " + strings.Join(lines, " | ")
}
