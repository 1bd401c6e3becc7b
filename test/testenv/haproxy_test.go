package testenv

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// bannerServer accepts TCP connections on 127.0.0.1 and writes name and a
// newline to each, then keeps it open until the client or the test closes.
func bannerServer(t *testing.T, name string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintln(c, name)
				_, _ = bufio.NewReader(c).ReadString('\n') // held until closed
			}()
		}
	}()
	return l.Addr().String()
}

// healthServer answers GET /health with 200 while ok holds, 503 otherwise.
func healthServer(t *testing.T, ok *atomic.Bool) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" && ok.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// TestHAProxyFollowsHealthChecksAndLeavesNothing guards StartHAProxy: the
// configuration lands in the record dir with the free port it picked,
// traffic goes only to servers whose HTTP check passes, Up reads the check
// states through the runtime API, a server marked down has its sessions
// closed (on-marked-down shutdown-sessions), and Stop plus cleanup leave
// no process and no dir.
func TestHAProxyFollowsHealthChecksAndLeavesNothing(t *testing.T) {
	var okA, okB atomic.Bool
	okA.Store(true)
	a, b := bannerServer(t, "a"), bannerServer(t, "b")
	ha, hb := healthServer(t, &okA), healthServer(t, &okB)
	port := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
	h := StartHAProxy(t, HAProxyOptions{Frontends: []string{"front"}, Config: func(addrs map[string]string) string {
		return fmt.Sprintf(`global
    maxconn 100
defaults
    mode tcp
    timeout connect 1s
    timeout client 1m
    timeout server 1m
    timeout check 500ms
frontend front
    bind %s
    default_backend pool
backend pool
    option httpchk GET /health
    http-check expect status 200
    default-server inter 200ms fastinter 100ms downinter 100ms rise 1 fall 1 on-marked-down shutdown-sessions
    server a %s check port %s
    server b %s check port %s
`, addrs["front"], a, port(ha), b, port(hb))
	}})
	if cfg, err := os.ReadFile(h.Config); err != nil || !strings.Contains(string(cfg), "bind "+h.Addr("front")+"\n") || filepath.Dir(h.Config) != h.dir {
		t.Fatalf("config %s (in record dir %s) lacks bind %s: %v\n%s", h.Config, h.dir, h.Addr("front"), err, cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitUp := func(want ...string) {
		t.Helper()
		var got []string
		var err error
		for ctx.Err() == nil {
			if got, err = h.Up(ctx, "pool"); err == nil && slices.Equal(got, want) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("servers up %v (%v), want %v", got, err, want)
	}
	banner := func() (string, net.Conn) {
		t.Helper()
		c, err := net.DialTimeout("tcp", h.Addr("front"), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatalf("read banner through haproxy: %v", err)
		}
		return line[:len(line)-1], c
	}
	waitUp("a")
	got, held := banner()
	if got != "a" {
		t.Fatalf("connected to %q, want a (the only server passing)", got)
	}
	okB.Store(true)
	okA.Store(false)
	waitUp("b")
	// The session held to a must be closed once a is marked down.
	_ = held.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := held.Read(make([]byte, 1)); err == nil {
		t.Fatalf("session to a still open after a was marked down")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("session to a not closed within 5s of a being marked down")
	}
	held.Close()
	if got, c := banner(); got != "b" {
		t.Fatalf("connected to %q, want b", got)
	} else {
		c.Close()
	}

	p := h.current()
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	if procAlive(p.pid()) {
		t.Fatalf("haproxy pid %d alive after Stop", p.pid())
	}
	h.cleanup()
	if _, err := os.Stat(h.dir); !os.IsNotExist(err) {
		t.Fatalf("record dir %s left after cleanup: %v", h.dir, err)
	}
}

// TestHAProxyRefusesAConfigWithoutGlobal guards the runtime API socket
// injection: a configuration with no global section is an error naming
// what is missing, before anything starts.
func TestHAProxyRefusesAConfigWithoutGlobal(t *testing.T) {
	if _, err := withAdminSocket("defaults\n    mode tcp\n", "/x.sock"); err == nil {
		t.Fatal("no error for a config without a global section")
	}
	cfg, err := withAdminSocket("global\n    maxconn 1\ndefaults\n", "/x.sock")
	if err != nil || cfg != "global\n    stats socket /x.sock mode 600 level admin\n    maxconn 1\ndefaults\n" {
		t.Fatalf("withAdminSocket: %q, %v", cfg, err)
	}
}
