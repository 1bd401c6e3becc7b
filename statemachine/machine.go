package statemachine

import (
	"errors"
	"fmt"
	"time"
)

// State is the debounced state of one site as seen by the daemon.
type State int

// The debounced site states. The zero value is Unknown.
const (
	// Unknown: not enough probes yet to say anything.
	Unknown State = iota
	// Writable: reachable and accepting writes (read_only=OFF).
	Writable
	// ReadOnly: reachable and refusing writes (read_only=ON).
	ReadOnly
	// Unreachable: FailureThreshold consecutive probes failed.
	Unreachable
)

// AllStates returns every State, in declaration order.
func AllStates() []State { return []State{Unknown, Writable, ReadOnly, Unreachable} }

// String returns "unknown", "writable", "read-only" or "unreachable".
func (s State) String() string {
	switch s {
	case Unknown:
		return "unknown"
	case Writable:
		return "writable"
	case ReadOnly:
		return "read-only"
	case Unreachable:
		return "unreachable"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Reachable reports whether the state proves the site answered its last
// decisive probe (Writable or ReadOnly).
func (s State) Reachable() bool { return s == Writable || s == ReadOnly }

// Probe is the result of one poll of a site.
type Probe struct {
	// Reachable is false when the probe failed (timeout, refused, error).
	Reachable bool
	// Writable is the site's writability (read_only=OFF); only meaningful
	// when Reachable.
	Writable bool
	// At is when the probe completed, on the daemon's clock. The zero value
	// means "now" according to the Machine's Config.Clock.
	At time.Time
}

// Reason says why a site changed state.
type Reason string

// Transition reasons.
const (
	// ReasonFailureThreshold: FailureThreshold consecutive probes failed.
	ReasonFailureThreshold Reason = "failure-threshold"
	// ReasonReadOnlyProbe: one probe found the site read-only.
	ReasonReadOnlyProbe Reason = "read-only-probe"
	// ReasonWritableThreshold: RecoveryThreshold consecutive probes found
	// the site writable.
	ReasonWritableThreshold Reason = "writable-threshold"
)

// Event is one state transition of one site.
type Event struct {
	// Site is the site's name.
	Site string
	// From is the state before the transition.
	From State
	// To is the state after the transition.
	To State
	// At is the time of the probe that caused it (daemon clock).
	At time.Time
	// Reason says which rule fired.
	Reason Reason
	// Streak is the number of consecutive probes that led to To.
	Streak int
}

// String renders the event for humans, e.g.
// "db1: writable -> unreachable (failure-threshold after 3 probes)".
func (e Event) String() string {
	return fmt.Sprintf("%s: %s -> %s (%s after %d probes)", e.Site, e.From, e.To, e.Reason, e.Streak)
}

// Config tunes a Machine.
type Config struct {
	// FailureThreshold is how many consecutive failed probes mark the site
	// Unreachable. Must be at least 1.
	FailureThreshold int
	// RecoveryThreshold is how many consecutive writable probes mark the
	// site Writable. Must be at least 1.
	RecoveryThreshold int
	// Clock stamps probes whose At is zero. Nil means time.Now.
	Clock func() time.Time
}

// ErrInvalidThreshold is returned by NewMachine when a threshold is below 1.
var ErrInvalidThreshold = errors.New("statemachine: threshold must be at least 1")

// Machine debounces the probes of one site. It is not safe for concurrent
// use: feed it from the site's single probe loop.
type Machine struct {
	site  string
	cfg   Config
	state State
	since time.Time // time of the last transition (zero before the first)
	last  time.Time // time of the last accepted probe
	fails int       // consecutive failed probes
	writs int       // consecutive writable probes
}

// NewMachine returns a Machine for site, starting in Unknown.
func NewMachine(site string, cfg Config) (*Machine, error) {
	if cfg.FailureThreshold < 1 {
		return nil, fmt.Errorf("site %s: failure threshold %d: %w", site, cfg.FailureThreshold, ErrInvalidThreshold)
	}
	if cfg.RecoveryThreshold < 1 {
		return nil, fmt.Errorf("site %s: recovery threshold %d: %w", site, cfg.RecoveryThreshold, ErrInvalidThreshold)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Machine{site: site, cfg: cfg}, nil
}

// Site returns the site's name.
func (m *Machine) Site() string { return m.site }

// State returns the current debounced state.
func (m *Machine) State() State { return m.state }

// Since returns the time of the last transition (zero while never changed).
func (m *Machine) Since() time.Time { return m.since }

// LastProbe returns the time of the last accepted probe (zero before any).
func (m *Machine) LastProbe() time.Time { return m.last }

// Pending returns the state a streak of probes is building towards and the
// streak's length so far. When no streak towards another state is in
// progress it returns (State(), 0).
func (m *Machine) Pending() (State, int) {
	switch {
	case m.fails > 0 && m.state != Unreachable:
		return Unreachable, m.fails
	case m.writs > 0 && m.state != Writable:
		return Writable, m.writs
	}
	return m.state, 0
}

// Debouncing reports whether probes disagree with the current state but
// have not yet reached their threshold.
func (m *Machine) Debouncing() bool {
	_, n := m.Pending()
	return n > 0
}

// Observe feeds one probe and returns the transition it caused, if any.
// A probe stamped earlier than the last accepted one is ignored, so a slow
// probe finishing late cannot undo what a newer one established.
func (m *Machine) Observe(p Probe) (Event, bool) {
	at := p.At
	if at.IsZero() {
		at = m.cfg.Clock()
	}
	// Out-of-order results must not overwrite newer knowledge.
	if !m.last.IsZero() && at.Before(m.last) {
		return Event{}, false
	}
	m.last = at
	switch {
	case !p.Reachable:
		m.fails++
		m.writs = 0
		// One lost probe is not an outage: wait for FailureThreshold.
		if m.state != Unreachable && m.fails >= m.cfg.FailureThreshold {
			return m.move(Unreachable, at, ReasonFailureThreshold, m.fails), true
		}
	case !p.Writable:
		m.fails = 0
		m.writs = 0
		// Read-only is the safe state: trust it at once.
		if m.state != ReadOnly {
			return m.move(ReadOnly, at, ReasonReadOnlyProbe, 1), true
		}
	default:
		m.fails = 0
		m.writs++
		// A flapping server must not be taken for a stable primary.
		if m.state != Writable && m.writs >= m.cfg.RecoveryThreshold {
			return m.move(Writable, at, ReasonWritableThreshold, m.writs), true
		}
	}
	return Event{}, false
}

func (m *Machine) move(to State, at time.Time, r Reason, streak int) Event {
	ev := Event{Site: m.site, From: m.state, To: to, At: at, Reason: r, Streak: streak}
	m.state = to
	m.since = at
	return ev
}
