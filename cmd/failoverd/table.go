package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/failoverd/failoverd/status"
)

// writeTable prints groups the way kubectl prints objects: a header row,
// aligned columns, "-" for nothing, ages instead of timestamps.
func writeTable(w io.Writer, d status.Daemon, groups []status.Group, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if d.Identity != "" {
		role := "follower"
		if d.Leader {
			role = "leader"
		}
		ready := "ready"
		if !d.Ready {
			ready = "not ready: " + d.NotReady
		}
		fmt.Fprintf(tw, "DAEMON %s (%s, %s), store %s, %s\n", d.Identity, role, orDash(d.Version), d.Store, ready)
		if c := d.Config; c.Digest != "" {
			fmt.Fprintf(tw, "  config %s sha256:%s, loaded %s ago\n", orDash(c.File), c.Digest[:min(12, len(c.Digest))], age(now.Sub(c.LoadedAt)))
			if c.LastRefused != "" {
				fmt.Fprintf(tw, "  RELOAD REFUSED %s ago: %s\n", age(now.Sub(c.LastRefusedAt)), truncate(c.LastRefused, 160))
			}
			for _, p := range c.Pending {
				fmt.Fprintf(tw, "  %s keeps its previous configuration: %s\n", p.Group, p.Reason)
			}
		}
		fmt.Fprintln(tw)
	}
	for i, g := range groups {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintln(tw, "GROUP\tEPOCH\tPRIMARY\tSTATUS\tREASON\tLAST FAILOVER\tCOOLDOWN")
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", g.Name, g.Epoch, orDash(g.ActiveSite), orDash(g.Class), orDash(g.Reason),
			lastFailover(g.LastFailover, now), cooldown(g.CooldownRemainingSeconds))
		if g.Mode == status.ModeObserve {
			fmt.Fprintf(tw, "  OBSERVE MODE: the reason above is what it would do (logged as decision.would); it changes nothing (set mode: active to let it act)\n")
		}
		if g.InFlight != nil {
			f := g.InFlight
			fmt.Fprintf(tw, "  in flight: %s %s → %s, step %s, started %s ago\n", f.Kind, orDash(f.From), f.To, f.Step, age(now.Sub(f.StartedAt)))
		}
		if g.EscalationHalted {
			fmt.Fprintf(tw, "  automatic failover HALTED: run failoverd acknowledge %s once investigated\n", g.Name)
		}
		if p := g.Pause; p != nil {
			fmt.Fprintf(tw, "  PAUSED by %s for %s more (%s): failoverd resume %s\n", p.By, age(p.Until.Sub(now)), p.Reason, g.Name)
		}
		if w := g.Withheld; w != nil {
			fmt.Fprintf(tw, "  WITHHELD by the pause: %s %s (%s)\n", w.Action, orDash(w.Target), w.Reason)
		}
		for _, s := range g.Sites {
			if h := s.Hold; h != nil {
				fmt.Fprintf(tw, "  %s held %s by %s for %s more (%s)\n", s.Name, h.Kind, h.By, age(h.Until.Sub(now)), h.Reason)
			}
		}
		for _, r := range g.Readiness {
			if r.Ready {
				fmt.Fprintf(tw, "  if the primary %s: %s in about %.1fs (%s)\n", faultVerb(r.Fault), r.Candidate, r.ExpectedWritableSeconds, r.Proof)
			} else {
				fmt.Fprintf(tw, "  if the primary %s: NO automatic failover (%s)\n", faultVerb(r.Fault), r.Reason)
			}
		}
		if gr := g.GroupReplication; gr != nil {
			writeGroupReplication(tw, gr)
		}
		if g.RPO == status.RPONotZero {
			fmt.Fprintf(tw, "  RPO NOT ZERO: %s\n", g.RPONote)
		}
		if g.Class != status.ClassHealthy && g.Message != "" {
			fmt.Fprintf(tw, "  %s\n", g.Message)
		}
		if g.LastError != "" {
			fmt.Fprintf(tw, "  last error: %s\n", g.LastError)
		}
		for _, dv := range g.Diverged {
			fmt.Fprintf(tw, "  %s DIVERGED: %d transaction(s) the primary lacks: %s\n", dv.Site, dv.Transactions, dv.GTID)
			fmt.Fprintf(tw, "    repair it by hand, or throw them away: failoverd reclone %s %s --confirm-discard %s\n", g.Name, dv.Site, dv.GTID[:min(16, len(dv.GTID))])
		}
		for _, s := range g.Sites {
			if r := s.Replication; r != nil && r.Broken && r.LastError != "" {
				fmt.Fprintf(tw, "  %s REPLICATION STOPPED: %s\n", s.Name, truncate(r.LastError, 160))
			}
			if s.WritesStalled != "" {
				fmt.Fprintf(tw, "  %s WRITES STALLED awaiting semi-sync acknowledgements: %s\n", s.Name, truncate(s.WritesStalled, 160))
			}
			if s.ApplierBlocked != "" {
				fmt.Fprintf(tw, "  %s APPLIER BLOCKED: %s\n", s.Name, truncate(s.ApplierBlocked, 160))
			}
			switch r := s.Reclone; {
			case r != nil && r.Failed != "":
				fmt.Fprintf(tw, "  %s RECLONE FAILED (from %s, asked by %s): %s\n", s.Name, r.Donor, r.By, r.Failed)
			case r != nil:
				fmt.Fprintf(tw, "  %s recloning from %s since %s (asked by %s)\n", s.Name, r.Donor, r.StartedAt.UTC().Format(time.RFC3339), r.By)
			}
		}
		fmt.Fprintln(tw, "\nSITE\tROLE\tSTATE\tREPLICATION\tLAG\tGTID EXECUTED\tSIDECAR\tCACHE")
		for _, s := range g.Sites {
			name := s.Name
			if s.Active {
				name += "*"
			}
			state := s.State
			if s.Recovery != "" {
				state += " (recovery " + s.Recovery + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, s.Role, state, replication(s), lag(s.Replication),
				orDash(truncate(s.Executed, 48)), sidecarAge(s.Sidecar), orDash(s.CacheRole))
		}
		if len(g.Routing) > 0 {
			var parts []string
			for _, r := range g.Routing {
				p := r.Name + " " + r.State
				if r.Error != "" {
					p += " (" + truncate(r.Error, 80) + ")"
				}
				parts = append(parts, p)
			}
			fmt.Fprintf(tw, "ROUTING: %s\n", strings.Join(parts, ", "))
		}
		if len(g.Hooks) > 0 {
			var parts []string
			for _, h := range g.Hooks {
				p := fmt.Sprintf("%s %s (%s)", h.Hook, h.State, h.Event)
				if h.Error != "" {
					p += ": " + truncate(h.Error, 80)
				}
				parts = append(parts, p)
			}
			fmt.Fprintf(tw, "HOOKS: %s\n", strings.Join(parts, ", "))
		}
	}
	_ = tw.Flush() // a failed write to stdout has nowhere better to go
}

// writeGroupReplication writes a replication: group group's verdict: its
// quorum, view and each member's own report.
func writeGroupReplication(tw io.Writer, gr *status.GroupReplication) {
	quorum := "QUORUM"
	if !gr.HasQuorum {
		quorum = "NO QUORUM"
	}
	var states []string
	for _, st := range []string{"ONLINE", "RECOVERING", "UNREACHABLE", "ERROR", "OFFLINE"} {
		if n := gr.Members[st]; n > 0 {
			states = append(states, fmt.Sprintf("%d %s", n, st))
		}
	}
	fmt.Fprintf(tw, "  group replication: %s (%s), view %s of %d members (majority of %d), primary %s, members: %s\n", quorum, orDash(gr.Verdict),
		orDash(gr.ViewID), gr.ViewSize, gr.Denominator, orDash(gr.PrimarySite), orDash(strings.Join(states, ", ")))
	for _, s := range gr.Sites {
		line := fmt.Sprintf("    %s: %s %s, view %s (%d members), %s", s.Site, orDash(s.State), orDash(s.Role), orDash(s.ViewID), s.ViewSize, s.Standing)
		if s.Error != "" {
			line += ": " + truncate(s.Error, 100)
		}
		fmt.Fprintln(tw, line)
		for _, u := range s.UnsafeSettings {
			fmt.Fprintf(tw, "      UNSAFE SETTING: %s\n", truncate(u, 160))
		}
	}
	if gr.TwoGroups {
		fmt.Fprintf(tw, "  TWO GROUPS among the configured members: %s\n", strings.Join(gr.GroupNames, ", "))
	}
	for _, w := range gr.Warnings {
		fmt.Fprintf(tw, "  WARNING: %s\n", truncate(w, 200))
	}
	if gr.SwitchoverTo != "" {
		fmt.Fprintf(tw, "  switchover to %s asked of the group: routing follows once its view names it\n", gr.SwitchoverTo)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// age prints a duration like kubectl: 45s, 12m, 3h, 5d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func lastFailover(f *status.Failover, now time.Time) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%s %s→%s %s ago", f.Kind, orDash(f.From), f.To, age(now.Sub(f.At)))
}

func cooldown(seconds float64) string {
	if seconds <= 0 {
		return "-"
	}
	return age(time.Duration(seconds * float64(time.Second)))
}

func replication(s status.Site) string {
	r := s.Replication
	if r == nil {
		return "-"
	}
	thread := func(running bool) string {
		if running {
			return "on"
		}
		return "off"
	}
	out := fmt.Sprintf("from %s io=%s sql=%s", orDash(s.ReplicatingFrom), thread(r.IORunning), thread(r.SQLRunning))
	if r.Broken {
		out += " BROKEN"
	}
	return out
}

func lag(r *status.Replication) string {
	switch {
	case r == nil:
		return "-"
	case !r.LagKnown:
		return "?"
	}
	// What decisions use: the server's estimate or, when higher, how long
	// received transactions stayed unapplied (GTID sets).
	return fmt.Sprintf("%.0fs", max(r.LagSeconds, r.GTIDLagSeconds))
}

func sidecarAge(s *status.Sidecar) string {
	switch {
	case s == nil:
		return "-"
	case s.LeaseAgeSeconds < 0:
		return "never seen"
	}
	out := age(time.Duration(s.LeaseAgeSeconds*float64(time.Second))) + " ago"
	if s.FencedEpoch > 0 {
		out += fmt.Sprintf(", fenced@%d", s.FencedEpoch)
	}
	return out
}

// faultVerb says what a readiness fault supposes, for the table.
func faultVerb(fault string) string {
	switch fault {
	case "crash":
		return "crashed"
	case "lost":
		return "were lost (host, network, hang)"
	}
	return fault
}
