// Package ttl is a hierarchical timing wheel: the structure each shard uses
// to evict keys when their state becomes fresh again, and to expire keys
// with a TTL, without a goroutine or a time.Timer per key.
//
// A Wheel is not safe for concurrent use. It is owned by one goroutine (a
// shard's) and advanced by that goroutine, with the instant passed in: the
// wheel never reads a clock.
//
// Layout. Time is cut into ticks of Tick nanoseconds (1 ms), counted from the
// instant the wheel was created. There are Levels (7) levels of Slots (64)
// slots; a slot at level L spans 64^L ticks, so level 0 holds the next 64 ms
// tick by tick, level 1 the next 4 s in 64 ms slots, level 2 the next 4.4 min,
// level 3 4.7 h, level 4 12.4 days, level 5 2.2 years and level 6 139 years
// (instants further out are clamped to that horizon). A timer due at tick T
// goes to the level of the highest 6-bit digit in which T differs from the
// current tick, at the slot given by T's digit there. As the current tick
// reaches a slot of level L ≥ 1, the slot's timers cascade to lower levels;
// at level 0 they fire. A timer therefore moves down at most 6 times in its
// life, and Schedule, Cancel and reschedule are O(1): each slot is an
// intrusive doubly linked list and each level keeps a 64-bit occupancy map,
// so Advance jumps straight over empty stretches.
//
// Two wheels share that layout: Wheel links Timer values by pointer, for
// what is held by pointer (plain keys); IndexWheel (index.go) links timers
// named by 32-bit indices, for records in pointer-free tables.
//
// A timer never fires early: it is due at the first tick boundary at or
// after its instant, and fires when Advance is given an instant at or past
// that boundary.
package ttl

import (
	"math/bits"
	"time"
)

// Shape of the wheel.
const (
	Tick     = int64(time.Millisecond)
	Levels   = 7
	Slots    = 64
	slotBits = 6
	maxTicks = int64(1)<<(slotBits*Levels) - 1 // the horizon, ~139 years
	dueLevel = Levels                          // the list of timers already due
)

// Timer is one scheduled item, embedded in (or pointed to by) what it times.
// Value is for the owner; the wheel never reads it. The zero Timer is not
// scheduled.
type Timer[T any] struct {
	Value      T
	next, prev *Timer[T]
	at         int64 // instant, ns since the epoch
	level      int8  // level holding it, or dueLevel
	slot       uint8
	queued     bool
}

// Scheduled reports whether t is in a wheel.
func (t *Timer[T]) Scheduled() bool { return t.queued }

// At returns the instant t is scheduled for.
func (t *Timer[T]) At() int64 { return t.at }

// Wheel holds timers. See the package documentation.
type Wheel[T any] struct {
	dial
	n     int
	slots [Levels][Slots]*Timer[T]
	due   *Timer[T] // timers scheduled at or before cur, fired by the next Advance
}

// dial is the part of a wheel both kinds share (Wheel, with pointer links,
// and IndexWheel, with 32-bit index links): where tick 0 is, the current
// tick, and which slots hold timers.
type dial struct {
	base     int64 // instant of tick 0
	cur      int64 // current tick: every timer due at or before it has fired
	occupied [Levels]uint64
}

// New returns an empty wheel whose current instant is now.
func New[T any](now int64) *Wheel[T] {
	return &Wheel[T]{dial: dial{base: now}}
}

// Len returns the number of scheduled timers.
func (w *Wheel[T]) Len() int { return w.n }

// tickOf returns the first tick boundary at or after instant at.
func (w *dial) tickOf(at int64) int64 {
	d := at - w.base
	if d <= 0 {
		return 0
	}
	t := (d + Tick - 1) / Tick
	return min(t, maxTicks)
}

// Schedule arms t to fire at instant at, moving it if it was already
// scheduled.
func (w *Wheel[T]) Schedule(t *Timer[T], at int64) {
	if t.queued {
		w.unlink(t)
	} else {
		w.n++
		t.queued = true
	}
	t.at = at
	w.place(t)
}

// Cancel disarms t; it is a no-op if t is not scheduled.
func (w *Wheel[T]) Cancel(t *Timer[T]) {
	if !t.queued {
		return
	}
	w.unlink(t)
	t.queued = false
	w.n--
}

// place links t into the list its tick belongs to, relative to w.cur.
func (w *Wheel[T]) place(t *Timer[T]) {
	level, slot, due := w.position(t.at)
	if due {
		t.level = dueLevel
		w.push(&w.due, t)
		return
	}
	t.level, t.slot = int8(level), slot
	w.push(&w.slots[level][slot], t)
	w.occupied[level] |= 1 << slot
}

// position returns where a timer due at instant at belongs relative to
// w.cur: the level and slot, or due if its tick has been reached.
func (w *dial) position(at int64) (level int, slot uint8, due bool) {
	tick := w.tickOf(at)
	if tick <= w.cur {
		return 0, 0, true
	}
	level = (bits.Len64(uint64(tick^w.cur)) - 1) / slotBits
	return level, uint8(tick >> (slotBits * level) & (Slots - 1)), false
}

// target returns the tick Advance(now) moves to: the last one fully
// reached by now, never behind the current one.
func (w *dial) target(now int64) int64 { return max((now-w.base)/Tick, w.cur) }

func (w *Wheel[T]) push(head **Timer[T], t *Timer[T]) {
	t.prev = nil
	t.next = *head
	if *head != nil {
		(*head).prev = t
	}
	*head = t
}

func (w *Wheel[T]) unlink(t *Timer[T]) {
	var head **Timer[T]
	if t.level == dueLevel {
		head = &w.due
	} else {
		head = &w.slots[t.level][t.slot]
	}
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		*head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	}
	t.next, t.prev = nil, nil
	if t.level != dueLevel && *head == nil {
		w.occupied[t.level] &^= 1 << t.slot
	}
}

// Advance moves the wheel to instant now, calling fire for every timer due
// by then. A fired timer is no longer scheduled when fire runs, so fire may
// schedule it again, for a later instant (one already due would fire again
// in the same Advance). Advancing to an earlier instant than before does
// nothing beyond firing timers already due.
func (w *Wheel[T]) Advance(now int64, fire func(*Timer[T])) {
	target := w.target(now)
	for {
		if w.due != nil {
			t := w.due
			w.Cancel(t)
			fire(t)
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
		head := w.slots[level][slot]
		w.slots[level][slot] = nil
		w.occupied[level] &^= 1 << slot
		for t := head; t != nil; {
			next := t.next
			t.next, t.prev = nil, nil
			w.place(t)
			t = next
		}
	}
}

// next finds the earliest occupied slot: its level, index and first tick.
func (w *dial) next() (level int, slot uint8, start int64, ok bool) {
	start = -1
	for l := range Levels {
		shift := uint(slotBits * l)
		digit := uint(w.cur>>shift) & (Slots - 1)
		ahead := w.occupied[l] & (^uint64(0) << digit)
		if ahead == 0 {
			continue
		}
		s := uint(bits.TrailingZeros64(ahead))
		block := w.cur >> (shift + slotBits) << (shift + slotBits)
		st := block | int64(s)<<shift
		if l > 0 && st <= w.cur {
			// Level l's current slot can only be occupied between a jump
			// and its cascade, which happen together; treat it as due.
			st = w.cur
		}
		if start < 0 || st < start {
			level, slot, start, ok = l, uint8(s), st, true
		}
	}
	return
}

// Soonest returns a timer among those due soonest, or nil if none is
// scheduled. It is exact to the resolution of the slot it is found in
// (1 ms at level 0, coarser further out) and does not change the wheel.
func (w *Wheel[T]) Soonest() *Timer[T] {
	if w.due != nil {
		return w.due
	}
	level, slot, _, ok := w.next()
	if !ok {
		return nil
	}
	return w.slots[level][slot]
}
