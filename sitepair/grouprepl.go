package sitepair

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/failoverd/failoverd/grview"
	"github.com/failoverd/failoverd/gtid"
)

// DecideGroupReplication is the decision for a replication: group group
// (MySQL Group Replication, single-primary), from grview's verdict of this
// round and the persisted state. The group elects its primary itself, so
// the only action it ever returns is AdoptPrimary: a new epoch naming the
// primary a quorate verdict names (ReasonGroupAdoptPrimary,
// ReasonGroupPrimaryElected), which moves routing, the cache, DNS, hooks and
// readers after the group. Every other verdict (no quorum, unconfirmed, no
// primary, a primary that is no configured site) keeps the recorded active
// site and alerts: nothing writes to a server. It never returns RevokeEpoch,
// Promote, FenceSites, ReassertPrimary, Rejoin, StopReplicaIO or
// DisableSemiSyncSource (TestGroupReplicationDecisionNeverWritesToAServer).
// Pure: no I/O, no clock.
func DecideGroupReplication(v grview.Verdict, st Persisted) Decision {
	d := Decision{Action: Alert, Epoch: st.Epoch}
	switch v.Reason {
	case grview.ReasonNoQuorum:
		d.Reason = ReasonGroupNoQuorum
		d.Message = fmt.Sprintf("the group has no majority of its %d members: it takes no writes; routing stays on %s. "+
			"Bring members back; forcing the membership is a human decision (docs/design.md, \"Group Replication groups\")", v.Denominator, orNone(st.ActiveSite))
	case grview.ReasonUnconfirmed:
		d.Reason = ReasonGroupUnconfirmed
		d.Message = fmt.Sprintf("no majority of the group's %d members agrees on a view (a view change under way, or members unreached): routing stays on %s",
			v.Denominator, orNone(st.ActiveSite))
	case grview.ReasonNoPrimary:
		d.Reason = ReasonGroupNoPrimary
		d.Message = fmt.Sprintf("the group's quorate view %s has no single ONLINE primary (an election under way): routing stays on %s", v.ViewID, orNone(st.ActiveSite))
	case grview.ReasonQuorate:
		switch {
		case v.PrimarySite == "":
			// Routing can only name configured sites.
			d.Reason = ReasonGroupPrimaryNotConfigured
			d.Message = fmt.Sprintf("the group elected %s (%s), which is no configured site: add it to the group's sites; routing stays on %s",
				v.Primary.ID, v.Primary.Addr(), orNone(st.ActiveSite))
		case st.ActiveSite == "":
			d.Action, d.Reason, d.Target, d.Epoch = AdoptPrimary, ReasonGroupAdoptPrimary, v.PrimarySite, st.Epoch+1
			d.Message = fmt.Sprintf("no active site recorded: the group's primary %s (view %s) is adopted at epoch %d", v.PrimarySite, v.ViewID, d.Epoch)
		case st.ActiveSite != v.PrimarySite:
			d.Action, d.Reason, d.Target, d.From, d.Epoch = AdoptPrimary, ReasonGroupPrimaryElected, v.PrimarySite, st.ActiveSite, st.Epoch+1
			d.Message = fmt.Sprintf("the group elected %s in view %s (was %s): epoch %d names it; routing follows", v.PrimarySite, v.ViewID, st.ActiveSite, d.Epoch)
		default:
			var out []string
			for _, s := range v.Sites {
				if s.Standing != grview.StandingAgrees {
					out = append(out, fmt.Sprintf("%s %s", s.Site, s.Standing))
				}
			}
			if len(out) == 0 {
				d.Action, d.Reason = None, ReasonGroupHealthy
				d.Message = fmt.Sprintf("the group's view %s names %s primary; every member agrees", v.ViewID, st.ActiveSite)
			} else {
				d.Reason = ReasonGroupMemberNotOnline
				d.Message = fmt.Sprintf("the group's view %s names %s primary; not ONLINE in it: %s", v.ViewID, st.ActiveSite, strings.Join(out, ", "))
			}
		}
	default:
		d.Reason = ReasonInvalidInput
		d.Message = fmt.Sprintf("unknown Group Replication verdict %q: routing stays", v.Reason)
	}
	return d
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// DecideGroupSwitchover decides an operator's switchover of a Group
// Replication group to target from the last verdict: accepted
// (ReasonGroupSwitchover, with the target's server_uuid returned) only when the verdict is
// quorate, the target is a configured site ONLINE in its view and not
// already its primary, and the group is not paused. Accepted or refused,
// the Action is None: the switchover is the group's own election, asked of
// it with group_replication_set_as_primary; the epoch moves only when a
// later quorate verdict names the target (DecideGroupReplication). Pure.
func DecideGroupSwitchover(v grview.Verdict, st Persisted, target string, now time.Time) (Decision, string) {
	d := Decision{Action: None, Target: target, Epoch: st.Epoch}
	var uuid string
	var state grview.MemberState
	for _, s := range v.Sites {
		if s.Site == target {
			uuid, state = s.UUID, s.State
		}
	}
	online := false
	for _, m := range v.Members {
		if m.ID == uuid && uuid != "" && m.State == grview.StateOnline {
			online = true
		}
	}
	switch {
	case st.Pause.ActiveAt(now):
		d.Reason = ReasonSwitchoverPaused
		d.Message = fmt.Sprintf("the group is paused by %s until %s: resume it first", st.Pause.By, st.Pause.Until.UTC().Format(time.RFC3339))
	case !v.Quorate:
		d.Reason = ReasonSwitchoverGroupNoQuorum
		d.Message = fmt.Sprintf("the group has no quorate view (%s): no member can be elected", v.Reason)
	case v.PrimarySite == target:
		d.Reason = ReasonSwitchoverTargetIsPrimary
		d.Message = fmt.Sprintf("%s already is the group's primary (view %s)", target, v.ViewID)
	case !online:
		d.Reason = ReasonSwitchoverTargetNotOnline
		d.Message = fmt.Sprintf("%s is not ONLINE in the group's view %s (its own state: %s; server_uuid %q): only an ONLINE member can be elected",
			target, v.ViewID, orNone(string(state)), uuid)
	default:
		d.Reason = ReasonGroupSwitchover
		d.Message = fmt.Sprintf("the group is asked to elect %s (%s) in place of %s; routing follows its next quorate view naming it",
			target, uuid, orNone(v.PrimarySite))
		return d, uuid
	}
	return d, ""
}

// ErrGroupRecoveryRefused is wrapped by every refusal of
// PlanGroupRecovery; the message starts with a RecoveryRefusal word.
var ErrGroupRecoveryRefused = errors.New("forcing the group's membership refused")

// RecoveryRefusal is the machine-readable cause of a refused recovery.
type RecoveryRefusal string

// Why a recovery of a Group Replication group that lost its majority is
// refused.
const (
	// RecoveryGroupHasQuorum: the verdict is quorate (or no-primary): the
	// group has its majority; the server would refuse force_members anyway.
	RecoveryGroupHasQuorum RecoveryRefusal = "group-has-quorum"
	// RecoveryUnconfirmed: the verdict is not no-quorum (too few members
	// reached, views changing): nothing proves the majority is lost.
	RecoveryUnconfirmed RecoveryRefusal = "loss-of-quorum-unconfirmed"
	// RecoverySurvivorNotInGroup: the chosen survivor is unreached or not
	// ONLINE in a view of its own (OFFLINE, ERROR, RECOVERING).
	RecoverySurvivorNotInGroup RecoveryRefusal = "survivor-not-in-group"
	// RecoverySurvivorBehind: another survivor's GTID set contains the
	// chosen one's and more: forcing the chosen one would drop what only
	// the other holds; force the other.
	RecoverySurvivorBehind RecoveryRefusal = "survivor-lacks-transactions"
	// RecoveryIncomparable: no survivor's GTID set contains every other
	// survivor's: whichever is forced, transactions only another one holds
	// are lost; a human must reconcile first.
	RecoveryIncomparable RecoveryRefusal = "incomparable-survivors"
	// RecoveryUnknownSet: a survivor's GTID set was not read.
	RecoveryUnknownSet RecoveryRefusal = "survivor-set-unknown"
)

// GroupRecovery is what forcing a Group Replication group's membership to
// its survivors would do (PlanGroupRecovery).
type GroupRecovery struct {
	// Survivor is the site group_replication_force_members runs on; its
	// GTID set contains every other survivor's.
	Survivor string
	// Members are the survivors kept: the reached sites ONLINE in the same
	// view as Survivor (Survivor first, then configuration order).
	Members []string
	// Excluded are the configured sites left out: each must be stopped
	// before, or it may form the other half of a split group.
	Excluded []string
	// Token confirms the plan: it changes with the view, the members and
	// the survivor's GTID set, so a confirmation of an older plan does not
	// force a newer one.
	Token string
	// Summary says, in words, what forcing does and what it costs.
	Summary string
}

// PlanGroupRecovery plans forcing the membership of a Group Replication
// group that lost its majority to the survivors of survivor's view, from
// the verdict and every reached site's gtid_executed. It refuses (wrapping
// ErrGroupRecoveryRefused, the reason first) unless the verdict is
// no-quorum, survivor is ONLINE in a view of its own, every survivor's set
// is known and survivor's set contains every other survivor's. Pure.
func PlanGroupRecovery(v grview.Verdict, executed map[string]gtid.Set, survivor string) (GroupRecovery, error) {
	refuse := func(r RecoveryRefusal, format string, args ...any) (GroupRecovery, error) {
		return GroupRecovery{}, fmt.Errorf("%w: %s: %s", ErrGroupRecoveryRefused, r, fmt.Sprintf(format, args...))
	}
	switch v.Reason {
	case grview.ReasonNoQuorum:
	case grview.ReasonQuorate, grview.ReasonNoPrimary:
		return refuse(RecoveryGroupHasQuorum, "the group has its majority (view %s): nothing to recover", v.ViewID)
	default:
		return refuse(RecoveryUnconfirmed, "the verdict is %s, not no-quorum: nothing proves the group lost its majority", v.Reason)
	}
	var self grview.SiteView
	for _, s := range v.Sites {
		if s.Site == survivor {
			self = s
		}
	}
	if !self.Reached || self.State != grview.StateOnline || self.ViewID == "" {
		return refuse(RecoverySurvivorNotInGroup, "%s is %s (state %s): only a member ONLINE in a view of its own can be forced", survivor,
			orNone(string(self.Standing)), orNone(string(self.State)))
	}
	r := GroupRecovery{Survivor: survivor, Members: []string{survivor}}
	for _, s := range v.Sites {
		switch {
		case s.Site == survivor:
		case s.Reached && s.State == grview.StateOnline && s.ViewID == self.ViewID && s.GroupName == self.GroupName:
			r.Members = append(r.Members, s.Site)
		default:
			r.Excluded = append(r.Excluded, s.Site)
		}
	}
	mine, ok := executed[survivor]
	if !ok {
		return refuse(RecoveryUnknownSet, "the GTID set of %s was not read", survivor)
	}
	var incomparable []string
	for _, m := range r.Members[1:] {
		other, ok := executed[m]
		if !ok {
			return refuse(RecoveryUnknownSet, "the GTID set of survivor %s was not read", m)
		}
		if mine.Contains(other) {
			continue
		}
		if other.Contains(mine) {
			return refuse(RecoverySurvivorBehind, "%s holds transactions %s lacks (%s): force %s instead", m, survivor, other.Subtract(mine), m)
		}
		incomparable = append(incomparable, fmt.Sprintf("%s holds %s that %s lacks", m, other.Subtract(mine), survivor))
	}
	if len(incomparable) > 0 {
		return refuse(RecoveryIncomparable, "no survivor holds every other's transactions: %s; reconcile them by hand first", strings.Join(incomparable, "; "))
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{self.GroupName, self.ViewID, strings.Join(r.Members, ","), mine.String()}, "|")))
	r.Token = hex.EncodeToString(sum[:])[:12]
	excluded := "none"
	if len(r.Excluded) > 0 {
		excluded = strings.Join(r.Excluded, ", ")
	}
	r.Summary = fmt.Sprintf("forces the group's membership to %s (group_replication_force_members on %s, view %s, gtid_executed %s): "+
		"the group takes writes again with %d member(s) and a majority of %d from now on; left out: %s. Stop every member left out first: "+
		"one still running may form the other half of a split group, and whatever only it committed is not in the forced group",
		strings.Join(r.Members, ", "), survivor, self.ViewID, orNone(mine.String()), len(r.Members), len(r.Members), excluded)
	return r, nil
}

// ErrGroupBootstrapRefused is wrapped by every refusal of
// PlanGroupBootstrap; the message starts with a RecoveryRefusal word.
var ErrGroupBootstrapRefused = errors.New("re-bootstrapping the group refused")

// Why re-bootstrapping a Group Replication group after a total outage is
// refused (besides RecoveryGroupHasQuorum and RecoveryUnconfirmed).
const (
	// BootstrapMemberUnreachable: a configured member was not reached: it
	// may still run a group (or hold transactions no reached member has).
	BootstrapMemberUnreachable RecoveryRefusal = "member-unreachable"
	// BootstrapMemberInGroup: a member is in a group's view (ONLINE,
	// RECOVERING, UNREACHABLE): the group still runs; bootstrapping
	// another member would start a second group beside it.
	BootstrapMemberInGroup RecoveryRefusal = "member-in-group"
	// BootstrapMemberInError: a member is in ERROR: its Group Replication
	// still runs and START GROUP_REPLICATION would fail; it needs STOP
	// GROUP_REPLICATION (and offline_mode OFF) by hand first.
	BootstrapMemberInError RecoveryRefusal = "member-in-error"
	// BootstrapUnknownSet: a member's GTID set was not read.
	BootstrapUnknownSet RecoveryRefusal = "member-set-unknown"
	// BootstrapGroupNames: the members name different groups (or none):
	// they are no one group to re-form.
	BootstrapGroupNames RecoveryRefusal = "group-names-differ"
	// BootstrapMemberBehind: another member's set contains the chosen
	// one's and more: bootstrapping the chosen one would leave the other
	// unable to join (or lose what only it holds); choose the other.
	BootstrapMemberBehind RecoveryRefusal = "member-lacks-transactions"
	// BootstrapIncomparable: no member's set contains every other's:
	// whichever bootstraps, the others hold transactions it lacks and
	// cannot join; a human must reconcile first.
	BootstrapIncomparable RecoveryRefusal = "incomparable-members"
)

// GroupBootstrap is what re-bootstrapping a Group Replication group after
// a total outage would do (PlanGroupBootstrap).
type GroupBootstrap struct {
	// Member bootstraps the group (group_replication_bootstrap_group ON,
	// START GROUP_REPLICATION, OFF); its GTID set contains every other
	// member's.
	Member string
	// Joiners start Group Replication after it, in configuration order,
	// and join its group.
	Joiners []string
	// Token confirms the plan: it changes with the group, the members and
	// any member's GTID set.
	Token string
	// Summary says, in words, what bootstrapping does.
	Summary string
}

// PlanGroupBootstrap plans re-forming a Group Replication group after a
// total outage (every member stopped its Group Replication, or every
// mysqld restarted) on member, from the verdict and every site's
// gtid_executed. It refuses (wrapping ErrGroupBootstrapRefused, the reason
// first) unless every configured site was reached, none is in a group's
// view or in ERROR, all name the same group, every site's set is known and
// member's set contains every other's; otherwise the plan bootstraps
// member and starts the others. Pure.
func PlanGroupBootstrap(v grview.Verdict, executed map[string]gtid.Set, member string) (GroupBootstrap, error) {
	refuse := func(r RecoveryRefusal, format string, args ...any) (GroupBootstrap, error) {
		return GroupBootstrap{}, fmt.Errorf("%w: %s: %s", ErrGroupBootstrapRefused, r, fmt.Sprintf(format, args...))
	}
	switch v.Reason {
	case grview.ReasonNoQuorum:
	case grview.ReasonQuorate, grview.ReasonNoPrimary:
		return refuse(RecoveryGroupHasQuorum, "the group runs with its majority (view %s): nothing to bootstrap", v.ViewID)
	default:
		return refuse(RecoveryUnconfirmed, "the verdict is %s, not no-quorum: members may still run a group", v.Reason)
	}
	known := false
	for _, s := range v.Sites {
		known = known || s.Site == member
	}
	if !known {
		return refuse(BootstrapMemberUnreachable, "%s is no configured member", member)
	}
	var unreached, inGroup, inError, names []string
	for _, s := range v.Sites {
		switch {
		case !s.Reached:
			unreached = append(unreached, s.Site)
		case s.State == grview.StateError:
			inError = append(inError, s.Site)
		case s.State != grview.StateOffline && s.State != "":
			inGroup = append(inGroup, fmt.Sprintf("%s %s in view %s", s.Site, s.State, orNone(s.ViewID)))
		}
		if s.Reached && !slices.Contains(names, s.GroupName) {
			names = append(names, s.GroupName)
		}
	}
	// Prevents bootstrapping beside a member that may still run the group
	// or hold transactions nobody reached has.
	if len(unreached) > 0 {
		return refuse(BootstrapMemberUnreachable, "%s not reached: every configured member must answer, stopped, before a bootstrap", strings.Join(unreached, ", "))
	}
	// Prevents a second group beside the running one.
	if len(inGroup) > 0 {
		return refuse(BootstrapMemberInGroup, "%s: the group still runs; bring the others back into it (or force-members if it lost its majority)", strings.Join(inGroup, "; "))
	}
	if len(inError) > 0 {
		return refuse(BootstrapMemberInError, "%s in ERROR: run STOP GROUP_REPLICATION (and SET GLOBAL offline_mode = OFF) on it first", strings.Join(inError, ", "))
	}
	if len(names) != 1 || names[0] == "" {
		return refuse(BootstrapGroupNames, "the members name group(s) %q: every member must have the same group_replication_group_name", names)
	}
	sites := make([]string, 0, len(v.Sites))
	for _, s := range v.Sites {
		sites = append(sites, s.Site)
		if _, ok := executed[s.Site]; !ok {
			return refuse(BootstrapUnknownSet, "the GTID set of %s was not read", s.Site)
		}
	}
	mine := executed[member]
	r := GroupBootstrap{Member: member}
	var incomparable []string
	for _, s := range sites {
		if s == member {
			continue
		}
		r.Joiners = append(r.Joiners, s)
		other := executed[s]
		if mine.Contains(other) {
			continue
		}
		if other.Contains(mine) {
			return refuse(BootstrapMemberBehind, "%s holds transactions %s lacks (%s): bootstrap %s instead", s, member, other.Subtract(mine), s)
		}
		incomparable = append(incomparable, fmt.Sprintf("%s holds %s that %s lacks", s, other.Subtract(mine), member))
	}
	if len(incomparable) > 0 {
		return refuse(BootstrapIncomparable, "no member holds every other's transactions: %s; reconcile them by hand first", strings.Join(incomparable, "; "))
	}
	h := sha256.New()
	fmt.Fprintf(h, "bootstrap|%s|%s", names[0], member)
	for _, s := range sites {
		fmt.Fprintf(h, "|%s=%s", s, executed[s])
	}
	r.Token = hex.EncodeToString(h.Sum(nil))[:12]
	r.Summary = fmt.Sprintf("bootstraps group %s on %s (group_replication_bootstrap_group ON, START GROUP_REPLICATION, OFF; gtid_executed %s, which contains every other member's), "+
		"then starts Group Replication on %s one after the other, which join it; %s is the group's first primary and routing follows it once a majority of the %d members is ONLINE",
		names[0], member, orNone(mine.String()), orNone(strings.Join(r.Joiners, ", ")), member, len(sites))
	return r, nil
}
