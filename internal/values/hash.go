package values

import (
	"iter"
	"strconv"
)

// Hash is a Redis hash: a map from field names to values, both byte
// strings.
//
// Order: fields are kept in the order they were first added, as Redis's
// small (listpack) hashes keep them; deleting a field keeps the others in
// order, and setting an existing field keeps its place. All, Keys, Values
// and AppendBinary walk that order, so it is deterministic and survives a
// snapshot. Clients must not rely on it (Redis's large hashes have none).
//
// Size is Σ(len(field)+len(value)) + HashEntryOverhead per field, kept
// up to date by every operation in O(1).
//
// A Hash is not safe for concurrent use: it belongs to the goroutine that
// owns its key. Value slices it returns alias its storage and stay valid
// until the next call that changes the hash; callers write them out (or
// copy them) before that.
type Hash struct {
	index   map[string]int // field → position in entries
	entries []hashEntry    // first-added order, with tombstones
	dead    int            // tombstones in entries
	bytes   int            // Σ len(field)+len(value) of live fields
}

// hashEntry is a field in entries; a deleted one has a nil value (a live
// value is never nil, even when empty).
type hashEntry struct {
	field string
	value []byte
}

// emptyBytes is the value of an empty field: empty but not nil.
var emptyBytes = []byte{}

// NewHash returns an empty hash.
func NewHash() *Hash { return &Hash{index: make(map[string]int)} }

// Size implements keyspace.Value: the bytes the hash holds, with
// HashEntryOverhead per field.
func (h *Hash) Size() int { return h.bytes + len(h.index)*HashEntryOverhead }

// Len returns the number of fields (HLEN).
func (h *Hash) Len() int { return len(h.index) }

// Get returns field's value and whether the field exists (HGET).
func (h *Hash) Get(field []byte) ([]byte, bool) {
	i, ok := h.index[string(field)]
	if !ok {
		return nil, false
	}
	return h.entries[i].value, true
}

// Exists reports whether field exists (HEXISTS).
func (h *Hash) Exists(field []byte) bool {
	_, ok := h.index[string(field)]
	return ok
}

// Set sets each field of pairs (field, value, field, value, ...) in turn,
// and returns how many fields are new (HSET; HMSET replies OK). A field
// named twice ends with its last value. An odd or empty pairs is
// ErrSyntax; a result over lim is a *LimitError; either way nothing
// changes.
func (h *Hash) Set(lim Limits, pairs [][]byte) (added int, err error) {
	if len(pairs) == 0 || len(pairs)%2 != 0 {
		return 0, ErrSyntax
	}
	newFields, delta := 0, 0
	forLastOccurrences(len(pairs)/2, func(i int) []byte { return pairs[2*i] }, func(i int) {
		field, value := pairs[2*i], pairs[2*i+1]
		if old, ok := h.Get(field); ok {
			delta += len(value) - len(old)
		} else {
			newFields++
			delta += len(field) + len(value)
		}
	})
	if err := h.checkGrowth(lim, newFields, delta); err != nil {
		return 0, err
	}
	for i := 0; i < len(pairs); i += 2 {
		if h.put(pairs[i], pairs[i+1]) {
			added++
		}
	}
	return added, nil
}

// SetNX sets field to value only if the field does not exist, and reports
// whether it did (HSETNX).
func (h *Hash) SetNX(lim Limits, field, value []byte) (bool, error) {
	if h.Exists(field) {
		return false, nil
	}
	if err := h.checkGrowth(lim, 1, len(field)+len(value)); err != nil {
		return false, err
	}
	h.put(field, value)
	return true, nil
}

// Del deletes the fields and returns how many existed (HDEL). The caller
// deletes the key when the hash is left empty, as Redis does.
func (h *Hash) Del(fields ...[]byte) int {
	n := 0
	for _, f := range fields {
		i, ok := h.index[string(f)]
		if !ok {
			continue
		}
		e := &h.entries[i]
		h.bytes -= len(e.field) + len(e.value)
		delete(h.index, e.field)
		*e = hashEntry{}
		h.dead++
		n++
	}
	if h.dead > 0 && h.dead*2 >= len(h.entries) {
		h.compact()
	}
	return n
}

// IncrBy adds incr to the integer in field (0 if the field is missing) and
// returns the sum (HINCRBY). Errors: ErrHashValueNotInteger when the field
// holds anything but a canonical int64 (see ParseInt64), ErrOverflow, a
// *LimitError; nothing changes on an error.
func (h *Hash) IncrBy(lim Limits, field []byte, incr int64) (int64, error) {
	var cur int64
	old, exists := h.Get(field)
	if exists {
		var ok bool
		if cur, ok = ParseInt64(old); !ok {
			return 0, ErrHashValueNotInteger
		}
	}
	sum, err := addInt64(cur, incr)
	if err != nil {
		return 0, err
	}
	var buf [20]byte
	if err := h.setChecked(lim, field, strconv.AppendInt(buf[:0], sum, 10), old, exists); err != nil {
		return 0, err
	}
	return sum, nil
}

// IncrByFloat adds incr (see ParseFloatIncrement) to the number in field
// (0 if missing) in Redis's long double arithmetic, stores the result as
// Redis prints it and returns that text (HINCRBYFLOAT). Errors:
// ErrHashValueNotFloat when the field does not hold a number,
// ErrResultNaNOrInf, a *LimitError; nothing changes on an error.
func (h *Hash) IncrByFloat(lim Limits, field []byte, incr LongDouble) ([]byte, error) {
	var cur LongDouble
	old, exists := h.Get(field)
	if exists {
		var ok bool
		if cur, ok = ParseLongDouble(old); !ok {
			return nil, ErrHashValueNotFloat
		}
	}
	sum, ok := cur.Add(incr)
	if !ok {
		return nil, ErrResultNaNOrInf
	}
	text := AppendLongDouble(nil, sum)
	if err := h.setChecked(lim, field, text, old, exists); err != nil {
		return nil, err
	}
	v, _ := h.Get(field)
	return v, nil
}

// setChecked sets field to value after checking lim; old and exists are
// the field's current value.
func (h *Hash) setChecked(lim Limits, field, value, old []byte, exists bool) error {
	newFields, delta := 0, len(value)-len(old)
	if !exists {
		newFields, delta = 1, len(field)+len(value)
	}
	if err := h.checkGrowth(lim, newFields, delta); err != nil {
		return err
	}
	h.put(field, value)
	return nil
}

// checkGrowth checks lim for newFields more fields and delta more bytes.
func (h *Hash) checkGrowth(lim Limits, newFields, delta int) error {
	n := len(h.index)
	return lim.check("hash", n, n+newFields, h.Size(), h.Size()+delta+newFields*HashEntryOverhead)
}

// put sets field to a copy of value and reports whether the field is new.
func (h *Hash) put(field, value []byte) bool {
	if i, ok := h.index[string(field)]; ok {
		e := &h.entries[i]
		h.bytes += len(value) - len(e.value)
		e.value = copyInto(e.value, value)
		return false
	}
	if h.index == nil {
		h.index = make(map[string]int)
	}
	f := string(field)
	h.index[f] = len(h.entries)
	h.entries = append(h.entries, hashEntry{field: f, value: copyInto(nil, value)})
	h.bytes += len(field) + len(value)
	return true
}

// copyInto returns a non-nil copy of src, in dst's array when it fits.
func copyInto(dst, src []byte) []byte {
	if len(src) == 0 {
		return emptyBytes
	}
	if cap(dst) >= len(src) && cap(dst) <= 2*len(src)+16 {
		return append(dst[:0], src...)
	}
	return append(make([]byte, 0, len(src)), src...)
}

// compact drops the tombstones, keeping the fields' order.
func (h *Hash) compact() {
	live := h.entries[:0]
	for _, e := range h.entries {
		if e.value != nil {
			h.index[e.field] = len(live)
			live = append(live, e)
		}
	}
	clear(h.entries[len(live):])
	h.entries = live
	h.dead = 0
	if cap(h.entries) > 64 && len(h.entries) < cap(h.entries)/4 {
		h.entries = append([]hashEntry(nil), h.entries...)
	}
}

// All yields every field and its value, in the hash's order (HGETALL).
// The hash must not change during the walk.
func (h *Hash) All() iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		for _, e := range h.entries {
			if e.value != nil && !yield(e.field, e.value) {
				return
			}
		}
	}
}

// Keys yields every field name in the hash's order (HKEYS).
func (h *Hash) Keys() iter.Seq[string] {
	return func(yield func(string) bool) {
		for f := range h.All() {
			if !yield(f) {
				return
			}
		}
	}
}

// Values yields every value in the hash's order (HVALS).
func (h *Hash) Values() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for _, v := range h.All() {
			if !yield(v) {
				return
			}
		}
	}
}

// forLastOccurrences calls visit(i) for each i in [0, n) whose key(i)
// appears at no later index: once per distinct key, at the occurrence
// that decides the final state when items are applied in order.
func forLastOccurrences(n int, key func(int) []byte, visit func(int)) {
	const quadratic = 16 // up to here, comparing pairs beats a map
	if n <= quadratic {
	outer:
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if string(key(i)) == string(key(j)) {
					continue outer
				}
			}
			visit(i)
		}
		return
	}
	seen := make(map[string]struct{}, n)
	for i := n - 1; i >= 0; i-- {
		if _, dup := seen[string(key(i))]; dup {
			continue
		}
		seen[string(key(i))] = struct{}{}
		visit(i)
	}
}
