package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/store"
)

// stateFixture is a state file written by the release before the persisted
// record was unified (TestWriteStateFixture at commit e6ddbfb, on the code
// of 380326d): every field the document holds, in two groups (a failover
// in flight on MariaDB, a settled switchover on MySQL). It must keep
// loading and re-save to the same bytes.
const stateFixture = "testdata/state-v2.json"

var (
	fixtureSavedAt = time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC)
	fixtureSavedBy = "failoverd-1@host-a"
	fixtureGroups  = map[string]gtid.Flavor{"orders": gtid.MariaDB, "billing": gtid.MySQL}
)

// The state file of the previous release loads, and saving what was
// loaded writes the same bytes: nothing is lost or reshaped.
func TestStateFixtureReloadsAndResavesIdentically(t *testing.T) {
	want, err := os.ReadFile(stateFixture)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clock := func() time.Time { return fixtureSavedAt }
	old, err := store.OpenFile(stateFixture, clock)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state.json")
	resaved, err := store.OpenFile(path, clock)
	if err != nil {
		t.Fatal(err)
	}
	for group, flavor := range fixtureGroups {
		st, err := old.Load(ctx, group)
		if err != nil || !st.Exists {
			t.Fatalf("load %s: exists %v, %v", group, st.Exists, err)
		}
		out, err := reload(st, flavor)
		if err != nil {
			t.Fatalf("load %s: %v", group, err)
		}
		out.UpdatedBy = fixtureSavedBy
		if err := resaved.Save(ctx, out); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("re-saved state differs from %s:\n%s", stateFixture, got)
	}
}

// reload converts a loaded state into the daemon's record and back, as a
// load followed by a save that changes nothing.
func reload(st store.GroupState, flavor gtid.Flavor) (store.GroupState, error) {
	r, err := toRecord(st, flavor)
	if err != nil {
		return store.GroupState{}, err
	}
	return toStore(st.Group, r), nil
}
