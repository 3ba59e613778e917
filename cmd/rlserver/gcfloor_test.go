package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, floor uint64
		want        int
	}{
		{4 * mib, 64 * mib, 1500},  // the next collection at 64 MiB
		{32 * mib, 64 * mib, 100},  // half the floor: Go's own growth
		{500 * mib, 64 * mib, 100}, // a large keyspace: Go's own growth
		{16 * mib, 64 * mib, 300},
		{0, 64 * mib, 1600}, // before the first collection: Go's minimum heap, 4 MiB × p/100, at the floor
		{1 * mib, 64 * mib, 1600},
		{1, 64 * mib, 1600},
		{1, 1 * mib, 100}, // a floor under Go's minimum heap: Go's own
	} {
		if got := gcPercentFor(tc.live, tc.floor); got != tc.want {
			t.Errorf("gcPercentFor(%d, %d) = %d, want %d", tc.live, tc.floor, got, tc.want)
		}
	}
}

// TestGCFloorFollowsCollections: the floor sets the percentage at start and
// after every collection, and stopping it restores what it found and stops
// adjusting.
func TestGCFloorFollowsCollections(t *testing.T) {
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)
	g := &gcFloor{floor: 1 << 40}
	stop := startGCFloorWith(g)
	if p := debug.SetGCPercent(-1); p <= 100 {
		t.Errorf("percentage at start %d, want above Go's 100 for a floor of 1 TiB", p)
	}
	debug.SetGCPercent(100)
	for i := 0; i < 50 && g.adjusted.Load() < 3; i++ {
		runtime.GC()
		runtime.Gosched() // let the finalizer goroutine run
	}
	if n := g.adjusted.Load(); n < 3 {
		t.Fatalf("%d adjustments after 50 collections", n)
	}
	if p := debug.SetGCPercent(100); p <= 100 {
		t.Errorf("percentage after a collection %d, want the floor's", p)
	}
	stop()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("percentage after stop %d, want the 100 found", p)
	}
	n := g.adjusted.Load()
	for range 5 {
		runtime.GC()
		runtime.Gosched()
	}
	if g.adjusted.Load() != n {
		t.Error("adjusted after stop")
	}
}
