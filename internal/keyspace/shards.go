// Package shards is rlserver's keyspace: a fixed number of shards, each
// owned by exactly one goroutine, holding every (rule, key) state.
//
// Ownership rule: a shard's tables, states and counters are read and written
// only by that shard's goroutine. Work reaches it as messages on its inbox —
// a Batch of decisions from one connection, or a function to run on the
// shard (statistics, rule reconciliation) — and answers come back by the
// same messages. There is no lock on the decision path: a connection routes
// each (rule, key) by xxhash to its shard, groups a pipeline's operations per
// shard so one message carries many decisions, and waits for the shards it
// used.
package keyspace

import (
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/ttl"
)

// DefaultShards returns the shard count used when none is configured: the
// number of CPUs Go may use (GOMAXPROCS), rounded up to a power of two.
//
// Why that many: a shard is one goroutine, so more shards than cores adds no
// parallelism, while every extra shard splits a connection's pipeline into
// more, smaller messages (each costs a channel send and a goroutine wake-up,
// which is most of a decision's cost). One shard per core lets every core
// decide at once and keeps pipelined batches as large as possible.
func DefaultShards() int {
	return 1 << bits.Len(uint(runtime.GOMAXPROCS(0)-1))
}

// Config configures a Map.
type Config struct {
	// Shards is the number of shards, a power of two >= 1.
	Shards int
	// Clock returns the current instant in nanoseconds since the Unix
	// epoch. Each shard reads it once per message, so every decision in a
	// batch shares one instant.
	Clock func() int64
	// Rules is the rule store; shards consult it to tell whether a rule
	// they have not seen yet is still live.
	Rules *rules.Store
	// MaxKeys bounds the keys held, 0 for no bound. The bound is split
	// evenly between shards (each holds at most ⌈MaxKeys/Shards⌉), so no
	// shard ever coordinates with another to enforce it; xxhash spreads
	// keys evenly, so a shard fills up at about the same time as the rest.
	MaxKeys int
	// Reject selects what happens when a request would create a key in a
	// full shard: refuse it with ErrKeyLimit (true), or create it and
	// evict the key whose natural eviction is soonest (false).
	Reject bool
	// TickEvery is how often each shard advances its timing wheel to evict
	// idle keys; 0 leaves it to explicit Tick calls (tests).
	TickEvery time.Duration
	// IdleGrace keeps a key this long after its state has become fresh
	// before the wheel drops it. Dropping a fresh key changes no answer, so
	// any grace is lossless; it trades memory (keys idle for less than the
	// grace stay) for not recreating, within moments, a key whose state
	// refills quickly — a bucket of 1000 per second is fresh 1 ms after a
	// request. 0 drops keys as soon as they are fresh.
	IdleGrace time.Duration
	// MaxKeySize and MaxValueSize bound, in bytes, the key a write may
	// create and the value SET may store (0: DefaultMaxKeySize and
	// DefaultMaxValueSize); a larger one is refused with a *TooLargeError
	// before anything is stored. They are what lets the snapshot format
	// promise to hold every key (see snapshot.CheckSizes).
	MaxKeySize, MaxValueSize int
	// MaxElements bounds the elements (hash fields, list elements,
	// sorted-set members) one value may hold; 0 leaves the bound to the
	// code that builds values (see DB.ValueLimits).
	MaxElements int
	// SlotOf, if set (cluster mode), is the Redis Cluster hash slot of a
	// key, 0..SlotCount-1: each shard then counts its keys per slot, for
	// SlotKeys. nil: no counting, and SlotKeys finds nothing.
	SlotOf func(key []byte) uint16
}

// The default bounds on keys and values: generous for rate-limit keys and
// counters, and small enough that a key and its value always fit a
// snapshot record.
const (
	DefaultMaxKeySize   = 64 << 10
	DefaultMaxValueSize = 32 << 20
)

// keyLimits is what a shard may store: its share of Config.MaxKeys, and the
// largest key and value.
type keyLimits struct {
	perShard int // 0: unbounded
	reject   bool
	maxKey   int // bytes
	maxValue int // bytes
	maxElems int // elements per value; 0: the values' own default
}

// Map is the set of shards. Its methods are safe for concurrent use, except
// that Stop must be called only once every Dispatcher has finished.
type Map struct {
	clock      func() int64
	limits     keyLimits
	maxKeys    int           // Config.MaxKeys
	tickerStop chan struct{} // nil when ticking is off
	tickerDone chan struct{}
	shards     []*shard
	shift      uint // 64 − log2(len(shards)): a hash's top bits pick the shard
	stopOnce   sync.Once

	failOnce sync.Once
	failed   chan struct{} // closed when the first shard fails
	failure  *ShardFailure // the first failure; set before failed is closed

	// overrideCaps holds, by rule ID, an *atomic.Int64: the largest
	// capacity of any override set on that rule since the start
	// (OverrideCapacity).
	overrideCaps sync.Map

	// exporting is held for the whole of an Export: a shard has one scan,
	// so two exports at once (a snapshot saved during a slot move) would
	// each see part of the keys.
	exporting sync.Mutex
}

// OverrideCapacity returns the largest capacity of any override set on
// rule since the start (0: none). It never decreases, so a cost above the
// rule's capacity but within it may be admissible for some key: the shard
// owning the key checks the key's own numbers.
func (m *Map) OverrideCapacity(rule *rules.Rule) int64 {
	if v, ok := m.overrideCaps.Load(rule.ID); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// noteOverrideCapacity raises rule id's OverrideCapacity to c.
func (m *Map) noteOverrideCapacity(id uint64, c int64) {
	v, _ := m.overrideCaps.LoadOrStore(id, new(atomic.Int64))
	max := v.(*atomic.Int64)
	for cur := max.Load(); c > cur && !max.CompareAndSwap(cur, c); cur = max.Load() {
	}
}

// New creates the shards and starts their goroutines.
func New(cfg Config) *Map {
	n := cfg.Shards
	if n < 1 || n&(n-1) != 0 {
		panic("shards: shard count must be a power of two")
	}
	m := &Map{clock: cfg.Clock, shift: uint(64 - bits.Len(uint(n-1))), maxKeys: cfg.MaxKeys, failed: make(chan struct{})}
	if n == 1 {
		m.shift = 64
	}
	limits := keyLimits{reject: cfg.Reject, maxKey: cfg.MaxKeySize, maxValue: cfg.MaxValueSize, maxElems: cfg.MaxElements}
	if limits.maxKey <= 0 {
		limits.maxKey = DefaultMaxKeySize
	}
	if limits.maxValue <= 0 {
		limits.maxValue = DefaultMaxValueSize
	}
	if cfg.MaxKeys > 0 {
		limits.perShard = (cfg.MaxKeys + n - 1) / n
	}
	m.limits = limits
	now := cfg.Clock()
	for i := range n {
		s := &shard{
			id:     i,
			m:      m,
			inbox:  make(chan message, 256),
			exited: make(chan struct{}),
			clock:  cfg.Clock,
			rules:  cfg.Rules,
			limits: limits,
			grace:  int64(cfg.IdleGrace),
			tables: make(map[uint64]*table),
			plain:  make(map[string]*entry),
			wheel:  ttl.New[*entry](now),
		}
		if cfg.SlotOf != nil {
			s.slots = &slotCounts{slotOf: cfg.SlotOf}
		}
		m.shards = append(m.shards, s)
		go s.run()
	}
	if cfg.TickEvery > 0 {
		m.tickerStop, m.tickerDone = make(chan struct{}), make(chan struct{})
		go m.ticker(cfg.TickEvery)
	}
	return m
}

// Len returns the number of shards.
func (m *Map) Len() int { return len(m.shards) }

// MaxSizes returns Config.MaxKeySize and Config.MaxValueSize.
func (m *Map) MaxSizes() (key, value int) { return m.limits.maxKey, m.limits.maxValue }

// Stop ends every shard's goroutine and waits for them to exit. It is safe
// to call twice.
func (m *Map) Stop() {
	m.stopOnce.Do(func() {
		if m.tickerStop != nil {
			close(m.tickerStop)
			<-m.tickerDone
		}
		for _, s := range m.shards {
			close(s.inbox)
		}
		for _, s := range m.shards {
			<-s.exited
		}
	})
}

// shardOf routes a (rule, key) to its shard. Mixing the rule's ID into the
// key's xxhash spreads one hot key used under several rules over shards.
func (m *Map) shardOf(rule *rules.Rule, key []byte) int {
	h := xxhash.Sum64(key)
	if rule != nil { // plain keys hash by the key alone
		h ^= rule.ID * 0x9E3779B97F4A7C15
	}
	h *= 0xBF58476D1CE4E5B9
	if m.shift == 64 {
		return 0
	}
	return int(h >> m.shift)
}

// each runs fn on every shard's goroutine, all shards at once, and waits
// until all have run it.
func (m *Map) each(fn func(*shard)) {
	ack := make(chan struct{}, len(m.shards))
	for _, s := range m.shards {
		s.send(message{fn: fn, ack: ack})
	}
	for range m.shards {
		<-ack
	}
}

// RuleStats counts one rule's keys and decisions.
type RuleStats struct {
	Keys            int
	Allowed, Denied uint64
	// ShadowDenied counts the admissions of a rule in shadow mode that
	// would have been denials (they are in Allowed).
	ShadowDenied uint64
	// Overrides counts the rule's per-key overrides (some may have expired
	// since the last tick).
	Overrides int
}

// Stats is a point-in-time view of the keyspace, summed over shards (each
// shard's part is exact; the parts are taken at slightly different moments).
type Stats struct {
	// Keys counts limiter keys: (rule, key) pairs holding state.
	Keys int
	// PlainKeys counts plain keys (SET, INCR, CL.THROTTLE), of which
	// PlainExpiring have a TTL; ExpiredKeys counts those that expired.
	PlainKeys, PlainExpiring int
	// PlainBytes is the bytes the plain keys' values hold (the sum of
	// their sizes: a string's length; a hash, list or sorted set's
	// elements with their per-element overhead).
	PlainBytes      int
	ExpiredKeys     uint64
	Allowed, Denied uint64
	// IdleEvictions counts keys dropped because their state became fresh
	// again (no information lost); PressureEvictions counts keys dropped to
	// respect MaxKeys (their budget forgotten).
	IdleEvictions, PressureEvictions uint64
	// Changes counts state changes since start: spends, resets, rule
	// changes and pressure evictions. The difference between two readings
	// is the work a snapshot taken at the first would lose.
	Changes uint64
	// Rules is keyed by rule ID; a rule with no keys yet may be absent.
	Rules map[uint64]RuleStats
}

// Stats gathers counters from every shard.
func (m *Map) Stats() Stats {
	var mu sync.Mutex
	st := Stats{Rules: map[uint64]RuleStats{}}
	m.each(func(s *shard) {
		mu.Lock()
		defer mu.Unlock()
		s.addStats(&st)
	})
	return st
}

// addStats adds the shard's counters to st.
func (s *shard) addStats(st *Stats) {
	st.Allowed += s.allowed
	st.Denied += s.denied
	st.IdleEvictions += s.idleEvictions
	st.PressureEvictions += s.pressureEvictions
	st.Changes += s.changes
	st.Keys += s.keys - len(s.plain)
	st.PlainKeys += len(s.plain)
	st.PlainExpiring += s.expiring
	st.PlainBytes += s.valueBytes
	st.ExpiredKeys += s.expired
	for id, t := range s.tables {
		rs := st.Rules[id]
		rs.Keys += t.len()
		rs.Allowed += t.allowed
		rs.Denied += t.denied
		rs.ShadowDenied += t.shadowDenied
		rs.Overrides += len(t.overrides)
		st.Rules[id] = rs
	}
}

// Keys returns copies of the live plain keys for which match reports true,
// in no particular order: O(keys), every shard visiting all of its plain
// keys at once (KEYS). match runs on the shards' goroutines, several at a
// time.
func (m *Map) Keys(match func(key []byte) bool) [][]byte {
	var mu sync.Mutex
	var out [][]byte
	m.each(func(s *shard) {
		mine := s.appendKeys(nil, match, s.clock())
		mu.Lock()
		defer mu.Unlock()
		out = append(out, mine...)
	})
	return out
}

// appendKeys appends to dst copies of the shard's plain keys live at now
// that match accepts.
func (s *shard) appendKeys(dst [][]byte, match func(key []byte) bool, now int64) [][]byte {
	for _, e := range s.plain {
		if e.state.Stamp != 0 && e.state.Stamp <= now {
			continue // expired, not yet removed
		}
		if match(e.keyBytes()) {
			dst = append(dst, append([]byte(nil), e.keyBytes()...))
		}
	}
	return dst
}

// Flush drops every key, limiter state and plain keys alike (FLUSHALL).
func (m *Map) Flush() {
	m.each(func(s *shard) { s.flush(s.clock()) })
}

// Reconcile brings every shard up to date with the current rule set: the
// state of deleted rules (and of rules whose algorithm changed) is dropped,
// and the state of rules whose numbers changed is rescaled. It returns when
// every shard has done so. Call it after every change to the rules;
// decisions made before it returns are still correct, because shards also
// reconcile lazily, but memory is only reclaimed here.
func (m *Map) Reconcile() {
	m.each(func(s *shard) { s.reconcile() })
}

// Tick advances every shard's timing wheel to the clock's current instant,
// evicting the keys whose state has become fresh, and returns when all have.
// Shards also tick on their own every Config.TickEvery.
func (m *Map) Tick() {
	m.each(func(s *shard) { s.tick(s.clock()) })
}

// Exported is one key as Export hands it over. It is valid only while emit
// runs: copy what must outlive it.
type Exported struct {
	Rule  *rules.Rule // the rule revision State is kept under; nil for a plain key
	Key   string
	State *algorithms.State // limiter keys
	// Plain keys:
	Value    Value
	ExpireAt int64 // ns since the epoch; 0 for no TTL
}

// Export visits every key — limiter state and plain keys — shard after
// shard, in chunks of at most chunk keys. emit runs on the owning shard's
// goroutine, between that shard's other messages, so it must be quick and
// must not keep what it is given; after each chunk, flush runs on the
// caller's goroutine (to write out what emit gathered) before the next chunk
// is asked for. Deciding never stops for longer than one chunk. Keys created
// or deleted while the export runs may or may not be visited; each other key
// is visited once, with its state at the moment its chunk ran. Exports
// run one at a time: a second waits for the first to finish.
func (m *Map) Export(chunk int, emit func(Exported), flush func() error) error {
	m.exporting.Lock()
	defer m.exporting.Unlock()
	ack := make(chan struct{}, 1)
	for _, s := range m.shards {
		for more := true; more; {
			// A failed shard runs no function (see shard.refuse): more
			// stays false and its keys are skipped.
			more = false
			s.send(message{fn: func(s *shard) { more = s.scanChunk(chunk, emit) }, ack: ack})
			<-ack
			if err := flush(); err != nil {
				s.send(message{fn: func(s *shard) { s.abortScan() }, ack: ack})
				<-ack
				return err
			}
		}
	}
	return nil
}

// ticker asks every shard to advance its timing wheel every period. A tick
// is skipped for a shard whose inbox is full: it is busy, and the next tick
// catches up (the wheel advances to the current instant, however late).
func (m *Map) ticker(period time.Duration) {
	defer close(m.tickerDone)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-m.tickerStop:
			return
		case <-t.C:
			for _, s := range m.shards {
				select {
				case s.inbox <- message{tick: true}:
				default:
				}
			}
		}
	}
}
