package statemachine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// probes turns a script such as "WWF R" into probes one second apart:
// W = writable, R = read-only, F = failed; spaces are ignored.
func probes(script string) []Probe {
	var out []Probe
	for _, c := range strings.ReplaceAll(script, " ", "") {
		p := Probe{At: t0.Add(time.Duration(len(out)) * time.Second)}
		switch c {
		case 'W':
			p.Reachable, p.Writable = true, true
		case 'R':
			p.Reachable = true
		case 'F':
		default:
			panic("bad probe script " + script)
		}
		out = append(out, p)
	}
	return out
}

// run feeds the script and renders each transition as "from>to@i" where i
// is the 1-based index of the probe that caused it.
func run(t *testing.T, m *Machine, script string) []string {
	t.Helper()
	var evs []string
	for i, p := range probes(script) {
		if ev, ok := m.Observe(p); ok {
			evs = append(evs, fmt.Sprintf("%s>%s@%d", ev.From, ev.To, i+1))
		}
	}
	return evs
}

func TestStateString(t *testing.T) {
	want := map[State]string{Unknown: "unknown", Writable: "writable", ReadOnly: "read-only", Unreachable: "unreachable", State(9): "State(9)"}
	for s, w := range want {
		if got := s.String(); got != w {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, w)
		}
	}
}

func TestMachineTransitions(t *testing.T) {
	tests := []struct {
		name       string
		fail, rec  int
		script     string
		want       State
		wantEvents []string
	}{
		// From Unknown.
		{"unknown to read-only on the first read-only probe", 3, 3, "R", ReadOnly, []string{"unknown>read-only@1"}},
		{"unknown stays unknown one writable probe short", 3, 3, "WW", Unknown, nil},
		{"unknown to writable exactly at the recovery threshold", 3, 3, "WWW", Writable, []string{"unknown>writable@3"}},
		{"unknown stays unknown one failure short", 3, 3, "FF", Unknown, nil},
		{"unknown to unreachable exactly at the failure threshold", 3, 3, "FFF", Unreachable, []string{"unknown>unreachable@3"}},
		{"unknown stays unknown while writable and failed probes alternate", 2, 2, "WFWFWF", Unknown, nil},

		// From Writable.
		{"writable: n-1 failures then a success resets the streak", 3, 1, "W FF W FF", Writable, []string{"unknown>writable@1"}},
		{"writable to unreachable after n consecutive failures", 3, 1, "W FF W FFF", Unreachable, []string{"unknown>writable@1", "writable>unreachable@7"}},
		{"writable: n-1 failures then read-only goes read-only at once", 3, 1, "W FF R", ReadOnly, []string{"unknown>writable@1", "writable>read-only@4"}},
		{"writable to read-only immediately", 3, 3, "WWW R", ReadOnly, []string{"unknown>writable@3", "writable>read-only@4"}},
		{"writable probes keep writable without events", 1, 1, "WWWW", Writable, []string{"unknown>writable@1"}},

		// From ReadOnly.
		{"read-only interrupts a writable streak", 3, 3, "R WW R WW", ReadOnly, []string{"unknown>read-only@1"}},
		{"read-only to writable after an uninterrupted streak", 3, 3, "R WW R WWW", Writable, []string{"unknown>read-only@1", "read-only>writable@7"}},
		{"a failed probe interrupts a writable streak", 3, 3, "R WW F WW", ReadOnly, []string{"unknown>read-only@1"}},
		{"read-only to unreachable at the failure threshold", 2, 3, "R F R FF", Unreachable, []string{"unknown>read-only@1", "read-only>unreachable@5"}},
		{"read-only probes keep read-only without events", 3, 3, "RRR", ReadOnly, []string{"unknown>read-only@1"}},

		// From Unreachable.
		{"unreachable to read-only immediately", 2, 3, "FF R", ReadOnly, []string{"unknown>unreachable@2", "unreachable>read-only@3"}},
		{"unreachable stays unreachable one writable probe short", 2, 3, "FF WW", Unreachable, []string{"unknown>unreachable@2"}},
		{"unreachable to writable at the recovery threshold", 2, 3, "FF WWW", Writable, []string{"unknown>unreachable@2", "unreachable>writable@5"}},
		{"a failed probe interrupts recovery from unreachable", 2, 3, "FF WW F WW", Unreachable, []string{"unknown>unreachable@2"}},
		{"failures while unreachable emit nothing", 2, 3, "FFFFF", Unreachable, []string{"unknown>unreachable@2"}},

		// Thresholds of 1 make every probe decisive.
		{"thresholds of one follow every probe", 1, 1, "W F R W", Writable, []string{"unknown>writable@1", "writable>unreachable@2", "unreachable>read-only@3", "read-only>writable@4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMachine("db1", Config{FailureThreshold: tc.fail, RecoveryThreshold: tc.rec})
			if err != nil {
				t.Fatal(err)
			}
			evs := run(t, m, tc.script)
			if m.State() != tc.want {
				t.Errorf("state after %q = %s, want %s", tc.script, m.State(), tc.want)
			}
			if fmt.Sprint(evs) != fmt.Sprint(tc.wantEvents) {
				t.Errorf("events after %q = %v, want %v", tc.script, evs, tc.wantEvents)
			}
		})
	}
}

func TestMachineEventFields(t *testing.T) {
	m, err := NewMachine("db1", Config{FailureThreshold: 2, RecoveryThreshold: 2})
	if err != nil {
		t.Fatal(err)
	}
	ps := probes("FF R WW")
	want := []Event{
		{Site: "db1", From: Unknown, To: Unreachable, At: ps[1].At, Reason: ReasonFailureThreshold, Streak: 2},
		{Site: "db1", From: Unreachable, To: ReadOnly, At: ps[2].At, Reason: ReasonReadOnlyProbe, Streak: 1},
		{Site: "db1", From: ReadOnly, To: Writable, At: ps[4].At, Reason: ReasonWritableThreshold, Streak: 2},
	}
	var got []Event
	for _, p := range ps {
		if ev, ok := m.Observe(p); ok {
			got = append(got, ev)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if !m.Since().Equal(ps[4].At) || !m.LastProbe().Equal(ps[4].At) {
		t.Errorf("Since = %v, LastProbe = %v, want both %v", m.Since(), m.LastProbe(), ps[4].At)
	}
	if s := got[0].String(); s != "db1: unknown -> unreachable (failure-threshold after 2 probes)" {
		t.Errorf("Event.String() = %q", s)
	}
}

func TestMachinePending(t *testing.T) {
	tests := []struct {
		script     string
		wantState  State
		wantTo     State
		wantStreak int
	}{
		{"", Unknown, Unknown, 0},
		{"W", Unknown, Writable, 1},
		{"F", Unknown, Unreachable, 1},
		{"WWW", Writable, Writable, 0},
		{"WWW F", Writable, Unreachable, 1},
		{"WWW FF", Writable, Unreachable, 2},
		{"WWW FF W", Writable, Writable, 0},
		{"R W", ReadOnly, Writable, 1},
		{"R", ReadOnly, ReadOnly, 0},
		{"FFF", Unreachable, Unreachable, 0},
		{"FFF WW", Unreachable, Writable, 2},
	}
	for _, tc := range tests {
		m, _ := NewMachine("db1", Config{FailureThreshold: 3, RecoveryThreshold: 3})
		run(t, m, tc.script)
		to, n := m.Pending()
		if m.State() != tc.wantState || to != tc.wantTo || n != tc.wantStreak {
			t.Errorf("%q: state %s pending (%s, %d), want %s pending (%s, %d)", tc.script, m.State(), to, n, tc.wantState, tc.wantTo, tc.wantStreak)
		}
		if m.Debouncing() != (tc.wantStreak > 0) {
			t.Errorf("%q: Debouncing() = %v", tc.script, m.Debouncing())
		}
	}
}

func TestMachineIgnoresStaleProbes(t *testing.T) {
	m, _ := NewMachine("db1", Config{FailureThreshold: 1, RecoveryThreshold: 1})
	m.Observe(Probe{Reachable: true, At: t0.Add(10 * time.Second)})
	if ev, ok := m.Observe(Probe{At: t0.Add(5 * time.Second)}); ok || m.State() != ReadOnly {
		t.Fatalf("a probe older than the last one changed the state: %v %s", ev, m.State())
	}
	// A probe stamped at the same instant is not stale.
	if _, ok := m.Observe(Probe{At: t0.Add(10 * time.Second)}); !ok || m.State() != Unreachable {
		t.Fatalf("same-instant probe was ignored; state %s", m.State())
	}
}

func TestMachineUsesInjectedClock(t *testing.T) {
	now := t0.Add(time.Hour)
	m, _ := NewMachine("db1", Config{FailureThreshold: 1, RecoveryThreshold: 1, Clock: func() time.Time { return now }})
	ev, ok := m.Observe(Probe{Reachable: true})
	if !ok || !ev.At.Equal(now) || !m.LastProbe().Equal(now) {
		t.Fatalf("event %v, last probe %v; want stamped with the injected clock %v", ev, m.LastProbe(), now)
	}
}

func TestNewMachineRejectsBadThresholds(t *testing.T) {
	for _, cfg := range []Config{{FailureThreshold: 0, RecoveryThreshold: 1}, {FailureThreshold: 1, RecoveryThreshold: 0}, {FailureThreshold: -1, RecoveryThreshold: 3}} {
		if _, err := NewMachine("db1", cfg); !errors.Is(err, ErrInvalidThreshold) {
			t.Errorf("NewMachine(%+v) error = %v, want ErrInvalidThreshold", cfg, err)
		}
	}
}
