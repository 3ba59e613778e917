package keyspace

import (
	"slices"

	"github.com/rlserver/rlserver/internal/algorithms"
)

// MaxGroup is the most operations AllowAll decides as one.
const MaxGroup = 32

// group is a set of operations decided as one by a single shard that owns
// all of their keys.
type group struct {
	ops     []Op
	owners  []*shard
	decide  func(ops []Op, owners []*shard, now int64) (bool, error)
	allowed bool
	err     error
	done    chan struct{}
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
// Atomicity across shards: the dispatcher asks each shard involved, in
// ascending shard order, to park and lend it its state, waiting until each
// has parked before asking the next; it then decides on the parked shards'
// state from its own goroutine and releases them all. Between the check and
// the charge no other message runs on those shards. Deadlock is impossible:
// every coordinator acquires in the same global order, so one holding shard
// k waits only for shards above k, which no coordinator waiting on it can
// hold; ordinary batches never hold a shard while waiting for another.
// Shards no pair touches are never stopped. When all pairs live on one
// shard, that shard decides the group as one message and nothing is held.
//
// Under the reject key-limit policy, a request that would create a key in a
// full shard fails as a whole with ErrKeyLimit, and nothing is charged.
//
// ops must not be modified until AllowAll returns; len(ops) <= MaxGroup.
func (d *Dispatcher) AllowAll(ops []Op) (bool, error) {
	return d.atomically(ops, decideAll)
}

// Atomic applies ops in order as one step: no other command runs on their
// keys in between (multi-key DEL and EXISTS). It uses AllowAll's
// acquisition, so it is deadlock-free with it.
func (d *Dispatcher) Atomic(ops []Op) {
	d.atomically(ops, applyEach)
}

func applyEach(ops []Op, owners []*shard, now int64) (bool, error) {
	for i := range ops {
		owners[i].applyAny(&ops[i], now)
	}
	return true, nil
}

// atomically runs decide over ops with exclusive use of every shard owning
// one of their keys (see AllowAll for how, and why it cannot deadlock).
func (d *Dispatcher) atomically(ops []Op, decide func([]Op, []*shard, int64) (bool, error)) (bool, error) {
	d.owners = d.owners[:0]
	d.held = d.held[:0]
	for i := range ops {
		idx := d.m.shardOf(ops[i].Rule, ops[i].Key)
		d.owners = append(d.owners, d.m.shards[idx])
		if !slices.Contains(d.held, idx) {
			d.held = append(d.held, idx)
		}
	}
	if len(d.held) == 1 {
		g := &d.group
		g.ops, g.owners, g.decide = ops, d.owners, decide
		d.m.shards[d.held[0]].inbox <- message{group: g}
		<-g.done
		allowed, err := g.allowed, g.err
		g.ops, g.owners, g.decide, g.err = nil, nil, nil, nil
		return allowed, err
	}
	slices.Sort(d.held)
	d.acquire(d.held)
	defer d.release(len(d.held))
	for _, s := range d.owners {
		if s.failed.Load() {
			for i := range ops {
				ops[i].Err = ErrShardFailed
			}
			return false, ErrShardFailed
		}
	}
	done := false
	defer failUnlessDone(&done, d.owners)
	allowed, err := decide(ops, d.owners, d.m.clock())
	done = true
	return allowed, err
}

// acquire parks the given shards, in the ascending order given, and lends
// their state to the caller until release.
func (d *Dispatcher) acquire(ascending []int) {
	for _, idx := range ascending {
		d.m.shards[idx].inbox <- message{hold: &d.hold}
		<-d.hold.held
	}
}

func (d *Dispatcher) release(n int) {
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
		op.Decision = owners[i].peek(op, now)
		all = all && op.Decision.Allowed
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
	return t != nil && t.states[string(op.Key)] != nil
}

// peek answers op as a Peek at now, without changing anything.
func (s *shard) peek(op *Op, now int64) algorithms.Decision {
	t := s.table(op.Rule, now)
	p := op.Rule.Params
	var cur algorithms.State
	if t != nil {
		p = t.rule.Params
		if e := t.states[string(op.Key)]; e != nil {
			cur = e.state
		}
	}
	return algorithms.Peek(p, cur, now, op.Cost)
}

// countDenied counts op as denied: the group it belonged to was refused.
func (s *shard) countDenied(op *Op) {
	s.denied++
	if t := s.tables[op.Rule.ID]; t != nil {
		t.denied++
	}
}
