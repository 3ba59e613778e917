package keyspace

import (
	"math"
	"sync"
)

// SlotCount is the number of Redis Cluster hash slots: Config.SlotOf
// returns 0..SlotCount-1.
const SlotCount = 16384

// slotCounts is one shard's count of keys per cluster slot, kept only in
// cluster mode (Config.SlotOf set): 64 KiB per shard, and a CRC16 of the
// key each time a key is created or removed (never on a decision about an
// existing key). Every entry counts once: a limiter state (a key under two
// rules is two states) or a plain key, expired or not yet removed, as
// Redis counts a key whose TTL passed until it is reaped. Owned by the
// shard's goroutine, like the maps whose entries it counts.
type slotCounts struct {
	slotOf func(key []byte) uint16
	n      [SlotCount]uint32
}

func (s *shard) slotAdded(key []byte) {
	if s.slots != nil {
		s.slots.n[s.slots.slotOf(key)]++
	}
}

func (s *shard) slotRemoved(key []byte) {
	if s.slots != nil {
		s.slots.n[s.slots.slotOf(key)]--
	}
}

// slotWalkChunk bounds the keys one message walks for GETKEYSINSLOT, so
// that a shard's decisions wait for at most that many keys (well under a
// millisecond on a quiet machine) between chunks, however many it holds.
var slotWalkChunk = 4096 // a variable for tests

// slotWalk is one shard's part of a GETKEYSINSLOT in progress: its plain
// keys, then each table that existed when it began, each walked across
// messages (see walker). Keys created or removed while it runs may or may
// not be found; a key present throughout is found once. It is touched only
// on the shard's goroutine.
type slotWalk struct {
	slot    uint16
	want    int // names to find here at most (the caller's max)
	found   int
	ids     []uint64 // tables still to walk (plainID: the plain keys)
	walking bool
	w       walker
	done    bool
}

// startSlotWalk begins w over s's keys in slot, to find at most max
// names, and returns the slot's count of keys here.
func (s *shard) startSlotWalk(w *slotWalk, slot uint16, max int) int {
	if s.slots == nil {
		w.done = true
		return 0
	}
	n := int(s.slots.n[slot])
	*w = slotWalk{slot: slot, want: max, ids: []uint64{plainID}}
	for id := range s.tables {
		w.ids = append(w.ids, id)
	}
	// A shard with none of the slot's keys at the start holds no key
	// present throughout. Otherwise the walk stops early only at max: had
	// it stopped at the count it began with, keys added to the slot meanwhile
	// could stand in for keys present throughout that it had not reached.
	w.done = n == 0 || max <= 0
	return n
}

// walkSlot continues w for at most n keys, appending copies of the names
// found to dst; it marks w done (and releases its walk) once every name
// wanted is found or every key walked.
func (s *shard) walkSlot(w *slotWalk, n int, dst [][]byte) [][]byte {
	for ; n > 0 && !w.done; n-- {
		if !w.walking {
			if len(w.ids) == 0 {
				w.done = true
				break
			}
			id := w.ids[0]
			w.ids = w.ids[1:]
			w.walking = s.startWalk(&w.w, id)
			continue
		}
		t, k, e, ok := s.step(&w.w)
		var key []byte
		switch {
		case !ok:
			w.walking = false
			continue
		case t == nil && e == nil: // a span of free records
			continue
		case t == nil:
			key = e.keyBytes()
		default:
			key = t.keyOf(k)
		}
		if s.slots.slotOf(key) == w.slot {
			dst = append(dst, append([]byte(nil), key...))
			if w.found++; w.found == w.want {
				w.done = true
			}
		}
	}
	if w.done && w.walking {
		w.w.release()
		w.walking = false
	}
	return dst
}

// SlotKeys returns the number of keys (limiter states and plain keys) in
// the cluster slot, and the names of at most max of them, from every
// healthy shard: CLUSTER COUNTKEYSINSLOT (max 0) and GETKEYSINSLOT. Both
// are 0 and nil unless the keyspace counts slots (Config.SlotOf).
//
// The count costs one message per shard. The names cost a walk over the
// keys of each shard holding some of the slot's, until it has found max
// (there is no per-slot index: it would cost 16 bytes on every entry for
// a command used in diagnostics), in chunks of slotWalkChunk keys, one
// message each, so the shard keeps deciding in between.
func (m *Map) SlotKeys(slot uint16, max int) (int, [][]byte) {
	walks := make([]slotWalk, len(m.shards))
	var mu sync.Mutex
	total, out := 0, [][]byte(nil)
	for first := true; ; first = false {
		more, enough := false, len(out) >= max
		m.each(func(s *shard) {
			w := &walks[s.id]
			var n int
			if first {
				n = s.startSlotWalk(w, slot, max)
			}
			if enough {
				w.done = true // another shard found them all
			}
			mine := s.walkSlot(w, slotWalkChunk, nil)
			mu.Lock()
			defer mu.Unlock()
			total += n
			out = append(out, mine...)
			more = more || !w.done
		})
		if !more {
			return total, clipKeys(out, max)
		}
	}
}

// SlotKeys is Map.SlotKeys on a DB covering every shard, which it holds:
// each shard is walked at once.
func (db *DB) SlotKeys(slot uint16, max int) (int, [][]byte) {
	total, out := 0, [][]byte(nil)
	for _, s := range db.healthy() {
		var w slotWalk
		total += s.startSlotWalk(&w, slot, max-len(out))
		out = s.walkSlot(&w, math.MaxInt, out)
	}
	return total, out
}

// SlotKeys is Map.SlotKeys (see Handle).
func (d *Dispatcher) SlotKeys(slot uint16, max int) (int, [][]byte) { return d.m.SlotKeys(slot, max) }

// clipKeys keeps the first max keys.
func clipKeys(keys [][]byte, max int) [][]byte {
	if len(keys) > max {
		clear(keys[max:])
		keys = keys[:max]
	}
	return keys
}
