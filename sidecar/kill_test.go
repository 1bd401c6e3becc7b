package sidecar

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// startSleep starts a child process standing in for mysqld and writes its pid
// file.
func startSleep(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pidFile := filepath.Join(t.TempDir(), "mysqld.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cmd, pidFile
}

func killCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPIDFileKillerRefusesAnotherProgram(t *testing.T) {
	cmd, pidFile := startSleep(t)
	k := &PIDFileKiller{Path: pidFile}
	if k.CanKill() {
		t.Error("CanKill true for a pid file naming another program")
	}
	if !(&PIDFileKiller{Path: pidFile, Names: []string{"sleep"}}).CanKill() {
		t.Error("CanKill false for a running process of an accepted name")
	}
	if _, err := k.Kill(killCtx(t)); !errors.Is(err, ErrNotMySQLD) {
		t.Fatalf("Kill of a sleep named by a stale pid file: %v", err)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the process was harmed: %v", err)
	}
}

func TestPIDFileKillerKillsAStoppedProcess(t *testing.T) {
	cmd, pidFile := startSleep(t)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	k := &PIDFileKiller{Path: pidFile, Names: []string{"sleep"}}
	pid, err := k.Kill(killCtx(t))
	if err != nil || pid != cmd.Process.Pid {
		t.Fatalf("Kill = %d, %v", pid, err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("process ended with %v, want SIGKILL", err)
	}
	if _, err := k.Kill(killCtx(t)); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("second Kill: %v", err)
	}
	// The pid file outlives the process (or names a pid of another pid
	// namespace, where this pid is no process): nothing to kill.
	if k.CanKill() {
		t.Error("CanKill true for a pid file naming no running process")
	}
}

func TestPIDFileKillerWithoutAPID(t *testing.T) {
	dir := t.TempDir()
	missing := &PIDFileKiller{Path: filepath.Join(dir, "none.pid")}
	if missing.CanKill() {
		t.Error("CanKill with a missing pid file")
	}
	if _, err := missing.Kill(killCtx(t)); !errors.Is(err, ErrNoProcess) {
		t.Errorf("missing pid file: %v", err)
	}
	garbage := filepath.Join(dir, "garbage.pid")
	_ = os.WriteFile(garbage, []byte("mysqld\n"), 0o600)
	if (&PIDFileKiller{Path: garbage}).CanKill() || (&PIDFileKiller{}).CanKill() {
		t.Error("CanKill without a pid")
	}
	if _, err := (&PIDFileKiller{Path: garbage}).Kill(killCtx(t)); err == nil || errors.Is(err, ErrNoProcess) {
		t.Errorf("garbage pid file: %v", err)
	}
}

// Issue 26 hole 1: "no mysqld process" proves down only once the killer has
// seen mysqld in its own pid namespace; in another one mysqld is invisible.
func TestPIDFileKillerGoneNeedsASighting(t *testing.T) {
	cmd, pidFile := startSleep(t)
	proc := t.TempDir()
	entry := filepath.Join(proc, strconv.Itoa(cmd.Process.Pid))
	if err := os.MkdirAll(entry, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(entry, "comm"), []byte("mysqld\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	blind := &PIDFileKiller{Path: filepath.Join(t.TempDir(), "none.pid"), ProcDir: t.TempDir()}
	if blind.CanKill() || blind.Gone() {
		t.Error("a killer that never saw mysqld calls it gone")
	}
	k := &PIDFileKiller{Path: pidFile, ProcDir: proc}
	if k.Gone() {
		t.Fatal("gone before any sighting")
	}
	if !k.CanKill() {
		t.Fatal("CanKill false for a live process named mysqld")
	}
	if k.Gone() {
		t.Fatal("gone while a mysqld process is listed")
	}
	if err := os.RemoveAll(entry); err != nil {
		t.Fatal(err)
	}
	if !k.Gone() {
		t.Error("not gone once no mysqld process is listed in the namespace it was seen in")
	}
}
