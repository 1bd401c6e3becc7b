package view

// The sidecar's half of the signed protocol: what a sidecar POSTs to the
// daemon each round, where, and how it is signed. The daemon answers with an
// Answer bound to the report's nonce.

// ReportPath is where a sidecar POSTs its Report on each daemon URL.
const ReportPath = "/v1/sidecar/report"

// SignatureHeader carries the hex HMAC-SHA256 of a report's exact body bytes,
// keyed with daemon.viewSigningKeyFile: SignBytes(body, key), checked with
// VerifyBytes.
const SignatureHeader = "X-Failoverd-Signature"

// Report is what a sidecar tells the daemon every round (JSON body of
// POST /v1/sidecar/report). Durations are measured on the sidecar's own
// monotonic clock.
type Report struct {
	Group string `json:"group"`
	Site  string `json:"site"`
	// Nonce is fresh random hex per round (NewNonce): the daemon binds its
	// answer to it (Answer), and only a bound answer renews the lease.
	// Empty from a sidecar of an older version.
	Nonce string `json:"nonce,omitempty"`
	// Boot is random hex made when this sidecar process started: a new
	// boot holds no view and may adopt an older epoch from a peer, so the
	// daemon trusts what a peer said only within one boot.
	Boot string `json:"boot,omitempty"`
	// Echo is the Token of the last daemon answer this boot received
	// (empty before the first one).
	Echo string `json:"echo,omitempty"`
	// Epoch is the newest trusted view's epoch (0 if none).
	Epoch uint64 `json:"epoch"`
	// MySQLdUp: the last status read of the local MySQL succeeded.
	MySQLdUp bool `json:"mysqldUp"`
	// MySQLdDown: that read failed and mysqld provably does not run (a
	// process this sidecar saw in its pid namespace is gone, or the watched
	// mysqld exited, none was seen since and its port refuses). Neither up
	// nor down is "unknown" (hung, auth error, another pid namespace): the
	// daemon accepts only MySQLdDown as a proof.
	MySQLdDown bool `json:"mysqldDown,omitempty"`
	// Writable: that read found the flavor's fence not in effect
	// (super_read_only OFF on MySQL, read_only OFF on MariaDB).
	Writable bool `json:"writable"`
	// Fenced: this sidecar fenced (or killed) its MySQL and has not seen it
	// writable since.
	Fenced bool `json:"fenced"`
	// FencedEpoch is the view epoch under which it last fenced (0 never).
	FencedEpoch uint64 `json:"fencedEpoch"`
	// Executed is the executed GTID set as read (empty when unknown).
	Executed string `json:"executed"`
	// CanKill: a mysqld pid file is configured and names a live mysqld
	// this sidecar may SIGKILL; the daemon's lease-expired proof needs it.
	CanKill bool `json:"canKill"`
	// LeaseRemainingMs is L - now; negative once the lease expired.
	LeaseRemainingMs int64 `json:"leaseRemainingMs"`
	// MySQLdExit, when set, says the mysqld process this sidecar watched
	// (through its pid file) exited and it has seen no mysqld process since
	// (neither a new one in the pid file nor a status read that succeeded
	// after the exit). Omitted otherwise, so a report without an exit reads
	// as before to a daemon of an older version.
	MySQLdExit *MySQLdExit `json:"mysqldExit,omitempty"`
	// Peers describes, per peer site, the last time this sidecar served it a
	// view on /peer/active-site?from=PEER; peers never served are omitted.
	Peers map[string]PeerServed `json:"peers"`
}

// PeerServed is the last view served to one peer.
type PeerServed struct {
	// ServedEpoch is the epoch of the view served.
	ServedEpoch uint64 `json:"servedEpoch"`
	// ServedAgoMs is how long before the report it was served. The daemon
	// takes (its receipt time - ServedAgoMs) as an upper bound of the last
	// time the peer could have renewed its lease through this sidecar.
	ServedAgoMs int64 `json:"servedAgoMs"`
}

// MySQLdExit identifies a mysqld process that exited.
type MySQLdExit struct {
	// PID and StartTicks (field 22 of /proc/PID/stat: the start time in
	// clock ticks after boot) identify the process: a pid alone is reused.
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"startTicks"`
	// AgoMs is how long before the report the sidecar saw it exit (its own
	// monotonic clock). The daemon takes (receipt - AgoMs) as an upper
	// bound of the exit on its clock.
	AgoMs int64 `json:"agoMs"`
}
