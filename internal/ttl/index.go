package ttl

// IndexWheel is the timing wheel of the package documentation over timers
// named by 32-bit indices instead of pointers: timer i is the eviction timer
// of record i of a table whose records are addressed by index (see
// internal/records). Its links are indices too, kept in chunks of a slice
// of pointer-free structs, so the garbage collector has nothing to scan per
// timer, and a timer costs 16 bytes (two links and its instant) where a
// Timer[T] costs 40 with its Value.
//
// The contract is Wheel's: Schedule, Cancel and reschedule are O(1), a timer
// never fires early, and the wheel never reads a clock. Indices run from 0
// to MaxIndex; storage grows to the highest index scheduled and is kept
// (like the table whose records it times, which reuses indices).
//
// An IndexWheel is not safe for concurrent use: its owner (a shard) alone
// schedules, cancels and advances it.
type IndexWheel struct {
	dial
	n      int
	chunks [][]link
	slots  [Levels][Slots]uint32 // list heads, none when empty
	due    uint32                // timers at or before cur, fired by the next Advance
}

// MaxIndex is the largest index an IndexWheel times. The values above it
// are the lists' heads, named in links (see link).
const MaxIndex = headBase - 1

const (
	none     = ^uint32(0)     // no timer: the end of a list, an empty head
	headBase = none - 1 - 512 // prev of a list's first timer: headBase + list number
	dueList  = Levels * Slots // list number of the due list
	// chunkBits sets the links per chunk: 1024 links, 16 KiB, so growth
	// never copies the links already held.
	chunkBits = 10
	chunkLen  = 1 << chunkBits
	// firstChunk is the links the first chunk starts with; it doubles up
	// to chunkLen as indices grow, so a wheel timing a few records costs
	// a few hundred bytes, not a whole chunk.
	firstChunk = 8
)

// link is one timer's place in its list. prev is none when the timer is not
// scheduled, and headBase + the list's number when it is first in its list,
// so unlinking needs no level or slot field.
type link struct {
	next, prev uint32
	at         int64 // instant, ns since the epoch
}

// NewIndex returns an empty index wheel whose current instant is now.
func NewIndex(now int64) *IndexWheel {
	w := &IndexWheel{dial: dial{base: now}, due: none}
	for l := range w.slots {
		for s := range w.slots[l] {
			w.slots[l][s] = none
		}
	}
	return w
}

// Len returns the number of scheduled timers.
func (w *IndexWheel) Len() int { return w.n }

// link returns timer i's links, growing the storage to hold i.
func (w *IndexWheel) link(i uint32) *link {
	c, j := int(i>>chunkBits), int(i&(chunkLen-1))
	if c >= len(w.chunks) || j >= len(w.chunks[c]) {
		w.grow(c, j)
	}
	return &w.chunks[c][j]
}

// grow makes room for link j of chunk c: the first chunk doubles, up to a
// whole chunk; later ones are whole from the start. Growing moves the first
// chunk's links, so it happens only for an index not yet scheduled (the
// first link call of Schedule or Reserve): the links of scheduled timers
// that an operation holds stay where they are.
func (w *IndexWheel) grow(c, j int) {
	if c > 0 && len(w.chunks) > 0 && len(w.chunks[0]) < chunkLen {
		w.grow(0, chunkLen-1) // chunks before c are whole
	}
	for len(w.chunks) <= c {
		n := chunkLen
		if len(w.chunks) == 0 && c == 0 {
			n = firstChunk
		}
		w.chunks = append(w.chunks, unlinked(n, 0))
	}
	if ch := w.chunks[c]; j >= len(ch) {
		n := len(ch)
		for n <= j {
			n *= 2
		}
		grown := unlinked(min(n, chunkLen), len(ch))
		copy(grown, ch)
		w.chunks[c] = grown
	}
}

// unlinked returns n links, those from `from` on not scheduled.
func unlinked(n, from int) []link {
	ch := make([]link, n)
	for k := from; k < n; k++ {
		ch[k].prev = none
	}
	return ch
}

// Reserve makes room for the timers of indices below n at once, so that
// scheduling them allocates nothing more.
func (w *IndexWheel) Reserve(n int) {
	if n > 0 {
		w.link(uint32(min(n-1, int(MaxIndex))))
	}
}

// Scheduled reports whether timer i is in the wheel.
func (w *IndexWheel) Scheduled(i uint32) bool {
	c, j := int(i>>chunkBits), int(i&(chunkLen-1))
	return c < len(w.chunks) && j < len(w.chunks[c]) && w.chunks[c][j].prev != none
}

// At returns the instant timer i is scheduled for; it must be scheduled.
func (w *IndexWheel) At(i uint32) int64 { return w.link(i).at }

// Schedule arms timer i (at most MaxIndex) to fire at instant at, moving it
// if it was already scheduled.
func (w *IndexWheel) Schedule(i uint32, at int64) {
	if i > MaxIndex {
		panic("ttl: timer index out of range")
	}
	l := w.link(i)
	if l.prev != none {
		w.unlink(i, l)
	} else {
		w.n++
	}
	l.at = at
	w.place(i, l)
}

// Cancel disarms timer i; it is a no-op if i is not scheduled.
func (w *IndexWheel) Cancel(i uint32) {
	if !w.Scheduled(i) {
		return
	}
	l := w.link(i)
	w.unlink(i, l)
	l.prev = none
	w.n--
}

// head returns the head of list number list (a slot, or the due list).
func (w *IndexWheel) head(list uint32) *uint32 {
	if list == dueList {
		return &w.due
	}
	return &w.slots[list/Slots][list%Slots]
}

// place links timer i into the list its instant belongs to.
func (w *IndexWheel) place(i uint32, l *link) {
	level, slot, due := w.position(l.at)
	list := uint32(dueList)
	if !due {
		list = uint32(level*Slots) + uint32(slot)
		w.occupied[level] |= 1 << slot
	}
	h := w.head(list)
	l.prev = headBase + list
	l.next = *h
	if *h != none {
		w.link(*h).prev = i
	}
	*h = i
}

// unlink takes timer i (whose links are l) out of its list; l.prev is left
// for the caller to set.
func (w *IndexWheel) unlink(i uint32, l *link) {
	if l.next != none {
		w.link(l.next).prev = l.prev
	}
	if l.prev < headBase {
		w.link(l.prev).next = l.next
	} else {
		list := l.prev - headBase
		*w.head(list) = l.next
		if l.next == none && list != dueList {
			w.occupied[list/Slots] &^= 1 << (list % Slots)
		}
	}
	l.next = none
}

// Advance moves the wheel to instant now, calling fire for every timer due
// by then, as Wheel.Advance does: a fired timer is no longer scheduled when
// fire runs, so fire may schedule it again for a later instant.
func (w *IndexWheel) Advance(now int64, fire func(i uint32)) {
	target := w.target(now)
	for {
		if w.due != none {
			i := w.due
			w.Cancel(i)
			fire(i)
			continue
		}
		level, slot, start, ok := w.next()
		if !ok || start > target {
			w.cur = target
			return
		}
		w.cur = start
		// Take the slot's list and re-place each timer: at level 0 they
		// are due now and land in the due list; above, they cascade down.
		i := w.slots[level][slot]
		w.slots[level][slot] = none
		w.occupied[level] &^= 1 << slot
		for i != none {
			l := w.link(i)
			next := l.next
			w.place(i, l)
			i = next
		}
	}
}

// Soonest returns a timer among those due soonest, with the same precision
// as Wheel.Soonest, and false if none is scheduled. It does not change the
// wheel.
func (w *IndexWheel) Soonest() (uint32, bool) {
	if w.due != none {
		return w.due, true
	}
	level, slot, _, ok := w.next()
	if !ok {
		return 0, false
	}
	return w.slots[level][slot], true
}
