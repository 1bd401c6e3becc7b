package sim

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// envInt reads a numeric knob from the environment.
func envInt(t *testing.T, name string, def uint64) uint64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// TestSimulate runs SIM_SEEDS seeded histories (default 300) starting at
// SIM_FIRST (default 1), then SIM_SIDECAR_SEEDS more (default a third as
// many) with a sidecar beside every site, across GOMAXPROCS workers;
// SIM_SEED=n replays one seed verbosely (SIM_SIDECARS=1: its sidecar
// history). A failure prints the seed and its shrunk fault schedule.
func TestSimulate(t *testing.T) {
	if v := os.Getenv("SIM_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SIM_SEED=%q: %v", v, err)
		}
		o := Options{Sidecars: os.Getenv("SIM_SIDECARS") == "1", Verbose: true}
		r := Run(seed, nil, o)
		fmt.Printf("stats: %+v\n", r.Stats)
		if r.Failure != "" {
			o.Verbose = false
			t.Fatalf("seed %d: %s\nshrunk schedule: %#v", seed, r.Failure, Shrink(seed, r.Schedule, o))
		}
		return
	}
	n := envInt(t, "SIM_SEEDS", 300)
	first := envInt(t, "SIM_FIRST", 1)
	simulate(t, first, n, Options{})
	simulate(t, first, envInt(t, "SIM_SIDECAR_SEEDS", max(1, n/3)), Options{Sidecars: true})
}

// simulate runs n histories from seed first with o and reports failures.
func simulate(t *testing.T, first, n uint64, o Options) {
	start := time.Now()
	seeds := make(chan uint64)
	var mu sync.Mutex
	var failed []Result
	var total Stats
	ends := map[string]int{}
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for seed := range seeds {
				r := Run(seed, nil, o)
				mu.Lock()
				if r.Failure != "" {
					failed = append(failed, r)
				}
				total.Failovers += r.Stats.Failovers
				total.Switchovers += r.Stats.Switchovers
				total.Reasserts += r.Stats.Reasserts
				total.Acks += r.Stats.Acks
				total.DaemonCrashes += r.Stats.DaemonCrashes
				total.HolderWaits += r.Stats.HolderWaits
				ends[string(r.Stats.EndReason)]++
				mu.Unlock()
			}
		})
	}
	for s := first; s < first+n; s++ {
		seeds <- s
	}
	close(seeds)
	wg.Wait()
	var endList []string
	for k, v := range ends {
		endList = append(endList, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(endList)
	kind, replay := "seeds", ""
	if o.Sidecars {
		kind, replay = "seeds with sidecars", "SIM_SIDECARS=1 "
	}
	t.Logf("%d %s (%d..%d) in %v: %d failovers, %d switchovers, %d re-assertions, %d acknowledged writes, %d daemon crashes, %d waits for an unreachable acknowledgement holder; end states: %s",
		n, kind, first, first+n-1, time.Since(start).Round(time.Millisecond), total.Failovers, total.Switchovers, total.Reasserts,
		total.Acks, total.DaemonCrashes, total.HolderWaits, strings.Join(endList, " "))
	sort.Slice(failed, func(i, j int) bool { return failed[i].Seed < failed[j].Seed })
	for i, r := range failed {
		if i >= 5 {
			t.Errorf("... and %d more failing %s", len(failed)-5, kind)
			break
		}
		shrunk := Shrink(r.Seed, r.Schedule, o)
		t.Errorf("seed %d failed: %s\nreplay: %sSIM_SEED=%d make sim\nshrunk schedule: %#v\nshrunk failure: %s\ntrace (end):\n%s",
			r.Seed, r.Failure, replay, r.Seed, shrunk, Run(r.Seed, shrunk, o).Failure, strings.Join(r.Trace, "\n"))
	}
}
