package keyspace

import (
	"fmt"
	"slices"

	"github.com/rlserver/rlserver/internal/rules"
)

// DB is exclusive use of the keys of one or more shards at one instant: the
// shard running a Task from a batch (its own keys), or a coordinator
// holding shards (Dispatcher.Do holds the owners of a Task's keys,
// Dispatcher.Exec holds them all). Everything done through one DB sees the
// same instant, Now. A DB is valid only while the Task (or the function
// given to Exec) runs; it must not be kept.
//
// A DB reaches only the keys of the shards it covers: asking it for another
// key is a bug in the caller (which routed its work by the keys it
// declared), and panics. Covers tells whether a key is reachable.
type DB struct {
	m     *Map
	now   int64
	one   *shard // the only shard covered, or nil
	all   bool   // every shard is covered
	held  []bool // by shard index: covered, when neither one nor all
	owner []*shard
	// touched lists the shards whose state was reached through db while
	// it covers several: if the work panics, those are the shards whose
	// state may be half changed (see failure.go).
	touched []*shard
	// inside counts the DB calls under way: a panic that unwinds through
	// one leaves it above zero (see Consistent).
	inside int
}

// Consistent reports whether every DB call made so far returned: after a
// panic in a Task, true means the panic came from the Task's own code,
// between DB calls, so the keyspace's structures are whole (the Task's
// work may be half done, as a command's is when it fails half way); false
// means it came from inside the keyspace, whose state may be half changed.
func (db *DB) Consistent() bool { return db.inside == 0 }

// Handle is the keyspace as one request sees it: pooled, through a
// Dispatcher (each call is a round trip to the shards involved), or held,
// through a DB (the caller already has exclusive use of the shards: a
// transaction, a script). Code that must work in both — a command inside or
// outside MULTI — takes a Handle.
type Handle interface {
	// AllowAll decides ops as one request (see Dispatcher.AllowAll).
	AllowAll(ops []Op) (bool, error)
	// Do runs t over the plain keys given, as one step.
	Do(keys [][]byte, t Task) error
	// Stats gathers the counters of every healthy shard.
	Stats() Stats
	// Keys returns copies of the live plain keys for which match reports
	// true, from every healthy shard, in no particular order (KEYS).
	Keys(match func(key []byte) bool) [][]byte
	// SlotKeys counts the keys in a cluster slot and returns the names of
	// at most max of them (see Map.SlotKeys).
	SlotKeys(slot uint16, max int) (int, [][]byte)
	// Scan is one SCAN call from cursor over about count plain keys,
	// returning copies of the live ones match accepts and the cursor to
	// continue from, 0 at the end (see Map.Scan).
	Scan(cursor uint64, count int, match func(key []byte, v Value) bool) ([][]byte, uint64)
	// Flush drops every key.
	Flush()
	// Reconcile brings every shard up to date with the rule set.
	Reconcile()
	// Apply performs one operation at once (see DB.Apply and
	// Dispatcher.Apply).
	Apply(op *Op)
}

var (
	_ Handle = (*Dispatcher)(nil)
	_ Handle = (*DB)(nil)
)

// Now returns the instant every operation through db sees, ns since the
// Unix epoch.
func (db *DB) Now() int64 { return db.now }

// single points db at shard s alone, at now.
func (db *DB) single(s *shard, now int64) {
	db.m, db.now, db.one, db.all, db.inside = s.m, now, s, false, 0
}

// cover points db at the shards with the given indices.
func (db *DB) cover(now int64, shards []int) {
	db.inside = 0
	if len(db.held) != len(db.m.shards) {
		db.held = make([]bool, len(db.m.shards))
	}
	for _, i := range shards {
		db.held[i] = true
	}
	db.now, db.one, db.all = now, nil, false
}

// coverAll points db at every shard.
func (db *DB) coverAll(now int64) {
	db.inside = 0
	db.now, db.one, db.all = now, nil, true
}

// clear makes db cover nothing, once its holder has released the shards.
func (db *DB) clear() {
	clear(db.held)
	clear(db.owner)
	clear(db.touched)
	db.touched = db.touched[:0]
	db.one, db.all = nil, false
}

// failTouchedUnless is deferred by a coordinator around work on a DB
// covering held shards: if the work panics (done is still false), every
// shard it reached is marked failed, and the panic goes on unwinding. A
// panic before the work reached any shard's state fails none.
func (db *DB) failTouchedUnless(done *bool) {
	if !*done {
		failUnlessDone(done, db.touched)
	}
}

// coversIndex reports whether the shard with index i is covered.
func (db *DB) coversIndex(i int) bool {
	switch {
	case db.all:
		return true
	case db.one != nil:
		return db.one.id == i
	}
	return i < len(db.held) && db.held[i]
}

// Covers reports whether db reaches the plain key key.
func (db *DB) Covers(key []byte) bool { return db.coversIndex(db.m.shardOf(nil, key)) }

// shard returns the covered shard owning (rule, key); rule is nil for a
// plain key.
func (db *DB) shard(rule *rules.Rule, key []byte) *shard {
	i := db.m.shardOf(rule, key)
	if !db.coversIndex(i) {
		panic(fmt.Sprintf("keyspace: key %q is on shard %d, which this DB does not cover", key, i))
	}
	s := db.m.shards[i]
	s.assertOwner()
	db.touch(s)
	return s
}

// Apply performs a limiter operation (Allow, Peek, Reset) or runs a Task
// (Run, with this same DB) on a covered key.
func (db *DB) Apply(op *Op) {
	if op.Kind == Run {
		op.Task.Run(db)
		return
	}
	db.inside++
	db.apply(op)
	db.inside--
}

func (db *DB) apply(op *Op) {
	s := db.shard(op.Rule, op.Key)
	if s.failed.Load() {
		op.Err = ErrShardFailed
		return
	}
	s.apply(op, db.now)
}

// AllowAll decides ops as one request, as Dispatcher.AllowAll does, on
// covered keys.
func (db *DB) AllowAll(ops []Op) (bool, error) {
	db.inside++
	r0, r1 := db.allowAll(ops)
	db.inside--
	return r0, r1
}

func (db *DB) allowAll(ops []Op) (bool, error) {
	db.owner = db.owner[:0]
	for i := range ops {
		s := db.shard(ops[i].Rule, ops[i].Key)
		if s.failed.Load() {
			return false, ErrShardFailed
		}
		db.owner = append(db.owner, s)
	}
	return decideAll(ops, db.owner, db.now)
}

// Do runs t on this DB, which must cover keys.
func (db *DB) Do(keys [][]byte, t Task) error {
	for _, k := range keys {
		db.shard(nil, k)
	}
	t.Run(db)
	return nil
}

// healthy returns the covered shards that have not failed; only a DB that
// covers every shard answers the whole-keyspace calls below.
func (db *DB) healthy() []*shard {
	if !db.all {
		panic("keyspace: a whole-keyspace call on a DB that does not cover every shard")
	}
	var out []*shard
	for _, s := range db.m.shards {
		if !s.failed.Load() {
			out = append(out, s)
		}
	}
	return out
}

// Stats is Map.Stats on a DB covering every shard.
func (db *DB) Stats() Stats {
	st := Stats{Rules: map[uint64]RuleStats{}}
	for _, s := range db.healthy() {
		s.addStats(&st)
	}
	return st
}

// Keys is Map.Keys on a DB covering every shard.
func (db *DB) Keys(match func(key []byte) bool) [][]byte {
	var out [][]byte
	for _, s := range db.healthy() {
		out = s.appendKeys(out, match, db.now)
	}
	return out
}

// Flush is Map.Flush on a DB covering every shard.
func (db *DB) Flush() {
	for _, s := range db.healthy() {
		db.touch(s)
		s.flush(db.now)
	}
}

// touch records that the work reached s's state.
func (db *DB) touch(s *shard) {
	if db.one == nil && !slices.Contains(db.touched, s) {
		db.touched = append(db.touched, s)
	}
}

// Reconcile is Map.Reconcile on a DB covering every shard.
func (db *DB) Reconcile() {
	for _, s := range db.healthy() {
		db.touch(s)
		s.reconcile()
	}
}

// Plain keys.
//
// A plain key holds a Value: a String (SET, INCR and the other string
// commands, CL.THROTTLE's arrival time) or, through Put, any other Value.
// Plain keys are a namespace apart from limiter state: a plain key "k" and
// the state of (rule, "k") never meet. Every access checks the key's
// expiry first, to the nanosecond, so an expired key is never seen even
// before the timing wheel removes it.

// Get returns key's value, or nil if it has none.
func (db *DB) Get(key []byte) Value {
	db.inside++
	r := db.get(key)
	db.inside--
	return r
}

func (db *DB) get(key []byte) Value {
	if e := db.shard(nil, key).lookupPlain(key, db.now); e != nil {
		return e.value
	}
	return nil
}

// SetString stores a copy of b as key's value, creating the key if needed
// (keeping its expiry if it has one). It fails, changing nothing, with a
// *TooLargeError when b is larger than Config.MaxValueSize, or when a new
// key is too large or has no room (see mayCreate).
func (db *DB) SetString(key, b []byte) error {
	db.inside++
	r := db.setString(key, b)
	db.inside--
	return r
}

func (db *DB) setString(key, b []byte) error {
	s := db.shard(nil, key)
	s.wrote(key)
	if err := s.checkValue(len(b)); err != nil {
		return err
	}
	e, err := s.plainEntry(key, db.now)
	if err != nil {
		return err
	}
	str, ok := e.value.(*String)
	if !ok {
		str = s.newString()
	}
	str.B = append(str.B[:0], b...)
	s.storedValue(e, str)
	s.changes++
	return nil
}

// Put stores v as key's value, creating the key if needed (keeping its
// expiry if it has one). A caller that changed a value in place calls Put
// again so its size is checked and the change counted; it must have checked
// CheckSize before growing it.
func (db *DB) Put(key []byte, v Value) error {
	db.inside++
	r := db.put(key, v)
	db.inside--
	return r
}

func (db *DB) put(key []byte, v Value) error {
	s := db.shard(nil, key)
	s.wrote(key)
	if err := s.checkValue(v.Size()); err != nil {
		return err
	}
	e, err := s.plainEntry(key, db.now)
	if err != nil {
		return err
	}
	s.storedValue(e, v)
	s.changes++
	return nil
}

// Changed records that key's value was changed in place, by a caller that
// checked the change against ValueLimits first: its size is counted again
// and the change counted. Unlike Put it refuses nothing, so a value already
// over a lowered Config.MaxValueSize can still shrink. A missing key is
// left alone.
func (db *DB) Changed(key []byte) {
	db.inside++
	db.changed(key)
	db.inside--
}

func (db *DB) changed(key []byte) {
	s := db.shard(nil, key)
	s.wrote(key)
	if e := s.lookupPlain(key, db.now); e != nil {
		s.storedValue(e, e.value)
		s.changes++
	}
}

// CheckSize reports, as a *TooLargeError, whether a value of n bytes is
// more than a key may hold (Config.MaxValueSize).
func (db *DB) CheckSize(n int) error {
	if n > db.m.limits.maxValue {
		return &TooLargeError{What: "value", Size: n, Limit: db.m.limits.maxValue}
	}
	return nil
}

// ValueLimits returns the bounds of one value: the most elements
// (Config.MaxElements; 0 when the keyspace sets none) and the most bytes
// (Config.MaxValueSize). Code that grows a value in place checks them
// before the change, since Put can only refuse it after.
func (db *DB) ValueLimits() (maxElements, maxSize int) {
	return db.m.limits.maxElems, db.m.limits.maxValue
}

// Delete removes key and reports whether it existed.
func (db *DB) Delete(key []byte) bool {
	db.inside++
	r := db.delete(key)
	db.inside--
	return r
}

func (db *DB) delete(key []byte) bool {
	s := db.shard(nil, key)
	e := s.lookupPlain(key, db.now)
	if e == nil {
		return false
	}
	s.remove(e)
	s.changes++
	return true
}

// Expiry returns the instant key expires (ns since the epoch; 0 when it has
// no expiry) and whether it exists.
func (db *DB) Expiry(key []byte) (at int64, ok bool) {
	db.inside++
	r0, r1 := db.expiry(key)
	db.inside--
	return r0, r1
}

func (db *DB) expiry(key []byte) (at int64, ok bool) {
	e := db.shard(nil, key).lookupPlain(key, db.now)
	if e == nil {
		return 0, false
	}
	return e.state.Stamp, true
}

// SetExpiry makes key expire at instant at (0: never) and reports whether
// the key exists. An instant at or before Now deletes the key at once.
func (db *DB) SetExpiry(key []byte, at int64) bool {
	db.inside++
	r := db.setExpiry(key, at)
	db.inside--
	return r
}

func (db *DB) setExpiry(key []byte, at int64) bool {
	s := db.shard(nil, key)
	s.wrote(key)
	e := s.lookupPlain(key, db.now)
	if e == nil {
		return false
	}
	s.changes++
	if at != 0 && at <= db.now {
		s.remove(e)
		return true
	}
	s.setExpiry(e, at)
	return true
}
