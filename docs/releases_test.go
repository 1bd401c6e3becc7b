package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// relativeRelease is a release named by its position, not its number.
	relativeRelease = regexp.MustCompile(`(?i)\b(next|first|previous|last|upcoming|future|later|coming|following|current) (major |minor |patch )?release\b`)
	// versionNumber is a release number: 0.9.0, v1.0.0.
	versionNumber = regexp.MustCompile(`\bv?\d+\.\d+\.\d+\b`)
)

// TestDocsNameReleasesByVersion: a document that speaks of a release
// names it by its version on the same line ("removed in 1.0.0", not
// "removed in the next release"): a relative reference is wrong from the
// day the next release ships, and an operator cannot tell which one it
// meant. Covers the docs, READMEs, CHANGELOG.md and SECURITY.md.
func TestDocsNameReleasesByVersion(t *testing.T) {
	root := ".."
	files := append(documents(root), filepath.Join(root, "CHANGELOG.md"), filepath.Join(root, "SECURITY.md"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := relativeRelease.FindString(line); m != "" && !versionNumber.MatchString(line) {
				t.Errorf("%s:%d says %q without naming the version: %s", f, i+1, m, strings.TrimSpace(line))
			}
		}
	}
}
