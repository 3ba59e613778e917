package keyspace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
)

// setPlain stores value under key.
func setPlain(t testing.TB, m *Map, key string) {
	t.Helper()
	task(m, []byte(key), func(db *DB) {
		if err := db.SetString([]byte(key), []byte("v")); err != nil {
			t.Error(err)
		}
	})
}

func delPlain(m *Map, key string) {
	task(m, []byte(key), func(db *DB) { db.Delete([]byte(key)) })
}

func all(key []byte, v Value) bool { return true }

// scanAll is m.Scan with no filter.
func scanAll(m *Map) func(uint64, int) ([][]byte, uint64) {
	return func(c uint64, n int) ([][]byte, uint64) { return m.Scan(c, n, all) }
}

// fullScan runs SCAN from 0 to 0 with count, calling between after each
// call, and returns how often each key came back and the calls made. It
// fails the test past limit calls.
func fullScan(t *testing.T, scan func(uint64, int) ([][]byte, uint64), count, limit int, between func()) (map[string]int, int) {
	t.Helper()
	seen := map[string]int{}
	cursor, calls := uint64(0), 0
	for {
		keys, next := scan(cursor, count)
		calls++
		for _, k := range keys {
			seen[string(k)]++
		}
		if next == 0 {
			return seen, calls
		}
		if calls > limit {
			t.Fatalf("no end after %d calls", calls)
		}
		cursor = next
		if between != nil {
			between()
		}
	}
}

// checkScanIndex asserts that every shard's scan index, where built, holds
// exactly its plain keys.
func checkScanIndex(t *testing.T, m *Map) {
	t.Helper()
	m.each(func(s *shard) {
		if s.scanIndex == nil {
			return
		}
		if s.scanIndex.Len() != len(s.plain) {
			t.Errorf("shard %d: %d keys indexed, %d held", s.id, s.scanIndex.Len(), len(s.plain))
		}
		s.scanIndex.Scan(func(it scanItem) bool {
			if s.plain[it.key()] != it.e || it.h != plainOrder(it.e.keyBytes()) {
				t.Errorf("shard %d: stale index item %q", s.id, it.key())
			}
			return true
		})
	})
}

func TestScanOrderIsRouting(t *testing.T) {
	for _, n := range []int{1, 2, 8} {
		m, _, _ := newMap(t, n)
		for i := range 1000 {
			k := []byte(fmt.Sprint("key:", i))
			if got, want := m.shardAt(plainOrder(k)), m.ShardOf(nil, k); got != want {
				t.Fatalf("%d shards: %s is on shard %d but its scan order says %d", n, k, want, got)
			}
		}
	}
}

func TestScanVisitsEveryKeyOnce(t *testing.T) {
	for _, n := range []int{1, 4} {
		m, _, _ := newMap(t, n)
		for i := range 500 {
			setPlain(t, m, fmt.Sprint("k", i))
		}
		seen, calls := fullScan(t, scanAll(m), 7, 1000, nil)
		if len(seen) != 500 {
			t.Fatalf("%d shards: %d keys seen, want 500", n, len(seen))
		}
		for k, c := range seen {
			if c != 1 {
				t.Errorf("%s seen %d times", k, c)
			}
		}
		// ⌈500/7⌉ calls examine the keys; one more may be needed per shard
		// boundary reached exactly.
		if calls > 500/7+1+n {
			t.Errorf("%d shards: %d calls for 500 keys at count 7", n, calls)
		}
		checkScanIndex(t, m)
	}
}

// TestScanFullIterationUnderChanges: keys present for the whole iteration
// come back, while others are added, deleted and expire between calls,
// and the iteration ends.
func TestScanFullIterationUnderChanges(t *testing.T) {
	m, _, clk := newMap(t, 4)
	rng := rand.New(rand.NewPCG(1, 2))
	stable := map[string]bool{}
	for i := range 300 {
		k := fmt.Sprint("stable", i)
		stable[k] = true
		setPlain(t, m, k)
	}
	var churn []string
	for i := range 300 {
		k := fmt.Sprint("churn", i)
		churn = append(churn, k)
		setPlain(t, m, k)
	}
	next := 300
	between := func() {
		for range 10 {
			switch rng.IntN(3) {
			case 0: // add
				k := fmt.Sprint("churn", next)
				next++
				churn = append(churn, k)
				setPlain(t, m, k)
			case 1: // delete
				if len(churn) > 0 {
					i := rng.IntN(len(churn))
					delPlain(m, churn[i])
					churn = append(churn[:i], churn[i+1:]...)
				}
			case 2: // expire one now
				if len(churn) > 0 {
					k := []byte(churn[rng.IntN(len(churn))])
					task(m, k, func(db *DB) { db.SetExpiry(k, db.Now()+1) })
				}
			}
		}
		clk.ns.Add(2)
	}
	seen, _ := fullScan(t, scanAll(m), 5, 10_000, between)
	for k := range stable {
		if seen[k] == 0 {
			t.Errorf("%s, present throughout, was not returned", k)
		}
	}
	for k, c := range seen {
		if stable[k] && c != 1 {
			t.Errorf("%s returned %d times", k, c)
		}
	}
	checkScanIndex(t, m)
}

func TestScanFiltersAndSkipsExpired(t *testing.T) {
	m, _, clk := newMap(t, 2)
	for i := range 20 {
		setPlain(t, m, fmt.Sprint("a", i))
		setPlain(t, m, fmt.Sprint("b", i))
	}
	gone := []byte("a3")
	task(m, gone, func(db *DB) { db.SetExpiry(gone, db.Now()+sec) })
	clk.ns.Add(sec)
	onlyA := func(key []byte, v Value) bool {
		if _, ok := v.(*String); !ok {
			t.Errorf("%s: value %T", key, v)
		}
		return key[0] == 'a'
	}
	seen, _ := fullScan(t, func(c uint64, n int) ([][]byte, uint64) { return m.Scan(c, n, onlyA) }, 3, 100, nil)
	if len(seen) != 19 || seen["a3"] != 0 || seen["b1"] != 0 {
		t.Fatalf("seen %v", seen)
	}
}

func TestScanOnAHeldDB(t *testing.T) {
	m, _, _ := newMap(t, 4)
	for i := range 50 {
		setPlain(t, m, fmt.Sprint("k", i))
	}
	d := m.NewDispatcher()
	var seen map[string]int
	if err := d.Exec(func(db *DB) {
		scan := func(c uint64, n int) ([][]byte, uint64) { return db.Scan(c, n, all) }
		seen, _ = fullScan(t, scan, 4, 100, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 50 {
		t.Fatalf("%d keys seen, want 50", len(seen))
	}
	// The index built inside the hold follows changes made afterwards, and
	// is emptied by a flush.
	delPlain(m, "k1")
	setPlain(t, m, "new")
	checkScanIndex(t, m)
	m.Flush()
	setPlain(t, m, "after")
	checkScanIndex(t, m)
	if seen, _ := fullScan(t, scanAll(m), 10, 10, nil); len(seen) != 1 || seen["after"] != 1 {
		t.Fatalf("after flush: %v", seen)
	}
}

// fillPlain stores n plain keys straight into m's shards.
func fillPlain(m *Map, n int) {
	m.each(func(s *shard) {
		for i := range n {
			k := []byte(fmt.Sprint("key:", i))
			if m.shardOf(nil, k) == s.id {
				e := s.insertPlain(k)
				s.storedValue(e, &String{B: []byte("v")})
			}
		}
	})
}

// BenchmarkScanIndexBuild measures building the whole scan index of a
// shard of 100,000 plain keys (ns/op, done in chunks by SCAN), and the
// index's heap bytes per key.
func BenchmarkScanIndexBuild(b *testing.B) {
	const n = 100_000
	m, _, _ := newMap(b, 1)
	fillPlain(m, n)
	s := m.shards[0]
	b.ReportAllocs()
	var before, after runtime.MemStats
	for b.Loop() {
		b.StopTimer()
		s.m.each(func(s *shard) { s.scanIndex = nil })
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		m.each(func(s *shard) { s.buildScanIndex(math.MaxInt, 0) })
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.StartTimer()
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "index-bytes/key")
}

// BenchmarkScanCall measures one SCAN call of COUNT 10 over 100,000 keys
// once the index exists, walking the keyspace.
func BenchmarkScanCall(b *testing.B) {
	m, _, _ := newMap(b, 4)
	fillPlain(m, 100_000)
	b.ReportAllocs()
	cursor := uint64(0)
	for b.Loop() {
		_, cursor = m.Scan(cursor, 10, all)
	}
}

// BenchmarkPlainInsertDelete measures creating and removing a plain key,
// with and without a scan index to keep up to date.
func BenchmarkPlainInsertDelete(b *testing.B) {
	for _, indexed := range []bool{false, true} {
		b.Run(fmt.Sprint("indexed=", indexed), func(b *testing.B) {
			m, _, _ := newMap(b, 1)
			fillPlain(m, 100_000)
			s := m.shards[0]
			if indexed {
				m.each(func(s *shard) { s.buildScanIndex(math.MaxInt, 0) })
			}
			keys := make([][]byte, 1024)
			for i := range keys {
				keys[i] = []byte(fmt.Sprint("new:", i))
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e := s.insertPlain(keys[i%len(keys)])
				s.remove(e)
				i++
			}
		})
	}
}

// TestIdleScanIndexIsDropped: a shard no SCAN has read for scanIndexIdle
// drops its index, and an iteration under way goes on from its cursor.
func TestIdleScanIndexIsDropped(t *testing.T) {
	m, _, clk := newMap(t, 2)
	for i := range 100 {
		setPlain(t, m, fmt.Sprint("k", i))
	}
	indexed := func() int {
		var n atomic.Int32 // each runs on every shard at once
		m.each(func(s *shard) {
			if s.scanIndex != nil {
				n.Add(1)
			}
		})
		return int(n.Load())
	}
	seen, _ := fullScan(t, scanAll(m), 10, 100, func() {
		m.Tick()
		if indexed() == 0 {
			t.Fatal("index dropped while a SCAN uses it")
		}
		clk.ns.Add(scanIndexIdle + 1) // every call after the pause rebuilds
		m.Tick()
		if indexed() != 0 {
			t.Fatal("index kept past scanIndexIdle")
		}
		setPlain(t, m, fmt.Sprint("new", clk.now()))
	})
	for i := range 100 {
		if seen[fmt.Sprint("k", i)] != 1 {
			t.Errorf("k%d returned %d times", i, seen[fmt.Sprint("k", i)])
		}
	}
}

// TestScanReturnsHashTiesTogether: keys sharing one 64-bit hash come back
// in the same call, even past count, so the cursor (a hash) never stops
// between them — which would return the first again forever.
func TestScanReturnsHashTiesTogether(t *testing.T) {
	m, _, _ := newMap(t, 1)
	for _, k := range []string{"a", "b", "c", "d"} {
		setPlain(t, m, k)
	}
	// Give a, b and c one hash, d a larger one, as a collision would.
	m.each(func(s *shard) {
		s.buildScanIndex(math.MaxInt, 0)
		s.scanIndex.Clear()
		for _, k := range []string{"a", "b", "c"} {
			s.scanIndex.Set(scanItem{42, s.plain[k]})
		}
		s.scanIndex.Set(scanItem{43, s.plain["d"]})
	})
	keys, next := m.Scan(0, 1, all)
	if len(keys) != 3 || next != 43 {
		t.Fatalf("first call: %q, next %d; want a, b, c and 43", keys, next)
	}
	if keys, next = m.Scan(next, 1, all); len(keys) != 1 || string(keys[0]) != "d" || next != 0 {
		t.Fatalf("second call: %q, next %d; want d and the end", keys, next)
	}
}

// TestScanIndexBuildsInChunks: the index is built a chunk per message, and
// keys created and removed between chunks (before and after the build
// reaches them) leave it exact.
func TestScanIndexBuildsInChunks(t *testing.T) {
	m, _, _ := newMap(t, 1)
	const n = 3000
	fillPlain(m, n)
	m.each(func(s *shard) {
		rng := rand.New(rand.NewPCG(5, 6))
		chunks := 0
		for !s.buildScanIndex(100, 0) {
			chunks++
			for range 20 {
				k := []byte(fmt.Sprint("key:", rng.IntN(2*n)))
				if e := s.plain[string(k)]; e != nil {
					s.remove(e)
				} else {
					s.insertPlain(k)
				}
			}
			if chunks > 2*n/100 {
				t.Fatal("the build does not end")
			}
		}
		if chunks < n/100-1 {
			t.Errorf("built in %d chunks of 100, for %d keys", chunks, n)
		}
	})
	checkScanIndex(t, m)
	if seen, _ := fullScan(t, scanAll(m), 100, 100, nil); len(seen) != m.Stats().PlainKeys {
		t.Fatalf("%d keys scanned, %d held", len(seen), m.Stats().PlainKeys)
	}
}

// TestScanSkipsAFailedShard: a SCAN passes over a failed shard's keys and
// ends (a held DB is not to be had once a shard has failed: Exec refuses).
func TestScanSkipsAFailedShard(t *testing.T) {
	m, _, _ := newMap(t, 2)
	for i := range 200 {
		setPlain(t, m, fmt.Sprint("k", i))
	}
	healthy := 0
	for i := range 200 {
		if m.ShardOf(nil, []byte(fmt.Sprint("k", i))) == 1 {
			healthy++
		}
	}
	m.InjectPanic(0)
	<-m.Failed()
	if seen, _ := fullScan(t, scanAll(m), 10, 100, nil); len(seen) != healthy {
		t.Fatalf("pooled: %d keys, want shard 1's %d", len(seen), healthy)
	}
}
