// Package records holds rate-limiter state as fixed-size records in an
// open-addressing hash table, with no Go pointer per key: a shard's table of
// one rule's keys is a few large pointer-free allocations, which the garbage
// collector never scans, instead of an object per key.
//
// Layout. Records (record.go) live in chunks of chunkLen records, addressed
// by a 32-bit index that never changes while the record is live, so the
// timing wheel (ttl.IndexWheel) and a snapshot's cursor can hold it. A
// deleted record's index is reused by a later insert. The hash index is two
// parallel arrays of a power-of-two number of slots: a tag byte (empty,
// deleted, or 7 bits of the key's hash) and the record's index. Lookups
// probe linearly from the slot the hash names, comparing tags, and read a
// record only when a tag matches. Deleting leaves a tombstone (unless the
// next slot is empty, then the run of tombstones before it is cleared too);
// once live slots and tombstones pass 7/8 of the slots, a new index is made,
// at a size that puts live keys at no more than 3/4 of it, and the keys move
// into it a few at each change (index.go), so no call waits for all of them.
//
// Keys up to maxInline (15) bytes are held inline in their record; longer
// ones in an append-only arena of blocks (arena.go), compacted when deleted
// keys' bytes are more than half of it. Compaction copies the live keys into a second arena a few
// records at each change (compactStep, and more per Maintain), so no call
// waits for all of them; each long key's record says which arena holds it. The inline size follows the keys measured: the benchmark
// harness's are 15 bytes ("tb:" and 12 digits), and a key of a client ID or
// an IP address fits too.
//
// Memory per key is the stride (36 bytes for a bucket, 32 for a sliding
// counter, 28 for a fixed window), plus 5 bytes per index slot at a load
// of 3/8 to 7/8 (6 to 13 bytes a key), plus the arena for long keys.
//
// A Table is not safe for concurrent use: one goroutine (the shard owning
// it) reads and writes it.
package records

import (
	"fmt"

	"github.com/cespare/xxhash/v2"

	"github.com/rlserver/rlserver/internal/algorithms"
)

const (
	// chunkBits sets the records per chunk: 2048, so growth allocates
	// 56–72 KiB at a time and never copies the records already held. Go
	// rounds an allocation this large up to whole 8 KiB pages: every
	// stride is a multiple of 4 bytes, so 2048 records fill their pages
	// exactly (1024 records of 36 bytes would waste 4 bytes a record;
	// TestChunksFillPages).
	chunkBits = 11
	chunkLen  = 1 << chunkBits
	pageSize  = 8 << 10
	// firstChunk is the records the first chunk starts with; it doubles
	// up to chunkLen as keys come, so a rule with a few keys on a shard
	// costs a few hundred bytes there, not a whole chunk.
	firstChunk = 8

	// MaxRecords bounds a table's records: indices stay below 2^31, clear
	// of the values the timing wheel reserves (ttl.MaxIndex).
	MaxRecords = 1 << 31

	none = ^uint32(0) // no record: the end of the free list

	tagEmpty = 0
	tagDead  = 1 // a tombstone: a deleted key's slot

	minSlots     = 8
	minArenaWork = 64 << 10 // compact no arena smaller than this, bytes

	// compactStep is how many records each Insert and Delete moves a
	// compaction on (Maintain, on the shard's tick, moves maintainStep):
	// copying at most that many keys, a few microseconds. A compaction
	// due while another runs starts when it ends.
	compactStep = 64
)

// Table is one rule's keys on one shard: key → state, for an algorithm
// Supports accepts. The zero Table is not usable; see New.
type Table struct {
	alg    algorithms.Algorithm
	stride int
	chunks [][]byte
	// top is the number of record indices ever handed out: every index
	// below it is live or free.
	top      uint32
	freeHead uint32 // first free record, or none
	n        int    // live records

	idx index
	// old is the index being replaced while keys move out of it, a few
	// at each change (index.go); moved is how many of its slots have
	// been. Its tags are nil the rest of the time.
	old   index
	moved int

	// Long keys' bytes. arenas[cur] takes new keys. While compacting,
	// arenas[1-cur] is the arena being emptied: records below cursor hold
	// no key in it any more. garbage counts each arena's bytes no live
	// record points at.
	arenas     [2]arena
	garbage    [2]int
	cur        uint8
	compacting bool
	cursor     uint32
}

// New returns an empty table for alg's states. It panics if records do not
// hold alg (Supports).
func New(alg algorithms.Algorithm) *Table {
	if !Supports(alg) {
		panic("records: no record layout for " + alg.String())
	}
	return &Table{
		alg: alg, stride: Stride(alg), freeHead: none,
		idx: newIndex(minSlots),
	}
}

// Algorithm returns the algorithm whose states the table holds.
func (t *Table) Algorithm() algorithms.Algorithm { return t.alg }

// Len returns the number of keys held.
func (t *Table) Len() int { return t.n }

// Top returns one past the highest record index handed out: Next visits
// indices below it.
func (t *Table) Top() uint32 { return t.top }

// record returns record i's bytes.
func (t *Table) record(i uint32) []byte {
	off := int(i&(chunkLen-1)) * t.stride
	return t.chunks[i>>chunkBits][off : off+t.stride : off+t.stride]
}

// live reports whether i is a live record's index.
func (t *Table) live(i uint32) bool {
	return i < t.top && t.record(i)[0] != freeRec
}

// Key returns record i's key. The bytes are the table's: the caller must
// not change them, and they are valid until the next Insert or Delete.
func (t *Table) Key(i uint32) []byte {
	r := t.record(i)
	ref, ok := readKeyRef(r)
	if !ok {
		panic("records: key of a free record")
	}
	if ref.inline {
		return r[1 : 1+ref.length]
	}
	return t.arenas[ref.arena].key(ref.offset, ref.length)
}

// State returns record i's state.
func (t *Table) State(i uint32) algorithms.State {
	return decodeState(t.alg, t.record(i)[keyArea:])
}

// SetState stores st as record i's state. st must be valid for the table's
// algorithm (algorithms.Valid); SetState panics on a state records cannot
// hold, which no valid state is.
func (t *Table) SetState(i uint32, st algorithms.State) {
	if !fits(t.alg, st) {
		panic(fmt.Sprintf("records: %s state %+v does not fit a record", t.alg, st))
	}
	encodeState(t.alg, t.record(i)[keyArea:], st)
}

// hashOf returns the hash of a key, and the tag it gets in the index.
func hashOf(key []byte) (h uint64, tag uint8) { return withTag(xxhash.Sum64(key)) }

// withTag returns h and the tag a key of hash h gets in the index: 7 of
// its bits, clear of tagEmpty and tagDead. They are the top bits, where
// the slot comes from the bottom ones.
func withTag(h uint64) (uint64, uint8) { return h, uint8(h>>57) + 2 }

// Lookup returns the index of key's record, and false if the table does not
// hold key.
func (t *Table) Lookup(key []byte) (uint32, bool) { return lookup(t, xxhash.Sum64(key), key) }

// Touch reads the memory a Lookup of key reads first — the key's first
// index slot, the record it names when its tag matches, and a long key's
// first byte — and returns a value made of what it read, which the caller
// must keep so that the reads are not optimised away. Looking up each key of
// a batch waits for its cache misses one key at a time; touching them all
// first lets the processor wait for many at once (the reads of different
// keys do not depend on each other), and the lookups then find the lines in
// cache. It changes nothing.
func (t *Table) Touch(key []byte) uint64 {
	x := &t.idx
	if len(x.tags) == 0 {
		return 0
	}
	h, tag := withTag(xxhash.Sum64(key))
	p := h & uint64(len(x.tags)-1)
	got := uint64(x.tags[p])
	if x.tags[p] != tag {
		return got
	}
	r := t.record(x.slots[p])
	got += uint64(r[0])
	if ref, ok := readKeyRef(r); ok && !ref.inline && ref.length > 0 {
		got += uint64(t.arenas[ref.arena].key(ref.offset, 1)[0])
	}
	return got
}

// LookupString is Lookup for a key held as a string.
func (t *Table) LookupString(key string) (uint32, bool) {
	return lookup(t, xxhash.Sum64String(key), key)
}

func lookup[K string | []byte](t *Table, hash uint64, key K) (uint32, bool) {
	h, tag := withTag(hash)
	if i, ok := find(t, &t.idx, h, tag, key); ok || t.old.tags == nil {
		return i, ok
	}
	return find(t, &t.old, h, tag, key)
}

// Insert stores key, which the table must not hold, with state st (as
// SetState), and returns its record's index.
func (t *Table) Insert(key []byte, st algorithms.State) uint32 {
	if !fits(t.alg, st) {
		panic(fmt.Sprintf("records: %s state %+v does not fit a record", t.alg, st))
	}
	if t.n >= MaxRecords {
		panic("records: table full")
	}
	if t.idx.full() {
		t.grow(t.n + 1)
	}
	i := t.newRecord()
	r := t.record(i)
	if len(key) <= maxInline {
		writeInline(r, key)
	} else {
		writeLong(r, len(key), t.cur, t.arenas[t.cur].add(key))
	}
	encodeState(t.alg, r[keyArea:], st)
	h, tag := hashOf(key)
	t.idx.put(h, tag, i)
	t.n++
	t.migrate(migrateStep)
	t.compact(compactStep)
	return i
}

// newRecord returns a record index to fill: a free one, or the next fresh
// one (allocating a chunk when it starts one).
func (t *Table) newRecord() uint32 {
	if i := t.freeHead; i != none {
		t.freeHead = freeNext(t.record(i))
		return i
	}
	i := t.top
	c := int(i >> chunkBits)
	switch end := int(i&(chunkLen-1)+1) * t.stride; {
	case c == len(t.chunks) && c == 0:
		t.chunks = append(t.chunks, make([]byte, firstChunk*t.stride))
	case c == len(t.chunks):
		t.chunks = append(t.chunks, make([]byte, chunkLen*t.stride))
	case end > len(t.chunks[c]): // the first chunk, still growing
		grown := make([]byte, min(2*len(t.chunks[c]), chunkLen*t.stride))
		copy(grown, t.chunks[c])
		t.chunks[c] = grown
	}
	t.top++
	return i
}

// Delete removes record i, which must be live; i may be handed out again by
// a later Insert.
func (t *Table) Delete(i uint32) {
	if !t.live(i) {
		panic("records: delete of a free record")
	}
	h, tag := hashOf(t.Key(i))
	inNew := t.idx.remove(h, tag, i)
	inOld := t.old.tags != nil && t.old.remove(h, tag, i)
	if !inNew && !inOld {
		panic("records: live record missing from the index")
	}
	r := t.record(i)
	if ref, _ := readKeyRef(r); !ref.inline {
		t.garbage[ref.arena] += ref.length
	}
	clear(r)
	writeFree(r, t.freeHead)
	t.freeHead = i
	t.n--
	t.migrate(migrateStep)
	t.compact(compactStep)
}

// Reserve makes room for n keys in an empty table at once: the index at
// its final size and the records' chunks, so that loading n keys allocates
// nothing more (a snapshot is loaded with the collector off). It does
// nothing to a table holding keys.
func (t *Table) Reserve(n int) {
	if t.n != 0 || t.top != 0 || n <= 0 {
		return
	}
	n = min(n, MaxRecords)
	t.idx, t.old = newIndex(sizeFor(n, 7, 8)), index{} // as full as inserting them could leave it
	for len(t.chunks)*chunkLen < n {
		t.chunks = append(t.chunks, make([]byte, min(n, chunkLen)*t.stride))
	}
}

// compact starts compacting the current arena when its garbage passes half
// of it, and moves a compaction in progress on by up to steps records:
// each long key held in the arena being emptied is copied to the current
// one and its record pointed there. Once every record has been visited the
// emptied arena is dropped.
func (t *Table) compact(steps int) {
	if !t.compacting {
		if t.garbage[t.cur] <= minArenaWork || t.garbage[t.cur]*2 <= t.arenas[t.cur].bytes {
			return
		}
		from := t.cur
		t.cur, t.compacting, t.cursor = 1-from, true, 0
		t.arenas[t.cur], t.garbage[t.cur] = arena{}, 0
	}
	from, to := 1-t.cur, t.cur
	end := min(t.top, t.cursor+uint32(steps))
	for ; t.cursor < end; t.cursor++ {
		r := t.record(t.cursor)
		ref, ok := readKeyRef(r)
		if !ok || ref.inline || ref.arena != from {
			continue
		}
		key := t.arenas[from].key(ref.offset, ref.length)
		writeLong(r, ref.length, to, t.arenas[to].add(key))
	}
	if t.cursor >= t.top {
		t.arenas[from], t.garbage[from], t.compacting = arena{}, 0, false
	}
}

// Next returns the first live record's index at or after from, and false
// when there is none. A walk from 0 (for a snapshot, in chunks, resumable
// across changes) visits every key held throughout exactly once: indices
// never move while their records are live.
func (t *Table) Next(from uint32) (uint32, bool) { return t.NextBefore(from, t.top) }

// NextBefore is Next looking no further than end (exclusive): a walk that
// must not stop its shard for long bounds the free records it passes over
// in one call.
func (t *Table) NextBefore(from, end uint32) (uint32, bool) {
	for i := from; i < min(end, t.top); i++ {
		if t.record(i)[0] != freeRec {
			return i, true
		}
	}
	return 0, false
}

// MemoryBytes returns the bytes the table has allocated: records, index
// and arena.
func (t *Table) MemoryBytes() int {
	n := (len(t.idx.tags)+len(t.old.tags))*5 + t.arenas[0].capa + t.arenas[1].capa
	for _, c := range t.chunks {
		n += len(c)
	}
	return n
}
