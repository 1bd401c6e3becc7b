package testenv

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperModeEnv switches TestHelperProcessLeftovers on in a re-executed test
// binary (the os/exec TestHelperProcess pattern).
const (
	helperModeEnv   = "FAILOVERD_TESTENV_HELPER_MODE"
	helperReportEnv = "FAILOVERD_TESTENV_HELPER_REPORT"
)

type leftoverReport struct {
	Pids []int
	Dirs []string
}

// TestHelperProcessLeftovers is not a test on its own: run by
// TestNothingSurvives in a child process, it starts MariaDB and Redis,
// SIGSTOPs one, reports pids and dirs, then dies. Without the env var it
// returns at once.
func TestHelperProcessLeftovers(t *testing.T) {
	mode := os.Getenv(helperModeEnv)
	if mode == "" {
		return
	}
	m := StartMariaDB(t, MariaDBOptions{Name: "doomed"})
	r := StartRedis(t, RedisOptions{Name: "doomed"})
	rep := leftoverReport{
		Pids: []int{m.current().pid(), r.current().pid()},
		Dirs: []string{m.dir, r.dir},
	}
	// A stopped process ignores everything but SIGKILL and SIGCONT.
	var paused interface{ Pause() error } = m
	if mode == "crash" {
		paused = r
	}
	if err := paused.Pause(); err != nil {
		t.Fatalf("pause: %v", err)
	}
	b, _ := json.Marshal(rep)
	if err := os.WriteFile(os.Getenv(helperReportEnv), b, 0o644); err != nil {
		t.Fatalf("write report: %v", err)
	}
	switch mode {
	case "panic":
		// testing runs the cleanups of a panicking test before exiting.
		panic("testenv helper: deliberate panic with servers running")
	case "crash":
		// A panic off the test goroutine kills the binary at once: no
		// cleanup runs, only Pdeathsig and the next run's sweep help.
		done := make(chan struct{})
		go func() { panic("testenv helper: deliberate crash with servers running") }()
		<-done
	}
}

// TestNothingSurvives is acceptance test 5: whether the test panics (cleanups
// run) or the whole binary crashes (they do not), no server survives, and
// the temp dirs are removed by the cleanups or by the next run's sweep.
func TestNothingSurvives(t *testing.T) {
	// Adopt the helper's orphans so they can be reaped here instead of
	// lingering as zombies under a PID 1 that may not reap.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("become child subreaper: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	for _, mode := range []string{"panic", "crash"} {
		t.Run(mode, func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "report.json")
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessLeftovers$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), helperModeEnv+"="+mode, helperReportEnv+"="+report)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("helper process exited 0, want a panic; output:\n%s", out)
			}
			if !strings.Contains(string(out), "deliberate") {
				t.Fatalf("helper died of something else: %v\n%s", err, out)
			}
			b, err := os.ReadFile(report)
			if err != nil {
				t.Fatalf("helper report: %v\n%s", err, out)
			}
			var rep leftoverReport
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatalf("helper report: %v", err)
			}
			if len(rep.Pids) != 2 || len(rep.Dirs) != 2 {
				t.Fatalf("helper report incomplete: %+v", rep)
			}
			deadline := time.Now().Add(10 * time.Second)
			for _, pid := range rep.Pids {
				for procAlive(pid) {
					if time.Now().After(deadline) {
						t.Fatalf("pid %d survived the helper's %s", pid, mode)
					}
					time.Sleep(20 * time.Millisecond)
				}
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil) // reap the adopted zombie, if ours
			}
			if mode == "crash" {
				for _, d := range rep.Dirs {
					if _, err := os.Stat(d); err != nil {
						t.Fatalf("after a crash %s should remain until the sweep: %v", d, err)
					}
				}
				sweepStaleDirs()
			}
			for _, d := range rep.Dirs {
				if _, err := os.Stat(d); !os.IsNotExist(err) {
					t.Fatalf("temp dir %s survived the helper's %s (stat err %v)", d, mode, err)
				}
			}
		})
	}
}
