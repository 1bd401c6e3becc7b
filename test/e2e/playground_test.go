package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/failoverd/failoverd/status"
	"github.com/failoverd/failoverd/test/testenv"
)

// The playground's options, after `-args` (make playground ARGS=...).
var (
	playInteractive = flag.Bool("interactive", false, "playground: leave everything running until Ctrl-C")
	playKube        = flag.Bool("with-kubernetes", false, "playground: also etcd and kube-apiserver, with a Service, node taints and a DNSEndpoint that follow the primary")
	playBinary      = flag.String("failoverd", "", "playground: the failoverd binary to show in the printed commands (default: the one this test built)")
	playReplication = flag.String("replication", "async", "playground: async (sites replicating from one primary) or group (a MySQL Group Replication group of 3 members: the group elects, failoverd follows)")
	playEngine      = flag.String("engine", "", "playground: the sites' engine, mariadb or mysql (default: mariadb when run by make playground, i.e. with -failoverd; otherwise every engine FAILOVERD_TEST_ENGINE selects)")
)

// TestPlayground is `make playground`: a real three-site group on
// loopback (MariaDB or, with ARGS=--engine=mysql, MySQL; semi-sync,
// read-only at boot), a Redis per site, a sidecar per site and the daemon,
// under a write load; then a scripted failover with its timeline, and the
// old primary coming back. Run without -v (make test) it is the CI check
// that the playground works on every engine: no acknowledged write lost.
func TestPlayground(t *testing.T) {
	switch *playReplication {
	case "group":
		if e := strings.ToLower(*playEngine); e != "" && e != string(testenv.MySQL) {
			t.Fatalf("-replication=group needs -engine=mysql (Group Replication is MySQL's), not %s", *playEngine)
		}
		playgroundGroupReplication(t)
		return
	case "async", "":
	default:
		t.Fatalf("-replication=%s: want async or group", *playReplication)
	}
	if *playEngine == "" && *playBinary == "" {
		testenv.ForEachEngine(t, playground) // make test
		return
	}
	e := testenv.Engine(strings.ToLower(*playEngine))
	if e == "" {
		e = testenv.MariaDB
	}
	if !e.Valid() {
		t.Fatalf("-engine=%s: want mariadb or mysql", *playEngine)
	}
	playground(t, e)
}

// playground is TestPlayground on engine e.
func playground(t *testing.T, e testenv.Engine) {
	server := map[testenv.Engine]string{testenv.MariaDB: "mariadbd", testenv.MySQL: "mysqld"}[e]
	engineName := map[testenv.Engine]string{testenv.MariaDB: "MariaDB", testenv.MySQL: "MySQL"}[e]
	out := io.Writer(os.Stdout)
	if !testing.Verbose() {
		out = io.Discard
	}
	say := func(format string, args ...any) { fmt.Fprintf(out, "playground: "+format+"\n", args...) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t.Cleanup(func() { say("stopped everything it started") })
	interrupted := func() bool {
		if ctx.Err() != nil {
			say("interrupted: tearing down")
			return true
		}
		return false
	}
	start := time.Now()
	// The write load's driver reports every connection the kill breaks.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))

	var kube *testenv.Kube
	if *playKube {
		say("starting etcd and kube-apiserver on 127.0.0.1 ...")
		kube = testenv.StartKube(t, testenv.KubeOptions{})
		createRoutingObjects(t, kube, 3)
		say("kube-apiserver up: Service mysql-primary, a Node per site, DNSEndpoint orders-db")
	}
	say("starting 3 %s sites (semi-sync, read-only at boot), a Redis per site and fault proxies ...", engineName)
	o := groupOptions{engine: e, sites: 3, cache: true, sidecars: true, fencing: "sidecar", kube: kube, cooldown: "1m"}
	if kube != nil {
		// A sidecar lease must outlast a change of leader on the Lease.
		o.lease = "6s"
	}
	g := newGroup(t, o)
	logPath := filepath.Join(g.dir, "failoverd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logFile.Close() })
	g.logTee = logFile
	say("sites up: %s", siteList(g))
	say("starting the daemon with the generated config %s", g.config)
	g.startDaemon()
	g.waitHealthy("site0", 30*time.Second)
	say("daemon adopted site0 as the primary; starting a sidecar per site ...")
	g.startSidecars()
	g.waitSidecarsRenewed()
	load := testenv.StartWriteLoad(t, testenv.AppDSNs(g.topo.Sites...), testenv.WriteLoadOptions{Workers: 2})
	load.WaitForAcks(t, 50, 20*time.Second)
	bin := *playBinary
	if bin == "" {
		bin = binary
	}
	say("ready in %.1fs; a write load runs against whichever site accepts writes", time.Since(start).Seconds())
	fmt.Fprintf(out, `
  watch it:    %s status -w --server http://%s
  status API:  curl -s http://%s/v1/groups
  metrics:     curl -s http://%s/metrics | grep ^failoverd_
  daemon log:  tail -f %s
  config:      %s

`, bin, g.listen, g.listen, g.listen, logPath, g.config)
	if _, table, _ := g.cli("status"); table != "" {
		fmt.Fprintln(out, indent(table))
	}
	if interrupted() {
		return
	}

	say("killing site0's %s (SIGKILL) under write load ...", server)
	acksBefore := len(load.Acked())
	killed := time.Now()
	g.kill(0)
	g.waitFor("a new primary", failoverTimeout, func() bool {
		st, err := g.status()
		return err == nil && st.ActiveSite != "" && st.ActiveSite != "site0" && st.InFlight == nil
	})
	st, _ := g.status()
	newIdx := siteIndex(st.ActiveSite)
	load.WaitForAcks(t, acksBefore+50, 30*time.Second)
	if kube != nil {
		g.waitFor("routing follows "+st.ActiveSite, 30*time.Second, func() bool {
			return serviceSelects(t, kube, st.ActiveSite) && !standby(t, kube, st.ActiveSite)
		})
	}
	g.waitFor("the cache follows "+st.ActiveSite, 30*time.Second, func() bool {
		// The daemon logs follow.done just after the cache's role changed:
		// wait for the line too, or the timeline may miss it.
		return g.caches[newIdx].Info(t, "replication")["role"] == "master" &&
			slices.ContainsFunc(timeline(g.logs.String(), killed, st.ActiveSite), func(e event) bool { return strings.Contains(e.what, "routing: cache follows") })
	})
	load.Stop()
	missing := load.Missing(t, g.topo.Sites[newIdx].AppDB(t))
	acked := load.Acked()
	var firstWrite time.Time
	for _, a := range load.Acks() {
		if a.Target == newIdx && a.At.After(killed) && (firstWrite.IsZero() || a.At.Before(firstWrite)) {
			firstWrite = a.At
		}
	}
	events := timeline(g.logs.String(), killed, st.ActiveSite)
	if !firstWrite.IsZero() {
		events = append(events, event{firstWrite, "first write acknowledged by " + st.ActiveSite})
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
	fmt.Fprintf(out, "\nplayground: timeline of the failover (from the SIGKILL)\n")
	fmt.Fprintf(out, "  %8s  site0 killed (SIGKILL)\n", "+0ms")
	for _, e := range events {
		fmt.Fprintf(out, "  %8s  %s\n", fmt.Sprintf("+%dms", e.at.Sub(killed).Milliseconds()), e.what)
	}
	fmt.Fprintf(out, "  acknowledged writes lost: %d (of %d acknowledged)\n\n", len(missing), len(acked))
	// The timeline the playground promises: every milestone is in it.
	for _, milestone := range []string{"detected:", "revoked:", "old primary fenced:", "promoted:", "routing: cache follows", "first write acknowledged"} {
		if !slices.ContainsFunc(events, func(e event) bool { return strings.Contains(e.what, milestone) }) {
			t.Errorf("the timeline lacks %q: %v", milestone, events)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d acknowledged writes missing on %s: %v", len(missing), st.ActiveSite, missing[:min(len(missing), 10)])
	}
	g.waitHealthyOrDegraded(st.ActiveSite)
	if _, table, _ := g.cli("status"); table != "" {
		fmt.Fprintln(out, indent(table))
	}
	if interrupted() {
		return
	}

	say("restarting site0: it comes back read-only, is fenced by its sidecar's view and rejoins as a replica ...")
	restarted := time.Now()
	if err := g.topo.Sites[0].Restart(ctx); err != nil {
		t.Fatalf("restart site0: %v", err)
	}
	// MariaDB (started with the semi-sync replica side on) truncates at
	// crash recovery the binlog tail no replica acknowledged, so the old
	// primary always rejoins. MySQL keeps that tail: when the kill caught a
	// commit waiting for its acknowledgement, site0 holds a transaction the
	// new primary lacks and is rightly marked diverged (every acknowledged
	// write is on the new primary: checked above). It stays fenced until a
	// human reclones it.
	var diverged *status.Divergence
	g.waitFor("site0 rejoins "+st.ActiveSite, 60*time.Second, func() bool {
		if g.follows(g.topo.Sites[0], g.topo.Sites[newIdx]) {
			return true
		}
		if e != testenv.MySQL {
			return false
		}
		now, err := g.status()
		for _, d := range now.Diverged {
			if err == nil && d.Site == "site0" {
				diverged = &d
				return true
			}
		}
		return false
	})
	if w := g.writable(); len(w) != 1 || w[0] != st.ActiveSite {
		t.Fatalf("writable sites %v after site0 came back, want only %s", w, st.ActiveSite)
	}
	if diverged != nil {
		say("site0 came back after %.1fs holding %d transaction(s) %s lacks (%s): the commit(s) in flight at the kill, never acknowledged "+
			"(MySQL's crash recovery keeps them in its binlog). It is marked diverged and stays fenced until a human reclones it (failoverd reclone); %s is the only writable site",
			time.Since(restarted).Seconds(), diverged.Transactions, st.ActiveSite, diverged.GTID, st.ActiveSite)
	} else {
		say("site0 replicates from %s again after %.1fs; %s is the only writable site", st.ActiveSite, time.Since(restarted).Seconds(), st.ActiveSite)
	}
	if *playInteractive {
		say("everything keeps running; try `%s switchover orders site0 --wait --token-file %s` (add --force within a minute of the failover: the playground's failoverCooldown); Ctrl-C stops it all",
			bin, filepath.Join(g.dir, "api.token"))
		<-ctx.Done()
		say("Ctrl-C: tearing down")
	}
}

type event struct {
	at   time.Time
	what string
}

// timeline picks the failover's milestones out of the daemon's JSON log
// lines after killed: detection, revoke, proof, promotion, routing.
func timeline(logs string, killed time.Time, target string) []event {
	var out []event
	seen := map[string]bool{}
	once := func(key string, at time.Time, what string) {
		if !seen[key] {
			seen[key] = true
			out = append(out, event{at, what})
		}
	}
	for _, line := range strings.Split(logs, "\n") {
		var l struct {
			Time                                 time.Time
			Msg, Site, To, Reason, Proof, Action string
			Follower                             string
			ActiveSite                           string `json:"active_site"`
			Epoch                                uint64
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Time.Before(killed) {
			continue
		}
		switch {
		case l.Msg == "site.state" && l.Site == "site0" && l.To == "unreachable":
			once("detected", l.Time, "detected: site0 unreachable")
		case l.Msg == "epoch.revoked":
			once("revoked", l.Time, fmt.Sprintf("epoch %d revoked: no site may accept writes", l.Epoch))
		case l.Msg == "decision" && l.Action == "promote":
			once("proof", l.Time, "old primary fenced: "+fenceWords(l.Proof))
		case l.Msg == "failover.promoted":
			once("promoted", l.Time, fmt.Sprintf("%s promoted: writable at epoch %d", target, l.Epoch))
		case l.Msg == "follow.done" && l.ActiveSite == target:
			once("follow "+l.Follower, l.Time, "routing: "+l.Follower+" follows "+target)
		}
	}
	return out
}

// fenceWords says how a fence proof fenced the old primary.
func fenceWords(proof string) string {
	switch proof {
	case "primary-down":
		return "its mysqld is down (refused every probe; the replicas lost it too)"
	case "fence-confirmed":
		return "read_only=ON read back"
	case "sidecar-fenced":
		return "its sidecar fenced it"
	case "lease-expired":
		return "its sidecar's lease expired"
	case "semisync":
		return "no replica can acknowledge its commits"
	}
	return proof
}

func siteList(g *group) string {
	var parts []string
	for _, m := range g.topo.Sites {
		parts = append(parts, m.String())
	}
	return strings.Join(parts, ", ")
}

func siteIndex(name string) int {
	var i int
	_, _ = fmt.Sscanf(name, "site%d", &i)
	return i
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}
