package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/store"
)

// TestReloadRefusesEmptyPasswordFileOfAddedGroup guards against a reload
// applying what a start refuses: a group added with an empty replication
// password file (read only at its first failover, to repoint replicas) is
// refused by preflight.Check, the check run and validate make, naming the
// key at its file:line; once the file holds a password, the same reload
// applies.
func TestReloadRefusesEmptyPasswordFileOfAddedGroup(t *testing.T) {
	r := startReloadDaemon(t, configYAML(listen, groupYAML("orders", 0, 2, 1)), &reloadWorld{},
		store.GroupState{Group: "orders", Epoch: 1, ActiveSite: "a"})
	pw := filepath.Join(filepath.Dir(r.file), "billing-repl.pw")
	if err := os.WriteFile(pw, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	billing := strings.Replace(groupYAML("billing", 0, 1), "passwordFile: repl.pw", "passwordFile: billing-repl.pw", 1)
	r.write(t, configYAML(listen, groupYAML("orders", 0, 2, 1), billing))
	_, err := r.Reload(context.Background(), api.Actor{Name: "ann"})
	var detailed api.Detailed
	if !errors.Is(err, ErrReloadRefused) || !errors.As(err, &detailed) || len(detailed.Details()) != 1 {
		t.Fatalf("reload with an empty password file: %v, want refused with one problem", err)
	}
	if p := detailed.Details()[0]; !fileLine.MatchString(p) || !strings.Contains(p, "groups[1].credentials.replication.passwordFile: "+pw+" is empty") {
		t.Errorf("problem %q does not name the key, its file:line and the empty file", p)
	}
	if names := r.groupNames(); len(names) != 1 {
		t.Fatalf("groups %v after a refused reload, want [orders]", names)
	}
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if res, err := r.Reload(context.Background(), api.Actor{Name: "ann"}); err != nil || len(res.Added) != 1 {
		t.Fatalf("reload once the password is written: %+v, %v; want billing added", res, err)
	}
}
