package sitepair

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/statemachine"
)

const (
	W  = statemachine.Writable
	RO = statemachine.ReadOnly
	UR = statemachine.Unreachable
	UK = statemachine.Unknown
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// srcUUID is the server UUID every legitimate primary wrote with in these
// tests; errant transactions use a per-site UUID.
const srcUUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"

func gs(s string) gtid.Set { return gtid.MustParse(gtid.MySQL, s) }

// upto returns srcUUID:1-n.
func upto(n int) gtid.Set { return gs(fmt.Sprintf("%s:1-%d", srcUUID, n)) }

// errant returns the set of n local transactions written on site.
func errant(site string, n int) gtid.Set {
	return gs(fmt.Sprintf("00000000-0000-0000-0000-%012x:1-%d", []byte(site)[0], n))
}

// errantUUID is the server UUID errant(site, n) writes with.
func errantUUID(site string) string {
	return fmt.Sprintf("00000000-0000-0000-0000-%012x", []byte(site)[0])
}

type so func(*SiteObservation)

func exec(s gtid.Set) so        { return func(o *SiteObservation) { o.Executed = s } }
func retr(s gtid.Set) so        { return func(o *SiteObservation) { o.Retrieved = s } }
func prio(p int) so             { return func(o *SiteObservation) { o.Priority = p } }
func lag(d time.Duration) so    { return func(o *SiteObservation) { o.Lag = d } }
func fencedAt(e uint64) so      { return func(o *SiteObservation) { o.FencedEpoch = e } }
func withID(id string) so       { return func(o *SiteObservation) { o.ServerID = id } }
func dr(o *SiteObservation)     { o.Role = DROnly }
func broken(o *SiteObservation) { o.ReplicationBroken = true }
func down(o *SiteObservation)   { o.RefusedProbes = 2 }
func bounce(o *SiteObservation) { o.Debouncing = true }

// readAt: the site's fields were read by a probe completed at.
func readAt(at time.Time) so { return func(o *SiteObservation) { o.LastReachableAt = at } }

// gaveUp: the probe completed at gave the site its debounced state.
func gaveUp(at time.Time) so { return func(o *SiteObservation) { o.StateSince = at } }

// follows: replicating from p, IO connected.
func follows(p string) so {
	return func(o *SiteObservation) { o.ReplicatingFrom, o.IOConnected = p, true }
}

// lost: replicating from p, IO disconnected.
func lost(p string) so {
	return func(o *SiteObservation) { o.ReplicatingFrom, o.IOConnected = p, false }
}

// site builds a primary-candidate observation holding upto(10).
func site(name string, st statemachine.State, opts ...so) SiteObservation {
	o := SiteObservation{Name: name, Role: PrimaryCandidate, State: st, Executed: upto(10), LagKnown: true}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// group numbers the sites in declaration order.
func group(sites ...SiteObservation) Observed {
	for i := range sites {
		sites[i].Index = i
	}
	return Observed{Sites: sites}
}

// active is a persisted state with site a recorded as primary at epoch 1.
func active(name string) Persisted { return Persisted{Epoch: 1, ActiveSite: name} }

// promoted is the state after our failover to name an hour ago.
func promoted(name string) Persisted {
	at := now.Add(-time.Hour)
	return Persisted{Epoch: 2, ActiveSite: name, LastFailoverAt: at, LastFailoverTarget: name,
		PromotionGTID: upto(10), FailoverHistory: []time.Time{at}}
}

// justPromoted is the state right after our failover to name, promoted ago
// before now (epoch 3: revoke 2, promote 3).
func justPromoted(name string, ago time.Duration) Persisted {
	at := now.Add(-ago)
	return Persisted{Epoch: 3, ActiveSite: name, LastFailoverAt: at, LastFailoverTarget: name,
		PromotionGTID: upto(10), FailoverHistory: []time.Time{at}, LastFailoverProof: ProofPrimaryDown}
}

// revoked is the state after phase 1 of a failover from -> to at revokedAt.
func revoked(from, to string, revokedAt time.Time) Persisted {
	return Persisted{Epoch: 2, InFlight: &InFlight{Epoch: 2, RevokedAt: revokedAt, From: from, To: to}}
}

// leased gives every site a sidecar whose last report arrived at lastReport:
// the old primary a's holding epoch 1 (then silent), the others holding the
// revoked epoch 2 and having served a nothing.
func leased(obs Observed, lastReport time.Time) Observed {
	out := Observed{Sites: slices.Clone(obs.Sites), ServingSince: obs.ServingSince}
	for i := range out.Sites {
		out.Sites[i].Sidecar = SidecarObservation{Configured: true, LastReport: lastReport, Epoch: 2, CanKill: true, AliveAt: now}
		if out.Sites[i].Name == "a" {
			out.Sites[i].Sidecar.Epoch, out.Sites[i].Sidecar.AliveAt = 1, time.Time{}
		}
	}
	return out
}

func with(st Persisted, f func(*Persisted)) Persisted { f(&st); return st }

// confirmedDead records an operator's confirmation that site is dead, made
// at epoch, in st's failover in flight.
func confirmedDead(st Persisted, site string, epoch uint64) Persisted {
	f := *st.InFlight
	f.OperatorConfirmed = &FenceConfirmation{Site: site, Epoch: epoch, At: now.Add(-time.Second), By: "alice"}
	st.InFlight = &f
	return st
}

func polWith(f func(*Policy)) Policy {
	p := DefaultPolicy()
	f(&p)
	return p
}

// leaseExpired is a revocation time whose lease deadline has passed.
var leaseExpired = now.Add(-DefaultPolicy().LeaseTimeout - time.Minute)

// leasePending is a revocation time whose lease deadline has not passed.
var leasePending = now.Add(-time.Second)

// want describes the expected parts of a decision; zero fields are not
// checked except Fence, Repoint and FenceProof, which are always compared.
type want struct {
	action  Action
	reason  Reason
	target  string
	fence   []string
	repoint []string
	proof   FenceProof
	epoch   uint64 // checked when non-zero
}

type decideCase struct {
	name string
	obs  Observed
	st   Persisted
	pol  *Policy // nil: DefaultPolicy()
	at   time.Time
	want want
}

func (c decideCase) run(t *testing.T) Decision {
	t.Helper()
	pol := DefaultPolicy()
	if c.pol != nil {
		pol = *c.pol
	}
	at := now
	if !c.at.IsZero() {
		at = c.at
	}
	d := Decide(c.obs, c.st, pol, at)
	c.want.check(t, d)
	return d
}

func (w want) check(t *testing.T, d Decision) {
	t.Helper()
	if d.Action != w.action || d.Reason != w.reason {
		t.Fatalf("decision %s, want %s (%s)", d, w.action, w.reason)
	}
	if w.target != "" && d.Target != w.target {
		t.Errorf("target %q, want %q (%s)", d.Target, w.target, d)
	}
	if !slices.Equal(d.Fence, w.fence) {
		t.Errorf("fence %v, want %v (%s)", d.Fence, w.fence, d)
	}
	if w.repoint != nil && !slices.Equal(d.Repoint, w.repoint) {
		t.Errorf("repoint %v, want %v (%s)", d.Repoint, w.repoint, d)
	}
	if d.FenceProof != w.proof {
		t.Errorf("proof %q, want %q (%s)", d.FenceProof, w.proof, d)
	}
	if w.epoch != 0 && d.Epoch != w.epoch {
		t.Errorf("epoch %d, want %d (%s)", d.Epoch, w.epoch, d)
	}
	if d.Message == "" {
		t.Errorf("empty message (%s)", d)
	}
	if a, ok := ActionOf(d.Reason); !ok || a != d.Action {
		t.Errorf("reason %s belongs to action %q, decision has %q", d.Reason, a, d.Action)
	}
}
