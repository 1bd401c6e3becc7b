package sitepair

// Operating modes an operator sets on a group: a pause of the whole group
// and holds on single sites. Each has an expiry (a forgotten pause or hold
// ends by itself) and says who set it and why; they live in Persisted, so
// they survive restarts and leader changes.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Pause stops the group's automatic actions: while it is in effect Decide
// withholds every decision that would write to a server (a failover, a
// fence, a re-assert, a rejoin...) and DecideSwitchover refuses. Observing,
// reporting and routing repair go on.
type Pause struct {
	// Since is when it was set and Until when it ends (daemon clock).
	Since, Until time.Time
	// By names who paused and Reason says why (both required).
	By, Reason string
}

// ActiveAt reports whether the pause is in effect at now (nil: never).
func (p *Pause) ActiveAt(now time.Time) bool { return p != nil && now.Before(p.Until) }

// HoldKind is what a hold keeps a site from.
type HoldKind string

// Hold kinds.
const (
	// HoldNoPromote: never a failover or switchover candidate; the site
	// stays a replica and a witness.
	HoldNoPromote HoldKind = "no-promote"
	// HoldMaintenance: an operator may stop, restart or lag the site: it is
	// no candidate, no witness (corroboration) and its state raises no
	// replica alert. It may not hold the current primary: the documented
	// way is a switchover first (the daemon does it when asked).
	HoldMaintenance HoldKind = "maintenance"
)

// HoldKinds returns every HoldKind.
func HoldKinds() []HoldKind { return []HoldKind{HoldNoPromote, HoldMaintenance} }

// ParseHoldKind parses a hold kind, naming the valid ones on error.
func ParseHoldKind(s string) (HoldKind, error) {
	for _, k := range HoldKinds() {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("%w: hold kind %q: want %s or %s", ErrModeRefused, s, HoldNoPromote, HoldMaintenance)
}

// Hold is an operator's hold on one site.
type Hold struct {
	Kind HoldKind
	// Since is when it was set and Until when it ends (daemon clock).
	Since, Until time.Time
	// By names who set it and Reason says why (both required).
	By, Reason string
}

// ActiveAt reports whether the hold is in effect at now.
func (h Hold) ActiveAt(now time.Time) bool { return now.Before(h.Until) }

// ErrModeRefused is wrapped by refusals of pause, resume, hold and release.
var ErrModeRefused = errors.New("sitepair: refused")

// HoldAt returns the hold on site in effect at now.
func (p Persisted) HoldAt(site string, now time.Time) (Hold, bool) {
	h, ok := p.Holds[site]
	if !ok || !h.ActiveAt(now) {
		return Hold{}, false
	}
	return h, true
}

// maintenance reports whether site is held for maintenance now.
func (v *view) maintenance(site string) bool {
	h, ok := v.st.HoldAt(site, v.now)
	return ok && h.Kind == HoldMaintenance
}

// held says why a hold keeps site i from being promoted now ("" if none).
func (v *view) held(i int) string {
	h, ok := v.st.HoldAt(v.sites[i].Name, v.now)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s hold by %s until %s (%s)", h.Kind, h.By, h.Until.UTC().Format(time.RFC3339), h.Reason)
}

// checkExpiry refuses an expiry that is not in the future.
func checkExpiry(what string, until, now time.Time, by, reason string) error {
	switch {
	case !until.After(now):
		return fmt.Errorf("%w: %s: the expiry %s is not in the future (give a positive duration, e.g. --for 30m)", ErrModeRefused, what, until.UTC().Format(time.RFC3339))
	case strings.TrimSpace(by) == "":
		return fmt.Errorf("%w: %s: who asked is missing", ErrModeRefused, what)
	case strings.TrimSpace(reason) == "":
		return fmt.Errorf("%w: %s: a reason is required (--reason \"...\"): the next on-call reads it", ErrModeRefused, what)
	}
	return nil
}

// PauseGroup returns st paused by p (replacing any pause in effect). A
// failover in flight is refused: a revoked group has no primary, and
// pausing it there would leave it without one until the pause ends.
func PauseGroup(st Persisted, p Pause, now time.Time) (Persisted, error) {
	if err := checkExpiry("pause", p.Until, now, p.By, p.Reason); err != nil {
		return st, err
	}
	if f := st.InFlight; f != nil {
		return st, fmt.Errorf("%w: pause: a failover from %s to %s is in flight (epoch %d); pause once it completed", ErrModeRefused, f.From, f.To, f.Epoch)
	}
	next := Apply(st, Decision{Action: None}, now)
	p.Since = now
	next.Pause = &p
	return next, nil
}

// ResumeGroup returns st without its pause; refused when none is in effect.
func ResumeGroup(st Persisted, now time.Time) (Persisted, error) {
	if !st.Pause.ActiveAt(now) {
		return st, fmt.Errorf("%w: resume: the group is not paused", ErrModeRefused)
	}
	next := Apply(st, Decision{Action: None}, now)
	next.Pause = nil
	return next, nil
}

// HoldSite returns st with h on site (replacing any hold on it). A
// maintenance hold on the active site is refused: its mysqld would stop
// while it is the primary (ask for a switchover first; the daemon's
// maintenance request does that).
func HoldSite(st Persisted, site string, h Hold, now time.Time) (Persisted, error) {
	if _, err := ParseHoldKind(string(h.Kind)); err != nil {
		return st, err
	}
	if err := checkExpiry(string(h.Kind)+" hold on "+site, h.Until, now, h.By, h.Reason); err != nil {
		return st, err
	}
	if h.Kind == HoldMaintenance && site == st.ActiveSite {
		return st, fmt.Errorf("%w: maintenance hold on %s: it is the primary; it needs a switchover to another site first", ErrModeRefused, site)
	}
	next := Apply(st, Decision{Action: None}, now)
	h.Since = now
	if next.Holds == nil {
		next.Holds = map[string]Hold{}
	}
	next.Holds[site] = h
	return next, nil
}

// ReleaseSite returns st without site's hold; refused when none is in effect.
func ReleaseSite(st Persisted, site string, now time.Time) (Persisted, error) {
	if _, ok := st.HoldAt(site, now); !ok {
		return st, fmt.Errorf("%w: release: %s has no hold", ErrModeRefused, site)
	}
	next := Apply(st, Decision{Action: None}, now)
	delete(next.Holds, site)
	return next, nil
}

// Expired describes a pause or hold that ran out.
type Expired struct {
	// Site is "" for the group's pause.
	Site string
	// Kind is "pause" or the hold kind.
	Kind string
	By   string
}

// ExpireModes returns st without the pause and holds that ran out by now,
// and what ran out (the daemon logs it and persists the cleaned state).
// Decisions already ignore them; this keeps the record and status tidy.
func ExpireModes(st Persisted, now time.Time) (Persisted, []Expired) {
	var out []Expired
	if st.Pause != nil && !st.Pause.ActiveAt(now) {
		out = append(out, Expired{Kind: "pause", By: st.Pause.By})
	}
	for _, site := range slices.Sorted(maps.Keys(st.Holds)) {
		if h := st.Holds[site]; !h.ActiveAt(now) {
			out = append(out, Expired{Site: site, Kind: string(h.Kind), By: h.By})
		}
	}
	if len(out) == 0 {
		return st, nil
	}
	next := Apply(st, Decision{Action: None}, now)
	for _, e := range out {
		if e.Site == "" {
			next.Pause = nil
		} else {
			delete(next.Holds, e.Site)
		}
	}
	return next, out
}

// withheldWhilePaused reports whether a paused group withholds action a:
// every action that writes to a server. Bookkeeping (adopting the sole
// writable site, marking or clearing a divergence, halting) goes on.
func withheldWhilePaused(a Action) bool {
	switch a {
	case RevokeEpoch, Promote, FenceSites, StopReplicaIO, ReassertPrimary, Rejoin, RecloneSite, DisableSemiSyncSource:
		return true
	}
	return false
}

// paused wraps decision d, taken for a group paused at now, into the
// decision actually carried out: d itself when it writes nothing (or a
// failover is in flight: finishing it is safer than a group left without
// a primary), else an alert that names d as withheld.
func paused(st Persisted, d Decision, now time.Time) Decision {
	p := st.Pause
	if !p.ActiveAt(now) || st.InFlight != nil || !withheldWhilePaused(d.Action) {
		return d
	}
	w := d
	return Decision{
		Action: Alert, Reason: ReasonPausedWithheld, Epoch: st.Epoch, Detection: d.Detection, Withheld: &w,
		Message: fmt.Sprintf("group paused by %s until %s (%s): withheld %s (%s): %s",
			p.By, p.Until.UTC().Format(time.RFC3339), p.Reason, d.Action, d.Reason, d.Message),
	}
}

// MaintenanceSwitchover decides the planned switchover a maintenance hold
// on the recorded primary needs first: to the best-ranked site (preferred
// site, priority, declaration order) that DecideSwitchover accepts, or the
// best-ranked site's refusal when none does.
func MaintenanceSwitchover(obs Observed, st Persisted, pol Policy, now time.Time) Decision {
	v, d, ok := prepare(obs, st, pol, now)
	if !ok {
		return d
	}
	order := make([]int, 0, len(v.sites))
	for i, s := range v.sites {
		if s.Name != st.ActiveSite {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case v.better(a, b, ""):
			return -1
		case v.better(b, a, ""):
			return 1
		}
		return 0
	})
	var first Decision
	for _, i := range order {
		d := DecideSwitchover(obs, st, pol, v.sites[i].Name, false, now)
		if d.Action == RevokeEpoch {
			return d
		}
		if first.Reason == "" {
			first = d
		}
	}
	if first.Reason == "" {
		return v.decision(ReasonSwitchoverBadTarget, "no other site to switch over to")
	}
	return first
}
