package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// The garbage collector's floor.
//
// Go's collector runs when the heap has grown by GOGC percent (100) of what
// was live after the last collection. rlserver's live heap is small until
// it holds many keys (a few MiB at start), while a front end that
// allocates per request — the gRPC server decoding headers and
// descriptors, a Lua script's values — makes garbage at tens of MiB a
// second: the collector then runs dozens of times a second, and each run
// stops every goroutine twice and takes CPU from the requests. Measured
// with bench/grpcload on the gRPC front end: about 40 collections a second
// and 3% of the wall time stopped, p99 5.6–6.9 ms; with collections about
// once a second, p99 3.5–4.1 ms and a fifth less CPU per call.
//
// So, unless the operator set GOGC, the collector's percentage is set
// after every collection so that the next one comes when the heap reaches
// at least --gc-min-heap: a heap of live data L gets a percentage of
// floor/L − 1, and never less than 100, Go's own. A large keyspace (L past
// half the floor) is collected as Go does by default. GOMEMLIMIT still
// bounds the heap: the runtime collects earlier when near it.

// gcFloor adjusts the collector's percentage after every collection (see
// above) until stopped.
type gcFloor struct {
	floor    uint64        // bytes
	adjusted atomic.Uint64 // collections seen, for tests

	mu      sync.Mutex // orders adjust and stop: nothing is set after stop
	stopped bool
	sample  []metrics.Sample
}

// gcPercentFor returns the collector's percentage for a live heap of live
// bytes, so that the next collection comes at floor bytes, or at Go's
// default growth once the heap is past half the floor.
//
// Go's goal for the next collection is the larger of live × (1 + p/100)
// and its minimum heap, 4 MiB × p/100 (which keeps a tiny heap from being
// collected constantly): p is bounded so that neither passes the floor.
func gcPercentFor(live, floor uint64) int {
	const goDefault, goMinimumHeap = 100, 4 << 20
	p := float64(floor) * 100 / goMinimumHeap
	if live > 0 {
		p = math.Min(p, float64(floor)/float64(live)*100-100)
	}
	return int(math.Max(goDefault, p))
}

// startGCFloor installs the floor and returns the function that removes it
// (restoring the percentage found). It does nothing when floor is 0.
func startGCFloor(floor uint64) (stop func()) {
	if floor == 0 {
		return func() {}
	}
	return startGCFloorWith(&gcFloor{floor: floor})
}

// startGCFloorWith is startGCFloor with g's floor.
func startGCFloorWith(g *gcFloor) (stop func()) {
	g.sample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	was := debug.SetGCPercent(g.percent())
	g.arm()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.stopped = true
		debug.SetGCPercent(was)
	}
}

// percent reads the live heap and returns the percentage for it. The
// caller holds mu, or is the only one using g.
func (g *gcFloor) percent() int {
	metrics.Read(g.sample)
	var live uint64
	if g.sample[0].Value.Kind() == metrics.KindUint64 {
		live = g.sample[0].Value.Uint64()
	}
	return gcPercentFor(live, g.floor)
}

// arm makes the next collection call adjust: a finalizer runs after the
// collection that found its object unreachable, and re-arms itself.
func (g *gcFloor) arm() {
	sentinel := new([16]byte)
	runtime.SetFinalizer(sentinel, func(*[16]byte) { g.adjust() })
}

func (g *gcFloor) adjust() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	g.adjusted.Add(1)
	debug.SetGCPercent(g.percent())
	g.arm()
}
