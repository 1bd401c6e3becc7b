package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/store"
)

// tokenYAML is configYAML with the three API token files, written into a
// directory of their own, with these contents.
func tokenYAML(t *testing.T, operate, read, admin string) string {
	t.Helper()
	dir := t.TempDir()
	var lines []string
	for _, f := range []struct{ field, name, content string }{
		{"apiTokenFile", "api.token", operate}, {"apiReadTokenFile", "read.token", read}, {"apiAdminTokenFile", "admin.token", admin},
	} {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, []byte(f.content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, "  "+f.field+": "+p+"\n")
	}
	return strings.Replace(configYAML(listen, groupYAML("orders", 0, 2, 1)), "daemon:\n", "daemon:\n"+strings.Join(lines, ""), 1)
}

// The daemon's HTTP server takes the three tokens of its files: status
// reads need one, the operate token runs a reload but not confirm-fence
// (403, naming the admin token), the admin token does, and the load
// balancer's health check needs none. It guards the wiring from the
// configuration to the API (a token read but never passed on would leave
// the dangerous commands on the operate token).
func TestDaemonServesWithItsThreeTokens(t *testing.T) {
	const operate, read, admin = "operate-0123456789abcdef", "read-0123456789abcdef", "admin-0123456789abcdef"
	r := startReloadDaemon(t, tokenYAML(t, operate, read, admin), &reloadWorld{},
		store.GroupState{Group: "orders", Epoch: 1, ActiveSite: "a"})
	call := func(method, path, tok, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+r.Addr()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	waitUntil(t, "the API answers", func() bool {
		resp, err := http.Get("http://" + r.Addr() + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	if code, _ := call("GET", "/v1/groups", "", ""); code != 401 {
		t.Errorf("status without a token: %d, want 401", code)
	}
	if code, _ := call("GET", "/v1/groups", read, ""); code != 200 {
		t.Errorf("status with the read token: %d, want 200", code)
	}
	if code, _ := call("GET", "/v1/groups/orders/sites/a/health", "", ""); code == 401 || code == 403 {
		t.Errorf("health check without a token: %d, want no token asked", code)
	}
	if code, body := call("POST", "/v1/groups/orders/confirm-fence", operate, `{"site":"a"}`); code != 403 || body["need"] != "admin" {
		t.Errorf("confirm-fence with the operate token: %d %v, want 403 needing the admin token", code, body)
	}
	if code, body := call("POST", "/v1/groups/orders/confirm-fence", admin, `{"site":"a"}`); code == 401 || code == 403 {
		t.Errorf("confirm-fence with the admin token: %d %v, want it past the token check", code, body)
	}
	if code, body := call("POST", "/v1/reload", operate, `{}`); code != 200 {
		t.Errorf("reload with the operate token: %d %v, want 200", code, body)
	}
}

// New refuses token files that would not protect anything (a read token
// equal to the operate token, a short admin token), naming each field,
// before it binds the listener or opens the store.
func TestNewRefusesWeakOrSharedTokens(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"admin.pw", "repl.pw"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "failoverd.yaml")
	if err := os.WriteFile(file, []byte(tokenYAML(t, "same-0123456789abcdef", "same-0123456789abcdef", "short")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), cfg, Options{Store: newTestStore(t)})
	if err == nil || !strings.Contains(err.Error(), "daemon.apiReadTokenFile") || !strings.Contains(err.Error(), "daemon.apiAdminTokenFile") {
		t.Fatalf("New: %v, want both token problems named", err)
	}
}
