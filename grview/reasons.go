package grview

// Reason is the machine-readable cause of a Verdict.
type Reason string

// Verdict reasons. Only ReasonQuorate names a primary; with every other
// reason the caller keeps routing where it is and does nothing destructive.
const (
	// ReasonQuorate: a majority of the group's members (see Evaluate's
	// denominator), each ONLINE in a view it sees quorate, report the same
	// group, view id and single primary.
	ReasonQuorate Reason = "quorate"
	// ReasonNoPrimary: such a majority agrees on a quorate view that has no
	// single ONLINE primary (an election under way, or multi-primary mode).
	ReasonNoPrimary Reason = "no-primary"
	// ReasonNoQuorum: no view has such a majority, and the members reached
	// say the group has lost its own: one reports its view without a
	// majority (it is in a minority, the others UNREACHABLE), or even with
	// every unreached member agreeing no majority would be left.
	ReasonNoQuorum Reason = "no-quorum"
	// ReasonUnconfirmed: no view has such a majority, yet nothing proves
	// the group lost its own: too few members were reached, or their views
	// are changing (members disagree during a view change).
	ReasonUnconfirmed Reason = "unconfirmed"
)

// Standing is how one configured site's report counted in a verdict.
type Standing string

// Standings of a site (SiteView.Standing).
const (
	// StandingUnreached: no report from the site this round.
	StandingUnreached Standing = "unreached"
	// StandingNotMember: the site is in no group: OFFLINE, ERROR, or
	// absent from its own member table. It does not vote.
	StandingNotMember Standing = "not-member"
	// StandingRecovering: the site is joining (RECOVERING). It does not vote.
	StandingRecovering Standing = "recovering"
	// StandingMinority: the site is ONLINE but sees a majority of its view
	// UNREACHABLE: it is cut off, its view is not quorate. It does not vote.
	StandingMinority Standing = "minority"
	// StandingAgrees: the site voted for the verdict's view.
	StandingAgrees Standing = "agrees"
	// StandingStaleView: the site voted for another view id of the same
	// group than the verdict's (an old view: it has not seen the change,
	// or is cut off and its failure detector has not fired yet). Outvoted.
	StandingStaleView Standing = "stale-view"
	// StandingOtherPrimary: the site voted for the verdict's view id but
	// names another primary. Outvoted.
	StandingOtherPrimary Standing = "other-primary"
	// StandingOtherGroup: the site voted for a view of a group with
	// another name. Outvoted.
	StandingOtherGroup Standing = "other-group"
	// StandingUndecided: the site voted, but no view had a majority.
	StandingUndecided Standing = "undecided"
)
