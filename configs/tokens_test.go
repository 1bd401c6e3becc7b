package configs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTokens writes name → content files into dir.
func writeTokens(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// The three token files are read with their trailing newline dropped, and
// an unset file leaves its token empty (that level not configured).
func TestReadAPITokensReadsEachFile(t *testing.T) {
	dir := secrets(t)
	writeTokens(t, dir, map[string]string{"api.token": "op\n", "read.token": "read-0123456789abcdef\n", "admin.token": "admin-0123456789abcdef"})
	m := base()
	d := m["daemon"].(map[string]any)
	d["apiTokenFile"], d["apiReadTokenFile"], d["apiAdminTokenFile"] = "api.token", "read.token", "admin.token"
	cfg, err := parseMap(t, m, dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cfg.ReadAPITokens()
	if err != nil || tok != (APITokens{Operate: "op", Read: "read-0123456789abcdef", Admin: "admin-0123456789abcdef"}) {
		t.Fatalf("tokens %+v, %v", tok, err)
	}
	cfg, err = parseMap(t, base(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := cfg.ReadAPITokens(); err != nil || tok != (APITokens{}) {
		t.Fatalf("no token files: %+v, %v", tok, err)
	}
}

// Every problem of the token files at once, each naming its field and the
// fix and never the token: an empty file, a short read or admin token, and
// a token shared by two roles (a read token equal to the operate token
// would let every reader run commands).
func TestReadAPITokensReportsEveryProblemAtOnce(t *testing.T) {
	dir := secrets(t)
	shared := "shared-0123456789abcdef"
	writeTokens(t, dir, map[string]string{"api.token": shared, "read.token": shared + "\n", "admin.token": "short", "empty": "\n"})
	m := base()
	d := m["daemon"].(map[string]any)
	d["apiTokenFile"], d["apiReadTokenFile"], d["apiAdminTokenFile"] = "api.token", "read.token", "admin.token"
	cfg, err := parseMap(t, m, dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.ReadAPITokens()
	var ps *Problems
	if !errors.As(err, &ps) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("want *Problems wrapping ErrInvalid, got %v", err)
	}
	want := map[string]string{
		"daemon.apiReadTokenFile":  "same token as daemon.apiTokenFile",
		"daemon.apiAdminTokenFile": "fewer than 16",
	}
	for _, p := range ps.List {
		if w, ok := want[p.Path]; ok && strings.Contains(p.Message, w) && strings.Contains(p.Message, "write") {
			delete(want, p.Path)
		}
		if strings.Contains(p.String(), shared) || strings.Contains(p.String(), "short\"") {
			t.Errorf("a problem shows a token: %s", p)
		}
		if p.Line == 0 {
			t.Errorf("problem %s has no position", p)
		}
	}
	if len(want) > 0 || len(ps.List) != 2 {
		t.Errorf("missing %v in:\n%v", want, err)
	}

	d["apiTokenFile"], d["apiReadTokenFile"], d["apiAdminTokenFile"] = "empty", "empty", "empty"
	cfg, err = parseMap(t, m, dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.ReadAPITokens()
	if !errors.As(err, &ps) || len(ps.List) != 3 {
		t.Fatalf("three empty files: want three problems, got %v", err)
	}
	for _, p := range ps.List {
		if !strings.Contains(p.Message, "is empty") || !strings.Contains(p.Message, "openssl rand") {
			t.Errorf("empty file: %s", p)
		}
	}
}

// The new token files are validated like apiTokenFile (readable), and an
// admin token without an operate token is refused: it would enable only
// the dangerous commands.
func TestTokenFilesValidation(t *testing.T) {
	dir := secrets(t)
	writeTokens(t, dir, map[string]string{"admin.token": "admin-0123456789abcdef"})
	m := base()
	d := m["daemon"].(map[string]any)
	d["apiReadTokenFile"], d["apiAdminTokenFile"] = "missing.token", "admin.token"
	_, err := parseMap(t, m, dir)
	var ps *Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want problems, got %v", err)
	}
	want := map[string]string{
		"daemon.apiReadTokenFile":  "cannot read",
		"daemon.apiAdminTokenFile": "set apiTokenFile too",
	}
	for _, p := range ps.List {
		if w, ok := want[p.Path]; ok && strings.Contains(p.Message, w) {
			delete(want, p.Path)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing %v in:\n%v", want, err)
	}
}

// The token files are daemon settings: a reload that changes one is
// refused and names it (the daemon reads its tokens at start only).
func TestRestartChangesNameTheTokenFiles(t *testing.T) {
	dir := secrets(t)
	writeTokens(t, dir, map[string]string{"api.token": "op", "read.token": "read-0123456789abcdef"})
	running, err := parseMap(t, base(), dir)
	if err != nil {
		t.Fatal(err)
	}
	m := base()
	d := m["daemon"].(map[string]any)
	d["apiTokenFile"], d["apiReadTokenFile"] = "api.token", "read.token"
	next, err := parseMap(t, m, dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, p := range RestartChanges(running, next) {
		paths = append(paths, p.Path)
	}
	if strings.Join(paths, " ") != "daemon.apiReadTokenFile daemon.apiTokenFile" {
		t.Fatalf("restart changes %v, want both token files", paths)
	}
}
