package keyspace

import "strings"

// Tracking writes, for a cluster slot move.
//
// A node handing slots over copies their keys while it keeps serving them,
// then pauses them and sends only the keys written since the copy began.
// Track starts recording, per shard, the names of the keys (matching a
// filter: the moving slots' keys) that any write touches — a decision, a
// reset, a refund, an override set or ended, a plain key's value or expiry
// set, any removal (DEL, expiry, eviction) — until Untrack. A FLUSHALL
// marks every key written.
//
// The record is the shard's, touched only by its goroutine (or a
// coordinator holding it), like the rest of its state. With no move in
// progress it is nil: a write then costs one nil check, nothing more.

// dirtySet is one shard's record of the keys written since Track.
type dirtySet struct {
	match func(key []byte) bool
	keys  map[string]struct{}
	// all is set by a flush: every key matching was written (removed).
	all bool
}

// wrote records that key was written, if a move is tracking it.
func (s *shard) wrote(key []byte) {
	if s.dirty != nil {
		s.dirty.add(key)
	}
}

// add records key, if it matches.
func (d *dirtySet) add(key []byte) {
	if _, ok := d.keys[string(key)]; ok || !d.match(key) {
		return
	}
	d.keys[string(key)] = struct{}{}
}

// Track starts recording, on every shard, the keys for which match reports
// true that are written from now on (see Dirty), replacing any record in
// progress. match runs on the shards' goroutines, concurrently: it must be
// safe for that and must not keep key. Every write a shard performs after
// Track returns is recorded.
func (m *Map) Track(match func(key []byte) bool) {
	m.each(func(s *shard) { s.dirty = &dirtySet{match: match, keys: map[string]struct{}{}} })
}

// Dirty returns the keys recorded since Track or the previous Dirty, and
// starts a new record; all reports that a flush dropped every key meanwhile
// (keys is then incomplete: every key matching was written). Without Track
// it returns nothing.
func (m *Map) Dirty() (keys []string, all bool) {
	// Each shard fills its own slot; each returns before m.each does. A
	// failed shard runs nothing and leaves its slot empty.
	parts := make([][]string, len(m.shards))
	flushed := make([]bool, len(m.shards))
	m.each(func(s *shard) {
		d := s.dirty
		if d == nil {
			return
		}
		for k := range d.keys {
			parts[s.id] = append(parts[s.id], k)
		}
		flushed[s.id] = d.all
		s.dirty = &dirtySet{match: d.match, keys: map[string]struct{}{}}
	})
	seen := map[string]bool{} // a name may be written on several shards (one per rule)
	for i, part := range parts {
		for _, k := range part {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		all = all || flushed[i]
	}
	return keys, all
}

// Untrack stops recording writes.
func (m *Map) Untrack() {
	m.each(func(s *shard) { s.dirty = nil })
}

// ExportNamed visits, shard after shard, what the keyspace holds for each
// of keys: its plain value, its state under every rule and its overrides.
// emit and override run on the owning shard's goroutine, as Export's emit
// does (quick, keeping nothing they are given). A state under an override
// is exported under its rule's numbers, as Export does.
func (m *Map) ExportNamed(keys []string, emit func(Exported), override func(Override)) {
	ack := make(chan struct{}, 1)
	for _, s := range m.shards {
		s.send(message{fn: func(s *shard) { s.exportNamed(keys, emit, override) }, ack: ack})
		<-ack
	}
}

func (s *shard) exportNamed(keys []string, emit func(Exported), override func(Override)) {
	now := s.clock()
	for _, k := range keys {
		if e := s.lookupPlain([]byte(k), now); e != nil {
			emit(Exported{Key: k, Value: e.value, ExpireAt: e.state.Stamp})
		}
		for _, t := range s.tables {
			o := s.keyOverride(t, []byte(k), now)
			if tk := t.findString(k); tk.held {
				emit(Exported{Rule: t.rule, Key: k, State: s.exportState(t, tk)})
			}
			if o != nil {
				override(o.Override)
			}
		}
	}
}

// Forget drops everything the keyspace holds for each of keys — plain
// value, state under every rule, overrides — as if it had never been
// written: a node taking slots over applies the keys its old owner wrote
// (or deleted) since the bulk copy so.
func (m *Map) Forget(keys []string) {
	m.each(func(s *shard) {
		for _, k := range keys {
			s.forget(k)
		}
	})
}

// ForgetMatching is Forget for every key for which match reports true
// (match runs on the shards' goroutines). It finds them as Export does, a
// chunk of keys per message, and forgets them in batches, so no shard
// stops deciding for longer than a chunk or a batch.
func (m *Map) ForgetMatching(match func(key string) bool) {
	const chunk = 512
	var names []string
	emit := func(x Exported) {
		if match(x.Key) {
			names = append(names, strings.Clone(x.Key)) // x.Key is the entry's buffer
		}
	}
	flush := func() error {
		if len(names) >= chunk {
			m.Forget(names)
			names = names[:0]
		}
		return nil
	}
	m.Export(chunk, emit, flush) // flush returns no error
	for _, o := range m.Overrides(nil) {
		if match(o.Key) {
			names = append(names, o.Key) // an override may have no state
		}
	}
	m.Forget(names)
}

// forget drops key's plain value, states and overrides on this shard.
func (s *shard) forget(key string) {
	if e := s.plain[key]; e != nil {
		s.remove(e)
		s.changes++
	}
	for _, t := range s.tables {
		if o := t.overrides[key]; o != nil {
			delete(t.overrides, key)
			s.overrides--
		}
		if k := t.findString(key); k.held {
			s.removeKey(t, k)
			s.changes++
		}
	}
}
