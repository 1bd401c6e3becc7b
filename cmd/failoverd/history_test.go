package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/api"
	"github.com/failoverd/failoverd/status"
)

// historyControl answers the history of "orders": a request, a completed
// failover with its timeline, an abandoned switchover.
type historyControl struct{ statusOnly }

func (historyControl) History(group string) (status.History, error) {
	if group != "orders" {
		return status.History{}, fmt.Errorf("%w: unknown group %s", api.ErrNotFound, group)
	}
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	step := func(name string, ms int, prev int) status.TimelineStep {
		return status.TimelineStep{Step: name, At: at.Add(time.Duration(ms) * time.Millisecond),
			SincePreviousSeconds: float64(ms-prev) / 1000, SinceStartSeconds: float64(ms) / 1000}
	}
	return status.History{Group: "orders", At: at.Add(time.Hour), Entries: []status.HistoryEntry{
		{At: at.Add(-time.Minute), Action: &status.AuditEntry{At: at.Add(-time.Minute), Action: "acknowledge", By: "bob@ops", Result: "accepted"}},
		{At: at, Failover: &status.FailoverRecord{ID: "orders-7", Kind: "failover", From: "a", To: "b", RevokedEpoch: 7, Epoch: 8,
			Reason: "failover-revoke", Outcome: status.OutcomeCompleted, Proof: "semisync", PromotionGTID: "0-1-42",
			TookSeconds: 2.5, RevokedToWritableSeconds: 1.2,
			Timeline: []status.TimelineStep{{Step: "detected", At: at}, step("revoked", 15, 0), step("writable", 1215, 15), step("promoted", 2500, 1215)}}},
		{At: at.Add(time.Minute), Failover: &status.FailoverRecord{ID: "orders-9", Kind: "switchover", From: "b", To: "c", RevokedEpoch: 9, Epoch: 10,
			By: "ann@ops", Outcome: status.OutcomeAbandoned, Why: "target-lost: c was lost", TookSeconds: 10,
			Timeline: []status.TimelineStep{{Step: "requested", At: at.Add(time.Minute)}}}},
	}}, nil
}

// history: the table lists requests and actions oldest first, each action
// with its proof, GTID and timeline with durations; -o json is the API's
// document; no token is needed; unknown group exit 1, bad -o exit 2, no
// daemon exit 3.
func TestHistoryCommand(t *testing.T) {
	srv := httptest.NewServer(api.Handler(api.Options{Control: historyControl{}, Token: "tok"}))
	t.Cleanup(srv.Close)
	code, out, errOut := runCLI(t, "history", "orders", "--server", srv.URL)
	if code != 0 {
		t.Fatalf("history: exit %d %q", code, errOut)
	}
	want := []string{
		"HISTORY orders (oldest first): 2 failover(s) or switchover(s), 1 operator request(s)",
		"2026-11-22T11:59:00Z  request acknowledge by bob@ops: accepted",
		"2026-11-22T12:00:00Z  failover orders-7  a → b  completed at epoch 8 in 2.5s",
		"reason failover-revoke, revoked epoch 7, proof semisync, promotion GTID 0-1-42, revoked to writable 1.2s",
		"STEP", "detected", "12:00:00.000Z",
		"revoked   ", "12:00:00.015Z", "15ms",
		"writable", "1.2s", "1.215s",
		"promoted", "12:00:02.500Z", "1.285s", "2.5s",
		"switchover orders-9  b → c  ABANDONED at epoch 10 after 10s: target-lost: c was lost",
		"asked by ann@ops",
	}
	rest := out
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("history table lacks %q (in this order) in:\n%s", w, out)
		}
		rest = rest[i+len(w):]
	}

	t.Logf("failoverd history:\n%s", out)
	code, out, _ = runCLI(t, "history", "orders", "-o", "json", "--server", srv.URL)
	var h status.History
	if code != 0 || json.Unmarshal([]byte(out), &h) != nil || len(h.Entries) != 3 || h.Entries[1].Failover.Proof != "semisync" {
		t.Fatalf("history -o json: exit %d %s", code, out)
	}
	if code, out, _ := runCLI(t, "history", "orders", "-o", "yaml", "--server", srv.URL); code != 0 || !strings.Contains(out, "promotionGTID: 0-1-42") {
		t.Fatalf("history -o yaml: exit %d %s", code, out)
	}
	if code, _, errOut := runCLI(t, "history", "nope", "--server", srv.URL); code != 1 || !strings.Contains(errOut, "404") || !strings.Contains(errOut, "unknown group nope") {
		t.Fatalf("history of an unknown group: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "history", "orders", "-o", "xml", "--server", srv.URL); code != 2 || !strings.Contains(errOut, "-o") {
		t.Fatalf("history -o xml: exit %d %q", code, errOut)
	}
	if code, _, _ := runCLI(t, "history", "--server", srv.URL); code != 2 {
		t.Fatalf("history without a group: exit %d, want 2", code)
	}
	srv.Close()
	if code, _, errOut := runCLI(t, "history", "orders", "--server", srv.URL); code != 3 {
		t.Fatalf("history with no daemon: exit %d %q, want 3", code, errOut)
	}
}

// An empty history says so in one line.
func TestHistoryCommandEmpty(t *testing.T) {
	var b strings.Builder
	writeHistory(&b, status.History{Group: "orders"})
	if got := b.String(); got != "HISTORY orders: no failover, switchover or operator request recorded\n" {
		t.Fatalf("empty history: %q", got)
	}
}
