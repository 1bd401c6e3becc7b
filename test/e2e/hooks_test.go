package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/hooks"
	"github.com/failoverd/failoverd/test/testenv"
)

// Event hooks on a real failover: a webhook and a command receive
// before-promote and after-promote with the group, epoch, old and new
// primary and the promotion GTID; the status and the metrics show the runs;
// a hook that fails does not delay or undo the promotion.
func TestHooksFollowARealFailover(t *testing.T) {
	testenv.ForEachEngine(t, func(t *testing.T, e testenv.Engine) {
		var mu sync.Mutex
		var got []hooks.Event
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var ev hooks.Event
			if err := json.Unmarshal(body, &ev); err != nil || r.Header.Get("X-Failoverd-Event") != ev.Type {
				http.Error(w, "bad payload", http.StatusBadRequest)
				return
			}
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
		}))
		defer srv.Close()
		dir := t.TempDir()
		out := filepath.Join(dir, "command.jsonl")
		script := filepath.Join(dir, "record.sh")
		if err := os.WriteFile(script, []byte("#!/bin/bash\ncat >> "+out+"\necho >> "+out+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf(`    hooks:
      - name: webhook
        events: [before-promote, after-promote]
        url: %s/hook
      - name: command
        events: [after-promote]
        command: [%s]
      - name: broken
        events: [before-promote]
        command: [/bin/false]
`, srv.URL, script)
		g := newGroup(t, groupOptions{engine: e, sites: 3, extraConfig: cfg})
		g.startDaemon()
		before := g.waitHealthy("site0", 30*time.Second)
		g.topo.Sites[0].Exec(t, "CREATE TABLE app.hooked (id INT PRIMARY KEY)")
		g.waitFor("site1 has the table", 10*time.Second, func() bool {
			return g.topo.Sites[1].QueryString(t, "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'hooked'") == "1"
		})
		g.kill(0)
		g.expectSolePrimary("site1")
		g.waitFor("the webhook got after-promote", 30*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == 2
		})
		mu.Lock()
		events := append([]hooks.Event(nil), got...)
		mu.Unlock()
		if events[0].Type != "before-promote" || events[1].Type != "after-promote" {
			t.Fatalf("webhook events %+v, want before-promote then after-promote", events)
		}
		for _, ev := range events {
			if ev.Group != "orders" || ev.From != "site0" || ev.To != "site1" || ev.Epoch <= before.Epoch {
				t.Fatalf("payload %+v", ev)
			}
		}
		if events[1].GTID == "" {
			t.Fatalf("after-promote without the promotion GTID: %+v", events[1])
		}
		g.waitFor("the command hook ran", 30*time.Second, func() bool {
			b, _ := os.ReadFile(out)
			return strings.Contains(string(b), `"event":"after-promote"`) && strings.Contains(string(b), `"to":"site1"`)
		})
		g.waitFor("the status shows the runs", 15*time.Second, func() bool {
			st, err := g.status()
			if err != nil {
				return false
			}
			states := map[string]string{}
			for _, h := range st.Hooks {
				states[h.Hook] = h.State
			}
			return states["webhook"] == "ok" && states["command"] == "ok" && states["broken"] == "failed"
		})
		m := g.metrics()
		for _, want := range []string{
			`failoverd_hook_runs_total{event="after-promote",group="orders",hook="webhook",result="ok"} 1`,
			`failoverd_hook_runs_total{event="before-promote",group="orders",hook="broken",result="failed"} 1`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}
