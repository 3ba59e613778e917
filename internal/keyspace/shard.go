package keyspace

import (
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tidwall/btree"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/records"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/ttl"
)

// shard owns the state of the keys routed to it. Every field below rules is
// touched only by the goroutine holding running: a Dispatcher running its
// batch in place, the shard's own goroutine handling a message, or a
// coordinator the shard's goroutine has lent the state to (see hold).
type shard struct {
	id     int  // index in Map.shards
	m      *Map // for reporting a failure
	inbox  chan message
	exited chan struct{}
	clock  func() int64
	rules  *rules.Store
	limits keyLimits
	// own records which goroutine may touch the state (builds tagged
	// invariants only; see invariants_on.go).
	own owners //lint:ignore U1000 read only by the invariants build
	// failed is set once a panic may have left the state half changed
	// (see failure.go); from then on nothing reads or writes the state.
	failed atomic.Bool
	// running is held by the goroutine running the shard's state: a
	// Dispatcher running a batch in place (Dispatcher.Run), or the
	// shard's own goroutine while it handles a message (a hold included:
	// the coordinator then works under it). It is what makes operations
	// on one key atomic and ordered.
	running sync.Mutex
	// waiting counts goroutines blocked in acquire (see release).
	waiting atomic.Int32
	// touched keeps what touch read, so the reads stay.
	touched uint64

	tables map[uint64]*table // by rule ID
	plain  map[string]*entry // plain keys; see value.go
	// wheel holds every entry's eviction timer (the records' are on their
	// tables' wheels): an entry leaves at the instant its state becomes
	// indistinguishable from a new key's, or its TTL passes.
	wheel *ttl.Wheel[*entry]
	keys  int // entries in all tables and plain keys
	// advancing is the instant tick is advancing the wheel to, for fire.
	advancing int64
	grace     int64 // Config.IdleGrace, ns
	expiring  int   // plain keys with a TTL
	expired   uint64
	// valueBytes is the sum of the plain keys' value sizes (Value.Size)
	// as last stored: the memory values hold, beyond their keys and
	// entries.
	valueBytes int

	allowed, denied   uint64 // decisions since start, all rules
	idleEvictions     uint64 // entries dropped by the wheel: lossless
	pressureEvictions uint64 // entries dropped to respect the key limit: lossy
	changes           uint64 // state changes: spends, resets, evictions by pressure

	scan *scan // an export in progress, or nil
	// slots counts keys per cluster slot; nil unless Config.SlotOf is
	// set (see slots.go).
	slots *slotCounts
	// scanIndex orders the plain keys for SCAN (see scan.go); nil until
	// the first SCAN reaches the shard; scanned is when a SCAN last
	// asked for it (ns).
	scanIndex *btree.BTreeG[scanItem]
	scanBuild *scanBuild // the index's build while under way
	scanned   int64

	// free holds removed entries for reuse, with their key buffers, and
	// freeStrings the String values of removed plain keys, so a workload
	// that keeps creating and evicting keys does not allocate for each (see
	// newEntry, newString).
	free        []*entry
	freeStrings []*String
	// db is the DB a Task from a batch runs with: this shard alone.
	db DB
	// lastTable caches the table of the rule used last: most batches are
	// one rule's.
	lastTable *table
	// overrides counts the overrides in all tables; overrideQ orders them
	// by expiry (see override.go).
	overrides int
	overrideQ overrideHeap
	exported  algorithms.State // exportState's scratch
	// dirty records the keys written while a slot move copies them (see
	// track.go); nil when no move is in progress.
	dirty *dirtySet
}

// maxFree bounds the entries (and the String values) kept for reuse per
// shard; maxReusedKey and maxReusedValue the sizes of the buffers kept.
const (
	maxFree        = 4096
	maxReusedKey   = 128
	maxReusedValue = 128
)

// table holds one rule's keys on one shard, as records or as entries (see
// limiter.go).
type table struct {
	// rule is the newest revision of the rule this shard has applied to
	// states: every state in the table is kept under rule.Params.
	rule *rules.Rule
	// recs holds the keys' states when the rule's algorithm has a record
	// layout, and timers their eviction timers, timer i being record i's;
	// fire is timers' callback. Otherwise all three are nil and states
	// holds an entry per key, timed on the shard's wheel.
	recs            *records.Table
	timers          *ttl.IndexWheel
	fire            func(i uint32)
	states          map[string]*entry
	allowed, denied uint64
	// shadowDenied counts the decisions a rule in shadow mode admitted
	// that it would have denied (they are in allowed too).
	shadowDenied uint64
	// overrides holds the keys whose numbers are overridden (nil until
	// the first): their states are kept under the override's numbers.
	overrides map[string]*override
}

// entry is one (rule, key)'s state and its eviction timer, or one plain
// key's value and its expiry timer (table is nil). It is kept small: every
// byte here is paid once per key.
type entry struct {
	// state is the limiter's state. For a plain key, state.Stamp is its
	// expiry instant (ns since the epoch; 0 for no TTL) and the rest is
	// unused.
	state algorithms.State
	timer ttl.Timer[*entry] // Value points back at the entry
	// keyPtr and keyLen hold the key's bytes (keys are at most 1 GiB, see
	// Config.MaxKeySize), 12 bytes where a slice header takes 24, so that
	// with size an entry stays at 128 bytes, one allocation size class below
	// 144 (TestEntryFitsSizeClass). The map key is a string over these bytes
	// (key()), which never change while the entry is in a map (newEntry).
	// A recycled entry keeps its buffer, keyLen then being its capacity.
	keyPtr *byte
	keyLen uint32
	// size is value's Size when it was last stored, counted in the shard's
	// valueBytes (values are at most Config.MaxValueSize, 1 GiB).
	size  uint32
	table *table
	// value is a plain key's value; nil for limiter state.
	value Value
}

// key returns the entry's key as the string its map holds.
func (e *entry) key() string { return unsafe.String(e.keyPtr, int(e.keyLen)) }

// keyBytes returns the entry's key as bytes, which the caller must not
// change.
func (e *entry) keyBytes() []byte { return unsafe.Slice(e.keyPtr, int(e.keyLen)) }

// setKey copies key into the entry, reusing its buffer when large enough
// (a recycled entry's keyLen is its buffer's length).
func (e *entry) setKey(key []byte) {
	if e.keyPtr == nil || len(key) > int(e.keyLen) {
		e.keyPtr = unsafe.SliceData(append([]byte(nil), key...))
	} else {
		copy(unsafe.Slice(e.keyPtr, len(key)), key)
	}
	e.keyLen = uint32(len(key))
}

// send puts msg in s's inbox. The sender must not hold s (it would wait
// forever for an answer): builds tagged invariants check it.
func (s *shard) send(msg message) {
	s.assertNotHeldByCaller()
	s.inbox <- msg
}

// run is the shard's goroutine: it serves its inbox until Stop closes it.
// If handling a message panics, the shard fails (see failure.go) and spends
// the rest of its life refusing messages, so no sender waits forever.
func (s *shard) run() {
	defer close(s.exited)
	s.acquire() // a Dispatcher may be running a batch in place already
	s.started()
	s.release()
	if s.serve() {
		return
	}
	for msg := range s.inbox {
		s.refuse(msg)
	}
}

// serve handles messages until the inbox is closed (it returns true) or a
// handler panics (false, after marking the shard failed and answering the
// message that panicked). It waits on its inbox alone: ticks of the timing
// wheel arrive as messages too (see Map.ticker). A panic can only come from
// handle, with running held: it is released once the shard is marked
// failed, so rounds waiting for the shard see the failure.
func (s *shard) serve() (closed bool) {
	var msg message
	panicked := true
	defer func() {
		if panicked {
			s.fail(recover(), debug.Stack())
			s.release()
			s.refuse(msg)
		}
	}()
	for msg = range s.inbox {
		s.acquire()
		if s.failed.Load() { // it failed in a Dispatcher running in place
			s.release()
			panicked = false
			s.refuse(msg)
			return false
		}
		s.claim()
		healthy := s.handle(msg)
		s.release()
		if !healthy {
			panicked = false
			return false
		}
	}
	panicked = false
	return true
}

// acquire takes running, waiting for it if another goroutine runs the
// shard's state.
func (s *shard) acquire() {
	if s.running.TryLock() {
		return
	}
	s.waiting.Add(1)
	s.running.Lock()
	s.waiting.Add(-1)
}

// release gives running back. If a goroutine waits for it, the unlock has
// made that goroutine runnable on the caller's processor, behind the
// caller; an event loop that finds input every round never parks, so the
// waiter (the shard's own goroutine with a wheel tick, or a Dispatcher)
// would wait for Go's scheduler to preempt the loop, 10 ms later. Yielding
// lets it run now; it costs nothing when nobody waits.
func (s *shard) release() {
	s.running.Unlock()
	if s.waiting.Load() != 0 {
		runtime.Gosched()
	}
}

// tryRunBatch runs batch on the calling goroutine if the shard is idle,
// and reports whether it did. runBatch waits until the shard is idle.
// Running in place saves the two goroutine switches (and, on more than one
// core, the wake-up of another thread) that a message and its answer cost:
// with them a decision at P16 took 1.34–1.40× its one-core CPU on two
// cores, without them 1.13–1.19× (docs/performance.md). A panic fails the shard, as on its own
// goroutine, and the batch's operations get ErrShardFailed.
func (s *shard) tryRunBatch(batch *Batch) bool {
	s.assertNotHeldByCaller()
	if !s.running.TryLock() {
		return false
	}
	s.runHeld(batch)
	return true
}

func (s *shard) runBatch(batch *Batch) {
	s.assertNotHeldByCaller()
	s.acquire()
	s.runHeld(batch)
}

// runHeld runs batch with running held, and releases it.
func (s *shard) runHeld(batch *Batch) {
	defer s.release()
	if s.failed.Load() {
		refuseBatch(batch)
		return
	}
	s.claim()
	panicked := true
	defer func() {
		if panicked {
			s.fail(recover(), debug.Stack())
			refuseBatch(batch)
		}
	}()
	s.applyBatch(batch)
	panicked = false
}

// applyBatch performs batch's operations in order.
func (s *shard) applyBatch(batch *Batch) {
	if len(batch.Ops) > 1 {
		s.touch(batch.Ops)
	}
	now := s.clock()
	for i := range batch.Ops {
		op := &batch.Ops[i]
		if op.Kind == Run {
			s.db.single(s, now)
			op.Task.Run(&s.db)
			continue
		}
		s.apply(op, now)
	}
	s.relievePressure()
}

// touchFrom is the number of keys from which a table's records are read
// ahead (shard.touch). A smaller table mostly stays in the processor's
// caches, where reading ahead costs more than it saves. Measured: with
// 500,000 keys a table (1M keys over 2 shards, about 25 MB each) reading
// ahead cut CPU per decision at P16 by 7–15%; with 50,000 (about 2.5 MB)
// it added 7% to a pipelined batch's cost (docs/performance.md). Sizes in
// between were not measured.
var touchFrom = 1 << 18 // a variable for tests to lower

// touch reads ahead the records the batch's operations will look up
// (records.Table.Touch), so that their cache misses overlap. It changes
// nothing: a rule without a table yet, kept in a map, or with fewer than
// touchFrom keys, is skipped.
func (s *shard) touch(ops []Op) {
	var got uint64
	t := s.lastTable
	for i := range ops {
		op := &ops[i]
		if op.Rule == nil || op.Kind == Run {
			continue
		}
		if t == nil || t.rule.ID != op.Rule.ID {
			if t = s.tables[op.Rule.ID]; t == nil {
				continue
			}
		}
		if t.recs != nil && t.recs.Len() >= touchFrom {
			got += t.recs.Touch(op.Key)
		}
	}
	s.touched = got
}

// handle performs one message and answers it. It returns false if the
// shard has failed meanwhile: a coordinator it was lent to panicked while
// changing its state.
func (s *shard) handle(msg message) (healthy bool) {
	switch {
	case msg.call != nil:
		s.db.single(s, s.clock())
		msg.call.run(&s.db)
		s.relievePressure()
		msg.call.done <- struct{}{}
	case msg.tick:
		s.tick(s.clock())
	case msg.hold != nil:
		// Lend this shard's state to the coordinator: it reads and
		// writes it from its own goroutine until it releases us. The
		// channel operations order its accesses after ours and ours
		// after its.
		msg.hold.held <- struct{}{}
		<-msg.hold.release
		if s.failed.Load() {
			return false
		}
		s.relievePressure()
	default:
		msg.fn(s)
		msg.ack <- struct{}{}
	}
	return true
}

func (s *shard) apply(op *Op, now int64) {
	s.assertOwner()
	if s.dirty != nil && op.Kind != Peek && op.Kind != GetOverride {
		s.dirty.add(op.Key)
	}
	t, k, p := s.resolve(op, now)
	if (op.Kind == Allow || op.Kind == Peek) && op.Cost > p.Capacity {
		// The service checked the cost against the rule's capacity, or
		// let a larger one through because an override of the rule has
		// more: the key's own numbers decide.
		op.Err = &CapacityError{Cost: op.Cost, Capacity: p.Capacity, Rule: op.Rule.Name, Override: p != op.Rule.Params}
		return
	}
	switch op.Kind {
	case Allow, Acquire:
		s.spend(t, k, p, op, now)
	case Peek:
		var cur algorithms.State
		if k.held {
			cur = t.state(k)
		}
		op.Decision = algorithms.Peek(p, cur, now, op.Cost)
		if t != nil && t.rule.Shadow {
			// What RL.ALLOW would answer: an admission (not counted).
			op.Shadow, op.ShadowDenied = true, !op.Decision.Allowed
			op.Decision.Allowed, op.Decision.RetryAfter = true, 0
		}
	case Reset:
		op.Existed = k.held
		if k.held {
			s.removeKey(t, k)
			s.changes++
		}
	case Refund:
		s.refund(t, k, p, op, now)
	case SetOverride:
		s.setOverride(t, op, now)
	case GetOverride, DelOverride:
		s.overrideOp(t, op, now)
	}
}

// resolve finds what op works on: its rule's table (nil when the rule was
// deleted while op was in flight), the key's state (not held when it has
// none) and the numbers the key is decided under.
func (s *shard) resolve(op *Op, now int64) (*table, lkey, algorithms.Params) {
	t := s.table(op.Rule, now)
	if t == nil {
		return nil, lkey{}, op.Rule.Params
	}
	k := t.find(op.Key)
	if o := s.keyOverride(t, op.Key, now); o != nil {
		return t, k, o.params
	}
	return t, k, t.rule.Params
}

// spend decides an Allow (a cost, all or nothing) or an Acquire (as many
// units as the key can give, up to op.Cost) against key k in t (t may be
// nil, k not held), under p, and stores what was spent.
func (s *shard) spend(t *table, k lkey, p algorithms.Params, op *Op, now int64) {
	var cur algorithms.State
	if k.held {
		cur = t.state(k)
	}
	var next algorithms.State
	var d algorithms.Decision
	if op.Kind == Allow {
		next, d = algorithms.Decide(p, cur, now, op.Cost)
	} else {
		next, op.Granted, d = algorithms.Acquire(p, cur, now, op.Cost)
		op.At = next.Stamp
	}
	if t == nil {
		op.Decision = d
		return // the rule was deleted while this request was in flight
	}
	if !k.held && d.Allowed {
		if err := s.mayCreate(op.Key); err != nil {
			op.Err = err // nothing is spent
			op.Granted = 0
			return
		}
	}
	op.Decision = d
	op.Shadow = t.rule.Shadow
	switch {
	case d.Allowed:
		s.allowed++
		t.allowed++
		s.changes++
	case op.Shadow:
		s.shadowAdmit(t, op)
	default:
		s.denied++
		t.denied++
	}
	switch {
	case k.held:
		// The eviction timer is left where it is. A decision can only
		// move the instant the key goes fresh later (an admission
		// spends; a denial spends nothing), never earlier, so the
		// timer may fire early but never late; fire then finds the
		// key not yet fresh and moves the timer to the new instant.
		// A hot key thus costs the wheel one move per timer period
		// instead of one per decision.
		t.setState(k, next)
	case d.Allowed:
		s.insert(t, op.Key, next, p)
	}
}

// shadowAdmit turns a denial under a rule in shadow mode into the
// admission the client sees, counting the denial that would have happened.
// Nothing more is spent than the real decision spent: an Allow denied
// spends nothing, an Acquire only the units the key could give, though its
// reply grants all it asked.
func (s *shard) shadowAdmit(t *table, op *Op) {
	op.ShadowDenied = true
	op.Decision.Allowed = true
	op.Decision.RetryAfter = 0
	if op.Kind == Acquire {
		op.Granted = op.Cost
	}
	s.allowed++
	t.allowed++
	t.shadowDenied++
}

// refund gives back up to op.Cost units granted at op.At to key k of t
// (not held: the key holds nothing, so nothing is taken back), under p.
func (s *shard) refund(t *table, k lkey, p algorithms.Params, op *Op, now int64) {
	if !k.held {
		return
	}
	next, n := algorithms.Refund(p, t.state(k), now, op.At, op.Cost)
	t.setState(k, next) // advanced to now even when nothing was given back
	op.Granted = n
	if n > 0 {
		s.changes++
		// A refund moves the instant the key goes fresh earlier: the
		// timer follows, so the key does not linger.
		s.schedule(t, k, s.dropAt(p, next))
	}
}

// mayCreate is the one check before the shard stores a new key, on every
// path that creates one (RL.ALLOW, RL.ALLOWALL, SET, INCRBY, CL.THROTTLE):
// the key must be no larger than Config.MaxKeySize, and under the reject
// policy with a key limit set, the shard must have room for it. (Under the
// evict policy a full shard still creates the key; relievePressure then
// evicts after the message.)
func (s *shard) mayCreate(key []byte) error {
	if len(key) > s.limits.maxKey {
		return &TooLargeError{What: "key", Size: len(key), Limit: s.limits.maxKey}
	}
	if !s.hasRoom(1) {
		return ErrKeyLimit
	}
	return nil
}

// hasRoom reports whether n more keys may be created: always, unless the
// reject policy is on with a key limit and the shard would exceed its share.
func (s *shard) hasRoom(n int) bool {
	return !s.limits.reject || s.limits.perShard == 0 || s.keys+n <= s.limits.perShard
}

// dropAt returns the instant a limiter entry with state st under p may be
// dropped: when it is fresh, plus the grace (saturating, so a far-off
// instant never wraps into the past).
func (s *shard) dropAt(p algorithms.Params, st algorithms.State) int64 {
	at := algorithms.FreshAt(p, st)
	if at > math.MaxInt64-s.grace {
		return math.MaxInt64
	}
	return at + s.grace
}

// newEntry returns an empty entry for key, reusing a removed one when it
// can. The map key is a string over the entry's own key buffer
// (unsafe.String): the buffer is written only here, before the entry enters
// a map, and reused only after remove has taken it out of every map, so the
// string is immutable for as long as any map holds it.
func (s *shard) newEntry(key []byte) *entry {
	var e *entry
	if n := len(s.free); n > 0 {
		e, s.free = s.free[n-1], s.free[:n-1]
	} else {
		e = &entry{}
		e.timer.Value = e
	}
	e.setKey(key)
	return e
}

// reuseValue keeps the String value of a plain key that is about to be
// removed by the keyspace itself (its expiry passed), for newString. Only
// such removals give values back: a value a Task has looked up may still be
// in its hands after it deletes the key.
func (s *shard) reuseValue(e *entry) {
	if str, ok := e.value.(*String); ok && len(s.freeStrings) < maxFree && cap(str.B) <= maxReusedValue {
		str.B = str.B[:0]
		s.freeStrings = append(s.freeStrings, str)
	}
}

// recycle keeps a removed entry for reuse. The caller must not use e after.
func (s *shard) recycle(e *entry) {
	if len(s.free) >= maxFree || int(e.keyLen) > maxReusedKey {
		return
	}
	*e = entry{keyPtr: e.keyPtr, keyLen: e.keyLen}
	e.timer.Value = e
	s.free = append(s.free, e)
}

// remove forgets e, a plain key or a limiter entry (removeKey is the way
// for every limiter key): the same path serves RL.RESET, DEL, idle
// eviction, expiry and pressure eviction. e is recycled: the caller must
// not use it after.
func (s *shard) remove(e *entry) {
	s.wrote(e.keyBytes())
	s.wheel.Cancel(&e.timer)
	if e.table != nil {
		delete(e.table.states, e.key())
	} else {
		delete(s.plain, e.key())
		s.unindexPlain(e)
		if e.state.Stamp != 0 {
			s.expiring--
		}
		s.valueBytes -= int(e.size)
	}
	s.keys--
	s.slotRemoved(e.keyBytes())
	s.recycle(e)
}

// fire is the wheel's callback: a limiter entry's state is fresh again (so
// dropping it changes nothing), or a plain key's TTL has run out. A limiter
// entry's timer may be early (see apply): if its state goes fresh after the
// instant being advanced to, the timer moves there instead. That instant is
// later than the tick being fired, so the timer cannot fire again in this
// Advance.
func (s *shard) fire(t *ttl.Timer[*entry]) {
	e := t.Value
	if e.table != nil {
		if at := s.dropAt(s.paramsOf(e.table, lkey{e: e, held: true}), e.state); at > s.advancing {
			s.wheel.Schedule(t, at)
			return
		}
		s.idleEvictions++
	} else {
		s.expired++
		s.reuseValue(e)
	}
	s.remove(e)
}

// tick advances the wheel to now, evicting every entry that became fresh.
func (s *shard) tick(now int64) {
	s.assertOwner()
	s.advancing = now
	s.wheel.Advance(now, s.fire)
	for _, t := range s.tables {
		if t.timers != nil {
			t.timers.Advance(now, t.fire)
			t.recs.Maintain()
		}
	}
	s.expireOverrides(now)
	s.dropIdleScanIndex(now)
}

// relievePressure enforces the evict policy after a message: while the shard
// holds more keys than its share, the entry that would have become fresh
// (or expired) soonest is dropped, losing its budget; counted as a pressure
// eviction. Plain keys with no TTL never leave on their own, so they go
// last, in no particular order.
func (s *shard) relievePressure() {
	if s.limits.perShard == 0 || s.limits.reject {
		return
	}
	for s.keys > s.limits.perShard {
		t, k, at, ok := s.soonest()
		if !ok {
			if !s.evictPersistent() {
				return
			}
			continue
		}
		if t == nil { // a plain key's TTL
			s.remove(k.e)
			s.pressureEvictions++
			s.changes++
			continue
		}
		// An early timer (see apply) is first moved to the instant its
		// key really goes fresh, so the victim is a key that goes fresh
		// soonest, not one that was merely busy.
		p, st := s.paramsOf(t, k), t.state(k)
		if fresh := s.dropAt(p, st); fresh > at {
			s.schedule(t, k, fresh)
			continue
		}
		if algorithms.FreshAt(p, st) <= s.clock() {
			// Fresh, kept only for the grace: dropping it loses nothing.
			s.removeKey(t, k)
			s.idleEvictions++
			continue
		}
		s.removeKey(t, k)
		s.pressureEvictions++
		s.changes++
	}
}

// evictPersistent drops a plain key with no TTL, the only keys not on the
// wheel, for relievePressure once the wheel is empty. It reports whether
// there was one.
func (s *shard) evictPersistent() bool {
	for _, e := range s.plain {
		s.remove(e)
		s.pressureEvictions++
		s.changes++
		return true
	}
	return false
}

// table returns the table for rule, creating it if the rule is still live
// and rescaling it if the rule's numbers changed since the shard last saw it.
// It returns nil when the rule was deleted (or its algorithm changed) after
// the request resolved it: the request is then answered as if it came just
// before the change, against a fresh key, and nothing is stored.
func (s *shard) table(rule *rules.Rule, now int64) *table {
	t := s.lastTable
	if t == nil || t.rule.ID != rule.ID {
		t = s.tables[rule.ID]
		s.lastTable = t
	}
	if t == nil {
		live := s.rules.Load().ByID(rule.ID)
		if live == nil {
			return nil
		}
		t = s.newTable(live, now)
		s.tables[rule.ID] = t
		s.lastTable = t
	}
	if rule.Rev > t.rule.Rev {
		s.rescale(t, rule, now)
	}
	return t
}

// reconcile drops tables whose rule is gone and rescales those whose rule
// changed, against the newest published rule set.
func (s *shard) reconcile() {
	set := s.rules.Load()
	now := s.clock()
	for id, t := range s.tables {
		live := set.ByID(id)
		switch {
		case live == nil:
			t.eachKey(func(k lkey) { s.removeKey(t, k) })
			s.overrides -= len(t.overrides)
			delete(s.tables, id)
			if s.lastTable == t {
				s.lastTable = nil
			}
			s.changes++
		case live.Rev > t.rule.Rev:
			s.rescale(t, live, now)
		}
	}
}

// rescale converts every state in t to rule's new numbers, and reschedules
// each eviction accordingly.
func (s *shard) rescale(t *table, rule *rules.Rule, now int64) {
	t.eachKey(func(k lkey) {
		if t.overrides[t.keyString(k)] != nil {
			return // kept under its override's numbers, which stay
		}
		st := algorithms.Rescale(t.rule.Params, rule.Params, t.state(k), now)
		t.setState(k, st)
		s.schedule(t, k, s.dropAt(rule.Params, st))
	})
	t.rule = rule
	s.changes++
}

// scan is an export in progress on one shard: the tables to visit (and,
// last, the plain keys: ID 0) and a walk over the current one. Keys created
// or deleted while it runs may or may not be visited; every key present
// throughout is visited once, with its state as of that moment.
type scan struct {
	ids     []uint64
	walking bool
	w       walker
}

// plainID stands for the plain keys in a scan's list; rule IDs start at 1.
const plainID = 0

// scanChunk visits up to n keys, continuing the shard's scan, and reports
// whether more remain. emit runs on the shard's goroutine.
func (s *shard) scanChunk(n int, emit func(Exported)) bool {
	if s.scan == nil {
		s.scan = &scan{ids: make([]uint64, 0, len(s.tables)+1)}
		for id := range s.tables {
			s.scan.ids = append(s.scan.ids, id)
		}
		s.scan.ids = append(s.scan.ids, plainID)
	}
	sc := s.scan
	for n > 0 {
		if !sc.walking {
			if len(sc.ids) == 0 {
				s.scan = nil
				return false
			}
			id := sc.ids[0]
			sc.ids = sc.ids[1:]
			sc.walking = s.startWalk(&sc.w, id)
			continue
		}
		t, k, e, ok := s.step(&sc.w)
		switch {
		case !ok:
			sc.walking = false
			continue
		case t == nil && e == nil: // a span of free records
		case t == nil:
			emit(Exported{Key: e.key(), Value: e.value, ExpireAt: e.state.Stamp})
		default:
			emit(Exported{Rule: t.rule, Key: t.keyString(k), State: s.exportState(t, k)})
		}
		n--
	}
	return true
}

// abortScan ends an export early.
func (s *shard) abortScan() {
	if s.scan != nil {
		s.scan.w.release()
	}
	s.scan = nil
}
