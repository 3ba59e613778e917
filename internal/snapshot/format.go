// Package snapshot is rlserver's on-disk format: encoding and decoding, the
// atomic write of a snapshot file, saving the live keyspace without stopping
// it, and restoring it at start.
//
// # Format (version 2)
//
// A snapshot is a 16-byte header followed by records:
//
//	header:  "RLSNAP\r\n" (8 bytes; the CR LF catches text-mode mangling)
//	         version  uint32 little-endian (1)
//	         flags    uint32 little-endian (0; readers reject other values)
//	record:  kind     uint8
//	         length   uint32 little-endian, the payload's size (<= 64 MiB)
//	         payload  length bytes
//	         crc      uint32 little-endian, CRC-32C of kind, length and payload
//
// Records, in order: one META, one RULES, any number of KEYS and PLAIN (in
// any order; PLAIN only from version 2), one END. A file
// that ends before END, has bytes after it, or whose key count disagrees
// with END is rejected, as is any record whose CRC does not match: every
// corruption is detected, and a snapshot is never half loaded.
//
// Integers in payloads are varints (encoding/binary's Uvarint and Varint).
// Strings are a uvarint length and the bytes.
//
//	META:  created (varint, unix ns), server version (string)
//	RULES: count (uvarint), then per rule: name (string), algorithm (uint8,
//	       algorithms.Algorithm), limit, window (ns), burst (uvarints)
//	KEYS:  count (uvarint), then per key: rule (uvarint index into RULES),
//	       key (string), stamp (varint, unix ns), count, aux (uvarints);
//	       for sliding_log rules, then the log: its entries oldest first,
//	       each as a uvarint gap — the first from stamp backwards
//	       (stamp − entry), each next one from the previous entry forwards
//	PLAIN: count (uvarint), then per plain key (SET, INCR, CL.THROTTLE):
//	       key (string), value (string), expiry (varint, unix ns; 0: none)
//	END:   keys (uvarint, the total over KEYS and PLAIN records), records
//	       (uvarint)
//
// Version 1 is version 2 without PLAIN records; it is still read.
//
// All times are wall-clock nanoseconds since the Unix epoch, so a snapshot
// means the same thing after a restart, and time spent down counts.
package snapshot

import (
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
const Version = 2

const (
	magic         = "RLSNAP\r\n"
	headerSize    = 16
	maxRecordSize = 64 << 20

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
}

func newEncoder(w io.Writer, created int64, serverVersion string, ruleList []Rule) *encoder {
	e := &encoder{w: w, rules: ruleList}
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

// addKey appends one key to the KEYS record being built.
func (e *encoder) addKey(rule int, key string, s *algorithms.State) {
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
}

// addPlain appends one plain key to the PLAIN record being built.
func (e *encoder) addPlain(key string, value []byte, expireAt int64) {
	b := appendString(e.pbuf, key)
	b = binary.AppendUvarint(b, uint64(len(value)))
	b = append(b, value...)
	e.pbuf = binary.AppendVarint(b, expireAt)
	e.pbufN++
}

// pending returns the bytes of records being built.
func (e *encoder) pending() int { return len(e.buf) + len(e.pbuf) }

// flushKeys writes the KEYS and PLAIN records being built, if they hold any
// keys.
func (e *encoder) flushKeys() {
	if e.bufKeys > 0 {
		payload := binary.AppendUvarint(make([]byte, 0, len(e.buf)+10), uint64(e.bufKeys))
		e.record(kindKeys, append(payload, e.buf...))
		e.keys += e.bufKeys
		e.buf, e.bufKeys = e.buf[:0], 0
	}
	if e.pbufN > 0 {
		payload := binary.AppendUvarint(make([]byte, 0, len(e.pbuf)+10), uint64(e.pbufN))
		e.record(kindPlain, append(payload, e.pbuf...))
		e.keys += e.pbufN
		e.pbuf, e.pbufN = e.pbuf[:0], 0
	}
}

// finish writes the END record.
func (e *encoder) finish() error {
	e.flushKeys()
	end := binary.AppendUvarint(nil, uint64(e.keys))
	end = binary.AppendUvarint(end, uint64(e.records+1))
	e.record(kindEnd, end)
	return e.err
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
	if len(data) < headerSize || string(data[:8]) != magic {
		return nil, corrupt("not an rlserver snapshot (bad magic)")
	}
	version := binary.LittleEndian.Uint32(data[8:])
	if version < 1 || version > Version {
		return nil, fmt.Errorf("snapshot format version %d is not supported (this rlserver reads 1 to %d)", version, Version)
	}
	if flags := binary.LittleEndian.Uint32(data[12:]); flags != 0 {
		return nil, corrupt("unknown flags %#x", flags)
	}
	rest := data[headerSize:]
	snap := &Snapshot{Version: version}
	records, keys := 0, 0
	for expect := kindMeta; ; {
		if len(rest) < 9 {
			return nil, corrupt("truncated after %d records", records)
		}
		kind := rest[0]
		n := binary.LittleEndian.Uint32(rest[1:])
		if n > maxRecordSize || uint64(len(rest)) < 9+uint64(n) {
			return nil, corrupt("record %d: length %d exceeds what remains", records+1, n)
		}
		payload := rest[5 : 5+n]
		want := binary.LittleEndian.Uint32(rest[5+n:])
		if got := crc32.Checksum(rest[:5+n], castagnoli); got != want {
			return nil, corrupt("record %d: checksum mismatch", records+1)
		}
		rest = rest[9+n:]
		records++
		r := &reader{b: payload}
		switch {
		case kind == kindMeta && expect == kindMeta:
			snap.Created = r.varint()
			snap.ServerVersion = r.string()
			expect = kindRules
		case kind == kindRules && expect == kindRules:
			if err := decodeRules(r, snap); err != nil {
				return nil, err
			}
			expect = kindKeys
		case kind == kindKeys && expect == kindKeys:
			n, err := decodeKeys(r, snap)
			if err != nil {
				return nil, err
			}
			keys += n
		case kind == kindPlain && expect == kindKeys && version >= 2:
			n, err := decodePlain(r, snap)
			if err != nil {
				return nil, err
			}
			keys += n
		case kind == kindEnd && expect == kindKeys:
			total, count := r.uvarint(), r.uvarint()
			if r.err != nil || len(r.b) != 0 {
				return nil, corrupt("malformed END record")
			}
			if total != uint64(keys) || count != uint64(records) {
				return nil, corrupt("END says %d keys in %d records, file has %d in %d", total, count, keys, records)
			}
			if len(rest) != 0 {
				return nil, corrupt("%d bytes after the END record", len(rest))
			}
			return snap, nil
		default:
			return nil, corrupt("record %d: unexpected kind %d", records, kind)
		}
		if r.err != nil {
			return nil, corrupt("record %d: %v", records, r.err)
		}
		if len(r.b) != 0 {
			return nil, corrupt("record %d: %d trailing bytes", records, len(r.b))
		}
	}
}

func decodeRules(r *reader, snap *Snapshot) error {
	n := r.count(4) // a rule takes at least 4 bytes
	for range n {
		name := r.string()
		alg := algorithms.Algorithm(r.byte())
		def := rules.Def{Name: name, Algorithm: alg, Limit: r.int63(), Window: time.Duration(r.int63()), Burst: r.int63()}
		if r.err != nil {
			break
		}
		if err := def.Validate(); err != nil {
			return corrupt("rule %q: %v", name, err)
		}
		snap.Rules = append(snap.Rules, def)
	}
	return r.err
}

func decodeKeys(r *reader, snap *Snapshot) (int, error) {
	n := r.count(5) // a key takes at least 5 bytes
	for range n {
		ri := r.uvarint()
		if r.err == nil && ri >= uint64(len(snap.Rules)) {
			return 0, corrupt("key refers to rule %d of %d", ri, len(snap.Rules))
		}
		k := Key{Rule: int(ri), Key: r.string()}
		k.State.Stamp = r.varint()
		k.State.Count = r.int63()
		k.State.Aux = r.int63()
		if r.err != nil {
			break
		}
		rule := snap.Rules[ri]
		p := rule.Params()
		switch {
		case rule.Algorithm == algorithms.SlidingLog:
			if k.State.Count > p.Limit || k.State.Aux != 0 {
				return 0, corrupt("key %q: log of %d entries for a limit of %d", k.Key, k.State.Count, p.Limit)
			}
			// Each entry takes at least one byte, so this allocation is
			// bounded by the record's size.
			if k.State.Count > int64(len(r.b)) {
				return 0, corrupt("key %q: log longer than its record", k.Key)
			}
			k.State.Log = make([]int64, k.State.Count)
			prev := k.State.Stamp
			for i := range k.State.Log {
				gap := r.int63()
				if i == 0 {
					prev -= gap
				} else {
					prev += gap
				}
				k.State.Log[i] = prev
			}
			if k.State.Count > 0 && k.State.Log[k.State.Count-1] > k.State.Stamp {
				return 0, corrupt("key %q: log entry after its stamp", k.Key)
			}
		case rule.Algorithm.IsBucket() && (k.State.Aux >= p.Window || k.State.Count > p.Capacity):
			return 0, corrupt("key %q: bucket state out of range", k.Key)
		}
		snap.Keys = append(snap.Keys, k)
	}
	return int(n), r.err
}

func decodePlain(r *reader, snap *Snapshot) (int, error) {
	n := r.count(3) // a plain key takes at least 3 bytes
	for range n {
		k := PlainKey{Key: r.string()}
		k.Value = []byte(r.string())
		k.ExpireAt = r.varint()
		if r.err != nil {
			break
		}
		if k.ExpireAt < 0 {
			return 0, corrupt("plain key %q: negative expiry", k.Key)
		}
		snap.Plain = append(snap.Plain, k)
	}
	return int(n), r.err
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

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail("string longer than its record")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
