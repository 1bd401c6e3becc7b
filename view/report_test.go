package view

import (
	"encoding/json"
	"testing"
)

// TestReportWireFormat pins the JSON keys of a Report: the daemon decodes
// reports into Report rejecting unknown fields, so a renamed key would make
// every report of a sidecar of another release malformed.
func TestReportWireFormat(t *testing.T) {
	r := Report{
		Group: "orders", Site: "east", Epoch: 7, MySQLdUp: true, Writable: true, Fenced: true, FencedEpoch: 6,
		Executed: "0-1-42", CanKill: true, LeaseRemainingMs: -5,
		Peers: map[string]PeerServed{"west": {ServedEpoch: 7, ServedAgoMs: 120}},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"group":"orders","site":"east","epoch":7,"mysqldUp":true,"writable":true,"fenced":true,"fencedEpoch":6,` +
		`"executed":"0-1-42","canKill":true,"leaseRemainingMs":-5,"peers":{"west":{"servedEpoch":7,"servedAgoMs":120}}}`
	if string(b) != want {
		t.Errorf("report encodes as\n%s\nwant\n%s", b, want)
	}
	full := Report{Nonce: "n", Boot: "b", Echo: "e", MySQLdDown: true, MySQLdExit: &MySQLdExit{PID: 42, StartTicks: 9, AgoMs: 3}}
	b, err = json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	const wantOptional = `{"group":"","site":"","nonce":"n","boot":"b","echo":"e","epoch":0,"mysqldUp":false,"mysqldDown":true,` +
		`"writable":false,"fenced":false,"fencedEpoch":0,"executed":"","canKill":false,"leaseRemainingMs":0,` +
		`"mysqldExit":{"pid":42,"startTicks":9,"agoMs":3},"peers":null}`
	if string(b) != wantOptional {
		t.Errorf("report with its optional fields encodes as\n%s\nwant\n%s", b, wantOptional)
	}
	if ReportPath != "/v1/sidecar/report" || SignatureHeader != "X-Failoverd-Signature" {
		t.Errorf("report path %q, signature header %q changed: sidecars of another release no longer reach the daemon", ReportPath, SignatureHeader)
	}
}
