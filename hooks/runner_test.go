package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/procgroup/procgrouptest"
)

var promoted = Event{
	Type: configs.HookAfterPromote, Group: "orders", Epoch: 7, From: "site0", To: "site1",
	Reason: "failover-primary-unreachable", Message: "site0 unreachable; site1 promoted",
	GTID: "0-1-37,0-2-392", At: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
}

func TestFireRunsOnlySubscribedHooks(t *testing.T) {
	r, _, results := testRunner(t,
		configs.Hook{Name: "on-promote", Events: []string{configs.HookAfterPromote}, Command: []string{"true"}},
		configs.Hook{Name: "on-split", Events: []string{configs.HookSplitBrain, configs.HookRecoveryBlocked}, Command: []string{"true"}},
	)
	r.Fire(Event{Type: configs.HookSplitBrain, Epoch: 3, Site: "site2", Reason: "split-brain"})
	r.Close(context.Background()) // waits for every run
	close(results)
	var got []string
	for res := range results {
		got = append(got, res.Hook+"/"+res.Event)
		if !res.OK || res.Err != "" || res.Attempts != 1 || res.Epoch != 3 {
			t.Errorf("result %+v, want OK after 1 attempt at epoch 3", res)
		}
	}
	if want := []string{"on-split/split-brain"}; !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	if rs := r.Results(); len(rs) != 1 || rs[0].Hook != "on-split" {
		t.Fatalf("Results = %+v, want only on-split (a hook that never ran is absent)", rs)
	}
}

func TestCommandGetsPayloadOnStdinAndEnv(t *testing.T) {
	dir := t.TempDir()
	// A hook inherits the daemon's environment; the suite's own settings
	// (make test exports FAILOVERD_TEST_ENGINE) are not part of the payload.
	s := procgrouptest.Script(t, fmt.Sprintf(`cat >%q/stdin; env | grep ^FAILOVERD_ | grep -v ^FAILOVERD_TEST_ | sort >%q/env; echo hello; echo oops >&2; printf 'no newline'`, dir, dir))
	r, c, results := testRunner(t, configs.Hook{Name: "cmd", Events: configs.HookEvents(), Command: []string{s}})
	r.Fire(promoted)
	res := next(t, results)
	if !res.OK || res.Err != "" || res.Hook != "cmd" || res.Event != "after-promote" || res.Epoch != 7 || res.Attempts != 1 {
		t.Fatalf("result %+v, want OK", res)
	}
	stdin, err := os.ReadFile(filepath.Join(dir, "stdin"))
	if err != nil {
		t.Fatal(err)
	}
	var got Event
	if err := json.Unmarshal(stdin, &got); err != nil {
		t.Fatalf("stdin %q is not the JSON payload: %v", stdin, err)
	}
	if !got.At.Equal(promoted.At) {
		t.Errorf("payload at %v, want %v", got.At, promoted.At)
	}
	got.At = promoted.At
	if !reflect.DeepEqual(got, promoted) {
		t.Errorf("payload %+v, want %+v", got, promoted)
	}
	for _, key := range []string{`"event":"after-promote"`, `"group":"orders"`, `"epoch":7`, `"from":"site0"`, `"to":"site1"`, `"reason":"failover-primary-unreachable"`, `"gtid":"0-1-37,0-2-392"`} {
		if !strings.Contains(string(stdin), key) {
			t.Errorf("payload %s lacks %s", stdin, key)
		}
	}
	env, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := "FAILOVERD_EPOCH=7\nFAILOVERD_EVENT=after-promote\nFAILOVERD_FROM=site0\nFAILOVERD_GROUP=orders\n" +
		"FAILOVERD_GTID=0-1-37,0-2-392\nFAILOVERD_READERS=\nFAILOVERD_REASON=failover-primary-unreachable\nFAILOVERD_SITE=\nFAILOVERD_TO=site1\n"
	if string(env) != wantEnv {
		t.Errorf("env:\n%s\nwant:\n%s", env, wantEnv)
	}
	var lines []string
	for _, rec := range c.Find("hook.output") {
		if rec.Attrs["hook"] != "cmd" || rec.Attrs["event"] != "after-promote" || rec.Attrs["group"] != "orders" {
			t.Errorf("hook.output record %v lacks hook, event or group", rec.Attrs)
		}
		lines = append(lines, rec.Attrs["stream"]+":"+rec.Attrs["line"])
	}
	slices.Sort(lines) // the two streams are read concurrently
	if want := []string{"stderr:oops", "stdout:hello", "stdout:no newline"}; !slices.Equal(lines, want) {
		t.Errorf("logged output %q, want %q", lines, want)
	}
	if len(c.Find("hook.started")) != 1 || len(c.Find("hook.finished")) != 1 {
		t.Errorf("want one hook.started and one hook.finished record")
	}
}

func TestCommandFailureNamesExitStatusAndOutput(t *testing.T) {
	s := procgrouptest.Script(t, `echo "cannot reach proxysql"; exit 3`)
	r, _, results := testRunner(t,
		configs.Hook{Name: "fails", Events: []string{configs.HookAfterPromote}, Command: []string{s}},
		configs.Hook{Name: "missing", Events: []string{configs.HookAfterPromote}, Command: []string{filepath.Join(t.TempDir(), "absent")}},
	)
	r.Fire(promoted)
	byHook := map[string]Result{}
	for range 2 {
		res := next(t, results)
		byHook[res.Hook] = res
	}
	if res := byHook["fails"]; res.OK || res.Attempts != 1 || !strings.Contains(res.Err, "exit status 3") || !strings.Contains(res.Err, "cannot reach proxysql") {
		t.Errorf("failing command: %+v, want the exit status and the output in Err", res)
	}
	if res := byHook["missing"]; res.OK || !strings.Contains(res.Err, ErrFailed.Error()) || !strings.Contains(res.Err, "absent") {
		t.Errorf("missing command: %+v, want a start failure", res)
	}
}

func TestCommandTimeoutKillsTheProcessGroup(t *testing.T) {
	for name, body := range map[string]string{
		// SIGKILL after the grace period, when SIGTERM is ignored, is
		// procgroup's TestRunContextEndKillsTheWholeGroup.
		"sigterm": `sleep 120 & echo $! >"$PIDFILE"; echo started; wait`,
	} {
		t.Run(name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "sleep.pid")
			t.Setenv("PIDFILE", pidFile)
			r, _, results := testRunner(t, configs.Hook{Name: "hangs", Events: []string{configs.HookAfterPromote},
				Command: []string{procgrouptest.Script(t, body)}, Timeout: 300 * time.Millisecond})
			r.Fire(promoted)
			res := next(t, results)
			if res.OK || !strings.HasPrefix(res.Err, ErrTimeout.Error()+" after 300ms") || !strings.Contains(res.Err, "started") {
				t.Fatalf("result %+v, want a timeout naming the output", res)
			}
			procgrouptest.RequireGone(t, "the hook's sleep grandchild", procgrouptest.ReadPid(t, pidFile))
		})
	}
}

func TestWebhookPostsPayloadAndEventHeader(t *testing.T) {
	type call struct {
		method, contentType, event string
		body                       []byte
	}
	calls := make(chan call, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		calls <- call{req.Method, req.Header.Get("Content-Type"), req.Header.Get(HeaderEvent), b}
	}))
	defer srv.Close()
	r, _, results := testRunner(t, configs.Hook{Name: "web", Events: []string{configs.HookAfterPromote}, URL: srv.URL + "/hook?token=secret", Retries: 3})
	r.Fire(promoted)
	res := next(t, results)
	if !res.OK || res.Attempts != 1 {
		t.Fatalf("result %+v, want OK after 1 attempt", res)
	}
	c := <-calls
	if c.method != http.MethodPost || c.contentType != "application/json" || c.event != "after-promote" {
		t.Errorf("call %s, Content-Type %q, %s %q; want POST, application/json, after-promote", c.method, c.contentType, HeaderEvent, c.event)
	}
	var got Event
	if err := json.Unmarshal(c.body, &got); err != nil || got.Epoch != 7 || got.To != "site1" || got.GTID != promoted.GTID {
		t.Errorf("body %s (%v), want the payload", c.body, err)
	}
}

func TestWebhookRetriesServerErrorsThenSucceeds(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "proxy busy", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	r, c, results := testRunner(t, configs.Hook{Name: "web", Events: []string{configs.HookAfterPromote}, URL: srv.URL, Retries: 3})
	r.Fire(promoted)
	res := next(t, results)
	if !res.OK || res.Attempts != 2 || calls.Load() != 2 {
		t.Fatalf("result %+v after %d calls, want OK after 2", res, calls.Load())
	}
	if len(c.Find("hook.retrying")) != 1 {
		t.Errorf("want one hook.retrying record")
	}
}

func TestWebhookRetryPolicy(t *testing.T) {
	for _, tc := range []struct {
		code      int
		wantCalls int32
	}{
		{http.StatusBadRequest, 1},
		{http.StatusNotFound, 1},
		{http.StatusFound, 1}, // a redirect to GET would lose the payload
		{http.StatusRequestTimeout, 3},
		{http.StatusTooManyRequests, 3},
		{http.StatusServiceUnavailable, 3},
	} {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				calls.Add(1)
				if tc.code == http.StatusFound {
					w.Header().Set("Location", "/elsewhere")
				}
				http.Error(w, "refused", tc.code)
			}))
			defer srv.Close()
			r, _, results := testRunner(t, configs.Hook{Name: "web", Events: []string{configs.HookAfterPromote}, URL: srv.URL + "/?token=secret", Retries: 2})
			r.Fire(promoted)
			res := next(t, results)
			if res.OK || res.Attempts != int(tc.wantCalls) || calls.Load() != tc.wantCalls {
				t.Fatalf("result %+v after %d calls, want failed after %d", res, calls.Load(), tc.wantCalls)
			}
			if !strings.Contains(res.Err, fmt.Sprint(tc.code)) || !strings.Contains(res.Err, "refused") {
				t.Errorf("Err %q lacks the status and the answer", res.Err)
			}
			if strings.Contains(res.Err, "secret") {
				t.Errorf("Err %q shows the URL's query", res.Err)
			}
		})
	}
}

func TestWebhookTimeoutCancelsTheCall(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-req.Context().Done():
		case <-stop:
		}
	}))
	defer srv.Close()
	defer close(stop)
	r, _, results := testRunner(t, configs.Hook{Name: "web", Events: []string{configs.HookAfterPromote}, URL: srv.URL, Timeout: 200 * time.Millisecond, Retries: 3})
	r.Fire(promoted)
	if res := next(t, results); res.OK || !strings.HasPrefix(res.Err, ErrTimeout.Error()) {
		t.Fatalf("result %+v, want a timeout", res)
	}
}

// blockingServer answers every webhook call once release is closed; each
// call's event and epoch is sent on entered when it arrives, and "start:"
// and "end:" entries are appended to a log.
type blockingServer struct {
	*httptest.Server
	entered chan string
	release chan struct{}
	mu      sync.Mutex
	log     []string
}

func newBlockingServer(t *testing.T, block func(ev Event) bool) *blockingServer {
	s := &blockingServer{entered: make(chan string, 100), release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var ev Event
		_ = json.NewDecoder(req.Body).Decode(&ev)
		id := fmt.Sprintf("%s/%d", ev.Type, ev.Epoch)
		s.add("start:" + id)
		s.entered <- id
		if block(ev) {
			<-s.release
		}
		s.add("end:" + id)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *blockingServer) add(e string) {
	s.mu.Lock()
	s.log = append(s.log, e)
	s.mu.Unlock()
}

func TestFireNeverBlocksAndBoundsTheQueue(t *testing.T) {
	srv := newBlockingServer(t, func(Event) bool { return true })
	r, c, results := testRunner(t, configs.Hook{Name: "web", Events: []string{configs.HookSplitBrain}, URL: srv.URL, Timeout: time.Hour})
	r.Fire(Event{Type: configs.HookSplitBrain, Epoch: 1})
	<-srv.entered // the first call hangs in the receiver
	rs := r.Results()
	if len(rs) != 1 || !rs[0].InProgress() || rs[0].Err != Running || rs[0].Epoch != 1 || rs[0].Attempts != 1 {
		t.Fatalf("Results while running = %+v, want epoch 1 in progress", rs)
	}
	// Had Fire waited for the hung hook, the test would hang here.
	for epoch := uint64(2); epoch <= 21; epoch++ {
		r.Fire(Event{Type: configs.HookSplitBrain, Epoch: epoch})
	}
	if n := len(c.Find("hook.dropped")); n != 4 {
		t.Errorf("%d hook.dropped records, want 4 (20 queued, 16 kept)", n)
	}
	close(srv.release)
	var ran, dropped []uint64
	for range 21 {
		res := next(t, results)
		if res.Attempts == 0 {
			if res.OK || !strings.HasPrefix(res.Err, ErrDropped.Error()) {
				t.Errorf("dropped result %+v", res)
			}
			dropped = append(dropped, res.Epoch)
			continue
		}
		if !res.OK {
			t.Errorf("result %+v, want OK", res)
		}
		ran = append(ran, res.Epoch)
	}
	if want := []uint64{2, 3, 4, 5}; !slices.Equal(dropped, want) {
		t.Errorf("dropped epochs %v, want the oldest queued %v", dropped, want)
	}
	want := []uint64{1}
	for e := uint64(6); e <= 21; e++ {
		want = append(want, e)
	}
	if !slices.Equal(ran, want) {
		t.Errorf("ran epochs %v, want %v in order", ran, want)
	}
	if rs := r.Results(); len(rs) != 1 || !rs[0].OK || rs[0].Epoch != 21 {
		t.Errorf("Results = %+v, want the latest run (epoch 21, OK)", rs)
	}
}

// Events of one hook run in order; another hook is not held up by it.
func TestHooksRunInOrderPerHookAndIndependently(t *testing.T) {
	slow := newBlockingServer(t, func(ev Event) bool { return ev.Type == configs.HookBeforePromote })
	fast := newBlockingServer(t, func(Event) bool { return false })
	both := []string{configs.HookBeforePromote, configs.HookAfterPromote}
	r, _, results := testRunner(t,
		configs.Hook{Name: "slow", Events: both, URL: slow.URL, Timeout: time.Hour},
		configs.Hook{Name: "fast", Events: both, URL: fast.URL, Timeout: time.Hour},
	)
	r.Fire(Event{Type: configs.HookBeforePromote, Epoch: 5, To: "site1"})
	r.Fire(Event{Type: configs.HookAfterPromote, Epoch: 5, To: "site1"})
	// fast finishes both events while slow hangs in its first one.
	for _, want := range []string{"before-promote", "after-promote"} {
		if res := next(t, results); res.Hook != "fast" || res.Event != want || !res.OK {
			t.Fatalf("result %+v, want fast's %s OK", res, want)
		}
	}
	// slow's run is recorded once its request arrived: fast may finish both
	// events before slow's goroutine got that far on a busy machine.
	<-slow.entered
	rs := r.Results()
	if len(rs) != 2 || rs[0].Hook != "fast" || rs[1].Hook != "slow" {
		t.Fatalf("Results = %+v, want fast then slow (sorted by name)", rs)
	}
	if !rs[0].OK || rs[0].Event != "after-promote" || !rs[1].InProgress() || rs[1].Event != "before-promote" {
		t.Fatalf("Results = %+v, want fast's after-promote OK and slow's before-promote running", rs)
	}
	close(slow.release)
	for _, want := range []string{"before-promote", "after-promote"} {
		if res := next(t, results); res.Hook != "slow" || res.Event != want || !res.OK {
			t.Fatalf("result %+v, want slow's %s OK", res, want)
		}
	}
	slow.mu.Lock()
	defer slow.mu.Unlock()
	want := []string{"start:before-promote/5", "end:before-promote/5", "start:after-promote/5", "end:after-promote/5"}
	if !slices.Equal(slow.log, want) {
		t.Fatalf("slow receiver saw %v, want %v (after-promote must wait for before-promote)", slow.log, want)
	}
}

func TestResultsShowTheLatestRun(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if calls.Add(1) == 2 {
			http.Error(w, "bad", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	r, _, results := testRunner(t,
		configs.Hook{Name: "b-web", Events: configs.HookEvents(), URL: srv.URL},
		configs.Hook{Name: "a-cmd", Events: []string{configs.HookAfterPromote}, Command: []string{"true"}},
	)
	r.Fire(Event{Type: configs.HookAfterPromote, Epoch: 4})
	r.Fire(Event{Type: configs.HookFailoverFailed, Epoch: 5, Reason: "failover-no-candidate"})
	for range 3 {
		next(t, results)
	}
	rs := r.Results()
	if len(rs) != 2 {
		t.Fatalf("Results = %+v, want two hooks", rs)
	}
	if a := rs[0]; a.Hook != "a-cmd" || !a.OK || a.Event != "after-promote" || a.Epoch != 4 {
		t.Errorf("a-cmd: %+v, want after-promote epoch 4 OK", a)
	}
	if b := rs[1]; b.Hook != "b-web" || b.OK || b.Event != "failover-failed" || b.Epoch != 5 || !strings.Contains(b.Err, "400") || b.Duration <= 0 || b.At.IsZero() {
		t.Errorf("b-web: %+v, want its latest run (failover-failed epoch 5, 400)", b)
	}
}

func TestCloseWaitsForRunningAndQueuedHooks(t *testing.T) {
	srv := newBlockingServer(t, func(Event) bool { return true })
	r, _, results := testRunner(t, configs.Hook{Name: "web", Events: configs.HookEvents(), URL: srv.URL, Timeout: time.Hour})
	r.Fire(Event{Type: configs.HookBeforePromote, Epoch: 2})
	r.Fire(Event{Type: configs.HookAfterPromote, Epoch: 2})
	<-srv.entered
	closed := make(chan struct{})
	go func() {
		r.Close(context.Background())
		close(closed)
	}()
	close(srv.release)
	<-closed
	close(results)
	var got []string
	for res := range results {
		if !res.OK {
			t.Errorf("result %+v, want OK: Close with time left lets hooks finish", res)
		}
		got = append(got, res.Event)
	}
	if want := []string{"before-promote", "after-promote"}; !slices.Equal(got, want) {
		t.Errorf("ran %v, want %v", got, want)
	}
}

func TestCloseCancelsRunningHooksAndDropsQueued(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	t.Setenv("PIDFILE", pidFile)
	s := procgrouptest.Script(t, `sleep 120 & echo $! >"$PIDFILE"; echo ready; wait`)
	r, c, results := testRunner(t, configs.Hook{Name: "hangs", Events: configs.HookEvents(), Command: []string{s}, Timeout: time.Hour})
	ready := make(chan struct{})
	var once sync.Once
	c.OnRecord(func(rec procgrouptest.Record) {
		if rec.Msg == "hook.output" && rec.Attrs["line"] == "ready" {
			once.Do(func() { close(ready) })
		}
	})
	r.Fire(Event{Type: configs.HookBeforePromote, Epoch: 2})
	r.Fire(Event{Type: configs.HookAfterPromote, Epoch: 2})
	<-ready
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.Close(ctx)
	procgrouptest.RequireGone(t, "the hook's sleep grandchild", procgrouptest.ReadPid(t, pidFile))
	r.Fire(Event{Type: configs.HookSplitBrain, Epoch: 3}) // after Close: dropped, never run
	close(results)
	var got []Result
	for res := range results {
		got = append(got, res)
	}
	if len(got) != 2 {
		t.Fatalf("results %+v, want the cancelled run and the dropped event", got)
	}
	if res := got[0]; res.OK || res.Event != "before-promote" || !strings.HasPrefix(res.Err, ErrClosed.Error()) {
		t.Errorf("running hook: %+v, want cancelled by Close", res)
	}
	if res := got[1]; res.OK || res.Event != "after-promote" || res.Attempts != 0 || !strings.HasPrefix(res.Err, ErrDropped.Error()) {
		t.Errorf("queued event: %+v, want dropped", res)
	}
	if n := len(c.Find("hook.dropped")); n != 2 {
		t.Errorf("%d hook.dropped records, want 2 (queued at Close, fired after)", n)
	}
}

// TestReaderEventCarriesTheFullReaderSet guards the reader-added and
// reader-removed payloads: the whole set in JSON (an empty set as [], not
// absent) and in FAILOVERD_READERS, so a receiver can replace its pool.
func TestReaderEventCarriesTheFullReaderSet(t *testing.T) {
	dir := t.TempDir()
	s := procgrouptest.Script(t, fmt.Sprintf(`cat >%q/stdin; printf '%%s' "$FAILOVERD_READERS" >%q/readers`, dir, dir))
	r, _, results := testRunner(t, configs.Hook{Name: "pool", Events: []string{configs.HookReaderAdded, configs.HookReaderRemoved}, Command: []string{s}})
	for _, tc := range []struct {
		ev        Event
		json, env string
	}{
		{Event{Type: configs.HookReaderAdded, Group: "orders", Epoch: 3, Site: "site2", Readers: []string{"site1", "site2"}}, `"readers":["site1","site2"]`, "site1,site2"},
		{Event{Type: configs.HookReaderRemoved, Group: "orders", Epoch: 3, Site: "site2", Readers: []string{}}, `"readers":[]`, ""},
	} {
		r.Fire(tc.ev)
		if res := next(t, results); !res.OK {
			t.Fatalf("%s: %+v", tc.ev.Type, res)
		}
		stdin, _ := os.ReadFile(filepath.Join(dir, "stdin"))
		env, _ := os.ReadFile(filepath.Join(dir, "readers"))
		if !strings.Contains(string(stdin), tc.json) || string(env) != tc.env {
			t.Errorf("%s: payload %s env %q; want %s and %q", tc.ev.Type, stdin, env, tc.json, tc.env)
		}
	}
	// Other events carry no readers key.
	if b, _ := json.Marshal(promoted); strings.Contains(string(b), "readers") {
		t.Errorf("after-promote payload %s has a readers key", b)
	}
}
