package snapshot

import (
	"encoding/binary"
	"fmt"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/values"
)

// Plain keys holding a hash, a list or a sorted set (format version 3).
//
// Each type has its record kind; kinds 13 to 17 are kept for more types.
// A record is laid out as PLAIN is, the value being the type's own
// encoding (values' AppendBinary, documented in docs/datatypes.md):
//
//	HASH, LIST, ZSET: count (uvarint), then per key: key (string),
//	       value (string: the type's encoding), expiry (varint, unix ns;
//	       0: none)
//
// The decoders of the values are strict (canonical encodings only), and a
// value with no elements is refused: the keyspace never holds one.
const (
	kindHash = 10
	kindList = 11
	kindZSet = 12
)

// typedValue is what a typed record holds: a *values.Hash, *values.List or
// *values.ZSet.
type typedValue = keyspace.Value

// typedKinds counts the kinds above, from kindHash.
const typedKinds = 3

// TypedKey is a plain key holding a hash, a list or a sorted set, as saved.
type TypedKey struct {
	Key      string
	Value    keyspace.Value // *values.Hash, *values.List or *values.ZSet
	ExpireAt int64          // unix ns; 0 for no TTL
}

// typedRecords are the HASH, LIST and ZSET records an encoder is building.
type typedRecords struct {
	buf [typedKinds][]byte
	n   [typedKinds]int
}

// addTyped appends one key holding a hash, list or sorted set to its
// record, and reports false, writing nothing, for a value of another kind.
func (e *encoder) addTyped(key string, v keyspace.Value, expireAt int64) bool {
	var kind byte
	switch v.(type) {
	case *values.Hash:
		kind = kindHash
	case *values.List:
		kind = kindList
	case *values.ZSet:
		kind = kindZSet
	default:
		return false
	}
	i := kind - kindHash
	buf, n := &e.typed.buf[i], &e.typed.n[i]
	mark := len(*buf)
	b := appendString(*buf, key)
	b = appendEncoding(b, v)
	*buf = binary.AppendVarint(b, expireAt)
	*n++
	e.keepUnder(buf, n, mark, kind)
	return true
}

// appendEncoding appends v's encoding as a string: its length, then it.
// The length is known only once the encoding is written, so the encoding
// is written first and moved up behind it (no second buffer).
func appendEncoding(b []byte, v keyspace.Value) []byte {
	start := len(b)
	b = encodeValue(b, v)
	enc := len(b) - start
	// Move the encoding up to make room for its length in front.
	var lenBuf [binary.MaxVarintLen64]byte
	l := binary.PutUvarint(lenBuf[:], uint64(enc))
	b = append(b, lenBuf[:l]...)
	copy(b[start+l:], b[start:start+enc])
	copy(b[start:], lenBuf[:l])
	return b
}

// encodeValue appends v's own encoding.
func encodeValue(b []byte, v keyspace.Value) []byte {
	switch v := v.(type) {
	case *values.Hash:
		return v.AppendBinary(b)
	case *values.List:
		return v.AppendBinary(b)
	case *values.ZSet:
		return v.AppendBinary(b)
	}
	panic(fmt.Sprintf("snapshot: no encoding for %T", v))
}

// flushTyped writes the typed records being built.
func (e *encoder) flushTyped() {
	for i := range e.typed.buf {
		e.writeKeys(byte(kindHash+i), &e.typed.buf[i], &e.typed.n[i])
	}
}

// pendingTyped returns the bytes of typed records being built.
func (e *encoder) pendingTyped() int {
	n := 0
	for _, b := range e.typed.buf {
		n += len(b)
	}
	return n
}

// decodeTyped decodes a HASH, LIST or ZSET record and hands each key to
// v.typed.
func decodeTyped(r *reader, kind byte, v visitor) (uint64, error) {
	n := r.count(4) // key, value and expiry take at least 4 bytes
	for range n {
		key := r.bytes()
		enc := r.bytes()
		expireAt := r.varint()
		if r.err != nil {
			break
		}
		if expireAt < 0 {
			return 0, corrupt("key %q: negative expiry", key)
		}
		val, err := decodeValue(kind, enc)
		if err != nil {
			return 0, corrupt("key %q: %v", key, err)
		}
		if v.typed != nil {
			if err := v.typed(key, val, expireAt); err != nil {
				return 0, err
			}
		}
	}
	return n, r.err
}

// decodeValue decodes a value of a typed record's kind, refusing an empty
// one.
func decodeValue(kind byte, enc []byte) (keyspace.Value, error) {
	var (
		v   keyspace.Value
		n   int
		err error
	)
	switch kind {
	case kindHash:
		var h *values.Hash
		if h, err = values.DecodeHash(enc); err == nil {
			v, n = h, h.Len()
		}
	case kindList:
		var l *values.List
		if l, err = values.DecodeList(enc); err == nil {
			v, n = l, l.Len()
		}
	default:
		var z *values.ZSet
		if z, err = values.DecodeZSet(enc); err == nil {
			v, n = z, z.Card()
		}
	}
	switch {
	case err != nil:
		return nil, err
	case n == 0:
		return nil, fmt.Errorf("an empty %T", v)
	}
	return v, nil
}
