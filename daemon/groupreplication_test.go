package daemon

import (
	"context"
	"errors"
	"testing"

	"github.com/failoverd/failoverd/configs"
)

// Until the daemon has a loop that follows a Group Replication group, it
// refuses one rather than run the async loop on it (which would fence and
// promote members the group elects itself), and it never dials a member.
func TestGroupReplicationGroupIsRefusedNotRunAsAsync(t *testing.T) {
	cfg := configs.Group{Name: "g", Engine: configs.EngineMySQL, Replication: configs.ReplicationGroup,
		Sites: []configs.Site{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	dialed := false
	_, err := NewHarness(cfg, HarnessOptions{Observations: fixedObs{}, Store: newTestStore(t), Clock: clockAt(t0),
		Dial: func(context.Context, configs.Site) (Instance, error) { dialed = true; return nil, errors.New("no") }})
	if !errors.Is(err, ErrGroupReplicationNotRun) || dialed {
		t.Fatalf("NewHarness = %v (dialed %t), want ErrGroupReplicationNotRun and no dial", err, dialed)
	}
}
