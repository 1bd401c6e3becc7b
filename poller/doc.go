// Package poller is the I/O half of failure detection: it probes every site
// of a group on a fixed cadence and turns each probe into an immutable
// [Observation]; a [Tracker] feeds those into one statemachine.Machine per
// site, keeps what a single probe cannot say (last known lag, GTID backlog,
// refusals in a row, last streaming time) and turns it into the decision
// input, sitepair.Observed. It decides nothing.
//
// # Decision input
//
// [Tracker.Observed] (input.go) is the one place where probes become
// decision input: a tail received only in part (the source died
// mid-transaction) is not counted as received, a NULL lag is unknown unless
// a running applier has nothing left to apply, a site without replication
// has no IO thread and lag 0, the applier's own semi-sync wait counts as a
// waiting applier. sitepair.Decide derives group detection
// (statemachine.Detect) from the same fields. [Tracker.Settled] is the
// daemon's barrier: every site probed since its last action, except one
// debounced unreachable whose latest probe failed.
//
// # Probing
//
// [Poller.Run] starts one goroutine per site. Each ticks every
// Config.PollInterval (first ticks staggered across the interval, regular
// ticks on a process-wide grid of at most 50 ms so that the probes of many
// groups due together share one wake-up; see tickGrid) and runs
// one probe, bounded by Config.ProbeTimeout through its context, in a helper
// goroutine. The site goroutine waits for the result or for the timeout on
// the injected [Clock], whichever comes first, so a probe never delays the
// next tick (ProbeTimeout < PollInterval is enforced). A probe that does not
// return when its context ends (a prober ignoring it) is reported as a
// timeout, and while it is still running no new probe is started for that
// site ([ErrProbeStuck]): a hung site costs at most two goroutines, never a
// pile-up.
//
// A probe is one mysqlctl.Instance.Status call (one SELECT of variables,
// on MariaDB one SHOW GLOBAL STATUS of the semi-sync counters, and one SHOW
// ALL SLAVES STATUS / SHOW REPLICA STATUS, sent in one round trip:
// [MySQLDialer] opens its instances mysqlctl.Options.StatusOnly) on a pool
// of one session per site, opened on the first probe ([MySQLDialer]) and
// reused; database/sql redials a broken session by itself. The Prober is
// dropped and opened again only after an authentication error (so a rotated
// password file is re-read) or when the server's flavor changed.
//
// # Failure classes
//
// A failed probe carries an [ErrorClass]: [ClassRefused] (TCP connection
// refused: the host answered, nothing listens, mysqld is seen down),
// [ClassTimeout] (the probe's deadline passed: hung server, black-holed
// link, overloaded host), [ClassAuth] (the server rejected the account or a
// privilege) or [ClassOther].
//
// # Watch sessions
//
// With Config.Watch (NewFromGroup sets [MySQLWatcher]) the poller also holds
// one idle session per site (mysqlctl.Watch: a bounded DO SLEEP, repeated).
// A SIGKILLed or restarted mysqld closes its sockets, so the session breaks
// the moment the server dies and the site is probed at once: the failure
// window starts at the crash instead of up to a PollInterval later (a
// kill -9 fails over about half a poll interval sooner on average). A hung
// server or a black-holed link breaks nothing; their probes time out as
// before. A broken watch reconnects at most once per PollInterval.
//
// A replication: group group's members get [GroupViewWatcher] instead: the
// same one session per member reads the member's view id and member table
// every [GroupViewEvery] (mysqlctl.WatchGroupView) and reports a new view
// or an election in the same view to Config.OnWatch, as it reports a
// broken session (TriggerWatchLost); the daemon runs the group's round on
// each, with its poll as the backstop.
//
// A site's first failed probe (a hung or isolated server breaks no socket)
// asks every other site for a probe at once, through the same early-probe
// channel and with the same limit, once per failure run: the replicas'
// view of it (their source gone silent, the corroboration) is read from its
// first failure on instead of up to a PollInterval later.
//
// A broken watch's early probe only ever starts a failure window: it never
// runs while failures are being counted (it would count the next one sooner
// than the window allows, and a blip shorter than the window could fail
// over). Kick, after the daemon's own actions, is not limited so: the
// failed probe that follows our own fence (it kills the client sessions)
// must not hold the next step back by a poll interval.
//
// # Backoff
//
// A site keeps the base PollInterval until Config.FailureThreshold +
// BackoffGrace consecutive probes failed: past the point where the
// statemachine marks it unreachable, and past the failover that follows
// (which waits for a fresh probe of every site), so backoff slows neither
// detection nor failover. From then on each further failure doubles the
// interval, capped at Config.MaxBackoff
// (default 4 × PollInterval), and the first successful probe restores the
// base interval, so recovery is seen within MaxBackoff.
//
// # Replication view and source silence
//
// From a replica's status an Observation records the site its replication
// source address maps to (by a site's mysql address or replicationAddress,
// host case-insensitive), whether the IO thread is connected
// (Slave_IO_Running=Yes) and whether the source went silent.
//
// Silence is never derived by comparing two machines' clocks. On MariaDB a
// source sends a heartbeat every Slave_heartbeat_period when it has no
// events to send, so a live link changes Slave_received_heartbeats or
// Gtid_IO_Pos at least once per period. The poller remembers both across
// probes and measures, on the daemon's own clock, for how long neither
// changed; the source is silent once that exceeds the threshold
// max(Config.SilenceAfter, 2 × heartbeat period + 1 × PollInterval):
// measured from the probe that first saw the latest value, the silence
// never exceeds the replica's real one (by more than that probe's own
// duration), so sampling delays the verdict but cannot bring it forward, and
// a live source sends something at least once per heartbeat period: the
// threshold leaves a heartbeat period plus a poll interval of margin. A
// replica whose latest probe saw no news is probed again 1 ms past the
// moment its threshold would be crossed (silenceCrossing), not at its next
// tick: once per silence episode, never on a healthy link (its heartbeats
// arrive well within the threshold), and never inside its own failure run.
// A
// SIGSTOPped primary keeps the replica's TCP connection open (Slave_IO_Running
// stays Yes until slave_net_timeout), but its heartbeats stop at once.
// Without a heartbeat period (heartbeats disabled) an idle source would look
// exactly like a dead one, so silence is then reported as unknown
// (Observation.SilenceKnown false), never as silent. Known limit: one event
// that takes longer than the threshold to stream (a huge row event) changes
// neither value; reading Read_Master_Log_Pos as well would close that gap
// once mysqlctl exposes it.
//
// On MySQL, SHOW REPLICA STATUS has no heartbeat counter: mysqlctl.Status
// reads HEARTBEAT_INTERVAL (replication_connection_configuration) and
// COUNT_RECEIVED_HEARTBEATS (replication_connection_status) of the default
// channel instead, so silence is judged the same way, on the daemon's clock.
// This matters twice on MySQL: a hung source is seen a poll or two after
// its heartbeats stop rather than when the IO thread drops after
// replica_net_timeout, and the failover then stops receivers that are still
// blocked in a read (STOP REPLICA IO_THREAD returns at once) rather than
// reconnecting to the hung source (measured on MySQL 9.7: STOP then waits
// 2 s, and KILL of the receiver does not shorten it).
package poller
