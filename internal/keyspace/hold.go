package keyspace

import (
	"slices"

	"github.com/rlserver/rlserver/internal/algorithms"
)

// Work that needs several keys at once — AllowAll's pairs, a multi-key Task,
// a transaction — runs with exclusive use of every shard owning one of
// them. When one shard owns them all, that shard runs the work as one
// message (a call) and nothing else is stopped. Otherwise the dispatcher
// holds the shards: it asks each, in ascending shard order, to park and lend
// it its state, waiting until each has parked before asking the next; it
// then does the work on their state from its own goroutine and releases
// them. Between the first read and the last write no other message runs on
// those shards.
//
// Deadlock is impossible: every coordinator acquires in the same global
// order, so one holding shard k waits only for shards above k, which no
// coordinator waiting on it can hold; a shard running a batch or a call
// never waits for another shard. Shards the work does not touch are never
// stopped.

// MaxGroup is the most operations AllowAll decides as one.
const MaxGroup = 32

// call is work run as one step by the one shard owning all of its keys, or
// by a coordinator holding several: AllowAll's pairs (ops), or a Task.
type call struct {
	ops     []Op
	task    Task
	allowed bool
	err     error
	done    chan struct{}
}

func (c *call) run(db *DB) {
	if c.task != nil {
		c.task.Run(db)
		return
	}
	c.allowed, c.err = db.AllowAll(c.ops)
}

// hold asks a shard to lend its state to a coordinator until released.
type hold struct {
	held    chan struct{} // the shard signals here once it is parked
	release chan struct{} // the coordinator sends here once per held shard
}

// AllowAll decides ops — Allow operations on distinct (rule, key) pairs —
// as one request, against one instant: if every pair admits, every pair is
// charged; if any pair denies, no pair is charged. It reports whether the
// request was admitted and fills each op's Decision: after the charge when
// admitted, and otherwise the pair's state uncharged, with Allowed saying
// whether that pair alone would have admitted (as a Peek).
//
// Under the reject key-limit policy, a request that would create a key in a
// full shard fails as a whole with ErrKeyLimit, and nothing is charged.
//
// ops must not be modified until AllowAll returns; len(ops) <= MaxGroup.
func (d *Dispatcher) AllowAll(ops []Op) (bool, error) {
	d.held = d.held[:0]
	for i := range ops {
		d.held = appendUnique(d.held, d.m.shardOf(ops[i].Rule, ops[i].Key))
	}
	c := &d.call
	c.ops = ops
	d.coordinate(c)
	allowed, err := c.allowed, c.err
	if err == ErrShardFailed {
		for i := range ops {
			ops[i].Err = ErrShardFailed
		}
	}
	*c = call{done: c.done}
	return allowed, err
}

// Do runs t with exclusive use of the shards owning keys (plain keys), as
// one step: no other command runs on those keys meanwhile. It returns
// ErrShardFailed, without running t, if one of those shards has failed.
func (d *Dispatcher) Do(keys [][]byte, t Task) error {
	d.held = d.held[:0]
	for _, k := range keys {
		d.held = appendUnique(d.held, d.m.shardOf(nil, k))
	}
	c := &d.call
	c.task = t
	d.coordinate(c)
	err := c.err
	*c = call{done: c.done}
	return err
}

// Exec runs fn with exclusive use of every shard, for MULTI/EXEC: while fn
// runs, no other command runs on any shard, so what it does appears to
// every other client as one step at one instant. Holding every shard lets a
// transaction mix any commands (DBSIZE and FLUSHALL included); the price is
// that all shards pause for the transaction's few microseconds. It returns
// ErrShardFailed, without running fn, once a shard has failed.
func (d *Dispatcher) Exec(fn func(db *DB)) error {
	d.held = d.held[:0]
	for i := range d.m.shards {
		d.held = append(d.held, i)
	}
	d.acquire(d.held)
	defer d.release(len(d.held))
	for _, i := range d.held {
		if d.m.shards[i].failed.Load() {
			return ErrShardFailed
		}
	}
	db := &d.db
	db.coverAll(d.m.clock())
	defer db.clear()
	done := false
	defer db.failTouchedUnless(&done)
	fn(db)
	done = true
	return nil
}

func appendUnique(s []int, v int) []int {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// coordinate runs c with exclusive use of the shards in d.held.
func (d *Dispatcher) coordinate(c *call) {
	if len(d.held) == 1 {
		d.m.shards[d.held[0]].send(message{call: c})
		<-c.done
		return
	}
	slices.Sort(d.held)
	d.acquire(d.held)
	defer d.release(len(d.held))
	for _, i := range d.held {
		if d.m.shards[i].failed.Load() {
			c.err = ErrShardFailed
			return
		}
	}
	db := &d.db
	db.cover(d.m.clock(), d.held)
	defer db.clear()
	done := false
	defer db.failTouchedUnless(&done)
	c.run(db)
	done = true
}

// acquire parks the given shards, in the ascending order given, and lends
// their state to the caller until release.
func (d *Dispatcher) acquire(ascending []int) {
	for _, idx := range ascending {
		s := d.m.shards[idx]
		s.send(message{hold: &d.hold})
		<-d.hold.held
		s.lend()
	}
	d.holding = ascending
}

// release gives back the n shards acquire parked (the last acquire's).
func (d *Dispatcher) release(n int) {
	for _, idx := range d.holding[:n] {
		d.m.shards[idx].reclaim()
	}
	d.holding = nil
	for range n {
		d.hold.release <- struct{}{}
	}
}

// decideAll is AllowAll's decision. owners[i] owns ops[i]'s key, and the
// caller has exclusive use of every owner (it is the owner's goroutine, or
// holds it).
func decideAll(ops []Op, owners []*shard, now int64) (bool, error) {
	all := true
	for i := range ops {
		op := &ops[i]
		var shadow bool
		var err error
		op.Decision, shadow, err = owners[i].peek(op, now)
		if err != nil {
			return false, err
		}
		// A rule in shadow mode never refuses the group: its pair is
		// decided (and counted) as Allow decides it.
		all = all && (op.Decision.Allowed || shadow)
	}
	if all {
		if err := mayCreateAll(ops, owners); err != nil {
			return false, err
		}
	}
	for i := range ops {
		op := &ops[i]
		if all {
			// Each pair admits at now and the pairs are distinct, so
			// each Decide admits exactly as its peek said.
			owners[i].apply(op, now)
		} else {
			owners[i].countDenied(op)
		}
	}
	return all, nil
}

// mayCreateAll is mayCreate for a group: every key the group would create
// must be allowed, and each shard must have room for all of its new keys at
// once. It looks keys up only when a limit could refuse them, so a group
// under no key limit costs nothing here.
func mayCreateAll(ops []Op, owners []*shard) error {
	for i := range ops {
		s := owners[i]
		tooLarge := len(ops[i].Key) > s.limits.maxKey
		limited := s.limits.reject && s.limits.perShard > 0
		if (!tooLarge && !limited) || s.exists(&ops[i]) {
			continue
		}
		if err := s.mayCreate(ops[i].Key); err != nil {
			return err
		}
		added := 0
		for j := range ops {
			if owners[j] == s && !s.exists(&ops[j]) {
				added++
			}
		}
		if !s.hasRoom(added) {
			return ErrKeyLimit
		}
	}
	return nil
}

// exists reports whether op's key has state.
func (s *shard) exists(op *Op) bool {
	t := s.tables[op.Rule.ID]
	return t != nil && t.find(op.Key).held
}

// peek answers op as a Peek at now, changing nothing but an expired
// override, and reports whether its rule is in shadow mode. It refuses a
// cost above the capacity of the key's override.
func (s *shard) peek(op *Op, now int64) (algorithms.Decision, bool, error) {
	t, k, p := s.resolve(op, now)
	if op.Cost > p.Capacity {
		return algorithms.Decision{}, false, &CapacityError{Cost: op.Cost, Capacity: p.Capacity, Rule: op.Rule.Name, Override: p != op.Rule.Params}
	}
	var cur algorithms.State
	if k.held {
		cur = t.state(k)
	}
	return algorithms.Peek(p, cur, now, op.Cost), t != nil && t.rule.Shadow, nil
}

// countDenied counts op as denied: the group it belonged to was refused.
func (s *shard) countDenied(op *Op) {
	s.denied++
	if t := s.tables[op.Rule.ID]; t != nil {
		t.denied++
	}
}
