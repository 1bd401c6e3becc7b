package statemachine

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Detection is the corroboration policy for declaring the primary down.
type Detection string

// Detection policies.
const (
	// Corroborated (the default) declares the primary down only when the
	// daemon cannot reach it AND every reachable replica following it has
	// lost it too.
	Corroborated Detection = "corroborated"
	// DaemonOnly trusts the daemon's own probes alone; replicas' views are
	// ignored. Use it only where replicas cannot be observed.
	DaemonOnly Detection = "daemon-only"
)

// ErrUnknownDetection is returned by ParseDetection for an unknown policy.
var ErrUnknownDetection = errors.New("statemachine: unknown detection policy")

// ParseDetection parses "corroborated", "daemon-only" or "" (Corroborated).
func ParseDetection(s string) (Detection, error) {
	switch Detection(s) {
	case "", Corroborated:
		return Corroborated, nil
	case DaemonOnly:
		return DaemonOnly, nil
	}
	return "", fmt.Errorf("parse detection %q: %w", s, ErrUnknownDetection)
}

// SiteInput is what group detection knows about one site.
type SiteInput struct {
	// Name is the site's unique name.
	Name string
	// State is the site's debounced state (Machine.State).
	State State
	// Debouncing is Machine.Debouncing: probes disagree with State but have
	// not reached their threshold yet.
	Debouncing bool
	// ReplicatingFrom names the site this server's replication channel
	// points at; "" when it has none.
	ReplicatingFrom string
	// IOConnected: the replication IO (receiver) thread is connected to its
	// source.
	IOConnected bool
	// SourceSilent: the replica has received neither events nor heartbeats
	// from its source for longer than the configured silence threshold.
	SourceSilent bool
	// LastHeartbeatAge is the age of the last event or heartbeat received
	// from the source, computed by the replica against its own clock (never
	// by comparing two machines' clocks); 0 means unknown. It is compared
	// with GroupInput.SilenceAfter as an alternative to SourceSilent.
	LastHeartbeatAge time.Duration
	// ReplicationBroken: the IO or SQL thread stopped on an error.
	ReplicationBroken bool
	// IOStopped: the IO (receiver) thread is not running at all
	// (Slave_IO_Running = No: stopped by someone, or on an error), as
	// opposed to running and reconnecting (Connecting).
	IOStopped bool
	// LastStreamingAt is the daemon-clock time of the last probe that saw
	// this replica streaming from ReplicatingFrom; zero when never seen.
	LastStreamingAt time.Time
	// LastReachableAt is the daemon-clock completion time of the last probe
	// that reached this site: the moment its replication fields were read.
	// Zero when never reached.
	LastReachableAt time.Time
	// StateSince is the daemon-clock completion time of the probe that gave
	// the site its debounced State; zero when unknown.
	StateSince time.Time
	// Maintenance: an operator holds the site for maintenance. It is no
	// witness (a replica being stopped and restarted by hand says nothing
	// about its source) and its own replication or reachability is no
	// replica problem; it still counts for split brain, total loss and
	// undetermined states (it may be writable).
	Maintenance bool
	// Exited: the site's own sidecar reported, in a signed report the caller
	// checked (the current epoch, received after the daemon last reached
	// the site and recently: sitepair's exit guards), that the mysqld
	// process it watched exited. Only the PrimaryExited row reads it.
	Exited bool
}

// Streaming reports whether the replica is still receiving from its source:
// IO thread connected and the source not silent.
func (s SiteInput) Streaming(silenceAfter time.Duration) bool {
	silent := s.SourceSilent || (silenceAfter > 0 && s.LastHeartbeatAge > silenceAfter)
	return s.IOConnected && !silent
}

// GroupInput is everything group detection looks at.
type GroupInput struct {
	// Primary is the site the daemon believes is the primary (its persisted
	// active site); "" when none is known.
	Primary string
	// Sites are all the group's sites.
	Sites []SiteInput
	// Detection is the corroboration policy; "" means Corroborated.
	Detection Detection
	// SilenceAfter: a replica whose LastHeartbeatAge exceeds it counts as
	// having lost its source. 0 disables the age check (SourceSilent still
	// applies).
	SilenceAfter time.Duration
	// CorroborationWindow: a replica corroborates an outage only if it was
	// seen streaming from the primary at most this long before the daemon
	// last reached the primary (it lost the primary when the daemon did,
	// not an hour earlier over a broken link of its own). 0, or a primary
	// this daemon never reached (zero LastReachableAt), disables the window.
	CorroborationWindow time.Duration
}

// Site returns the named site.
func (in GroupInput) Site(name string) (SiteInput, bool) {
	for _, s := range in.Sites {
		if s.Name == name {
			return s, true
		}
	}
	return SiteInput{}, false
}

// InState returns the names of the sites in state st, in input order.
func (in GroupInput) InState(st State) []string {
	var out []string
	for _, s := range in.Sites {
		if s.State == st {
			out = append(out, s.Name)
		}
	}
	return out
}

func (in GroupInput) count(st State) int {
	n := 0
	for _, s := range in.Sites {
		if s.State == st {
			n++
		}
	}
	return n
}

// EffectivePrimary is the sole writable site when exactly one site is
// writable, otherwise the expected Primary.
func (in GroupInput) EffectivePrimary() string {
	w := ""
	for _, s := range in.Sites {
		if s.State == Writable {
			if w != "" {
				return in.Primary
			}
			w = s.Name
		}
	}
	if w != "" {
		return w
	}
	return in.Primary
}

// Witness classifies what replica s says about its source src.
type Witness int

// Witness kinds.
const (
	// NoWitness: s says nothing about src (points elsewhere, not
	// read-only, its IO thread stopped or broken, or it lost src long
	// before the daemon did).
	NoWitness Witness = iota
	// WitnessStreaming: s still receives from src: src is alive.
	WitnessStreaming
	// WitnessLost: s's running IO thread lost src around the time the
	// daemon did: it corroborates an outage.
	WitnessLost
	// WitnessPending: s was streaming from src when last read, but that
	// read completed before the probe that made the daemon give src up
	// (debounced Unreachable): s may not have seen yet what that probe saw.
	// It neither confirms nor refutes the outage until its next probe.
	WitnessPending
)

// Witness says what s tells about src (src.LastReachableAt: the daemon's
// last probe that reached it, zero when never).
func (in GroupInput) Witness(s, src SiteInput) Witness {
	// A site under maintenance is stopped and restarted by hand: its lost
	// source would corroborate an outage it caused itself.
	if src.Name == "" || s.Name == src.Name || s.State != ReadOnly || s.ReplicatingFrom != src.Name || s.Maintenance {
		return NoWitness
	}
	if s.Streaming(in.SilenceAfter) {
		// Prevents a crash read as a partition: a replica read right after
		// the source crashed (the poller reads the replicas at its first
		// failed probe), before its receiver saw the connection close,
		// still looks streaming when the next probe gives the source up.
		if src.State == Unreachable && !src.StateSince.IsZero() && s.LastReachableAt.Before(src.StateSince) {
			return WitnessPending
		}
		return WitnessStreaming
	}
	// A stopped or failed IO thread (STOP REPLICA, error 1236 or 1045)
	// says nothing about whether the source is alive.
	if s.IOStopped || s.ReplicationBroken {
		return NoWitness
	}
	// A replica seen streaming long before the daemon last reached the
	// source has a broken link of its own, not news about the source. One
	// never seen streaming (the daemon just started) is given the benefit:
	// a daemon restarted during an outage must still fail over.
	if in.CorroborationWindow > 0 && !src.LastReachableAt.IsZero() && !s.LastStreamingAt.IsZero() &&
		s.LastStreamingAt.Before(src.LastReachableAt.Add(-in.CorroborationWindow)) {
		return NoWitness
	}
	return WitnessLost
}

// Witnesses splits the reachable replicas whose replication channel points
// at the expected primary into those that lost it, those still streaming
// from it and those whose streaming predates the daemon giving it up (see
// Witness). Replicas pointed elsewhere (or nowhere) can neither confirm nor
// refute an outage and are not witnesses.
func (in GroupInput) Witnesses() (lost, streaming, pending []string) {
	src := in.source(in.Primary)
	for _, s := range in.Sites {
		switch in.Witness(s, src) {
		case WitnessStreaming:
			streaming = append(streaming, s.Name)
		case WitnessLost:
			lost = append(lost, s.Name)
		case WitnessPending:
			pending = append(pending, s.Name)
		}
	}
	return lost, streaming, pending
}

// witnesses counts the Witnesses of a source without allocating.
type witnesses struct{ lost, streaming, pending int }

func (in GroupInput) witnessCounts() witnesses { return in.witnessesOf(in.Primary) }

func (in GroupInput) witnessesOf(name string) witnesses {
	var w witnesses
	src := in.source(name)
	for _, s := range in.Sites {
		switch in.Witness(s, src) {
		case WitnessStreaming:
			w.streaming++
		case WitnessLost:
			w.lost++
		case WitnessPending:
			w.pending++
		}
	}
	return w
}

// confirmed: ≥1 witness lost the source and none streams from it or is
// still to be asked again.
func (w witnesses) confirmed() bool { return w.lost > 0 && w.streaming == 0 && w.pending == 0 }

// WitnessesConfirmLoss reports whether the replicas corroborate that site
// name is gone: at least one witness lost it, none still streams from it
// and none is pending (see Witness). The PrimaryDown rows apply it to the
// expected primary, sitepair's primary-down proof to a failover's old one.
func (in GroupInput) WitnessesConfirmLoss(name string) bool { return in.witnessesOf(name).confirmed() }

// source is site name as a witness's source (only its name when it is not
// among the sites).
func (in GroupInput) source(name string) SiteInput {
	if s, ok := in.Site(name); ok {
		return s
	}
	return SiteInput{Name: name}
}

// primaryUnreachable: nobody is writable and the expected primary is
// debounced Unreachable. The base of the three PrimaryDown* rows.
func (in GroupInput) primaryUnreachable() bool {
	p, ok := in.Site(in.Primary)
	return ok && p.State == Unreachable && in.count(Writable) == 0
}

// primaryExited is the PrimaryExited row: a crash the primary's host saw
// at once, corroborated, without waiting for FailureThreshold probes.
func (in GroupInput) primaryExited() bool {
	p, ok := in.Site(in.Primary)
	// Only a primary whose latest probe failed (Writable with a failure
	// streak): a probe that reached it since is a mysqld running again,
	// and one past the threshold is the PrimaryDown rows' to judge.
	if !ok || !p.Exited || p.State != Writable || !p.Debouncing || p.Maintenance {
		return false
	}
	// Daemon-only detection has no witnesses: the shortcut would rest on
	// the sidecar's word alone.
	if !in.corroborated() {
		return false
	}
	// Another writable site is a split brain, never a crash to fail over.
	if w, only := in.soleWritable(); !only || w != p.Name {
		return false
	}
	// The replicas' own view: one still streaming from it means something
	// there still serves (a report about another process, a wrong pid file).
	return in.witnessCounts().confirmed()
}

func (in GroupInput) corroborated() bool { return in.Detection != DaemonOnly }

// soleWritable returns the only writable site, if exactly one is.
func (in GroupInput) soleWritable() (string, bool) {
	w, n := "", 0
	for _, s := range in.Sites {
		if s.State == Writable {
			w, n = s.Name, n+1
		}
	}
	return w, n == 1
}

// anyReplica reports whether fn holds for some read-only site other than the
// sole writable one (false when not exactly one site is writable).
func (in GroupInput) anyReplica(fn func(s SiteInput, primary string) bool) bool {
	p, ok := in.soleWritable()
	if !ok {
		return false
	}
	for _, s := range in.Sites {
		if s.Name != p && s.State == ReadOnly && !s.Maintenance && fn(s, p) {
			return true
		}
	}
	return false
}

// unreachableReplicas counts the unreachable sites not under maintenance.
func (in GroupInput) unreachableReplicas() int {
	n := 0
	for _, s := range in.Sites {
		if s.State == Unreachable && !s.Maintenance {
			n++
		}
	}
	return n
}

// Code names a detection outcome.
type Code string

// Detection codes, from the most to the least urgent; see Table for the
// exact rules and docs/decisions.md for the meaning.
const (
	// TotalLoss: every site is unreachable.
	TotalLoss Code = "TotalLoss"
	// SplitBrain: more than one site is writable.
	SplitBrain Code = "SplitBrain"
	// Undetermined: some site has no debounced state yet.
	Undetermined Code = "Undetermined"
	// PrimaryExited: the writable primary is failing probes below the
	// failure threshold, its own sidecar saw its mysqld process exit, and
	// (corroborated) every witness lost it: down without waiting for the
	// threshold.
	PrimaryExited Code = "PrimaryExited"
	// PrimaryDebouncing: the writable primary is failing probes below the
	// failure threshold.
	PrimaryDebouncing Code = "PrimaryDebouncing"
	// UnreachablePrimary: the daemon cannot reach the primary but a replica
	// still streams from it (partition; never fail over).
	UnreachablePrimary Code = "UnreachablePrimary"
	// AwaitingWitnesses: the daemon just gave the primary up but a replica
	// last read before that still streamed from it: wait for its next
	// probe (neither an outage nor a partition yet).
	AwaitingWitnesses Code = "AwaitingWitnesses"
	// PrimaryDownUncorroborated: the primary is unreachable and no replica
	// can corroborate.
	PrimaryDownUncorroborated Code = "PrimaryDownUncorroborated"
	// PrimaryDown: the primary is unreachable and (corroborated) every
	// witness lost it.
	PrimaryDown Code = "PrimaryDown"
	// NoPrimary: nobody is writable, some site is read-only.
	NoPrimary Code = "NoPrimary"
	// UnexpectedPrimary: the sole writable site is not the expected primary.
	UnexpectedPrimary Code = "UnexpectedPrimary"
	// ReplicationBroken: a replica's replication stopped on an error.
	ReplicationBroken Code = "ReplicationBroken"
	// ReplicaNotFollowingPrimary: a replica does not replicate (connected)
	// from the primary.
	ReplicaNotFollowingPrimary Code = "ReplicaNotFollowingPrimary"
	// ReplicaUnreachable: the primary is writable, some replica unreachable.
	ReplicaUnreachable Code = "ReplicaUnreachable"
	// Healthy: one writable primary, every replica follows it.
	Healthy Code = "Healthy"
)

// Row is one line of the detection table.
type Row struct {
	// Code is the outcome this row detects.
	Code Code
	// Priority orders evaluation: lower runs first and wins.
	Priority int
	// Meaning is a one-line human description.
	Meaning string
	// Match reports whether the row applies. Rows may overlap; Priority
	// resolves overlaps.
	Match func(GroupInput) bool
}

var table = []Row{
	{TotalLoss, 10, "every site is unreachable",
		func(in GroupInput) bool { return len(in.Sites) > 0 && in.count(Unreachable) == len(in.Sites) }},
	{SplitBrain, 20, "more than one site is writable",
		func(in GroupInput) bool { return in.count(Writable) > 1 }},
	{Undetermined, 30, "some site has no debounced state yet (or there are no sites)",
		func(in GroupInput) bool { return len(in.Sites) == 0 || in.count(Unknown) > 0 }},
	{PrimaryExited, 35, "the writable primary is failing probes below the threshold, its own sidecar saw its mysqld exit, and every reachable replica following it lost it",
		func(in GroupInput) bool { return in.primaryExited() }},
	{PrimaryDebouncing, 40, "the writable primary is failing probes but has not reached the failure threshold",
		func(in GroupInput) bool {
			p, ok := in.Site(in.EffectivePrimary())
			return ok && p.State == Writable && p.Debouncing
		}},
	{UnreachablePrimary, 50, "the daemon cannot reach the primary but a replica still streams from it: partition, never fail over",
		func(in GroupInput) bool {
			return in.primaryUnreachable() && in.corroborated() && in.witnessCounts().streaming > 0
		}},
	{AwaitingWitnesses, 55, "the daemon just gave the primary up but a replica read before that still streamed from it: wait for its next probe",
		func(in GroupInput) bool {
			w := in.witnessCounts()
			return in.primaryUnreachable() && in.corroborated() && w.streaming == 0 && w.pending > 0
		}},
	{PrimaryDownUncorroborated, 60, "the primary is unreachable and no reachable replica follows it to corroborate",
		func(in GroupInput) bool {
			w := in.witnessCounts()
			return in.primaryUnreachable() && in.corroborated() && w.lost == 0 && w.streaming == 0 && w.pending == 0
		}},
	{PrimaryDown, 70, "the primary is unreachable and (corroborated) every reachable replica following it lost it",
		func(in GroupInput) bool {
			if !in.primaryUnreachable() {
				return false
			}
			return !in.corroborated() || in.witnessCounts().confirmed()
		}},
	{NoPrimary, 80, "no site is writable and some site is read-only",
		func(in GroupInput) bool { return in.count(Writable) == 0 && in.count(ReadOnly) > 0 }},
	{UnexpectedPrimary, 90, "exactly one site is writable but it is not the expected primary",
		func(in GroupInput) bool {
			w, ok := in.soleWritable()
			return ok && in.Primary != "" && w != in.Primary
		}},
	{ReplicationBroken, 100, "a read-only replica's replication stopped on an error",
		func(in GroupInput) bool {
			return in.anyReplica(func(s SiteInput, _ string) bool { return s.ReplicationBroken })
		}},
	{ReplicaNotFollowingPrimary, 110, "a read-only replica does not replicate (connected) from the primary",
		func(in GroupInput) bool {
			return in.anyReplica(func(s SiteInput, p string) bool { return s.ReplicatingFrom != p || !s.IOConnected })
		}},
	{ReplicaUnreachable, 120, "the primary is writable but some replica is unreachable",
		func(in GroupInput) bool {
			_, ok := in.soleWritable()
			return ok && in.unreachableReplicas() > 0
		}},
	{Healthy, 130, "exactly one writable site; every other site is read-only and follows it",
		func(in GroupInput) bool {
			p, ok := in.soleWritable()
			if !ok {
				return false
			}
			for _, s := range in.Sites {
				if s.Name == p || (s.Maintenance && s.State != Writable) {
					continue
				}
				if s.State != ReadOnly || s.ReplicatingFrom != p || !s.IOConnected || s.ReplicationBroken {
					return false
				}
			}
			return true
		}},
}

// Table returns a copy of the detection table, in evaluation order.
func Table() []Row { return slices.Clone(table) }

// Meaning returns the one-line meaning of code ("" for an unknown code).
func Meaning(code Code) string {
	for _, r := range table {
		if r.Code == code {
			return r.Meaning
		}
	}
	return ""
}

// Result is the outcome of Detect.
type Result struct {
	// Code is the highest-priority matching row.
	Code Code
	// Matched lists every matching row, highest priority first (Code is
	// Matched[0]); lower rows describe secondary problems, e.g. a replica
	// unreachable while another one's replication is broken.
	Matched []Code
	// Primary is GroupInput.EffectivePrimary.
	Primary string
	// Lost, Streaming and Pending are GroupInput.Witnesses.
	Lost, Streaming, Pending []string
}

// Has reports whether code is among the matched rows.
func (r Result) Has(code Code) bool { return slices.Contains(r.Matched, code) }

// Detect evaluates the table against in.
func Detect(in GroupInput) Result {
	r := Result{Primary: in.EffectivePrimary(), Matched: make([]Code, 0, 4)}
	r.Lost, r.Streaming, r.Pending = in.Witnesses()
	for _, row := range table {
		if row.Match(in) {
			r.Matched = append(r.Matched, row.Code)
		}
	}
	if len(r.Matched) == 0 {
		// Unreachable by construction (the rows cover every input), but a
		// hole in the table must never read as Healthy.
		r.Matched = []Code{Undetermined}
	}
	r.Code = r.Matched[0]
	return r
}
