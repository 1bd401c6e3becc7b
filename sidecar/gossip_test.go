package sidecar

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"
)

// startReal runs a sidecar with real HTTP (its server, the daemon and peer
// clients) and the real clock on ln; it stops at the test's end.
func startReal(t *testing.T, cfg Config, opts Options, ln net.Listener) *Sidecar {
	t.Helper()
	opts.Listener = ln
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestGossipBetweenTwoRealSidecars: a view given only to east's sidecar
// reaches west's through /peer/active-site, and east reports having served it.
func TestGossipBetweenTwoRealSidecars(t *testing.T) {
	leader := newStandInDaemon(t)   // answers east only
	follower := newStandInDaemon(t) // west's daemon: 503, no view
	lnEast, lnWest := listen(t), listen(t)
	base := Config{Group: testGroup, Key: testKey, LeaseTimeout: 2 * time.Second, CheckInterval: 100 * time.Millisecond}

	east := base
	east.Site, east.DaemonURLs = "east", []string{leader.URL()}
	east.Peers = []Peer{{Site: "west", URL: "http://" + lnWest.Addr().String()}}
	west := base
	west.Site, west.DaemonURLs = "west", []string{follower.URL()}
	west.Peers = []Peer{{Site: "east", URL: "http://" + lnEast.Addr().String()}}

	westMySQL := newFakeMySQL(true)
	sEast := startReal(t, east, Options{MySQL: newFakeMySQL(true)}, lnEast)
	sWest := startReal(t, west, Options{MySQL: westMySQL}, lnWest)

	leader.set(sign(t, 3, "east"))
	waitFor(t, "west to learn epoch 3 from east", func() bool {
		sv, ok := sWest.View()
		return ok && sv.View.Epoch == 3 && sv.View.ActiveSite == "east"
	})
	waitFor(t, "east to report serving west", func() bool {
		r, ok := leader.lastReport()
		return ok && r.Site == "east" && r.Peers["west"].ServedEpoch == 3
	})
	if _, ok := follower.lastReport(); !ok {
		t.Error("west never reported to its daemon")
	}
	if leader.rejected()+follower.rejected() != 0 {
		t.Error("a report's signature did not verify")
	}
	// West's MySQL was read-only already: rule 1 has nothing to fence, and a
	// view naming east never renews west's lease.
	if f, _, p, _ := westMySQL.counts(); f != 0 || p != 0 {
		t.Errorf("west fenced %d / promoted %d", f, p)
	}
	if r := sWest.Report(); r.LeaseRemainingMs > 0 || r.Epoch != 3 {
		t.Errorf("west report %+v", r)
	}
	if sEast.epoch() != 3 {
		t.Errorf("east epoch %d", sEast.epoch())
	}
}
