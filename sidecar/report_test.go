package sidecar

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestReportWireFormat pins the JSON keys of a Report (the daemon decodes
// reports into Report, rejecting unknown fields) and that what a sidecar
// sends decodes strictly back into a Report.
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

	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 4, "east"))
	h.step(t)
	h.step(t)
	h.daemon.mu.Lock()
	sent := h.daemon.bodies[len(h.daemon.bodies)-1]
	h.daemon.mu.Unlock()
	dec := json.NewDecoder(bytes.NewReader(sent))
	dec.DisallowUnknownFields()
	var got Report
	if err := dec.Decode(&got); err != nil || got.Epoch != 4 || got.Site != "east" {
		t.Errorf("sent report %s decodes strictly as %+v, %v", sent, got, err)
	}
}
