package records

// index is the hash index of a Table: a power-of-two number of slots, each
// a tag byte (tagEmpty, tagDead, or 7 bits of the key's hash) and a record
// index, in two parallel arrays, probed linearly.
type index struct {
	tags  []uint8
	slots []uint32
	used  int // slots not empty: live and tombstones
}

// newIndex returns an empty index of size slots, a power of two.
func newIndex(size int) index {
	return index{tags: make([]uint8, size), slots: make([]uint32, size)}
}

// sizeFor returns the slots an index needs for n keys at a load of at most
// num/den.
func sizeFor(n, num, den int) int {
	size := minSlots
	for size*num < n*den {
		size *= 2
	}
	return size
}

// full reports whether one more key would take the index past 7/8 of its
// slots, live and tombstones together.
func (x *index) full() bool { return (x.used+1)*8 > len(x.tags)*7 }

// put puts record i, whose key hashes to h with tag, at the first
// tombstone or empty slot of its probe sequence.
func (x *index) put(h uint64, tag uint8, i uint32) {
	mask := uint64(len(x.tags) - 1)
	p := h & mask
	for x.tags[p] > tagDead {
		p = (p + 1) & mask
	}
	if x.tags[p] == tagEmpty {
		x.used++
	}
	x.tags[p], x.slots[p] = tag, i
}

// remove takes record i, whose key hashes to h with tag, out of the index,
// and reports whether it was there.
func (x *index) remove(h uint64, tag uint8, i uint32) bool {
	mask := uint64(len(x.tags) - 1)
	p := h & mask
	for x.tags[p] != tag || x.slots[p] != i {
		if x.tags[p] == tagEmpty {
			return false
		}
		p = (p + 1) & mask
	}
	x.tags[p] = tagDead
	if x.tags[(p+1)&mask] == tagEmpty {
		// No probe sequence passes this slot to reach a later one: it and
		// the tombstones right before it become empty.
		for x.tags[p] == tagDead {
			x.tags[p] = tagEmpty
			x.used--
			p = (p - 1) & mask
		}
	}
	return true
}

// find returns the record of t holding key (hash h, tag) in x.
func find[K string | []byte](t *Table, x *index, h uint64, tag uint8, key K) (uint32, bool) {
	mask := uint64(len(x.tags) - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		switch x.tags[p] {
		case tagEmpty:
			return 0, false
		case tag:
			if i := x.slots[p]; hasKey(t, i, key) {
				return i, true
			}
		}
	}
}

// Growing. When the index is full, a new one is made (twice the size, or
// the same size to drop tombstones: room for the keys at 3/4) and the keys
// move into it a few at a time: each Insert and Delete moves migrateStep of
// the old index's slots, so no call waits for every key to be hashed again
// (at 10M keys that took over a second). Meanwhile lookups try the new
// index, then the old; Insert adds to the new alone (its key is in
// neither); Delete takes the key out of both. A slot of the old index still
// holding a live tag therefore names a key not yet moved, or moved and
// still live, and moving it again is harmless to skip: moving goes by slot
// position, once. The new index has room for at least a further eighth of
// its size before it is full, and the move ends after a sixteenth of the
// old index's size in calls: it always ends first (grow checks).

// migrateStep is how many of the old index's slots each change moves.
const migrateStep = 16

// grow starts moving the keys to a new index with room for n keys.
func (t *Table) grow(n int) {
	t.finishMigration() // never twice at once (see above: not expected)
	t.old, t.idx, t.moved = t.idx, newIndex(sizeFor(n, 3, 4)), 0
}

// migrate moves up to migrateStep slots of the old index into the new.
func (t *Table) migrate(steps int) {
	for ; steps > 0 && t.old.tags != nil; steps-- {
		p := t.moved
		if t.old.tags[p] > tagDead {
			i := t.old.slots[p]
			h, tag := hashOf(t.Key(i))
			t.idx.put(h, tag, i)
		}
		if t.moved++; t.moved == len(t.old.tags) {
			t.old = index{}
		}
	}
}

// Maintain moves up to a few thousand of the old index's slots, so that a
// growth ends, and the old index is freed, even when keys stop coming (the
// shard calls it on its timer tick). It is cheap when nothing is moving.
func (t *Table) Maintain() { t.migrate(maintainStep); t.compact(maintainStep) }

// maintainStep is how many slots Maintain moves: well under a millisecond.
const maintainStep = 4096

// finishMigration moves what remains of the old index.
func (t *Table) finishMigration() {
	if t.old.tags != nil {
		t.migrate(len(t.old.tags) - t.moved)
	}
}

// hasKey reports whether live record i of t holds key: for a key short
// enough to be inline, a comparison of the record's length byte and bytes,
// without decoding where the key is.
func hasKey[K string | []byte](t *Table, i uint32, key K) bool {
	r := t.record(i)
	if len(key) <= maxInline {
		return r[0] == byte(len(key)) && string(r[1:1+len(key)]) == string(key)
	}
	return r[0] == longKey && string(t.Key(i)) == string(key)
}
