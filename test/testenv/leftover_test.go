package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
// TestNothingSurvives in a child process, it starts a server of every
// selected engine and Redis,
// SIGSTOPs one, reports pids and dirs, then dies. Without the env var it
// returns at once.
func TestHelperProcessLeftovers(t *testing.T) {
	mode := os.Getenv(helperModeEnv)
	if mode == "" {
		return
	}
	engines, err := Engines()
	if err != nil {
		t.Fatal(err)
	}
	var rep leftoverReport
	var m *Server // the first server: paused in "panic" mode
	for _, e := range engines {
		s := StartServer(t, ServerOptions{Engine: e, Name: "doomed"})
		if m == nil {
			m = s
		}
		rep.Pids = append(rep.Pids, s.current().pid())
		rep.Dirs = append(rep.Dirs, s.dir)
	}
	r := StartRedis(t, RedisOptions{Name: "doomed"})
	rep.Pids = append(rep.Pids, r.current().pid())
	rep.Dirs = append(rep.Dirs, r.dir)
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
			engines, err := Engines()
			if err != nil {
				t.Fatal(err)
			}
			if want := len(engines) + 1; len(rep.Pids) != want || len(rep.Dirs) != want { // a server per engine and Redis
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

// TestLeftoversScriptChecksOnlyRecordedProcesses: scripts/leftovers, run by
// make test after the suite, reports what testenv recorded and nothing
// else. It ignores a process merely named mariadbd, a recorded pid that now
// belongs to another process, and the records of a test binary still at
// work; it reports a recorded server whose test binary is gone and a
// process naming that binary's record dir; old records of dead servers, or
// no record at all, pass.
func TestLeftoversScriptChecksOnlyRecordedProcesses(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "leftovers"))
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	records := filepath.Join(base, "records")
	fakeMariadbd := func(sub string) string {
		src, err := exec.LookPath("sleep")
		if err != nil {
			t.Fatalf("sleep: %v", err)
		}
		dst := filepath.Join(base, sub, "mariadbd")
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(src, dst); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	startUnrecorded := func(bin string, args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", bin, err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		return cmd
	}
	run := func(wantExit int) string {
		t.Helper()
		cmd := exec.Command("bash", script)
		cmd.Env = append(os.Environ(), "FAILOVERD_LEFTOVERS_DIRS="+records, "FAILOVERD_LEFTOVERS_GRACE=0")
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("run %s: %v", script, err)
		}
		if code != wantExit {
			t.Fatalf("scripts/leftovers exited %d, want %d; output:\n%s", code, wantExit, out)
		}
		return string(out)
	}
	reported := func(out string, pid int) bool { return strings.Contains(out, fmt.Sprintf("pid %d (", pid)) }
	writeFile := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A developer's own "mariadbd": the old script (pgrep -x mariadbd) failed on it.
	unrelated := startUnrecorded(fakeMariadbd("elsewhere"), "300")
	upid := unrelated.Process.Pid
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", upid)); strings.TrimSpace(string(comm)) != "mariadbd" {
		t.Fatalf("the unrelated process is named %q, want mariadbd", comm)
	}

	// A clean machine: no record dir at all.
	if out := run(0); !strings.HasPrefix(out, "leftovers: none") || reported(out, upid) {
		t.Fatalf("no records: output %q, want leftovers: none", out)
	}

	// A test binary that died: its owner identity no longer matches.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadDir := filepath.Join(records, "fo-dead")
	if err := os.MkdirAll(deadDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(filepath.Join(deadDir, ownerFile), fmt.Sprintf("%d 1", gone.ProcessState.Pid()))
	// A server it started, recorded by startProcess itself, that survived it.
	leaked, err := startProcess("fake mariadbd", filepath.Join(deadDir, "mariadbd.out"), fakeMariadbd("suite"), "300")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leaked.cleanup() })
	// A recorded leader that died, leaving a helper in its process group
	// (as mariadb-install-db's bootstrap mariadbd could).
	leader, err := startProcess("install helper", filepath.Join(deadDir, "install.out"), "bash", "-c", "sleep 300 & wait")
	if err != nil {
		t.Fatal(err)
	}
	member := waitGroupMember(t, leader.pid())
	t.Cleanup(func() { _ = syscall.Kill(-leader.pid(), syscall.SIGKILL) }) // the id stays the group's while the member lives
	if err := syscall.Kill(leader.pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !leader.wait(10 * time.Second) {
		t.Fatal("the group leader survived SIGKILL")
	}
	// An unrecorded helper naming the dead binary's record dir.
	helper := startUnrecorded("bash", "-c", "sleep 300; : "+deadDir+"/helper")
	// A recorded pid recycled by an unrelated process: its start time differs.
	f, err := os.OpenFile(filepath.Join(deadDir, childrenFile), os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "%d 1\n", upid)
	f.Close()
	// A test binary at work (this one): its live servers are not leftovers.
	liveDir := filepath.Join(records, "fo-live")
	if err := os.MkdirAll(liveDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(filepath.Join(liveDir, ownerFile), selfIdentity())
	writeFile(filepath.Join(liveDir, childrenFile), fmt.Sprintf("%d %s\n", upid, procStartTime(upid)))

	out := run(1)
	if !reported(out, leaked.pid()) || !reported(out, helper.Process.Pid) || !reported(out, member) {
		t.Fatalf("the leaked server %d, the helper %d and the group member %d must be reported; output:\n%s",
			leaked.pid(), helper.Process.Pid, member, out)
	}
	if reported(out, upid) {
		t.Fatalf("the unrelated mariadbd %d was reported; output:\n%s", upid, out)
	}

	// Once they died, their records (like a crashed run's) cause no failure.
	if err := leaked.cleanup(); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(-helper.Process.Pid, syscall.SIGKILL) // bash and its sleep
	_ = helper.Wait()
	_ = syscall.Kill(-leader.pid(), syscall.SIGKILL)
	for procAlive(member) {
		time.Sleep(10 * time.Millisecond) // reparented: another process reaps it
	}
	if out := run(0); !strings.HasPrefix(out, "leftovers: none") {
		t.Fatalf("records of dead processes: output %q, want leftovers: none", out)
	}
}

// waitGroupMember returns the pid of a process in group pgid other than
// its leader, waiting up to 10 s for one to appear.
func waitGroupMember(t *testing.T, pgid int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == pgid {
				continue
			}
			if g, err := syscall.Getpgid(pid); err == nil && g == pgid && procAlive(pid) {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no member of process group %d appeared", pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
