package poller

import (
	"strconv"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/statemachine"
)

// This file is where probes become decision input: the one place that
// interprets what a Tracker holds (a partial trailing transaction, a NULL
// lag, a semi-sync wait in the applier's state) for sitepair.Decide, which
// derives group detection from the same fields.

// Observed is group g's decision input: every configured site, in
// configuration order, as the Tracker last saw it. A site the Tracker does
// not know is observed as never probed.
func (t *Tracker) Observed(g configs.Group) sitepair.Observed {
	out := sitepair.Observed{Sites: make([]sitepair.SiteObservation, 0, len(g.Sites))}
	for i, s := range g.Sites {
		v, _ := t.Site(s.Name)
		out.Sites = append(out.Sites, siteObservation(i, s, v))
	}
	return out
}

// siteObservation turns the Tracker's view of one site (the index-th of its
// group's configuration) into decision input.
func siteObservation(index int, s configs.Site, v SiteView) sitepair.SiteObservation {
	o := sitepair.SiteObservation{
		Name: s.Name, Role: sitepair.Role(s.Role), Priority: s.Priority, Index: index,
		State: v.State, Debouncing: v.Debouncing, StateSince: v.Since, RefusedProbes: v.RefusedInARow,
	}
	if !v.HasReachable {
		return o
	}
	r := v.LastReachable
	st := r.Status
	o.LastReachableAt = r.At
	o.Executed = st.Executed
	o.ReplicatingFrom = r.Follows
	o.IOConnected = r.IOConnected
	o.SourceSilent = r.SourceSilent
	o.ReplicationBroken = r.ReplicationBroken
	if ss := st.SemiSync; ss.Available {
		o.SemiSync = sitepair.SemiSyncObservation{Known: true, Enabled: ss.PrimaryEnabled, Active: ss.PrimaryActive,
			Timeout: ss.Timeout, WaitNoReplica: ss.WaitNoReplica, WaitPoint: ss.WaitPoint, WaitForReplicas: ss.WaitForReplicas}
	}
	if w := st.AckWaits; w.Known {
		o.AckWaits = sitepair.AckWaitObservation{Known: true, Appliers: w.Appliers, Sessions: w.Sessions, Longest: w.Longest}
	}
	o.BacklogAge = v.BacklogAge
	if v.StreamingFrom != "" && v.StreamingFrom == r.Follows {
		o.LastStreamingAt = v.StreamingAt
	}
	if st.Executed.Flavor() == gtid.MariaDB {
		o.ServerID = strconv.FormatUint(uint64(st.ServerID), 10)
	} else {
		o.ServerID = st.ServerUUID
	}
	// No replication channel: no IO thread runs (semi-sync fencing need not
	// stop one) and nothing is left to apply (a target whose replication a
	// promotion already reset, a former primary): lag 0 is known.
	o.IOStopped = st.Replica == nil
	o.LagKnown = st.Replica == nil
	if rep := st.Replica; rep != nil {
		o.Retrieved = rep.Retrieved
		if rep.RelayExhausted() && !st.Executed.Covers(rep.Retrieved) {
			// The unapplied tail was received only in part (the source
			// died mid-transaction): it is not something this site has.
			o.Retrieved = gtid.Set{}
		}
		o.IOStopped = !rep.IOThread.Running()
		o.ApplierStopped = !rep.SQLThread.Running()
		// MariaDB's serial applier shows its own semi-sync wait in its
		// state: that counts even when the processlist was not read.
		if rep.AwaitingAck() && o.AckWaits.Appliers == 0 {
			o.AckWaits.Known, o.AckWaits.Appliers = true, 1
		}
		// The last KNOWN lag: Seconds_Behind_Master turns NULL once the
		// source is gone, which is not "no lag".
		o.Lag, o.LagKnown = v.Lag, v.LagKnown
		if !rep.LagKnown && rep.SQLThread.Running() && st.Executed.Covers(rep.Retrieved) {
			// NULL while the source is gone, but nothing is left to apply:
			// no lag now, whatever was last measured (a replica that
			// caught up after its primary died must not stay "lagging"
			// and out of every failover).
			o.Lag, o.LagKnown = 0, true
		}
	}
	return o
}

// Settled reports whether every site has a probe that started at or after
// at, so a decision cannot rest on what a site looked like before the
// daemon's last action changed it.
//
// A site debounced unreachable whose latest probe failed is exempt: the
// poller backs off from it, and waiting for its next probe would delay every
// step of a failover by seconds. Nothing a decision concludes from "still
// unreachable" needs a fresher probe (a site that came back is handled by
// the next rounds: fenced, or found writable and fenced as split brain).
func (t *Tracker) Settled(at time.Time) bool {
	for _, v := range t.Sites() {
		if !v.HasLatest {
			return false
		}
		if v.Latest.Started.Before(at) && !(v.State == statemachine.Unreachable && !v.Latest.Reachable) {
			return false
		}
	}
	return true
}
