package grview

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Site is one configured member of the group.
type Site struct {
	// Name is the site's configured name (Report.Site).
	Name string
	// Addr is the site's configured MySQL address: a view member whose
	// server_uuid no report of this site ever named is matched to the site
	// by MEMBER_HOST:MEMBER_PORT (SameServer).
	Addr string
}

// State is what Evaluate carries from one round to the next. The caller
// keeps it (and may persist it) and passes it back; nothing else is
// remembered. The zero State is a daemon without history.
type State struct {
	// MaxViewSize is the denominator of every majority, sticky: the
	// largest view a verdict had quorum on, and at least the number of
	// configured sites when it was first set (0, no history, counts as the
	// number of configured sites, so a daemon that just started never
	// follows a member alone in a view of its own). A group that shrank
	// keeps needing a majority of its old size until a human lowers it
	// here, e.g. to the survivors after forcing the membership
	// (mysqlctl's ForceMembers): a member whose peers were expelled never
	// wins alone.
	MaxViewSize int
	// UUIDs maps each site to the server_uuid its own report last named.
	UUIDs map[string]string
	// GroupName and ViewID are those of the last verdict with quorum;
	// ViewSince is when that view id was first seen.
	GroupName, ViewID string
	ViewSince         time.Time
	// Primary (server_uuid) and PrimarySite are the last primary a verdict
	// named; PrimarySince is when it was first named. A verdict without a
	// primary (ReasonNoPrimary) leaves them.
	Primary, PrimarySite string
	PrimarySince         time.Time
}

// clone returns s with its own UUIDs map.
func (s State) clone() State {
	s.UUIDs = maps.Clone(s.UUIDs)
	if s.UUIDs == nil {
		s.UUIDs = map[string]string{}
	}
	return s
}

// SiteView is one configured site's part in a verdict.
type SiteView struct {
	Site string
	// Reached: the site's report was among the inputs.
	Reached bool
	// UUID is the site's server_uuid (its report's, else the one
	// remembered in State).
	UUID string
	// State and Role are the site's own row in its own member table.
	State MemberState
	Role  Role
	// GroupName and ViewID are what the site reports; ViewSize the number
	// of members in its table.
	GroupName, ViewID string
	ViewSize          int
	// Quorate: the site's own view has a majority reachable (Report.Quorate).
	Quorate bool
	// Primary is the server_uuid of the primary the site names ("" none).
	Primary string
	// Standing is how its report counted.
	Standing Standing
}

// Verdict is the group as the majority of its members report it.
type Verdict struct {
	// Reason says which rule gave the verdict; Quorate is true for
	// ReasonQuorate and ReasonNoPrimary only.
	Reason  Reason
	Quorate bool
	// GroupName, ViewID and ViewSize describe the winning view (empty
	// without one).
	GroupName, ViewID string
	ViewSize          int
	// Denominator is the member count a majority was taken of:
	// max(State.MaxViewSize (0: the configured sites), the view's own size).
	Denominator int
	// Primary is the winning view's primary (zero without one) and
	// PrimarySite the configured site it is ("" when no site matches).
	Primary     Member
	PrimarySite string
	// Members is the winning view as the first agreeing site (in
	// configuration order) reports it; States counts them per state. Both
	// nil without a winning view: Sites tells what each member says.
	Members []Member
	States  map[MemberState]int
	// Sites has one entry per configured site, in configuration order.
	Sites []SiteView
	// GroupNames lists every non-empty group name the reached sites report
	// (sorted); more than one means two groups among the configured
	// members, which Warnings says.
	GroupNames []string
	// ViewChanged: the winning view id differs from State.ViewID.
	// PrimaryChanged: the verdict names a primary other than
	// State.Primary; PreviousPrimary is that one ("" at the first verdict).
	ViewChanged, PrimaryChanged bool
	PreviousPrimary             string
	// Warnings are human-readable findings that need attention but do not
	// change the verdict (two groups, multi-primary mode, a view member no
	// configured site matches).
	Warnings []string
}

// Agreeing returns the sites that voted for the verdict's view.
func (v Verdict) Agreeing() []string {
	var out []string
	for _, s := range v.Sites {
		if s.Standing == StandingAgrees {
			out = append(out, s.Site)
		}
	}
	return out
}

// viewKey is what a vote is for.
type viewKey struct{ group, view, primary string }

// ballot collects the votes for one viewKey.
type ballot struct {
	key    viewKey
	sites  []int // indexes into sites
	size   int   // largest member table among its voters
	report Report
}

// Evaluate computes the group's verdict from the reports of the sites
// reached this round (at most one per site; reports of sites not in sites
// are ignored), and returns it with the State for the next round. now
// stamps ViewSince and PrimarySince.
//
// The rules, in order:
//
//  1. A site votes only when it is ONLINE in its own table and its own view
//     is quorate (a majority of the view ONLINE or RECOVERING). Others do
//     not vote: not-member, recovering, minority (SiteView.Standing).
//  2. A vote is for (group name, view id, primary). A view wins when its
//     votes are more than half of the denominator: the larger of
//     State.MaxViewSize (sticky; without history the number of configured
//     sites) and the view's own size. So a single stale or lying member is
//     always outvoted, and a member left alone in a small view (its peers
//     expelled or a second group bootstrapped) never wins by itself. Every
//     site votes at most once and the denominator is at least the number
//     of voters, so two views never both win.
//  3. No winner: ReasonNoQuorum when a reached site is in a minority or
//     even every unreached site voting for the strongest view would not
//     make a majority; ReasonUnconfirmed otherwise. A winner with a
//     single ONLINE primary: ReasonQuorate; without: ReasonNoPrimary.
//  4. Only a winning view updates State (its size into MaxViewSize, its
//     view id and primary); a round without one changes nothing but the
//     sites' remembered server_uuids.
func Evaluate(prev State, sites []Site, reports []Report, now time.Time) (Verdict, State) {
	next := prev.clone()
	bySite := map[string]Report{}
	for _, r := range reports {
		if _, dup := bySite[r.Site]; !dup {
			bySite[r.Site] = r
		}
	}
	v := Verdict{Sites: make([]SiteView, len(sites))}
	names := map[string][]string{}
	var ballots []*ballot
	minority := false
	for i, s := range sites {
		sv := SiteView{Site: s.Name, UUID: prev.UUIDs[s.Name], Standing: StandingUnreached}
		r, ok := bySite[s.Name]
		if ok {
			sv = siteView(s.Name, r)
			if r.Self != "" {
				next.UUIDs[s.Name] = r.Self
			}
			if r.GroupName != "" {
				names[r.GroupName] = append(names[r.GroupName], s.Name)
			}
			minority = minority || sv.Standing == StandingMinority
		}
		if sv.Standing == StandingAgrees { // a vote, counted below
			k := viewKey{r.GroupName, r.ViewID, sv.Primary}
			b := findBallot(ballots, k)
			if b == nil {
				b = &ballot{key: k, report: r}
				ballots = append(ballots, b)
			}
			b.sites = append(b.sites, i)
			b.size = max(b.size, len(r.Members))
		}
		v.Sites[i] = sv
	}
	v.GroupNames = slices.Sorted(maps.Keys(names))
	if len(names) > 1 {
		var parts []string
		for _, n := range v.GroupNames {
			parts = append(parts, fmt.Sprintf("%s (%s)", n, strings.Join(names[n], ", ")))
		}
		v.Warnings = append(v.Warnings, fmt.Sprintf("the configured members report %d group names: %s; two groups run among them (a second bootstrap?): "+
			"only one can be this group", len(names), strings.Join(parts, "; ")))
	}

	// Every site votes at most once and the denominator is at least the
	// number of voters, so two views can never both have a majority.
	floor := prev.MaxViewSize
	if floor <= 0 {
		floor = len(sites)
	}
	voters := 0
	for _, b := range ballots {
		voters += len(b.sites)
	}
	floor = max(floor, voters)
	var w *ballot
	strongest := 0
	for _, b := range ballots {
		strongest = max(strongest, len(b.sites))
		if 2*len(b.sites) > max(floor, b.size) {
			w = b
		}
	}
	if w == nil {
		v.Denominator = floor
		unreached := 0
		for i := range v.Sites {
			if v.Sites[i].Standing == StandingAgrees {
				v.Sites[i].Standing = StandingUndecided
			}
			if !v.Sites[i].Reached {
				unreached++
			}
		}
		v.Reason = ReasonUnconfirmed
		if minority || 2*(strongest+unreached) <= floor {
			v.Reason = ReasonNoQuorum
		}
		return v, next
	}

	v.Quorate = true
	v.GroupName, v.ViewID, v.ViewSize = w.key.group, w.key.view, w.size
	v.Denominator = max(floor, w.size)
	v.Members = slices.Clone(w.report.Members)
	v.States = w.report.Counts()
	for i := range v.Sites {
		sv := &v.Sites[i]
		switch {
		case sv.Standing != StandingAgrees || slices.Contains(w.sites, i):
		case sv.GroupName != w.key.group:
			sv.Standing = StandingOtherGroup
		case sv.ViewID != w.key.view:
			sv.Standing = StandingStaleView
		default:
			sv.Standing = StandingOtherPrimary
		}
	}
	if !w.report.SinglePrimary {
		v.Warnings = append(v.Warnings, "the group runs in multi-primary mode (group_replication_single_primary_mode=OFF): failoverd follows single-primary groups only")
	}
	for _, m := range w.report.Members {
		if siteOf(m, sites, next.UUIDs) == "" {
			v.Warnings = append(v.Warnings, fmt.Sprintf("member %s (%s) is in the group's view but is no configured site: add it to the group's sites", m.ID, m.Addr()))
		}
	}
	v.Reason = ReasonNoPrimary
	if p, ok := w.report.Primary(); ok {
		v.Reason = ReasonQuorate
		v.Primary, v.PrimarySite = p, siteOf(p, sites, next.UUIDs)
	}

	next.MaxViewSize = max(floor, w.size)
	next.GroupName = w.key.group
	if v.ViewChanged = w.key.view != prev.ViewID; v.ViewChanged {
		next.ViewID, next.ViewSince = w.key.view, now
	}
	if v.Primary.ID != "" {
		v.PreviousPrimary = prev.Primary
		if v.PrimaryChanged = v.Primary.ID != prev.Primary; v.PrimaryChanged {
			next.Primary, next.PrimarySince = v.Primary.ID, now
		}
		next.PrimarySite = v.PrimarySite
	}
	return v, next
}

// siteView classifies one reached site by its own report (rule 1): a
// voter is left StandingAgrees for Evaluate to count.
func siteView(name string, r Report) SiteView {
	sv := SiteView{Site: name, Reached: true, UUID: r.Self, GroupName: r.GroupName, ViewID: r.ViewID, ViewSize: len(r.Members),
		Quorate: r.Quorate()}
	if p, ok := r.Primary(); ok {
		sv.Primary = p.ID
	}
	self, ok := r.SelfMember()
	sv.State, sv.Role = self.State, self.Role
	switch {
	case !ok || !self.State.Reachable():
		sv.Standing = StandingNotMember
	case self.State == StateRecovering:
		sv.Standing = StandingRecovering
	case !sv.Quorate:
		sv.Standing = StandingMinority
	default:
		sv.Standing = StandingAgrees
	}
	return sv
}

func findBallot(bs []*ballot, k viewKey) *ballot {
	for _, b := range bs {
		if b.key == k {
			return b
		}
	}
	return nil
}

// siteOf names the configured site a member is: by the server_uuid a
// site's own report named, else by its SQL address; "" when none matches.
func siteOf(m Member, sites []Site, uuids map[string]string) string {
	for _, s := range sites {
		if uuids[s.Name] == m.ID && m.ID != "" {
			return s.Name
		}
	}
	for _, s := range sites {
		if _, known := uuids[s.Name]; !known && SameServer(s.Addr, m.Addr()) {
			return s.Name
		}
	}
	return ""
}
