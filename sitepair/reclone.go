package sitepair

import (
	"errors"
	"fmt"
	"strings"
	"time"

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

// RecloneToken is what a human must repeat to reclone site: the first
// MinRecloneToken or more characters of its recorded divergent GTID set
// (so the request names what will be thrown away), or the bare site name
// when no divergence is recorded.
func RecloneToken(p Persisted, site string) string {
	if set, ok := p.Diverged[site]; ok {
		return set.String()
	}
	return site
}

func tokenMatches(p Persisted, site, token string) bool {
	want := RecloneToken(p, site)
	if _, ok := p.Diverged[site]; !ok {
		return token == want
	}
	return strings.HasPrefix(want, token) && len(token) >= min(MinRecloneToken, len(want))
}

// StartReclone records a human's request to re-seed site from the active
// site, throwing away everything site holds. It is pure: it returns the
// next persisted state (to persist before anything touches the site, so a
// restarted daemon still keeps the half-copied site out of every decision)
// and the recorded request. by names who asked.
//
// It is refused while a failover is in flight or no primary is recorded
// (there is no donor), for the active site itself, for a site observed
// writable (it may be taking writes: fence it first), when the donor is not
// observed writable, while a reclone of the site runs, and with a token
// other than RecloneToken's.
func StartReclone(obs Observed, p Persisted, site, token string, now time.Time, by string) (Persisted, Reclone, error) {
	refuse := func(format string, args ...any) (Persisted, Reclone, error) {
		return p, Reclone{}, fmt.Errorf("reclone %s: %w: %s", site, ErrRecloneRefused, fmt.Sprintf(format, args...))
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
		return p, Reclone{}, fmt.Errorf("reclone %s: %w (from %s, asked by %s at %s)", site, ErrRecloneRunning, r.Donor, r.By, r.At.UTC().Format(time.RFC3339))
	}
	// The token proves the human looked at what will be thrown away.
	if !tokenMatches(p, site, token) {
		if _, ok := p.Diverged[site]; ok {
			return p, Reclone{}, fmt.Errorf("reclone %s: %w: give the first %d or more characters of its divergent GTID set (see failoverd status)", site, ErrRecloneToken, MinRecloneToken)
		}
		return p, Reclone{}, fmt.Errorf("reclone %s: %w: no divergence is recorded, give the site name %q", site, ErrRecloneToken, site)
	}
	r := Reclone{Donor: p.ActiveSite, Epoch: p.Epoch, At: now, By: by}
	next := Apply(p, Decision{Action: None}, now)
	if next.Recloning == nil {
		next.Recloning = map[string]Reclone{}
	}
	next.Recloning[site] = r
	return next, r, nil
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
