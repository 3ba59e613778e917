package records

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/rlserver/rlserver/internal/algorithms"
)

var tableAlgs = []algorithms.Algorithm{algorithms.TokenBucket, algorithms.LeakyBucket,
	algorithms.FixedWindow, algorithms.SlidingCounter}

// randomState returns a valid state of alg with fields spread over their
// ranges, extremes included.
func randomState(rng *rand.Rand, alg algorithms.Algorithm) algorithms.State {
	pick := func(limit int64) int64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return limit
		}
		return rng.Int64N(limit) // below the limit: limit+1 may overflow
	}
	st := algorithms.State{Stamp: pick(math.MaxInt64), Count: pick(algorithms.MaxLimit)}
	switch alg {
	case algorithms.TokenBucket, algorithms.LeakyBucket:
		st.Aux = pick(algorithms.MaxWindow - 1)
	case algorithms.SlidingCounter:
		st.Aux = pick(algorithms.MaxLimit)
	}
	return st
}

// randomKey returns one of a bounded set of keys, inline and long, the
// empty key and keys at the inline boundary among them.
func randomKey(rng *rand.Rand) string {
	n := rng.IntN(400)
	switch n % 5 {
	case 0:
		return strconv.Itoa(n)
	case 1:
		return fmt.Sprintf("tb:%012d", n) // 15 bytes: the longest inline key
	case 2:
		return fmt.Sprintf("tb:%013d", n) // 16 bytes: the shortest long key
	case 3:
		return fmt.Sprintf("user:%d:%0*d", n, n%90, 0)
	}
	if n == 4 {
		return ""
	}
	return fmt.Sprintf("k%d", n)
}

// same compares two states without logs.
func same(a, b algorithms.State) bool {
	return a.Stamp == b.Stamp && a.Count == b.Count && a.Aux == b.Aux && a.Log == nil && b.Log == nil
}

// check compares t against the model: every key held with its state, Len,
// and a walk with Next visiting exactly the model's keys.
func check(t *testing.T, step int, tb *Table, model map[string]algorithms.State) {
	t.Helper()
	if tb.Len() != len(model) {
		t.Fatalf("step %d: Len %d, model %d", step, tb.Len(), len(model))
	}
	seen := 0
	for i, ok := tb.Next(0); ok; i, ok = tb.Next(i + 1) {
		key := string(tb.Key(i))
		want, held := model[key]
		if !held {
			t.Fatalf("step %d: walk found %q, not in the model", step, key)
		}
		if got := tb.State(i); !same(got, want) {
			t.Fatalf("step %d: %q holds %+v, want %+v", step, key, got, want)
		}
		if j, ok := tb.LookupString(key); !ok || j != i {
			t.Fatalf("step %d: lookup of %q gives %d %v, walk %d", step, key, j, ok, i)
		}
		seen++
	}
	if seen != len(model) {
		t.Fatalf("step %d: walk visited %d keys, model holds %d", step, seen, len(model))
	}
	if tb.old.tags == nil && tb.idx.used < tb.n || tb.idx.used*8 > len(tb.idx.tags)*7 {
		t.Fatalf("step %d: %d slots used for %d keys of %d slots", step, tb.idx.used, tb.n, len(tb.idx.tags))
	}
}

// TestTableAgainstModel runs random inserts, lookups (each after a Touch),
// updates and deletes on a table and on a Go map, over enough keys to grow the index, rebuild
// it over tombstones, and compact the arena, and compares them throughout.
func TestTableAgainstModel(t *testing.T) {
	for _, alg := range tableAlgs {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(alg), 18))
			tb := New(alg)
			model := map[string]algorithms.State{}
			for step := range 20000 {
				key := randomKey(rng)
				tb.Touch([]byte(key)) // reads ahead; must change nothing
				i, held := tb.LookupString(key)
				if _, want := model[key]; held != want {
					t.Fatalf("step %d: lookup of %q: %v, model %v", step, key, held, want)
				}
				switch op := rng.IntN(10); {
				case !held && op < 6:
					st := randomState(rng, alg)
					if i = tb.Insert([]byte(key), st); string(tb.Key(i)) != key {
						t.Fatalf("step %d: inserted %q, record %d holds %q", step, key, i, tb.Key(i))
					}
					model[key] = st
				case held && op < 4:
					st := randomState(rng, alg)
					tb.SetState(i, st)
					model[key] = st
				case held:
					tb.Delete(i)
					delete(model, key)
				}
				if step%997 == 0 {
					check(t, step, tb, model)
				}
				if step == 10000 { // empty it: the index and the arena shrink
					for k := range model {
						j, _ := tb.LookupString(k)
						tb.Delete(j)
						delete(model, k)
					}
					check(t, step, tb, model)
				}
			}
			check(t, -1, tb, model)
		})
	}
}

// TestGrowthMovesKeysGradually: when the index grows, each insert moves
// only migrateStep of the old slots (no insert waits for every key to be
// hashed again), every key stays found throughout, and the move ends
// before the new index is full in turn.
func TestGrowthMovesKeysGradually(t *testing.T) {
	tb := New(algorithms.FixedWindow)
	model := map[string]algorithms.State{}
	grows := 0
	for k := range 200_000 {
		key := "k" + strconv.Itoa(k)
		moving, moved, size := tb.old.tags != nil, tb.moved, len(tb.idx.tags)
		if tb.idx.full() && moving {
			t.Fatalf("key %d: the index is full while the last growth is still moving keys", k)
		}
		tb.Insert([]byte(key), algorithms.State{Stamp: int64(k)})
		model[key] = algorithms.State{Stamp: int64(k)}
		switch {
		case len(tb.idx.tags) != size:
			grows++
			if tb.moved > migrateStep {
				t.Fatalf("key %d: growing moved %d slots at once", k, tb.moved)
			}
		case moving && tb.old.tags != nil && tb.moved-moved > migrateStep:
			t.Fatalf("key %d: one insert moved %d slots", k, tb.moved-moved)
		}
		if tb.old.tags != nil && k%1000 == 0 {
			check(t, k, tb, model) // every key found mid-move
		}
	}
	if grows < 10 {
		t.Fatalf("%d growths in 200,000 keys", grows)
	}
	check(t, -1, tb, model)
	for range len(tb.old.tags)/maintainStep + 1 { // no more keys: ticks end the move
		tb.Maintain()
	}
	if tb.old.tags != nil {
		t.Fatalf("the old index is still held after Maintain")
	}
	check(t, -2, tb, model)
}

// TestCompaction fills the arena with long keys and deletes most of them:
// the compaction that follows moves at most compactStep records a call,
// every key stays found with its state throughout (keys inserted and deleted
// meanwhile included), Maintain finishes it, and the arenas shrink.
func TestCompaction(t *testing.T) {
	tb := New(algorithms.TokenBucket)
	model := map[string]algorithms.State{}
	rng := rand.New(rand.NewPCG(1, 2))
	key := func(n int) string { return fmt.Sprintf("a-long-key-for-the-arena:%08d", n) }
	for n := range 5000 {
		st := randomState(rng, algorithms.TokenBucket)
		tb.Insert([]byte(key(n)), st)
		model[key(n)] = st
	}
	arenaBytes := func() int { return tb.arenas[0].bytes + tb.arenas[1].bytes }
	full := arenaBytes()
	compactions := 0
	for n := range 5000 {
		if n%10 == 0 {
			continue
		}
		was, before := tb.compacting, tb.cursor
		i, _ := tb.LookupString(key(n))
		tb.Delete(i)
		delete(model, key(n))
		if n%3 == 0 { // keys come and go during the compaction too
			k := key(10000 + n)
			st := randomState(rng, algorithms.TokenBucket)
			tb.Insert([]byte(k), st)
			model[k] = st
		}
		switch {
		case !was && tb.compacting:
			compactions++
			fallthrough
		case tb.compacting:
			if was && tb.cursor-before > 2*compactStep {
				t.Fatalf("delete %d moved the compaction %d records on", n, tb.cursor-before)
			}
		}
		if tb.compacting && n%97 == 0 {
			check(t, n, tb, model)
		}
	}
	if compactions == 0 {
		t.Fatal("no compaction started")
	}
	for tb.compacting {
		tb.Maintain()
	}
	live := 0
	for k := range model {
		live += len(k)
	}
	a := tb.arenas[tb.cur]
	if tb.arenas[1-tb.cur].blocks != nil || a.bytes-tb.garbage[tb.cur] != live ||
		tb.garbage[tb.cur] > max(minArenaWork, a.bytes/2) || arenaBytes() >= full {
		t.Fatalf("arenas %d and %d bytes (garbage %v) holding %d bytes of live keys, after deleting 90%% of %d",
			tb.arenas[0].bytes, tb.arenas[1].bytes, tb.garbage, live, full)
	}
	check(t, -1, tb, model)
}

// TestIndicesStayAndAreReused checks the promises the timing wheel and
// snapshots rely on: a live record keeps its index through other keys'
// inserts, deletes and index rebuilds, and a deleted index is handed out
// again before fresh ones.
func TestIndicesStayAndAreReused(t *testing.T) {
	tb := New(algorithms.FixedWindow)
	keep := tb.Insert([]byte("kept"), algorithms.State{Stamp: 7, Count: 3})
	var idx []uint32
	for n := range 3000 {
		idx = append(idx, tb.Insert([]byte(strconv.Itoa(n)), algorithms.State{}))
	}
	for _, i := range idx[:2000] {
		tb.Delete(i)
	}
	if i, ok := tb.LookupString("kept"); !ok || i != keep || !same(tb.State(i), algorithms.State{Stamp: 7, Count: 3}) {
		t.Fatalf("kept key moved or changed: %d %v", i, ok)
	}
	top := tb.Top()
	for n := range 2000 {
		tb.Insert([]byte("again"+strconv.Itoa(n)), algorithms.State{})
	}
	if tb.Top() != top {
		t.Fatalf("2000 inserts after 2000 deletes grew the records from %d to %d", top, tb.Top())
	}
}

// TestSetStateRefusesWhatDoesNotFit: a state no record can hold is a bug in
// the caller, and must not be stored truncated.
func TestSetStateRefusesWhatDoesNotFit(t *testing.T) {
	for _, c := range []struct {
		alg algorithms.Algorithm
		st  algorithms.State
	}{
		{algorithms.TokenBucket, algorithms.State{Count: math.MaxUint32 + 1}},
		{algorithms.TokenBucket, algorithms.State{Count: -1}},
		{algorithms.FixedWindow, algorithms.State{Aux: 1}},
		{algorithms.SlidingCounter, algorithms.State{Aux: math.MaxUint32 + 1}},
		{algorithms.LeakyBucket, algorithms.State{Log: []int64{1}}},
	} {
		tb := New(c.alg)
		i := tb.Insert([]byte("k"), algorithms.State{})
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: %+v stored", c.alg, c.st)
				}
			}()
			tb.SetState(i, c.st)
		}()
	}
}

// TestSmallTableIsSmall: a rule with a few keys on a shard costs a few
// hundred bytes there, not a whole chunk of records.
func TestSmallTableIsSmall(t *testing.T) {
	tb := New(algorithms.TokenBucket)
	for k := range 3 {
		tb.Insert([]byte(strconv.Itoa(k)), algorithms.State{})
	}
	if n := tb.MemoryBytes(); n > 512 {
		t.Fatalf("3 keys take %d bytes", n)
	}
}

// TestChunksFillPages: a chunk of records is allocated in whole pages, so
// its size must be a multiple of a page for no byte to be wasted.
func TestChunksFillPages(t *testing.T) {
	for _, alg := range tableAlgs {
		if n := Stride(alg) * chunkLen; n%pageSize != 0 {
			t.Errorf("%s: a chunk of %d records of %d bytes is %d bytes, %d past a whole page",
				alg, chunkLen, Stride(alg), n, n%pageSize)
		}
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	tb := New(algorithms.TokenBucket)
	short, long := []byte("tb:000000012345"), []byte("a key longer than fifteen bytes")
	tb.Insert(short, algorithms.State{})
	tb.Insert(long, algorithms.State{})
	allocs := testing.AllocsPerRun(100, func() {
		tb.Touch(long)
		i, _ := tb.Lookup(short)
		j, _ := tb.Lookup(long)
		tb.SetState(i, tb.State(j))
		tb.LookupString("absent")
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per lookup", allocs)
	}
}

// heapBytes returns the bytes of live heap objects after a collection.
func heapBytes() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// benchmarkKeys inserts n keys shaped as the benchmark harness's
// ("tb:" and 12 digits) into one table per algorithm and reports the heap's
// growth per key (live heap after a collection, runtime/metrics), the
// table's own count, and the slowest insert: one that rebuilt the index,
// hashing every key again, which a shard's decisions wait for.
func benchmarkKeys(b *testing.B, n int) {
	for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.FixedWindow, algorithms.SlidingCounter} {
		b.Run(alg.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				before := heapBytes()
				tb := New(alg)
				var slowest time.Duration // an insert that rebuilt the index
				key := []byte("tb:000000000000")
				for k := range n {
					for j, d := 14, k; j >= 3; j-- { // zero-padded, in place
						key[j] = byte('0' + d%10)
						d /= 10
					}
					start := time.Now()
					tb.Insert(key, algorithms.State{Stamp: int64(k), Count: 1})
					slowest = max(slowest, time.Since(start))
				}
				b.ReportMetric(float64(heapBytes()-before)/float64(n), "bytes/key")
				b.ReportMetric(float64(tb.MemoryBytes())/float64(n), "table-bytes/key")
				b.ReportMetric(float64(slowest.Microseconds())/1000, "slowest-insert-ms")
				runtime.KeepAlive(tb)
			}
		})
	}
}

// BenchmarkInsert1M: go test -run '^$' -bench Insert1M -benchtime 1x ./internal/records/
func BenchmarkInsert1M(b *testing.B) { benchmarkKeys(b, 1_000_000) }

// BenchmarkInsert10M needs RLSERVER_BENCH_10M=1 (about 0.6 GB of heap).
func BenchmarkInsert10M(b *testing.B) {
	if os.Getenv("RLSERVER_BENCH_10M") == "" {
		b.Skip("set RLSERVER_BENCH_10M=1 to insert 10M keys")
	}
	benchmarkKeys(b, 10_000_000)
}

func BenchmarkLookup(b *testing.B) {
	tb := New(algorithms.TokenBucket)
	keys := make([][]byte, 1<<16)
	for k := range keys {
		keys[k] = fmt.Appendf(nil, "tb:%012d", k)
		tb.Insert(keys[k], algorithms.State{})
	}
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		i, _ := tb.Lookup(keys[k&(len(keys)-1)])
		tb.SetState(i, algorithms.State{Stamp: int64(k)})
		k++
	}
}

// TestReserve: after Reserve(n), inserting n keys allocates nothing (a
// snapshot is loaded with the collector off), and the keys are all there.
func TestReserve(t *testing.T) {
	const n = 10000
	keys := make([][]byte, n)
	for k := range keys {
		keys[k] = fmt.Appendf(nil, "tb:%012d", k)
	}
	tb := New(algorithms.TokenBucket)
	tb.Reserve(n)
	before := layout(tb)
	for k := range n {
		tb.Insert(keys[k], algorithms.State{Stamp: int64(k)})
	}
	if after := layout(tb); !slices.Equal(before, after) {
		t.Fatalf("inserting %d reserved keys moved or grew the table's memory: %v, then %v", n, before, after)
	}
	model := map[string]algorithms.State{}
	for k, key := range keys {
		model[string(key)] = algorithms.State{Stamp: int64(k)}
	}
	check(t, 0, tb, model)
	tb.Reserve(2 * n) // a table holding keys is left alone
	check(t, 1, tb, model)
}

// layout returns where the table's memory is and how large: its record
// chunks, its index and its arena. Comparing it before and after is how a
// test sees that nothing grew; the process's allocation count would also
// count other goroutines' allocations (the race detector's, the test
// runner's), which made such checks fail now and then.
func layout(tb *Table) []any {
	l := []any{unsafe.SliceData(tb.idx.tags), len(tb.idx.tags), unsafe.SliceData(tb.idx.slots),
		tb.old.tags == nil, tb.arenas[0].capa, tb.arenas[1].capa}
	for _, c := range tb.chunks {
		l = append(l, unsafe.SliceData(c), len(c))
	}
	return l
}

// BenchmarkSlowestDeleteWhileCompacting measures the slowest Delete (and the
// slowest Maintain, called every 1000 deletes as a shard's tick would) over
// deleting 80% of 2M long keys, which compacts the arena: what a decision
// that evicts a key waits for at worst. go test -run '^$' -bench
// SlowestDelete -benchtime 1x ./internal/records/
func BenchmarkSlowestDeleteWhileCompacting(b *testing.B) {
	const n = 2_000_000
	for b.Loop() {
		b.StopTimer()
		tb := New(algorithms.TokenBucket)
		ids := make([]uint32, n)
		for k := range n {
			ids[k] = tb.Insert(fmt.Appendf(nil, "user:%012d:/api/v1/orders", k), algorithms.State{})
		}
		b.StartTimer()
		var slowest, slowestMaintain time.Duration
		for k := range n {
			if k%5 == 4 {
				continue
			}
			start := time.Now()
			tb.Delete(ids[k])
			slowest = max(slowest, time.Since(start))
			if k%1000 == 0 {
				start := time.Now()
				tb.Maintain()
				slowestMaintain = max(slowestMaintain, time.Since(start))
			}
		}
		b.ReportMetric(float64(slowest.Microseconds()), "slowest-delete-µs")
		b.ReportMetric(float64(slowestMaintain.Microseconds()), "slowest-maintain-µs")
	}
}
