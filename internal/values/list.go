package values

import "iter"

// List is a Redis list: a sequence of byte strings, pushed and popped at
// both ends in O(1) amortised time, indexed in O(1) and ranged in O(n).
//
// It is a ring buffer whose capacity is a power of two, doubled when full
// and halved when less than a quarter used. An element removed by Trim or
// Rem leaves its array in its slot (up to maxKeptElement bytes), for the
// next push into that slot to reuse: the moving-window pattern (LPUSH then
// LTRIM to a fixed length) then allocates nothing. Popped elements are
// handed to the caller and never reused.
//
// Size is Σ len(element) + ListEntryOverhead per element, kept up to date
// in O(1) per element changed.
//
// A List is not safe for concurrent use: it belongs to the goroutine that
// owns its key. Element slices returned by Index, AppendRange and All alias
// its storage and stay valid until the next call that changes the list;
// popped elements belong to the caller.
type List struct {
	ring  [][]byte // len(ring) is 0 or a power of two
	head  int      // ring index of the first element
	n     int      // elements
	bytes int      // Σ len(element)
}

const (
	minRing = 8
	// maxKeptElement is the largest array a removed element leaves in its
	// slot for reuse; larger ones are released at once.
	maxKeptElement = 64
)

// NewList returns an empty list.
func NewList() *List { return &List{} }

// Size implements keyspace.Value: the bytes the list holds, with
// ListEntryOverhead per element.
func (l *List) Size() int { return l.bytes + l.n*ListEntryOverhead }

// Len returns the number of elements (LLEN).
func (l *List) Len() int { return l.n }

// slot returns the ring index of the element at position i (0 <= i < n).
func (l *List) slot(i int) int { return (l.head + i) & (len(l.ring) - 1) }

// PushLeft inserts the elements at the head one after another, so the last
// one ends first, as LPUSH does, and returns the new length. A result over
// lim is a *LimitError and changes nothing.
func (l *List) PushLeft(lim Limits, elems ...[]byte) (int, error) {
	if err := l.checkPush(lim, elems); err != nil {
		return 0, err
	}
	l.reserve(l.n + len(elems))
	for _, e := range elems {
		l.head = (l.head - 1) & (len(l.ring) - 1)
		l.ring[l.head] = copyInto(l.ring[l.head], e)
		l.n++
		l.bytes += len(e)
	}
	return l.n, nil
}

// PushRight appends the elements at the tail (RPUSH) and returns the new
// length. A result over lim is a *LimitError and changes nothing.
func (l *List) PushRight(lim Limits, elems ...[]byte) (int, error) {
	if err := l.checkPush(lim, elems); err != nil {
		return 0, err
	}
	l.reserve(l.n + len(elems))
	for _, e := range elems {
		s := l.slot(l.n)
		l.ring[s] = copyInto(l.ring[s], e)
		l.n++
		l.bytes += len(e)
	}
	return l.n, nil
}

func (l *List) checkPush(lim Limits, elems [][]byte) error {
	add := 0
	for _, e := range elems {
		add += len(e) + ListEntryOverhead
	}
	return lim.check("list", l.n, l.n+len(elems), l.Size(), l.Size()+add)
}

// reserve grows the ring to hold n elements.
func (l *List) reserve(n int) {
	if n <= len(l.ring) {
		return
	}
	c := max(len(l.ring), minRing)
	for c < n {
		c *= 2
	}
	l.resize(c)
}

// resize moves the elements into a new ring of capacity c (a power of two
// >= n), first at index 0.
func (l *List) resize(c int) {
	ring := make([][]byte, c)
	for i := 0; i < l.n; i++ {
		ring[i] = l.ring[l.slot(i)]
	}
	l.ring, l.head = ring, 0
}

// shrink halves the ring while it is less than a quarter used, down to
// minRing (an emptied list keeps that much, for a push to reuse).
func (l *List) shrink() {
	c := len(l.ring)
	for c > minRing && l.n < c/4 {
		c /= 2
	}
	if c < len(l.ring) {
		l.resize(c)
	}
}

// PopLeft removes and returns the first element (LPOP without a count).
func (l *List) PopLeft() ([]byte, bool) {
	if l.n == 0 {
		return nil, false
	}
	e := l.take(l.head)
	l.head = (l.head + 1) & (len(l.ring) - 1)
	l.n--
	l.shrink()
	return e, true
}

// PopRight removes and returns the last element (RPOP without a count).
func (l *List) PopRight() ([]byte, bool) {
	if l.n == 0 {
		return nil, false
	}
	e := l.take(l.slot(l.n - 1))
	l.n--
	l.shrink()
	return e, true
}

// take empties slot s and returns its element, whose array is now the
// caller's.
func (l *List) take(s int) []byte {
	e := l.ring[s]
	l.ring[s] = nil
	l.bytes -= len(e)
	return e
}

// AppendPopLeft removes up to count elements from the head and appends
// them to dst in order (LPOP with a count); count <= 0 pops nothing. The
// caller deletes the key when the list is left empty, as Redis does.
func (l *List) AppendPopLeft(dst [][]byte, count int) [][]byte {
	for ; count > 0; count-- {
		e, ok := l.PopLeft()
		if !ok {
			break
		}
		dst = append(dst, e)
	}
	return dst
}

// AppendPopRight removes up to count elements from the tail and appends
// them to dst, last element first (RPOP with a count).
func (l *List) AppendPopRight(dst [][]byte, count int) [][]byte {
	for ; count > 0; count-- {
		e, ok := l.PopRight()
		if !ok {
			break
		}
		dst = append(dst, e)
	}
	return dst
}

// Index returns the element at index i, counting from the end when
// negative (-1 is the last), and false outside the list (LINDEX).
func (l *List) Index(i int) ([]byte, bool) {
	if i < 0 {
		i += l.n
	}
	if i < 0 || i >= l.n {
		return nil, false
	}
	return l.ring[l.slot(i)], true
}

// Set replaces the element at index i (negative from the end) with a copy
// of value (LSET). Errors: ErrIndexOutOfRange, a *LimitError; nothing
// changes on an error.
func (l *List) Set(lim Limits, i int, value []byte) error {
	if i < 0 {
		i += l.n
	}
	if i < 0 || i >= l.n {
		return ErrIndexOutOfRange
	}
	s := l.slot(i)
	if err := lim.check("list", l.n, l.n, l.Size(), l.Size()+len(value)-len(l.ring[s])); err != nil {
		return err
	}
	l.bytes += len(value) - len(l.ring[s])
	l.ring[s] = copyInto(l.ring[s], value)
	return nil
}

// AppendRange appends the elements from start to stop inclusive, clamped
// as LRANGE clamps them (see IndexRange), to dst.
func (l *List) AppendRange(dst [][]byte, start, stop int) [][]byte {
	lo, hi := IndexRange(start, stop, l.n)
	for i := lo; i < hi; i++ {
		dst = append(dst, l.ring[l.slot(i)])
	}
	return dst
}

// Trim keeps only the elements from start to stop inclusive, clamped as
// LTRIM clamps them, and returns how many it removed. The caller deletes
// the key when the list is left empty.
func (l *List) Trim(start, stop int) int {
	lo, hi := IndexRange(start, stop, l.n)
	removed := l.n - (hi - lo)
	for i := 0; i < lo; i++ {
		l.release(l.slot(i))
	}
	for i := hi; i < l.n; i++ {
		l.release(l.slot(i))
	}
	if hi == lo {
		l.head = 0
	} else {
		l.head = l.slot(lo)
	}
	l.n = hi - lo
	l.shrink()
	return removed
}

// release removes the element in slot s, keeping a small array for reuse.
func (l *List) release(s int) {
	e := l.ring[s]
	l.bytes -= len(e)
	if cap(e) > maxKeptElement {
		l.ring[s] = nil
	} else {
		l.ring[s] = e[:0]
	}
}

// Rem removes elements equal to value and returns how many (LREM): the
// first count from the head when count > 0, the last -count from the tail
// when count < 0, all when count is 0.
func (l *List) Rem(count int, value []byte) int {
	if count < 0 {
		return l.remFromTail(-count, value)
	}
	limit := count
	if limit == 0 {
		limit = l.n
	}
	removed, w := 0, 0 // w: where the next kept element goes
	for r := 0; r < l.n; r++ {
		rs := l.slot(r)
		if removed < limit && string(l.ring[rs]) == string(value) {
			removed++
			continue
		}
		if w != r {
			ws := l.slot(w)
			l.ring[ws], l.ring[rs] = l.ring[rs], l.ring[ws]
		}
		w++
	}
	for i := w; i < l.n; i++ {
		l.release(l.slot(i))
	}
	l.n = w
	l.shrink()
	return removed
}

// remFromTail removes the last limit elements equal to value.
func (l *List) remFromTail(limit int, value []byte) int {
	removed, w := 0, l.n-1 // w: where the next kept element goes, from the end
	for r := l.n - 1; r >= 0; r-- {
		rs := l.slot(r)
		if removed < limit && string(l.ring[rs]) == string(value) {
			removed++
			continue
		}
		if w != r {
			ws := l.slot(w)
			l.ring[ws], l.ring[rs] = l.ring[rs], l.ring[ws]
		}
		w--
	}
	for i := 0; i <= w; i++ {
		l.release(l.slot(i))
	}
	if removed > 0 {
		l.head = l.slot(w + 1)
		l.n -= removed
		if l.n == 0 {
			l.head = 0
		}
	}
	l.shrink()
	return removed
}

// All yields the elements from head to tail. The list must not change
// during the walk.
func (l *List) All() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for i := 0; i < l.n; i++ {
			if !yield(l.ring[l.slot(i)]) {
				return
			}
		}
	}
}
