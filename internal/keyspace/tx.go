package keyspace

// Tx is exclusive use of the whole keyspace, for MULTI/EXEC: while a Tx
// runs, no other command runs on any shard, so the commands it applies
// appear to every other client as one step. Every operation in a Tx sees the
// same instant.
//
// Exec acquires every shard in ascending order, the same order AllowAll and
// Atomic use, so transactions and groups never deadlock with each other.
// Holding every shard (rather than only those a transaction's keys live on)
// lets a transaction mix any commands, DBSIZE and FLUSHALL included; the
// price is that all shards pause for the transaction's few microseconds,
// which suits MULTI's use here (INCR + EXPIRE pairs), not long transactions.
type Tx struct {
	m   *Map
	now int64
}

// Exec runs fn with exclusive use of every shard. The shards are released
// when fn returns or panics; a panic inside one of the Tx's operations also
// fails the shard it was changing (see failure.go).
func (d *Dispatcher) Exec(fn func(tx *Tx)) {
	if len(d.all) != len(d.m.shards) {
		d.all = d.all[:0]
		for i := range d.m.shards {
			d.all = append(d.all, i)
		}
	}
	d.acquire(d.all)
	defer d.release(len(d.all))
	fn(&Tx{m: d.m, now: d.m.clock()})
}

// shardOf returns the shard owning op's key.
func (tx *Tx) shardOf(op *Op) *shard { return tx.m.shards[tx.m.shardOf(op.Rule, op.Key)] }

// Apply performs op on the shard owning its key; on a failed shard, op.Err
// is ErrShardFailed.
func (tx *Tx) Apply(op *Op) {
	s := tx.shardOf(op)
	if s.failed.Load() {
		op.Err = ErrShardFailed
		return
	}
	done := false
	defer failUnlessDone(&done, []*shard{s})
	s.applyAny(op, tx.now)
	done = true
}

// AllowAll is Dispatcher.AllowAll inside the transaction.
func (tx *Tx) AllowAll(ops []Op) (bool, error) {
	owners := make([]*shard, len(ops))
	for i := range ops {
		owners[i] = tx.shardOf(&ops[i])
		if owners[i].failed.Load() {
			return false, ErrShardFailed
		}
	}
	done := false
	defer failUnlessDone(&done, owners)
	allowed, err := decideAll(ops, owners, tx.now)
	done = true
	return allowed, err
}

// Stats is Map.Stats inside the transaction (failed shards left out).
func (tx *Tx) Stats() Stats {
	st := Stats{Rules: map[uint64]RuleStats{}}
	for _, s := range tx.healthy() {
		s.addStats(&st)
	}
	return st
}

// Flush is Map.Flush inside the transaction.
func (tx *Tx) Flush() {
	for _, s := range tx.healthy() {
		done := false
		defer failUnlessDone(&done, []*shard{s})
		s.flush(tx.now)
		done = true
	}
}

// Reconcile is Map.Reconcile inside the transaction.
func (tx *Tx) Reconcile() {
	for _, s := range tx.healthy() {
		done := false
		defer failUnlessDone(&done, []*shard{s})
		s.reconcile()
		done = true
	}
}

// healthy returns the shards that have not failed.
func (tx *Tx) healthy() []*shard {
	var out []*shard
	for _, s := range tx.m.shards {
		if !s.failed.Load() {
			out = append(out, s)
		}
	}
	return out
}
