package poller

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/statemachine"
)

// ErrUnknownSite: an observation names a site the Tracker does not know.
var ErrUnknownSite = errors.New("poller: unknown site")

// TrackerConfig configures NewTracker.
type TrackerConfig struct {
	// Sites are the group's site names, in configuration order.
	Sites []string
	// FailureThreshold and RecoveryThreshold configure every site's
	// statemachine.Machine.
	FailureThreshold, RecoveryThreshold int
	// Clock stamps observations without a time; nil means time.Now.
	Clock func() time.Time
}

// Tracker is the bookkeeping between the Poller and the decision: it feeds
// each site's observations into that site's statemachine.Machine, keeps the
// latest observations, and turns them into sitepair.Observed (Observed, in
// input.go). It decides nothing. It is safe for concurrent use (Observe is
// meant to be called from the Poller's sink).
type Tracker struct {
	mu    sync.Mutex
	order []string
	sites map[string]*tracked
}

type tracked struct {
	machine *statemachine.Machine
	latest  Observation // zero Seq: none yet
	lastOK  Observation // last reachable one; zero Seq: none yet
	lag     knownLag
	backlog backlog
	// refused counts the consecutive latest probes refused; streamingFrom
	// and streamingAt are the source and time of the last probe that saw
	// the site streaming from it.
	refused       int
	streamingFrom string
	streamingAt   time.Time
}

// knownLag is a replica's last known Seconds_Behind_Source/Master.
type knownLag struct {
	lag   time.Duration
	known bool
	at    time.Time
}

// observe keeps the last known lag: a NULL Seconds_Behind (a stopped or
// reconnecting thread, e.g. after the primary died) is "unknown", which must
// not read as "no lag"; the value read before it stands. A site that is no
// longer a replica has no lag.
func (k *knownLag) observe(o Observation) {
	if !o.Reachable {
		return
	}
	rep := o.Status.Replica
	switch {
	case rep == nil:
		*k = knownLag{}
	case rep.LagKnown:
		*k = knownLag{lag: rep.Lag, known: true, at: o.At}
	}
}

// backlog measures a replica's lag from its GTID sets: the transactions
// it had retrieved but not applied (retrieved − executed) when since was
// stamped stay pending until its executed set covers them; their wait is
// the lag. A backlog that drains between probes is no lag (a new one starts
// from its probe); a tail received only in part (relay log exhausted with
// the IO thread stopped: the source died mid-transaction) is not backlog.
// Seconds_Behind alone misses an applier blocked inside a commit (a
// replica's own semi-sync source side waiting for acknowledgements): it may
// say 0 while nothing is applied.
type backlog struct {
	pending gtid.Set
	since   time.Time // zero: nothing pending
	age     time.Duration
}

func (b *backlog) observe(o Observation) {
	if !o.Reachable {
		return
	}
	rep, executed := o.Status.Replica, o.Status.Executed
	switch {
	case rep == nil || rep.RelayExhausted() || gtid.CheckFlavor(executed, rep.Retrieved) != nil || executed.Covers(rep.Retrieved):
		*b = backlog{}
	case b.since.IsZero() || executed.Covers(b.pending):
		// What was pending got applied: whatever is pending now is new.
		*b = backlog{pending: rep.Retrieved, since: o.At}
	default:
		b.age = o.At.Sub(b.since)
	}
}

// NewTracker returns a Tracker with every site Unknown.
func NewTracker(cfg TrackerConfig) (*Tracker, error) {
	if len(cfg.Sites) == 0 {
		return nil, fmt.Errorf("new tracker: %w: no sites", ErrInvalidConfig)
	}
	t := &Tracker{sites: map[string]*tracked{}}
	for _, name := range cfg.Sites {
		if _, dup := t.sites[name]; dup || name == "" {
			return nil, fmt.Errorf("new tracker: %w: site name %q is empty or duplicated", ErrInvalidConfig, name)
		}
		m, err := statemachine.NewMachine(name, statemachine.Config{
			FailureThreshold:  cfg.FailureThreshold,
			RecoveryThreshold: cfg.RecoveryThreshold,
			Clock:             cfg.Clock,
		})
		if err != nil {
			return nil, fmt.Errorf("new tracker: %w", err)
		}
		t.order = append(t.order, name)
		t.sites[name] = &tracked{machine: m}
	}
	return t, nil
}

// NewGroupTracker returns a Tracker for a configured group: its sites and
// thresholds. The group's detection policy is the decision's
// (sitepair.Policy.Detection), not the Tracker's.
func NewGroupTracker(g configs.Group, clock func() time.Time) (*Tracker, error) {
	// A group that skipped configs validation with an unknown detection
	// policy is refused here too, before any of its probes is interpreted.
	if _, err := statemachine.ParseDetection(g.Detection); err != nil {
		return nil, fmt.Errorf("new tracker for group %s: %w", g.Name, err)
	}
	names := make([]string, len(g.Sites))
	for i, s := range g.Sites {
		names[i] = s.Name
	}
	t, err := NewTracker(TrackerConfig{
		Sites:             names,
		FailureThreshold:  g.FailureThreshold,
		RecoveryThreshold: g.RecoveryThreshold,
		Clock:             clock,
	})
	if err != nil {
		return nil, fmt.Errorf("group %s: %w", g.Name, err)
	}
	return t, nil
}

// Observe feeds one observation to its site's Machine and returns the
// transition it caused, if any. An observation not newer (by Seq) than the
// site's latest is ignored, so a replayed or reordered one cannot undo
// newer knowledge.
func (t *Tracker) Observe(o Observation) (statemachine.Event, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sites[o.Site]
	if !ok {
		return statemachine.Event{}, false, fmt.Errorf("observe %q: %w", o.Site, ErrUnknownSite)
	}
	if s.latest.Seq != 0 && o.Seq <= s.latest.Seq {
		return statemachine.Event{}, false, nil
	}
	s.latest = o
	if o.Reachable {
		s.lastOK = o
	}
	s.lag.observe(o)
	s.backlog.observe(o)
	if !o.Reachable && o.Class == ClassRefused {
		s.refused++
	} else {
		s.refused = 0
	}
	if o.Reachable && o.Follows != "" && o.IOConnected && !o.SourceSilent {
		s.streamingFrom, s.streamingAt = o.Follows, o.At
	}
	ev, changed := s.machine.Observe(o.Probe())
	return ev, changed, nil
}

// SiteView is a Tracker's knowledge of one site.
type SiteView struct {
	// Name of the site.
	Name string
	// State and Debouncing are the Machine's.
	State      statemachine.State
	Debouncing bool
	// Since is the time of the last state transition (zero if none).
	Since time.Time
	// Latest is the newest observation; HasLatest is false before the first.
	Latest    Observation
	HasLatest bool
	// LastReachable is the newest reachable observation (GTID sets, lag,
	// replication view as last read); HasReachable is false before one.
	LastReachable Observation
	HasReachable  bool
	// Lag is the replica's last KNOWN lag (Seconds_Behind_Source/Master)
	// and LagAt the completion time of the probe that read it; LagKnown is
	// false until a probe read one. A later probe reading NULL (IO thread
	// Connecting after the primary died, a stopped thread) leaves them as
	// they were, so a NULL never reads as "no lag": judge staleness by
	// LagAt. A reachable probe finding no replication clears them.
	Lag      time.Duration
	LagKnown bool
	LagAt    time.Time
	// BacklogAge is the replica's lag measured from its GTID sets, as of its
	// last reachable probe: how long what it had retrieved but not applied
	// has stayed unapplied (see backlog); 0 when none.
	BacklogAge time.Duration
	// RefusedInARow counts the consecutive latest probes refused (TCP
	// connection refused); 0 after any other outcome.
	RefusedInARow int
	// StreamingFrom and StreamingAt are the source and completion time of
	// the last probe that saw the site streaming (IO connected, source not
	// silent); zero when never.
	StreamingFrom string
	StreamingAt   time.Time
}

// Sites returns every site's view, in configuration order.
func (t *Tracker) Sites() []SiteView {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]SiteView, len(t.order))
	for i, name := range t.order {
		out[i] = t.view(name)
	}
	return out
}

// Site returns one site's view.
func (t *Tracker) Site(name string) (SiteView, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.sites[name]; !ok {
		return SiteView{}, false
	}
	return t.view(name), true
}

// Latest returns the site's newest observation.
func (t *Tracker) Latest(site string) (Observation, bool) {
	v, ok := t.Site(site)
	return v.Latest, ok && v.HasLatest
}

func (t *Tracker) view(name string) SiteView {
	s := t.sites[name]
	return SiteView{
		Name:          name,
		State:         s.machine.State(),
		Debouncing:    s.machine.Debouncing(),
		Since:         s.machine.Since(),
		Latest:        s.latest,
		HasLatest:     s.latest.Seq != 0,
		LastReachable: s.lastOK,
		HasReachable:  s.lastOK.Seq != 0,
		Lag:           s.lag.lag,
		LagKnown:      s.lag.known,
		LagAt:         s.lag.at,
		BacklogAge:    s.backlog.age,
		RefusedInARow: s.refused,
		StreamingFrom: s.streamingFrom,
		StreamingAt:   s.streamingAt,
	}
}
