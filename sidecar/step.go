package sidecar

import "context"

// Step runs one round (read the local status, report to the daemon, ask
// every peer) and then the guard's rules once, all in the caller's
// goroutine and on the injected clock. It stands in for Run where a caller
// drives time itself: the deterministic simulation (test/sim) calls Enforce
// at every lease deadline and Step at every check interval, as Run's timers
// would. A sidecar driven by Step must not also Run. It reports whether a
// newer view was adopted.
func (s *Sidecar) Step(ctx context.Context) bool {
	s.stepped = true
	adopted := s.round(ctx)
	s.enforce(ctx)
	return adopted
}

// Enforce applies the guard's rules once (view names another site, lease
// expired, boot unfence), in the caller's goroutine: what Run's guard does
// when its lease timer fires.
func (s *Sidecar) Enforce(ctx context.Context) {
	s.stepped = true
	s.enforce(ctx)
}

// concurrently runs f on its own goroutine, or right away for a sidecar
// driven by Step (a simulated history must replay exactly).
func (s *Sidecar) concurrently(f func()) {
	if s.stepped {
		f()
		return
	}
	go f()
}

// MysqldRunning and MysqldExited tell a sidecar driven by Step what a
// ProcessWatcher tells Run's (the simulation's model mysqld has no pidfd):
// p now runs, or p exited (clean: a shutdown that removed its pid file).
// The exit is in the next Step's report.
func (s *Sidecar) MysqldRunning(p Process) { s.processRunning(p) }

// MysqldExited: see MysqldRunning.
func (s *Sidecar) MysqldExited(p Process, clean bool) { s.processExited(p, clean) }
