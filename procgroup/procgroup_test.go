package procgroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/failoverd/failoverd/procgroup/procgrouptest"
)

var keys = Keys{Output: "t.output", Killing: "t.killing", GroupKillFailed: "t.group_kill_failed"}

// newCmd returns a Cmd running argv that logs to the returned Capture.
func newCmd(argv ...string) (*Cmd, *procgrouptest.Capture) {
	c := procgrouptest.NewCapture()
	return &Cmd{Argv: argv, Log: slog.New(c), Keys: keys, Grace: 100 * time.Millisecond, TailLines: 3}, c
}

func TestRunLogsEveryLineAndKeepsTheLastOnes(t *testing.T) {
	t.Setenv("PG_VAR", "stale")
	s := procgrouptest.Script(t, `printf 'arg=%s\n' "$@"; echo "var=$PG_VAR"; echo "stdin=$(cat)"; echo err-1 >&2; printf 'no-newline'`)
	cmd, c := newCmd(s, "two words")
	cmd.Env = []string{"PG_VAR=fresh"}
	cmd.Stdin = strings.NewReader("payload")
	var started int
	cmd.OnStart = func(pid int) { started = pid }
	res, err := cmd.Run(context.Background())
	if err != nil || res.Err != nil || res.Cancelled != nil || res.ExitCode != 0 || res.Status != "exit status 0" {
		t.Fatalf("Run = %+v, %v; want a clean exit 0", res, err)
	}
	if started <= 0 {
		t.Errorf("OnStart got pid %d", started)
	}
	var lines []string
	for _, r := range c.Find(keys.Output) {
		lines = append(lines, r.Attrs["stream"]+":"+r.Attrs["line"])
	}
	slices.Sort(lines) // the two streams are read concurrently
	want := []string{"stderr:err-1", "stdout:arg=two words", "stdout:no-newline", "stdout:stdin=payload", "stdout:var=fresh"}
	if !slices.Equal(lines, want) {
		t.Errorf("logged %q, want %q", lines, want)
	}
	if len(res.Tail) != 3 {
		t.Errorf("Tail %q, want the last 3 lines", res.Tail)
	}
}

func TestRunCutsLongTailLinesButLogsThemWhole(t *testing.T) {
	long := strings.Repeat("x", 300)
	cmd, c := newCmd("echo", long)
	cmd.TailLineLen = 256
	res, err := cmd.Run(context.Background())
	if err != nil || res.Err != nil {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if want := []string{long[:256] + "..."}; !slices.Equal(res.Tail, want) {
		t.Errorf("Tail %q, want the line cut at 256", res.Tail)
	}
	if recs := c.Find(keys.Output); len(recs) != 1 || recs[0].Attrs["line"] != long {
		t.Errorf("logged %v, want the whole line", recs)
	}
}

func TestRunNonZeroExit(t *testing.T) {
	cmd, _ := newCmd(procgrouptest.Script(t, `echo before; exit 3`))
	res, err := cmd.Run(context.Background())
	if err != nil || res.Err == nil || res.ExitCode != 3 || res.Status != "exit status 3" || res.Cancelled != nil || res.OutputHeld() {
		t.Fatalf("Run = %+v, %v; want exit status 3", res, err)
	}
	if !slices.Equal(res.Tail, []string{"before"}) {
		t.Errorf("Tail %q", res.Tail)
	}
}

func TestRunStartFailure(t *testing.T) {
	cmd, _ := newCmd(filepath.Join(t.TempDir(), "absent"))
	cmd.OnStart = func(int) { t.Error("OnStart called for a command that did not start") }
	if _, err := cmd.Run(context.Background()); err == nil {
		t.Fatal("Run of a missing binary succeeded")
	}
}

// A command that exits 0 but leaves a process behind (holding its stdout
// open too): the process is killed with the group.
func TestRunExitLeavesNothingRunning(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	t.Setenv("PIDFILE", pidFile)
	cmd, _ := newCmd(procgrouptest.Script(t, `sleep 1000 & echo $! >"$PIDFILE"; echo done`))
	res, err := cmd.Run(context.Background())
	if err != nil || res.Err != nil {
		t.Fatalf("Run = %+v, %v; want a clean exit", res, err)
	}
	procgrouptest.RequireGone(t, "the command's background sleep", procgrouptest.ReadPid(t, pidFile))
}

// When ctx ends (a timeout or a cancel), the whole group gets SIGTERM, then
// SIGKILL after Grace when SIGTERM is ignored.
func TestRunContextEndKillsTheWholeGroup(t *testing.T) {
	for name, tc := range map[string]struct{ body, status string }{
		"sigterm": {`sleep 1000 & echo $! >"$PIDFILE"; echo ready; wait`, "signal: terminated"},
		// Both ignore SIGTERM: only the SIGKILL after the grace period ends them.
		"sigkill": {`trap '' TERM; sleep 1000 & echo $! >"$PIDFILE"; echo ready; wait`, "signal: killed"},
	} {
		t.Run(name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "sleep.pid")
			t.Setenv("PIDFILE", pidFile)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cmd, c := newCmd(procgrouptest.Script(t, tc.body))
			c.OnRecord(func(r procgrouptest.Record) {
				if r.Msg == keys.Output && r.Attrs["line"] == "ready" {
					cancel()
				}
			})
			res, err := cmd.Run(ctx)
			if err != nil || !errors.Is(res.Cancelled, context.Canceled) || res.Err == nil || res.Status != tc.status {
				t.Fatalf("Run = %+v, %v; want cancelled, %s", res, err, tc.status)
			}
			if !slices.Equal(res.Tail, []string{"ready"}) {
				t.Errorf("Tail %q", res.Tail)
			}
			if k := c.Find(keys.Killing); len(k) != 1 || k[0].Attrs["reason"] != context.Canceled.Error() {
				t.Errorf("killing records %v, want one naming the reason", k)
			}
			procgrouptest.RequireGone(t, "the command's sleep grandchild", procgrouptest.ReadPid(t, pidFile))
		})
	}
}

// A process that left the group (setsid) and keeps the output open cannot
// hang Run, and the exit 0 is not reported as clean.
func TestRunOutputHeldOutsideTheGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	t.Setenv("PIDFILE", pidFile)
	cmd, _ := newCmd(procgrouptest.Script(t, `setsid bash -c 'echo $$ >"$PIDFILE"; exec sleep 1000' &
until [ -s "$PIDFILE" ]; do sleep 0.01; done # out of the group only once it wrote
echo done`))
	res, err := cmd.Run(context.Background())
	// The escaped sleep is outside the group: Run does not kill it, the test does.
	pid := procgrouptest.ReadPid(t, pidFile)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err != nil || !res.OutputHeld() || res.ExitCode != 0 {
		t.Fatalf("Run = %+v, %v; want exit 0 with the output held", res, err)
	}
	if fmt.Sprint(res.Tail) != "[done]" {
		t.Errorf("Tail %q", res.Tail)
	}
}
