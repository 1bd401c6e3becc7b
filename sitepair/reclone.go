package sitepair

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/statemachine"
)

// MinRecloneToken is the shortest prefix of a recorded divergent GTID set a
// reclone request must repeat (the whole set when it is shorter).
const MinRecloneToken = 8

// Reclone is a human's request to re-seed a site from the primary, recorded
// by StartReclone and cleared by FinishReclone.
type Reclone struct {
	// Donor is the primary the site is copied from (the active site when
	// the request was accepted).
	Donor string
	// Epoch is the group epoch the request was accepted at.
	Epoch uint64
	// At is when it was accepted (daemon clock) and By who asked.
	At time.Time
	By string
	// Failed says why the last attempt failed; "" while one runs. A failed
	// reclone keeps the site out of every decision until it is retried:
	// its data may be half replaced.
	Failed string
}

// Sentinel errors of StartReclone: each is an expected refusal, not a fault.
var (
	// ErrRecloneToken: the token does not match the one RecloneToken names.
	ErrRecloneToken = errors.New("sitepair: wrong reclone token")
	// ErrRecloneRefused: the group's state does not allow a reclone now.
	ErrRecloneRefused = errors.New("sitepair: reclone refused")
	// ErrRecloneRunning: a reclone of the site is already running.
	ErrRecloneRunning = errors.New("sitepair: a reclone of the site is already running")
)

// RecloneProbe is what a reclone request is checked against: the executed
// GTID sets of the site and of the donor, read when the request arrived.
// The last round's observations are not enough: they may predate writes the
// site took alone (an old primary back this round). The caller reads the
// site first, then the donor, so a transaction the site received from the
// donor in between is not taken for one of its own.
type RecloneProbe struct {
	// Donor names the site read as the donor; a probe of any other site
	// than the active one is refused.
	Donor string
	// SiteExecuted and DonorExecuted are the two executed GTID sets.
	SiteExecuted, DonorExecuted gtid.Set
	// Err says why the probe could not be taken (nil when it was): what
	// the site holds is then unknown, and the request is refused.
	Err error
}

// RecloneDiscards is what a reclone of site throws away that the donor
// lacks, and so the set its token must start: its recorded divergence
// together with whatever the probe finds it holds beyond the donor's
// history (gtid.Set.Uncovered). An error says the sets cannot be compared.
func RecloneDiscards(p Persisted, site string, probe RecloneProbe) (gtid.Set, error) {
	rec := p.Diverged[site]
	for _, pair := range [][2]gtid.Set{{probe.SiteExecuted, probe.DonorExecuted}, {rec, probe.SiteExecuted}, {rec, probe.DonorExecuted}} {
		if err := gtid.CheckFlavor(pair[0], pair[1]); err != nil {
			return gtid.Set{}, fmt.Errorf("compare the GTID sets of %s and donor %s: %w", site, probe.Donor, err)
		}
	}
	return rec.Union(probe.DonorExecuted.Uncovered(probe.SiteExecuted)), nil
}

// RecloneToken is what a human must repeat to reclone site: the first
// MinRecloneToken or more characters of what the reclone throws away
// (RecloneDiscards, so the request names what will be lost), or the bare
// site name when it throws away nothing the donor lacks.
func RecloneToken(p Persisted, site string, probe RecloneProbe) (string, error) {
	lost, err := RecloneDiscards(p, site, probe)
	if err != nil {
		return "", err
	}
	if lost.IsEmpty() {
		return site, nil
	}
	return lost.String(), nil
}

func tokenMatches(want, site, token string) bool {
	if want == site {
		return token == want
	}
	return strings.HasPrefix(want, token) && len(token) >= min(MinRecloneToken, len(want))
}

// CheckReclone reports whether the group's state allows a reclone of site
// now, before anything is read from the servers: nil, or an error wrapping
// ErrRecloneRefused or ErrRecloneRunning (see StartReclone).
func CheckReclone(obs Observed, p Persisted, site, by string) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("reclone %s: %w: %s", site, ErrRecloneRefused, fmt.Sprintf(format, args...))
	}
	if by == "" {
		return refuse("the request must name who made it")
	}
	state := func(name string) (statemachine.State, bool) {
		for _, s := range obs.Sites {
			if s.Name == name {
				return s.State, true
			}
		}
		return statemachine.Unknown, false
	}
	st, ok := state(site)
	switch {
	case !ok:
		return refuse("no such site in the group")
	case p.InFlight != nil:
		return refuse("a failover to %s is in flight at epoch %d; retry once it is done", p.InFlight.To, p.InFlight.Epoch)
	case p.ActiveSite == "":
		return refuse("no primary is recorded to copy from")
	case site == p.ActiveSite:
		// Wiping the primary would lose every write.
		return refuse("%s is the active site (the donor); switch over first", site)
	case st == statemachine.Writable:
		// A writable site may be taking writes the copy would throw away.
		return refuse("%s is writable; it must be fenced (read-only) first", site)
	}
	if donor, _ := state(p.ActiveSite); donor != statemachine.Writable {
		return refuse("the donor %s is %s, not a writable primary", p.ActiveSite, donor)
	}
	if r, ok := p.Recloning[site]; ok && r.Failed == "" {
		return fmt.Errorf("reclone %s: %w (from %s, asked by %s at %s)", site, ErrRecloneRunning, r.Donor, r.By, r.At.UTC().Format(time.RFC3339))
	}
	return nil
}

// StartReclone records a human's request to re-seed site from the active
// site, throwing away everything site holds. It is pure: it returns the
// next persisted state (to persist before anything touches the site, so a
// restarted daemon still keeps the half-copied site out of every decision)
// and the recorded request. by names who asked; probe is what site and the
// donor hold now.
//
// It is refused while a failover is in flight or no primary is recorded
// (there is no donor), for the active site itself, for a site observed
// writable (it may be taking writes: fence it first), when the donor is not
// observed writable, while a reclone of the site runs, without a probe of
// both sites, and with a token other than RecloneToken's: a site holding
// transactions the donor lacks needs the start of that set whether or not
// a divergence was ever recorded.
func StartReclone(obs Observed, p Persisted, site, token string, probe RecloneProbe, now time.Time, by string) (Persisted, Reclone, error) {
	if err := CheckReclone(obs, p, site, by); err != nil {
		return p, Reclone{}, err
	}
	refuse := func(format string, args ...any) (Persisted, Reclone, error) {
		return p, Reclone{}, fmt.Errorf("reclone %s: %w: %s", site, ErrRecloneRefused, fmt.Sprintf(format, args...))
	}
	switch {
	case probe.Err != nil:
		// What the site holds is unknown: its only copy of some writes
		// could be wiped unnamed.
		return refuse("cannot read what %s and the donor %s hold now: %v; retry once both answer", site, p.ActiveSite, probe.Err)
	case probe.Donor != p.ActiveSite:
		// A probe of another donor says nothing of what this copy loses.
		return refuse("the GTID sets were read against %q, not the donor %s; retry", probe.Donor, p.ActiveSite)
	}
	want, err := RecloneToken(p, site, probe)
	if err != nil {
		return refuse("%v", err)
	}
	// The token proves the human looked at what will be thrown away,
	// recorded or not: a site holding the only copy of some transactions
	// is never wiped by naming it.
	if !tokenMatches(want, site, token) {
		return p, Reclone{}, fmt.Errorf("reclone %s: %w: %s", site, ErrRecloneToken, tokenHint(p, site, probe, want))
	}
	r := Reclone{Donor: p.ActiveSite, Epoch: p.Epoch, At: now, By: by}
	next := Apply(p, Decision{Action: None}, now)
	if next.Recloning == nil {
		next.Recloning = map[string]Reclone{}
	}
	next.Recloning[site] = r
	return next, r, nil
}

// tokenHint says what a reclone of site throws away and which token
// confirms it.
func tokenHint(p Persisted, site string, probe RecloneProbe, want string) string {
	if want == site {
		return fmt.Sprintf("%s holds nothing the donor %s lacks; give the site name %q", site, probe.Donor, site)
	}
	rec, recorded := p.Diverged[site]
	var what string
	switch extra := probe.DonorExecuted.Uncovered(probe.SiteExecuted); {
	case recorded && rec.Contains(extra):
		what = "its recorded divergent GTID set"
	case recorded:
		what = fmt.Sprintf("its recorded divergent GTID set and what else it holds now that the donor %s lacks", probe.Donor)
	default:
		n := gtid.DivergentCount(probe.SiteExecuted, probe.DonorExecuted)
		what = fmt.Sprintf("%d %s the donor %s lacks (read from both sites now; no divergence is recorded)",
			n, plural(int(min(n, 2)), "transaction", "transactions"), probe.Donor)
	}
	return fmt.Sprintf("a reclone throws away %s: %s; to confirm, give its first %d or more characters as the token (failoverd reclone --confirm-discard)", what, want, MinRecloneToken)
}

// FinishReclone records the outcome of site's reclone: on success (failed
// == "") the site is no longer recloning nor diverged (its data is now a
// copy of the primary's, which the caller checked), so it may rejoin; on
// failure it stays recloning with the reason, out of every decision until
// a human retries. A site not recloning is left as it is.
func FinishReclone(p Persisted, site, failed string) Persisted {
	r, ok := p.Recloning[site]
	if !ok {
		return p
	}
	next := Apply(p, Decision{Action: None}, time.Time{})
	if failed != "" {
		r.Failed = failed
		next.Recloning[site] = r
		return next
	}
	delete(next.Recloning, site)
	if len(next.Recloning) == 0 {
		next.Recloning = nil
	}
	delete(next.Diverged, site)
	delete(next.DivergedCount, site)
	return next
}
