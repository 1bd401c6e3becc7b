package poller

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/statemachine"
	"github.com/failoverd/failoverd/test/testenv"
	"github.com/failoverd/failoverd/test/testenv/promote"
)

// detection is the group detection of one decision after an observation.
type detection struct {
	at     time.Time // real clock
	code   statemachine.Code
	result statemachine.Result
	obs    Observation // the observation that triggered it
}

// liveGroup is a real topology of one engine watched the way the daemon watches
// it: daemon→site links through fault proxies (replication direct), a
// Poller built by NewFromGroup, a Tracker by NewGroupTracker, and the
// Tracker's observations decided on (sitepair.Decide, which runs
// statemachine.Detect) after every observation with site0 as the persisted
// primary.
type liveGroup struct {
	topo    *testenv.Topology
	proxies []*testenv.Proxy
	group   configs.Group

	mu      sync.Mutex
	tracker *Tracker
	history []detection
	cancel  context.CancelFunc
	done    chan struct{}
}

// defaultGroup is a configs.Group of engine e with the shipped defaults
// (poll 500ms, timeout 400ms, failure threshold 2, recovery threshold 3,
// corroborated).
func defaultGroup(t testenv.T, e testenv.Engine) configs.Group {
	pw := filepath.Join(t.TempDir(), "admin.pw")
	if err := os.WriteFile(pw, []byte(testenv.AdminPassword+"\n"), 0o600); err != nil {
		t.Fatalf("write password file: %v", err)
	}
	return configs.Group{
		Name: "e2e", Engine: string(e), // testenv's engine names are the config's
		PollInterval: 500 * time.Millisecond, ProbeTimeout: 400 * time.Millisecond,
		FailureThreshold: 2, RecoveryThreshold: 3, Detection: configs.DetectionCorroborated,
		Credentials: configs.Credentials{Admin: configs.Account{User: testenv.AdminUser, PasswordFile: pw}},
	}
}

// newLiveGroup starts n sites of engine e (site0 primary, made writable
// through mysqlctl: sites start read-only) with a proxy in front of each for
// the daemon's probes.
func newLiveGroup(t testenv.T, e testenv.Engine, n int) *liveGroup {
	t.Helper()
	lg := &liveGroup{topo: testenv.StartTopology(t, n, testenv.TopologyOptions{Engine: e}), group: defaultGroup(t, e)}
	promote.Site(t, lg.topo.Sites[0])
	for _, s := range lg.topo.Sites {
		px := testenv.NewProxy(t, "daemon-to-"+s.Name, s.Addr())
		lg.proxies = append(lg.proxies, px)
		lg.group.Sites = append(lg.group.Sites, configs.Site{
			Name: s.Name, Role: configs.RolePrimaryCandidate,
			MySQL: configs.MySQLEndpoint{Address: px.Addr(), ReplicationAddress: s.Addr()},
		})
	}
	return lg
}

// start builds a fresh Poller and Tracker and runs them until stop (or
// the test's cleanup).
func (lg *liveGroup) start(t testenv.T) {
	t.Helper()
	p, err := NewFromGroup(lg.group, GroupOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("NewFromGroup: %v", err)
	}
	tr, err := NewGroupTracker(lg.group, time.Now)
	if err != nil {
		t.Fatalf("NewGroupTracker: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	lg.mu.Lock()
	lg.tracker, lg.history, lg.cancel, lg.done = tr, nil, cancel, done
	lg.mu.Unlock()
	primary := lg.group.Sites[0].Name
	go func() {
		defer close(done)
		_ = p.Run(ctx, func(o Observation) {
			if _, _, err := tr.Observe(o); err != nil {
				panic(err) // sites come from the same group: cannot happen
			}
			d, err := decide(tr, lg.group, primary, statemachine.Detection(lg.group.Detection), time.Now())
			if err != nil {
				panic(err) // a well-formed group: cannot happen
			}
			r := d.Detection
			lg.mu.Lock()
			lg.history = append(lg.history, detection{at: time.Now(), code: r.Code, result: r, obs: o})
			lg.mu.Unlock()
		})
	}()
	t.Cleanup(lg.stop)
}

// stop ends the poller and waits for it (idempotent).
func (lg *liveGroup) stop() {
	lg.mu.Lock()
	cancel, done := lg.cancel, lg.done
	lg.cancel = nil
	lg.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// since returns the detections made at or after t.
func (lg *liveGroup) since(t time.Time) []detection {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	var out []detection
	for _, d := range lg.history {
		if !d.at.Before(t) {
			out = append(out, d)
		}
	}
	return out
}

// waitFor returns the first detection of code made at or after from,
// polling until timeout; ok is false on timeout.
func (lg *liveGroup) waitFor(code statemachine.Code, from time.Time, timeout time.Duration) (detection, bool) {
	deadline := time.Now().Add(timeout)
	for {
		for _, d := range lg.since(from) {
			if d.code == code {
				return d, true
			}
		}
		if time.Now().After(deadline) {
			return detection{}, false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lastCode returns the latest detection code ("" before any).
func (lg *liveGroup) lastCode() statemachine.Code {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if len(lg.history) == 0 {
		return ""
	}
	return lg.history[len(lg.history)-1].code
}

// waitHealthy fails the test unless Detect says Healthy within timeout.
func (lg *liveGroup) waitHealthy(t testenv.T, timeout time.Duration) {
	t.Helper()
	if _, ok := lg.waitFor(statemachine.Healthy, time.Now(), timeout); !ok {
		t.Fatalf("group not Healthy within %v; last code %q; sites %+v", timeout, lg.lastCode(), lg.views())
	}
}

// views summarizes the tracker's sites for failure messages.
func (lg *liveGroup) views() []string {
	lg.mu.Lock()
	tr := lg.tracker
	lg.mu.Unlock()
	var out []string
	for _, v := range tr.Sites() {
		o := v.Latest
		out = append(out, v.Name+": "+v.State.String()+" class="+string(o.Class)+" follows="+o.Follows+
			" io="+boolStr(o.IOConnected)+" silent="+boolStr(o.SourceSilent)+" silentFor="+o.SilentFor.String())
	}
	return out
}

func boolStr(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// detectionBound is the detection deadline the e2e tests promise for a
// killed primary: failureThreshold × pollInterval + one probe timeout, plus
// a fixed slack for a loaded 2-core CI machine (a replica probe has to land
// after the kill; scheduling delays).
func detectionBound(g configs.Group) (bound, slack time.Duration) {
	slack = time.Second
	return time.Duration(g.FailureThreshold)*g.PollInterval + g.ProbeTimeout + slack, slack
}

var _ testenv.T = (*testing.B)(nil)
