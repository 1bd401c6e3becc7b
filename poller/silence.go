package poller

import (
	"time"

	"github.com/failoverd/failoverd/mysqlctl"
)

// silenceTracker remembers, across the probes of one replica, what its IO
// thread had received, and since when (daemon clock) that has not changed.
type silenceTracker struct {
	known      bool
	source     string
	heartbeats uint64
	retrieved  string
	changedAt  time.Time
}

// observe records one successful probe at time at and returns whether
// silence can be judged and for how long the source has sent nothing. Both
// engines give the counters (MariaDB: SHOW ALL SLAVES STATUS; MySQL:
// performance_schema, read by mysqlctl.Status).
func (t *silenceTracker) observe(r *mysqlctl.ReplicaStatus, source string, at time.Time) (known bool, silentFor time.Duration) {
	if r == nil || r.HeartbeatPeriod <= 0 {
		// Without heartbeats an idle source sends nothing at all: silence
		// would look like a healthy idle link and could corroborate a false
		// failover, so it stays unknown.
		*t = silenceTracker{}
		return false, 0
	}
	if !t.known || t.source != source || t.heartbeats != r.ReceivedHeartbeats || t.retrieved != r.RetrievedRaw {
		// First sight, a new source, or progress: the link is alive now.
		*t = silenceTracker{known: true, source: source, heartbeats: r.ReceivedHeartbeats, retrieved: r.RetrievedRaw, changedAt: at}
	}
	return true, at.Sub(t.changedAt)
}

// silenceThreshold is how long a replica may receive nothing before its
// source counts as silent: at least two heartbeat periods plus one poll
// interval. SilentFor runs from the probe that first saw the latest value,
// so it never exceeds the replica's real silence by more than one probe's
// own duration: sampling once per poll delays the verdict, it cannot bring
// it forward. A live source sends something at least once per heartbeat
// period, so the threshold leaves a heartbeat period plus a poll interval
// of margin for a late heartbeat and a slow probe.
func silenceThreshold(minimum, heartbeat, poll time.Duration) time.Duration {
	// A threshold near one heartbeat period would call a healthy idle link
	// silent after one late heartbeat and corroborate a false failover.
	return max(minimum, 2*heartbeat+poll)
}
