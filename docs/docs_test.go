// Package docs holds the project's documentation; its test keeps the tests
// the documents name in existence.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// named matches a test named in backticks: `TestName`, `TestName/sub…` or
// `TestPrefix*` (any test whose name starts so).
var named = regexp.MustCompile("`(Test[A-Za-z0-9_]+)(\\*)?")

var testFunc = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)

// placeholders are names the documents use as examples, not references.
var placeholders = map[string]bool{"TestX": true}

// TestNamedTestsExist: every test a document names (docs/, README.md, the
// deploy READMEs) exists, so the proof tables never point at a renamed or
// deleted test.
func TestNamedTestsExist(t *testing.T) {
	root := ".."
	tests := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			tests[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range references(t, root, named, "test") {
		name, prefix := r.match[1], r.match[2] == "*"
		if placeholders[name] {
			continue
		}
		if prefix {
			found := false
			for n := range tests {
				found = found || strings.HasPrefix(n, name)
			}
			if !found {
				t.Errorf("%s names tests %s*: none exists", r.doc, name)
			}
			continue
		}
		if !tests[name] {
			t.Errorf("%s names %s: no such test (renamed or deleted? update the document)", r.doc, name)
		}
	}
}

// reference is one match of a pattern in one document.
type reference struct {
	doc   string
	match []string
}

// references are every match of re in the documents; none at all means the
// pattern is broken (what names a kind of thing).
func references(t *testing.T, root string, re *regexp.Regexp, what string) []reference {
	t.Helper()
	var out []reference
	for _, doc := range documents(root) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out = append(out, reference{doc: doc, match: m})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s named in any document: the pattern is broken", what)
	}
	return out
}

// documents are the files whose references the tests check: docs/*.md,
// README.md and the deploy READMEs, under the repository root.
func documents(root string) []string {
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	more, _ := filepath.Glob(filepath.Join(root, "deploy", "*", "README.md"))
	return append(append(docs, filepath.Join(root, "README.md")), more...)
}

// goFile matches a Go file named by its path in backticks: `daemon/failover.go`.
var goFile = regexp.MustCompile("`((?:[a-z0-9_-]+/)+[a-z0-9_]+\\.go)`")

// TestNamedFilesExist: every Go file a document names by its path exists,
// so the loop's walk through the code never sends a reader to a file that
// was moved or split.
func TestNamedFilesExist(t *testing.T) {
	root := ".."
	for _, r := range references(t, root, goFile, "Go file") {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(r.match[1]))); err != nil {
			t.Errorf("%s names %s: no such file (moved or split? update the document)", r.doc, r.match[1])
		}
	}
}
