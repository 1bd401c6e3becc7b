package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is a kind of fault (or operator request) in a schedule.
type Kind string

// Fault kinds. Faults with a duration are healed Dur steps after they start.
const (
	// Kill crashes mysqld (probes are refused: the host answers); it is
	// restarted read-only after Dur steps.
	Kill Kind = "kill"
	// KillHost loses the whole host (probes time out); back after Dur.
	KillHost Kind = "kill-host"
	// KillUnreplicated commits 1-2 client transactions locally on the site
	// (not yet sent to any replica, so never acknowledged) and then kills
	// mysqld: the crash "with unreplicated commits".
	KillUnreplicated Kind = "kill-unreplicated"
	// Restart stops mysqld and starts it again within the step (read-only,
	// sessions killed).
	Restart Kind = "restart"
	// Hang: mysqld answers nothing and does nothing (SIGSTOP) for Dur.
	Hang Kind = "hang"
	// CutDaemon cuts the daemon↔site link for Dur (probes and actions time out).
	CutDaemon Kind = "cut-daemon"
	// Blip cuts the daemon↔site link for one step.
	Blip Kind = "blip"
	// CutLink cuts the replication link between Site and Peer for Dur.
	CutLink Kind = "cut-link"
	// Isolate cuts the site from the daemon and every peer for Dur
	// (clients still reach it).
	Isolate Kind = "isolate"
	// Stall stops the site's applier for Dur (relay backlog builds up).
	Stall Kind = "stall"
	// Errant is a write made directly on the site with read_only bypassed
	// (an errant transaction when the site is a replica).
	Errant Kind = "errant"
	// Switchover is an operator's planned switchover to Site.
	Switchover Kind = "switchover"
	// DaemonRestart restarts the daemon between two rounds: it reloads the
	// persisted state and forgets everything else.
	DaemonRestart Kind = "daemon-restart"
	// DaemonCrash kills the daemon at failpoint number Peer of its next
	// action that has one; it restarts at the end of the step.
	DaemonCrash Kind = "daemon-crash"
	// RoutingDown makes the routing API (the kube-apiserver holding the
	// Service) unreachable for Dur.
	RoutingDown Kind = "routing-down"
	// RoutingEdit points the Service at Site by hand (someone's kubectl).
	RoutingEdit Kind = "routing-edit"
	// SidecarKill kills the site's sidecar process; its service manager
	// starts it again a step later (deploy/systemd: Restart=always after
	// 1 s, Upholds= while mysqld runs), with no view and no lease. A
	// sidecar kept dead while mysqld runs breaks the deployment's promise
	// that the lease-expired proof rests on, and is not simulated.
	SidecarKill Kind = "sidecar-kill"
	// SlowLink delays the replication link between Site and Peer by
	// slowLinkSteps for Dur: the replica receives (and acknowledges) a
	// transaction only that long after it was committed.
	SlowLink Kind = "slow-link"
	// SlowDaemon gives the daemon↔site link a latency of slowDaemonLatency
	// (below the probe timeout) for Dur: each probe answers after the
	// decision that would have used it, so decisions rest on older ones.
	SlowDaemon Kind = "slow-daemon"
)

// Delays of the slow faults.
const (
	slowLinkSteps     = 2
	slowDaemonLatency = 600 * time.Millisecond
)

// Fault is one scheduled fault.
type Fault struct {
	Step int
	Kind Kind
	Site int
	Peer int
	Dur  int
}

func (f Fault) String() string {
	s := fmt.Sprintf("{Step: %d, Kind: %q, Site: %d", f.Step, string(f.Kind), f.Site)
	if f.Peer != 0 {
		s += fmt.Sprintf(", Peer: %d", f.Peer)
	}
	if f.Dur != 0 {
		s += fmt.Sprintf(", Dur: %d", f.Dur)
	}
	return s + "}"
}

// Schedule is a fault schedule, ordered by Step.
type Schedule []Fault

// GoString renders the schedule as a Go literal for sim_regressions_test.go.
func (s Schedule) GoString() string {
	var b strings.Builder
	b.WriteString("Schedule{")
	for i, f := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.String())
	}
	b.WriteString("}")
	return b.String()
}

// Setup is the shape of one history: group size and policy knobs, all
// derived from the seed.
type Setup struct {
	Sites           int
	DROnly          int // index of a dr-only site, -1 for none
	SemiSyncFencing bool
	// Sidecars: a sidecar beside every site, fencing sidecar (or
	// semisync+sidecar with SemiSyncFencing).
	Sidecars bool
	// BlindSidecars: the sidecars cannot see mysqld's process (no pid
	// file, or another pid namespace): they cannot SIGKILL a hung mysqld,
	// their kills find no process, and they can never prove it down.
	BlindSidecars    bool
	FailureThreshold int
	CooldownSteps    int
	EscalationCount  int
	Steps            int // faulty steps; the quiet tail follows
	Tail             int
}

// setupFor derives the setup of a seed.
func setupFor(seed uint64, sidecars bool) Setup {
	r := rand.New(rand.NewPCG(seed, 0x5e7))
	s := Setup{
		Sites:            2 + r.IntN(4),
		DROnly:           -1,
		SemiSyncFencing:  r.IntN(2) == 0,
		FailureThreshold: 2 + r.IntN(2),
		CooldownSteps:    15 + r.IntN(30),
		EscalationCount:  2 + r.IntN(2),
		Steps:            60 + r.IntN(61),
		Tail:             80,
	}
	if s.Sites >= 3 && r.IntN(3) == 0 {
		s.DROnly = s.Sites - 1
	}
	s.Sidecars = sidecars
	if sidecars {
		s.BlindSidecars = rand.New(rand.NewPCG(seed, 0xb1d)).IntN(3) == 0
	}
	return s
}

// scheduleFor draws the random fault schedule of a seed.
func scheduleFor(seed uint64, su Setup) Schedule {
	r := rand.New(rand.NewPCG(seed, 0xfa17))
	kinds := []Kind{Kill, Kill, KillHost, KillUnreplicated, KillUnreplicated, Restart, Hang, Hang,
		CutDaemon, CutDaemon, Blip, CutLink, Isolate, Stall, Errant, Switchover, DaemonRestart, DaemonCrash}
	n := 2 + r.IntN(9)
	var s Schedule
	for range n {
		f := Fault{Step: 5 + r.IntN(su.Steps-5), Kind: kinds[r.IntN(len(kinds))], Site: r.IntN(su.Sites)}
		switch f.Kind {
		case Kill, KillHost, KillUnreplicated, Hang, CutDaemon, Isolate, Stall, CutLink:
			f.Dur = 1 + r.IntN(40)
		}
		if f.Kind == CutLink {
			f.Peer = (f.Site + 1 + r.IntN(su.Sites-1)) % su.Sites
		}
		if f.Kind == DaemonCrash {
			f.Peer = 1 + r.IntN(8)
		}
		// Faults that hit "the primary" are the interesting ones: aim
		// half of them at whoever is writable when they fire.
		if r.IntN(2) == 0 && f.Kind != Switchover && f.Kind != CutLink && f.Kind != Errant {
			f.Site = -1
		}
		s = append(s, f)
	}
	// Routing faults come from their own stream, so adding them left every
	// seed's database faults as they were (the regressions keep their
	// histories). They touch only the model Service.
	rr := rand.New(rand.NewPCG(seed, 0x7017))
	for range rr.IntN(3) {
		f := Fault{Step: 5 + rr.IntN(su.Steps-5), Kind: RoutingDown, Site: rr.IntN(su.Sites), Dur: 1 + rr.IntN(40)}
		if rr.IntN(2) == 0 {
			f.Kind, f.Dur = RoutingEdit, 0
		}
		s = append(s, f)
	}
	// Delays, from a stream of their own too.
	dr := rand.New(rand.NewPCG(seed, 0xde1a))
	for range dr.IntN(3) {
		f := Fault{Step: 5 + dr.IntN(su.Steps-5), Kind: SlowDaemon, Site: dr.IntN(su.Sites), Dur: 1 + dr.IntN(30)}
		if dr.IntN(2) == 0 {
			f.Kind, f.Peer = SlowLink, (f.Site+1+dr.IntN(su.Sites-1))%su.Sites
		} else if dr.IntN(2) == 0 {
			f.Site = -1
		}
		s = append(s, f)
	}
	if su.Sidecars {
		sr := rand.New(rand.NewPCG(seed, 0x51dec))
		for range sr.IntN(3) {
			f := Fault{Step: 5 + sr.IntN(su.Steps-5), Kind: SidecarKill, Site: sr.IntN(su.Sites), Dur: 1}
			if sr.IntN(2) == 0 {
				f.Site = -1
			}
			s = append(s, f)
		}
	}
	sortSchedule(s)
	return s
}

func sortSchedule(s Schedule) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].Step < s[j-1].Step; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
