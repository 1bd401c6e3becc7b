package sitepair

import (
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
	case statemachine.PrimaryDebouncing:
		return v.decision(ReasonPrimaryDebouncing, "primary %s is failing probes but has not reached the failure threshold", v.det.Primary)
	case statemachine.UnreachablePrimary:
		return v.decision(ReasonPrimaryPartitioned, "the daemon cannot reach primary %s but %s still stream from it: partition between the daemon and the primary, no failover",
			v.st.ActiveSite, strings.Join(v.det.Streaming, ", "))
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

// DecideSwitchover decides an operator's planned switchover to target. It
// checks the same safety rules as an automatic failover (fence before
// promote, no dr-only, diverged or operator-fenced target, no target lacking
// another replica's transactions) but not the escalation limit; within the
// failover cooldown it refuses unless force is set (an operator who has just
// seen a failover must mean to move the primary again). Accepted, it returns
// RevokeEpoch with Planned set; phase 2 comes from Decide once the old
// primary is fenced and the target caught up.
func DecideSwitchover(obs Observed, st Persisted, pol Policy, target string, force bool, now time.Time) Decision {
	v, d, ok := prepare(obs, st, pol, now)
	if !ok {
		return d
	}
	// One failover at a time: a second revoke would orphan the first.
	if st.InFlight != nil {
		return v.decision(ReasonSwitchoverInFlight, "a failover from %s to %s is in flight", st.InFlight.From, st.InFlight.To)
	}
	switch v.det.Code {
	case statemachine.Healthy, statemachine.ReplicaUnreachable, statemachine.ReplicationBroken,
		statemachine.ReplicaNotFollowingPrimary, statemachine.PrimaryDebouncing,
		statemachine.PrimaryDown, statemachine.PrimaryDownUncorroborated, statemachine.UnreachablePrimary:
	default:
		return v.decision(ReasonSwitchoverGroupState, "group state %s has no single recorded primary to switch from", v.det.Code)
	}
	if st.ActiveSite == "" {
		return v.decision(ReasonSwitchoverGroupState, "no active site is recorded")
	}
	if target == st.ActiveSite {
		return v.decision(ReasonSwitchoverTargetIsPrimary, "%s already is the primary", target)
	}
	t := v.index(target)
	if t < 0 {
		return v.decision(ReasonSwitchoverBadTarget, "unknown site %q", target)
	}
	if why := v.ineligible(t, st.ActiveSite, false); why != "" {
		return v.decision(ReasonSwitchoverBadTarget, "%s cannot be promoted: %s", target, why)
	}
	// Anti-flap: moving the primary again right after a failover needs intent.
	if !force && !st.LastFailoverAt.IsZero() && now.Sub(st.LastFailoverAt) < pol.FailoverCooldown {
		return v.decision(ReasonSwitchoverCooldown, "the last failover or switchover (to %s at %s) is within the %v cooldown; force it to switch over anyway",
			st.LastFailoverTarget, st.LastFailoverAt.UTC().Format(time.RFC3339), pol.FailoverCooldown)
	}
	// The target must hold what every other replica holds, or be able to
	// get it from the primary it streams from: under load a target a few
	// transactions behind another replica is normal. Phase 2 promotes only
	// once it holds everything the fenced primary committed (or, at the
	// catch-up timeout, re-asserts the old primary): nothing is lost either way.
	if j := v.lacking(t, st.ActiveSite); j >= 0 && !v.catchesUpFrom(t, st.ActiveSite) {
		return v.decision(ReasonSwitchoverTargetBehind, "%s lacks %s and cannot get it from %s", target, v.missing(t, j), st.ActiveSite)
	}
	d = v.decision(ReasonSwitchover, "planned switchover from %s to %s: revoking epoch %d", st.ActiveSite, target, st.Epoch)
	d.Epoch = st.Epoch + 1
	d.Target, d.From, d.Planned = target, st.ActiveSite, true
	d.Fence = []string{st.ActiveSite}
	return d
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
			LastStreamingAt: s.LastStreamingAt,
		}
		if s.Name == st.ActiveSite {
			in.PrimaryLastSeen = s.LastReachableAt
		}
	}
	v.in = in
	v.det = statemachine.Detect(in)
	return v, Decision{}, true
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

// decision builds a Decision for reason r, with the action r belongs to.
func (v *view) decision(r Reason, format string, args ...any) Decision {
	a, ok := reasonAction[r]
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

// unpromotable says why site i may never be promoted whatever its state
// ("" if it may): dr-only, operator-fenced or known-diverged.
func (v *view) unpromotable(i int) string {
	s := &v.sites[i]
	switch {
	case s.Role != PrimaryCandidate:
		return "dr-only"
	case v.opFenced(s.Name):
		return "operator-fenced"
	case v.diverged(s.Name):
		return "known-diverged"
	case v.recloning(s.Name):
		return "recloning"
	}
	return ""
}

// ineligible says why site i cannot be promoted now ("" if it can).
// oldPrimary is never a candidate; lag is checked only for automatic
// failovers.
func (v *view) ineligible(i int, oldPrimary string, checkLag bool) string {
	s := &v.sites[i]
	if s.Name == oldPrimary {
		return "old primary"
	}
	if why := v.unpromotable(i); why != "" {
		return why
	}
	switch {
	case s.State != statemachine.ReadOnly:
		return s.State.String()
	case s.ReplicationBroken:
		return "replication broken"
	case checkLag && v.pol.MaxLag > 0 && !s.LagKnown:
		// Seconds_Behind_Master NULL is unknown, never "no lag".
		return "lag unknown"
	case checkLag && v.pol.MaxLag > 0 && s.Lag > v.pol.MaxLag:
		return fmt.Sprintf("lag %v over %v", s.Lag, v.pol.MaxLag)
	case checkLag && v.pol.MaxLag > 0 && s.BacklogAge > v.pol.MaxLag:
		// An applier blocked inside a commit may report Seconds_Behind 0
		// while what it received waits: the GTID sets say how far behind.
		return fmt.Sprintf("lag %v over %v (received transactions not applied, from GTID sets)", s.BacklogAge, v.pol.MaxLag)
	}
	return ""
}

// catchesUpFrom reports whether site t streams from the writable primary
// and everything any reachable site holds is on t or on that primary: once
// the primary is fenced, t receives the rest from it.
func (v *view) catchesUpFrom(t int, primary string) bool {
	p := v.index(primary)
	if p < 0 {
		return false
	}
	s, ps := v.sites[t], v.sites[p]
	if ps.State != statemachine.Writable || s.ReplicatingFrom != primary || !s.IOConnected || s.SourceSilent || s.ReplicationBroken {
		return false
	}
	held := v.have[t].Union(v.have[p])
	for j, o := range v.sites {
		if j == t || !o.State.Reachable() || held.Covers(v.need(j)) {
			continue
		}
		// A replica of the same primary probed a moment after it holds
		// more of the primary's newest transactions than the primary's own
		// probe showed: the target gets those from the primary as well.
		// Only the replica's own writes (errant) could not come from there.
		if o.ReplicatingFrom == primary && o.ServerID != "" && v.errant(o, ps).IsEmpty() {
			continue
		}
		return false
	}
	return true
}

// coversOthers reports whether held covers what every reachable site other
// than t holds (see need).
func (v *view) coversOthers(t int, held gtid.Set) bool {
	for j, o := range v.sites {
		if j != t && o.State.Reachable() && !held.Covers(v.need(j)) {
			return false
		}
	}
	return true
}

// need is what a promoted site must hold of site j's transactions: all of
// them, except the divergent set recorded for a known-diverged site (its
// errant transactions must not be required; anything newer still is).
func (v *view) need(j int) gtid.Set {
	// Its data is being replaced by the primary's: none of it is owed.
	if v.recloning(v.sites[j].Name) {
		return v.have[j].Subtract(v.have[j])
	}
	if d, ok := v.st.Diverged[v.sites[j].Name]; ok {
		return v.have[j].Subtract(d)
	}
	return v.have[j]
}

// lacking returns a reachable site (other than t and skip) holding
// transactions site t lacks (see need), or -1.
func (v *view) lacking(t int, skip string) int {
	for j, s := range v.sites {
		if j == t || s.Name == skip || !s.State.Reachable() {
			continue
		}
		if !v.have[t].Covers(v.need(j)) {
			return j
		}
	}
	return -1
}

// missing describes what site t lacks from site j.
func (v *view) missing(t, j int) string {
	m := v.have[t].Uncovered(v.need(j))
	return fmt.Sprintf("%d transactions that %s has (%s)", m.Count(), v.sites[j].Name, m.Compact())
}

// better reports whether candidate i ranks before j: the preferred site
// (in-flight target), then Policy.PreferSite, then higher Priority, then
// lower declaration Index.
func (v *view) better(i, j int, prefer string) bool {
	a, b := &v.sites[i], &v.sites[j]
	for _, p := range []string{prefer, v.pol.PreferSite} {
		if p != "" && (a.Name == p) != (b.Name == p) {
			return a.Name == p
		}
	}
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return a.Index < b.Index
}

// choose picks the failover target: among eligible candidates, the one
// whose set contains every other candidate's, ranked by better. It blocks
// (ok false, with an Alert decision) when no candidate is eligible or when
// the candidates' sets are incomparable. Callers then check that the pick
// lacks nothing another reachable site has.
func (v *view) choose(oldPrimary, prefer string) (int, Decision, bool) {
	var elig []int
	var why []string
	for i, s := range v.sites {
		if r := v.ineligible(i, oldPrimary, true); r != "" {
			if s.Name != oldPrimary {
				why = append(why, s.Name+": "+r)
			}
			continue
		}
		elig = append(elig, i)
	}
	if len(elig) == 0 {
		return -1, v.decision(ReasonNoEligibleCandidate, "no eligible candidate (%s)", strings.Join(why, "; ")), false
	}
	pick := -1
	for _, i := range elig {
		top := true
		for _, j := range elig {
			top = top && v.have[i].Covers(v.have[j])
		}
		if top && (pick < 0 || v.better(i, pick, prefer)) {
			pick = i
		}
	}
	if pick < 0 {
		var sets []string
		for _, i := range elig {
			sets = append(sets, v.sites[i].Name+"="+v.have[i].Compact())
		}
		return -1, v.decision(ReasonIncomparableCandidates, "no candidate has every other candidate's transactions: %s", strings.Join(sets, "; ")), false
	}
	return pick, Decision{}, true
}

// failover handles a corroborated PrimaryDown: anti-flap checks, candidate
// choice, then phase 1.
func (v *view) failover() Decision {
	st, pol, now := v.st, v.pol, v.now
	// A human asked us to stop after too many failovers.
	if st.EscalationHalted {
		return v.decision(ReasonEscalationHalted, "primary %s is down but automatic failover is halted until a human acknowledges", st.ActiveSite)
	}
	// Anti-flap: a clock that went backwards also counts as "too recent".
	if !st.LastFailoverAt.IsZero() && now.Sub(st.LastFailoverAt) < pol.FailoverCooldown {
		return v.decision(ReasonCooldown, "primary %s is down but the last failover was at %s, within the %v cooldown",
			st.ActiveSite, st.LastFailoverAt.Format(time.RFC3339), pol.FailoverCooldown)
	}
	recent := 0
	for _, t := range st.FailoverHistory {
		if now.Sub(t) < pol.EscalationWindow {
			recent++
		}
	}
	// Repeated failovers mean something a failover cannot fix.
	if recent >= pol.EscalationCount {
		return v.decision(ReasonEscalationLimit, "%d automatic failovers within %v (limit %d): halting automatic failover until a human acknowledges",
			recent, pol.EscalationWindow, pol.EscalationCount)
	}
	t, d, ok := v.choose(st.ActiveSite, "")
	if !ok {
		return d
	}
	// Promoting a site that lacks what a reachable replica (even an
	// ineligible one) holds would throw acknowledged transactions away.
	if j := v.lacking(t, st.ActiveSite); j >= 0 {
		return v.decision(ReasonCandidateLacksTransactions, "best candidate %s lacks %s", v.sites[t].Name, v.missing(t, j))
	}
	target := v.sites[t].Name
	d = v.decision(ReasonFailoverRevoke, "primary %s is down (%s); failing over to %s: revoking epoch %d (phase 1 of 2)",
		st.ActiveSite, v.corroboration(), target, st.Epoch)
	if pol.Fencing == FencingNone {
		d.Message += "; fencing none: the promotion will not wait for a fence proof (durability risk)"
	}
	d.Epoch = st.Epoch + 1
	d.Target, d.From = target, st.ActiveSite
	d.Fence = []string{st.ActiveSite}
	// Semi-sync fencing: detach the replicas with the revoke itself rather
	// than one decision round later (stopping an IO thread whose source
	// hangs takes MariaDB seconds). Not in other modes: the primary-down
	// proof needs the replicas' running IO threads as witnesses.
	if from := v.sites[v.index(st.ActiveSite)]; pol.Fencing.UsesSemiSync() && pol.SemiSyncReady(from.SemiSync) == "" {
		d.Detach, _ = v.semiSyncDetach(from)
	}
	return d
}

func (v *view) corroboration() string {
	if v.pol.Detection == statemachine.DaemonOnly {
		return "daemon-only detection"
	}
	return "corroborated by " + strings.Join(v.det.Lost, ", ")
}

// proof returns the fence proof for the in-flight failover's old primary,
// or "" if none holds. docs/design.md lists every proof and its tests.
func (v *view) proof() FenceProof {
	inf := v.st.InFlight
	from := v.sites[v.index(inf.From)]
	switch {
	case from.State == statemachine.Writable:
		// A writable old primary is never fenced, whatever else we know.
		return ""
	case from.FencedEpoch >= inf.Epoch:
		return ProofFenceConfirmed
	case v.mysqldDown(from):
		return ProofPrimaryDown
	case v.pol.Fencing.UsesSidecar() && v.sidecarFenced(from):
		return ProofSidecarFenced
	case v.pol.Fencing.UsesSemiSync() && v.semiSyncFenced(from):
		return ProofSemiSync
	case v.pol.Fencing.UsesSidecar() && v.leaseExpired():
		return ProofLeaseExpired
	case v.operatorConfirmed(from):
		return ProofOperatorConfirmed
	case v.pol.Fencing == FencingNone:
		return ProofNoFencing
	}
	return ""
}

// operatorConfirmed: a human confirmed the old primary dead for this very
// failover (its site, its revoked epoch), and it still does not answer: one
// that answers again is fenced and read back instead (F2, F7), since the
// human's premise no longer holds.
func (v *view) operatorConfirmed(from SiteObservation) bool {
	c := v.st.InFlight.OperatorConfirmed
	return c != nil && c.Site == from.Name && c.Epoch == v.st.InFlight.Epoch && from.State == statemachine.Unreachable
}

// mysqldDown: the old primary refused enough consecutive probes and the
// replicas corroborate. A single refusal also comes from a Service without
// endpoints, a proxy in front or a restarting pod.
func (v *view) mysqldDown(from SiteObservation) bool {
	if from.State != statemachine.Unreachable || from.RefusedProbes < v.pol.RefusedProbes || v.pol.Detection == statemachine.DaemonOnly {
		return false
	}
	lost := 0
	for _, s := range v.in.Sites {
		switch v.in.Witness(s, from.Name, from.LastReachableAt) {
		case statemachine.WitnessStreaming:
			// A replica still receiving from it: something answers there.
			return false
		case statemachine.WitnessLost:
			lost++
		}
	}
	return lost > 0
}

// SemiSyncReady says why a primary's semi-sync settings cannot back the
// semi-sync proof ("" when they can).
func (p Policy) SemiSyncReady(s SemiSyncObservation) string {
	switch {
	case !s.Known:
		return "semi-sync settings unknown"
	case !s.Enabled:
		return "semi-sync is not enabled on the primary"
	case !s.Active:
		return "semi-sync is enabled but not active (the primary fell back to asynchronous commits)"
	case s.Timeout < MinSemiSyncTimeout:
		return fmt.Sprintf("semi-sync timeout %v is below %v: a hung primary that resumes falls back to async and acknowledges writes", s.Timeout, MinSemiSyncTimeout)
	case !s.WaitNoReplica:
		return "semi-sync does not wait when no replica is connected (wait_no_slave/wait_no_replica OFF)"
	case p.SemiSyncAfterSync && !strings.EqualFold(s.WaitPoint, "AFTER_SYNC"):
		return fmt.Sprintf("semi-sync wait point %q is not AFTER_SYNC", s.WaitPoint)
	}
	return ""
}

// semiSyncDetach returns the reachable sites that could still acknowledge
// the old primary's semi-sync commits (a running IO thread pointed at it or
// at an unknown source) and whether the proof is blocked by a site the
// daemon cannot reach whose mysqld is not known down.
func (v *view) semiSyncDetach(from SiteObservation) (detach []string, blocked string) {
	for _, s := range v.sites {
		switch {
		case s.Name == from.Name:
		case s.State == statemachine.Unreachable:
			// It may be connected to the old primary and acknowledge.
			if s.RefusedProbes < v.pol.RefusedProbes {
				blocked = s.Name
			}
		case s.State == statemachine.Unknown:
			blocked = s.Name
		case !s.IOStopped && (s.ReplicatingFrom == from.Name || s.ReplicatingFrom == ""):
			detach = append(detach, s.Name)
		}
	}
	return detach, blocked
}

// semiSyncFenced: the old primary's own settings (at its last reachable
// probe) never let a commit be acknowledged without a replica, and no
// replica can acknowledge any more.
func (v *view) semiSyncFenced(from SiteObservation) bool {
	if v.pol.SemiSyncReady(from.SemiSync) != "" {
		return false
	}
	detach, blocked := v.semiSyncDetach(from)
	return len(detach) == 0 && blocked == ""
}

// sidecarFenced: the old primary's sidecar said, holding the revoked epoch
// or a newer one, that it fenced or killed its mysqld or found it down.
func (v *view) sidecarFenced(from SiteObservation) bool {
	sc := from.Sidecar
	if !sc.Configured || sc.LastReport.IsZero() || sc.Epoch < v.st.InFlight.Epoch {
		return false
	}
	return sc.FencedEpoch >= v.st.InFlight.Epoch || sc.MysqldDown
}

func (v *view) leaseExpired() bool {
	dl, ok := v.leaseDeadline()
	return ok && !v.now.Before(dl) && v.peerRestartedBefore(dl) == ""
}

// peerRestartedBefore names a peer sidecar that may have restarted before
// dl ("" when none): a restarted sidecar holds no view, may adopt the old
// epoch from the old primary's sidecar and serve it back, renewing its lease
// while the daemon is told nothing. A peer that provably ran the same boot
// at dl (AliveAt) served only revoking views until then; after dl the old
// primary's sidecar has fenced, and it never unfences (issue 26 hole 2).
func (v *view) peerRestartedBefore(dl time.Time) string {
	from := v.st.InFlight.From
	for _, s := range v.sites {
		if s.Name != from && s.Sidecar.Configured && s.Sidecar.AliveAt.Before(dl) {
			return s.Name
		}
	}
	return ""
}

// leaseDeadline is when the old primary's sidecar lease has provably run
// out; ok is false when nothing can prove it. The lease may have been
// renewed by this daemon (its last report), by a peer sidecar still holding
// an older view (what the peers say they served it), or by another daemon
// before this one started serving views.
func (v *view) leaseDeadline() (deadline time.Time, ok bool) {
	inf := v.st.InFlight
	from := v.sites[v.index(inf.From)]
	sc := from.Sidecar
	// A sidecar that was never seen cannot have fenced itself.
	if !sc.Configured || sc.LastReport.IsZero() {
		return time.Time{}, false
	}
	// One that cannot SIGKILL mysqld leaves a hung one writable when it
	// resumes after the lease: expiry proves nothing there.
	if !sc.CanKill {
		return time.Time{}, false
	}
	// One silent long before the failure may be dead, not fencing:
	// nothing says its lease loop still runs. (An isolated one goes
	// silent when the failure starts, detection plus a report interval
	// before the revoke.)
	if sc.LastReport.Add(SidecarSilenceLimit(v.pol.LeaseTimeout)).Before(inf.RevokedAt) {
		return time.Time{}, false
	}
	// Every renewal this daemon gave was a report it received: LastReport
	// bounds them (the revoke time is not needed, and would only add the
	// detection time to the wait).
	last := later(sc.LastReport, v.obs.ServingSince)
	for _, s := range v.sites {
		if s.Name == from.Name || !s.Sidecar.Configured {
			continue
		}
		// A peer that may still hold the old view can renew the lease
		// through gossip for as long as it does.
		if s.Sidecar.LastReport.IsZero() || s.Sidecar.Epoch < inf.Epoch {
			return time.Time{}, false
		}
		// A view served at the revoked epoch or later revokes rather than
		// renews: the old one was served before the peer adopted the new.
		if sv := s.Sidecar.Served[from.Name]; sv.Epoch >= inf.Epoch {
			last = later(last, s.Sidecar.EpochSince)
		} else {
			last = later(last, sv.At)
		}
	}
	return v.pol.LeaseDeadline(last), true
}

// from0 is the in-flight failover's old primary.
func from0(v *view) SiteObservation { return v.sites[v.index(v.st.InFlight.From)] }

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// inFlight is phase 2 of a failover: promote once the old primary is
// provably fenced.
func (v *view) inFlight() Decision {
	inf := v.st.InFlight
	// A site of unknown state could be writable: wait for probes.
	if u := v.inState(statemachine.Unknown); len(u) > 0 {
		return v.decision(ReasonWaitingForProbes, "failover %s -> %s in flight; no debounced state yet for %s", inf.From, inf.To, strings.Join(u, ", "))
	}
	var others []string
	for _, w := range v.inState(statemachine.Writable) {
		if w != inf.To {
			others = append(others, w)
		}
	}
	// Nothing but the target may be writable once the epoch is revoked.
	if len(others) > 0 {
		d := v.decision(ReasonFenceWritableDuringFailover, "failover %s -> %s in flight and %s writable: fencing", inf.From, inf.To, strings.Join(others, ", "))
		d.Fence = others
		return d
	}
	// A site still counted unreachable whose latest probes answer writable
	// (a hung old primary waking up) may be taking writes and may hold one
	// it acknowledged: fence it and count what it holds before promoting
	// anything (a proof that it could not acknowledge is no longer enough).
	var answering []string
	for _, s := range v.sites {
		if s.Name != inf.To && s.State == statemachine.Unreachable && s.Debouncing {
			answering = append(answering, s.Name)
		}
	}
	if len(answering) > 0 {
		d := v.decision(ReasonFenceWritableDuringFailover, "failover %s -> %s in flight and %s answering writable again: fencing before anything is promoted", inf.From, inf.To, strings.Join(answering, ", "))
		d.Fence = answering
		return d
	}
	to, from := v.index(inf.To), v.index(inf.From)
	proof := v.proof()
	if v.sites[to].State == statemachine.Writable {
		// A writable target that may not be primary (dr-only, diverged,
		// operator-fenced) is fenced; the failover then picks another.
		if why := v.unpromotable(to); why != "" {
			d := v.decision(ReasonFenceWritableDuringFailover, "in-flight target %s is writable but cannot be promoted (%s): fencing", inf.To, why)
			d.Fence = []string{inf.To}
			return d
		}
		// Someone made the target writable without a proof: do not
		// endorse it. A reachable read-only old primary is fenced again
		// first: a daemon that crashed between making the target writable
		// and recording it has forgotten its read-back (found by the
		// simulation, seed 91: it alerted for ever instead).
		if proof == "" {
			if v.sites[from].State == statemachine.ReadOnly {
				d := v.decision(ReasonFenceOldPrimary, "%s is already writable; fencing old primary %s again at epoch %d to finish the promotion", inf.To, inf.From, inf.Epoch)
				d.Fence = []string{inf.From}
				return d
			}
			return v.decision(ReasonTargetWritableWithoutProof, "%s is writable but nothing proves %s is fenced", inf.To, inf.From)
		}
		if j := v.lacking(to, ""); j >= 0 {
			return v.decision(ReasonCandidateLacksTransactions, "%s is already writable but lacks %s; a human must reconcile", inf.To, v.missing(to, j))
		}
		return v.promote(to, proof, ReasonPromoteResume, "%s is already writable; finishing the promotion", inf.To)
	}
	if proof == "" {
		if v.sites[from].State == statemachine.ReadOnly {
			d := v.decision(ReasonFenceOldPrimary, "old primary %s is reachable; fencing it at epoch %d", inf.From, inf.Epoch)
			d.Fence = []string{inf.From}
			return d
		}
		if v.pol.Fencing.UsesSemiSync() && v.pol.SemiSyncReady(from0(v).SemiSync) == "" {
			detach, blocked := v.semiSyncDetach(from0(v))
			if len(detach) > 0 {
				d := v.decision(ReasonSemiSyncDetachReplicas, "semi-sync fencing: stopping the IO threads of %s so nothing %s commits can be acknowledged", strings.Join(detach, ", "), inf.From)
				d.Detach = detach
				return d
			}
			if blocked != "" && !v.pol.Fencing.UsesSidecar() {
				return v.decision(ReasonAwaitFenceConfirmation, "semi-sync fencing: %s is unreachable and its mysqld was not seen down, so it may still acknowledge %s's commits; promotion waits (an operator who knows %s is dead may confirm it: confirm-fence)", blocked, inf.From, inf.From)
			}
		}
		if v.pol.Fencing.UsesSidecar() {
			if dl, ok := v.leaseDeadline(); ok {
				if p := v.peerRestartedBefore(dl); p != "" && !v.now.Before(dl) {
					return v.decision(ReasonAwaitLeaseExpiry, "%s's sidecar lease ran out at %s unless %s's sidecar restarted before then and renewed it through gossip; waiting for %s's sidecar to report from the same run (it was last known running at %s)", inf.From, dl.Format(time.RFC3339Nano), p, p, v.sites[v.index(p)].Sidecar.AliveAt.Format(time.RFC3339Nano))
				}
				return v.decision(ReasonAwaitLeaseExpiry, "waiting for %s's sidecar lease to expire at %s (in %v)", inf.From, dl.Format(time.RFC3339Nano), dl.Sub(v.now))
			}
			return v.decision(ReasonAwaitFenceConfirmation, "%s is unreachable and nothing proves its sidecar fenced it (sidecar never seen, silent before the revoke, unable to SIGKILL a hung mysqld (canKill=false: no --mysqld-pid-file or another pid namespace), or a peer sidecar may still hold the old view); promotion waits for a fence read-back, mysqld down or a sidecar report (if its host is lost, an operator may confirm it dead: confirm-fence)", inf.From)
		}
		if v.pol.Fencing.UsesSemiSync() {
			return v.decision(ReasonAwaitFenceConfirmation, "semi-sync fencing: %s is unreachable and its last known semi-sync settings cannot prove it stopped acknowledging writes (%s); promotion waits for a fence read-back or mysqld down (if its host is lost, an operator may confirm it dead: confirm-fence)", inf.From, v.pol.SemiSyncReady(from0(v).SemiSync))
		}
		return v.decision(ReasonAwaitFenceConfirmation, "fencing confirmed: %s is unreachable and its mysqld was not seen down; promotion waits for a fence read-back or mysqld down, or for an operator to confirm it dead (confirm-fence) if its host is lost", inf.From)
	}
	var t int
	if inf.Planned {
		// An operator chose the target: never substitute another one.
		if why := v.ineligible(to, inf.From, false); why != "" {
			lost := fmt.Sprintf("switchover target %s is no longer eligible (%s)", inf.To, why)
			wait := v.decision(ReasonNoEligibleCandidate, "%s; a switchover never substitutes another target", lost)
			// A lost target must not keep the group without a primary
			// for ever: the fenced source is given back at the deadline.
			return v.giveBack(from, ReasonTargetLost, lost, wait)
		}
		t = to
	} else {
		var d Decision
		var ok bool
		if t, d, ok = v.choose(inf.From, inf.To); !ok {
			// No candidate left while the old primary is back and fenced:
			// give it back at the deadline rather than stay revoked.
			return v.giveBack(from, ReasonTargetLost, d.Message, d)
		}
	}
	// A published target may have been made writable right before the
	// daemon lost it (crash before the record): promoting another site
	// while it is neither seen read-only nor proven fenced makes two
	// writable (simulation seed 1013).
	if p := inf.PublishedTo; p != "" && p != v.sites[t].Name {
		if ps := v.sites[v.index(p)]; ps.State != statemachine.ReadOnly && ps.FencedEpoch < inf.PublishedEpoch {
			return v.decision(ReasonPublishedTargetUnreachable, "the view naming %s at epoch %d was published and %s may have been made writable, but it is %s and not proven fenced; %s is not promoted until %s answers read-only or is fenced", p, inf.PublishedEpoch, p, ps.State, v.sites[t].Name, p)
		}
	}
	if d, ok := v.caughtUp(t, from); !ok {
		return d
	}
	// Covering the reachable sites is not enough: the replica that
	// acknowledged a write t lacks may be among the unreachable ones.
	if wait, k := v.unaccountedHolders(t, from); len(wait) > 0 {
		need := len(wait) - k + 1
		return v.decision(ReasonAckHolderUnreachable, "old primary %s is unreachable and each of its commits waited for %d semi-sync %s; %s %s unreachable, so the only %s of a write %s lacks may be there: %s is not promoted until %d of them %s (if a host is lost, an operator may accept losing what only it holds: confirm-fence <site>)",
			inf.From, k, plural(k, "acknowledgement", "acknowledgements"), strings.Join(wait, ", "), plural(len(wait), "is", "are"),
			plural(k, "copy", "copies"), v.sites[t].Name, v.sites[t].Name, need, plural(need, "answers", "answer"))
	}
	reason := ReasonPromote
	msg := "promoting %s at epoch %d (%s)"
	switch {
	case proof == ProofNoFencing:
		reason = ReasonPromoteNoFencing
		msg += "; fencing none: nothing proves the old primary stopped accepting writes, acknowledged writes on it may be lost (durability risk)"
	case t != to:
		reason = ReasonPromoteRetarget
		msg += "; the in-flight target " + inf.To + " is no longer the best candidate"
	}
	if c := inf.OperatorConfirmed; proof == ProofOperatorConfirmed {
		// By is free text: it must not be read as a format verb.
		msg += strings.ReplaceAll(fmt.Sprintf("; %s confirmed %s dead at %s", c.By, c.Site, c.At.Format(time.RFC3339)), "%", "%%")
	}
	for _, c := range v.lostHolders() {
		msg += strings.ReplaceAll(fmt.Sprintf("; %s confirmed %s lost at %s, accepting the loss of what only it holds", c.By, c.Site, c.At.Format(time.RFC3339)), "%", "%%")
	}
	if !v.sites[from].State.Reachable() && v.ackCount(v.sites[from]) == 0 {
		msg += "; " + inf.From + " ran without semi-sync when last reached: writes it acknowledged that no reachable site received are lost (RPO is not zero)"
	}
	return v.promote(t, proof, reason, msg, v.sites[t].Name, v.promotionEpoch(v.sites[t].Name), proof)
}

// caughtUp checks that target t lacks nothing a reachable site (the fenced
// old primary included) has (see need). Missing
// transactions that the reachable old primary holds and t is receiving from
// it are awaited; anything else blocks the promotion.
func (v *view) caughtUp(t, from int) (Decision, bool) {
	s := &v.sites[t]
	receiving := v.sites[from].State.Reachable() && s.ReplicatingFrom == v.sites[from].Name && s.IOConnected && !s.ReplicationBroken
	wait := -1
	for j, o := range v.sites {
		if j == t || !o.State.Reachable() || v.have[t].Covers(v.need(j)) {
			continue
		}
		// The old primary came back after semi-sync fencing stopped the
		// target's IO thread: replicate again to receive what it lacks.
		if !receiving && s.IOStopped && s.ReplicatingFrom == v.sites[from].Name && !s.ReplicationBroken &&
			v.sites[from].State == statemachine.ReadOnly && v.have[from].Covers(v.need(j)) && v.sites[from].Executed.Covers(s.Executed) {
			d := v.decision(ReasonResumeCatchUp, "%s lacks %s and its IO thread from the fenced old primary %s is stopped: replicating again", s.Name, v.missing(t, j), v.sites[from].Name)
			d.Target, d.Repoint = v.sites[from].Name, []string{s.Name}
			// A restart that never takes must not be retried for ever.
			return v.giveBack(from, ReasonCatchUpTimeout, fmt.Sprintf("%s still lacks %s", s.Name, v.missing(t, j)), d), false
		}
		// Promoting now would throw these transactions away; a target cut
		// off from the source it needs them from must not keep the group
		// without a primary for ever (its source is given back).
		if !receiving || !v.have[from].Covers(v.need(j)) {
			lacks := fmt.Sprintf("%s lacks %s and is not receiving them", s.Name, v.missing(t, j))
			return v.giveBack(from, ReasonCatchUpTimeout, lacks, v.decision(ReasonCandidateLacksTransactions, "%s", lacks)), false
		}
		wait = j
	}
	if wait >= 0 {
		// Every wait has a deadline: a target that cannot catch up must not
		// leave the group without a primary forever.
		d := v.decision(ReasonAwaitCatchUp, "%s still lacks %s; waiting for it to arrive from %s", s.Name, v.missing(t, wait), v.sites[from].Name)
		return v.giveBack(from, ReasonCatchUpTimeout, fmt.Sprintf("%s still lacks %s", s.Name, v.missing(t, wait)), d), false
	}
	// Received but not applied: the promotion's relay drain waits for it.
	// A target whose applier cannot get there (blocked, far behind) must not
	// keep the group without a primary while the old one is right there,
	// fenced and holding everything: after the deadline, give it back.
	if v.sites[from].State == statemachine.ReadOnly && !v.applied(t) {
		if limit := v.catchUpTimeout(); !v.now.Before(v.st.InFlight.RevokedAt.Add(limit)) {
			return v.abandon(from, ReasonCatchUpTimeout, fmt.Sprintf("%s has not applied what it received %v after the revoke", s.Name, limit)), false
		}
	}
	return Decision{}, true
}

// ackCount is how many replicas acknowledged each commit of the old primary
// from, as its last reachable probe read it: 0 when it was reached and runs
// without semi-sync (an acknowledged write may then be on no replica at all:
// no set of replicas can be sure to hold it, the group's RPO is not zero),
// at least 1 otherwise, also when it was never reached (a daemon restarted
// during the outage must assume it ran semi-sync).
func (v *view) ackCount(from SiteObservation) int {
	ss := from.SemiSync
	switch {
	case !from.LastReachableAt.IsZero() && (!ss.Known || !ss.Enabled):
		return 0
	case ss.WaitForReplicas > 1:
		return ss.WaitForReplicas
	}
	return 1
}

// unaccountedHolders returns the unreachable sites that may hold a write the
// unreachable old primary from acknowledged and target t lacks, when there
// are k or more of them (k = ackCount): each acknowledged write is on at
// least k replicas, so while at most k-1 are unaccounted for, one holder of
// every such write is reachable and t covers it (caughtUp). A site is
// accounted for when it is reachable, never among the replicas that
// acknowledge (recorded diverged: never pointed at the primary by
// failoverd; recloning: nothing it holds is owed), proven to hold nothing
// newer (heldNothingNewer) or confirmed lost by an operator (lostHolders).
// A reachable old primary holds everything it acknowledged: none then.
func (v *view) unaccountedHolders(t, from int) ([]string, int) {
	if v.sites[from].State.Reachable() {
		return nil, 0
	}
	k := v.ackCount(v.sites[from])
	if k == 0 {
		return nil, 0
	}
	var wait []string
	for j, s := range v.sites {
		if j == t || j == from || s.State.Reachable() || v.diverged(s.Name) || v.recloning(s.Name) ||
			v.heldNothingNewer(t, j) || v.lostConfirmed(s) {
			continue
		}
		wait = append(wait, s.Name)
	}
	if len(wait) < k {
		return nil, k
	}
	return wait, k
}

// heldNothingNewer: unreachable site j cannot hold a transaction target t
// lacks. Its last probe came after the revoke (since then failoverd starts
// no replication towards the old primary), found its IO thread stopped (the
// revoke's semi-sync detach), under semi-sync fencing, whose servers start
// with skip_replica_start (so a restart does not start it either), and t
// holds everything it had then.
func (v *view) heldNothingNewer(t, j int) bool {
	s := v.sites[j]
	return v.pol.Fencing.UsesSemiSync() && s.IOStopped && !s.LastReachableAt.IsZero() &&
		!s.LastReachableAt.Before(v.st.InFlight.RevokedAt) && v.have[t].Covers(v.need(j))
}

// lostConfirmed: an operator confirmed s lost for the failover in flight
// (ConfirmFence at ack-holder-unreachable). It counts only while s stays
// unreachable: one that answers is covered like any reachable site.
func (v *view) lostConfirmed(s SiteObservation) bool {
	return slices.ContainsFunc(v.lostHolders(), func(c FenceConfirmation) bool { return c.Site == s.Name })
}

// lostHolders are the operators' confirmations that count for the failover
// in flight: made in its epoch, for a site still unreachable.
func (v *view) lostHolders() []FenceConfirmation {
	var out []FenceConfirmation
	for _, c := range v.st.InFlight.LostHolders {
		if i := v.index(c.Site); i >= 0 && c.Epoch == v.st.InFlight.Epoch && !v.sites[i].State.Reachable() {
			out = append(out, c)
		}
	}
	return out
}

// catchUpTimeout is how long the failover in flight may wait for its target
// to catch up: maxLagWait for a planned switchover (the source was healthy
// and only its writes wait), CatchUpTimeout otherwise.
func (v *view) catchUpTimeout() time.Duration {
	if v.st.InFlight.Planned && v.pol.MaxLagWait > 0 {
		return v.pol.MaxLagWait
	}
	return v.pol.CatchUpTimeout
}

// applied reports whether site t has applied (not only received) what
// every other reachable site holds.
func (v *view) applied(t int) bool { return v.coversOthers(t, v.sites[t].Executed) }

// giveBack ends an in-flight failover that cannot go on (why; wait is the
// decision explaining the block) once its deadline passed: the revoked
// state is bounded. It re-asserts the old primary from when that is safe
// (abandon, with reason r). Before the deadline, or while the old primary
// is unreachable (nothing to give back), it returns wait.
func (v *view) giveBack(from int, r Reason, why string, wait Decision) Decision {
	if !v.sites[from].State.Reachable() {
		return wait
	}
	limit := v.catchUpTimeout()
	if dl := v.st.InFlight.RevokedAt.Add(limit); v.now.Before(dl) {
		wait.Message += fmt.Sprintf("; old primary %s is given back at %s (%v after the revoke) unless this clears", v.sites[from].Name, dl.UTC().Format(time.RFC3339), limit)
		return wait
	}
	return v.abandon(from, r, fmt.Sprintf("%s %v after the revoke", why, limit))
}

// abandon ends an in-flight failover that cannot complete (its target
// cannot catch up, or is lost) by re-asserting the reachable old primary
// from with reason r; it alerts instead when from may not be primary, lacks
// a peer's transactions or an unreachable site may be writable.
func (v *view) abandon(from int, r Reason, why string) Decision {
	name := v.sites[from].Name
	if u := v.unpromotable(from); u != "" || v.sites[from].State != statemachine.ReadOnly {
		if u == "" {
			u = v.sites[from].State.String()
		}
		return v.decision(ReasonCatchUpTimeoutBlocked, "%s; old primary %s cannot be re-asserted (%s): the group stays without a primary until a human decides", why, name, u)
	}
	// An unreachable site that may be writable: re-asserting could make two.
	if u := v.mayWrite(); len(u) > 0 {
		return v.decision(ReasonCatchUpTimeoutBlocked, "%s; unreachable and possibly writable: %s; so old primary %s is not re-asserted: the group stays without a primary until a human decides",
			why, strings.Join(u, "; "), name)
	}
	if j := v.lacking(from, ""); j >= 0 {
		return v.decision(ReasonCatchUpTimeoutBlocked, "%s; old primary %s lacks %s: the group stays without a primary until a human decides", why, name, v.missing(from, j))
	}
	// Sidecars may hold a view published for the target: outrank it.
	epoch := max(v.st.Epoch, v.st.InFlight.PublishedEpoch) + 1
	d := v.decision(r, "%s: abandoning the failover and re-asserting old primary %s at epoch %d", why, name, epoch)
	d.Target = name
	d.Epoch = epoch
	return d
}

// mayWrite lists the unreachable sites that may be accepting writes, each
// with why, so that nothing is made writable beside them (re-assert,
// give-back). An unreachable site may write when its latest probes answer
// writable, or when failoverd may have left it writable with nothing
// proving it stopped: the recorded primary, the in-flight old primary
// without a fence proof, the site a view of the failover in flight named
// (it may have been made writable), the last failover's target when it is
// neither; and every site when nothing proves each deposed primary fenced
// (fencing none, or the last failover's proof unknown or no-fencing). Any
// other site was never made writable by failoverd, or was deposed by a
// failover whose proof held, and restarts read-only (docs/decisions.md §9).
func (v *view) mayWrite() []string {
	st, inf := v.st, v.st.InFlight
	lineage := ""
	switch {
	case v.pol.Fencing == FencingNone:
		lineage = "fencing none proves no deposed primary fenced"
	case st.LastFailoverTarget != "" && st.LastFailoverFrom == "":
		lineage = "the last failover's old primary is not recorded"
	case st.LastFailoverFrom != "" && (st.LastFailoverProof == "" || st.LastFailoverProof == ProofNoFencing):
		lineage = fmt.Sprintf("the last failover, from %s, rested on no fence proof", st.LastFailoverFrom)
	}
	var out []string
	for _, s := range v.sites {
		if s.State != statemachine.Unreachable {
			continue
		}
		why := lineage
		switch {
		case s.Debouncing:
			why = "its latest probes answer writable"
		case s.Name == st.ActiveSite:
			why = "the recorded primary"
		case inf != nil && s.Name == inf.PublishedTo:
			why = fmt.Sprintf("a view naming it was published at epoch %d", inf.PublishedEpoch)
		case inf != nil && s.Name == inf.From && v.proof() == "":
			why = "old primary of the failover in flight, no fence proof"
		case s.Name == st.LastFailoverTarget && (inf == nil || s.Name != inf.From):
			why = "our last failover's target"
		}
		if why != "" {
			out = append(out, s.Name+" ("+why+")")
		}
	}
	return out
}

// promotionEpoch is the epoch a promotion of target names: the revoked
// epoch + 1, unless a view naming another target was already published at
// it (sidecars never flip on an equal epoch).
func (v *view) promotionEpoch(target string) uint64 {
	inf := v.st.InFlight
	if inf.PublishedTo != "" && inf.PublishedTo != target {
		return inf.PublishedEpoch + 1
	}
	return inf.Epoch + 1
}

// promote builds the phase-2 decision for site t.
func (v *view) promote(t int, proof FenceProof, r Reason, format string, args ...any) Decision {
	inf := v.st.InFlight
	d := v.decision(r, format, args...)
	d.Target, d.From, d.Planned = v.sites[t].Name, inf.From, inf.Planned
	d.Epoch = v.promotionEpoch(d.Target)
	d.FenceProof = proof
	d.PromotionGTID = v.have[t]
	if proof != ProofFenceConfirmed {
		d.Fence = []string{inf.From} // best effort; the proof already holds
	}
	for _, s := range v.sites {
		if s.Name != d.Target && s.Name != inf.From && s.State == statemachine.ReadOnly && !v.diverged(s.Name) && !v.opFenced(s.Name) && !v.recloning(s.Name) {
			d.Repoint = append(d.Repoint, s.Name)
		}
	}
	return d
}

// splitBrain keeps one writable site when history says which, and fences
// the others; otherwise it only alerts.
func (v *view) splitBrain() Decision {
	w := v.inState(statemachine.Writable)
	keep, reason := "", ReasonSplitBrainKeepWinner
	if last := v.st.LastFailoverTarget; last != "" {
		// We promoted it: it is the legitimate primary.
		if !slices.Contains(w, last) {
			return v.decision(ReasonSplitBrainAlertOnly, "%s are writable and our last failover target %s is not among them; a human must choose", strings.Join(w, ", "), last)
		}
		keep, reason = last, ReasonSplitBrainKeepPromoted
	} else {
		keep = v.splitWinner(w)
		if keep == "" {
			return v.decision(ReasonSplitBrainAlertOnly, "%s are writable and none may stay primary; a human must choose", strings.Join(w, ", "))
		}
	}
	var fence []string
	for _, s := range w {
		if s != keep {
			fence = append(fence, s)
		}
	}
	d := v.decision(reason, "%s are writable: keeping %s, fencing %s", strings.Join(w, ", "), keep, strings.Join(fence, ", "))
	d.Target = keep
	d.Fence = fence
	return d
}

// splitWinner picks who stays writable without failover history: the
// recorded active site, else PreferSite, else the best-ranked eligible
// primary candidate.
func (v *view) splitWinner(w []string) string {
	if slices.Contains(w, v.st.ActiveSite) {
		return v.st.ActiveSite
	}
	best := -1
	for _, name := range w {
		i := v.index(name)
		if v.unpromotable(i) != "" {
			continue
		}
		if best < 0 || v.better(i, best, "") {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return v.sites[best].Name
}

// ownTails marks diverged the peers whose transactions the recorded primary
// t lacks when those are only writes each peer made itself that no other
// site received and that t's promotion did not include: a deposed primary's
// unreplicated tail (or its writes after it lost its epoch), a replica's
// errant writes. The recorded primary's history never held them; once they
// are marked, t can be re-asserted (simulation seed 184). ok is false when
// any lacking transaction is another site's or reached a third site: t
// may have lost it, and re-asserting t would lose it for good.
func (v *view) ownTails(t int) (Decision, bool) {
	var div []Divergence
	var parts []string
	for j, s := range v.sites {
		if j == t || !s.State.Reachable() {
			continue
		}
		miss := v.have[t].Uncovered(v.need(j))
		if miss.IsEmpty() {
			continue
		}
		own := v.errant(s, v.sites[t])
		if !own.Covers(miss) || !miss.Intersect(v.st.PromotionGTID).IsEmpty() {
			return Decision{}, false
		}
		for k, o := range v.sites {
			if k != t && k != j && o.State.Reachable() && !v.have[k].Intersect(miss).IsEmpty() {
				return Decision{}, false
			}
		}
		// Added to what is already recorded of its divergence (a mark
		// replaces the recorded set).
		div = append(div, Divergence{Site: s.Name, Set: miss.Union(v.st.Diverged[s.Name]), Count: gtid.DivergentCount(s.Executed, v.sites[t].Executed)})
		parts = append(parts, fmt.Sprintf("%s has %d of its own that %s lacks (%s)", s.Name, miss.Count(), v.sites[t].Name, miss.Compact()))
	}
	if len(div) == 0 {
		return Decision{}, false
	}
	d := v.decision(ReasonMarkDiverged, "no site is writable and the recorded primary %s lacks only writes its peers made themselves: %s; marked diverged so %s can be re-asserted",
		v.sites[t].Name, strings.Join(parts, "; "), v.sites[t].Name)
	d.Target = v.sites[t].Name
	d.Diverged = div
	return d, true
}

// unexpectedPrimary handles one writable site that is not the recorded
// primary. When our last failover made the recorded primary, the writable
// site has no claim to the role (a deposed primary that was hung or cut
// off through the failover and came back still writable, or one promoted
// outside failoverd): it is fenced, as a split brain's loser would be,
// and the no-primary or failover rules take over. Without failover
// history a human must say which record is right.
func (v *view) unexpectedPrimary() Decision {
	w, active := v.det.Primary, v.st.ActiveSite
	if last := v.st.LastFailoverTarget; last == "" || last != active {
		return v.decision(ReasonUnexpectedPrimary, "%s is the only writable site but the recorded primary is %s (changed outside failoverd); a human must reconcile",
			w, active)
	}
	// A writable site outside its epoch could acknowledge writes the
	// recorded primary's history will never hold.
	d := v.decision(ReasonUnexpectedPrimaryFenced, "%s is the only writable site but our last failover made %s the primary at epoch %d: fencing %s",
		w, active, v.st.Epoch, w)
	d.Fence = []string{w}
	return d
}

// noPrimary re-asserts the recorded primary when that is provably safe.
func (v *view) noPrimary() Decision {
	t := v.st.ActiveSite
	if t == "" {
		return v.decision(ReasonNoPrimaryNoActiveSite, "no site is writable and no primary is recorded; a human must choose one")
	}
	i := v.index(t)
	// Our own promotion is not seen yet: the new primary's writable probes
	// are debounced (RecoveryThreshold of them) while the old primary is
	// still down, so "no primary" now would be a false alarm. Bounded: a
	// promotion that did not take is alerted on after the window.
	if since := v.now.Sub(v.st.LastFailoverAt); t == v.st.LastFailoverTarget && !v.st.LastFailoverAt.IsZero() &&
		since >= 0 && since < v.pol.PromotionSettleWindow() && v.sites[i].State == statemachine.ReadOnly {
		return v.decision(ReasonPromotionSettling, "no site is seen writable yet but %s was promoted %v ago: waiting up to %v for its writable probes",
			t, since, v.pol.PromotionSettleWindow())
	}
	// An unreachable site that may be writable: re-asserting could make
	// two. One proven fenced (a deposed old primary) must not block it, or a
	// new primary that came back read-only stays so while the old is lost.
	if u := v.mayWrite(); len(u) > 0 {
		return v.decision(ReasonNoPrimaryNotAllReachable, "no site is writable; unreachable and possibly writable: %s; not re-asserting %s", strings.Join(u, "; "), t)
	}
	// Probes are turning the recorded primary writable (a promotion just
	// made it so): re-asserting it again would only bump the epoch.
	if v.sites[i].Debouncing {
		return v.decision(ReasonWaitingForProbes, "no site is writable yet but the recorded primary %s is becoming writable; waiting for its probes", t)
	}
	if why := v.unpromotable(i); why != "" {
		return v.decision(ReasonNoPrimaryTargetIneligible, "no site is writable and the recorded primary %s is %s", t, why)
	}
	// Re-enabling a primary that lacks a peer's transactions would lose them.
	if j := v.lacking(i, ""); j >= 0 {
		if d, ok := v.ownTails(i); ok {
			return d
		}
		return v.decision(ReasonNoPrimaryTargetBehind, "no site is writable and the recorded primary %s lacks %s", t, v.missing(i, j))
	}
	if !v.have[i].Covers(v.st.PromotionGTID) {
		m := v.have[i].Uncovered(v.st.PromotionGTID)
		return v.decision(ReasonNoPrimaryTargetBehind, "no site is writable and the recorded primary %s lacks %d transactions of its own promotion set (%s)", t, m.Count(), m.Compact())
	}
	d := v.decision(ReasonReassertPrimary, "every site is read-only and %s has every transaction: re-asserting it at epoch %d", t, v.st.Epoch+1)
	d.Target = t
	d.Epoch = v.st.Epoch + 1
	return d
}

// healthy handles exactly one writable site that is the recorded primary
// (or no primary is recorded yet): adoption, recovery, else health report.
// errant returns the transactions replica s originated itself that primary
// lacks (empty when s's server identity is unknown).
func (v *view) errant(s, primary SiteObservation) gtid.Set {
	if s.ServerID == "" {
		return gtid.Set{}
	}
	// Only s's own transactions count: observing the two servers at
	// slightly different moments can never make them look errant.
	own, err := primary.Executed.Uncovered(s.Executed).OriginatedBy(s.ServerID)
	if err != nil {
		return gtid.Set{}
	}
	return own
}

func (v *view) healthy() Decision {
	p := v.det.Primary
	if v.st.ActiveSite == "" {
		d := v.decision(ReasonAdoptPrimary, "no primary recorded; adopting the only writable site %s at epoch %d", p, v.st.Epoch+1)
		d.Target = p
		d.Epoch = v.st.Epoch + 1
		return d
	}
	pi := v.index(p)
	var rejoin, repaired []string
	var div []Divergence
	for _, s := range v.sites {
		// A recloning site is mid-restore: its data and GTID set mean
		// nothing until the reclone finished (a partial restore looks
		// contained and would be rejoined with rows missing).
		if s.Name == p || s.State != statemachine.ReadOnly || v.opFenced(s.Name) || v.recloning(s.Name) {
			continue
		}
		if v.diverged(s.Name) {
			// Re-checked on every round: a human may have repaired it.
			if v.repaired(s, v.sites[pi]) {
				repaired = append(repaired, s.Name)
			}
			continue
		}
		if s.ReplicatingFrom == p {
			// A replica that wrote transactions of its own (errant) must
			// never be promoted: mark it while the primary can still tell.
			if extra := v.errant(s, v.sites[pi]); !extra.IsEmpty() {
				// Counted against the primary plus everything s holds that
				// it did not originate, as errant decides: a primary
				// observed a moment before s adds nothing to the count.
				seen := v.sites[pi].Executed.Union(s.Executed.Subtract(extra))
				div = append(div, Divergence{Site: s.Name, Set: extra, Count: gtid.DivergentCount(s.Executed, seen)})
			}
			continue
		}
		// Only a site whose history is a prefix of the primary's can
		// replicate from it without corrupting data.
		if v.sites[pi].Executed.Covers(s.Executed) {
			rejoin = append(rejoin, s.Name)
			continue
		}
		// An old primary whose extra transactions no client can have seen
		// committed is re-seeded instead of waiting for a human (opt-in).
		if tail, ok := v.unacknowledgedTail(s, v.sites[pi]); ok {
			return v.recloneTail(s, v.sites[pi], tail)
		}
		extra := v.sites[pi].Executed.Uncovered(s.Executed)
		div = append(div, Divergence{Site: s.Name, Set: extra, Count: gtid.DivergentCount(s.Executed, v.sites[pi].Executed)})
	}
	if len(div) > 0 {
		var parts []string
		for _, x := range div {
			noun := "transactions"
			if x.Count == 1 {
				noun = "transaction"
			}
			parts = append(parts, fmt.Sprintf("%s has %d %s %s lacks (%s)", x.Site, x.Count, noun, p, x.Set.Compact()))
		}
		d := v.decision(ReasonMarkDiverged, "diverged from primary %s: %s; a human must reconcile", p, strings.Join(parts, "; "))
		d.Target = p
		d.Diverged = div
		return d
	}
	if len(repaired) > 0 {
		d := v.decision(ReasonDivergenceRepaired, "%s no longer %s transactions primary %s lacks: divergence cleared, it may rejoin", strings.Join(repaired, ", "), plural(len(repaired), "holds", "hold"), p)
		d.Target = p
		d.Repaired = repaired
		return d
	}
	if len(rejoin) > 0 {
		d := v.decision(ReasonRejoin, "%s not replicating from primary %s and contained in it: rejoining", strings.Join(rejoin, ", "), p)
		d.Target = p
		d.Repoint = rejoin
		return d
	}
	// The semi-sync source side belongs on the primary only: on a replica
	// its applier's commits wait for acknowledgements nobody sends.
	if off := v.sourceOnReplicas(p); len(off) > 0 {
		d := v.decision(ReasonSemiSyncSourceOnReplica, "%s %s the semi-sync source side on: %s applier's commits wait for acknowledgements nobody sends; switching it off (the source side belongs on primary %s only)",
			strings.Join(off, ", "), plural(len(off), "has", "have"), plural(len(off), "its", "their"), p)
		d.Target = p
		d.SemiSyncOff = off
		return d
	}
	// Every commit on the primary waits: more urgent than any replica's
	// state (which is usually the cause).
	if why := v.pol.WritesStalled(v.sites[pi]); why != "" {
		return v.decision(ReasonWritesStalledAwaitingAck, "primary %s accepts no writes: %s; a replica that acknowledges (reachable, replicating from it with the semi-sync replica side on) ends the stall", p, why)
	}
	switch v.det.Code {
	case statemachine.ReplicationBroken:
		return v.decision(ReasonDegradedReplicationBroken, "primary %s is healthy but a replica's replication stopped on an error", p)
	case statemachine.ReplicaNotFollowingPrimary:
		return v.decision(ReasonDegradedNotFollowing, "primary %s is healthy but a replica does not follow it (IO not connected, operator-fenced or diverged)", p)
	case statemachine.ReplicaUnreachable:
		return v.decision(ReasonDegradedReplicaUnreachable, "primary %s is healthy but %s unreachable", p, strings.Join(v.inState(statemachine.Unreachable), ", "))
	}
	// A replica that silently stopped applying must never read as healthy
	// (it would be found out only by the failover that needs it).
	for _, s := range v.sites {
		if s.Name == p || s.State != statemachine.ReadOnly || s.ReplicatingFrom != p || v.opFenced(s.Name) || v.recloning(s.Name) || v.diverged(s.Name) {
			continue
		}
		if why := v.pol.ApplierBlocked(s); why != "" {
			return v.decision(ReasonApplierBlocked, "primary %s is healthy but replica %s's applier is blocked: %s", p, s.Name, why)
		}
	}
	// Checked on every healthy probe: a failover must not discover that the
	// proof it relies on was never available.
	if v.pol.Fencing.UsesSemiSync() {
		if why := v.pol.SemiSyncReady(v.sites[pi].SemiSync); why != "" {
			return v.decision(ReasonSemiSyncUnsafe, "primary %s is healthy but its semi-sync settings cannot prove a hung or isolated primary stopped acknowledging writes: %s", p, why)
		}
	}
	return v.decision(ReasonHealthy, "primary %s is writable and every replica follows it", p)
}

// repaired reports whether the known-diverged site s no longer holds
// anything primary lacks: it replicates from primary without errant
// transactions, or its whole history is contained in primary's.
func (v *view) repaired(s, primary SiteObservation) bool {
	if s.ReplicatingFrom == primary.Name && s.ServerID != "" {
		return v.errant(s, primary).IsEmpty()
	}
	return primary.Executed.Covers(s.Executed)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// sourceOnReplicas lists the read-only replicas of primary p whose
// semi-sync source side is on, except sites the daemon leaves alone
// (operator-fenced, recloning, known-diverged).
func (v *view) sourceOnReplicas(p string) []string {
	var out []string
	for _, s := range v.sites {
		if s.Name == p || s.State != statemachine.ReadOnly || s.ReplicatingFrom != p || !s.SemiSync.Known || !s.SemiSync.Enabled ||
			v.opFenced(s.Name) || v.recloning(s.Name) || v.diverged(s.Name) {
			continue
		}
		out = append(out, s.Name)
	}
	return out
}

// ApplierBlocked says why replica s's applier is blocked ("" when it is
// not): its threads wait for semi-sync acknowledgements, or with both
// threads running it has left what it received unapplied for longer than
// ApplierStallWindow. Pure; the daemon's status uses it too.
func (p Policy) ApplierBlocked(s SiteObservation) string {
	switch {
	case s.AckWaits.Known && s.AckWaits.Appliers > 0:
		return fmt.Sprintf("%d applier %s waiting %v for semi-sync acknowledgements (its own semi-sync source side is on; nobody acknowledges a replica's commits)",
			s.AckWaits.Appliers, plural(s.AckWaits.Appliers, "thread", "threads"), s.AckWaits.Longest)
	case !s.IOStopped && !s.ApplierStopped && !s.ReplicationBroken && s.BacklogAge > p.ApplierStallWindow():
		return fmt.Sprintf("transactions it received %v ago are still not applied while both replication threads run (from GTID sets; bound %v)",
			s.BacklogAge, p.ApplierStallWindow())
	}
	return ""
}

// WritesStalled says why commits on site s are stalled waiting for
// semi-sync acknowledgements ("" when they are not): a commit has waited
// longer than AckStallWindow. Pure; the daemon's status uses it too.
func (p Policy) WritesStalled(s SiteObservation) string {
	w := s.AckWaits
	if !w.Known || w.Sessions == 0 || w.Longest <= p.AckStallWindow() {
		return ""
	}
	return fmt.Sprintf("%d %s waiting for a semi-sync acknowledgement, the longest for %v (over %v)",
		w.Sessions, plural(w.Sessions, "session", "sessions"), w.Longest, p.AckStallWindow())
}
