// Package procgrouptest holds what the tests of procgroup and of its callers
// (hooks, reclone) share: a slog handler that keeps every record, bash
// scripts written to a temp dir, and checks that a process the command
// started is gone.
package procgrouptest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Record is one captured log record, attributes flattened to strings.
type Record struct {
	Msg   string
	Attrs map[string]string
}

// Capture is a slog.Handler keeping every record. Copies made by WithAttrs
// share everything but their attributes, so records logged through a
// logger.With(...) land in the same list.
type Capture struct {
	*captured
	attrs []slog.Attr
}

type captured struct {
	mu       sync.Mutex
	records  []Record
	onRecord func(Record)
}

// NewCapture returns an empty Capture.
func NewCapture() *Capture { return &Capture{captured: &captured{}} }

// Enabled keeps every level.
func (h *Capture) Enabled(context.Context, slog.Level) bool { return true }

// WithGroup ignores groups: the attributes stay flat.
func (h *Capture) WithGroup(string) slog.Handler { return h }

// WithAttrs returns a copy that adds as to each record.
func (h *Capture) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr{}, h.attrs...), as...)
	return &c
}

// Handle keeps r and passes it to the OnRecord function, if any.
func (h *Capture) Handle(_ context.Context, r slog.Record) error {
	rec := Record{Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, rec)
	on := h.onRecord
	h.mu.Unlock()
	if on != nil {
		on(rec)
	}
	return nil
}

// OnRecord makes f see every record from now on, as it is logged.
func (h *Capture) OnRecord(f func(Record)) {
	h.mu.Lock()
	h.onRecord = f
	h.mu.Unlock()
}

// All returns every record so far, in the order they were logged.
func (h *Capture) All() []Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Record{}, h.records...)
}

// Find returns the records with message msg.
func (h *Capture) Find(msg string) []Record {
	var out []Record
	for _, r := range h.All() {
		if r.Msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// Script writes body as an executable bash script into a temp dir and
// returns its path.
func Script(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hook.sh")
	if err := os.WriteFile(p, []byte("#!/bin/bash\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Gone reports whether pid has exited (absent, or a zombie nobody reaped).
func Gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// RequireGone fails unless pid exits soon: SIGKILL is delivered
// asynchronously, so allow the kernel a moment.
func RequireGone(t testing.TB, what string, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !Gone(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs after the command finished", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ReadPid reads the pid a script wrote to path (echo $! >"$PIDFILE").
func ReadPid(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the command did not record its grandchild's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
