package values

// Default bounds of Limits' zero fields.
const (
	// DefaultMaxElements is the most elements one value holds when
	// Limits.MaxElements is 0.
	DefaultMaxElements = 1_000_000
	// DefaultMaxSize is the most bytes (Size) one value holds when
	// Limits.MaxSize is 0. It equals the keyspace's default
	// --max-value-size, which callers normally pass instead.
	DefaultMaxSize = 32 << 20
)

// Per-element overheads, in bytes, that Size adds to each element's own
// bytes, so that Size approximates the memory a value holds and the
// keyspace's value-size bound (--max-value-size) bounds memory, not only
// payload. They are the measured heap cost of one more element beyond its
// bytes, rounded (TestBytesPerElement measures them; docs/datatypes.md
// gives the figures). Each is also more than the bytes the element's
// length prefixes take in AppendBinary, so an encoding is never longer
// than Size plus maxHeader.
const (
	// HashEntryOverhead is the cost of a hash field beyond the bytes of its
	// name and value: its map slot, its slot in the ordered entries and
	// the allocation rounding of its two strings.
	HashEntryOverhead = 96
	// ListEntryOverhead is the cost of a list element beyond its bytes: its
	// ring slot and the allocation rounding of its copy.
	ListEntryOverhead = 40
	// ZSetEntryOverhead is the cost of a sorted-set member beyond its bytes:
	// its score, its B-tree item and its map slot.
	ZSetEntryOverhead = 96
)

// Limits bounds what one key's value may hold. Every operation that grows
// a value checks them first and, when the result would cross one, returns a
// *LimitError and changes nothing. An operation that leaves the value no
// larger on a bound is never refused on it, so a value already over a
// lowered limit can still shrink. The zero value means the defaults.
//
// Callers pass the keyspace's --max-value-size as MaxSize: the keyspace
// checks Size again when the value is stored (DB.Put), but by then an
// in-place change has been made, so the check must come first, here.
type Limits struct {
	// MaxElements bounds the fields of a hash, the elements of a list and
	// the members of a sorted set; 0 means DefaultMaxElements.
	MaxElements int
	// MaxSize bounds Size, in bytes; 0 means DefaultMaxSize.
	MaxSize int
}

// check refuses a change of a value of type typ from (curElems, curSize)
// to (elems, size), by the rule in Limits' doc.
func (l Limits) check(typ string, curElems, elems, curSize, size int) error {
	maxElems := l.MaxElements
	if maxElems <= 0 {
		maxElems = DefaultMaxElements
	}
	if elems > maxElems && elems > curElems {
		return &LimitError{Type: typ, What: "elements", Size: elems, Limit: maxElems}
	}
	maxSize := l.MaxSize
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	if size > maxSize && size > curSize {
		return &LimitError{Type: typ, What: "bytes", Size: size, Limit: maxSize}
	}
	return nil
}
