package values

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Snapshot encodings. Each type appends itself with AppendBinary and is
// read back by its decoder; the snapshot format around them says which
// type a record holds and carries the format's version. All integers are
// unsigned varints (encoding/binary's Uvarint) in their shortest form;
// strings are a varint length and the bytes.
//
//	hash:       count, then count × (field, value), in the hash's order
//	list:       count, then count × element, head first
//	sorted set: count, then count × (member, score as 8 bytes: the
//	            float64's IEEE bits, little-endian), in ascending
//	            (score, member) order
//
// The encoding is canonical: decoding accepts exactly what AppendBinary
// writes (shortest varints, hash fields and sorted-set members unique,
// members in strictly ascending order, scores not NaN and not -0, no
// trailing bytes), so decode then encode gives back the same bytes.
//
// Decoders trust nothing: every length is checked against the bytes left
// before it is used, and a count is believed only as far as the bytes
// left could hold that many elements, so garbage costs at most its own
// size in allocations and never panics. They copy what they keep; the
// input may be reused at once. They do not apply Limits: a snapshot
// restores what was saved, and the caller compares Size with its bound.
//
// Every element's length prefixes take fewer bytes than its per-element
// overhead in Size, so len(AppendBinary) <= Size() + maxHeader: the
// keyspace's value-size bound also bounds a value's snapshot record.

// maxHeader is the most bytes an encoding takes beyond Size: its count.
const maxHeader = binary.MaxVarintLen64

// AppendBinary appends the hash's encoding to dst.
func (h *Hash) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(h.Len()))
	for f, v := range h.All() {
		dst = appendString(dst, f)
		dst = appendBytes(dst, v)
	}
	return dst
}

// AppendBinary appends the list's encoding to dst.
func (l *List) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(l.Len()))
	for e := range l.All() {
		dst = appendBytes(dst, e)
	}
	return dst
}

// AppendBinary appends the sorted set's encoding to dst.
func (z *ZSet) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(z.Card()))
	for m, s := range z.All() {
		dst = appendString(dst, m)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(s))
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

func appendBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

// DecodeHash decodes what Hash.AppendBinary wrote.
func DecodeHash(b []byte) (*Hash, error) {
	d := decoder{b: b}
	n := d.count(2) // an empty field and value take 2 bytes
	h := &Hash{index: make(map[string]int, n), entries: make([]hashEntry, 0, n)}
	for i := 0; i < n && d.err == nil; i++ {
		f, v := d.bytes(), d.bytes()
		if d.err != nil {
			break
		}
		if h.Exists(f) {
			d.fail("hash field %q twice", f)
			break
		}
		h.put(f, v)
	}
	if err := d.finish("hash"); err != nil {
		return nil, err
	}
	return h, nil
}

// DecodeList decodes what List.AppendBinary wrote.
func DecodeList(b []byte) (*List, error) {
	d := decoder{b: b}
	n := d.count(1)
	l := &List{}
	if n > 0 {
		l.ring = make([][]byte, max(minRing, 1<<bits.Len(uint(n-1))))
	}
	for i := 0; i < n && d.err == nil; i++ {
		e := d.bytes()
		if d.err != nil {
			break
		}
		l.ring[i] = copyInto(nil, e)
		l.n++
		l.bytes += len(e)
	}
	if err := d.finish("list"); err != nil {
		return nil, err
	}
	return l, nil
}

// DecodeZSet decodes what ZSet.AppendBinary wrote.
func DecodeZSet(b []byte) (*ZSet, error) {
	d := decoder{b: b}
	n := d.count(9) // an empty member and its score take 9 bytes
	z := NewZSet()
	var prev zitem
	for i := 0; i < n && d.err == nil; i++ {
		m := d.bytes()
		raw := d.fixed64()
		if d.err != nil {
			break
		}
		it := zitem{score: math.Float64frombits(raw)}
		switch {
		case math.IsNaN(it.score):
			d.fail("sorted set score is NaN")
		case raw == 1<<63:
			d.fail("sorted set score is -0")
		case i > 0 && !zless(prev, zitem{it.score, string(m)}):
			d.fail("sorted set members out of order at %q", m)
		}
		if d.err != nil {
			break
		}
		if _, dup := z.dict[string(m)]; dup {
			d.fail("sorted set member %q twice", m)
			break
		}
		it.member = string(m)
		z.dict[it.member] = it.score
		z.tree.Load(it)
		z.bytes += len(m)
		prev = it
	}
	if err := d.finish("sorted set"); err != nil {
		return nil, err
	}
	return z, nil
}

// decoder reads an encoding, keeping the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = corrupt(format, args...)
	}
}

// uvarint reads a varint in its shortest form.
func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	if n != uvarintLen(v) {
		d.fail("varint not in its shortest form")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// uvarintLen is the length of v's shortest varint.
func uvarintLen(v uint64) int { return max(1, (bits.Len64(v)+6)/7) }

// count reads an element count, refusing one the bytes left could not
// hold when each element takes at least minElem bytes.
func (d *decoder) count(minElem int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/minElem) {
		d.fail("count %d larger than the %d bytes left can hold", n, len(d.b))
		return 0
	}
	return int(n)
}

// bytes reads a length-prefixed string; the result aliases the input.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("string of %d bytes with %d left", n, len(d.b))
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

// fixed64 reads 8 little-endian bytes.
func (d *decoder) fixed64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("score cut short")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// finish returns the first error, or one for bytes left over.
func (d *decoder) finish(typ string) error {
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes after the %s", len(d.b), typ)
	}
	return d.err
}
