package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/configs"
)

// The daemon's answers to the API's commands for what does not exist, and
// from a daemon that does not lead: the errors the API maps to 404 and 503.
func TestCommandsRefuseUnknownGroupSiteAndFollowers(t *testing.T) {
	cfg := configs.Group{Name: "g", Sites: []configs.Site{{Name: "a"}, {Name: "b"}}}
	g := &group{cfg: cfg, sidecars: newSidecars(cfg)}
	d := &Daemon{cfg: &configs.Config{}, log: slog.New(slog.DiscardHandler), groups: []*group{g}, pub: &publisher{}}
	ctx := context.Background()
	by := api.Actor{Name: "ann"}
	// Not leading: every command is refused before it reaches the loop.
	for name, err := range map[string]error{
		"switchover":    second(d.Switchover(ctx, "g", "b", api.SwitchoverOptions{}, by)),
		"pause":         d.Pause(ctx, "g", time.Minute, "r", by),
		"hold":          d.Hold(ctx, "g", "b", "no-promote", time.Minute, "r", by),
		"acknowledge":   d.Acknowledge(ctx, "g", by),
		"confirm-fence": d.ConfirmFence(ctx, "g", "a", by),
		"reclone":       d.Reclone(ctx, "g", "a", "a", by),
	} {
		if !errors.Is(err, api.ErrNotLeader) {
			t.Errorf("%s on a follower: %v, want api.ErrNotLeader", name, err)
		}
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.lead.begin(lctx, t0, nil)
	for name, err := range map[string]error{
		"switchover, unknown group":    second(d.Switchover(ctx, "nope", "b", api.SwitchoverOptions{}, by)),
		"pause, unknown group":         d.Pause(ctx, "nope", time.Minute, "r", by),
		"hold, unknown site":           d.Hold(ctx, "g", "z", "no-promote", time.Minute, "r", by),
		"release, unknown site":        d.Release(ctx, "g", "z", by),
		"switchover, unknown site":     second(d.Switchover(ctx, "g", "z", api.SwitchoverOptions{}, by)),
		"acknowledge, unknown group":   d.Acknowledge(ctx, "nope", by),
		"confirm-fence, unknown group": d.ConfirmFence(ctx, "nope", "a", by),
		"confirm-fence, unknown site":  d.ConfirmFence(ctx, "g", "z", by),
		"reclone, unknown group":       d.Reclone(ctx, "nope", "a", "a", by),
		"reclone, unknown site":        d.Reclone(ctx, "g", "z", "z", by),
	} {
		if !errors.Is(err, api.ErrNotFound) {
			t.Errorf("%s: %v, want api.ErrNotFound", name, err)
		}
	}
}

// A MariaDB group without reclone.command cannot re-seed a site: the
// refusal says what to do instead; MySQL (CLONE) and a configured hook can.
func TestRecloneUnavailableSaysWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		engine  string
		command []string
		can     bool
	}{
		{configs.EngineMariaDB, nil, false},
		{configs.EngineMariaDB, []string{"/usr/local/bin/reseed"}, true},
		{configs.EngineMySQL, nil, true},
	} {
		g := &group{cfg: configs.Group{Engine: tc.engine, Reclone: configs.Reclone{Command: tc.command}}}
		why := g.recloneUnavailable()
		if tc.can != (why == "") {
			t.Errorf("%s with command %v: %q", tc.engine, tc.command, why)
		}
		if !tc.can && (!strings.Contains(why, "reclone.command") || !strings.Contains(why, "gtid_slave_pos")) {
			t.Errorf("the refusal does not say what to do: %q", why)
		}
	}
}

// second returns the error of a (value, error) pair.
func second[T any](_ T, err error) error { return err }
