package testenv

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// HAProxyOptions configures StartHAProxy.
type HAProxyOptions struct {
	// Name labels the instance in logs and errors; defaults to "haproxy".
	Name string
	// Frontends names the listening addresses the configuration needs
	// (e.g. "writer", "reader"): each gets a free 127.0.0.1 port.
	Frontends []string
	// Config returns the haproxy.cfg text for the addresses picked
	// ("127.0.0.1:PORT" per frontend name). The text must have a global
	// section: StartHAProxy adds an admin-level runtime API socket to it
	// (Servers reads the check states through it).
	Config func(addrs map[string]string) string
}

// HAProxy is one haproxy started by StartHAProxy in the foreground (-db)
// with its configuration in its own record dir.
type HAProxy struct {
	Name   string
	Config string // path of the haproxy.cfg it runs
	Log    string // its stdout and stderr (alerts, warnings)

	addrs  map[string]string
	socket string
	dir    string

	mu   sync.Mutex
	proc *process
}

// HAProxyBinary returns the haproxy to run: $PATH's, else Debian's
// /usr/sbin/haproxy (a non-root $PATH may lack /usr/sbin); an error naming
// scripts/deps when neither exists.
func HAProxyBinary() (string, error) {
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return "/usr/sbin/haproxy", nil
	}
	return "", errors.New("haproxy not found in $PATH nor /usr/sbin: run scripts/deps (it installs Debian's haproxy)")
}

// CheckHAProxyConfig runs `haproxy -c -f path` and returns its output as
// the error when haproxy refuses the file.
func CheckHAProxyConfig(path string) error {
	bin, err := HAProxyBinary()
	if err != nil {
		return err
	}
	out, err := exec.Command(bin, "-c", "-f", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("haproxy -c -f %s: %w\n%s", path, err, out)
	}
	return nil
}

// StartHAProxy writes opts.Config to haproxy.cfg in a new record dir,
// checks it with haproxy -c, starts haproxy in the foreground and waits
// until every frontend accepts connections; stopped at t's cleanup.
func StartHAProxy(t T, opts HAProxyOptions) *HAProxy {
	t.Helper()
	skipIfShort(t)
	h, err := startHAProxy(t, opts)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return h
}

func startHAProxy(t T, opts HAProxyOptions) (*HAProxy, error) {
	if opts.Name == "" {
		opts.Name = "haproxy"
	}
	if opts.Config == nil || len(opts.Frontends) == 0 {
		return nil, fmt.Errorf("start %s: HAProxyOptions needs Config and at least one Frontends name", opts.Name)
	}
	bin, err := HAProxyBinary()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", opts.Name, err)
	}
	dir, err := newRunDir()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", opts.Name, err)
	}
	h := &HAProxy{Name: opts.Name, Config: filepath.Join(dir, "haproxy.cfg"), Log: filepath.Join(dir, "haproxy.log"),
		socket: filepath.Join(dir, "admin.sock"), dir: dir}
	t.Cleanup(h.cleanup)
	for attempt := 1; ; attempt++ {
		h.addrs = map[string]string{}
		for _, name := range opts.Frontends {
			port, err := pickPort()
			if err != nil {
				return nil, fmt.Errorf("start %s: %w", opts.Name, err)
			}
			h.addrs[name] = fmt.Sprintf("127.0.0.1:%d", port)
		}
		cfg, err := withAdminSocket(opts.Config(h.addrs), h.socket)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", opts.Name, err)
		}
		if err := os.WriteFile(h.Config, []byte(cfg), 0o644); err != nil {
			return nil, fmt.Errorf("start %s: %w", opts.Name, err)
		}
		// A refused file fails here with haproxy's own words, not as a
		// process that exited.
		if err := CheckHAProxyConfig(h.Config); err != nil {
			return nil, fmt.Errorf("start %s: %w", opts.Name, err)
		}
		err = h.start(bin)
		if err == nil {
			return h, nil
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			return nil, fmt.Errorf("start %s: %w", opts.Name, err)
		}
	}
}

// withAdminSocket adds "stats socket PATH level admin" as the first line of
// cfg's global section.
func withAdminSocket(cfg, socket string) (string, error) {
	lines := strings.Split(cfg, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == "global" {
			out := slices.Concat(lines[:i+1], []string{"    stats socket " + socket + " mode 600 level admin"}, lines[i+1:])
			return strings.Join(out, "\n"), nil
		}
	}
	return "", errors.New("the configuration has no global section (needed for the runtime API socket)")
}

func (h *HAProxy) start(bin string) error {
	_ = os.Truncate(h.Log, 0)
	// -db: foreground, no daemon fork, so the recorded pid is haproxy itself.
	p, err := startProcess("haproxy "+h.Name, h.Log, bin, "-db", "-f", h.Config)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.proc = p
	h.mu.Unlock()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if !p.running() {
			log := tailFile(h.Log, 20)
			if isPortInUseLog(log) {
				return fmt.Errorf("%w: %v", errPortTaken, h.addrs)
			}
			return fmt.Errorf("haproxy exited before it was ready: %s\n--- tail of %s ---\n%s", p.exitDescription(), h.Log, log)
		}
		ready := true
		for _, a := range h.addrs {
			c, err := net.DialTimeout("tcp", a, 250*time.Millisecond)
			if err != nil {
				ready = false
				break
			}
			c.Close()
		}
		if ready {
			if _, err := os.Stat(h.socket); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			_ = p.cleanup()
			return fmt.Errorf("haproxy not listening on %v within 15s\n%s", h.addrs, tailFile(h.Log, 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *HAProxy) cleanup() { removeDirOnceStopped(h.dir, h.current()) }

func (h *HAProxy) current() *process {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.proc
}

// Addr returns the "127.0.0.1:PORT" of the frontend name given in
// HAProxyOptions.Frontends ("" for an unknown name).
func (h *HAProxy) Addr(name string) string { return h.addrs[name] }

// Stop sends SIGTERM and waits for the exit.
func (h *HAProxy) Stop() error { return h.current().terminate(10 * time.Second) }

// Kill sends SIGKILL and waits for the exit.
func (h *HAProxy) Kill() error { return h.current().kill() }

// Running reports whether haproxy runs.
func (h *HAProxy) Running() bool { return h.current().running() }

// Runtime sends one command to the runtime API (e.g. "show stat") and
// returns its answer.
func (h *HAProxy) Runtime(ctx context.Context, cmd string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", h.socket)
	if err != nil {
		return "", fmt.Errorf("haproxy %s runtime API: %w", h.Name, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte(cmd + "\n")); err != nil {
		return "", fmt.Errorf("haproxy %s runtime API: send %q: %w", h.Name, cmd, err)
	}
	var b strings.Builder
	r := bufio.NewReader(c)
	if _, err := r.WriteTo(&b); err != nil {
		return "", fmt.Errorf("haproxy %s runtime API: read answer to %q: %w", h.Name, cmd, err)
	}
	return b.String(), nil
}

// Servers returns the check status of every server of backend ("UP",
// "DOWN", "UP 1/2", "MAINT", ...) from the runtime API's "show stat".
func (h *HAProxy) Servers(ctx context.Context, backend string) (map[string]string, error) {
	out, err := h.Runtime(ctx, "show stat")
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(out, "# ")))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil || len(recs) == 0 {
		return nil, fmt.Errorf("haproxy %s: parse show stat: %v", h.Name, err)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	px, sv, st := col["pxname"], col["svname"], col["status"]
	if st == 0 {
		return nil, fmt.Errorf("haproxy %s: show stat has no status column: %q", h.Name, recs[0])
	}
	states := map[string]string{}
	for _, rec := range recs[1:] {
		if len(rec) <= st || rec[px] != backend || rec[sv] == "BACKEND" || rec[sv] == "FRONTEND" {
			continue
		}
		states[rec[sv]] = rec[st]
	}
	if len(states) == 0 {
		return nil, fmt.Errorf("haproxy %s: no server in backend %q", h.Name, backend)
	}
	return states, nil
}

// Up returns the servers of backend whose check passes (status "UP", also
// "UP n/m" while a failing check has not reached fall yet), sorted.
func (h *HAProxy) Up(ctx context.Context, backend string) ([]string, error) {
	states, err := h.Servers(ctx, backend)
	if err != nil {
		return nil, err
	}
	var up []string
	for name, s := range states {
		if s == "UP" || strings.HasPrefix(s, "UP ") {
			up = append(up, name)
		}
	}
	slices.Sort(up)
	return up, nil
}
