package sitepair

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/statemachine"
)

// Decide returns the group's next decision. It is pure and deterministic:
// the same inputs always give the same Decision. The caller carries the
// decision out and, once it succeeded, persists Apply(st, decision, now).
func Decide(obs Observed, st Persisted, pol Policy, now time.Time) Decision {
	// A paused group decides as usual and carries out only what writes
	// to no server.
	return paused(st, decide(obs, st, pol, now), now)
}

func decide(obs Observed, st Persisted, pol Policy, now time.Time) Decision {
	v, d, ok := prepare(obs, st, pol, now)
	if !ok {
		return d
	}
	// A revoked epoch is resumed before anything else: the group has no
	// active site until phase 2 completes.
	if st.InFlight != nil {
		return v.inFlight()
	}
	switch v.det.Code {
	case statemachine.TotalLoss:
		return v.decision(ReasonTotalLoss, "every site is unreachable; nothing can be promoted")
	case statemachine.SplitBrain:
		return v.splitBrain()
	case statemachine.Undetermined:
		return v.decision(ReasonWaitingForProbes, "no debounced state yet for %s", strings.Join(v.inState(statemachine.Unknown), ", "))
	case statemachine.PrimaryExited:
		return v.failover()
	case statemachine.PrimaryDebouncing:
		return v.decision(ReasonPrimaryDebouncing, "primary %s is failing probes but has not reached the failure threshold", v.det.Primary)
	case statemachine.UnreachablePrimary:
		return v.decision(ReasonPrimaryPartitioned, "the daemon cannot reach primary %s but %s still stream from it: partition between the daemon and the primary, no failover",
			v.st.ActiveSite, strings.Join(v.det.Streaming, ", "))
	case statemachine.AwaitingWitnesses:
		return v.decision(ReasonAwaitingWitnesses, "primary %s is unreachable; %s still streamed from it when last read, before the daemon gave it up: waiting for their next probe",
			v.st.ActiveSite, strings.Join(v.det.Pending, ", "))
	case statemachine.PrimaryDownUncorroborated:
		return v.decision(ReasonUncorroborated, "primary %s is unreachable but no reachable replica follows it to corroborate; automatic failover refused (an operator may switch over)", v.st.ActiveSite)
	case statemachine.PrimaryDown:
		return v.failover()
	case statemachine.NoPrimary:
		return v.noPrimary()
	case statemachine.UnexpectedPrimary:
		return v.unexpectedPrimary()
	}
	return v.healthy()
}

// view is one Decide call's validated input plus derived facts.
type view struct {
	sites []SiteObservation
	st    Persisted
	pol   Policy
	now   time.Time
	obs   Observed
	in    statemachine.GroupInput
	det   statemachine.Result
	have  []gtid.Set // per site: Executed ∪ Retrieved
}

func prepare(obs Observed, st Persisted, pol Policy, now time.Time) (*view, Decision, bool) {
	v := &view{sites: obs.Sites, obs: obs, st: st, pol: pol, now: now}
	if err := pol.Validate(); err != nil {
		return nil, v.decision(ReasonInvalidPolicy, "%v", err), false
	}
	if err := validate(obs, st, pol); err != nil {
		return nil, v.decision(ReasonInvalidInput, "%v", err), false
	}
	v.have = make([]gtid.Set, len(obs.Sites))
	in := statemachine.GroupInput{
		Primary:             st.ActiveSite,
		Sites:               make([]statemachine.SiteInput, len(obs.Sites)),
		Detection:           pol.Detection,
		SilenceAfter:        pol.SilenceAfter,
		CorroborationWindow: pol.CorroborationWindow,
	}
	for i, s := range obs.Sites {
		v.have[i] = s.Executed.Union(s.Retrieved)
		in.Sites[i] = statemachine.SiteInput{
			Name: s.Name, State: s.State, Debouncing: s.Debouncing,
			ReplicatingFrom: s.ReplicatingFrom, IOConnected: s.IOConnected,
			SourceSilent: s.SourceSilent, LastHeartbeatAge: s.LastHeartbeatAge,
			ReplicationBroken: s.ReplicationBroken, IOStopped: s.IOStopped,
			LastStreamingAt: s.LastStreamingAt, LastReachableAt: s.LastReachableAt, StateSince: s.StateSince,
			Maintenance: v.maintenance(s.Name),
			Exited:      v.exited(s),
		}
	}
	v.in = in
	v.det = statemachine.Detect(in)
	return v, Decision{}, true
}

// exited reports whether s's own sidecar's exit report may shorten the
// detection of s's outage (statemachine.PrimaryExited): every guard below
// keeps a report that says nothing about the mysqld running now from
// failing a site over before its failure window.
func (v *view) exited(s SiteObservation) bool {
	sc, x := s.Sidecar, s.Sidecar.Exit
	switch {
	case v.pol.ExitWindow <= 0 || !sc.Configured || x.At.IsZero():
		return false
	case v.st.InFlight != nil || s.Name != v.st.ActiveSite || v.st.Epoch == 0:
		// Only the recorded primary's exit, outside a failover (in flight,
		// the proofs decide; none of them reads it).
		return false
	case sc.Epoch != v.st.Epoch:
		// A sidecar holding another epoch (a restarted one without a view,
		// a stale report) does not speak for the current primary.
		return false
	case !s.LastReachableAt.IsZero() && !s.LastReachableAt.Before(x.At):
		// A probe reached the site at or after the exit: a mysqld answered
		// there since (restarted by hand or by its supervisor).
		return false
	case v.now.Before(x.At) || v.now.Sub(x.At) > v.pol.ExitWindow:
		// Past the failure window the probes decide as they always did; a
		// report from the future is a clock gone backwards.
		return false
	}
	return true
}

// validate rejects inputs the rules cannot reason about.
func validate(obs Observed, st Persisted, pol Policy) error {
	n := len(obs.Sites)
	if n < MinSites || n > MaxSites {
		return fmt.Errorf("%d sites, want %d to %d: %w", n, MinSites, MaxSites, ErrInvalidInput)
	}
	has := func(name string) bool {
		return slices.ContainsFunc(obs.Sites, func(s SiteObservation) bool { return s.Name == name })
	}
	var ref gtid.Set
	for i, s := range obs.Sites {
		if s.Name == "" || slices.ContainsFunc(obs.Sites[:i], func(o SiteObservation) bool { return o.Name == s.Name }) {
			return fmt.Errorf("site name %q empty or repeated: %w", s.Name, ErrInvalidInput)
		}
		if s.Role != PrimaryCandidate && s.Role != DROnly {
			return fmt.Errorf("site %s: role %q: %w", s.Name, s.Role, ErrInvalidInput)
		}
		for _, set := range []gtid.Set{s.Executed, s.Retrieved} {
			// Mixing MySQL and MariaDB sets would make every comparison
			// meaningless (and panic).
			if err := gtid.CheckFlavor(ref, set); err != nil {
				return fmt.Errorf("site %s: %w: %w", s.Name, ErrInvalidInput, err)
			}
			if ref.IsEmpty() {
				ref = set
			}
		}
	}
	if err := gtid.CheckFlavor(ref, st.PromotionGTID); err != nil {
		return fmt.Errorf("promotion GTID: %w: %w", ErrInvalidInput, err)
	}
	for site, set := range st.Diverged {
		if err := gtid.CheckFlavor(ref, set); err != nil {
			return fmt.Errorf("diverged set of %s: %w: %w", site, ErrInvalidInput, err)
		}
	}
	if st.ActiveSite != "" && !has(st.ActiveSite) {
		return fmt.Errorf("active site %q is not in the group: %w", st.ActiveSite, ErrInvalidInput)
	}
	if pol.PreferSite != "" && !has(pol.PreferSite) {
		return fmt.Errorf("preferred site %q is not in the group: %w", pol.PreferSite, ErrInvalidInput)
	}
	if f := st.InFlight; f != nil {
		switch {
		case !has(f.From) || !has(f.To) || f.From == f.To:
			return fmt.Errorf("in-flight failover %q -> %q does not name two sites of the group: %w", f.From, f.To, ErrInvalidInput)
		case f.Epoch != st.Epoch:
			return fmt.Errorf("in-flight epoch %d differs from the persisted epoch %d: %w", f.Epoch, st.Epoch, ErrInvalidInput)
		case st.ActiveSite != "":
			return fmt.Errorf("active site %s recorded while a failover is in flight: %w", st.ActiveSite, ErrInvalidInput)
		case f.PublishedTo != "" && (!has(f.PublishedTo) || f.PublishedEpoch <= f.Epoch):
			return fmt.Errorf("in-flight failover published %q at epoch %d, not a site at a newer epoch than %d: %w", f.PublishedTo, f.PublishedEpoch, f.Epoch, ErrInvalidInput)
		}
	}
	return nil
}

// ErrInvalidInput is wrapped by errors about inconsistent observations or
// persisted state.
var ErrInvalidInput = errors.New("sitepair: invalid input")

// decision builds a Decision for reason r, with the action r belongs to.
func (v *view) decision(r Reason, format string, args ...any) Decision {
	a, ok := ActionOf(r)
	if !ok {
		panic("sitepair: reason without action: " + string(r))
	}
	return Decision{Action: a, Reason: r, Message: fmt.Sprintf(format, args...), Epoch: v.st.Epoch, Detection: v.det}
}

func (v *view) index(name string) int {
	for i := range v.sites {
		if v.sites[i].Name == name {
			return i
		}
	}
	return -1
}

func (v *view) opFenced(name string) bool { return slices.Contains(v.st.OperatorFenced, name) }

func (v *view) recloning(name string) bool {
	_, ok := v.st.Recloning[name]
	return ok
}

func (v *view) diverged(name string) bool {
	_, ok := v.st.Diverged[name]
	return ok
}

func (v *view) inState(st statemachine.State) []string {
	var out []string
	for _, s := range v.sites {
		if s.State == st {
			out = append(out, s.Name)
		}
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
