package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// maxFileLines bounds every file of the package, tests included.
const maxFileLines = 500

// TestFilesStaySmall: each file of the package holds one job (the loop,
// the failover sequence, operator requests, the per-server primitives, ...;
// docs/design.md "The loop" names them). A file growing past maxFileLines is
// doing more than one: split it by concern rather than raise the limit.
func TestFilesStaySmall(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Go file found: the test does not run in the package directory")
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
