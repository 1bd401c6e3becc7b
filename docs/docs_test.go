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
	checked := 0
	for _, doc := range documents(root) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range named.FindAllStringSubmatch(string(b), -1) {
			name, prefix := m[1], m[2] == "*"
			if placeholders[name] {
				continue
			}
			checked++
			if prefix {
				found := false
				for n := range tests {
					found = found || strings.HasPrefix(n, name)
				}
				if !found {
					t.Errorf("%s names tests %s*: none exists", doc, name)
				}
				continue
			}
			if !tests[name] {
				t.Errorf("%s names %s: no such test (renamed or deleted? update the document)", doc, name)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no test named in any document: the pattern is broken")
	}
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
	checked := 0
	for _, doc := range documents(root) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goFile.FindAllStringSubmatch(string(b), -1) {
			checked++
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(m[1]))); err != nil {
				t.Errorf("%s names %s: no such file (moved or split? update the document)", doc, m[1])
			}
		}
	}
	if checked == 0 {
		t.Fatal("no Go file named in any document: the pattern is broken")
	}
}
