package records

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/rlserver/rlserver/internal/algorithms"
)

// FuzzRecord checks the record encoding both ways for every algorithm
// records hold: any state bytes decode to a state that encodes back to the
// same bytes, a state that fits encodes to bytes that decode to it, and a
// key of any length is read back as it was written, inline or in the arena,
// next to a table's other keys.
func FuzzRecord(f *testing.F) {
	f.Add(uint8(1), []byte("tb:000000012345"), int64(1_700_000_000_000_000_000), int64(999), int64(12345), make([]byte, 20))
	f.Add(uint8(3), []byte("a key longer than fifteen"), int64(0), int64(1_000_000_000), int64(0), bytes.Repeat([]byte{0xFF}, 20))
	f.Add(uint8(5), []byte(""), int64(-1), int64(-1), int64(-1), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, a uint8, key []byte, stamp, count, aux int64, raw []byte) {
		alg := algorithms.Algorithm(a%5 + 1)
		if !Supports(alg) {
			if Stride(alg) != 0 {
				t.Fatalf("%s: stride %d for an algorithm records do not hold", alg, Stride(alg))
			}
			return
		}
		n := stateSize(alg)
		// Bytes → state → bytes.
		b := make([]byte, n)
		copy(b, raw)
		st := decodeState(alg, b)
		if !fits(alg, st) {
			t.Fatalf("%s: decoded %+v does not fit", alg, st)
		}
		again := make([]byte, n)
		encodeState(alg, again, st)
		if !bytes.Equal(again, b) {
			t.Fatalf("%s: % x decodes to %+v, encodes to % x", alg, b, st, again)
		}
		// State → bytes → state, for states that fit.
		st = algorithms.State{Stamp: stamp, Count: count, Aux: aux}
		if fits(alg, st) {
			encodeState(alg, b, st)
			if got := decodeState(alg, b); got.Stamp != st.Stamp || got.Count != st.Count || got.Aux != st.Aux {
				t.Fatalf("%s: %+v encodes to % x, decodes to %+v", alg, st, b, got)
			}
		} else if count >= 0 && count <= 1<<32-1 && (alg == algorithms.TokenBucket || alg == algorithms.LeakyBucket) {
			t.Fatalf("%s: %+v refused", alg, st)
		}
		// Keys, in a table among others.
		tb := New(alg)
		other := tb.Insert([]byte("other-key-in-the-arena"), algorithms.State{Count: 1})
		if bytes.Equal(key, []byte("other-key-in-the-arena")) {
			return
		}
		i := tb.Insert(key, algorithms.State{Stamp: 5})
		if !bytes.Equal(tb.Key(i), key) || !bytes.Equal(tb.Key(other), []byte("other-key-in-the-arena")) {
			t.Fatalf("key %q read back as %q (other %q)", key, tb.Key(i), tb.Key(other))
		}
		if j, ok := tb.Lookup(key); !ok || j != i || tb.State(j).Stamp != 5 {
			t.Fatalf("key %q not found (%d %v)", key, j, ok)
		}
		r := tb.record(i)
		if ref, ok := readKeyRef(r); !ok || ref.length != len(key) || ref.inline != (len(key) <= maxInline) {
			t.Fatalf("key %q: ref %+v", key, ref)
		}
		tb.Delete(i)
		if r[0] != freeRec || binary.LittleEndian.Uint32(r[4:8]) != none {
			t.Fatalf("deleted record % x", r)
		}
		if _, ok := tb.Lookup(key); ok || tb.Len() != 1 {
			t.Fatalf("key %q found after delete", key)
		}
	})
}
