package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// maxFileLines bounds every file of the packages a newcomer reads first,
// tests included.
const maxFileLines = 500

// TestCoreFilesStaySmall: each file of daemon/ and sitepair/ holds one job
// (daemon: the loop, the failover sequence, operator requests, the
// per-server primitives, ...; sitepair: failover, switchover, recovery,
// split brain, ...; docs/design.md names them). A file growing past
// maxFileLines is doing more than one: split it by concern rather than
// raise the limit.
func TestCoreFilesStaySmall(t *testing.T) {
	for _, dir := range []string{"daemon", "sitepair"} {
		files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no Go file in ../%s: the test does not run in docs/", dir)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(b, []byte("\n")); n > maxFileLines {
				t.Errorf("%s has %d lines, more than %d: split it by concern", f, n, maxFileLines)
			}
		}
	}
}
