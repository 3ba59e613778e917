package records

import (
	"encoding/binary"
	"math"

	"github.com/rlserver/rlserver/internal/algorithms"
)

// A record is a fixed number of bytes (its table's stride): a key area of
// keyArea bytes, then the state, encoded for the table's algorithm. Fields
// are little-endian and need no alignment, so records pack end to end in a
// chunk's []byte, which holds no pointers for the garbage collector to scan.
//
//	key area (16 bytes), first byte:
//	  0..15  the key's length; the key's bytes follow, inline
//	  0xFF   a long key: byte 1 which of the table's two arenas holds it
//	         (0 or 1), bytes 4..7 its length (uint32), 8..15 its place
//	         in that arena (uint64: block and offset, arena.go)
//	  0xFE   a free record: bytes 4..7 the next free record's index
//
//	state, by algorithm (Count and Aux as in algorithms.State):
//	  token_bucket,    Stamp int64 | Aux int64 | Count uint32   20 bytes
//	  leaky_bucket
//	  sliding_counter  Stamp int64 | Count uint32 | Aux uint32  16 bytes
//	  fixed_window     Stamp int64 | Count uint32               12 bytes
//
// Every valid state (algorithms.Valid) fits: counts are at most
// algorithms.MaxLimit, below 2^32, and a fixed window's Aux is 0. A bucket's
// Aux is drain progress, below its window, which may exceed 2^32 ns.
const (
	keyArea   = 16
	maxInline = keyArea - 1 // longest key held inline, in bytes
	longKey   = 0xFF
	freeRec   = 0xFE
)

// stateSize returns the bytes alg's state takes in a record, and 0 for an
// algorithm records do not hold (the sliding log keeps a list of any length).
func stateSize(alg algorithms.Algorithm) int {
	switch alg {
	case algorithms.TokenBucket, algorithms.LeakyBucket:
		return 20
	case algorithms.SlidingCounter:
		return 16
	case algorithms.FixedWindow:
		return 12
	}
	return 0
}

// Supports reports whether a Table can hold alg's states.
func Supports(alg algorithms.Algorithm) bool { return stateSize(alg) > 0 }

// Stride returns the bytes one record of alg takes, or 0 if records do not
// hold alg's state.
func Stride(alg algorithms.Algorithm) int {
	if n := stateSize(alg); n > 0 {
		return keyArea + n
	}
	return 0
}

// fits reports whether st can be encoded for alg without loss.
func fits(alg algorithms.Algorithm, st algorithms.State) bool {
	if st.Log != nil || st.Count < 0 || st.Count > math.MaxUint32 {
		return false
	}
	switch alg {
	case algorithms.TokenBucket, algorithms.LeakyBucket:
		return true
	case algorithms.SlidingCounter:
		return st.Aux >= 0 && st.Aux <= math.MaxUint32
	case algorithms.FixedWindow:
		return st.Aux == 0
	}
	return false
}

// encodeState writes st into b, the state part of a record of alg. st must
// fit (fits). Each layout takes b as an array of its size, so the field
// accesses need no bounds checks.
func encodeState(alg algorithms.Algorithm, b []byte, st algorithms.State) {
	le := binary.LittleEndian
	switch alg {
	case algorithms.TokenBucket, algorithms.LeakyBucket:
		a := (*[20]byte)(b)
		le.PutUint64(a[0:8], uint64(st.Stamp))
		le.PutUint64(a[8:16], uint64(st.Aux))
		le.PutUint32(a[16:20], uint32(st.Count))
	case algorithms.SlidingCounter:
		a := (*[16]byte)(b)
		le.PutUint64(a[0:8], uint64(st.Stamp))
		le.PutUint32(a[8:12], uint32(st.Count))
		le.PutUint32(a[12:16], uint32(st.Aux))
	case algorithms.FixedWindow:
		a := (*[12]byte)(b)
		le.PutUint64(a[0:8], uint64(st.Stamp))
		le.PutUint32(a[8:12], uint32(st.Count))
	}
}

// decodeState reads the state part b of a record of alg.
func decodeState(alg algorithms.Algorithm, b []byte) algorithms.State {
	le := binary.LittleEndian
	switch alg {
	case algorithms.TokenBucket, algorithms.LeakyBucket:
		a := (*[20]byte)(b)
		return algorithms.State{Stamp: int64(le.Uint64(a[0:8])), Aux: int64(le.Uint64(a[8:16])), Count: int64(le.Uint32(a[16:20]))}
	case algorithms.SlidingCounter:
		a := (*[16]byte)(b)
		return algorithms.State{Stamp: int64(le.Uint64(a[0:8])), Count: int64(le.Uint32(a[8:12])), Aux: int64(le.Uint32(a[12:16]))}
	case algorithms.FixedWindow:
		a := (*[12]byte)(b)
		return algorithms.State{Stamp: int64(le.Uint64(a[0:8])), Count: int64(le.Uint32(a[8:12]))}
	}
	return algorithms.State{}
}

// keyRef is where a record's key is: inline (the bytes of its key area) or
// in the arena.
type keyRef struct {
	inline bool
	length int
	arena  uint8  // which of the table's arenas, for a long key
	offset uint64 // its place in that arena (arena.add)
}

// readKeyRef decodes a record's key area. ok is false for a free record.
func readKeyRef(k []byte) (ref keyRef, ok bool) {
	switch k[0] {
	case freeRec:
		return keyRef{}, false
	case longKey:
		le := binary.LittleEndian
		return keyRef{length: int(le.Uint32(k[4:8])), arena: k[1] & 1, offset: le.Uint64(k[8:16])}, true
	}
	return keyRef{inline: true, length: int(k[0])}, true
}

// writeInline stores a key of at most maxInline bytes in key area k.
func writeInline(k []byte, key []byte) {
	k[0] = byte(len(key))
	n := copy(k[1:], key)
	clear(k[1+n:])
}

// writeLong points key area k at a key of length bytes at offset in arena
// (0 or 1).
func writeLong(k []byte, length int, arena uint8, offset uint64) {
	le := binary.LittleEndian
	k[0], k[1], k[2], k[3] = longKey, arena&1, 0, 0
	le.PutUint32(k[4:8], uint32(length))
	le.PutUint64(k[8:16], offset)
}

// writeFree marks key area k free, linking it to the next free record.
func writeFree(k []byte, next uint32) {
	clear(k)
	k[0] = freeRec
	binary.LittleEndian.PutUint32(k[4:8], next)
}

// freeNext returns the next free record after the free record with key
// area k.
func freeNext(k []byte) uint32 { return binary.LittleEndian.Uint32(k[4:8]) }
