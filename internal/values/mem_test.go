package values

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
)

// TestBytesPerElement measures, with runtime.MemStats, the live heap one
// more element costs beyond its own bytes, for each type filled with
// memElements small elements, and checks the per-element overheads Size
// adds against it: Size must not undercount memory by more than a quarter,
// nor overcount it by more than half. docs/datatypes.md quotes its output
// (go test -run BytesPerElement -v ./internal/values/).
func TestBytesPerElement(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates some 100 MB")
	}
	const memElements = 200_000
	key := func(i int) []byte { return []byte(fmt.Sprintf("member:%08d", i)) } // 15 bytes
	val := []byte("12345678")                                                  // 8 bytes
	tests := []struct {
		name     string
		overhead int
		payload  int // bytes of one element
		fill     func() (keep any, size int)
	}{
		{"hash", HashEntryOverhead, 15 + 8, func() (any, int) {
			h := NewHash()
			for i := range memElements {
				_, _ = h.Set(Limits{MaxSize: 1 << 30}, [][]byte{key(i), val})
			}
			return h, h.Size()
		}},
		{"list", ListEntryOverhead, 15, func() (any, int) {
			l := NewList()
			for i := range memElements {
				_, _ = l.PushRight(Limits{MaxSize: 1 << 30}, key(i))
			}
			return l, l.Size()
		}},
		{"sorted set", ZSetEntryOverhead, 15, func() (any, int) {
			z := NewZSet()
			for i := range memElements {
				_, _ = z.Add(Limits{MaxSize: 1 << 30}, ZAddOptions{}, [][]byte{[]byte(strconv.Itoa(i)), key(i)})
			}
			return z, z.Size()
		}},
	}
	for _, tt := range tests {
		before := liveHeap()
		keep, size := tt.fill()
		after := liveHeap()
		runtime.KeepAlive(keep)
		perElement := float64(after-before) / memElements
		measured := perElement - float64(tt.payload)
		t.Logf("%-10s %6.1f heap bytes per element of %d bytes: %5.1f overhead measured, %d counted (Size/heap %.2f)",
			tt.name, perElement, tt.payload, measured, tt.overhead, float64(size)/float64(after-before))
		if float64(tt.overhead) < 0.75*measured || float64(tt.overhead) > 1.5*measured {
			t.Errorf("%s: overhead %d counted, %.1f measured", tt.name, tt.overhead, measured)
		}
	}
}

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
