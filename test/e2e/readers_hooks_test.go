package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/hooks"
	"github.com/failoverd/failoverd/test/testenv"
)

// The reader hook examples of deploy/hooks against what they drive.
// haproxy-readers.sh runs here against Debian's haproxy (scripts/deps
// installs it). proxysql-readers.sh keeps its stand-in client test only
// (hooks/scripts_test.go): Debian ships no proxysql package (`apt-cache
// policy proxysql` has no candidate), so no real ProxySQL can run here.

// shippedReadersHook is deploy/hooks/haproxy-readers.sh, relative to this
// package.
const shippedReadersHook = "../../deploy/hooks/haproxy-readers.sh"

// readersBackend is the reader backend the hook drives in these tests.
const readersBackend = "mysql_readers"

// hookedServer is one server line of hookedReadersHAProxy's backend.
type hookedServer struct{ name, addr string }

// hookedReadersHAProxy starts a real HAProxy whose backend mysql_readers
// (frontend "reader") has one server per entry, WITHOUT health checks, so
// only its runtime API moves them: what deploy/hooks/haproxy-readers.sh
// sets is all that decides. It answers the runtime API at level admin on
// TCP (Addr("runtime")) and, when unixSock is not "", on that unix socket.
func hookedReadersHAProxy(t testing.TB, servers []hookedServer, unixSock string) *testenv.HAProxy {
	t.Helper()
	return testenv.StartHAProxy(t, testenv.HAProxyOptions{Name: "haproxy-readers", Frontends: []string{"reader", "runtime"},
		Config: func(addrs map[string]string) string {
			var b strings.Builder
			fmt.Fprintf(&b, "global\n    maxconn 200\n    stats socket ipv4@%s level admin\n", addrs["runtime"])
			if unixSock != "" {
				fmt.Fprintf(&b, "    stats socket %s mode 600 level admin\n", unixSock)
			}
			fmt.Fprintf(&b, "defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 1m\n    timeout server 1m\n"+
				"frontend reader\n    bind %s\n    default_backend %s\nbackend %s\n", addrs["reader"], readersBackend, readersBackend)
			for _, s := range servers {
				fmt.Fprintf(&b, "    server %s %s\n", s.name, s.addr)
			}
			return b.String()
		}})
}

// backendStates returns the servers of the reader backend as "name=STATUS"
// (show stat's status: "no check" while served, "MAINT" once taken out),
// sorted.
func backendStates(t testing.TB, h *testenv.HAProxy) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	states, err := h.Servers(ctx, readersBackend)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for name, s := range states {
		out = append(out, name+"="+s)
	}
	slices.Sort(out)
	return out
}

// bannerAddr listens on 127.0.0.1 and writes name and a newline to every
// connection, then holds it open until the client closes it or the test
// ends: a server that says who answered.
func bannerAddr(t testing.TB, name string) string {
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
				_, _ = io.Copy(io.Discard, c) // held until either side closes
			}()
		}
	}()
	return l.Addr().String()
}

// dialBanner connects through addr and returns who answered and the open
// connection; "" (and a closed connection) when HAProxy closed it without
// a server (none in service).
func dialBanner(t testing.TB, addr string) (string, net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		c.Close()
		return "", c
	}
	_ = c.SetDeadline(time.Time{})
	return strings.TrimSuffix(line, "\n"), c
}

// servedBy opens n connections through the reader frontend and returns
// the distinct servers that answered ("" for a connection no server took).
func servedBy(t testing.TB, h *testenv.HAProxy, n int) []string {
	t.Helper()
	var out []string
	for range n {
		who, c := dialBanner(t, h.Addr("reader"))
		c.Close()
		if !slices.Contains(out, who) {
			out = append(out, who)
		}
	}
	slices.Sort(out)
	return out
}

// readerHookRunner runs deploy/hooks/haproxy-readers.sh with conf as a
// failoverd command hook on the reader events, through the hooks package
// the daemon uses (same argv, stdin payload and FAILOVERD_* environment);
// fire returns the run's result.
func readerHookRunner(t testing.TB, conf string) func(ev hooks.Event) hooks.Result {
	t.Helper()
	script, err := filepath.Abs(shippedReadersHook)
	if err != nil {
		t.Fatal(err)
	}
	r := hooks.New("orders", []configs.Hook{{Name: "haproxy-readers", Events: []string{configs.HookReaderAdded, configs.HookReaderRemoved},
		Command: []string{script, conf}, Timeout: 10 * time.Second}}, nil)
	results := make(chan hooks.Result, 16)
	r.SetOnResult(func(res hooks.Result) { results <- res })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Close(ctx)
	})
	return func(ev hooks.Event) hooks.Result {
		t.Helper()
		ev.Group, ev.Epoch, ev.To, ev.Reason, ev.At = "orders", 7, "site0", ev.Type, time.Now()
		r.Fire(ev)
		select {
		case res := <-results:
			return res
		case <-time.After(30 * time.Second):
			t.Fatalf("the reader hook did not finish %s %s within 30s", ev.Type, ev.Site)
			return hooks.Result{}
		}
	}
}

// writeHookConf writes the hook's CONFIG file (KEY=VALUE lines) and
// returns its path.
func writeHookConf(t testing.TB, path string, settings ...string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(settings, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHAProxyReadersHookSetsARealHAProxysServerStates runs the shipped
// deploy/hooks/haproxy-readers.sh as failoverd runs a command hook, on
// reader-added and reader-removed events, against Debian's haproxy, over
// both of its transports (socat to a unix socket, bash's /dev/tcp to a TCP
// one). It guards that the real runtime API ends up with exactly the
// event's reader set in service (every other mapped server in MAINT) and
// that clients through the frontend reach only those readers; that
// HAPROXY_SHUTDOWN_SESSIONS=1 closes a session open to a server taken out;
// that an empty set takes every server out; and that the real HAProxy's
// refusal ("No such server.") fails the run before any reader is made ready.
func TestHAProxyReadersHookSetsARealHAProxysServerStates(t *testing.T) {
	for _, transport := range []string{"socat", "devtcp"} {
		t.Run(transport, func(t *testing.T) {
			// A short path: a unix socket path has at most 107 bytes.
			dir, err := os.MkdirTemp("", "rhook")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			sock := filepath.Join(dir, "admin.sock")
			servers := []hookedServer{{"site0", bannerAddr(t, "site0")}, {"db1", bannerAddr(t, "db1")}, {"site2", bannerAddr(t, "site2")}}
			h := hookedReadersHAProxy(t, servers, sock)
			socket := h.Addr("runtime")
			if transport == "socat" {
				socket = sock
			}
			// site0 is mapped too: includePrimary may make the primary a reader.
			conf := filepath.Join(dir, "readers.conf")
			writeHookConf(t, conf, "# as an operator would write it", "HAPROXY_SOCKET="+socket, "HAPROXY_BACKEND="+readersBackend,
				"HAPROXY_SERVERS=site0 site1=db1 site2", "HAPROXY_TRANSPORT="+transport, "HAPROXY_SHUTDOWN_SESSIONS=1")
			fire := readerHookRunner(t, conf)
			step := func(ev hooks.Event, wantStates, wantServed []string) {
				t.Helper()
				if res := fire(ev); !res.OK {
					t.Fatalf("%s %s (readers %v): %+v, want OK", ev.Type, ev.Site, ev.Readers, res)
				}
				if got := backendStates(t, h); !slices.Equal(got, wantStates) {
					t.Fatalf("after %s %s (readers %v): haproxy has %v, want %v", ev.Type, ev.Site, ev.Readers, got, wantStates)
				}
				if got := servedBy(t, h, 12); !slices.Equal(got, wantServed) {
					t.Fatalf("after %s %s (readers %v): connections through the reader frontend reached %q, want %q", ev.Type, ev.Site, ev.Readers, got, wantServed)
				}
			}
			if got, want := backendStates(t, h), []string{"db1=no check", "site0=no check", "site2=no check"}; !slices.Equal(got, want) {
				t.Fatalf("haproxy starts with %v, want %v", got, want)
			}

			step(hooks.Event{Type: configs.HookReaderAdded, Site: "site1", Readers: []string{"site1"}},
				[]string{"db1=no check", "site0=MAINT", "site2=MAINT"}, []string{"db1"})
			step(hooks.Event{Type: configs.HookReaderAdded, Site: "site2", Readers: []string{"site1", "site2"}},
				[]string{"db1=no check", "site0=MAINT", "site2=no check"}, []string{"db1", "site2"})

			// A session open to db1 while site1 leaves is closed by HAProxy.
			var held net.Conn
			for range 20 {
				who, c := dialBanner(t, h.Addr("reader"))
				if who == "db1" {
					held = c
					break
				}
				c.Close()
			}
			if held == nil {
				t.Fatal("no connection through the reader frontend reached db1 in 20 tries")
			}
			defer held.Close()
			step(hooks.Event{Type: configs.HookReaderRemoved, Site: "site1", Readers: []string{"site2"}},
				[]string{"db1=MAINT", "site0=MAINT", "site2=no check"}, []string{"site2"})
			_ = held.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := held.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the session open to db1 when site1 left is still open (read %d bytes, %v): HAPROXY_SHUTDOWN_SESSIONS=1 did not close it", n, err)
			}

			step(hooks.Event{Type: configs.HookReaderRemoved, Site: "site2", Readers: []string{}},
				[]string{"db1=MAINT", "site0=MAINT", "site2=MAINT"}, []string{""})

			// A server HAProxy does not have: its own refusal fails the run,
			// and nothing is made ready after it (db1 stays out).
			writeHookConf(t, conf, "HAPROXY_SOCKET="+socket, "HAPROXY_BACKEND="+readersBackend,
				"HAPROXY_SERVERS=site0 site1=db1 site2 site3=db3", "HAPROXY_TRANSPORT="+transport)
			res := fire(hooks.Event{Type: configs.HookReaderAdded, Site: "site1", Readers: []string{"site1"}})
			if res.OK || !strings.Contains(res.Err, "refused 'set server "+readersBackend+"/db3 state maint': No such server.") {
				t.Fatalf("a server haproxy lacks: %+v, want the run failed with haproxy's own refusal", res)
			}
			if got, want := backendStates(t, h), []string{"db1=MAINT", "site0=MAINT", "site2=MAINT"}; !slices.Equal(got, want) {
				t.Fatalf("after a refused run: haproxy has %v, want %v (no reader made ready)", got, want)
			}

			// The next event, with the mapping fixed, makes the failed run good.
			writeHookConf(t, conf, "HAPROXY_SOCKET="+socket, "HAPROXY_BACKEND="+readersBackend,
				"HAPROXY_SERVERS=site0 site1=db1 site2", "HAPROXY_TRANSPORT="+transport)
			step(hooks.Event{Type: configs.HookReaderAdded, Site: "site2", Readers: []string{"site1", "site2"}},
				[]string{"db1=no check", "site0=MAINT", "site2=no check"}, []string{"db1", "site2"})
		})
	}
}
