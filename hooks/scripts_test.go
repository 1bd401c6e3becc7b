package hooks

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/failoverd/failoverd/configs"
)

const (
	proxysqlScript        = "../deploy/hooks/proxysql.sh"
	haproxyScript         = "../deploy/hooks/haproxy.sh"
	proxysqlReadersScript = "../deploy/hooks/proxysql-readers.sh"
	haproxyReadersScript  = "../deploy/hooks/haproxy-readers.sh"
)

// The example scripts must parse; shellcheck runs too where it is installed.
func TestScriptsParse(t *testing.T) {
	scripts := []string{proxysqlScript, haproxyScript, proxysqlReadersScript, haproxyReadersScript}
	for _, s := range scripts {
		if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
	}
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Logf("shellcheck not installed: only bash -n checked")
		return
	}
	if out, err := exec.Command(sc, scripts...).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// runScript runs an example script as failoverd would (a command hook on
// every event) for ev and returns the Result.
func runScript(t *testing.T, ev Event, command ...string) Result {
	t.Helper()
	abs, err := filepath.Abs(command[0])
	if err != nil {
		t.Fatal(err)
	}
	command[0] = abs
	r, _, results := testRunner(t, configs.Hook{Name: "example", Events: configs.HookEvents(), Command: command})
	r.Fire(ev)
	return next(t, results)
}

// stubClient writes a stand-in for the mysql client that appends its argv,
// MYSQL_PWD and stdin to the returned file and prints output (the count the
// script's check reads).
func stubClient(t *testing.T, output string) (client, recordFile string) {
	t.Helper()
	dir := t.TempDir()
	recordFile = filepath.Join(dir, "calls")
	client = filepath.Join(dir, "mysql")
	body := fmt.Sprintf(`#!/bin/bash
{ printf 'argv:'; printf ' %%s' "$@"; printf '\nMYSQL_PWD=%%s\n' "${MYSQL_PWD-}"; cat; printf 'end\n'; } >>%q
printf '%%s\n' %q
`, recordFile, output)
	if err := os.WriteFile(client, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return client, recordFile
}

func readCalls(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestProxySQLHookMovesTheWriter(t *testing.T) {
	client, calls := stubClient(t, "1")
	t.Setenv("PROXYSQL_CLIENT", client)
	t.Setenv("PROXYSQL_SITES", "site0=10.0.0.10:3306 site1=10.0.0.11:3306,site2=db2.example.net:3307")
	t.Setenv("PROXYSQL_PASSWORD", "admin-secret")
	res := runScript(t, promoted, proxysqlScript)
	if !res.OK {
		t.Fatalf("result %+v, want OK", res)
	}
	want := `argv: --host=127.0.0.1 --port=6032 --user=admin --protocol=TCP --connect-timeout=5 --batch --skip-column-names
MYSQL_PWD=admin-secret
UPDATE mysql_servers SET hostgroup_id=20 WHERE hostgroup_id=10 AND hostname='10.0.0.10' AND port=3306;
UPDATE mysql_servers SET hostgroup_id=20 WHERE hostgroup_id=10 AND hostname='db2.example.net' AND port=3307;
UPDATE mysql_servers SET hostgroup_id=10 WHERE hostgroup_id=20 AND hostname='10.0.0.11' AND port=3306;
LOAD MYSQL SERVERS TO RUNTIME;
SAVE MYSQL SERVERS TO DISK;
SELECT COUNT(*) FROM runtime_mysql_servers WHERE hostgroup_id=10 AND hostname='10.0.0.11' AND port=3306;
end
`
	if got := readCalls(t, calls); got != want {
		t.Fatalf("ProxySQL admin got:\n%s\nwant:\n%s", got, want)
	}
}

func TestProxySQLHookReadsItsConfigFile(t *testing.T) {
	client, calls := stubClient(t, "1")
	conf := filepath.Join(t.TempDir(), "proxysql.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`# orders group
PROXYSQL_CLIENT=%s
PROXYSQL_ADMIN=192.0.2.5:16032
PROXYSQL_USER=radmin
PROXYSQL_DEFAULTS_FILE=/etc/failoverd/proxysql-admin.cnf
PROXYSQL_WRITER_HOSTGROUP=1   # writer
PROXYSQL_READER_HOSTGROUP=2
PROXYSQL_SITES=site0=10.0.0.10:3306 site1=10.0.0.11:3306
`, client)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PROXYSQL_SITES", "site0=wrong:1 site1=wrong:2") // the file wins
	res := runScript(t, Event{Type: configs.HookAfterPromote, Epoch: 9, From: "site1", To: "site0"}, proxysqlScript, conf)
	if !res.OK {
		t.Fatalf("result %+v, want OK", res)
	}
	want := `argv: --defaults-extra-file=/etc/failoverd/proxysql-admin.cnf --host=192.0.2.5 --port=16032 --user=radmin --protocol=TCP --connect-timeout=5 --batch --skip-column-names
MYSQL_PWD=
UPDATE mysql_servers SET hostgroup_id=2 WHERE hostgroup_id=1 AND hostname='10.0.0.11' AND port=3306;
UPDATE mysql_servers SET hostgroup_id=1 WHERE hostgroup_id=2 AND hostname='10.0.0.10' AND port=3306;
LOAD MYSQL SERVERS TO RUNTIME;
SAVE MYSQL SERVERS TO DISK;
SELECT COUNT(*) FROM runtime_mysql_servers WHERE hostgroup_id=1 AND hostname='10.0.0.10' AND port=3306;
end
`
	if got := readCalls(t, calls); got != want {
		t.Fatalf("ProxySQL admin got:\n%s\nwant:\n%s", got, want)
	}
}

func TestProxySQLHookRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, sites, output string
		ev                  Event
		wantOK              bool
		wantCalled          bool
		wantErr             string
	}{
		{name: "other event is ignored", sites: "site0=h0:1 site1=h1:1", ev: Event{Type: configs.HookBeforePromote, To: "site1"}, wantOK: true},
		{name: "unknown new primary", sites: "site0=h0:1", ev: promoted, wantErr: "new primary site1 is not in PROXYSQL_SITES"},
		{name: "quote in a host", sites: "site0=h0:1 site1=h'1:1", ev: promoted, wantErr: "is not HOST:PORT"},
		{name: "no sites", ev: promoted, wantErr: "PROXYSQL_SITES is empty"},
		{name: "writer not at runtime", sites: "site0=h0:1 site1=h1:1", output: "0", ev: promoted, wantCalled: true, wantErr: "0 times, want once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			output := tc.output
			if output == "" {
				output = "1"
			}
			client, calls := stubClient(t, output)
			t.Setenv("PROXYSQL_CLIENT", client)
			t.Setenv("PROXYSQL_SITES", tc.sites)
			res := runScript(t, tc.ev, proxysqlScript)
			if res.OK != tc.wantOK || !strings.Contains(res.Err, tc.wantErr) {
				t.Errorf("result %+v, want OK=%v and Err containing %q", res, tc.wantOK, tc.wantErr)
			}
			if called := readCalls(t, calls) != ""; called != tc.wantCalled {
				t.Errorf("client called: %v, want %v", called, tc.wantCalled)
			}
		})
	}
}

// runtimeAPI is a stand-in for HAProxy's runtime API on TCP: it records each
// command line and answers like HAProxy in non-interactive mode (the
// command's output, then an empty line, then it closes the connection).
type runtimeAPI struct {
	ln     net.Listener
	answer func(cmd string) string // output of a command; "" is success
	mu     sync.Mutex
	cmds   []string
	wg     sync.WaitGroup
}

func newRuntimeAPI(t *testing.T, answer func(string) string) *runtimeAPI {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &runtimeAPI{ln: ln, answer: answer}
	a.wg.Add(1)
	go a.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		a.wg.Wait()
	})
	return a
}

func (a *runtimeAPI) serve() {
	defer a.wg.Done()
	for {
		conn, err := a.ln.Accept()
		if err != nil {
			return
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err == nil {
			cmd := strings.TrimSuffix(line, "\n")
			a.mu.Lock()
			a.cmds = append(a.cmds, cmd)
			a.mu.Unlock()
			_, _ = conn.Write([]byte(a.answer(cmd) + "\n"))
		}
		_ = conn.Close()
	}
}

func (a *runtimeAPI) commands() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.cmds)
}

func transports(t *testing.T) []string {
	if _, err := exec.LookPath("socat"); err != nil {
		t.Logf("socat not installed: only bash's /dev/tcp tested")
		return []string{"devtcp"}
	}
	return []string{"socat", "devtcp"}
}

func TestHAProxyHookSetsServerStates(t *testing.T) {
	for _, transport := range transports(t) {
		for _, shutdown := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/shutdown=%v", transport, shutdown), func(t *testing.T) {
				api := newRuntimeAPI(t, func(string) string { return "" })
				t.Setenv("HAPROXY_SOCKET", api.ln.Addr().String())
				t.Setenv("HAPROXY_BACKEND", "mysql_writer")
				t.Setenv("HAPROXY_SERVERS", "site0=db0 site1=db1,site2")
				t.Setenv("HAPROXY_TRANSPORT", transport)
				want := []string{"set server mysql_writer/db0 state maint", "set server mysql_writer/site2 state maint", "set server mysql_writer/db1 state ready"}
				if shutdown {
					t.Setenv("HAPROXY_SHUTDOWN_SESSIONS", "1")
					want = []string{
						"set server mysql_writer/db0 state maint", "shutdown sessions server mysql_writer/db0",
						"set server mysql_writer/site2 state maint", "shutdown sessions server mysql_writer/site2",
						"set server mysql_writer/db1 state ready",
					}
				}
				res := runScript(t, promoted, haproxyScript)
				if !res.OK {
					t.Fatalf("result %+v, want OK", res)
				}
				if got := api.commands(); !slices.Equal(got, want) {
					t.Fatalf("runtime API got %q, want %q", got, want)
				}
			})
		}
	}
}

func TestHAProxyHookStopsAtARefusal(t *testing.T) {
	api := newRuntimeAPI(t, func(cmd string) string {
		if strings.Contains(cmd, "/db2 ") {
			return "No such server.\n"
		}
		return ""
	})
	conf := filepath.Join(t.TempDir(), "haproxy.conf")
	if err := os.WriteFile(conf, []byte("HAPROXY_SOCKET="+api.ln.Addr().String()+"\nHAPROXY_BACKEND=mysql\nHAPROXY_SERVERS=site0=db0 site1=db1 site2=db2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := runScript(t, promoted, haproxyScript, conf)
	if res.OK || !strings.Contains(res.Err, "refused 'set server mysql/db2 state maint': No such server.") {
		t.Fatalf("result %+v, want the refusal named", res)
	}
	// The new primary is not made ready while another server may still be.
	want := []string{"set server mysql/db0 state maint", "set server mysql/db2 state maint"}
	if got := api.commands(); !slices.Equal(got, want) {
		t.Fatalf("runtime API got %q, want %q", got, want)
	}
}

func TestHAProxyHookIgnoresOtherEventsAndRefusesUnknownSites(t *testing.T) {
	api := newRuntimeAPI(t, func(string) string { return "" })
	t.Setenv("HAPROXY_SOCKET", api.ln.Addr().String())
	t.Setenv("HAPROXY_BACKEND", "mysql")
	t.Setenv("HAPROXY_SERVERS", "site0=db0")
	if res := runScript(t, Event{Type: configs.HookSplitBrain, Site: "site0"}, haproxyScript); !res.OK {
		t.Errorf("split-brain: %+v, want OK (ignored)", res)
	}
	if res := runScript(t, promoted, haproxyScript); res.OK || !strings.Contains(res.Err, "new primary site1 is not in HAPROXY_SERVERS") {
		t.Errorf("unknown site: %+v, want refused", res)
	}
	if got := api.commands(); len(got) != 0 {
		t.Errorf("runtime API got %q, want nothing", got)
	}
}

// readerEvent is a reader-removed event: site1 left, site2 and site3 remain.
var readerEvent = Event{Type: configs.HookReaderRemoved, Group: "orders", Epoch: 7, To: "site0", Site: "site1",
	Reason: configs.HookReaderRemoved, Message: "site1: lag 12s over maxLag 5s", Readers: []string{"site2", "site3"}}

// TestHAProxyReadersHookServesExactlyTheReaderSet guards the reader example
// for HAProxy: every mapped site out of the set goes to maint first (with its
// sessions shut when asked), then every reader is made ready; other events
// are ignored; an empty set takes every server out.
func TestHAProxyReadersHookServesExactlyTheReaderSet(t *testing.T) {
	for _, transport := range transports(t) {
		t.Run(transport, func(t *testing.T) {
			api := newRuntimeAPI(t, func(string) string { return "" })
			t.Setenv("HAPROXY_SOCKET", api.ln.Addr().String())
			t.Setenv("HAPROXY_BACKEND", "mysql_readers")
			t.Setenv("HAPROXY_SERVERS", "site1=db1 site2=db2,site3")
			t.Setenv("HAPROXY_TRANSPORT", transport)
			t.Setenv("HAPROXY_SHUTDOWN_SESSIONS", "1")
			if res := runScript(t, readerEvent, haproxyReadersScript); !res.OK {
				t.Fatalf("result %+v, want OK", res)
			}
			want := []string{"set server mysql_readers/db1 state maint", "shutdown sessions server mysql_readers/db1",
				"set server mysql_readers/db2 state ready", "set server mysql_readers/site3 state ready"}
			if got := api.commands(); !slices.Equal(got, want) {
				t.Fatalf("runtime API got %q, want %q", got, want)
			}
			if res := runScript(t, promoted, haproxyReadersScript); !res.OK || len(api.commands()) != 4 {
				t.Fatalf("after-promote: %+v, commands %q: want it ignored", res, api.commands())
			}
			empty := readerEvent
			empty.Readers = nil
			if res := runScript(t, empty, haproxyReadersScript); !res.OK {
				t.Fatalf("empty set: %+v", res)
			}
			if got := api.commands()[4:]; len(got) != 6 || !strings.HasSuffix(got[4], "site3 state maint") {
				t.Fatalf("empty set: runtime API got %q, want every server in maint", got)
			}
		})
	}
}

// TestHAProxyReadersHookReportsAnUnmappedReaderAfterSettingTheOthers guards
// that a reader missing from HAPROXY_SERVERS fails the run, but only once
// the mapped servers are set (a lagging one still leaves), and that a
// refused command stops the run.
func TestHAProxyReadersHookReportsAnUnmappedReaderAfterSettingTheOthers(t *testing.T) {
	api := newRuntimeAPI(t, func(cmd string) string {
		if strings.Contains(cmd, "/bad ") {
			return "No such server.\n"
		}
		return ""
	})
	t.Setenv("HAPROXY_SOCKET", api.ln.Addr().String())
	t.Setenv("HAPROXY_BACKEND", "mysql_readers")
	t.Setenv("HAPROXY_SERVERS", "site1=db1 site2=db2")
	res := runScript(t, readerEvent, haproxyReadersScript)
	if res.OK || !strings.Contains(res.Err, "reader site3 is not in HAPROXY_SERVERS") {
		t.Fatalf("result %+v, want site3 reported", res)
	}
	if got, want := api.commands(), []string{"set server mysql_readers/db1 state maint", "set server mysql_readers/db2 state ready"}; !slices.Equal(got, want) {
		t.Fatalf("runtime API got %q, want %q", got, want)
	}
	t.Setenv("HAPROXY_SERVERS", "site1=bad site2=db2 site3=db3")
	res = runScript(t, readerEvent, haproxyReadersScript)
	if res.OK || !strings.Contains(res.Err, "refused 'set server mysql_readers/bad state maint'") {
		t.Fatalf("result %+v, want the refusal named", res)
	}
	if got := api.commands(); len(got) != 3 {
		t.Fatalf("runtime API got %q: no reader may be made ready after a removal failed", got)
	}
}

// TestProxySQLReadersHookSetsTheReadHostgroup guards the reader example for
// ProxySQL: OFFLINE_SOFT for every mapped non-reader, then ONLINE for the
// readers, in the read hostgroup only, loaded and saved, and the runtime
// count of ONLINE servers checked against the set.
func TestProxySQLReadersHookSetsTheReadHostgroup(t *testing.T) {
	client, calls := stubClient(t, "2")
	t.Setenv("PROXYSQL_CLIENT", client)
	t.Setenv("PROXYSQL_SITES", "site1=10.0.0.11:3306 site2=10.0.0.12:3306,site3=db3.example.net:3307")
	t.Setenv("PROXYSQL_PASSWORD", "admin-secret")
	res := runScript(t, readerEvent, proxysqlReadersScript)
	if !res.OK {
		t.Fatalf("result %+v, want OK", res)
	}
	want := `argv: --host=127.0.0.1 --port=6032 --user=admin --protocol=TCP --connect-timeout=5 --batch --skip-column-names
MYSQL_PWD=admin-secret
UPDATE mysql_servers SET status='OFFLINE_SOFT' WHERE hostgroup_id=30 AND hostname='10.0.0.11' AND port=3306;
UPDATE mysql_servers SET status='ONLINE' WHERE hostgroup_id=30 AND hostname='10.0.0.12' AND port=3306;
UPDATE mysql_servers SET status='ONLINE' WHERE hostgroup_id=30 AND hostname='db3.example.net' AND port=3307;
LOAD MYSQL SERVERS TO RUNTIME;
SAVE MYSQL SERVERS TO DISK;
SELECT COUNT(*) FROM runtime_mysql_servers WHERE hostgroup_id=30 AND status='ONLINE';
end
`
	if got := readCalls(t, calls); got != want {
		t.Fatalf("ProxySQL admin got:\n%s\nwant:\n%s", got, want)
	}
}

// TestProxySQLReadersHookRefusals guards the reader example's checks: other
// events ignored, a runtime count that does not match the set (a row
// missing from the read hostgroup) and an unmapped reader (reported after
// the mapped sites are set) fail the run, a bad hostgroup before any call.
func TestProxySQLReadersHookRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, sites, hostgroup, output string
		ev                             Event
		wantOK, wantCalled             bool
		wantErr                        string
	}{
		{name: "other event is ignored", sites: "site1=h1:1", ev: promoted, wantOK: true},
		{name: "row missing at runtime", sites: "site1=h1:1 site2=h2:1 site3=h3:1", output: "1", ev: readerEvent, wantCalled: true, wantErr: "has 1 servers ONLINE, want 2"},
		{name: "unmapped reader", sites: "site1=h1:1 site2=h2:1", output: "1", ev: readerEvent, wantCalled: true, wantErr: "reader(s) site3 not in PROXYSQL_SITES"},
		{name: "bad hostgroup", sites: "site1=h1:1", hostgroup: "3;DROP", ev: readerEvent, wantErr: "is not a number"},
		{name: "quote in a host", sites: "site1=h'1:1", ev: readerEvent, wantErr: "is not HOST:PORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			output := tc.output
			if output == "" {
				output = "2"
			}
			client, calls := stubClient(t, output)
			t.Setenv("PROXYSQL_CLIENT", client)
			t.Setenv("PROXYSQL_SITES", tc.sites)
			t.Setenv("PROXYSQL_READ_HOSTGROUP", tc.hostgroup)
			res := runScript(t, tc.ev, proxysqlReadersScript)
			if res.OK != tc.wantOK || !strings.Contains(res.Err, tc.wantErr) {
				t.Errorf("result %+v, want OK=%v and Err containing %q", res, tc.wantOK, tc.wantErr)
			}
			if called := readCalls(t, calls) != ""; called != tc.wantCalled {
				t.Errorf("client called: %v, want %v", called, tc.wantCalled)
			}
		})
	}
}
