package configs

import (
	"reflect"
	"strings"
	"testing"
)

// What a reload cannot apply is named field by field, with its position in
// the new file: the daemon section and the clusters, never the groups.
func TestRestartChangesNameEachFieldAndItsLine(t *testing.T) {
	dir := secrets(t)
	running, err := parseMap(t, base(), dir)
	if err != nil {
		t.Fatal(err)
	}
	next := base()
	next["daemon"].(map[string]any)["listen"] = "0.0.0.0:9090"
	next["daemon"].(map[string]any)["leaderElection"] = map[string]any{"leaseDuration": "20s"}
	next["clusters"].([]any)[0].(map[string]any)["context"] = "prod"
	group(next)["pollInterval"] = "1s" // a group setting: reloadable
	siteN(next, 2)["priority"] = 7     // so is a site's
	cfg, err := parseMap(t, next, dir)
	if err != nil {
		t.Fatal(err)
	}
	ps := RestartChanges(running, cfg)
	var paths []string
	for _, p := range ps {
		paths = append(paths, p.Path)
		if p.Line == 0 || !strings.Contains(p.Message, "needs a restart") {
			t.Errorf("problem %q: want a line and \"needs a restart\"", p)
		}
	}
	// File order (the YAML writer sorts keys).
	want := []string{"clusters[0].context", "daemon.leaderElection.leaseDuration", "daemon.listen"}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("restart changes %v, want %v (in file order)", paths, want)
	}
	if !strings.Contains(ps[2].Message, `"127.0.0.1:8080" to "0.0.0.0:9090"`) {
		t.Errorf("message %q does not say what changed", ps[2].Message)
	}
	if got := RestartChanges(running, running); got != nil {
		t.Errorf("no change: %v", got)
	}
	// A cluster more is one change of the whole list.
	more := base()
	more["clusters"] = append(more["clusters"].([]any), map[string]any{"name": "west", "inCluster": true})
	cfg, err = parseMap(t, more, dir)
	if err != nil {
		t.Fatal(err)
	}
	if ps := RestartChanges(running, cfg); len(ps) != 1 || ps[0].Path != "clusters" || !strings.Contains(ps[0].Message, "1 entries to 2 entries") {
		t.Errorf("an added cluster: %v", ps)
	}
}

// The digest identifies the file's bytes: status and `failoverd reload`
// show it, so an operator can tell which file a daemon runs.
func TestDigestIsTheFilesSHA256(t *testing.T) {
	a, err := Parse("groups: []\n", "")
	if a != nil || err == nil {
		t.Fatal("an empty group list parsed")
	}
	dir := secrets(t)
	c1, err := parseMap(t, base(), dir)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := parseMap(t, base(), dir)
	if err != nil {
		t.Fatal(err)
	}
	m := base()
	siteN(m, 0)["priority"] = 11
	c3, err := parseMap(t, m, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c1.Digest()) != 64 || c1.Digest() != c2.Digest() || c1.Digest() == c3.Digest() {
		t.Fatalf("digests %q %q %q: want 64 hex digits, equal for equal files only", c1.Digest(), c2.Digest(), c3.Digest())
	}
}
