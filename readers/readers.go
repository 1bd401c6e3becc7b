// Package readers decides, every round, which sites of a group serve reads
// (read routing, issue 29). It is pure: no I/O, the clock is injected, and it
// reads only what the poller already observed (sitepair.SiteObservation) and
// the group's persisted record (sitepair.Persisted).
//
// A replica is a good reader in a round when it replicates from the current
// recorded primary with the IO thread connected, the source not silent and
// the SQL thread running without error, and its lag (the larger of
// Seconds_Behind and the GTID-measured backlog) is known and at most MaxLag.
// Membership has hysteresis: a site joins after UpAfter consecutive good
// rounds and leaves after DownAfter consecutive bad ones, and no such
// freshness change happens sooner than UpAfter+DownAfter rounds after the
// site's previous change, so a replica flapping around MaxLag changes the
// set at most once per UpAfter+DownAfter rounds. Safety reasons (diverged,
// fenced by the operator, recloning, held for maintenance, replicating from
// another source than the primary, a failover in flight, no primary) take a
// site out at once.
//
// A Group Replication group (ComputeGroup) has the same hysteresis and
// includePrimary, on what the group's quorate verdict says of each member
// instead of replication threads.
//
// The state lives in memory only: a restarted or rebuilt daemon starts with
// no readers and fills them after UpAfter rounds (a persisted set could be
// arbitrarily stale by the time a new daemon reads it).
package readers

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/failoverd/failoverd/sitepair"
)

// IncludePrimary says when the recorded primary serves reads too.
type IncludePrimary string

// IncludePrimary values.
const (
	// PrimaryWhenNoReplica: the primary is a reader only while no replica is.
	PrimaryWhenNoReplica IncludePrimary = "whenNoReplica"
	// PrimaryAlways: the primary is a reader while it is healthy.
	PrimaryAlways IncludePrimary = "always"
	// PrimaryNever: the primary never serves reads.
	PrimaryNever IncludePrimary = "never"
)

// Config is a group's read-routing policy (configs.Readers).
type Config struct {
	// MaxLag is the most lag a reader may have.
	MaxLag time.Duration
	// UpAfter is how many consecutive good rounds make a site a reader,
	// DownAfter how many consecutive bad rounds end it (at least 1 each).
	UpAfter, DownAfter int
	// IncludePrimary says when the primary serves reads ("" is
	// PrimaryWhenNoReplica).
	IncludePrimary IncludePrimary
	// Round is the shortest time between two counted rounds: calls sooner
	// than Round after the last counted one apply only the safety exits
	// (the daemon decides several times per poll interval; hysteresis
	// counts poll rounds, not decisions). 0 counts every call.
	Round time.Duration
}

// Site is one site's read-routing eligibility.
type Site struct {
	// Eligible: the site is in the reader set.
	Eligible bool
	// Why says why it is in or out, in words.
	Why string
	// Since is when Eligible last changed (when the site was first seen if
	// it never changed).
	Since time.Time
	// LagSeconds is the lag the decision used; -1 when unknown.
	LagSeconds float64

	// in: the site passes the hysteresis (for the primary, Eligible also
	// depends on IncludePrimary and on the replicas).
	in bool
	// good and bad count the consecutive good and bad counted rounds.
	good, bad int
	// quiet counts the counted rounds since in last changed.
	quiet int
}

// State is the read-routing state of a group: the previous round's result,
// the input of the next. The zero value is a group with no readers yet.
type State struct {
	// Sites maps site names to their eligibility.
	Sites map[string]Site
	// At is the last counted round (zero before the first).
	At time.Time

	// applied is a Group Replication group's record of the primary's
	// gtid_executed over the last rounds, which its members' lag is
	// measured against (ComputeGroup; nil for an async group).
	applied []appliedSample
}

// Readers returns the names of the eligible sites, sorted.
func (s State) Readers() []string {
	var out []string
	for name, site := range s.Sites {
		if site.Eligible {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Event is a change of the reader set.
type Event struct {
	// Site joined (Added) or left the reader set.
	Site  string
	Added bool
	// Why is the site's Why after the change.
	Why string
}

// verdict is one site's evaluation in one round.
type verdict struct {
	good bool
	// safety: a bad verdict that takes the site out at once.
	safety bool
	why    string
	lag    float64
}

// Compute returns the reader state after one round at now, and the changes
// of the reader set (sorted by site, removals and additions alike).
func Compute(sites []sitepair.SiteObservation, st sitepair.Persisted, cfg Config, prev State, now time.Time) (State, []Event) {
	cfg = cfg.normal()
	names := make([]string, len(sites))
	for i, so := range sites {
		names[i] = so.Name
	}
	return combine(names, st.ActiveSite, func(i int) verdict { return evaluate(sites[i], st, cfg, now) }, cfg, prev, now)
}

// combine applies one round's verdicts (eval of each site's index in
// names) to prev's hysteresis, the primary's last and by IncludePrimary,
// and returns the next state with the changes of the reader set. cfg is
// normal.
func combine(names []string, primarySite string, eval func(i int) verdict, cfg Config, prev State, now time.Time) (State, []Event) {
	counted := prev.At.IsZero() || now.Sub(prev.At) >= cfg.Round
	next := State{Sites: make(map[string]Site, len(names)), At: prev.At}
	if counted {
		next.At = now
	}
	// The primary is decided last: with whenNoReplica it depends on the
	// replicas' outcome this round.
	primary := -1
	anyReplica := false
	for i, name := range names {
		if name == primarySite {
			primary = i
			continue
		}
		s := step(prevSite(prev, name, now, cfg), eval(i), counted, cfg)
		s.Eligible = s.in
		anyReplica = anyReplica || s.Eligible
		next.Sites[name] = s
	}
	if primary >= 0 {
		name := names[primary]
		s := step(prevSite(prev, name, now, cfg), eval(primary), counted, cfg)
		s.Eligible = s.in
		switch {
		case !s.in:
		case cfg.IncludePrimary == PrimaryNever:
			s.Eligible, s.Why = false, "the primary (includePrimary: never)"
		case cfg.IncludePrimary == PrimaryWhenNoReplica && anyReplica:
			s.Eligible, s.Why = false, "the primary; serves reads only while no replica does (includePrimary: whenNoReplica)"
		case cfg.IncludePrimary == PrimaryWhenNoReplica:
			s.Why = "the primary, serving reads because no replica does (includePrimary: whenNoReplica)"
		default:
			s.Why = "the primary (includePrimary: always)"
		}
		next.Sites[name] = s
	}
	var events []Event
	for _, name := range names {
		s := next.Sites[name]
		was := prev.Sites[name].Eligible
		if s.Eligible != was {
			s.Since = now
			next.Sites[name] = s
			events = append(events, Event{Site: name, Added: s.Eligible, Why: s.Why})
		}
	}
	slices.SortFunc(events, func(a, b Event) int { return strings.Compare(a.Site, b.Site) })
	return next, events
}

// normal fills the defaults of a zero Config.
func (c Config) normal() Config {
	c.UpAfter = max(c.UpAfter, 1)
	c.DownAfter = max(c.DownAfter, 1)
	if c.IncludePrimary == "" {
		c.IncludePrimary = PrimaryWhenNoReplica
	}
	return c
}

// prevSite is the site's previous state; a site seen for the first time is
// out, and free to join after UpAfter good rounds.
func prevSite(prev State, name string, now time.Time, cfg Config) Site {
	if s, ok := prev.Sites[name]; ok {
		return s
	}
	return Site{Since: now, LagSeconds: -1, quiet: cfg.UpAfter + cfg.DownAfter}
}

// step applies one round's verdict to the site's hysteresis.
func step(s Site, v verdict, counted bool, cfg Config) Site {
	if counted {
		s.quiet++
	}
	switch {
	case v.safety:
		// Safety, not freshness: out at once, and the streaks restart.
		if s.in {
			s.quiet = 0
		}
		s.in, s.good, s.bad = false, 0, 0
		s.Why, s.LagSeconds = v.why, v.lag
		return s
	case !counted:
		// Within the same poll round: nothing new to count.
		return s
	}
	settled := s.quiet >= cfg.UpAfter+cfg.DownAfter
	s.Why, s.LagSeconds = v.why, v.lag
	if v.good {
		s.good, s.bad = s.good+1, 0
		switch {
		case s.in:
		case s.good >= cfg.UpAfter && settled:
			s.in, s.quiet = true, 0
		case s.good >= cfg.UpAfter:
			// Prevents a replica flapping around maxLag from changing the set
			// more than once per upAfter+downAfter rounds.
			s.Why += fmt.Sprintf(" (joins %d rounds after its last change)", cfg.UpAfter+cfg.DownAfter)
		default:
			s.Why += fmt.Sprintf(" (joins after %d good rounds, %d so far)", cfg.UpAfter, s.good)
		}
		return s
	}
	s.good, s.bad = 0, s.bad+1
	switch {
	case !s.in:
	case s.bad >= cfg.DownAfter && settled:
		s.in, s.quiet = false, 0
	case s.bad >= cfg.DownAfter:
		// Same flap bound as joining: freshness never moves a site sooner.
		s.Why += fmt.Sprintf(" (leaves %d rounds after its last change)", cfg.UpAfter+cfg.DownAfter)
	default:
		s.Why += fmt.Sprintf(" (leaves after %d bad rounds, %d so far)", cfg.DownAfter, s.bad)
	}
	return s
}

// evaluate judges one site in one round: good or not, why, and whether the
// reason is one of safety (out at once).
func evaluate(so sitepair.SiteObservation, st sitepair.Persisted, cfg Config, now time.Time) verdict {
	unsafe := func(why string) verdict { return verdict{safety: true, why: why, lag: -1} }
	// A failover in flight revoked the old primary: replicas may trail the
	// one being promoted and the old primary may still take writes.
	if st.InFlight != nil {
		return unsafe(fmt.Sprintf("failover to %s in flight (epoch %d): no readers until it completes", st.InFlight.To, st.Epoch))
	}
	// Without a recorded primary nobody can say what is current.
	if st.ActiveSite == "" {
		return unsafe("no primary recorded: no readers")
	}
	if why := recordWithheld(so.Name, st, now); why != "" {
		return unsafe(why)
	}
	if !so.State.Reachable() {
		return verdict{why: "unreachable (" + so.State.String() + ")", lag: -1}
	}
	if so.Name == st.ActiveSite {
		return verdict{good: true, why: "the primary", lag: 0}
	}
	if why := sourceWithheld(so, st); why != "" {
		return unsafe(why)
	}
	lag := -1.0
	if so.LagKnown {
		lag = max(so.Lag, so.BacklogAge).Seconds()
	}
	switch {
	case so.ReplicationBroken:
		return verdict{why: "replication broken (a thread stopped on an error)", lag: lag}
	case !so.IOConnected:
		return verdict{why: "replication IO thread not connected to " + st.ActiveSite, lag: lag}
	case so.SourceSilent:
		return verdict{why: "no events or heartbeats from " + st.ActiveSite, lag: lag}
	case so.ApplierStopped:
		return verdict{why: "replication SQL thread stopped", lag: lag}
	case !so.LagKnown:
		return verdict{why: "lag unknown", lag: -1}
	}
	l := max(so.Lag, so.BacklogAge)
	if l > cfg.MaxLag {
		return verdict{why: fmt.Sprintf("lag %s over maxLag %s", l, cfg.MaxLag), lag: lag}
	}
	return verdict{good: true, why: fmt.Sprintf("replicating from %s, lag %s", st.ActiveSite, l), lag: lag}
}

// recordWithheld is the safety reason the persisted record gives to keep
// site out of reads whatever it observes ("" when none).
func recordWithheld(site string, st sitepair.Persisted, now time.Time) string {
	// A diverged site holds transactions the primary lacks: reads would see
	// writes that never happened for everyone else.
	if _, ok := st.Diverged[site]; ok {
		return "diverged"
	}
	// A recloning site is being overwritten: its data is in transit.
	if _, ok := st.Recloning[site]; ok {
		return "recloning"
	}
	// The operator fenced it: it serves nothing until they say otherwise.
	if slices.Contains(st.OperatorFenced, site) {
		return "fenced by the operator"
	}
	// Under maintenance the operator may stop, restart or lag it at will.
	if h, ok := st.HoldAt(site, now); ok && h.Kind == sitepair.HoldMaintenance {
		return fmt.Sprintf("held for maintenance by %s until %s", h.By, h.Until.UTC().Format(time.RFC3339))
	}
	return ""
}

// sourceWithheld is the safety reason a reachable replica's replication
// source gives ("" when it replicates from the recorded primary).
func sourceWithheld(so sitepair.SiteObservation, st sitepair.Persisted) string {
	// A replica of another source (an old primary, a diverged site) serves
	// another history than the primary's.
	switch so.ReplicatingFrom {
	case st.ActiveSite:
		return ""
	case "":
		return fmt.Sprintf("not replicating (the primary is %s)", st.ActiveSite)
	}
	return fmt.Sprintf("replicating from %s, not from the primary %s", so.ReplicatingFrom, st.ActiveSite)
}

// Withheld maps each site withheld from reads for a safety reason of its
// own to that reason, as Compute words it: diverged, recloning, fenced by
// the operator, held for maintenance, or (reachable, a primary recorded)
// not replicating from the primary. Group-wide states (a failover in
// flight, no primary recorded) and freshness (lag, stopped threads,
// unreachable) are not listed: the view says the first, and a sidecar
// judges the second itself. Nil when none. The daemon signs it into the
// view (view.View.NoReads), so a site's sidecar answers 503 for reads.
// sites may carry only names (no observation yet): then only the record's
// reasons count.
func Withheld(sites []sitepair.SiteObservation, st sitepair.Persisted, now time.Time) map[string]string {
	var out map[string]string
	for _, so := range sites {
		why := recordWithheld(so.Name, st, now)
		if why == "" && st.ActiveSite != "" && so.Name != st.ActiveSite && so.State.Reachable() {
			why = sourceWithheld(so, st)
		}
		if why == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[so.Name] = why
	}
	return out
}

// Stale reports whether prev's last counted round is older than after, so
// its hysteresis no longer describes the sites (the daemon lost and regained
// leadership, or its rounds stalled).
func (s State) Stale(now time.Time, after time.Duration) bool {
	return !s.At.IsZero() && now.Sub(s.At) > after
}

// Reset takes every site out at now with why and restarts its hysteresis as
// for a site never seen (UpAfter good rounds to join), returning the
// removals. For a stale State: rounds nobody counted must not count.
func Reset(prev State, cfg Config, now time.Time, why string) (State, []Event) {
	cfg = cfg.normal()
	next := State{Sites: make(map[string]Site, len(prev.Sites))}
	var events []Event
	for name, s := range prev.Sites {
		n := Site{Since: s.Since, Why: why, LagSeconds: -1, quiet: cfg.UpAfter + cfg.DownAfter}
		if s.Eligible {
			n.Since = now
			events = append(events, Event{Site: name, Why: why})
		}
		next.Sites[name] = n
	}
	slices.SortFunc(events, func(a, b Event) int { return strings.Compare(a.Site, b.Site) })
	return next, events
}
