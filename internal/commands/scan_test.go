package commands

import (
	"fmt"
	"testing"
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
