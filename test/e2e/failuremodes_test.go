package e2e

import (
	"os"
	"strings"
	"testing"
)

// docs/failure-modes.md has a row for every scenario of the catalogue
// (issue 19): what happens, what the operator sees, what to do, its test.
func TestFailureModesListEveryScenario(t *testing.T) {
	doc, err := os.ReadFile("../../docs/failure-modes.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range append(scenarios(), moreScenarios...) {
		if !strings.Contains(string(doc), "`"+sc.name+"`") {
			t.Errorf("docs/failure-modes.md has no row naming scenario `%s`", sc.name)
		}
	}
}
