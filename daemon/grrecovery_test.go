package daemon

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/store"
)

// Recovery of a group that lost its majority is a human's, on a plan the
// daemon proves: refused while the group has quorum; without the
// confirmation token it answers the plan (survivors, members left out) and
// its token and runs nothing; with it, group_replication_force_members
// runs on the survivor with the survivors' group addresses, the majority
// is taken of them from then on, and the next round follows the forced
// group's primary.
func TestGroupReplicationForceMembersNeedsItsTokenAndAProvableSurvivor(t *testing.T) {
	fg := newFakeGroup()
	h, _ := grHarness(t, fg, newTestStore(t))
	grRound(t, h)
	lead := func() (context.Context, time.Time, bool) { return context.Background(), t0, true }
	if err := h.g.handle(request{kind: kindForceMembers, target: "c", by: "ann"}, lead); !errors.Is(err, ErrRefused) ||
		!strings.Contains(err.Error(), string(sitepair.RecoveryGroupHasQuorum)) {
		t.Fatalf("force-members with quorum = %v, want refused (%s)", err, sitepair.RecoveryGroupHasQuorum)
	}
	fg.mu.Lock()
	for _, s := range []string{"a", "b"} {
		fg.down[s], fg.unreachable[s] = true, true
	}
	fg.mu.Unlock()
	grRound(t, h)
	err := h.g.handle(request{kind: kindForceMembers, target: "c", token: "not-the-token", by: "ann"}, lead)
	m := regexp.MustCompile(`confirmation token ([0-9a-f]{12})`).FindStringSubmatch(fmt.Sprint(err))
	if !errors.Is(err, ErrRefused) || m == nil || !strings.Contains(err.Error(), "left out: a, b") {
		t.Fatalf("force-members without the token = %v, want refused with the plan and its token", err)
	}
	if w := writesRun(fg.ops); len(w) > 0 {
		t.Fatalf("a refused recovery ran %v", w)
	}
	if err := h.g.handle(request{kind: kindForceMembers, target: "c", token: m[1], by: "ann"}, lead); err != nil {
		t.Fatalf("force-members with the token: %v", err)
	}
	if w := writesRun(fg.ops); len(w) != 1 || w[0] != "c:force-members 127.0.0.1:3306c" {
		t.Fatalf("statements %v, want force_members of c alone on c", w)
	}
	if d := grRound(t, h); d.Reason != sitepair.ReasonGroupPrimaryElected || d.Target != "c" || h.State().ActiveSite != "c" {
		t.Fatalf("after forcing: %s, active %s; want routing on c", d, h.State().ActiveSite)
	}
	if gr := h.g.snapshot(t0).GroupReplication; gr == nil || !gr.HasQuorum || gr.Denominator != 1 {
		t.Fatalf("status %+v, want quorum of the one survivor", gr)
	}
	var audited bool
	for _, e := range h.g.history(t0).Entries {
		if a := e.Action; a != nil && a.Action == kindForceMembers && a.By == "ann" && strings.HasPrefix(a.Result, store.AuditAccepted) {
			audited = true
		}
	}
	if !audited {
		t.Fatal("the forced membership is not in the history")
	}
}

// Re-bootstrapping after a total outage is a human's, on a plan the daemon
// proves: refused while the group runs, while a member is unreached, and
// from a member whose GTID set lacks another's (naming the one to choose);
// without the confirmation token it answers the plan and runs nothing; with
// it, the dominant member bootstraps the group, the others start Group
// Replication after it (in that order, nothing else runs), it is audited,
// and the next round follows the new group's primary at a new epoch with
// the majority taken of every configured member again.
func TestGroupReplicationBootstrapNeedsEveryMemberStoppedAndItsToken(t *testing.T) {
	fg := newFakeGroup()
	h, _ := grHarness(t, fg, newTestStore(t))
	grRound(t, h)
	lead := func() (context.Context, time.Time, bool) { return context.Background(), t0, true }
	bootstrap := func(site, token string) error {
		return h.g.handle(request{kind: kindBootstrapGroup, target: site, token: token, by: "ann"}, lead)
	}
	if err := bootstrap("b", ""); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), string(sitepair.RecoveryGroupHasQuorum)) {
		t.Fatalf("bootstrap of a running group = %v, want refused (%s)", err, sitepair.RecoveryGroupHasQuorum)
	}
	// The total outage: every member restarted, its Group Replication
	// stopped; b holds the most transactions, a is still down.
	fg.mu.Lock()
	for _, s := range grSites {
		fg.offline[s] = true
	}
	fg.down["a"] = true
	fg.executed["a"] = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-9"
	fg.executed["b"] = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-12"
	fg.executed["c"] = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-11"
	fg.mu.Unlock()
	if d := grRound(t, h); d.Reason != sitepair.ReasonGroupNoQuorum || h.State().ActiveSite != "a" {
		t.Fatalf("after the outage: %s, active %s; want group-no-quorum, routing kept", d, h.State().ActiveSite)
	}
	if err := bootstrap("b", ""); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), string(sitepair.BootstrapMemberUnreachable)) {
		t.Fatalf("bootstrap with a unreached = %v, want refused (%s)", err, sitepair.BootstrapMemberUnreachable)
	}
	fg.mu.Lock()
	fg.down["a"] = false
	fg.mu.Unlock()
	if err := bootstrap("c", ""); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), string(sitepair.BootstrapMemberBehind)) ||
		!strings.Contains(err.Error(), "bootstrap b instead") {
		t.Fatalf("bootstrap of c = %v, want refused (%s) naming b", err, sitepair.BootstrapMemberBehind)
	}
	err := bootstrap("b", "not-the-token")
	m := regexp.MustCompile(`confirmation token ([0-9a-f]{12})`).FindStringSubmatch(fmt.Sprint(err))
	if !errors.Is(err, ErrRefused) || m == nil || !strings.Contains(err.Error(), "starts Group Replication on a, c") {
		t.Fatalf("bootstrap without the token = %v, want refused with the plan and its token", err)
	}
	if w := writesRun(fg.ops); len(w) > 0 {
		t.Fatalf("a refused bootstrap ran %v", w)
	}
	if err := bootstrap("b", m[1]); err != nil {
		t.Fatalf("bootstrap with the token: %v", err)
	}
	if w, want := writesRun(fg.ops), []string{"b:bootstrap-group", "a:start-group-replication", "c:start-group-replication"}; !slices.Equal(w, want) {
		t.Fatalf("statements %v, want %v", w, want)
	}
	epoch := h.State().Epoch
	if d := grRound(t, h); d.Reason != sitepair.ReasonGroupPrimaryElected || d.Target != "b" || h.State().ActiveSite != "b" || h.State().Epoch != epoch+1 {
		t.Fatalf("after the bootstrap: %s, active %s; want routing on b at a new epoch", d, h.State().ActiveSite)
	}
	if gr := h.g.snapshot(t0).GroupReplication; gr == nil || !gr.HasQuorum || gr.Denominator != 3 {
		t.Fatalf("status %+v, want quorum of the three members", gr)
	}
	var audited bool
	for _, e := range h.g.history(t0).Entries {
		if a := e.Action; a != nil && a.Action == kindBootstrapGroup && a.By == "ann" && strings.HasPrefix(a.Result, store.AuditAccepted) {
			audited = true
		}
	}
	if !audited {
		t.Fatal("the bootstrap is not in the history")
	}
}

// A joiner that fails to start does not stop the others; the answer names
// it and says the group is bootstrapped, so the human starts it by hand.
func TestGroupReplicationBootstrapReportsAMemberThatDidNotJoin(t *testing.T) {
	fg := newFakeGroup()
	h, _ := grHarness(t, fg, newTestStore(t))
	grRound(t, h)
	fg.mu.Lock()
	for _, s := range grSites {
		fg.offline[s] = true
	}
	fg.startErr["a"] = errors.New("Error 3092: The server is not configured properly")
	fg.mu.Unlock()
	grRound(t, h)
	lead := func() (context.Context, time.Time, bool) { return context.Background(), t0, true }
	err := h.g.handle(request{kind: kindBootstrapGroup, target: "b", by: "ann"}, lead)
	m := regexp.MustCompile(`confirmation token ([0-9a-f]{12})`).FindStringSubmatch(fmt.Sprint(err))
	if m == nil {
		t.Fatalf("bootstrap without the token = %v, want the plan's token", err)
	}
	err = h.g.handle(request{kind: kindBootstrapGroup, target: "b", token: m[1], by: "ann"}, lead)
	if err == nil || !strings.Contains(err.Error(), "bootstrapped on b") || !strings.Contains(err.Error(), "a: ") {
		t.Fatalf("bootstrap with a failing joiner = %v, want the group bootstrapped and a named", err)
	}
	if w, want := writesRun(fg.ops), []string{"b:bootstrap-group", "a:start-group-replication", "c:start-group-replication"}; !slices.Equal(w, want) {
		t.Fatalf("statements %v, want %v", w, want)
	}
	if d := grRound(t, h); d.Target != "b" || h.State().ActiveSite != "b" {
		t.Fatalf("with b and c in the group: %s; want routing on b", d)
	}
}
