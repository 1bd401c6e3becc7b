package sidecar

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/failoverd/failoverd/view"
)

// TestSentReportDecodesStrictly: what a sidecar sends decodes back into a
// view.Report with unknown fields rejected, as the daemon decodes it (the
// keys themselves are pinned by view's TestReportWireFormat).
func TestSentReportDecodesStrictly(t *testing.T) {
	h := newHarness(t, nil)
	h.daemon.answer(sign(t, 4, "east"))
	h.step(t)
	h.step(t)
	h.daemon.mu.Lock()
	sent := h.daemon.bodies[len(h.daemon.bodies)-1]
	h.daemon.mu.Unlock()
	dec := json.NewDecoder(bytes.NewReader(sent))
	dec.DisallowUnknownFields()
	var got view.Report
	if err := dec.Decode(&got); err != nil || got.Epoch != 4 || got.Site != "east" {
		t.Errorf("sent report %s decodes strictly as %+v, %v", sent, got, err)
	}
}
