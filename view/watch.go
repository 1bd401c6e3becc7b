package view

// The sidecar's wake-up call: a sidecar holds a signed Watch open at the
// daemon, which answers as soon as it publishes a view newer than the one
// the sidecar holds (or when the wait ends). The answer carries nothing a
// sidecar trusts: it only starts the sidecar's next round at once, whose
// report gets the signed view bound to its nonce as always. So a failover
// reaches every sidecar it waits on (the old primary's, whose report of its
// fence is the promotion's proof; the target's, which must hold the new
// epoch before its site is made writable) within milliseconds of the
// publish instead of at its next round.

// WatchPath is where a sidecar POSTs its Watch (signed like a Report, with
// SignatureHeader over the exact body bytes).
const WatchPath = "/v1/sidecar/watch"

// MaxWatchWait bounds how long a daemon holds a Watch.
const MaxWatchWait = 25_000 // milliseconds

// Watch asks the daemon to answer once the group's published view is newer
// than (Epoch, Seq), the view the sidecar holds, or after WaitMs.
type Watch struct {
	Group string `json:"group"`
	Site  string `json:"site"`
	Epoch uint64 `json:"epoch"`
	Seq   uint64 `json:"seq"`
	// WaitMs is how long the daemon may hold the request (at most
	// MaxWatchWait; the sidecar's HTTP timeout is longer).
	WaitMs int64 `json:"waitMs"`
}

// WatchAnswer is the daemon's answer: the published view's epoch and seq,
// and whether it is newer than the watched one.
type WatchAnswer struct {
	Epoch uint64 `json:"epoch"`
	Seq   uint64 `json:"seq"`
	Newer bool   `json:"newer"`
}

// NewerThan reports whether the view (epoch, seq) orders after (e, s).
func NewerThan(epoch, seq, e, s uint64) bool {
	return epoch > e || (epoch == e && seq > s)
}
