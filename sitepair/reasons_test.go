package sitepair

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestReasonTableIsComplete: every reason has exactly one row in the reason
// table, with a known action, a known class and a one-line summary, so the
// status snapshot, the metrics labels and the docs (which all read the
// table) never meet a reason they cannot place.
func TestReasonTableIsComplete(t *testing.T) {
	seen := map[Reason]bool{}
	for _, ri := range ReasonTable() {
		switch {
		case ri.Reason == "":
			t.Errorf("a row has no reason: %+v", ri)
		case seen[ri.Reason]:
			t.Errorf("reason %s has two rows", ri.Reason)
		case ri.Action == "":
			t.Errorf("reason %s has no action", ri.Reason)
		case !slices.Contains(Classes(), ri.Class):
			t.Errorf("reason %s: class %q is no Class", ri.Reason, ri.Class)
		case ri.Summary == "" || strings.ContainsAny(ri.Summary, "|\n") || len(ri.Summary) > 160:
			t.Errorf("reason %s: summary %q is not one line of at most 160 characters (no |)", ri.Reason, ri.Summary)
		}
		seen[ri.Reason] = true
		if a, ok := ActionOf(ri.Reason); !ok || a != ri.Action {
			t.Errorf("ActionOf(%s) = %q, %v; the table says %q", ri.Reason, a, ok, ri.Action)
		}
		if c := ClassOf(ri.Reason); c != ri.Class {
			t.Errorf("ClassOf(%s) = %q; the table says %q", ri.Reason, c, ri.Class)
		}
	}
	if len(seen) != len(Reasons()) || len(seen) < 60 {
		t.Errorf("the table has %d reasons, Reasons() %d", len(seen), len(Reasons()))
	}
	if _, ok := ActionOf("no-such-reason"); ok || ClassOf("no-such-reason") != ClassInvalid {
		t.Error("an unknown reason must have no action and class invalid")
	}
}

// TestDocsListEveryReasonWithItsActionAndClass keeps the reason index of
// docs/decisions.md (§10) equal to the reason table: one row per reason with
// its action, class and summary, and no row for a reason the code lacks.
func TestDocsListEveryReasonWithItsActionAndClass(t *testing.T) {
	b, err := os.ReadFile("../docs/decisions.md")
	if err != nil {
		t.Fatalf("read docs: %v", err)
	}
	_, index, ok := strings.Cut(string(b), "\n## 10. Reason index")
	if !ok {
		t.Fatal("docs/decisions.md has no section \"## 10. Reason index\"")
	}
	index, _, _ = strings.Cut(index, "\n## ")
	rows := map[string]string{}
	for _, line := range strings.Split(index, "\n") {
		if r, ok := strings.CutPrefix(line, "| `"); ok {
			r, _, _ = strings.Cut(r, "`")
			rows[r] = line
		}
	}
	for _, ri := range ReasonTable() {
		want := fmt.Sprintf("| `%s` | %s | %s | %s |", ri.Reason, ri.Action, ri.Class, ri.Summary)
		if got, ok := rows[string(ri.Reason)]; !ok {
			t.Errorf("docs/decisions.md §10 lacks reason %s; add:\n%s", ri.Reason, want)
		} else if got != want {
			t.Errorf("docs/decisions.md §10 row for %s differs from the reason table:\n got %s\nwant %s", ri.Reason, got, want)
		}
		delete(rows, string(ri.Reason))
	}
	for r := range rows {
		t.Errorf("docs/decisions.md §10 lists %s, which is no reason", r)
	}
}
