package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func fixedNow() time.Time { return t0 }

func sample(group string, epoch uint64) GroupState {
	return GroupState{
		Group: group, Epoch: epoch, ActiveSite: "east",
		LastFailover: &Failover{Kind: "failover", From: "west", To: "east", At: t0, Epoch: epoch, PromotionGTID: "0-1-42"},
		History:      []time.Time{t0.Add(-time.Hour), t0},
		Diverged:     map[string]string{"west": "0-2-7"},
		InFlight:     &InFlight{ID: "f1", Kind: "failover", From: "east", To: "west", Step: "fence", StartedAt: t0, RevokedAt: t0, RevokedEpoch: epoch},
	}
}

func TestFileRoundTripAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "state.json")
	f, err := OpenFile(path, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := f.Load(ctx, "orders"); err != nil || st.Exists || st.Group != "orders" {
		t.Fatalf("fresh Load = %+v, %v; want empty, not existing", st, err)
	}
	for _, g := range []string{"orders", "payments"} {
		if err := f.Save(ctx, sample(g, 7)); err != nil {
			t.Fatal(err)
		}
	}
	again, err := OpenFile(path, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	st, err := again.Load(ctx, "payments")
	if err != nil {
		t.Fatal(err)
	}
	want := sample("payments", 7)
	if !st.Exists || st.Epoch != 7 || st.ActiveSite != "east" || st.LastFailover.PromotionGTID != "0-1-42" ||
		st.InFlight.Step != "fence" || !st.InFlight.RevokedAt.Equal(t0) || st.Diverged["west"] != "0-2-7" ||
		len(st.History) != 2 || !st.UpdatedAt.Equal(t0) {
		t.Fatalf("reloaded state %+v differs from saved %+v", st, want)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temp files left behind: %v", entries)
	}
}

func TestFileRefusesEpochRegression(t *testing.T) {
	ctx := context.Background()
	f, err := OpenFile(filepath.Join(t.TempDir(), "state.json"), fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Save(ctx, sample("orders", 5)); err != nil {
		t.Fatal(err)
	}
	if err := f.Save(ctx, sample("orders", 4)); !errors.Is(err, ErrEpochRegression) {
		t.Fatalf("Save with lower epoch: %v, want ErrEpochRegression", err)
	}
	if st, _ := f.Load(ctx, "orders"); st.Epoch != 5 {
		t.Fatalf("epoch after refused save = %d, want 5", st.Epoch)
	}
}

func TestFileCorruptStopsStartupWithRecoveryAdvice(t *testing.T) {
	cases := map[string]string{
		"truncated json":  `{"version":1,"groups":{"orders":{"group":"ord`,
		"not json":        "epoch=7\n",
		"no version":      `{"groups":{}}`,
		"unknown field":   `{"version":1,"groups":{},"extra":true}`,
		"mismatched name": `{"version":1,"groups":{"orders":{"group":"payments","epoch":3}}}`,
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := OpenFile(path, fixedNow)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("OpenFile: %v, want ErrCorrupt", err)
			}
			for _, want := range []string{path, "restore the file from a backup", "move the file aside"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if b, _ := os.ReadFile(path); string(b) != content {
				t.Error("a corrupt state file was modified")
			}
		})
	}
}

func TestFileNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte(`{"version":99,"groups":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(path, fixedNow); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("OpenFile: %v, want ErrNewerSchema", err)
	}
}

func TestFileConcurrentGroups(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.json")
	f, err := OpenFile(path, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := string(rune('a' + i))
			for e := range uint64(20) {
				if err := f.Save(ctx, GroupState{Group: g, Epoch: e}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	again, err := OpenFile(path, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		st, _ := again.Load(ctx, string(rune('a'+i)))
		if st.Epoch != 19 {
			t.Errorf("group %c epoch %d, want 19", 'a'+i, st.Epoch)
		}
	}
}

func TestFileSaveHonoursCancelledContext(t *testing.T) {
	f, err := OpenFile(filepath.Join(t.TempDir(), "state.json"), fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Save(ctx, sample("orders", 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save: %v, want context.Canceled", err)
	}
}
