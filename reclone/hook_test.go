package reclone

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// record is one captured log record, attributes flattened to strings.
type record struct {
	msg   string
	attrs map[string]string
}

// captureHandler keeps every record; onLine, when set, sees each
// "reclone.output" line as it is logged.
type captureHandler struct {
	records *[]record
	attrs   []slog.Attr
	onLine  func(string)
}

func newCapture() (*captureHandler, *slog.Logger) {
	h := &captureHandler{records: &[]record{}}
	return h, slog.New(h)
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) WithGroup(string) slog.Handler            { return h }
func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &captureHandler{records: h.records, attrs: append(append([]slog.Attr{}, h.attrs...), as...), onLine: h.onLine}
}

var captureMu sync.Mutex // guards every captureHandler's records (WithAttrs copies share them)

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	rec := record{msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	captureMu.Lock()
	*h.records = append(*h.records, rec)
	captureMu.Unlock()
	if h.onLine != nil && rec.msg == "reclone.output" {
		h.onLine(rec.attrs["line"])
	}
	return nil
}

func (h *captureHandler) all() []record {
	captureMu.Lock()
	defer captureMu.Unlock()
	return append([]record{}, *h.records...)
}

// script writes body as an executable bash script into a temp dir.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hook.sh")
	if err := os.WriteFile(p, []byte("#!/bin/bash\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

var job = Job{Group: "orders", Site: "site1", SiteAddr: "127.0.0.1:3307", Donor: "site0", DonorAddr: "127.0.0.1:3306"}

func TestRunPassesArgsAndEnv(t *testing.T) {
	// A stale value in the daemon's environment must not reach the hook.
	t.Setenv("FAILOVERD_SITE", "stale")
	out := filepath.Join(t.TempDir(), "got")
	s := script(t, `{
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
	s := script(t, `echo out-1; echo err-1 >&2; echo out-2; printf 'err-last-no-newline' >&2`)
	h, log := newCapture()
	if err := (Hook{Command: []string{s}, Timeout: time.Minute, Logger: log}).Run(context.Background(), job); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := map[string]string{}
	var started, finished *record
	for _, r := range h.all() {
		switch r.msg {
		case "reclone.output":
			if r.attrs["group"] != "orders" || r.attrs["site"] != "site1" {
				t.Errorf("output record without group/site: %v", r.attrs)
			}
			got[r.attrs["line"]] = r.attrs["stream"]
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
		t.Fatalf("missing reclone.hook_started or reclone.hook_finished in %v", h.all())
	}
	if finished.attrs["exit_code"] != "0" || finished.attrs["duration"] == "" || finished.attrs["site"] != "site1" {
		t.Fatalf("hook_finished attrs %v", finished.attrs)
	}
}

func TestRunNonZeroExitIsHookFailedWithLastLines(t *testing.T) {
	s := script(t, `for i in $(seq -w 1 30); do echo "line-$i"; done; echo "boom"; exit 3`)
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
	for _, r := range h.all() {
		if r.msg == "reclone.hook_finished" && r.attrs["exit_code"] != "3" {
			t.Errorf("hook_finished exit_code %q, want 3", r.attrs["exit_code"])
		}
	}
}

// gone reports whether pid has exited (absent, or a zombie nobody reaped).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// requireGone fails unless pid exits soon: SIGKILL is delivered
// asynchronously, so allow the kernel a moment.
func requireGone(t *testing.T, what string, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !gone(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs after Run returned", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the hook did not record its grandchild's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestRunTimeoutKillsTheWholeProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	t.Setenv("PIDFILE", pidFile)
	// The sleep keeps stdout open: Run also must not hang on the pipe.
	s := script(t, `sleep 1000 & echo $! >"$PIDFILE"; echo started; wait`)
	_, log := newCapture()
	err := (Hook{Command: []string{s}, Timeout: 2 * time.Second, Logger: log}).Run(context.Background(), job)
	if !errors.Is(err, ErrHookFailed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want ErrHookFailed and context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "started") {
		t.Errorf("error lacks the output:\n%v", err)
	}
	requireGone(t, "the hook's sleep grandchild", readPid(t, pidFile))
}

func TestRunCancelKillsAfterGraceWhenTermIsIgnored(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	t.Setenv("PIDFILE", pidFile)
	// Both the script and its sleep ignore SIGTERM: only SIGKILL ends them.
	s := script(t, `trap '' TERM; sleep 1000 & echo $! >"$PIDFILE"; echo ready; wait`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, log := newCapture()
	h.onLine = func(line string) {
		if line == "ready" {
			cancel()
		}
	}
	err := (Hook{Command: []string{s}, Timeout: time.Hour, Logger: log, grace: 100 * time.Millisecond}).Run(ctx, job)
	if !errors.Is(err, ErrHookFailed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want ErrHookFailed and context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "killed") {
		t.Errorf("error does not say the hook was killed:\n%v", err)
	}
	requireGone(t, "the hook's sleep grandchild", readPid(t, pidFile))
}

func TestRunSuccessLeavesNothingRunning(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	t.Setenv("PIDFILE", pidFile)
	// A hook that forgets a background process: it holds stdout open too.
	s := script(t, `sleep 1000 & echo $! >"$PIDFILE"; echo done`)
	_, log := newCapture()
	if err := (Hook{Command: []string{s}, Timeout: time.Minute, Logger: log}).Run(context.Background(), job); err != nil {
		t.Fatalf("Run: %v", err)
	}
	requireGone(t, "the hook's background sleep", readPid(t, pidFile))
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
