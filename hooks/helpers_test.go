package hooks

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

	"github.com/failoverd/failoverd/configs"
)

// record is one captured log record, attributes flattened to strings.
type record struct {
	msg   string
	attrs map[string]string
}

// capture is a slog.Handler keeping every record; onRecord, when set, sees
// each record as it is logged.
// WithAttrs copies share everything but attrs.
type capture struct {
	*captured
	attrs []slog.Attr
}

type captured struct {
	mu       sync.Mutex
	records  []record
	onRecord func(record)
}

func newCapture() *capture { return &capture{captured: &captured{}} }

func (h *capture) Enabled(context.Context, slog.Level) bool { return true }
func (h *capture) WithGroup(string) slog.Handler            { return h }
func (h *capture) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr{}, h.attrs...), as...)
	return &c
}

func (h *capture) Handle(_ context.Context, r slog.Record) error {
	rec := record{msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
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

func (h *capture) setOnRecord(f func(record)) {
	h.mu.Lock()
	h.onRecord = f
	h.mu.Unlock()
}

func (h *capture) find(msg string) []record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []record
	for _, r := range h.records {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// testRunner returns a Runner whose every result is sent on the returned
// channel; the runner is closed (killing what still runs) at the end of the
// test.
func testRunner(t *testing.T, hooks ...configs.Hook) (*Runner, *capture, chan Result) {
	t.Helper()
	c := newCapture()
	r := New("orders", hooks, slog.New(c))
	r.grace = 100 * time.Millisecond
	r.backoff = 10 * time.Millisecond
	results := make(chan Result, 100)
	r.SetOnResult(func(res Result) { results <- res })
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r.Close(ctx)
	})
	return r, c, results
}

// next returns the next result (the test's deadline bounds the wait).
func next(t *testing.T, results <-chan Result) Result {
	t.Helper()
	return <-results
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

// gone reports whether pid has exited (a zombie counts as exited).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
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
			t.Fatalf("%s (pid %d) still runs after the hook finished", what, pid)
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
