package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNotRunning is returned by Stop, Kill, Pause and Resume when the server
// process has already exited.
var ErrNotRunning = errors.New("testenv: process is not running")

// spawnRequests feeds the spawner goroutine. Every child is started from the
// same OS thread, which is locked and never released: Pdeathsig fires when the
// *thread* that forked the child exits, so a dedicated immortal thread makes it
// fire only when the whole test process dies.
var (
	spawnOnce     sync.Once
	spawnRequests chan spawnRequest
)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// startCmd starts cmd in network namespace ns (nil: the process's own); in
// ns it is forked from ns's thread, which lives until ns is closed after
// the process is gone.
func startCmd(cmd *exec.Cmd, ns *netns) error {
	spawnOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		go func() {
			// Never unlocked on purpose: prevents Pdeathsig from firing when
			// the Go runtime retires the thread that forked a child.
			runtime.LockOSThread()
			for r := range spawnRequests {
				r.done <- r.cmd.Start()
			}
		}()
	})
	// Setpgid: cleanup can kill the whole group (mariadb-install-db spawns
	// helpers); Pdeathsig: nothing outlives a SIGKILLed test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if ns != nil {
		var err error
		ns.do(func() { err = cmd.Start() })
		return err
	}
	done := make(chan error, 1)
	spawnRequests <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

// process is one running server process in its own process group.
type process struct {
	name    string
	logPath string // stdout+stderr of the process

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, valid after exited is closed
	paused bool
}

// startProcess starts bin with args, stdout and stderr appended to logPath.
func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	return startProcessIn(nil, name, logPath, bin, args...)
}

// startProcessIn is startProcess in network namespace ns (nil: the
// process's own).
func startProcessIn(ns *netns, name, logPath, bin string, args ...string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", name, err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = append(os.Environ(), "TZ=UTC")
	if err := startCmd(cmd, ns); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	// Recorded before Wait can reap it, so /proc still has its start time.
	if err := recordChild(filepath.Dir(logPath), cmd.Process.Pid); err != nil {
		// An unrecorded server would escape the sweep and scripts/leftovers.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signalGroup sends sig to the process group of p.
func (p *process) signalGroup(sig syscall.Signal) error {
	if !p.running() {
		return ErrNotRunning
	}
	if err := syscall.Kill(-p.pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s %v: %w", p.name, sig, err)
	}
	return nil
}

// wait waits up to d for the process to exit.
func (p *process) wait(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// terminate sends SIGTERM (after SIGCONT, a stopped process cannot act on
// SIGTERM) and waits up to grace, then SIGKILLs.
func (p *process) terminate(grace time.Duration) error {
	if !p.running() {
		return ErrNotRunning
	}
	_ = p.signalGroup(syscall.SIGCONT)
	p.setPaused(false)
	if err := p.signalGroup(syscall.SIGTERM); err != nil && !errors.Is(err, ErrNotRunning) {
		return err
	}
	if p.wait(grace) {
		return nil
	}
	return p.kill()
}

// kill SIGKILLs the whole group and waits for the exit. SIGKILL also ends a
// SIGSTOPped process; the SIGCONT only makes sure no stopped helper lingers.
func (p *process) kill() error {
	if !p.running() {
		return ErrNotRunning
	}
	_ = p.signalGroup(syscall.SIGKILL)
	_ = p.signalGroup(syscall.SIGCONT)
	p.setPaused(false)
	if !p.wait(30 * time.Second) {
		return fmt.Errorf("kill %s (pid %d): still running 30s after SIGKILL", p.name, p.pid())
	}
	return nil
}

// cleanup is kill without an error for an already exited process. It never
// signals a reaped group: its id may already belong to someone else.
func (p *process) cleanup() error {
	err := p.kill()
	if errors.Is(err, ErrNotRunning) {
		err = nil
	}
	return err
}

func (p *process) pause() error {
	if err := p.signalGroup(syscall.SIGSTOP); err != nil {
		return err
	}
	p.setPaused(true)
	// kill(2) returns before the threads have stopped: a request sent right
	// after could still be answered. Wait until every thread is stopped.
	deadline := time.Now().Add(5 * time.Second)
	for !allThreadsStopped(p.pid()) {
		if time.Now().After(deadline) {
			return fmt.Errorf("pause %s (pid %d): threads not stopped 5s after SIGSTOP", p.name, p.pid())
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// allThreadsStopped reports whether every thread of pid is in state T
// (stopped) per /proc/PID/task/TID/stat.
func allThreadsStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue // the thread exited
		}
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 || end+2 >= len(s) || (s[end+2] != 'T' && s[end+2] != 't') {
			return false
		}
	}
	return true
}

func (p *process) resume() error {
	if err := p.signalGroup(syscall.SIGCONT); err != nil {
		return err
	}
	p.setPaused(false)
	return nil
}

func (p *process) setPaused(v bool) {
	p.mu.Lock()
	p.paused = v
	p.mu.Unlock()
}

// exitError is Wait's result once the process exited (nil: status 0).
func (p *process) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// exitDescription describes how the process ended, for error messages.
func (p *process) exitDescription() string {
	if err := p.exitError(); err != nil {
		return err.Error()
	}
	return "exit status 0"
}

// tailFile returns the last n lines of path, for error messages.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
