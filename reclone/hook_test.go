package reclone

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/procgroup/procgrouptest"
)

// newCapture returns a handler keeping every record and a logger writing to
// it that names the group, as the daemon's group logger does.
func newCapture() (*procgrouptest.Capture, *slog.Logger) {
	h := procgrouptest.NewCapture()
	return h, slog.New(h).With("group", "orders")
}

var job = Job{Group: "orders", Site: "site1", SiteAddr: "127.0.0.1:3307", Donor: "site0", DonorAddr: "127.0.0.1:3306"}

func TestRunPassesArgsAndEnv(t *testing.T) {
	// A stale value in the daemon's environment must not reach the hook.
	t.Setenv("FAILOVERD_SITE", "stale")
	out := filepath.Join(t.TempDir(), "got")
	s := procgrouptest.Script(t, `{
  printf 'arg=%s\n' "$@"
  for v in FAILOVERD_GROUP FAILOVERD_SITE FAILOVERD_SITE_ADDRESS FAILOVERD_DONOR FAILOVERD_DONOR_ADDRESS; do
    printf '%s=%s\n' "$v" "${!v}"
  done
  printf 'path-set=%s\n' "${PATH:+yes}"
} >"$OUT"
`)
	t.Setenv("OUT", out)
	_, log := newCapture()
	if err := (Hook{Command: []string{"bash", s, "--flag", "two words"}, Timeout: time.Minute, Logger: log}).Run(context.Background(), job); err != nil {
		t.Fatalf("Run: %v", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `arg=--flag
arg=two words
arg=site1
arg=site0
FAILOVERD_GROUP=orders
FAILOVERD_SITE=site1
FAILOVERD_SITE_ADDRESS=127.0.0.1:3307
FAILOVERD_DONOR=site0
FAILOVERD_DONOR_ADDRESS=127.0.0.1:3306
path-set=yes
`
	if string(b) != want {
		t.Fatalf("hook received:\n%s\nwant:\n%s", b, want)
	}
}

func TestRunLogsEveryOutputLine(t *testing.T) {
	s := procgrouptest.Script(t, `echo out-1; echo err-1 >&2; echo out-2; printf 'err-last-no-newline' >&2`)
	h, log := newCapture()
	if err := (Hook{Command: []string{s}, Timeout: time.Minute, Logger: log}).Run(context.Background(), job); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := map[string]string{}
	var started, finished *procgrouptest.Record
	for _, r := range h.All() {
		switch r.Msg {
		case "reclone.output":
			if r.Attrs["group"] != "orders" || r.Attrs["site"] != "site1" {
				t.Errorf("output record without group/site: %v", r.Attrs)
			}
			got[r.Attrs["line"]] = r.Attrs["stream"]
		case "reclone.hook_started":
			started = &r
		case "reclone.hook_finished":
			finished = &r
		}
	}
	want := map[string]string{"out-1": "stdout", "out-2": "stdout", "err-1": "stderr", "err-last-no-newline": "stderr"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("logged lines %v, want %v", got, want)
	}
	if started == nil || finished == nil {
		t.Fatalf("missing reclone.hook_started or reclone.hook_finished in %v", h.All())
	}
	if finished.Attrs["exit_code"] != "0" || finished.Attrs["duration"] == "" || finished.Attrs["site"] != "site1" {
		t.Fatalf("hook_finished attrs %v", finished.Attrs)
	}
}

func TestRunNonZeroExitIsHookFailedWithLastLines(t *testing.T) {
	s := procgrouptest.Script(t, `for i in $(seq -w 1 30); do echo "line-$i"; done; echo "boom"; exit 3`)
	h, log := newCapture()
	err := (Hook{Command: []string{s}, Timeout: time.Minute, Logger: log}).Run(context.Background(), job)
	if !errors.Is(err, ErrHookFailed) {
		t.Fatalf("Run = %v, want ErrHookFailed", err)
	}
	msg := err.Error()
	for _, want := range []string{"exit status 3", "site1", "line-12", "line-30", "boom"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	// 31 lines were printed (one stream: the order across stdout and stderr
	// is the order they were read in): the error keeps the last 20.
	if strings.Contains(msg, "line-11") {
		t.Errorf("error holds more than the last 20 lines:\n%s", msg)
	}
	for _, r := range h.All() {
		if r.Msg == "reclone.hook_finished" && r.Attrs["exit_code"] != "3" {
			t.Errorf("hook_finished exit_code %q, want 3", r.Attrs["exit_code"])
		}
	}
}

func TestRunTimeoutKillsTheWholeProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	t.Setenv("PIDFILE", pidFile)
	// The sleep keeps stdout open: Run also must not hang on the pipe.
	s := procgrouptest.Script(t, `sleep 1000 & echo $! >"$PIDFILE"; echo started; wait`)
	_, log := newCapture()
	err := (Hook{Command: []string{s}, Timeout: 2 * time.Second, Logger: log}).Run(context.Background(), job)
	if !errors.Is(err, ErrHookFailed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want ErrHookFailed and context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "started") {
		t.Errorf("error lacks the output:\n%v", err)
	}
	procgrouptest.RequireGone(t, "the hook's sleep grandchild", procgrouptest.ReadPid(t, pidFile))
}

func TestRunCancelKillsAfterGraceWhenTermIsIgnored(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	t.Setenv("PIDFILE", pidFile)
	// Both the script and its sleep ignore SIGTERM: only SIGKILL ends them.
	s := procgrouptest.Script(t, `trap '' TERM; sleep 1000 & echo $! >"$PIDFILE"; echo ready; wait`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, log := newCapture()
	h.OnRecord(func(r procgrouptest.Record) {
		if r.Msg == "reclone.output" && r.Attrs["line"] == "ready" {
			cancel()
		}
	})
	err := (Hook{Command: []string{s}, Timeout: time.Hour, Logger: log, grace: 100 * time.Millisecond}).Run(ctx, job)
	if !errors.Is(err, ErrHookFailed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want ErrHookFailed and context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "killed") {
		t.Errorf("error does not say the hook was killed:\n%v", err)
	}
	procgrouptest.RequireGone(t, "the hook's sleep grandchild", procgrouptest.ReadPid(t, pidFile))
}

func TestRunWithoutCommand(t *testing.T) {
	for _, c := range [][]string{nil, {}, {""}} {
		if err := (Hook{Command: c, Timeout: time.Minute}).Run(context.Background(), job); !errors.Is(err, ErrNoCommand) {
			t.Errorf("Run with Command %q = %v, want ErrNoCommand", c, err)
		}
	}
}

func TestRunRefusesZeroTimeout(t *testing.T) {
	err := (Hook{Command: []string{"true"}}).Run(context.Background(), job)
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("Run without Timeout = %v, want a timeout error", err)
	}
}

func TestRunMissingBinaryIsHookFailed(t *testing.T) {
	_, log := newCapture()
	err := (Hook{Command: []string{filepath.Join(t.TempDir(), "absent")}, Timeout: time.Minute, Logger: log}).Run(context.Background(), job)
	if !errors.Is(err, ErrHookFailed) {
		t.Fatalf("Run = %v, want ErrHookFailed", err)
	}
}

func TestRunAlreadyCancelledStartsNothing(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := (Hook{Command: []string{"touch", marker}, Timeout: time.Minute}).Run(ctx, job)
	if !errors.Is(err, ErrHookFailed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want ErrHookFailed and context.Canceled", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran although ctx was already cancelled")
	}
}

// The shipped scripts must at least parse (the production example is never
// run by tests); shellcheck runs too where it is installed.
func TestScriptsParse(t *testing.T) {
	scripts := []string{
		"../deploy/reclone/mariadb-backup.sh",
		"../test/e2e/testdata/reclone-mariadb-dump.sh",
	}
	for _, s := range scripts {
		if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
	}
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Logf("shellcheck not installed: only bash -n checked")
		return
	}
	if out, err := exec.Command(sc, scripts...).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}
