package records

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestArena: every key added reads back from its place, however the keys'
// sizes fall on block edges (a key larger than a block included); a key is
// never moved by later adds; blocks grow from firstBlock to maxBlock.
func TestArena(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 18))
	var a arena
	type placed struct {
		place uint64
		key   []byte
		at    *byte // where its bytes were first written
	}
	var all []placed
	total := 0
	for n := range 3000 {
		size := 16 + rng.IntN(600)
		if n == 1000 {
			size = 3 * maxBlock // its own block
		}
		key := make([]byte, size)
		for i := range key {
			key[i] = byte(rng.Uint32())
		}
		p := a.add(key)
		all = append(all, placed{p, key, &a.key(p, size)[0]})
		total += size
	}
	for i, k := range all {
		got := a.key(k.place, len(k.key))
		if !bytes.Equal(got, k.key) || &got[0] != k.at {
			t.Fatalf("key %d (%d bytes) at %x: read back differently, or moved", i, len(k.key), k.place)
		}
	}
	if a.bytes != total || a.capa < total {
		t.Fatalf("arena counts %d bytes written and %d allocated, keys hold %d", a.bytes, a.capa, total)
	}
	if c, want := cap(a.blocks[0]), max(firstBlock, len(all[0].key)); c != want {
		t.Fatalf("first block of %d bytes, want %d", c, want)
	}
	if c := cap(a.blocks[len(a.blocks)-1]); c != maxBlock {
		t.Fatalf("last block of %d bytes, want %d", c, maxBlock)
	}
	for i, b := range a.blocks {
		if cap(b) > maxBlock && cap(b) != len(b) {
			t.Fatalf("block %d of %d bytes holds %d: only a key larger than a block gets a larger block", i, cap(b), len(b))
		}
	}
}
