package keyspace

// Dispatcher is the pooled way to the keyspace: it runs the operations of
// one goroutine (a connection's, or an event loop's for all of its
// connections) on the shards. It belongs to that goroutine and is reused for
// every round, so after warm-up a round of decisions allocates nothing.
//
// Use: Add each operation (in the order the client sent them), Run, then read
// each operation's results with Op, and Reset before the next round.
// Operations on the same shard are applied in the order added, so a
// connection's commands on one key are never reordered; other goroutines'
// rounds run on other shards at the same time.
type Dispatcher struct {
	m       *Map
	batches []Batch  // one per shard, indexed by shard
	used    []int    // shards with operations this round, in first-use order
	busy    []int    // of used, the shards Run found busy (reused)
	tickets []ticket // one per Add

	// For AllowAll, Do and Exec, reused between calls.
	held []int // shards involved, ascending once sorted
	call call  // the work, when one shard owns every key
	hold hold  // how held shards are parked and released
	db   DB    // the held shards, as the work sees them
	// holding is the shards acquired, ascending, until released.
	holding []int
}

// ticket locates an added Op: which shard's batch, and where in it.
type ticket struct{ shard, index int }

// NewDispatcher returns a Dispatcher for one connection.
func (m *Map) NewDispatcher() *Dispatcher {
	d := &Dispatcher{
		m:       m,
		batches: make([]Batch, len(m.shards)),
		call:    call{done: make(chan struct{}, 1)},
		hold:    hold{held: make(chan struct{}), release: make(chan struct{})},
	}
	d.db.m = m
	return d
}

// Add queues op and returns its ticket for Op.
func (d *Dispatcher) Add(op Op) int {
	i := d.m.shardOf(op.Rule, op.Key)
	b := &d.batches[i]
	if len(b.Ops) == 0 {
		d.used = append(d.used, i)
	}
	b.Ops = append(b.Ops, op)
	d.tickets = append(d.tickets, ticket{i, len(b.Ops) - 1})
	return len(d.tickets) - 1
}

// AddTask queues t to run on the shard owning the plain key key, in order
// with the other operations added for that shard, and returns its ticket.
// t runs during Run, holding that shard.
func (d *Dispatcher) AddTask(key []byte, t Task) int {
	return d.Add(Op{Kind: Run, Key: key, Task: t})
}

// Len returns the number of operations added since the last Reset.
func (d *Dispatcher) Len() int { return len(d.tickets) }

// Run runs every queued batch, each on its shard's state, and returns when
// all are done. It runs them on the calling goroutine, one shard at a time
// (holding it: shard.running): first each shard that is idle, then, waiting
// for each, the shards that were busy. No operation crosses to another
// goroutine, so in the common case a round costs no goroutine switch.
func (d *Dispatcher) Run() {
	d.busy = d.busy[:0]
	for _, i := range d.used {
		if !d.m.shards[i].tryRunBatch(&d.batches[i]) {
			d.busy = append(d.busy, i)
		}
	}
	for _, i := range d.busy {
		d.m.shards[i].runBatch(&d.batches[i])
	}
}

// Op returns the operation added with ticket t, results filled in by Run.
func (d *Dispatcher) Op(t int) *Op {
	tk := d.tickets[t]
	return &d.batches[tk.shard].Ops[tk.index]
}

// Reset forgets the round's operations, keeping the memory for the next.
func (d *Dispatcher) Reset() {
	for _, i := range d.used {
		clear(d.batches[i].Ops) // drop references to keys and rules
		d.batches[i].Ops = d.batches[i].Ops[:0]
	}
	d.used = d.used[:0]
	d.tickets = d.tickets[:0]
}

// Stats gathers counters from every shard (Map.Stats).
func (d *Dispatcher) Stats() Stats { return d.m.Stats() }

// Keys returns the plain keys match accepts (Map.Keys).
func (d *Dispatcher) Keys(match func(key []byte) bool) [][]byte { return d.m.Keys(match) }

// Scan is one SCAN call (Map.Scan).
func (d *Dispatcher) Scan(cursor uint64, count int, match func(key []byte, v Value) bool) ([][]byte, uint64) {
	return d.m.Scan(cursor, count, match)
}

// Flush drops every key (Map.Flush).
func (d *Dispatcher) Flush() { d.m.Flush() }

// Reconcile brings every shard up to date with the rule set
// (Map.Reconcile).
func (d *Dispatcher) Reconcile() { d.m.Reconcile() }

// Apply performs op at once, as DB.Apply does on a held DB: a Dispatcher
// with nothing queued sends it to its shard and waits. For commands that
// run one operation outside the batch (RL.OVERRIDE).
func (d *Dispatcher) Apply(op *Op) {
	if d.Len() != 0 {
		panic("keyspace: Dispatcher.Apply with operations queued")
	}
	t := d.Add(*op)
	d.Run()
	*op = *d.Op(t)
	d.Reset()
}
