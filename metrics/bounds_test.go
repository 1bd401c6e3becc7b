package metrics

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/status"
)

// Label values stay bounded whatever the daemon passes: words outside their
// fixed set become "other", error texts and GTIDs never reach a label, and
// every label name is one of a known few.
func TestLabelBounds(t *testing.T) {
	snap := status.Snapshot{
		Daemon: status.Daemon{Leader: true, Ready: true},
		Groups: []status.Group{{
			Name: "g", Engine: "mysql", Fencing: "confirmed", Epoch: 3,
			Action: "launch-missiles", Reason: "0-1-42 was lost", Class: "on-fire",
			LastFailover: &status.Failover{Kind: "teleport", At: time.Unix(100, 0), PromotionGTID: "0-1-42"},
			Diverged:     []status.Divergence{{Site: "s", GTID: "0-1-43", Transactions: 1}},
			Sites: []status.Site{{
				Name: "s", State: "exploded", Executed: "0-1-42", ProbeError: "dial tcp 10.0.0.1:3306: refused",
				Replication: &status.Replication{LastError: "Error 1062: Duplicate entry"},
				CacheRole:   "sentinel",
				Hold:        &status.Pause{Kind: "vacation", By: "a b", Reason: "free text"},
			}},
			Routing:   []status.Follower{{Name: "dns", Error: "NXDOMAIN for db.example"}},
			Pause:     &status.Pause{By: "a b", Reason: "free text 0-1-42", Until: time.Unix(200, 0)},
			Withheld:  &status.Withheld{Action: "revoke-epoch", Reason: "0-1-42 was lost", Target: "s", Message: "free text"},
			Readiness: []status.Readiness{{Fault: "meteor", Ready: true, Candidate: "s", Proof: "a-hunch", ExpectedWritableSeconds: 3, Reason: "r", Message: "0-1-42"}},
		}},
	}
	m := New(Options{Snapshot: func() status.Snapshot { return snap }, Version: "v", Commit: "c"})
	m.ProbeDone("g", "s", time.Millisecond, true)
	m.FailoverDone("g", "teleport", "exploded", time.Second)
	m.FailoverDone("g", "failover", "promoted", time.Second)
	m.PhaseDone("g", "coffee", time.Second)
	m.WritesUnavailable("g", time.Second)
	m.Fenced("g", "s", "a-hammer")
	m.ProofUsed("g", "a-hunch")
	m.RoutingDone("g", "dns", errors.New("NXDOMAIN for db.example"))
	m.SplitBrainResolved("g")
	m.CachePromoted("g", "s")
	m.ConfigReloaded("half-done")

	enums := map[string][]string{
		"state": states, "role": cacheRoles, "action": actions, "reason": reasons, "class": classes,
		"kind": lastFailoverKinds, "phase": phases, "by": fencers, "proof": proofs, "fault": faults,
	}
	// A site hold's kind is a hold kind, not a failover kind.
	holdKind := func(metric, label string) bool { return metric == "failoverd_site_hold" && label == "kind" }
	free := []string{"group", "site", "follower", "engine", "fencing", "version", "commit", "goversion"}
	seenOther := map[string]bool{}
	for range 2 { // the second gather sees the zero series the first created
		mfs, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if !strings.HasPrefix(mf.GetName(), "failoverd_") {
				continue
			}
			for _, s := range mf.Metric {
				for _, l := range s.Label {
					name, v := l.GetName(), l.GetValue()
					if strings.ContainsAny(v, " :") || strings.Contains(v, "0-1-4") {
						t.Errorf("%s{%s=%q}: free text or a GTID in a label", mf.GetName(), name, v)
					}
					words, ok := enums[name]
					if holdKind(mf.GetName(), name) {
						words, name = holdKinds, "hold kind"
					}
					switch {
					case name == "result":
						if !slices.Contains(failoverResults, v) && !slices.Contains(routingResults, v) && !slices.Contains(reloadResults, v) && v != other {
							t.Errorf("%s{result=%q}", mf.GetName(), v)
						}
					case ok:
						if v == other {
							seenOther[name] = true
						} else if !slices.Contains(words, v) {
							t.Errorf("%s{%s=%q} is outside its set", mf.GetName(), name, v)
						}
					case !slices.Contains(free, name):
						t.Errorf("%s has the unexpected label %s", mf.GetName(), name)
					}
				}
			}
		}
	}
	// Every enum that was fed a stray word shows "other"; state falls back
	// to unknown and an unknown cache role exports nothing.
	for _, name := range []string{"action", "reason", "class", "kind", "phase", "by", "proof", "fault", "hold kind"} {
		if !seenOther[name] {
			t.Errorf("label %s never became %q", name, other)
		}
	}
	if seenOther["state"] || seenOther["role"] {
		t.Errorf("state or cache role became %q: %v", other, seenOther)
	}
}

// TestEnumsComeFromTheirSources reads the constants the daemon draws label
// values from (sitepair's fence proofs and reason classes, status's states): a word
// added there without being added here would be exported as "other".
func TestEnumsComeFromTheirSources(t *testing.T) {
	for _, c := range []struct {
		dir, typ, prefix string
		words            []string
	}{
		{"../sitepair", "FenceProof", "Proof", proofs},
		{"../sitepair", "Class", "Class", classes},
		{"../status", "", "State", states},
		{"../sitepair", "HoldKind", "Hold", holdKinds},
		{"../sitepair", "Fault", "Fault", faults},
	} {
		for name, v := range constants(t, c.dir, c.typ, c.prefix) {
			if !slices.Contains(c.words, v) {
				t.Errorf("%s.%s = %q is missing from the metrics package's label words", filepath.Base(c.dir), name, v)
			}
		}
	}
	for name, words := range map[string][]string{"reasons": reasons, "actions": actions, "proofs": proofs, "classes": classes, "holdKinds": holdKinds, "faults": faults} {
		if len(words) == 0 || slices.Contains(words, "") || slices.Contains(words, other) {
			t.Errorf("%s = %v", name, words)
		}
	}
	for _, want := range []string{"none", "alert", "promote", "revoke-epoch", "fence-sites"} {
		if !slices.Contains(actions, want) {
			t.Errorf("actions lack %q: %v", want, actions)
		}
	}
	if oneOf("cooldown", reasons) != "cooldown" || oneOf("cool-down", reasons) != other {
		t.Error("oneOf does not bound reasons")
	}
}

// constants returns the string constants of the package in dir whose name
// starts with prefix (and whose declared type is typ, when not "").
func constants(t *testing.T, dir, typ, prefix string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if typ != "" {
					if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
						continue
					}
				}
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, prefix) || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						out[n.Name] = v
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s* constants in %s", prefix, dir)
	}
	return out
}
