package values

import (
	"fmt"
	"math"
)

// The invariants of each type, checked from scratch. Tests call them after
// every operation of their random sequences.

func (h *Hash) checkConsistency() error {
	live, dead, bytes := 0, 0, 0
	for i, e := range h.entries {
		if e.value == nil {
			dead++
			if e.field != "" {
				return fmt.Errorf("tombstone %d keeps field %q", i, e.field)
			}
			continue
		}
		live++
		bytes += len(e.field) + len(e.value)
		if j, ok := h.index[e.field]; !ok || j != i {
			return fmt.Errorf("field %q at %d indexed at %d (%v)", e.field, i, j, ok)
		}
	}
	switch {
	case live != len(h.index):
		return fmt.Errorf("%d live entries, %d indexed", live, len(h.index))
	case dead != h.dead:
		return fmt.Errorf("%d tombstones, counted %d", dead, h.dead)
	case h.dead > 0 && h.dead*2 >= len(h.entries):
		return fmt.Errorf("%d tombstones of %d entries left uncompacted", h.dead, len(h.entries))
	case bytes != h.bytes:
		return fmt.Errorf("bytes %d, counted %d", bytes, h.bytes)
	case h.Size() != bytes+live*HashEntryOverhead:
		return fmt.Errorf("Size %d", h.Size())
	}
	return nil
}

func (l *List) checkConsistency() error {
	c := len(l.ring)
	if c&(c-1) != 0 || l.n > c || l.n > 0 && c == 0 {
		return fmt.Errorf("%d elements in a ring of %d", l.n, c)
	}
	if c > minRing && l.n < c/4 && l.n > 0 {
		return fmt.Errorf("ring of %d left under a quarter full (%d)", c, l.n)
	}
	bytes := 0
	for i := 0; i < l.n; i++ {
		e := l.ring[l.slot(i)]
		if e == nil {
			return fmt.Errorf("element %d is nil", i)
		}
		bytes += len(e)
	}
	for i := l.n; i < c; i++ {
		if e := l.ring[l.slot(i)]; len(e) != 0 || cap(e) > maxKeptElement {
			return fmt.Errorf("free slot %d keeps %d bytes (cap %d)", i, len(e), cap(e))
		}
	}
	if bytes != l.bytes {
		return fmt.Errorf("bytes %d, counted %d", bytes, l.bytes)
	}
	return nil
}

func (z *ZSet) checkConsistency() error {
	if z.tree.Len() != len(z.dict) {
		return fmt.Errorf("%d tree items, %d map entries", z.tree.Len(), len(z.dict))
	}
	var err error
	var prev zitem
	bytes, i := 0, 0
	z.tree.Scan(func(it zitem) bool {
		switch {
		case math.IsNaN(it.score) || it.score == 0 && math.Signbit(it.score):
			err = fmt.Errorf("member %q has score %v", it.member, it.score)
		case i > 0 && !zless(prev, it):
			err = fmt.Errorf("member %q out of order after %q", it.member, prev.member)
		case z.dict[it.member] != it.score:
			err = fmt.Errorf("member %q: tree score %v, map score %v", it.member, it.score, z.dict[it.member])
		}
		if at, _ := z.tree.GetAt(i); at != it {
			err = fmt.Errorf("rank %d holds %v, walk found %v", i, at, it)
		}
		prev, i = it, i+1
		bytes += len(it.member)
		return err == nil
	})
	if err == nil && bytes != z.bytes {
		err = fmt.Errorf("bytes %d, counted %d", bytes, z.bytes)
	}
	return err
}
