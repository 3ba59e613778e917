package keyspace

import (
	"iter"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/tidwall/btree"
)

// SCAN's cursor over the plain keys.
//
// Order: plain keys are visited in the order of their 64-bit routing hash,
// plainOrder(key), which is also what picks their shard (its top bits, see
// Map.shardOf). So the whole keyspace is one ordered sequence, shard 0's
// keys first, and a cursor is simply the next hash to visit: 0 starts, and
// an iteration ends when the cursor wraps back to 0 after the last shard.
// A call returns every live key whose hash lies in [cursor, next), so a key
// present for a whole iteration (cursor 0 to 0) is returned at least once
// — exactly once unless it was deleted and added again — however keys are
// added, deleted or expire between calls, and the iteration ends after at
// most keys/count + shards calls. The cursor depends on the key bytes
// alone, not on the shard count, so it stays valid across a restart with
// another --shards. Keys sharing one full 64-bit hash are returned by the
// same call, which may then examine more than count.
//
// Cost: a shard finds the keys after a cursor in O(log n + count) through
// its scan index, a B-tree of (hash, entry) over its plain keys, built the
// first time a SCAN reaches the shard and kept up to date from then on
// (O(log n) per plain key created or removed, about 25 bytes per key with
// the tree's nodes). The build (O(n log n)) goes scanBuildChunk keys per
// message, the SCAN call asking again until it is complete, so the shard
// serves its other clients in between: it never stops for longer than one
// chunk. The index is only a cache of the order: a shard no SCAN has read
// for scanIndexIdle drops it (an iteration still under way rebuilds it and
// goes on, its cursor unchanged), so a server not asked to SCAN pays
// nothing for it.

// scanIndexIdle is how long a shard keeps its scan index after the last
// SCAN read it, ns: long enough for a client pausing between the calls of
// one iteration, short enough that one SCAN (an operator's redis-cli
// --scan) does not tax every later key creation.
const scanIndexIdle = int64(10 * time.Minute)

// scanBuildChunk is how many keys a shard adds to its scan index per
// message while building it: about a millisecond of work.
const scanBuildChunk = 1024

// dropIdleScanIndex drops the scan index (complete or being built) if no
// SCAN has asked for it for scanIndexIdle.
func (s *shard) dropIdleScanIndex(now int64) {
	if s.scanIndex != nil && now-s.scanned > scanIndexIdle {
		s.dropScanIndex()
	}
}

// dropScanIndex drops the scan index and stops its build, if under way.
func (s *shard) dropScanIndex() {
	if s.scanBuild != nil {
		s.scanBuild.stop()
		s.scanBuild = nil
	}
	s.scanIndex = nil
}

// plainOrder is a plain key's routing hash: its top bits pick its shard
// (Map.shardOf computes the same for plain keys) and SCAN visits keys in
// its order.
func plainOrder(key []byte) uint64 { return xxhash.Sum64(key) * 0xBF58476D1CE4E5B9 }

// scanItem is a plain key in a shard's scan index.
type scanItem struct {
	h uint64 // plainOrder of the key
	e *entry // nil only in a search pivot, which sorts before h's keys
}

// key returns the item's key, "" for a pivot.
func (it scanItem) key() string {
	if it.e == nil {
		return ""
	}
	return it.e.key()
}

func scanLess(a, b scanItem) bool {
	return a.h < b.h || a.h == b.h && a.key() < b.key()
}

// newScanIndex returns an empty scan index. NoLocks: only the shard's
// owner touches it.
func newScanIndex() *btree.BTreeG[scanItem] {
	return btree.NewBTreeGOptions(scanLess, btree.Options{NoLocks: true})
}

// scanBuild is a scan index being built: a suspended walk of the plain
// keys. Keys created or removed meanwhile update the index as usual; Go's
// map iteration yields no key removed before it is reached, and a key
// created meanwhile, if yielded too, is set again in place.
type scanBuild struct {
	next func() (string, *entry, bool)
	stop func()
}

// buildScanIndex adds up to n more plain keys to the scan index, starting
// it if there is none, and reports whether the index is complete. now is
// the instant of the SCAN asking.
func (s *shard) buildScanIndex(n int, now int64) bool {
	s.scanned = now
	if s.scanIndex == nil {
		s.scanIndex = newScanIndex()
		next, stop := iter.Pull2(maps.All(s.plain))
		s.scanBuild = &scanBuild{next: next, stop: stop}
	}
	b := s.scanBuild
	if b == nil {
		return true
	}
	for ; n > 0; n-- {
		_, e, ok := b.next()
		if !ok {
			b.stop()
			s.scanBuild = nil
			return true
		}
		s.scanIndex.Set(scanItem{plainOrder(e.keyBytes()), e})
	}
	return false
}

// indexPlain adds a new plain key to the scan index, if there is one.
func (s *shard) indexPlain(e *entry) {
	if s.scanIndex != nil {
		s.scanIndex.Set(scanItem{plainOrder(e.keyBytes()), e})
	}
}

// unindexPlain removes a plain key from the scan index, if there is one;
// e must still hold its key.
func (s *shard) unindexPlain(e *entry) {
	if s.scanIndex != nil {
		s.scanIndex.Delete(scanItem{plainOrder(e.keyBytes()), e})
	}
}

// shardEnd is the cursor just past the last hash shard i owns: the first
// of shard i+1, or 0 (the end of the iteration) after the last shard.
func (m *Map) shardEnd(i int) uint64 {
	if m.shift == 64 {
		return 0
	}
	return uint64(i+1) << m.shift
}

// shardAt returns the index of the shard owning the hashes from cursor on.
func (m *Map) shardAt(cursor uint64) int {
	if m.shift == 64 {
		return 0
	}
	return int(cursor >> m.shift)
}

// scanPlain visits, in hash order, the shard's plain keys with hashes from
// cursor on (its scan index must be complete), calling visit for each live
// one, until it has examined count keys (expired ones count: they cost the
// same work) and finished the keys sharing the last one's hash. It returns the keys examined and the next
// cursor: the hash after the last examined, or m.shardEnd(s.id) when the
// shard has no more. visit runs on the shard's goroutine and must not keep
// key.
func (s *shard) scanPlain(cursor uint64, count int, now int64, visit func(key []byte, v Value)) (int, uint64) {
	examined, next, last := 0, s.m.shardEnd(s.id), uint64(0)
	s.scanIndex.Ascend(scanItem{h: cursor}, func(it scanItem) bool {
		if examined >= count && it.h != last {
			next = it.h
			return false
		}
		examined, last = examined+1, it.h
		if e := it.e; e.state.Stamp == 0 || e.state.Stamp > now {
			visit(e.keyBytes(), e.value)
		}
		return true
	})
	return examined, next
}

// scanner runs one SCAN call over shards in cursor order, collecting copies
// of the keys match accepts.
type scanner struct {
	m     *Map
	match func(key []byte, v Value) bool
	keys  [][]byte
}

func (sc *scanner) visit(key []byte, v Value) {
	if sc.match(key, v) {
		sc.keys = append(sc.keys, append([]byte(nil), key...))
	}
}

// run walks from cursor, shard after shard, until count keys are examined
// or the iteration ends; step scans one shard (or skips it, returning its
// end, if it has failed). It returns the next cursor.
func (sc *scanner) run(cursor uint64, count int, step func(s *shard, cursor uint64, count int) (int, uint64)) uint64 {
	for count > 0 {
		s := sc.m.shards[sc.m.shardAt(cursor)]
		n, next := step(s, cursor, count)
		count -= n
		cursor = next
		if cursor == 0 {
			break
		}
	}
	return cursor
}

// Scan is one SCAN call: from cursor (0 to start), it examines about
// count plain keys in hash order (see the top of scan.go), visiting one
// shard at a time and never holding two, and returns copies of the live
// keys match accepts and the cursor to continue from (0: the iteration is
// complete). match runs on the shards' goroutines. A failed shard's keys
// are skipped.
func (m *Map) Scan(cursor uint64, count int, match func(key []byte, v Value) bool) ([][]byte, uint64) {
	sc := &scanner{m: m, match: match}
	ack := make(chan struct{}, 1)
	next := sc.run(cursor, count, func(s *shard, cursor uint64, count int) (int, uint64) {
		n, next := count, m.shardEnd(s.id)
		for ran, ready := true, false; ran && !ready; {
			// A failed shard runs no function (see shard.refuse): ran
			// stays false, its keys are skipped and the cursor moves past
			// them.
			ran = false
			s.send(message{fn: func(s *shard) {
				ran = true
				if ready = s.buildScanIndex(scanBuildChunk, s.clock()); ready {
					n, next = s.scanPlain(cursor, count, s.clock(), sc.visit)
				}
			}, ack: ack})
			<-ack
		}
		return n, next
	})
	return sc.keys, next
}

// Scan is Map.Scan on a DB covering every shard, at the DB's instant.
func (db *DB) Scan(cursor uint64, count int, match func(key []byte, v Value) bool) ([][]byte, uint64) {
	healthy := db.healthy()
	sc := &scanner{m: db.m, match: match}
	next := sc.run(cursor, count, func(s *shard, cursor uint64, count int) (int, uint64) {
		if !slices.Contains(healthy, s) {
			return count, db.m.shardEnd(s.id)
		}
		db.touch(s)
		s.buildScanIndex(math.MaxInt, db.now) // the shards are held anyway
		return s.scanPlain(cursor, count, db.now, sc.visit)
	})
	return sc.keys, next
}
