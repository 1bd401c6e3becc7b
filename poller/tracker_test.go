package poller

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/mysqlctl"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// obsOf turns "W" (writable), "R" (read-only replica following a,
// streaming), "L" (replica that lost its source: IO thread reconnecting), "S"
// (replica connected but its source silent) and "F" (failed probe) into one
// observation of site at step seq.
func obsOf(site string, seq int, kind byte) Observation {
	o := Observation{Site: site, Seq: uint64(seq), At: t0.Add(time.Duration(seq) * time.Second)}
	switch kind {
	case 'F':
		o.Class, o.Err = ClassRefused, errors.New("refused")
		return o
	case 'W':
		o.Reachable = true
		return o
	}
	o.Reachable, o.Status.ReadOnly, o.Follows = true, true, "a"
	o.Status.Replica = &mysqlctl.ReplicaStatus{IOThread: mysqlctl.ThreadYes, SQLThread: mysqlctl.ThreadYes}
	switch kind {
	case 'R':
		o.IOConnected = true
	case 'S':
		o.IOConnected, o.SilenceKnown, o.SourceSilent = true, true, true
	case 'L':
		o.Status.Replica.IOThread = mysqlctl.ThreadConnecting
	default:
		panic("bad kind " + string(kind))
	}
	return o
}

// decide is the production path from a Tracker to group detection:
// Observed, then sitepair.Decide (which runs statemachine.Detect on the
// same observations) with primary as the persisted active site.
func decide(tr *Tracker, g configs.Group, primary string, det statemachine.Detection, now time.Time) (sitepair.Decision, error) {
	pol := sitepair.DefaultPolicy()
	pol.Detection = det
	st := sitepair.Persisted{ActiveSite: primary}
	if primary != "" {
		st.Epoch = 1
	}
	d := sitepair.Decide(tr.Observed(g), st, pol, now)
	if d.Reason == sitepair.ReasonInvalidInput || d.Reason == sitepair.ReasonInvalidPolicy {
		return d, fmt.Errorf("decision input rejected: %s", d.Message)
	}
	return d, nil
}

// decideOn is decide, failing the test on rejected input.
func decideOn(t testing.TB, tr *Tracker, g configs.Group, primary string, det statemachine.Detection) sitepair.Decision {
	t.Helper()
	d, err := decide(tr, g, primary, det, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// abcGroup is a group of three primary candidates a, b and c.
func abcGroup(failure, recovery int) configs.Group {
	return configs.Group{Name: "g", FailureThreshold: failure, RecoveryThreshold: recovery, Sites: []configs.Site{
		{Name: "a", Role: configs.RolePrimaryCandidate},
		{Name: "b", Role: configs.RolePrimaryCandidate},
		{Name: "c", Role: configs.RolePrimaryCandidate},
	}}
}

// TestTrackerGroupInput feeds per-site scripts (one character per round,
// sites probed in order) and checks the group detection sitepair.Decide
// finds in the Tracker's observations after the last round.
func TestTrackerGroupInput(t *testing.T) {
	tests := []struct {
		name    string
		scripts map[string]string // site → probes; sites a, b, c
		want    statemachine.Code
		det     statemachine.Detection // "": corroborated
	}{
		{"nothing yet", map[string]string{"a": "", "b": "", "c": ""}, statemachine.Undetermined, ""},
		{"healthy", map[string]string{"a": "WWW", "b": "RRR", "c": "RRR"}, statemachine.Healthy, ""},
		{"primary not yet trusted", map[string]string{"a": "WW", "b": "RR", "c": "RR"}, statemachine.Undetermined, ""},
		{"primary blip", map[string]string{"a": "WWWF", "b": "RRRR", "c": "RRRR"}, statemachine.PrimaryDebouncing, ""},
		{"primary down, corroborated", map[string]string{"a": "WWWFF", "b": "RRRRL", "c": "RRRLS"}, statemachine.PrimaryDown, ""},
		{"partition: a replica still streams", map[string]string{"a": "WWWFF", "b": "RRRRL", "c": "RRRRR"}, statemachine.UnreachablePrimary, ""},
		// c's last probe failed (debouncing, still read-only): its last
		// reachable view (streaming) still stands, but it was read before
		// the probe that gave a up: nobody asked c since.
		{"witness view from last reachable probe", map[string]string{"a": "WWWFF", "b": "RRRRL", "c": "RRRRF"}, statemachine.AwaitingWitnesses, ""},
		// a crashed in round 4 after c was read: round 5 gives a up before
		// c's round-5 probe answered. A partition only if c still streams
		// then (the case above); lost, it is PrimaryDown.
		{"crash: a witness not read since", map[string]string{"a": "WWWFF", "b": "RRRRL", "c": "RRRR"}, statemachine.AwaitingWitnesses, ""},
		{"crash: the witness read again", map[string]string{"a": "WWWFF", "b": "RRRRL", "c": "RRRRL"}, statemachine.PrimaryDown, ""},
		{"replica lost for good", map[string]string{"a": "WWWWW", "b": "RRRFF", "c": "RRRRR"}, statemachine.ReplicaUnreachable, ""},
		// The detection policy is the decision's, applied to the same
		// observations: daemon-only ignores the replicas still streaming.
		{"partition seen daemon-only: primary down", map[string]string{"a": "WWWFF", "b": "RRRRR", "c": "RRRRR"}, statemachine.PrimaryDown, statemachine.DaemonOnly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := abcGroup(2, 3)
			tr, err := NewGroupTracker(g, nil)
			if err != nil {
				t.Fatal(err)
			}
			rounds := 0
			for _, s := range tt.scripts {
				rounds = max(rounds, len(s))
			}
			for i := range rounds {
				for _, site := range []string{"a", "b", "c"} {
					if s := tt.scripts[site]; i < len(s) {
						if _, _, err := tr.Observe(obsOf(site, i+1, s[i])); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			obs := tr.Observed(g)
			if len(obs.Sites) != 3 || obs.Sites[0].Name != "a" || obs.Sites[2].Name != "c" {
				t.Fatalf("observed shape: %+v", obs.Sites)
			}
			if got := decideOn(t, tr, g, "a", cmp.Or(tt.det, statemachine.Corroborated)).Detection; got.Code != tt.want || got.Primary != "a" {
				t.Errorf("Detect = %s (matched %v, primary %q), want %s; input %+v", got.Code, got.Matched, got.Primary, tt.want, obs.Sites)
			}
		})
	}
}

func TestTrackerBookkeeping(t *testing.T) {
	tr, err := NewTracker(TrackerConfig{Sites: []string{"a", "b"}, FailureThreshold: 2, RecoveryThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Latest("a"); ok {
		t.Errorf("Latest before any observation reported ok")
	}
	if _, _, err := tr.Observe(Observation{Site: "zz", Seq: 1}); !errors.Is(err, ErrUnknownSite) {
		t.Errorf("unknown site: err = %v, want ErrUnknownSite", err)
	}
	ok := obsOf("a", 1, 'W')
	ok.Status.ExecutedRaw = "0-1-10"
	ev, changed, err := tr.Observe(ok)
	if err != nil || !changed || ev.To != statemachine.Writable || ev.Site != "a" {
		t.Fatalf("first writable probe: %v %v %v, want transition to writable", ev, changed, err)
	}
	if _, changed, _ := tr.Observe(obsOf("a", 3, 'F')); changed {
		t.Errorf("one failure changed the state")
	}
	// A replayed or reordered observation is ignored.
	if _, changed, _ := tr.Observe(obsOf("a", 2, 'F')); changed {
		t.Errorf("older observation changed the state")
	}
	if got, _ := tr.Latest("a"); got.Seq != 3 {
		t.Errorf("Latest seq = %d, want 3 (older one ignored)", got.Seq)
	}
	v, _ := tr.Site("a")
	if !v.HasReachable || v.LastReachable.Status.ExecutedRaw != "0-1-10" || v.Latest.Reachable || !v.Debouncing || v.State != statemachine.Writable {
		t.Errorf("site view: %+v", v)
	}
	ev, changed, _ = tr.Observe(obsOf("a", 4, 'F'))
	if !changed || ev.To != statemachine.Unreachable {
		t.Errorf("second failure: %v %v, want unreachable", ev, changed)
	}
	if views := tr.Sites(); len(views) != 2 || views[1].Name != "b" || views[1].HasLatest || views[1].State != statemachine.Unknown {
		t.Errorf("Sites() = %+v", views)
	}
}

func TestNewTrackerErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  TrackerConfig
		want error
	}{
		{"no sites", TrackerConfig{FailureThreshold: 1, RecoveryThreshold: 1}, ErrInvalidConfig},
		{"duplicate", TrackerConfig{Sites: []string{"a", "a"}, FailureThreshold: 1, RecoveryThreshold: 1}, ErrInvalidConfig},
		{"empty name", TrackerConfig{Sites: []string{""}, FailureThreshold: 1, RecoveryThreshold: 1}, ErrInvalidConfig},
		{"bad threshold", TrackerConfig{Sites: []string{"a"}, RecoveryThreshold: 1}, statemachine.ErrInvalidThreshold},
	}
	for _, tt := range tests {
		if _, err := NewTracker(tt.cfg); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestNewGroupTracker(t *testing.T) {
	g := configs.Group{
		Name: "g", FailureThreshold: 1, RecoveryThreshold: 2, Detection: configs.DetectionDaemonOnly,
		Sites: []configs.Site{{Name: "x"}, {Name: "y"}},
	}
	tr, err := NewGroupTracker(g, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	// FailureThreshold 1: one failed probe is enough.
	ev, changed, _ := tr.Observe(Observation{Site: "x", Seq: 1})
	if !changed || ev.To != statemachine.Unreachable || !ev.At.Equal(t0) {
		t.Errorf("failure threshold 1: %v %v (probe without time stamped by the clock)", ev, changed)
	}
	if obs := tr.Observed(g); len(obs.Sites) != 2 || obs.Sites[1].Name != "y" || obs.Sites[0].State != statemachine.Unreachable {
		t.Errorf("observed: %+v", obs.Sites)
	}
	g.Detection = "vote"
	if _, err := NewGroupTracker(g, nil); !errors.Is(err, statemachine.ErrUnknownDetection) || !strings.Contains(err.Error(), "group g") {
		t.Errorf("bad detection: err = %v", err)
	}
}

func TestObservationProbe(t *testing.T) {
	tests := []struct {
		name          string
		o             Observation
		wantReachable bool
		wantWritable  bool
	}{
		{"failed", Observation{At: t0}, false, false},
		{"writable", Observation{At: t0, Reachable: true}, true, true},
		{"read-only", Observation{At: t0, Reachable: true, Status: mysqlctl.Status{ReadOnly: true}}, true, false},
		{"mysql super_read_only implies read_only", Observation{At: t0, Reachable: true, Status: mysqlctl.Status{ReadOnly: true, SuperReadOnly: true}}, true, false},
	}
	for _, tt := range tests {
		p := tt.o.Probe()
		if p.Reachable != tt.wantReachable || p.Writable != tt.wantWritable || !p.At.Equal(t0) {
			t.Errorf("%s: Probe() = %+v", tt.name, p)
		}
	}
}

// A replica's Seconds_Behind is NULL while its IO thread reconnects (e.g.
// after the primary died): that is "unknown", not "no lag". The view keeps
// the last known value with the time it was read.
func TestTrackerKeepsLastKnownLag(t *testing.T) {
	tr, err := NewTracker(TrackerConfig{Sites: []string{"b"}, FailureThreshold: 2, RecoveryThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	replica := func(seq int, io mysqlctl.ThreadState, lag time.Duration, known bool) Observation {
		o := obsOf("b", seq, 'R')
		o.Status.Replica = &mysqlctl.ReplicaStatus{IOThread: io, SQLThread: mysqlctl.ThreadYes, Lag: lag, LagKnown: known}
		return o
	}
	steps := []struct {
		name      string
		o         Observation
		wantLag   time.Duration
		wantKnown bool
		wantAt    int // seq of the probe that read the lag; 0: none
	}{
		{"no replication view yet", obsOf("b", 1, 'F'), 0, false, 0},
		{"NULL before any known value", replica(2, mysqlctl.ThreadConnecting, 0, false), 0, false, 0},
		{"known lag", replica(3, mysqlctl.ThreadYes, 7*time.Second, true), 7 * time.Second, true, 3},
		{"primary died: NULL keeps the last known", replica(4, mysqlctl.ThreadConnecting, 0, false), 7 * time.Second, true, 3},
		{"failed probe keeps it", obsOf("b", 5, 'F'), 7 * time.Second, true, 3},
		{"known zero replaces it", replica(6, mysqlctl.ThreadYes, 0, true), 0, true, 6},
		{"NULL again keeps zero", replica(7, mysqlctl.ThreadConnecting, 0, false), 0, true, 6},
		{"replayed older probe ignored", replica(5, mysqlctl.ThreadYes, time.Hour, true), 0, true, 6},
		{"new known lag", replica(8, mysqlctl.ThreadYes, 3*time.Second, true), 3 * time.Second, true, 8},
		{"no longer a replica: no lag", obsOf("b", 9, 'W'), 0, false, 0},
	}
	for _, st := range steps {
		if _, _, err := tr.Observe(st.o); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		v, _ := tr.Site("b")
		var wantAt time.Time
		if st.wantAt != 0 {
			wantAt = obsOf("b", st.wantAt, 'R').At
		}
		if v.Lag != st.wantLag || v.LagKnown != st.wantKnown || !v.LagAt.Equal(wantAt) {
			t.Errorf("%s: Lag=%v LagKnown=%t LagAt=%v; want %v %t %v", st.name, v.Lag, v.LagKnown, v.LagAt, st.wantLag, st.wantKnown, wantAt)
		}
	}
	if views := tr.Sites(); views[0].LagKnown {
		t.Errorf("Sites() view of a non-replica has a known lag: %+v", views[0])
	}
}

// The tracker keeps what the decision layer needs beyond the latest probe:
// consecutive refusals (a single one proves nothing) and when a replica was
// last seen streaming from its source (corroboration window).
func TestTrackerRefusalsAndStreaming(t *testing.T) {
	tr, err := NewTracker(TrackerConfig{Sites: []string{"a", "b"}, FailureThreshold: 2, RecoveryThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range "FFWF" {
		if _, _, err := tr.Observe(obsOf("a", i+1, byte(k))); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := tr.Site("a"); v.RefusedInARow != 1 {
		t.Errorf("refused in a row %d after F F W F, want 1", v.RefusedInARow)
	}
	for i, k := range "RRLS" {
		if _, _, err := tr.Observe(obsOf("b", i+1, byte(k))); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := tr.Site("b"); v.StreamingFrom != "a" || !v.StreamingAt.Equal(t0.Add(2*time.Second)) {
		t.Errorf("streaming from %q at %v, want a at step 2", v.StreamingFrom, v.StreamingAt)
	}
}

// A replica's lag is also measured from its GTID sets (issue 26 hole 9: an
// applier blocked inside a commit may report Seconds_Behind 0): how long
// what it had retrieved but not applied stays unapplied. A backlog that
// drains between probes is no lag; a tail received only in part (the
// source died mid-transaction, the relay log exhausted) is not backlog.
func TestTrackerMeasuresLagFromGTIDSets(t *testing.T) {
	tr, err := NewTracker(TrackerConfig{Sites: []string{"b"}, FailureThreshold: 2, RecoveryThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	maria := func(s string) gtid.Set { return gtid.MustParse(gtid.MariaDB, s) }
	replica := func(seq int, io mysqlctl.ThreadState, state, retrieved, executed string) Observation {
		o := obsOf("b", seq, 'R')
		o.Status.Executed = maria(executed)
		o.Status.Replica = &mysqlctl.ReplicaStatus{IOThread: io, SQLThread: mysqlctl.ThreadYes, SQLState: state, Retrieved: maria(retrieved), LagKnown: true}
		return o
	}
	const applying, idle = "Reading event from the relay log", "Slave has read all relay log; waiting for more updates"
	steps := []struct {
		name string
		o    Observation
		want time.Duration
	}{
		{"caught up", replica(1, mysqlctl.ThreadYes, idle, "0-1-10", "0-1-10"), 0},
		{"a backlog appears", replica(2, mysqlctl.ThreadYes, applying, "0-1-15", "0-1-12"), 0},
		{"it drained; a new one", replica(3, mysqlctl.ThreadYes, applying, "0-1-20", "0-1-16"), 0},
		{"not drained a second later", replica(4, mysqlctl.ThreadYes, applying, "0-1-25", "0-1-16"), time.Second},
		{"failed probe keeps it", obsOf("b", 5, 'F'), time.Second},
		{"still not drained", replica(6, mysqlctl.ThreadYes, applying, "0-1-30", "0-1-17"), 3 * time.Second},
		{"IO stopped, still applying: still lag", replica(7, mysqlctl.ThreadNo, applying, "0-1-30", "0-1-19"), 4 * time.Second},
		{"relay log exhausted short of a partial tail: no backlog", replica(8, mysqlctl.ThreadNo, idle, "0-1-30", "0-1-29"), 0},
		{"caught up again", replica(9, mysqlctl.ThreadYes, idle, "0-1-31", "0-1-31"), 0},
		{"behind again", replica(10, mysqlctl.ThreadYes, applying, "0-1-40", "0-1-31"), 0},
		{"no longer a replica: none", obsOf("b", 11, 'W'), 0},
		{"a replica again, behind", replica(12, mysqlctl.ThreadYes, applying, "0-1-50", "0-1-41"), 0},
		{"two seconds on", replica(14, mysqlctl.ThreadYes, applying, "0-1-55", "0-1-41"), 2 * time.Second},
	}
	for _, st := range steps {
		if _, _, err := tr.Observe(st.o); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if v, _ := tr.Site("b"); v.BacklogAge != st.want {
			t.Errorf("%s: BacklogAge=%v, want %v", st.name, v.BacklogAge, st.want)
		}
	}
}
