package keyspace

import (
	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
)

// OpKind is what an Op does.
type OpKind uint8

// The operations a shard performs on one key.
const (
	// Allow decides a limiter request and, if admitted, spends its cost.
	Allow OpKind = iota + 1
	// Peek decides without spending or creating state.
	Peek
	// Reset forgets a limiter key's state.
	Reset
	// Run runs Op.Task on the shard owning Op.Key (a plain key).
	Run
	// Acquire grants between 0 and Cost units at once and spends them
	// (algorithms.Acquire): Granted is the count, At the grant's instant.
	Acquire
	// Refund gives back up to Cost units granted at the instant At and not
	// used (algorithms.Refund): Granted is the count taken back.
	Refund
	// SetOverride gives Key the numbers of *Override under Rule until its
	// ExpireAt (see override.go); Existed reports that one was replaced.
	SetOverride
	// GetOverride sets Override to a copy of Key's override under Rule,
	// if it has one (Existed).
	GetOverride
	// DelOverride ends Key's override under Rule, if it has one
	// (Existed).
	DelOverride
)

// Op is one operation on one key: a limiter operation on a (rule, key), or a
// Task on the shard owning a plain key. The caller fills Kind, Rule (limiter
// operations), Key, Cost or Task; the owning shard fills the results.
type Op struct {
	Kind OpKind
	Rule *rules.Rule // nil for Run
	// Key is borrowed: the caller must not change it until the batch
	// holding the Op has completed. The shard copies it when it stores a
	// new key.
	Key []byte
	// Cost is the units to spend, 1..Rule.Params.Capacity; for Acquire
	// and Refund, the units asked for or offered back (at least 1, any
	// size).
	Cost int64
	// At is, for Refund, the instant the units were granted (Acquire's
	// At), ns since the Unix epoch; Acquire sets it. For SetOverride,
	// nonzero marks a restore: the key's state is rescaled as of its own
	// stamp rather than now.
	At int64
	// Override is SetOverride's input and GetOverride's answer.
	Override *Override
	// Task is Run's work. It runs on the owner of Key with a DB covering
	// that shard only.
	Task Task

	// Decision is the answer to Allow and Peek.
	Decision algorithms.Decision
	// Existed reports, for Reset, whether the key had state.
	Existed bool
	// Shadow reports, for Allow and Acquire, that the rule is in shadow
	// mode; ShadowDenied that it would have denied (Decision admits
	// regardless).
	Shadow, ShadowDenied bool
	// Granted is, for Acquire, the units granted (Decision is that of a
	// cost of Granted, or of 1 when none was); for Refund, the units
	// taken back.
	Granted int64
	// Err is set instead of Decision when the operation could not be
	// performed (ErrKeyLimit, ErrShardFailed, a *TooLargeError). A Task
	// reports its own errors its own way.
	Err error
}

// Task is work on plain keys, run by whoever has exclusive use of the shards
// owning them — the goroutine running the batch for a Task in one (holding
// its shard: Dispatcher.Run), or a caller
// holding shards (Dispatcher.Do, Dispatcher.Exec) — through a DB valid only
// during Run. Run must not keep the DB, nor block.
type Task interface {
	Run(db *DB)
}

// TaskFunc adapts a function to a Task.
type TaskFunc func(db *DB)

// Run calls f(db).
func (f TaskFunc) Run(db *DB) { f(db) }

// Batch is the operations of one round (one connection's, or an event
// loop's for all of its connections) for one shard, run in the order added
// while holding the shard (Dispatcher.Run).
type Batch struct {
	Ops []Op
}

// message is what a shard's inbox carries: exactly one of a call to run as one step on this shard (all of whose keys it
// owns), a hold (the shard lends its state to a coordinator until
// released), a tick, or a function to run on the shard's goroutine followed
// by a signal on ack.
type message struct {
	tick bool // advance the timing wheel
	call *call
	hold *hold
	fn   func(*shard)
	ack  chan<- struct{}
}
