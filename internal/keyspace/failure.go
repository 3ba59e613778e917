package keyspace

import (
	"fmt"
	"runtime/debug"
)

// What a panic does to a shard.
//
// A panic while a shard's state is being changed — on the shard's goroutine,
// or on a coordinator the shard is lent to (AllowAll across shards, Atomic,
// a transaction's operations) — may leave that state half changed: a key in
// its map but not on the wheel, a counter off by one, a sliding log half
// written. No recover can tell which, so the shard is not trusted again:
//
//   - it is marked failed and its goroutine stops applying anything: every
//     later operation on its keys is answered with ErrShardFailed, its keys
//     are left out of snapshots (Export skips it), and statistics, rule
//     reconciliation, FLUSHALL and eviction pass it by;
//   - the other shards keep serving;
//   - Map.Failed is closed and Map.Failure describes the panic and its
//     stack, so the process can save what the healthy shards hold and exit
//     non-zero (cmd/rlserver does), to be restarted from that snapshot.
//
// The failed shard's keys are therefore not in that final snapshot: they
// restart fresh, and what they had spent is forgotten. That is the price of
// never saving, or serving from, state that may be corrupt.

// ShardFailure describes the first shard that failed.
type ShardFailure struct {
	Shard int    // index of the failed shard
	Panic string // the panic's value, as fmt prints it
	Stack []byte // the goroutine's stack at the panic
}

// Error says which shard failed and why.
func (f *ShardFailure) Error() string {
	return fmt.Sprintf("shard %d failed: panic: %s", f.Shard, f.Panic)
}

// Failed is closed when a shard fails; Failure then describes the first.
func (m *Map) Failed() <-chan struct{} { return m.failed }

// Failure returns the first shard failure, or nil while every shard is
// healthy.
func (m *Map) Failure() *ShardFailure {
	select {
	case <-m.failed:
		return m.failure
	default:
		return nil
	}
}

// fail marks s failed after a panic with value v, on whichever goroutine
// held its state, and reports the first failure of the Map. The caller is
// the one goroutine touching s's state (its own, or the coordinator it is
// lent to).
func (s *shard) fail(v any, stack []byte) {
	s.failed.Store(true)
	s.m.failOnce.Do(func() {
		s.m.failure = &ShardFailure{Shard: s.id, Panic: fmt.Sprint(v), Stack: stack}
		close(s.m.failed)
	})
}

// failUnlessDone is deferred by a coordinator around code that changes the
// state of shards lent to it: if that code panics (done is still false),
// every one of them is marked failed, and the panic goes on unwinding.
func failUnlessDone(done *bool, lent []*shard) {
	if *done {
		return
	}
	stack := debug.Stack()
	for _, s := range lent {
		s.fail("panic on a coordinator holding this shard (see its stack)", stack)
	}
}

// refuseBatch answers batch's operations with ErrShardFailed, without
// touching the failed shard's state.
func refuseBatch(batch *Batch) {
	for i := range batch.Ops {
		batch.Ops[i].Err = ErrShardFailed
	}
}

// refuse answers msg without touching the failed shard's state: operations
// get ErrShardFailed, functions are not run, and a coordinator asking to
// hold the shard is lent it as usual but checks failed before touching it.
func (s *shard) refuse(msg message) {
	switch {
	case msg.call != nil:
		msg.call.allowed, msg.call.err = false, ErrShardFailed
		msg.call.done <- struct{}{}
	case msg.tick:
	case msg.hold != nil:
		msg.hold.held <- struct{}{}
		<-msg.hold.release
	default:
		msg.ack <- struct{}{}
	}
}

// InjectPanic makes shard i panic as a bug in it would, to exercise the
// failure path above (tests, and fault drills). It returns once the shard
// has failed.
func (m *Map) InjectPanic(i int) {
	ack := make(chan struct{}, 1)
	m.shards[i].inbox <- message{fn: func(*shard) { panic("injected by Map.InjectPanic") }, ack: ack}
	<-ack
}
