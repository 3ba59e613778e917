package keyspace

import (
	"fmt"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
)

// Item is one key's state to load: a limiter key (Rule set) or a plain key
// (Rule nil).
type Item struct {
	Rule *rules.Rule
	// Key and Value are copied by Add: the caller may reuse them at once.
	Key   []byte
	State algorithms.State // limiter keys; State.Log becomes the key's own
	Value []byte
	// Object is a plain key's value of another kind than a string (a
	// hash, list or sorted set), stored as it is: the keyspace owns it
	// from Add on. Value is then unused.
	Object   Value
	ExpireAt int64 // plain keys: ns since the epoch; 0 for no TTL
}

// Loader stores keys loaded from a snapshot, before the server serves.
// Items are gathered in batches of loadBatchItems, each marked with its
// shard; a full batch goes to the shards, every shard storing its group at once, while
// the caller goes on decoding into a second batch. So memory beyond the
// keyspace itself is two batches, however many keys are loaded, and
// decoding overlaps storing.
//
// Config.MaxKeys holds during the load, as it does live:
//   - evict: each shard keeps to its share as it stores, dropping the key
//     that goes fresh soonest whenever it holds one too many (counted as
//     pressure evictions), so it never holds more than its share plus one;
//   - reject, which never drops a key's state: keys are stored while the
//     total held is within MaxKeys (a shard may exceed its share: it then
//     refuses new keys until it is back under); once a batch takes the
//     total past MaxKeys, the rest are only counted (at most the batch
//     being stored meanwhile is stored too), and Close fails with a
//     *LoadLimitError naming the counts.
//
// A Loader belongs to one goroutine.
type Loader struct {
	m        *Map
	fill     *loadBatch // being filled by Add
	spare    *loadBatch // free, or being stored while inflight
	inflight bool
	acks     chan struct{}
	held     []int // keys each shard held after the last batch stored
	counted  int   // reject policy: keys only counted, once over the limit
	over     bool
}

// loadBatch is items with the shard each goes to, and the bytes of their
// keys and values, which it owns. Each shard picks its own items out of the
// one list: a snapshot holds its keys shard after shard, so a batch is
// mostly one shard's, and lists per shard would each have to be able to
// hold all of it.
type loadBatch struct {
	items []Item
	shard []uint32 // shard[i] is the index of the shard items[i] goes to
	bytes []byte   // keys and values of the items, back to back
	n     int
}

// loadBatchItems is how many items a batch holds: enough that the round trip to
// the shards is a small part of the work, few enough that the batches
// (about 110 bytes an item, and its key) are a small part of the memory.
const loadBatchItems = 4096

// LoadLimitError is the error of loading, under the reject policy, more
// keys than Config.MaxKeys.
type LoadLimitError struct {
	Keys    int // keys loaded and counted
	MaxKeys int
}

// Error names the counts and the ways out.
func (e *LoadLimitError) Error() string {
	return fmt.Sprintf("%d keys to load, more than --maxkeys %d, and --maxkeys-policy reject never drops a key's state: "+
		"raise --maxkeys, or choose --maxkeys-policy evict (which drops the keys closest to fresh)", e.Keys, e.MaxKeys)
}

// NewLoader returns a Loader into m.
func (m *Map) NewLoader() *Loader {
	newBatch := func() *loadBatch {
		// Sized once: a snapshot is loaded with the collector off, so
		// growing by doubling would leave garbage beside every batch.
		return &loadBatch{items: make([]Item, 0, loadBatchItems), shard: make([]uint32, 0, loadBatchItems)}
	}
	return &Loader{m: m, fill: newBatch(), spare: newBatch(), acks: make(chan struct{}, len(m.shards)),
		held: make([]int, len(m.shards))}
}

// Reserve says that about n keys of rule (nil: plain keys) are coming, so
// that each shard sizes that table once instead of growing it step by step.
// It only sizes tables that are empty, and must come before those keys.
func (l *Loader) Reserve(rule *rules.Rule, n int) {
	per := n / len(l.m.shards)
	per += per/32 + 16 // xxhash spreads keys evenly, not exactly
	if l.m.limits.perShard > 0 && !l.m.limits.reject {
		per = min(per, l.m.limits.perShard+1) // evict keeps each shard to its share
	}
	l.m.each(func(s *shard) {
		if rule == nil {
			if len(s.plain) == 0 {
				s.plain = make(map[string]*entry, per)
			}
			return
		}
		if t := s.table(rule, s.clock()); t != nil && t.len() == 0 {
			t.reserve(per)
		}
	})
}

// Add queues a copy of it, and hands the batch to the shards once it is
// full. Only an error from an earlier batch (see Flush) is returned.
func (l *Loader) Add(it Item) error {
	if l.over {
		l.counted++
		return nil
	}
	b := l.fill
	i := l.m.shardOf(it.Rule, it.Key)
	it.Key = b.own(it.Key)
	if it.Value != nil {
		it.Value = b.own(it.Value)
	}
	b.items = append(b.items, it)
	b.shard = append(b.shard, uint32(i))
	if b.n++; b.n >= loadBatchItems {
		return l.send()
	}
	return nil
}

// own returns a copy of p in the batch's bytes. Items already holding the
// batch's earlier bytes keep them when the bytes must grow: a new array is
// started, and the old one lives on through them.
func (b *loadBatch) own(p []byte) []byte {
	if len(b.bytes)+len(p) > cap(b.bytes) {
		b.bytes = make([]byte, 0, max(64<<10, len(p)))
	}
	start := len(b.bytes)
	b.bytes = append(b.bytes, p...)
	return b.bytes[start:len(b.bytes):len(b.bytes)]
}

// reset empties b for reuse.
func (b *loadBatch) reset() {
	clear(b.items) // drop references to rules, logs and bytes
	b.items, b.shard = b.items[:0], b.shard[:0]
	b.bytes, b.n = b.bytes[:0], 0
}

// send hands the filled batch to the shards, after waiting for the one
// before it, and starts filling the other.
func (l *Loader) send() error {
	if err := l.wait(); err != nil {
		return err
	}
	b := l.fill
	if l.over { // the batch before took the total past the limit
		l.counted += b.n
		b.reset()
		return nil
	}
	for _, s := range l.m.shards {
		s.inbox <- message{fn: func(s *shard) {
			s.load(b, s.clock())
			l.held[s.id] = s.keys
		}, ack: l.acks}
	}
	l.inflight = true
	l.fill, l.spare = l.spare, b
	return nil
}

// wait waits until the batch being stored is, and checks what it did to
// the limits.
func (l *Loader) wait() error {
	if !l.inflight {
		return nil
	}
	for range l.m.shards {
		<-l.acks
	}
	l.inflight = false
	l.spare.reset()
	if f := l.m.Failure(); f != nil {
		return f
	}
	if l.m.limits.reject && l.m.maxKeys > 0 && l.total() > l.m.maxKeys {
		l.over = true
	}
	return nil
}

// Flush stores every item added so far and returns when the shards have.
func (l *Loader) Flush() error {
	if l.fill.n > 0 {
		if err := l.send(); err != nil {
			return err
		}
	}
	return l.wait()
}

func (l *Loader) total() int {
	n := l.counted
	for _, k := range l.held {
		n += k
	}
	return n
}

// Close stores what remains and reports whether the load stayed within the
// limits (see Loader).
func (l *Loader) Close() error {
	if err := l.Flush(); err != nil {
		return err
	}
	if l.over {
		return &LoadLimitError{Keys: l.total(), MaxKeys: l.m.maxKeys}
	}
	return nil
}

// Import loads items (see Loader).
func (m *Map) Import(items []Item) error {
	l := m.NewLoader()
	for _, it := range items {
		if err := l.Add(it); err != nil {
			l.Flush()
			return err
		}
	}
	return l.Close()
}

// load stores loaded items, replacing any state their keys had, and
// schedules their eviction or expiry. Limiter items whose rule is no longer
// live are skipped. Under the evict policy the shard keeps to its share as
// it goes (see Loader). Only b's items for this shard are its own; the
// batch is read, never written, by every shard at once.
func (s *shard) load(b *loadBatch, now int64) {
	for i := range b.items {
		if b.shard[i] != uint32(s.id) {
			continue
		}
		it := &b.items[i]
		s.wrote(it.Key)
		if it.Rule == nil {
			if old := s.plain[string(it.Key)]; old != nil {
				s.remove(old)
			}
			e := s.insertPlain(it.Key)
			if it.Object != nil {
				s.storedValue(e, it.Object)
			} else {
				str := s.newString()
				str.B = append(str.B, it.Value...)
				s.storedValue(e, str)
			}
			s.setExpiry(e, it.ExpireAt)
		} else {
			t := s.table(it.Rule, now)
			if t == nil {
				continue
			}
			if old := t.find(it.Key); old.held {
				s.removeKey(t, old)
			}
			s.insert(t, it.Key, it.State, t.rule.Params)
		}
		s.relievePressure()
	}
}
