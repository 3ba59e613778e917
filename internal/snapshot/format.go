// Package snapshot is rlserver's on-disk format: encoding and decoding, the
// atomic write of a snapshot file, saving the live keyspace without stopping
// it, and restoring it at start.
//
// # Format (version 3)
//
// A snapshot is a 16-byte header followed by records:
//
//	header:  "RLSNAP\r\n" (8 bytes; the CR LF catches text-mode mangling)
//	         version  uint32 little-endian (3, Version; 1 and 2 are still read)
//	         flags    uint32 little-endian (0; readers reject other values)
//	record:  kind     uint8
//	         length   uint32 little-endian, the payload's size (<= 64 MiB)
//	         payload  length bytes
//	         crc      uint32 little-endian, CRC-32C of kind, length and payload
//
// Records, in order: one META, one RULES, any number of KEYS, PLAIN, HASH,
// LIST, ZSET, SCRIPTS and OVERRIDES (in any order; PLAIN only from version
// 2; HASH, LIST and ZSET (kinds 10 to 12, types.go), SCRIPTS (18,
// scripts.go) and OVERRIDES (20, gateway.go) only from version 3; a slot
// move's transfers also FORGET (24, partial.go)), one END.
// A file that ends before
// END, has bytes after it, or whose key count disagrees with END is
// rejected, as is any record whose CRC does not match, and any rule or state
// that is not valid (rules.Def.Validate, algorithms.Valid): every corruption
// is detected, and File.Restore checks the whole file before it loads a key.
// A KEYS or PLAIN record holds at most maxEntries bytes of entries; the
// encoder starts a new record before an entry would overflow one, and
// CheckSizes bounds the largest entry.
//
// Integers in payloads are varints (encoding/binary's Uvarint and Varint).
// Strings are a uvarint length and the bytes.
//
//	META:  created (varint, unix ns), server version (string)
//	RULES: count (uvarint), then per rule: name (string), algorithm (uint8,
//	       algorithms.Algorithm), limit, window (ns), burst (uvarints);
//	       from version 3, then flags (uvarint: 1 shadow mode, 0 enforce)
//	KEYS:  count (uvarint), then per key: rule (uvarint index into RULES),
//	       key (string), stamp (varint, unix ns), count, aux (uvarints);
//	       for sliding_log rules, then the log: its entries oldest first,
//	       each as a uvarint gap — the first from stamp backwards
//	       (stamp − entry), each next one from the previous entry forwards
//	PLAIN: count (uvarint), then per plain key (SET, INCR, CL.THROTTLE):
//	       key (string), value (string), expiry (varint, unix ns; 0: none)
//	HASH, LIST, ZSET: see types.go
//	END:   keys (uvarint, the total over KEYS, PLAIN and typed records), records
//	       (uvarint)
//
// Version 1 is version 2 without PLAIN records; version 2 is version 3
// without rule flags and HASH, LIST, ZSET, SCRIPTS and OVERRIDES records.
// Both are still read.
//
// All times are wall-clock nanoseconds since the Unix epoch, so a snapshot
// means the same thing after a restart, and time spent down counts.
package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
)

// Version is the format version this package writes. It reads versions
// 1..Version.
const Version = 3

const (
	magic         = "RLSNAP\r\n"
	headerSize    = 16
	maxRecordSize = 64 << 20
	// maxEntries bounds the entries of a KEYS or PLAIN record, leaving
	// room for the count before them.
	maxEntries = maxRecordSize - binary.MaxVarintLen64

	kindMeta  = 1
	kindRules = 2
	kindKeys  = 3
	kindPlain = 4
	kindEnd   = 0xFF
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Rule is a rule as saved: its definition, which the keys saved under it
// were kept with.
type Rule = rules.Def

// Key is one key's state as saved.
type Key struct {
	Rule  int // index into Snapshot.Rules
	Key   string
	State algorithms.State
}

// PlainKey is one plain key as saved.
type PlainKey struct {
	Key      string
	Value    []byte
	ExpireAt int64 // unix ns; 0 for no TTL
}

// Snapshot is a decoded snapshot file.
type Snapshot struct {
	Version       uint32 // the file's format version
	Created       int64  // unix ns
	ServerVersion string // of the rlserver that wrote it
	Rules         []Rule
	Keys          []Key
	Plain         []PlainKey
	Overrides     []SavedOverride
	Scripts       []string   // Lua script sources (see scripts.go)
	Typed         []TypedKey // hashes, lists and sorted sets
	Forget        []string   // names to drop before storing the keys (a slot move's; see partial.go)
}

// encoder writes records to w and counts what it wrote.
type encoder struct {
	w       io.Writer
	err     error
	bytes   int64
	records int
	keys    int
	buf     []byte // the KEYS record being built
	bufKeys int
	pbuf    []byte // the PLAIN record being built
	pbufN   int
	rules   []Rule
	params  []algorithms.Params // of rules, by index
	typed   typedRecords        // the HASH, LIST and ZSET records being built
}

func newEncoder(w io.Writer, created int64, serverVersion string, ruleList []Rule) *encoder {
	e := &encoder{w: w, rules: ruleList}
	for _, r := range ruleList {
		e.params = append(e.params, r.Params())
	}
	var h [headerSize]byte
	copy(h[:], magic)
	binary.LittleEndian.PutUint32(h[8:], Version)
	e.write(h[:])
	meta := binary.AppendVarint(nil, created)
	meta = appendString(meta, serverVersion)
	e.record(kindMeta, meta)
	rb := binary.AppendUvarint(nil, uint64(len(ruleList)))
	for _, r := range ruleList {
		rb = appendString(rb, r.Name)
		rb = append(rb, byte(r.Algorithm))
		rb = binary.AppendUvarint(rb, uint64(r.Limit))
		rb = binary.AppendUvarint(rb, uint64(r.Window))
		rb = binary.AppendUvarint(rb, uint64(r.Burst))
		rb = binary.AppendUvarint(rb, ruleFlags(r))
	}
	e.record(kindRules, rb)
	return e
}

func (e *encoder) write(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.bytes += int64(n)
	e.err = err
}

func (e *encoder) record(kind byte, payload []byte) {
	if len(payload) > maxRecordSize {
		if e.err == nil {
			e.err = fmt.Errorf("snapshot record of %d bytes exceeds the %d-byte limit (a key too large to save?)", len(payload), maxRecordSize)
		}
		return
	}
	var h [5]byte
	h[0] = kind
	binary.LittleEndian.PutUint32(h[1:], uint32(len(payload)))
	crc := crc32.Update(crc32.Checksum(h[:], castagnoli), castagnoli, payload)
	e.write(h[:])
	e.write(payload)
	e.write(binary.LittleEndian.AppendUint32(nil, crc))
	e.records++
}

// addKey appends one key to the KEYS record being built. A state that is
// not valid under its rule (algorithms.Valid) is not written, since the
// decoder would refuse the whole file: addKey returns the reason instead.
func (e *encoder) addKey(rule int, key string, s *algorithms.State) error {
	if err := algorithms.Valid(e.params[rule], *s); err != nil {
		return err
	}
	mark := len(e.buf)
	b := binary.AppendUvarint(e.buf, uint64(rule))
	b = appendString(b, key)
	b = binary.AppendVarint(b, s.Stamp)
	if e.rules[rule].Algorithm == algorithms.SlidingLog {
		// The ring's order is the log's order; save it unrolled, so Aux
		// (the ring's head) is 0 on load.
		b = binary.AppendUvarint(b, uint64(s.Count))
		b = binary.AppendUvarint(b, 0)
		prev := s.Stamp
		for i := range s.Count {
			at := s.Log[(s.Aux+i)%int64(len(s.Log))]
			if i == 0 {
				b = binary.AppendUvarint(b, uint64(prev-at))
			} else {
				b = binary.AppendUvarint(b, uint64(at-prev))
			}
			prev = at
		}
	} else {
		b = binary.AppendUvarint(b, uint64(s.Count))
		b = binary.AppendUvarint(b, uint64(s.Aux))
	}
	e.buf = b
	e.bufKeys++
	e.keepUnder(&e.buf, &e.bufKeys, mark, kindKeys)
	return nil
}

// addPlain appends one plain key to the PLAIN record being built.
func (e *encoder) addPlain(key string, value []byte, expireAt int64) {
	mark := len(e.pbuf)
	b := appendString(e.pbuf, key)
	b = binary.AppendUvarint(b, uint64(len(value)))
	b = append(b, value...)
	e.pbuf = binary.AppendVarint(b, expireAt)
	e.pbufN++
	e.keepUnder(&e.pbuf, &e.pbufN, mark, kindPlain)
}

// keepUnder keeps a record being built within maxEntries: if the entry just
// appended at mark made it too large, the entries before it are written as
// a record of their own first, and the entry starts the next. So any entry
// up to maxEntries bytes fits (see CheckSizes), whatever came before it.
func (e *encoder) keepUnder(buf *[]byte, n *int, mark int, kind byte) {
	if len(*buf) <= maxEntries || *n == 1 {
		return
	}
	entry := bytes.Clone((*buf)[mark:])
	*buf, *n = (*buf)[:mark], *n-1
	e.writeKeys(kind, buf, n)
	*buf, *n = append(*buf, entry...), 1
}

// pending returns the bytes of records being built.
func (e *encoder) pending() int { return len(e.buf) + len(e.pbuf) + e.pendingTyped() }

// flushKeys writes the KEYS and PLAIN records being built, if they hold any
// keys.
func (e *encoder) flushKeys() {
	e.writeKeys(kindKeys, &e.buf, &e.bufKeys)
	e.writeKeys(kindPlain, &e.pbuf, &e.pbufN)
	e.flushTyped()
}

// writeKeys writes the n entries in buf as one record of kind, if n > 0,
// and empties buf.
func (e *encoder) writeKeys(kind byte, buf *[]byte, n *int) {
	if *n == 0 {
		return
	}
	payload := binary.AppendUvarint(make([]byte, 0, len(*buf)+10), uint64(*n))
	e.record(kind, append(payload, *buf...))
	e.keys += *n
	*buf, *n = (*buf)[:0], 0
}

// finish writes the END record.
func (e *encoder) finish() error {
	e.flushKeys()
	end := binary.AppendUvarint(nil, uint64(e.keys))
	end = binary.AppendUvarint(end, uint64(e.records+1))
	e.record(kindEnd, end)
	return e.err
}

// CheckSizes reports whether every key a keyspace bounded to keys of at
// most maxKey bytes and values of at most maxValue bytes can hold fits in a
// snapshot record, so that no write the keyspace accepts can make a
// snapshot fail.
func CheckSizes(maxKey, maxValue int) error {
	// A plain key's entry: key and value, each with a length of at most
	// 10 bytes, and an expiry of at most 10. A limiter key's: rule,
	// length, stamp, count and aux of at most 10 bytes each, the key, and
	// a sliding log of up to MaxSlidingLogLimit gaps of at most 10 bytes.
	// A hash, list or sorted set's encoding is at most its size (bounded
	// by maxValue) plus 10 bytes.
	plain := 4*binary.MaxVarintLen64 + maxKey + maxValue
	limiter := 5*binary.MaxVarintLen64 + maxKey + algorithms.MaxSlidingLogLimit*binary.MaxVarintLen64
	if largest := max(plain, limiter); largest > maxEntries {
		return fmt.Errorf("--max-key-size %d and --max-value-size %d allow a key of %d bytes with its state, more than the %d bytes a snapshot record holds",
			maxKey, maxValue, largest, maxEntries)
	}
	return nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// ErrCorrupt is wrapped by every error Decode returns for a malformed file.
var ErrCorrupt = errors.New("snapshot is corrupt")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Decode reads a whole snapshot. It checks every CRC, count and bound, and
// never allocates more than the input's size justifies: garbage yields an
// error wrapping ErrCorrupt (or naming an unknown version), never a panic.
func Decode(data []byte) (*Snapshot, error) {
	snap := &Snapshot{}
	v := visitor{
		key: func(rule int, key []byte, s algorithms.State) error {
			snap.Keys = append(snap.Keys, Key{Rule: rule, Key: string(key), State: s})
			return nil
		},
		plain: func(key, value []byte, expireAt int64) error {
			snap.Plain = append(snap.Plain, PlainKey{Key: string(key), Value: bytes.Clone(value), ExpireAt: expireAt})
			return nil
		},
		override: func(o SavedOverride) { snap.Overrides = append(snap.Overrides, o) },
		newLog:   func(n int64) []int64 { return make([]int64, n) },
		script: func(src []byte) error {
			snap.Scripts = append(snap.Scripts, string(src))
			return nil
		},
		typed: func(key []byte, v typedValue, expireAt int64) error {
			snap.Typed = append(snap.Typed, TypedKey{Key: string(key), Value: v, ExpireAt: expireAt})
			return nil
		},
		forget: func(key string) { snap.Forget = append(snap.Forget, key) },
	}
	h, err := walk(bytes.NewReader(data), int64(len(data)), v)
	if err != nil {
		return nil, err
	}
	snap.Version, snap.Created, snap.ServerVersion, snap.Rules = h.version, h.created, h.serverVersion, h.rules
	return snap, nil
}

// header is what a snapshot says before its keys.
type header struct {
	version       uint32
	created       int64
	serverVersion string
	rules         []Rule
	params        []algorithms.Params // of rules, by index
	keys          uint64              // the total END gives
}

// visitor receives what walk decodes. Any callback may be nil. Key and
// value bytes are borrowed from the record being decoded: they are valid
// until record returns.
type visitor struct {
	// headerOnly stops the walk once the rules are decoded: walk then
	// returns the header, having checked nothing after it.
	headerOnly bool
	// key receives a limiter key, its state already checked with
	// algorithms.Valid under the saved rule; a sliding log's entries are
	// in a slice from newLog.
	key func(rule int, key []byte, s algorithms.State) error
	// plain receives a plain key.
	plain func(key, value []byte, expireAt int64) error
	// override receives a per-key override.
	override func(o SavedOverride)
	// script receives a Lua script's source (see scripts.go).
	script func(src []byte) error
	// typed receives a plain key holding a hash, list or sorted set: a
	// new value, which the callee may keep.
	typed func(key []byte, v typedValue, expireAt int64) error
	// forget receives a name of a FORGET record (see partial.go).
	forget func(key string)
	// record runs after each record of keys.
	record func() error
	// newLog returns a slice of n entries for a sliding log's state
	// (nil newLog: a scratch slice, reused).
	newLog func(n int64) []int64
	// buf, if not nil, is the record buffer to use (and grow), so that
	// walks of one file share one.
	buf *[]byte
}

// walk decodes the snapshot in src, size bytes long, record by record,
// handing what it decodes to v, and checks everything Decode promises: the
// header, every record's length (against what remains, before allocating)
// and CRC, the order of records, every rule, key and state, and the totals
// in END. It reads records into one buffer, reused, so its memory is the
// largest record's size.
func walk(src io.Reader, size int64, v visitor) (*header, error) {
	h, err := readHeader(src)
	if err != nil {
		return nil, err
	}
	if v.newLog == nil {
		var scratch []int64
		v.newLog = func(n int64) []int64 {
			if int64(cap(scratch)) < n {
				scratch = make([]int64, n)
			}
			return scratch[:n]
		}
	}
	remaining := size - headerSize
	if v.buf == nil {
		v.buf = new([]byte)
	}
	buf := *v.buf
	defer func() { *v.buf = buf }()
	records, keys := 0, uint64(0)
	for expect := kindMeta; ; {
		kind, payload, err := readRecord(src, &remaining, &buf, records+1)
		if err != nil {
			return nil, err
		}
		records++
		r := &reader{b: payload}
		switch {
		case kind == kindMeta && expect == kindMeta:
			h.created = r.varint()
			h.serverVersion = r.string()
			expect = kindRules
		case kind == kindRules && expect == kindRules:
			if err := decodeRules(r, h); err != nil {
				return nil, err
			}
			if r.err == nil && len(r.b) == 0 && v.headerOnly {
				return h, nil
			}
			expect = kindKeys
		case kind == kindKeys && expect == kindKeys:
			n, err := decodeKeys(r, h, v)
			if err != nil {
				return nil, err
			}
			keys += n
		case kind == kindPlain && expect == kindKeys && h.version >= 2:
			n, err := decodePlain(r, v)
			if err != nil {
				return nil, err
			}
			keys += n
		case kind == kindOverrides && expect == kindKeys && h.version >= 3:
			if err := decodeOverrides(r, h, v); err != nil {
				return nil, err
			}
		case kind == kindScripts && expect == kindKeys && h.version >= 3:
			if err := decodeScripts(r, v); err != nil {
				return nil, err
			}
		case kind >= kindHash && kind < kindHash+typedKinds && expect == kindKeys && h.version >= 3:
			n, err := decodeTyped(r, kind, v)
			if err != nil {
				return nil, err
			}
			keys += n
		case kind == kindForget && expect == kindKeys && h.version >= 3:
			decodeForget(r, v)
		case kind == kindEnd && expect == kindKeys:
			total, count := r.uvarint(), r.uvarint()
			if r.err != nil || len(r.b) != 0 {
				return nil, corrupt("malformed END record")
			}
			if total != keys || count != uint64(records) {
				return nil, corrupt("END says %d keys in %d records, file has %d in %d", total, count, keys, records)
			}
			if remaining != 0 {
				return nil, corrupt("%d bytes after the END record", remaining)
			}
			h.keys = total
			return h, nil
		default:
			return nil, corrupt("record %d: unexpected kind %d", records, kind)
		}
		if r.err != nil {
			return nil, corrupt("record %d: %v", records, r.err)
		}
		if len(r.b) != 0 {
			return nil, corrupt("record %d: %d trailing bytes", records, len(r.b))
		}
		if kind != kindMeta && kind != kindRules && v.record != nil {
			if err := v.record(); err != nil {
				return nil, err
			}
		}
	}
}

// readHeader reads and checks the file's header.
func readHeader(src io.Reader) (*header, error) {
	var hb [headerSize]byte
	if _, err := io.ReadFull(src, hb[:]); err != nil || string(hb[:8]) != magic {
		return nil, corrupt("not an rlserver snapshot (bad magic)")
	}
	h := &header{version: binary.LittleEndian.Uint32(hb[8:])}
	if h.version < 1 || h.version > Version {
		return nil, fmt.Errorf("snapshot format version %d is not supported (this rlserver reads 1 to %d)", h.version, Version)
	}
	if flags := binary.LittleEndian.Uint32(hb[12:]); flags != 0 {
		return nil, corrupt("unknown flags %#x", flags)
	}
	return h, nil
}

// readRecord reads record number nth into *buf (growing it as needed) and
// checks its length against *remaining (the file's bytes left, which it
// lowers) before reading, and its CRC after. It returns the record's kind
// and payload, a slice of *buf.
func readRecord(src io.Reader, remaining *int64, buf *[]byte, nth int) (kind byte, payload []byte, err error) {
	if *remaining < 9 {
		return 0, nil, corrupt("truncated after %d records", nth-1)
	}
	var rh [5]byte
	if _, err := io.ReadFull(src, rh[:]); err != nil {
		return 0, nil, corrupt("record %d: %v", nth, err)
	}
	kind, n := rh[0], binary.LittleEndian.Uint32(rh[1:])
	if n > maxRecordSize || *remaining < 9+int64(n) {
		return 0, nil, corrupt("record %d: length %d exceeds what remains", nth, n)
	}
	if cap(*buf) < int(n)+4 {
		*buf = make([]byte, int(n)+4)
	}
	b := (*buf)[:int(n)+4]
	if _, err := io.ReadFull(src, b); err != nil {
		return 0, nil, corrupt("record %d: %v", nth, err)
	}
	*remaining -= 9 + int64(n)
	payload = b[:n]
	want := binary.LittleEndian.Uint32(b[n:])
	if got := crc32.Update(crc32.Checksum(rh[:], castagnoli), castagnoli, payload); got != want {
		return 0, nil, corrupt("record %d: checksum mismatch", nth)
	}
	return kind, payload, nil
}

func decodeRules(r *reader, h *header) error {
	n := r.count(4) // a rule takes at least 4 bytes
	for range n {
		name := r.string()
		alg := algorithms.Algorithm(r.byte())
		def := rules.Def{Name: name, Algorithm: alg, Limit: r.int63(), Window: time.Duration(r.int63()), Burst: r.int63()}
		if h.version >= 3 {
			if err := setRuleFlags(&def, r.uvarint()); err != nil {
				return err
			}
		}
		if r.err != nil {
			break
		}
		if err := def.Validate(); err != nil {
			return corrupt("rule %q: %v", name, err)
		}
		h.rules = append(h.rules, def)
		h.params = append(h.params, def.Params())
	}
	return r.err
}

// decodeKeys decodes a KEYS record, checking every state with
// algorithms.Valid under its saved rule, and hands each key to v.key.
func decodeKeys(r *reader, h *header, v visitor) (uint64, error) {
	n := r.count(5) // a key takes at least 5 bytes
	for range n {
		ri := r.uvarint()
		if r.err == nil && ri >= uint64(len(h.rules)) {
			return 0, corrupt("key refers to rule %d of %d", ri, len(h.rules))
		}
		key := r.bytes()
		var s algorithms.State
		s.Stamp = r.varint()
		s.Count = r.int63()
		s.Aux = r.int63()
		if r.err != nil {
			break
		}
		p := h.params[ri]
		if p.Algorithm == algorithms.SlidingLog {
			if s.Aux != 0 {
				return 0, corrupt("key %q: sliding log saved with a head of %d", key, s.Aux)
			}
			// Each entry takes at least one byte, so this allocation is
			// bounded by the record's size.
			if s.Count > int64(len(r.b)) {
				return 0, corrupt("key %q: log longer than its record", key)
			}
			s.Log = v.newLog(s.Count)
			prev := s.Stamp
			for i := range s.Log {
				gap := r.int63()
				if i == 0 {
					prev -= gap
				} else {
					prev += gap
				}
				s.Log[i] = prev
			}
			if r.err != nil {
				break
			}
		}
		if err := algorithms.Valid(p, s); err != nil {
			return 0, corrupt("key %q under rule %q: %v", key, h.rules[ri].Name, err)
		}
		if v.key != nil {
			if err := v.key(int(ri), key, s); err != nil {
				return 0, err
			}
		}
	}
	return n, r.err
}

func decodePlain(r *reader, v visitor) (uint64, error) {
	n := r.count(3) // a plain key takes at least 3 bytes
	for range n {
		key := r.bytes()
		value := r.bytes()
		expireAt := r.varint()
		if r.err != nil {
			break
		}
		if expireAt < 0 {
			return 0, corrupt("plain key %q: negative expiry", key)
		}
		if v.plain != nil {
			if err := v.plain(key, value, expireAt); err != nil {
				return 0, err
			}
		}
	}
	return n, r.err
}

// reader decodes a payload, remembering the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = errors.New(what)
	}
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int63() int64 {
	v := r.uvarint()
	if v > 1<<63-1 {
		r.fail("integer out of range")
		return 0
	}
	return int64(v)
}

// count reads an element count, rejecting one the remaining bytes cannot
// hold at minSize bytes each.
func (r *reader) count(minSize int) uint64 {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)/minSize) {
		r.fail("count exceeds the record")
		return 0
	}
	return n
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.fail("truncated")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// bytes returns a length-prefixed string, borrowed from the payload.
func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail("string longer than its record")
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

func (r *reader) string() string { return string(r.bytes()) }
