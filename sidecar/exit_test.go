package sidecar

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/failoverd/failoverd/view"
)

// fakeWatcher is a ProcessWatcher a test drives: run and exit call the
// sidecar's callbacks as the real watcher would.
type fakeWatcher struct {
	mu      sync.Mutex
	running func(Process)
	exited  func(Process, bool)
	started chan struct{}
}

func newFakeWatcher() *fakeWatcher { return &fakeWatcher{started: make(chan struct{})} }

func (w *fakeWatcher) Watch(ctx context.Context, running func(Process), exited func(Process, bool)) {
	w.mu.Lock()
	w.running, w.exited = running, exited
	w.mu.Unlock()
	close(w.started)
	<-ctx.Done()
}

func (w *fakeWatcher) run(p Process) {
	<-w.started
	w.mu.Lock()
	f := w.running
	w.mu.Unlock()
	f(p)
}

func (w *fakeWatcher) exit(p Process) {
	<-w.started
	w.mu.Lock()
	f := w.exited
	w.mu.Unlock()
	f(p, false)
}

// TestMysqldExitIsReportedAtOnce: when the watched mysqld exits, a report
// naming the process (pid and start time) leaves at once, not at the next
// round (issue 32), and it is signed like every report.
func TestMysqldExitIsReportedAtOnce(t *testing.T) {
	w := newFakeWatcher()
	h := newHarness(t, func(c *Config, o *Options) {
		c.CheckInterval = time.Hour // the next round is far away: only the push sends
		c.LeaseTimeout = 2 * time.Hour
		o.Watcher = w
	})
	h.daemon.answer(sign(t, 1, "east"))
	runHarness(t, h)
	waitFor(t, "the first round's report", func() bool { return h.daemon.count() >= 1 })
	p := Process{PID: 4242, StartTicks: 777}
	w.run(p)
	if r := h.s.Report(); r.MySQLdExit != nil {
		t.Fatalf("a running mysqld reported as exited: %+v", r.MySQLdExit)
	}
	n := h.daemon.count()
	h.clock.Advance(5 * time.Millisecond)
	h.mysql.set(func(f *fakeMySQL) { f.statusErr = refusedErr() })
	w.exit(p)
	waitFor(t, "the exit's report", func() bool { return h.daemon.count() > n })
	h.daemon.mu.Lock()
	body, sig := h.daemon.bodies[n], h.daemon.sigs[n]
	h.daemon.mu.Unlock()
	if !view.VerifyBytes(body, sig, testKey) {
		t.Fatal("the exit report is not signed with the view key")
	}
	r := h.daemon.lastReport(t)
	if r.MySQLdExit == nil || r.MySQLdExit.PID != 4242 || r.MySQLdExit.StartTicks != 777 || r.MySQLdExit.AgoMs != 0 {
		t.Fatalf("report after the exit: %+v, want pid 4242 start 777 ago 0", r.MySQLdExit)
	}
	if got := metric(t, h.s, "failoverd_sidecar_mysqld_exits_total"); got != "1" {
		t.Errorf("failoverd_sidecar_mysqld_exits_total = %s, want 1", got)
	}
	// Later reports still say it, with its age on the sidecar's clock.
	h.clock.Advance(40 * time.Millisecond)
	if r := h.s.Report(); r.MySQLdExit == nil || r.MySQLdExit.AgoMs != 40 {
		t.Fatalf("a later report: %+v, want the same exit 40 ms ago", r.MySQLdExit)
	}
}

// TestRoundsAreUrgentRightAfterAnExit: once the watched mysqld exited, the
// rounds run at the urgent interval (the daemon revokes on the exit report
// and this sidecar's next report, at the revoked epoch with mysqld down, is
// the promotion's proof), for 3 checkIntervals; an exit that old, or none,
// leaves the rounds at checkInterval (issue 32).
func TestRoundsAreUrgentRightAfterAnExit(t *testing.T) {
	const check = time.Second
	h := newHarness(t, func(c *Config, _ *Options) { c.CheckInterval = check })
	h.s.mu.Lock()
	h.s.v = &view.Signed{View: view.View{Group: "orders", Epoch: 1, ActiveSite: "east"}}
	h.s.mu.Unlock()
	if d := h.s.nextRound(false); d != check {
		t.Fatalf("no exit: next round in %s, want %s", d, check)
	}
	p := Process{PID: 10, StartTicks: 1}
	h.s.processRunning(p)
	h.s.processExited(p, false)
	if d := h.s.nextRound(false); d != urgentRound {
		t.Fatalf("right after the exit: next round in %s, want %s", d, urgentRound)
	}
	h.clock.Advance(3*check - time.Millisecond)
	if d := h.s.nextRound(false); d != urgentRound {
		t.Fatalf("just inside the urgent window: next round in %s, want %s", d, urgentRound)
	}
	h.clock.Advance(time.Millisecond)
	if d := h.s.nextRound(false); d != check {
		t.Fatalf("3 checkIntervals after the exit: next round in %s, want %s", d, check)
	}
	if d := h.s.nextRound(true); d != 0 {
		t.Fatalf("after adopting a newer epoch: next round in %s, want at once", d)
	}
}

// TestExitedMysqldThatRefusesIsReportedDown (issue 32): without a killer
// that can prove it gone (several mysqld share the pid namespace), a
// watched mysqld that exited and whose port now refuses is reported down,
// so the daemon's sidecar-fenced proof holds at once; a timeout (a hung
// mysqld keeps its listener), a refusal without an exit, and a refusal
// after a new mysqld process was seen are not.
func TestExitedMysqldThatRefusesIsReportedDown(t *testing.T) {
	h := newHarness(t, nil)
	p := Process{PID: 10, StartTicks: 1}
	h.s.processRunning(p)
	h.mysql.set(func(f *fakeMySQL) { f.statusErr = refusedErr() })
	h.s.readLocal(t.Context())
	if h.s.Report().MySQLdDown {
		t.Fatal("a refusal without an exit was reported down")
	}
	h.s.processExited(p, false)
	h.mysql.set(func(f *fakeMySQL) { f.statusErr = context.DeadlineExceeded })
	h.s.readLocal(t.Context())
	if h.s.Report().MySQLdDown {
		t.Fatal("a timeout after the exit was reported down")
	}
	h.mysql.set(func(f *fakeMySQL) { f.statusErr = refusedErr() })
	h.s.readLocal(t.Context())
	if !h.s.Report().MySQLdDown {
		t.Fatal("an exited mysqld whose port refuses was not reported down")
	}
	h.s.noteDown(ReasonViewNamesOther, refusedErr())
	if !h.s.Report().MySQLdDown {
		t.Fatal("the guard's refused fence of an exited mysqld was not noted down")
	}
	h.s.processRunning(Process{PID: 11, StartTicks: 2}) // a new mysqld
	h.s.readLocal(t.Context())
	if h.s.Report().MySQLdDown {
		t.Fatal("a refusal after a new mysqld process was seen was reported down")
	}
}

// TestMysqldExitClearedOnceMysqldRunsAgain: a new mysqld process (the
// watcher found one) or a status read begun after the exit that succeeds
// ends the exit report: a restarted mysqld must never be failed over on its
// predecessor's exit. The same process seen again changes nothing, and a
// status read begun before the exit does not clear it.
func TestMysqldExitClearedOnceMysqldRunsAgain(t *testing.T) {
	h := newHarness(t, nil)
	p := Process{PID: 10, StartTicks: 1}
	h.s.processRunning(p)
	h.s.processExited(p, false)
	at := h.s.exit.at
	h.clock.Advance(time.Millisecond)
	h.s.processExited(p, false) // told again: keeps its first instant
	if h.s.exit == nil || !h.s.exit.at.Equal(at) {
		t.Fatalf("the same exit told again moved: %+v", h.s.exit)
	}
	h.s.processRunning(p) // the same (dead) process: no new mysqld
	if h.s.Report().MySQLdExit == nil {
		t.Fatal("the exited process seen again cleared its exit")
	}
	h.s.processRunning(Process{PID: 10, StartTicks: 2}) // pid reused by a new mysqld
	if r := h.s.Report(); r.MySQLdExit != nil {
		t.Fatalf("a new process did not clear the exit: %+v", r.MySQLdExit)
	}

	// A status read that began before the exit proves nothing about after.
	h.s.processExited(Process{PID: 11, StartTicks: 3}, false)
	h.mysql.set(func(f *fakeMySQL) {
		f.onStatus = func() { h.clock.Advance(time.Millisecond) }
	})
	h.s.mu.Lock()
	h.s.exit.at = h.clock.Now().Add(time.Millisecond / 2) // the exit lands while the read runs
	h.s.mu.Unlock()
	h.s.readLocal(t.Context())
	if h.s.Report().MySQLdExit == nil {
		t.Fatal("a status read begun before the exit cleared it")
	}
	h.s.readLocal(t.Context()) // begun after the exit, and it answers
	if r := h.s.Report(); r.MySQLdExit != nil {
		t.Fatalf("a status read after the exit succeeded but the exit is still reported: %+v", r.MySQLdExit)
	}
}

// TestNoWatcherReportsNoExit: without a watcher (no --mysqld-pid-file) the
// reports never carry an exit: the daemon's detection is as before.
func TestNoWatcherReportsNoExit(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 1, "east"))
	h.mysql.set(func(f *fakeMySQL) { f.statusErr = refusedErr() })
	h.step(t)
	if r := h.daemon.lastReport(t); r.MySQLdExit != nil {
		t.Fatalf("report without a watcher carries an exit: %+v", r.MySQLdExit)
	}
}

// TestPIDFileWatcherSeesTheExitAtOnce runs the real watcher on a child
// process standing in for mysqld: running names it (pid and start time),
// a SIGKILL is an exit within milliseconds, the stale pid file left behind
// is not taken for a new process, and a new process in the pid file is.
func TestPIDFileWatcherSeesTheExitAtOnce(t *testing.T) {
	cmd, pidFile := startSleep(t)
	w := &PIDFileWatcher{Path: pidFile, Names: []string{"sleep"}, Retry: 5 * time.Millisecond}
	events := make(chan string, 10)
	procs := make(chan Process, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Watch(ctx, func(p Process) { events <- "running"; procs <- p }, func(p Process, clean bool) {
			events <- map[bool]string{false: "exited", true: "stopped"}[clean]
			procs <- p
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	next := func(want string) Process {
		t.Helper()
		select {
		case got := <-events:
			if got != want {
				t.Fatalf("event %s, want %s", got, want)
			}
			return <-procs
		case <-time.After(30 * time.Second): // safety net, not a timing assertion
			t.Fatalf("no %s event", want)
		}
		return Process{}
	}
	p := next("running")
	if p.PID != cmd.Process.Pid || p.StartTicks == 0 {
		t.Fatalf("running %+v, want pid %d with a start time", p, cmd.Process.Pid)
	}
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if x := next("exited"); x != p {
		t.Fatalf("exited %+v, want %+v", x, p)
	}
	if d := time.Since(killed); d > 5*time.Second {
		t.Errorf("exit seen %v after the kill", d)
	}
	_ = cmd.Wait() // reaped: the stale pid file now names no process
	select {
	case ev := <-events:
		t.Fatalf("the stale pid file produced %s", ev)
	case <-time.After(50 * time.Millisecond):
	}
	cmd2, _ := startSleep(t)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd2.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p2 := next("running")
	if p2.PID != cmd2.Process.Pid {
		t.Fatalf("running %+v, want the new pid %d", p2, cmd2.Process.Pid)
	}
	// A clean shutdown: mysqld removes its pid file, then exits.
	if err := os.Remove(pidFile); err != nil {
		t.Fatal(err)
	}
	if err := cmd2.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if x := next("stopped"); x != p2 {
		t.Fatalf("stopped %+v, want %+v", x, p2)
	}
}

// TestCleanShutdownIsNotReportedAsAnExit: a mysqld that removed its pid
// file (a clean shutdown: a restart by hand, a planned stop) is judged by
// the daemon's probes as without a watcher; only a crash or a kill is
// reported.
func TestCleanShutdownIsNotReportedAsAnExit(t *testing.T) {
	h := newHarness(t, nil)
	p := Process{PID: 10, StartTicks: 1}
	h.s.processRunning(p)
	h.s.processExited(p, true)
	if r := h.s.Report(); r.MySQLdExit != nil {
		t.Fatalf("a clean shutdown is reported as an exit: %+v", r.MySQLdExit)
	}
	select {
	case <-h.s.push:
		t.Fatal("a clean shutdown asked for a round at once")
	default:
	}
}

// TestPIDFileWatcherIgnoresAnotherProgram: a pid file naming a process of
// another name (a reused pid, another pid namespace) is never watched, so
// no exit of it is ever reported.
func TestPIDFileWatcherIgnoresAnotherProgram(t *testing.T) {
	_, pidFile := startSleep(t)
	w := &PIDFileWatcher{Path: pidFile} // mysqld or mariadbd only
	if _, _, err := w.open(); !errors.Is(err, ErrNotMySQLD) {
		t.Fatalf("open of a sleep: %v, want ErrNotMySQLD", err)
	}
	if _, _, err := (&PIDFileWatcher{Path: filepath.Join(t.TempDir(), "none.pid")}).open(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open without a pid file: %v, want not exist", err)
	}
}

// TestProcessOfParsesStat: the start time is field 22 even when the name
// holds spaces and parentheses; a zombie is no running process.
func TestProcessOfParsesStat(t *testing.T) {
	dir := t.TempDir()
	write := func(pid int, stat string) {
		if err := os.MkdirAll(filepath.Join(dir, strconv.Itoa(pid)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(pid), "stat"), []byte(stat), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rest := " 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 98765 20 21\n"
	write(7, "7 (my sqld) S"+rest)
	write(8, "8 (mysqld) Z"+rest)
	p, err := processOf(dir, 7, []string{"my sqld"})
	if err != nil || p != (Process{PID: 7, StartTicks: 98765}) {
		t.Fatalf("processOf = %+v, %v; want pid 7 start 98765", p, err)
	}
	if _, err := processOf(dir, 8, []string{"mysqld"}); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("zombie: %v, want ErrNoProcess", err)
	}
}
