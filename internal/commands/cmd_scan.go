package commands

import (
	"math"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/rlserver/rlserver/internal/service"
	"github.com/rlserver/rlserver/internal/values"
)

// SCAN, HSCAN and ZSCAN: cursors over the plain keys and over one hash's
// fields or one sorted set's members. Every cursor is a position in hash
// order (the next 64-bit hash to visit), so an element present for a whole
// iteration is returned whatever is added or removed between calls; see
// keyspace/scan.go for the keyspace's, scanValue for a value's.

// scanCommands returns SCAN, HSCAN and ZSCAN.
func scanCommands() []*command {
	return []*command{
		// Keyless, read-only: a script must declare no keys to hold every
		// shard and run it (as KEYS).
		&command{name: "scan", arity: -2, flags: flagReadonly, group: groupGeneric, since: "2.8.0",
			summary: "Incrementally iterate the plain keys: SCAN cursor [MATCH pattern] [COUNT count] [TYPE type].",
			run:     cmdScan},
		&command{name: "hscan", arity: -3, flags: flagReadonly, keys: oneKey, keyFlags: keysRead,
			group: groupHash, since: "2.8.0",
			summary: "Incrementally iterate a hash's fields and values: HSCAN key cursor [MATCH pattern] [COUNT count].",
			exec:    execHScan, valueReply: always},
		&command{name: "zscan", arity: -3, flags: flagReadonly, keys: oneKey, keyFlags: keysRead,
			group: groupSortedSet, since: "2.8.0",
			summary: "Incrementally iterate a sorted set's members and scores: ZSCAN key cursor [MATCH pattern] [COUNT count].",
			exec:    execZScan, valueReply: always},
	}
}

var errInvalidCursor = replyError("ERR invalid cursor")

// parseCursor reads a cursor as Redis does (C's strtoul, base 10): an
// optional sign then digits, a negative one wrapping around 2^64, the
// empty string reading as 0; no white space in front, nothing after, and
// nothing beyond 2^64−1.
func parseCursor(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, nil
	}
	neg := b[0] == '-'
	digits := b
	if b[0] == '-' || b[0] == '+' {
		digits = b[1:]
	}
	if len(digits) == 0 {
		return 0, errInvalidCursor
	}
	var n uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, errInvalidCursor
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, errInvalidCursor
		}
		n = n*10 + d
	}
	if neg {
		n = -n
	}
	return n, nil
}

// scanOptions are the options after a cursor.
type scanOptions struct {
	count   int    // elements to examine, ≥ 1; 10 by default, as Redis
	pattern []byte // MATCH; nil for none (as "*", which matches everything)
	typ     []byte // SCAN's TYPE; nil for none
}

// parseScanOptions reads [MATCH pattern] [COUNT count] [TYPE type], in any
// order, the last of each winning, as Redis reads them; TYPE only when
// withType (SCAN).
func parseScanOptions(args [][]byte, withType bool) (scanOptions, error) {
	o := scanOptions{count: 10}
	for i := 0; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return o, errSyntax
		}
		val := args[i+1]
		switch {
		case equalFold(args[i], "count"):
			n, ok := parseInt(val)
			if !ok || n > math.MaxInt {
				return o, errNotInteger
			}
			if n < 1 {
				return o, errSyntax
			}
			o.count = int(n)
		case equalFold(args[i], "match"):
			o.pattern = val
			if string(val) == "*" {
				o.pattern = nil
			}
		case withType && equalFold(args[i], "type"):
			o.typ = val
		default:
			return o, errSyntax
		}
	}
	return o, nil
}

// matches reports whether an element or key named name passes MATCH.
func (o *scanOptions) matches(name []byte) bool {
	return o.pattern == nil || globMatch(o.pattern, name)
}

// writeScanReply writes a SCAN reply's head: the next cursor and the
// length of the element array that follows.
func writeScanReply(out interface {
	Array(int)
	Bulk([]byte)
}, next uint64, n int) {
	var buf [20]byte
	out.Array(2)
	out.Bulk(strconv.AppendUint(buf[:0], next, 10))
	out.Array(n)
}

func cmdScan(c *session, args [][]byte) error {
	cursor, err := parseCursor(args[1])
	if err != nil {
		return err
	}
	o, err := parseScanOptions(args[2:], true)
	if err != nil {
		return err
	}
	// An unknown TYPE matches nothing, as in Redis 7.0: the iteration
	// still walks every key, returning none.
	match := func(key []byte, v service.Value) bool {
		return o.matches(key) && (o.typ == nil || equalFold(o.typ, typeName(v)))
	}
	keys, next := c.handle().Scan(cursor, o.count, match)
	writeScanReply(c.out, next, len(keys))
	for _, k := range keys {
		c.out.Bulk(k)
	}
	return nil
}

// Values are scanned in the order of their elements' xxhash: a call
// returns every element whose hash lies in [cursor, next), so one present
// throughout an iteration comes back. A value keeps no index for it, so
// each call reads every element, O(n log n) with n ≤ --max-elements; to
// bound a whole iteration, a call returns at least 1/valueScanParts of the
// value (so about valueScanParts calls finish it), and a value of at most
// smallValueScan elements whole, with cursor 0, as Redis returns its small
// (listpack) values.
const (
	valueScanParts = 16
	smallValueScan = 128
)

// scanElement is a value's element as a scan sees it.
type scanElement struct {
	h    uint64
	name string  // field or member
	val  []byte  // a field's value
	zs   float64 // a member's score
}

// scanValue picks the elements of a value of n elements, yielded by each
// with their hashes (elementHash), that one call from cursor returns, and
// the next cursor. It walks the value twice: first keeping the want
// smallest hashes from cursor on in a max-heap, whose top is then the last
// hash this call returns; then taking the elements up to that hash (every
// element sharing it, too) and finding the next hash after it. O(n log
// want) time, O(want) memory beyond the elements returned.
func scanValue(n int, each func(yield func(scanElement)), cursor uint64, count int) ([]scanElement, uint64) {
	want := max(count, (n+valueScanParts-1)/valueScanParts)
	if n <= smallValueScan {
		want = n
	}
	top := make(maxHeap, 0, min(want, n))
	candidates := 0
	each(func(e scanElement) {
		switch {
		case e.h < cursor:
		case len(top) < want:
			top.push(e.h)
		case e.h < top[0]:
			top.replaceTop(e.h)
		}
		if e.h >= cursor {
			candidates++
		}
	})
	last := uint64(math.MaxUint64)
	if candidates > want {
		last = top[0]
	}
	picked, next := make([]scanElement, 0, len(top)), uint64(0)
	each(func(e scanElement) {
		switch {
		case e.h < cursor:
		case e.h <= last:
			picked = append(picked, e)
		case next == 0 || e.h < next:
			next = e.h
		}
	})
	return picked, next
}

// maxHeap is a binary max-heap of hashes: top[0] is the largest.
type maxHeap []uint64

// push adds h.
func (top *maxHeap) push(h uint64) {
	*top = append(*top, h)
	t := *top
	for i := len(t) - 1; i > 0; {
		parent := (i - 1) / 2
		if t[parent] >= t[i] {
			break
		}
		t[parent], t[i] = t[i], t[parent]
		i = parent
	}
}

// replaceTop puts h in place of the largest hash.
func (top maxHeap) replaceTop(h uint64) {
	top[0] = h
	for i := 0; ; {
		largest, l, r := i, 2*i+1, 2*i+2
		if l < len(top) && top[l] > top[largest] {
			largest = l
		}
		if r < len(top) && top[r] > top[largest] {
			largest = r
		}
		if largest == i {
			return
		}
		top[i], top[largest] = top[largest], top[i]
		i = largest
	}
}

// elementHash is the hash ordering a field or member in HSCAN and ZSCAN.
func elementHash(name string) uint64 { return xxhash.Sum64String(name) }

// scanKeyed reads a value scan's cursor, then (as Redis, in that order) the
// key, the type and the options; a missing key is an empty, finished scan.
func scanKeyed[T service.Value](x *keyed, db *service.DB) (v T, o scanOptions, cursor uint64, ok bool, err error) {
	if cursor, err = parseCursor(x.args[2]); err != nil {
		return v, o, 0, false, err
	}
	if v, ok, err = lookupValue[T](db, x.args[1]); err != nil || !ok {
		if err == nil {
			writeScanReply(x.out, 0, 0)
		}
		return v, o, 0, false, err
	}
	o, err = parseScanOptions(x.args[3:], false)
	return v, o, cursor, err == nil, err
}

// writeScanElements writes the elements MATCH lets through, each as its
// name and writeVal's bulk string.
func writeScanElements(x *keyed, next uint64, picked []scanElement, o *scanOptions, writeVal func(scanElement)) {
	kept := picked[:0]
	for _, e := range picked {
		if o.matches([]byte(e.name)) {
			kept = append(kept, e)
		}
	}
	writeScanReply(x.out, next, 2*len(kept))
	for _, e := range kept {
		x.out.BulkString(e.name)
		writeVal(e)
	}
}

func execHScan(x *keyed, db *service.DB) error {
	h, o, cursor, ok, err := scanKeyed[*values.Hash](x, db)
	if !ok {
		return err
	}
	picked, next := scanValue(h.Len(), func(yield func(scanElement)) {
		for f, v := range h.All() {
			yield(scanElement{h: elementHash(f), name: f, val: v})
		}
	}, cursor, o.count)
	writeScanElements(x, next, picked, &o, func(e scanElement) { x.out.Bulk(e.val) })
	return nil
}

func execZScan(x *keyed, db *service.DB) error {
	z, o, cursor, ok, err := scanKeyed[*values.ZSet](x, db)
	if !ok {
		return err
	}
	picked, next := scanValue(z.Card(), func(yield func(scanElement)) {
		for m, s := range z.All() {
			yield(scanElement{h: elementHash(m), name: m, zs: s})
		}
	}, cursor, o.count)
	var buf [32]byte
	// A bulk string in RESP3 too: Redis 7.0's scan replies are strings.
	writeScanElements(x, next, picked, &o, func(e scanElement) { x.out.Bulk(values.AppendScore(buf[:0], e.zs)) })
	return nil
}
