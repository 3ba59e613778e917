package keyspace

import (
	"iter"
	"maps"
	"unsafe"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/records"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/ttl"
)

// Limiter state has two representations, chosen per table by the rule's
// algorithm (which a rule never changes: a new algorithm is a new rule ID,
// so a new table):
//
//   - records (token and leaky bucket, fixed window, sliding counter): a
//     records.Table of fixed-size records, pointer-free, with the keys'
//     eviction timers on the table's own ttl.IndexWheel, timer i being
//     record i's; about 60 bytes a key and nothing for the garbage
//     collector to scan per key (docs/performance.md#memory-layout);
//   - entries (the sliding log, whose state holds a list of any length):
//     an *entry per key in the table's map, its timer on the shard's wheel,
//     as plain keys are kept.
//
// An lkey names one key's state in a table, whichever the representation;
// the functions below are the only code that tells the two apart.

// lkey is one limiter key's state in its table: record rec of t.recs, or
// entry e of t.states. held is false when the key has no state.
type lkey struct {
	e    *entry
	rec  uint32
	held bool
}

// newTable returns an empty table for rule's keys, created at now.
func (s *shard) newTable(rule *rules.Rule, now int64) *table {
	t := &table{rule: rule}
	if records.Supports(rule.Params.Algorithm) {
		t.recs = records.New(rule.Params.Algorithm)
		t.timers = ttl.NewIndex(now)
		t.fire = func(i uint32) { s.fireRecord(t, i) }
	} else {
		t.states = make(map[string]*entry)
	}
	return t
}

// empty drops every key of t (the caller accounts for them), keeping its
// rule and counters.
func (t *table) empty(now int64) {
	if t.recs != nil {
		t.recs = records.New(t.rule.Params.Algorithm)
		t.timers = ttl.NewIndex(now)
	} else {
		t.states = make(map[string]*entry)
	}
}

// reserve sizes empty t for n keys at once (see Loader.Reserve).
func (t *table) reserve(n int) {
	if t.recs != nil {
		t.recs.Reserve(n)
		t.timers.Reserve(n)
		return
	}
	t.states = make(map[string]*entry, n)
}

// find returns key's state in t.
func (t *table) find(key []byte) lkey {
	if t.recs != nil {
		i, ok := t.recs.Lookup(key)
		return lkey{rec: i, held: ok}
	}
	e := t.states[string(key)] // no allocation: converted in place for lookups
	return lkey{e: e, held: e != nil}
}

// findString is find for a key held as a string.
func (t *table) findString(key string) lkey {
	if t.recs != nil {
		i, ok := t.recs.LookupString(key)
		return lkey{rec: i, held: ok}
	}
	e := t.states[key]
	return lkey{e: e, held: e != nil}
}

// state returns k's state; the zero State (a fresh key) if k is not held.
func (t *table) state(k lkey) algorithms.State {
	switch {
	case !k.held:
		return algorithms.State{}
	case k.e != nil:
		return k.e.state
	}
	return t.recs.State(k.rec)
}

// setState stores st as held key k's state.
func (t *table) setState(k lkey, st algorithms.State) {
	if k.e != nil {
		k.e.state = st
		return
	}
	t.recs.SetState(k.rec, st)
}

// keyOf returns held key k's name. The bytes are the table's: valid until
// the next key is added to or removed from t, and not to be changed.
func (t *table) keyOf(k lkey) []byte {
	if k.e != nil {
		return k.e.keyBytes()
	}
	return t.recs.Key(k.rec)
}

// keyString is keyOf as a string over the same bytes, under the same
// terms: for maps' lookups and Exported.Key, never kept.
func (t *table) keyString(k lkey) string {
	b := t.keyOf(k)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// len returns the number of keys t holds.
func (t *table) len() int {
	if t.recs != nil {
		return t.recs.Len()
	}
	return len(t.states)
}

// schedule sets held key k's eviction timer to instant at.
func (s *shard) schedule(t *table, k lkey, at int64) {
	if k.e != nil {
		s.wheel.Schedule(&k.e.timer, at)
		return
	}
	t.timers.Schedule(k.rec, at)
}

// insert stores a new key's state in t, kept under p, and schedules its
// eviction.
func (s *shard) insert(t *table, key []byte, st algorithms.State, p algorithms.Params) lkey {
	var k lkey
	if t.recs != nil {
		k = lkey{rec: t.recs.Insert(key, st), held: true}
	} else {
		e := s.newEntry(key)
		e.state, e.table = st, t
		t.states[e.key()] = e
		k = lkey{e: e, held: true}
	}
	s.keys++
	s.slotAdded(key)
	s.schedule(t, k, s.dropAt(p, st))
	return k
}

// removeKey forgets held key k of t: the limiter counterpart of remove,
// serving RL.RESET, idle and pressure eviction, a deleted rule and
// FLUSHALL's callers alike.
func (s *shard) removeKey(t *table, k lkey) {
	if k.e != nil {
		s.remove(k.e)
		return
	}
	key := t.recs.Key(k.rec)
	s.wrote(key)
	s.slotRemoved(key)
	t.timers.Cancel(k.rec)
	t.recs.Delete(k.rec) // key's bytes are gone from here on
	s.keys--
}

// paramsOf returns the numbers held key k of t is kept under: its
// override's, or its rule's.
func (s *shard) paramsOf(t *table, k lkey) algorithms.Params {
	if len(t.overrides) != 0 {
		if o := t.overrides[t.keyString(k)]; o != nil {
			return o.params
		}
	}
	return t.rule.Params
}

// fireRecord is a records table's wheel callback: fire for record i.
func (s *shard) fireRecord(t *table, i uint32) {
	k := lkey{rec: i, held: true}
	if at := s.dropAt(s.paramsOf(t, k), t.recs.State(i)); at > s.advancing {
		t.timers.Schedule(i, at)
		return
	}
	s.idleEvictions++
	s.removeKey(t, k)
}

// eachKey calls fn for every key of t. fn may remove the key it is given,
// and no other.
func (t *table) eachKey(fn func(k lkey)) {
	if t.recs == nil {
		for _, e := range t.states {
			fn(lkey{e: e, held: true})
		}
		return
	}
	for i, ok := t.recs.Next(0); ok; i, ok = t.recs.Next(i + 1) {
		fn(lkey{rec: i, held: true})
	}
}

// walker visits one table's keys, or the plain keys, across messages: a
// suspended map iterator, or a records cursor. Keys added or removed
// meanwhile may or may not be visited; a key present throughout is
// visited once. It is touched only on the shard's goroutine.
type walker struct {
	t      *table         // nil for the plain keys
	recs   *records.Table // the records walked: FLUSHALL replaces t.recs
	cursor uint32         // the next record index to look at
	next   func() (string, *entry, bool)
	stop   func()
}

// startWalk points w at the table with ID id (plainID: the plain keys). It
// reports false when that table is gone.
func (s *shard) startWalk(w *walker, id uint64) bool {
	*w = walker{}
	if id == plainID {
		w.next, w.stop = iter.Pull2(maps.All(s.plain))
		return true
	}
	t := s.tables[id]
	if t == nil {
		return false // dropped since the walk began
	}
	w.t = t
	if t.recs != nil {
		w.recs = t.recs
	} else {
		w.next, w.stop = iter.Pull2(maps.All(t.states))
	}
	return true
}

// walkSpan bounds the record indices one step of a walk looks at: a table
// emptied by deletions is mostly free records, and a step over all of them
// at once would stop the shard for as long as the table is large.
const walkSpan = 256

// step returns the walk's next key still held: a plain key's entry (t
// nil), or a limiter key of t; or neither (t and plain nil, ok true) when
// it passed over walkSpan free records without finding one, which counts
// as a step of the caller's chunk. ok is false at the end of the walk,
// which is then released.
func (s *shard) step(w *walker) (t *table, k lkey, plain *entry, ok bool) {
	if w.recs != nil {
		if s.tables[w.t.rule.ID] != w.t || w.t.recs != w.recs {
			return nil, lkey{}, nil, false // dropped or flushed meanwhile
		}
		end := w.cursor + min(walkSpan, ^uint32(0)-w.cursor)
		i, ok := w.recs.NextBefore(w.cursor, end)
		switch {
		case ok:
			w.cursor = i + 1
			return w.t, lkey{rec: i, held: true}, nil, true
		case end < w.recs.Top():
			w.cursor = end
			return nil, lkey{}, nil, true
		}
		return nil, lkey{}, nil, false
	}
	for {
		key, e, ok := w.next()
		if !ok {
			w.release()
			return nil, lkey{}, nil, false
		}
		// Skip an entry removed since (and maybe reused for another key
		// of another map), or left in a map the keyspace dropped
		// (FLUSHALL, a deleted rule).
		if w.t == nil {
			if s.plain[key] == e {
				return nil, lkey{}, e, true
			}
		} else if s.tables[w.t.rule.ID] == w.t && w.t.states[key] == e {
			return w.t, lkey{e: e, held: true}, nil, true
		}
	}
}

// release ends the walk's map iterator, if any.
func (w *walker) release() {
	if w.stop != nil {
		w.stop()
	}
	*w = walker{}
}

// soonest returns the timer due soonest of every key of the shard (limiter
// and plain): a plain key or sliding-log entry (e), or record rec of t.
func (s *shard) soonest() (t *table, k lkey, at int64, ok bool) {
	if tm := s.wheel.Soonest(); tm != nil {
		e := tm.Value
		t, k, at, ok = e.table, lkey{e: e, held: true}, tm.At(), true
	}
	for _, tb := range s.tables {
		if tb.timers == nil {
			continue
		}
		if i, found := tb.timers.Soonest(); found && (!ok || tb.timers.At(i) < at) {
			t, k, at, ok = tb, lkey{rec: i, held: true}, tb.timers.At(i), true
		}
	}
	return
}
