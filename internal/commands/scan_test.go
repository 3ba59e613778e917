package commands

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rlserver/rlserver/internal/values"
)

// elements yields n elements named e0… with the hashes given.
func elements(hashes ...uint64) (int, func(yield func(scanElement))) {
	return len(hashes), func(yield func(scanElement)) {
		for i, h := range hashes {
			yield(scanElement{h: h, name: fmt.Sprint("e", i)})
		}
	}
}

func names(picked []scanElement) string {
	s := ""
	for _, e := range picked {
		s += e.name + " "
	}
	return s
}

// TestScanValuePages: a value's elements come by hash from the cursor, at least 1/valueScanParts of them per call, elements sharing a
// hash in the same call, and a small value whole.
func TestScanValuePages(t *testing.T) {
	// 200 elements, hashes 200…1 (reverse of their names) but e0's, which
	// ties with e187 at 13, the last hash of the first page.
	hashes := make([]uint64, 200)
	for i := range hashes {
		hashes[i] = uint64(200 - i)
	}
	hashes[0] = 13
	n, each := elements(hashes...)
	picked, next := scanValue(n, each, 0, 5)
	// ⌈200/16⌉ = 13 wanted: hashes 1…13, 13 twice: 14 elements.
	if len(picked) != 14 || next != 14 {
		t.Fatalf("first page: %d elements (%s), next %d", len(picked), names(picked), next)
	}
	for _, e := range picked {
		if e.h > 13 {
			t.Errorf("first page: %s, hash %d", e.name, e.h)
		}
	}
	seen := map[string]int{}
	cursor, calls := uint64(0), 0
	for {
		picked, next := scanValue(n, each, cursor, 5)
		calls++
		for _, e := range picked {
			seen[e.name]++
		}
		if next == 0 {
			break
		}
		if next <= cursor {
			t.Fatalf("cursor went from %d to %d", cursor, next)
		}
		cursor = next
	}
	if len(seen) != 200 || calls > valueScanParts {
		t.Fatalf("%d elements in %d calls", len(seen), calls)
	}
	for name, c := range seen {
		if c != 1 {
			t.Errorf("%s returned %d times", name, c)
		}
	}
	// A small value comes whole, whatever the cursor's place in it.
	n, each = elements(5, 1, 9)
	if picked, next := scanValue(n, each, 2, 1); len(picked) != 2 || next != 0 {
		t.Fatalf("small value from 2: %s next %d", names(picked), next)
	}
}

// TestScanValueRandom: over random hashes with duplicates, every page is
// exactly the elements with hashes in [cursor, next), and a whole
// iteration returns each element once.
func TestScanValueRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{1, 129, 1000, 5000} {
		hashes := make([]uint64, size)
		for i := range hashes {
			hashes[i] = rng.Uint64N(uint64(size)) * (math.MaxUint64 / uint64(size)) // duplicates likely
		}
		n, each := elements(hashes...)
		seen := map[string]int{}
		cursor := uint64(0)
		for calls := 1; ; calls++ {
			count := 1 + rng.IntN(300)
			picked, next := scanValue(n, each, cursor, count)
			got := map[string]bool{}
			for _, e := range picked {
				got[e.name] = true
			}
			in := 0
			for i, h := range hashes {
				if h >= cursor && (next == 0 || h < next) {
					in++
					seen[fmt.Sprint("e", i)]++
					if !got[fmt.Sprint("e", i)] {
						t.Fatalf("%d elements, cursor %d: e%d (hash %d) not picked", size, cursor, i, h)
					}
				}
			}
			if in != len(picked) || len(picked) < min(count, n-len(seen)+in) && next != 0 {
				t.Fatalf("%d elements, cursor %d: %d picked, %d in [cursor, %d)", size, cursor, len(picked), in, next)
			}
			if next == 0 {
				break
			}
			if next <= cursor || calls > valueScanParts+1 {
				t.Fatalf("%d elements: cursor %d then %d after %d calls", size, cursor, next, calls)
			}
			cursor = next
		}
		if len(seen) != size {
			t.Fatalf("%d elements: %d seen", size, len(seen))
		}
		for name, c := range seen {
			if c != 1 {
				t.Fatalf("%d elements: %s %d times", size, name, c)
			}
		}
	}
}

func TestParseCursor(t *testing.T) {
	for in, want := range map[string]uint64{"": 0, "0": 0, "+7": 7, "-1": 1<<64 - 1, "-0": 0,
		"18446744073709551615": 1<<64 - 1, "-18446744073709551615": 1, "007": 7} {
		if got, err := parseCursor([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{" 1", "1 ", "+", "-", "1a", "18446744073709551616", "-18446744073709551616", "0x1", "1.0"} {
		if _, err := parseCursor([]byte(in)); err != errInvalidCursor {
			t.Errorf("%q: %v, want invalid cursor", in, err)
		}
	}
}

// BenchmarkHScanCall measures one HSCAN page of a 100,000-field hash (a
// call reads the whole value, and returns 1/16 of it).
func BenchmarkHScanCall(b *testing.B) {
	h := values.NewHash()
	for i := range 100_000 {
		if _, err := h.Set(values.Limits{}, [][]byte{fmt.Appendf(nil, "field:%d", i), []byte("v")}); err != nil {
			b.Fatal(err)
		}
	}
	each := func(yield func(scanElement)) {
		for f, v := range h.All() {
			yield(scanElement{h: elementHash(f), name: f, val: v})
		}
	}
	b.ReportAllocs()
	cursor := uint64(0)
	for b.Loop() {
		_, cursor = scanValue(h.Len(), each, cursor, 10)
	}
}
