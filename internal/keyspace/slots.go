package keyspace

import "sync"

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

// slotKeys returns the shard's count of keys in slot and appends to dst
// copies of the names of at most max of them. The count makes the search
// stop as soon as every key of the slot is found, and skip a shard with
// none, but finding them is a walk over the shard's keys (there is no
// per-slot index: it would cost 16 bytes on every entry for a command
// used in diagnostics).
func (s *shard) slotKeys(slot uint16, max int, dst [][]byte) (int, [][]byte) {
	if s.slots == nil {
		return 0, dst
	}
	n := int(s.slots.n[slot])
	want := min(n, max)
	if want == 0 {
		return n, dst
	}
	found := 0
	visit := func(states map[string]*entry) bool {
		for _, e := range states {
			if k := e.keyBytes(); s.slots.slotOf(k) == slot {
				dst = append(dst, append([]byte(nil), k...))
				if found++; found == want {
					return false
				}
			}
		}
		return true
	}
	if visit(s.plain) {
		for _, t := range s.tables {
			if !visit(t.states) {
				break
			}
		}
	}
	return n, dst
}

// SlotKeys returns the number of keys (limiter states and plain keys) in
// the cluster slot, and the names of at most max of them, from every
// healthy shard: CLUSTER COUNTKEYSINSLOT (max 0) and GETKEYSINSLOT. Both
// are 0 and nil unless the keyspace counts slots (Config.SlotOf). The
// count costs one message per shard; the names a walk over the keys of
// the shards holding some of the slot's (see slotKeys).
func (m *Map) SlotKeys(slot uint16, max int) (int, [][]byte) {
	var mu sync.Mutex
	total, out := 0, [][]byte(nil)
	m.each(func(s *shard) {
		n, mine := s.slotKeys(slot, max, nil)
		mu.Lock()
		defer mu.Unlock()
		total += n
		out = append(out, mine...)
	})
	return total, clipKeys(out, max)
}

// SlotKeys is Map.SlotKeys on a DB covering every shard.
func (db *DB) SlotKeys(slot uint16, max int) (int, [][]byte) {
	total, out := 0, [][]byte(nil)
	for _, s := range db.healthy() {
		var n int
		n, out = s.slotKeys(slot, max-len(out), out)
		total += n
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
