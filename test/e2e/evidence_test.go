package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failoverd/failoverd/test/testenv"
)

// A failed scenario prints its evidence (issue 26, "a catalogue that never
// flakes"): `make scenarios` keeps only the verdict lines of the test's
// output, so the reason of a failure and what led to it must be printed
// there, not only in the test log. The evidence is the failure messages,
// the faults the harness applied, the ack log (runs of acknowledgements per
// site), the daemons' decisions and actions, and each server's state.
// FAILOVERD_E2E_EVIDENCE=1 prints it for passing scenarios too.

// scenarioT is a scenario's *testing.T that also keeps every failure
// message (Fatal, Fatalf, Error, Errorf, through the group's helpers and
// testenv's too), for the verdict's reason.
type scenarioT struct {
	*testing.T
	mu       sync.Mutex
	failures []string
}

func (s *scenarioT) record(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, msg)
}

// reasons returns the failure messages in order.
func (s *scenarioT) reasons() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.failures)
}

func (s *scenarioT) Fatalf(format string, args ...any) {
	s.Helper()
	s.record(fmt.Sprintf(format, args...))
	s.T.Fatalf(format, args...)
}

func (s *scenarioT) Fatal(args ...any) {
	s.Helper()
	s.record(fmt.Sprint(args...))
	s.T.Fatal(args...)
}

func (s *scenarioT) Errorf(format string, args ...any) {
	s.Helper()
	s.record(fmt.Sprintf(format, args...))
	s.T.Errorf(format, args...)
}

func (s *scenarioT) Error(args ...any) {
	s.Helper()
	s.record(fmt.Sprint(args...))
	s.T.Error(args...)
}

// quietT is a testenv.T whose Fatalf only records: the evidence is read
// after the scenario failed and must not fail (or stop) it again.
type quietT struct {
	testing.TB
	errs []string
}

func (q *quietT) Fatalf(format string, args ...any) {
	q.errs = append(q.errs, fmt.Sprintf(format, args...))
}

// groupEvent is a fault or step the harness applied, for the evidence.
type groupEvent struct {
	at   time.Time
	what string
}

// note records a fault or step the harness applies to the group.
func (g *group) note(format string, args ...any) {
	g.evMu.Lock()
	defer g.evMu.Unlock()
	g.events = append(g.events, groupEvent{time.Now(), fmt.Sprintf(format, args...)})
}

func (g *group) noted() []groupEvent {
	g.evMu.Lock()
	defer g.evMu.Unlock()
	return slices.Clone(g.events)
}

// allLogs is the output of every daemon g started, oldest first.
func (g *group) allLogs() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var b strings.Builder
	for _, l := range g.pastLogs {
		b.WriteString(l.String())
	}
	if g.logs != nil {
		b.WriteString(g.logs.String())
	}
	return b.String()
}

// evidence prints the scenario's evidence, each line starting with
// "evidence <name>:" (kept by `make scenarios`).
func (r *scenarioRun) evidence(name string, begun time.Time) {
	p := func(format string, args ...any) {
		fmt.Printf("evidence %s: %s\n", name, fmt.Sprintf(format, args...))
	}
	rel := func(at time.Time) string { return fmt.Sprintf("+%.3fs", at.Sub(begun).Seconds()) }
	for _, m := range r.t.reasons() {
		p("reason: %s", strings.Join(strings.Fields(m), " "))
	}
	if r.g == nil {
		return
	}
	var events []groupEvent
	for _, g := range r.groups() {
		events = append(events, g.noted()...)
	}
	slices.SortFunc(events, func(a, b groupEvent) int { return a.at.Compare(b.at) })
	for _, e := range events {
		p("step %s %s", rel(e.at), e.what)
	}
	if r.load != nil {
		acks := r.load.Acks()
		p("acks: %d, %d failed attempts, last error: %v", len(acks), r.load.Errors(), r.load.LastError())
		for _, s := range ackRuns(acks, 300*time.Millisecond) {
			p("acks %s..%s site%d ×%d ids %d..%d", rel(s.from), rel(s.to), s.target, s.n, s.firstID, s.lastID)
		}
	}
	lines := daemonEvidence(r.g.allLogs(), rel)
	if len(lines) > 80 {
		p("daemon: %d earlier lines left out", len(lines)-80)
		lines = lines[len(lines)-80:]
	}
	for _, l := range lines {
		p("daemon %s", l)
	}
	if st, err := r.g.status(); err == nil {
		p("status: active=%s epoch=%d reason=%s class=%s inFlight=%v diverged=%+v lastError=%q", st.ActiveSite, st.Epoch, st.Reason, st.Class, st.InFlight != nil, st.Diverged, st.LastError)
	} else {
		p("status: %v", err)
	}
	for i, m := range r.g.topo.Sites {
		p("site%d %s", i, serverEvidence(r.t, r.g.topo, m))
	}
}

// groups are the scenario's daemons' groups (one unless elected).
func (r *scenarioRun) groups() []*group {
	if len(r.elected) > 0 {
		return r.elected
	}
	return []*group{r.g}
}

// ackRun is a run of consecutive acknowledgements by one site with no gap
// longer than the split.
type ackRun struct {
	target          int
	n               int
	firstID, lastID int64
	from, to        time.Time
}

// ackRuns compresses the ack log into runs: a new run starts when the
// acknowledging site changes or after a gap longer than split.
func ackRuns(acks []testenv.Ack, split time.Duration) []ackRun {
	var out []ackRun
	for _, a := range acks {
		if n := len(out); n > 0 && out[n-1].target == a.Target && a.At.Sub(out[n-1].to) <= split {
			out[n-1].n++
			out[n-1].lastID, out[n-1].to = a.ID, a.At
			continue
		}
		out = append(out, ackRun{target: a.Target, n: 1, firstID: a.ID, lastID: a.ID, from: a.At, to: a.At})
	}
	return out
}

// evidenceMessages are the daemon's log messages the evidence keeps besides
// decisions, action.* and every warning or error.
var evidenceMessages = []string{"daemon.started", "daemon.stopped", "epoch.revoked", "failover.promoted", "site.fenced",
	"site.repointed", "follow.done", "follow.repaired", "reassert.restart_replicas", "leader.elected", "leader.lost"}

// daemonEvidence returns the daemon's decisions, actions and warnings from
// its JSON log, one line each.
func daemonEvidence(logs string, rel func(time.Time) string) []string {
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		msg, _ := l["msg"].(string)
		level, _ := l["level"].(string)
		if msg != "decision" && !strings.HasPrefix(msg, "action.") && level != "WARN" && level != "ERROR" && !slices.Contains(evidenceMessages, msg) {
			continue
		}
		if msg == "mysqlctl: driver" {
			continue // the MySQL driver's own noise about broken pooled connections
		}
		at := "?"
		if s, ok := l["time"].(string); ok {
			if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
				at = rel(ts)
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s %s", at, level, msg)
		keys := make([]string, 0, len(l))
		for k := range l {
			if k != "time" && k != "level" && k != "msg" && k != "group" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := fmt.Sprint(l[k])
			if v == "" || v == "<nil>" || v == "false" || (v == "0" && k == "epoch") {
				continue
			}
			fmt.Fprintf(&b, " %s=%q", k, v)
		}
		out = append(out, b.String())
	}
	return out
}

// serverEvidence is one server's state: down, paused, or its read_only,
// executed GTID set and replication.
func serverEvidence(t testing.TB, topo *testenv.Topology, m *testenv.Server) string {
	if !m.Running() {
		return "down"
	}
	if m.Paused() {
		return "paused (SIGSTOP)"
	}
	q := &quietT{TB: t}
	ro := m.QueryString(q, "SELECT @@global.read_only")
	sro := "n/a"
	if m.Engine == testenv.MySQL {
		sro = m.QueryString(q, "SELECT @@global.super_read_only")
	}
	executed := m.GTIDExecuted(q)
	rs := m.ReplicaStatus(q)
	repl := "not a replica"
	if len(rs) > 0 {
		source := rs["Master_Port"]
		for i, s := range topo.Sites {
			if fmt.Sprint(s.Port) == source {
				source = fmt.Sprintf("site%d", i)
			}
		}
		repl = fmt.Sprintf("replicates from %s io=%s sql=%s retrieved=%q io_error=%q sql_error=%q", source,
			rs["Slave_IO_Running"], rs["Slave_SQL_Running"], rs["Retrieved_Gtid_Set"]+rs["Gtid_IO_Pos"], rs["Last_IO_Error"], rs["Last_SQL_Error"])
	}
	out := fmt.Sprintf("read_only=%s super_read_only=%s executed=%q %s", ro, sro, executed, repl)
	if len(q.errs) > 0 {
		out += fmt.Sprintf(" (errors: %s)", strings.Join(q.errs, "; "))
	}
	return out
}

// printEvidence reports whether a scenario's evidence is printed even when
// it passed (FAILOVERD_E2E_EVIDENCE=1).
func printEvidence() bool { return os.Getenv("FAILOVERD_E2E_EVIDENCE") == "1" }
