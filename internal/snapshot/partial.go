package snapshot

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

// A slot move's transfers. A node handing slots over sends the new owner
// their keys in the snapshot format, in two steps (see docs/cluster.md):
// the bulk (EncodeKeys: every key matching, read while the node keeps
// serving them), then the keys written since (EncodeNamed), each preceded
// by a FORGET record naming it, so the receiver drops what the bulk gave
// it for that name — a deleted key stays deleted — before storing the
// key's current state:
//
//	FORGET (kind 24, from version 3): count (uvarint), then per name: key
//	       (string). Restore drops every plain value, limiter state and
//	       override the keyspace holds for each name before it stores the
//	       transfer's keys. A snapshot file never holds one; File.Restore
//	       reads and ignores it.
//
// A transfer carries everything the snapshot keeps per key: limiter state
// (KEYS), plain strings (PLAIN), hashes, lists and sorted sets (kinds 10 to
// 12) and overrides (OVERRIDES). Scripts are per node, not per key, and
// are not carried.
const kindForget = 24

// EncodeKeys writes, in the snapshot format (Decode reads it back), the
// rules of store and the keys of keys for which match reports true, with
// their overrides, each key with its state at the moment its shard's chunk
// is read: the bulk of a slot hand-over. now stamps the header and
// rescales states kept under an older revision of their rule. A plain key
// of a kind the format cannot hold is an error. It returns the number of
// keys written.
func EncodeKeys(w io.Writer, store *rules.Store, keys *keyspace.Map, match func(key string) bool, now int64, serverVersion string) (int, error) {
	tr := newTransfer(w, store, now, serverVersion)
	flush := func() error {
		if tr.enc.pending() >= flushAt {
			tr.enc.flushKeys()
		}
		return tr.err()
	}
	emit := func(x keyspace.Exported) {
		if match(x.Key) {
			tr.add(x)
		}
	}
	if err := keys.Export(exportChunk, emit, flush); err != nil {
		return 0, err
	}
	var overrides []keyspace.Override
	for _, o := range keys.Overrides(nil) {
		if match(o.Key) {
			overrides = append(overrides, o)
		}
	}
	tr.enc.addOverrides(tr.byName, overrides)
	return tr.finish()
}

// EncodeNamed writes, in the snapshot format, a FORGET record of names
// and then what keys holds for each of them now (plain value, state under
// every rule, overrides): the keys written since a bulk transfer. It
// returns the number of keys written.
func EncodeNamed(w io.Writer, store *rules.Store, keys *keyspace.Map, names []string, now int64, serverVersion string) (int, error) {
	tr := newTransfer(w, store, now, serverVersion)
	tr.enc.addForget(names)
	var overrides []keyspace.Override
	keys.ExportNamed(names, tr.add, func(o keyspace.Override) { overrides = append(overrides, o) })
	tr.enc.addOverrides(tr.byName, overrides)
	return tr.finish()
}

// transfer is an encoder of a slot move's keys under the rule set taken
// when it starts.
type transfer struct {
	enc    *encoder
	set    *rules.Set
	index  map[uint64]int // rule ID -> position in the saved rules
	byName map[string]int // rule name -> position in the saved rules
	now    int64
	failed error
}

func newTransfer(w io.Writer, store *rules.Store, now int64, serverVersion string) *transfer {
	tr := &transfer{set: store.Load(), index: map[uint64]int{}, byName: map[string]int{}, now: now}
	var saved []Rule
	for _, r := range tr.set.Rules() {
		tr.index[r.ID] = len(saved)
		tr.byName[r.Name] = len(saved)
		saved = append(saved, r.Def)
	}
	tr.enc = newEncoder(w, now, serverVersion, saved)
	return tr
}

// add encodes one exported key (it runs on the key's shard).
func (tr *transfer) add(x keyspace.Exported) {
	if tr.failed != nil {
		return
	}
	if x.Rule == nil {
		if str, ok := x.Value.(*keyspace.String); ok {
			tr.enc.addPlain(x.Key, str.B, x.ExpireAt)
		} else if !tr.enc.addTyped(x.Key, x.Value, x.ExpireAt) {
			tr.failed = fmt.Errorf("plain key %q holds a %T, which the snapshot format cannot carry", x.Key, x.Value)
		}
		return
	}
	i, ok := tr.index[x.Rule.ID]
	if !ok {
		return // the rule was deleted (or replaced) after the set was taken
	}
	s := x.State
	if live := tr.set.ByID(x.Rule.ID); live.Rev != x.Rule.Rev {
		rescaled := algorithms.Rescale(x.Rule.Params, live.Params, *x.State, tr.now)
		s = &rescaled
	}
	if err := tr.enc.addKey(i, x.Key, s); err != nil {
		tr.failed = fmt.Errorf("key %q under rule %s: %w", x.Key, x.Rule.Name, err)
	}
}

func (tr *transfer) err() error {
	if tr.failed != nil {
		return tr.failed
	}
	return tr.enc.err
}

func (tr *transfer) finish() (int, error) {
	if err := tr.err(); err != nil {
		return 0, err
	}
	err := tr.enc.finish()
	return tr.enc.keys, err
}

// addForget writes names as FORGET records, each within maxEntries.
func (e *encoder) addForget(names []string) {
	var buf []byte
	n := 0
	flush := func() {
		if n > 0 {
			e.record(kindForget, append(binary.AppendUvarint(nil, uint64(n)), buf...))
		}
		buf, n = buf[:0], 0
	}
	for _, k := range names {
		if len(buf)+len(k)+binary.MaxVarintLen64 > maxEntries {
			flush()
		}
		buf = appendString(buf, k)
		n++
	}
	flush()
}

// decodeForget hands each name of a FORGET record to v.forget.
func decodeForget(r *reader, v visitor) {
	n := r.count(1) // a name takes at least its length byte
	for range n {
		k := r.bytes()
		if r.err != nil {
			return
		}
		if v.forget != nil {
			v.forget(string(k))
		}
	}
}
