package daemon

import (
	"go/ast"
	"go/build"
	"go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDaemonAndAPIImportNoSidecar: the daemon and the API share the signed
// protocol with sidecars through package view only, and take the MySQL
// client TLS setup from configs. Importing sidecar again (directly or
// through another package of the module) would pull the sidecar's runtime
// into the daemon and let one side's wire types change without the other.
func TestDaemonAndAPIImportNoSidecar(t *testing.T) {
	root := ".."
	mod := modulePath(t, root)
	const forbidden = "sidecar"
	for _, start := range []string{"daemon", "api"} {
		// via[p] is the package that first imported p on the walk from start.
		via := map[string]string{start: ""}
		queue := []string{start}
		for len(queue) > 0 {
			pkg := queue[0]
			queue = queue[1:]
			for _, imp := range packageImports(t, filepath.Join(root, filepath.FromSlash(pkg)), mod) {
				if _, seen := via[imp]; seen {
					continue
				}
				via[imp] = pkg
				if imp == forbidden {
					chain := []string{imp}
					for p := pkg; p != ""; p = via[p] {
						chain = append([]string{p}, chain...)
					}
					t.Errorf("%s imports %s (%s): wire types belong in view, client TLS in configs",
						start, forbidden, strings.Join(chain, " → "))
					continue
				}
				queue = append(queue, imp)
			}
		}
	}

	// poller keeps no TLS helper the daemon or API could use instead of
	// configs.TLS.ClientConfig.
	for _, dir := range []string{"daemon", "api"} {
		for _, f := range parsePackage(t, filepath.Join(root, dir), 0) {
			name := ""
			for _, s := range f.file.Imports {
				if p, _ := strconv.Unquote(s.Path.Value); p == mod+"/poller" {
					name = "poller"
					if s.Name != nil {
						name = s.Name.Name
					}
				}
			}
			if name == "" {
				continue
			}
			ast.Inspect(f.file, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == name && strings.Contains(sel.Sel.Name, "TLS") {
						t.Errorf("%s uses %s.%s: the MySQL client TLS setup is configs.TLS.ClientConfig", f.name, name, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

// modulePath reads the module path from root's go.mod.
func modulePath(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}

type parsedFile struct {
	name string
	file *ast.File
}

// parsePackage parses the non-test Go files of dir that the default build
// context compiles.
func parsePackage(t *testing.T, dir string, mode parser.Mode) []parsedFile {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := gotoken.NewFileSet()
	var out []parsedFile
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, name); err != nil || !ok {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := parser.ParseFile(fset, path, nil, mode)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, parsedFile{name: path, file: f})
	}
	return out
}

// packageImports returns the module's packages (relative to the module
// root, slash-separated) that the package in dir imports.
func packageImports(t *testing.T, dir, mod string) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, f := range parsePackage(t, dir, parser.ImportsOnly) {
		for _, s := range f.file.Imports {
			p, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			rel, ok := strings.CutPrefix(p, mod+"/")
			if ok && !seen[rel] {
				seen[rel] = true
				out = append(out, rel)
			}
		}
	}
	return out
}
