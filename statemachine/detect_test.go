package statemachine

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

type opt func(*SiteInput)

// follows: replicating from p, connected and streaming.
func follows(p string) opt {
	return func(s *SiteInput) { s.ReplicatingFrom, s.IOConnected = p, true }
}

// lostIO: replicating from p, IO thread disconnected.
func lostIO(p string) opt { return func(s *SiteInput) { s.ReplicatingFrom = p } }

// silent: replicating from p, connected but no events or heartbeats.
func silent(p string) opt {
	return func(s *SiteInput) { s.ReplicatingFrom, s.IOConnected, s.SourceSilent = p, true, true }
}

// readAt: the site's replication fields were read by a probe completed at.
func readAt(at time.Time) opt { return func(s *SiteInput) { s.LastReachableAt = at } }

// gaveUpAt: the probe completed at made the site's debounced state.
func gaveUpAt(at time.Time) opt { return func(s *SiteInput) { s.StateSince = at } }

func broken(s *SiteInput)     { s.ReplicationBroken = true }
func debouncing(s *SiteInput) { s.Debouncing = true }
func exited(s *SiteInput)     { s.Exited = true }

func site(name string, st State, opts ...opt) SiteInput {
	s := SiteInput{Name: name, State: st}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func group(primary string, sites ...SiteInput) GroupInput {
	return GroupInput{Primary: primary, Sites: sites}
}

// canonical gives, for every row, one input for which that row is the
// detected code.
var canonical = map[Code]GroupInput{
	TotalLoss:                  group("a", site("a", Unreachable), site("b", Unreachable), site("c", Unreachable)),
	SplitBrain:                 group("a", site("a", Writable), site("b", Writable), site("c", ReadOnly, follows("a"))),
	Undetermined:               group("a", site("a", Writable), site("b", Unknown)),
	PrimaryExited:              group("a", site("a", Writable, debouncing, exited), site("b", ReadOnly, lostIO("a")), site("c", ReadOnly, silent("a"))),
	PrimaryDebouncing:          group("a", site("a", Writable, debouncing), site("b", ReadOnly, follows("a"))),
	UnreachablePrimary:         group("a", site("a", Unreachable), site("b", ReadOnly, follows("a")), site("c", ReadOnly, lostIO("a"))),
	AwaitingWitnesses:          group("a", site("a", Unreachable, gaveUpAt(t0)), site("b", ReadOnly, follows("a"), readAt(t0.Add(-time.Millisecond))), site("c", ReadOnly, lostIO("a"), readAt(t0))),
	PrimaryDownUncorroborated:  group("a", site("a", Unreachable), site("b", ReadOnly), site("c", Unreachable)),
	PrimaryDown:                group("a", site("a", Unreachable), site("b", ReadOnly, lostIO("a")), site("c", ReadOnly, silent("a"))),
	NoPrimary:                  group("a", site("a", ReadOnly), site("b", ReadOnly, follows("a"))),
	UnexpectedPrimary:          group("a", site("a", ReadOnly, follows("b")), site("b", Writable)),
	ReplicationBroken:          group("a", site("a", Writable), site("b", ReadOnly, follows("a"), broken)),
	ReplicaNotFollowingPrimary: group("a", site("a", Writable), site("b", ReadOnly)),
	ReplicaUnreachable:         group("a", site("a", Writable), site("b", Unreachable), site("c", ReadOnly, follows("a"))),
	Healthy:                    group("a", site("a", Writable), site("b", ReadOnly, follows("a")), site("c", ReadOnly, follows("a"))),
}

func TestTableIsWellFormed(t *testing.T) {
	rows := Table()
	seen := map[Code]bool{}
	for i, r := range rows {
		if r.Code == "" || r.Meaning == "" || r.Match == nil {
			t.Errorf("row %d is incomplete: %+v", i, r)
		}
		if seen[r.Code] {
			t.Errorf("code %s appears twice", r.Code)
		}
		seen[r.Code] = true
		if i > 0 && r.Priority <= rows[i-1].Priority {
			t.Errorf("row %s (priority %d) is not after %s (priority %d)", r.Code, r.Priority, rows[i-1].Code, rows[i-1].Priority)
		}
		if Meaning(r.Code) != r.Meaning {
			t.Errorf("Meaning(%s) = %q", r.Code, Meaning(r.Code))
		}
	}
	if len(rows) != len(canonical) {
		t.Errorf("table has %d rows, tests cover %d", len(rows), len(canonical))
	}
	rows[0].Code = "mutated"
	if Table()[0].Code == "mutated" {
		t.Error("Table returned the package's own slice")
	}
}

func TestDetectEachRow(t *testing.T) {
	for _, row := range Table() {
		t.Run(string(row.Code), func(t *testing.T) {
			in, ok := canonical[row.Code]
			if !ok {
				t.Fatalf("no canonical input for %s", row.Code)
			}
			if !row.Match(in) {
				t.Errorf("row %s does not match its own canonical input", row.Code)
			}
			if got := Detect(in); got.Code != row.Code {
				t.Errorf("Detect = %s (matched %v), want %s", got.Code, got.Matched, row.Code)
			}
		})
	}
}

// TestDetectPriorityOrder walks the table row by row with inputs matching a
// row and a lower one: the higher row must win and the lower one must still
// be reported in Matched.
func TestDetectPriorityOrder(t *testing.T) {
	tests := []struct {
		name string
		in   GroupInput
		want Code
		also Code
	}{
		{"total loss beats uncorroborated primary down", group("a", site("a", Unreachable), site("b", Unreachable)), TotalLoss, PrimaryDownUncorroborated},
		{"total loss beats daemon-only primary down",
			GroupInput{Primary: "a", Detection: DaemonOnly, Sites: []SiteInput{site("a", Unreachable), site("b", Unreachable)}}, TotalLoss, PrimaryDown},
		{"split brain beats undetermined", group("a", site("a", Writable), site("b", Writable), site("c", Unknown)), SplitBrain, Undetermined},
		{"undetermined beats primary debouncing", group("a", site("a", Writable, debouncing), site("b", Unknown)), Undetermined, PrimaryDebouncing},
		{"undetermined beats no primary", group("a", site("a", ReadOnly), site("b", Unknown)), Undetermined, NoPrimary},
		{"undetermined beats primary exited", group("a", site("a", Writable, debouncing, exited), site("b", ReadOnly, lostIO("a")), site("c", Unknown)), Undetermined, PrimaryExited},
		{"primary exited beats replica not following", canonical[PrimaryExited], PrimaryExited, ReplicaNotFollowingPrimary},
		{"primary debouncing beats replica unreachable", group("a", site("a", Writable, debouncing), site("b", Unreachable)), PrimaryDebouncing, ReplicaUnreachable},
		{"unreachable primary beats no primary", group("a", site("a", Unreachable), site("b", ReadOnly, follows("a"))), UnreachablePrimary, NoPrimary},
		{"uncorroborated beats no primary", group("a", site("a", Unreachable), site("b", ReadOnly, follows("c")), site("c", ReadOnly)), PrimaryDownUncorroborated, NoPrimary},
		{"primary down beats no primary", group("a", site("a", Unreachable), site("b", ReadOnly, lostIO("a"))), PrimaryDown, NoPrimary},
		{"unexpected primary beats replica not following", group("a", site("a", ReadOnly), site("b", Writable)), UnexpectedPrimary, ReplicaNotFollowingPrimary},
		{"unexpected primary beats healthy", canonical[UnexpectedPrimary], UnexpectedPrimary, Healthy},
		{"replication broken beats replica not following", group("a", site("a", Writable), site("b", ReadOnly, lostIO("a"), broken)), ReplicationBroken, ReplicaNotFollowingPrimary},
		{"replica not following beats replica unreachable", group("a", site("a", Writable), site("b", ReadOnly), site("c", Unreachable)), ReplicaNotFollowingPrimary, ReplicaUnreachable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Detect(tc.in)
			if got.Code != tc.want || !got.Has(tc.also) {
				t.Errorf("Detect = %s matched %v; want %s with %s also matched", got.Code, got.Matched, tc.want, tc.also)
			}
		})
	}
}

func TestDetectCorroboration(t *testing.T) {
	tests := []struct {
		name string
		in   GroupInput
		want Code
	}{
		{"all witnesses lost IO", group("a", site("a", Unreachable), site("b", ReadOnly, lostIO("a")), site("c", ReadOnly, lostIO("a"))), PrimaryDown},
		{"one witness still streams", group("a", site("a", Unreachable), site("b", ReadOnly, lostIO("a")), site("c", ReadOnly, follows("a"))), UnreachablePrimary},
		{"a witness with a connected but silent source counts as lost", group("a", site("a", Unreachable), site("b", ReadOnly, silent("a"))), PrimaryDown},
		{"heartbeat older than SilenceAfter counts as lost",
			GroupInput{Primary: "a", SilenceAfter: 5 * time.Second, Sites: []SiteInput{site("a", Unreachable),
				site("b", ReadOnly, follows("a"), func(s *SiteInput) { s.LastHeartbeatAge = 6 * time.Second })}}, PrimaryDown},
		{"heartbeat younger than SilenceAfter still streams",
			GroupInput{Primary: "a", SilenceAfter: 5 * time.Second, Sites: []SiteInput{site("a", Unreachable),
				site("b", ReadOnly, follows("a"), func(s *SiteInput) { s.LastHeartbeatAge = 4 * time.Second })}}, UnreachablePrimary},
		{"replicas pointed elsewhere are no witnesses", group("a", site("a", Unreachable), site("b", ReadOnly, lostIO("c")), site("c", ReadOnly)), PrimaryDownUncorroborated},
		{"unreachable replicas are no witnesses", group("a", site("a", Unreachable), site("b", Unreachable, lostIO("a")), site("c", ReadOnly, lostIO("a"))), PrimaryDown},
		{"zero reachable replicas cannot corroborate", group("a", site("a", Unreachable), site("b", Unreachable), site("c", ReadOnly)), PrimaryDownUncorroborated},
		{"daemon-only ignores a streaming replica",
			GroupInput{Primary: "a", Detection: DaemonOnly, Sites: []SiteInput{site("a", Unreachable), site("b", ReadOnly, follows("a"))}}, PrimaryDown},
		{"daemon-only needs no witness",
			GroupInput{Primary: "a", Detection: DaemonOnly, Sites: []SiteInput{site("a", Unreachable), site("b", ReadOnly)}}, PrimaryDown},
		{"no expected primary: nothing is down, nobody writable", group("", site("a", Unreachable), site("b", ReadOnly)), NoPrimary},
		{"debouncing replica does not make the primary debounce", group("a", site("a", Writable), site("b", ReadOnly, follows("a"), debouncing)), Healthy},
		{"sole writable other than expected primary is the effective primary", group("b", site("a", Writable, debouncing), site("b", Unreachable)), PrimaryDebouncing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Detect(tc.in); got.Code != tc.want {
				t.Errorf("Detect = %s (matched %v, lost %v, streaming %v), want %s", got.Code, got.Matched, got.Lost, got.Streaming, tc.want)
			}
		})
	}
}

// TestPrimaryExitedNeedsEveryGuard: a sidecar's word that mysqld exited
// shortens detection only for the recorded primary whose latest probe
// failed below the threshold, under corroborated detection, with every
// witness lost and no other writable site; otherwise detection is exactly
// what it was without the report.
func TestPrimaryExitedNeedsEveryGuard(t *testing.T) {
	witnesses := []SiteInput{site("b", ReadOnly, lostIO("a")), site("c", ReadOnly, silent("a"))}
	with := func(primary SiteInput, others ...SiteInput) GroupInput {
		return group("a", append([]SiteInput{primary}, others...)...)
	}
	tests := []struct {
		name string
		in   GroupInput
		want Code
	}{
		{"exit seen, probe failing, replicas lost: down at once", with(site("a", Writable, debouncing, exited), witnesses...), PrimaryExited},
		// Without the report, a failing primary is debounced as before.
		{"no exit report", with(site("a", Writable, debouncing), witnesses...), PrimaryDebouncing},
		// A probe reached it since: a mysqld answers (restarted), no failure streak.
		{"latest probe succeeded", with(site("a", Writable, exited), witnesses...), ReplicaNotFollowingPrimary},
		// Past the threshold the existing rows decide, report or not.
		{"primary already unreachable", with(site("a", Unreachable, exited), witnesses...), PrimaryDown},
		{"a witness still streams", with(site("a", Writable, debouncing, exited), site("b", ReadOnly, lostIO("a")), site("c", ReadOnly, follows("a"))), PrimaryDebouncing},
		{"no witness at all", with(site("a", Writable, debouncing, exited), site("b", ReadOnly)), PrimaryDebouncing},
		{"a witness's IO thread stopped is no witness", with(site("a", Writable, debouncing, exited), site("b", ReadOnly, lostIO("a"), func(s *SiteInput) { s.IOStopped = true })), PrimaryDebouncing},
		// The report belongs to another site than the recorded primary.
		{"exit of a replica, not the primary", with(site("a", Writable, debouncing), site("b", ReadOnly, lostIO("a"), exited), site("c", ReadOnly, silent("a"))), PrimaryDebouncing},
		{"primary under maintenance", with(site("a", Writable, debouncing, exited, func(s *SiteInput) { s.Maintenance = true }), witnesses...), PrimaryDebouncing},
		{"daemon-only detection", GroupInput{Primary: "a", Detection: DaemonOnly, Sites: append([]SiteInput{site("a", Writable, debouncing, exited)}, witnesses...)}, PrimaryDebouncing},
		{"another writable site", with(site("a", Writable, debouncing, exited), site("b", Writable), site("c", ReadOnly, lostIO("a"))), SplitBrain},
		{"writable site is not the recorded primary", group("b", site("a", Writable, debouncing, exited), site("b", Unreachable), site("c", ReadOnly, lostIO("a"))), PrimaryDebouncing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Detect(tc.in); got.Code != tc.want {
				t.Errorf("Detect = %s (matched %v), want %s", got.Code, got.Matched, tc.want)
			}
		})
	}
}

func TestDetectResultDetails(t *testing.T) {
	got := Detect(canonical[UnreachablePrimary])
	if got.Primary != "a" || len(got.Lost) != 1 || got.Lost[0] != "c" || len(got.Streaming) != 1 || got.Streaming[0] != "b" {
		t.Errorf("Detect = %+v, want primary a, lost [c], streaming [b]", got)
	}
	if got := Detect(GroupInput{}); got.Code != Undetermined {
		t.Errorf("empty input detected as %s, want Undetermined", got.Code)
	}
}

// TestTableCoversEveryInput: random groups always match at least one row,
// so Detect's fallback is never what decides.
func TestTableCoversEveryInput(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c", "d"}
	for range 20000 {
		in := GroupInput{Primary: []string{"", "a", "b"}[r.IntN(3)]}
		if r.IntN(2) == 0 {
			in.Detection = DaemonOnly
		}
		for _, n := range names[:2+r.IntN(3)] {
			in.Sites = append(in.Sites, SiteInput{
				Name: n, State: AllStates()[r.IntN(4)], Debouncing: r.IntN(2) == 0,
				ReplicatingFrom: []string{"", "a", "b", "c"}[r.IntN(4)], IOConnected: r.IntN(2) == 0,
				SourceSilent: r.IntN(3) == 0, ReplicationBroken: r.IntN(3) == 0,
			})
		}
		matched := false
		for _, row := range table {
			matched = matched || row.Match(in)
		}
		if !matched {
			t.Fatalf("no row matches %+v", in)
		}
	}
}

func TestParseDetection(t *testing.T) {
	for in, want := range map[string]Detection{"": Corroborated, "corroborated": Corroborated, "daemon-only": DaemonOnly} {
		if got, err := ParseDetection(in); err != nil || got != want {
			t.Errorf("ParseDetection(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseDetection("majority"); !errors.Is(err, ErrUnknownDetection) {
		t.Errorf("ParseDetection(majority) error = %v, want ErrUnknownDetection", err)
	}
}
