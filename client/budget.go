package client

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// BudgetOptions configure a Budget. Zero fields take the defaults.
type BudgetOptions struct {
	// Chunk is how many units one RL.ACQUIRE asks for (default 20). A
	// request costing more than what is held asks for what it lacks, if
	// that is more.
	Chunk int64
	// LowWater: when fewer units than this are held after a request, the
	// Budget reserves the next chunk in the background, so requests rarely
	// wait for the server (default Chunk/4; negative: never in the
	// background, only when a request finds too few units).
	LowWater int64
	// MaxHold is the longest a reservation is served from memory (default
	// 1s). Its units are spent at the server when reserved; serving them
	// later shifts admissions in time by up to MaxHold, which is the local
	// tier's accuracy cost (see Budget). A reservation also ends before its
	// rule window does (from the reply's reset_after), so that the unused
	// units can still be given back.
	MaxHold time.Duration
	// MaxKeys bounds the keys held at once (default 10000). Beyond it a
	// new key is decided by the server request by request (RL.ALLOW), so
	// many distinct keys cannot grow the Budget without bound.
	MaxKeys int
	// Timeout bounds the Budget's own calls: background reservations and
	// refunds (default 1s).
	Timeout time.Duration
	// Wait, if positive, bounds how long a request waits for the server
	// (its own reservation, or one in flight) on top of its context's
	// deadline; the timer is set only when the server is needed, so a
	// request served from memory costs none.
	Wait time.Duration
	// Now is the clock (default time.Now); tests inject one.
	Now func() time.Time

	// sweepEvery is how often expired reservations are refunded and idle
	// keys dropped (default MaxHold/4, from 10ms to 1s); negative: never
	// in the background (tests call sweep).
	sweepEvery time.Duration
	// workers is how many background reservations run at once (default
	// 2; negative: none, for tests).
	workers int
}

func (o *BudgetOptions) setDefaults() {
	if o.Chunk < 1 {
		o.Chunk = 20
	}
	if o.LowWater == 0 {
		o.LowWater = o.Chunk / 4
	}
	if o.MaxHold <= 0 {
		o.MaxHold = time.Second
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = 10000
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.sweepEvery == 0 {
		o.sweepEvery = min(max(o.MaxHold/4, 10*time.Millisecond), time.Second)
	}
	if o.workers == 0 {
		o.workers = 2
	}
}

// Budget is the local tier in front of the server for one rule: per key it
// reserves a chunk of units with one RL.ACQUIRE, serves requests from
// memory, reserves again (in the background) when fewer than LowWater are
// left, and gives back what is left with RL.REFUND when a reservation ends
// (MaxHold, or before the rule's window does) or on Close.
//
// Reservations are real spends: every unit a Budget serves was granted by
// the server, so across any number of Budgets (nodes) the total admitted
// never exceeds the rule's limit. Units reserved but not used are given
// back when the server can still take them (see RL.REFUND); units it can
// no longer take are lost, so unused reservations make the effective limit
// slightly lower, never higher. Admissions are shifted in time, though: a
// unit reserved at t and served up to MaxHold later is counted at t. Over
// a window much longer than MaxHold this does not matter; for windows of a
// few MaxHold it can let a burst straddle a window boundary.
//
// After the server refuses (grants 0), the key is not asked again until
// the refusal's retry_after has passed: requests meanwhile are denied from
// memory, so a key under attack costs the server no more than an idle one.
// At most one reservation per key is in flight; concurrent requests wait
// for it.
//
// The Decision of a request served from memory is a hint: Remaining is the
// units this Budget holds plus the server's remaining at its last
// reservation, and other nodes hold and spend units too. Its Delay is 0: a
// leaky bucket's shaping is not applied to units served from memory.
//
// A Budget owns goroutines (background reservations, the sweeper): Close
// stops them. It is safe for concurrent use.
type Budget struct {
	c     *Client
	rule  string
	opts  BudgetOptions
	base  time.Time // instants are nanoseconds since base, monotonic
	seed  maphash.Seed
	held  atomic.Int64 // entries in the shards
	work  chan *budgetEntry
	stop  chan struct{}
	wg    sync.WaitGroup
	close sync.Once

	closed atomic.Bool

	pendingMu sync.Mutex
	pending   []heldGrant // grants to refund that no entry holds any more

	stats budgetCounters

	// onWait, if set (tests), is called when a request starts waiting for
	// a reservation in flight.
	onWait func()

	shards [budgetShards]budgetShard
}

// budgetShards spreads keys over maps with their own locks, so requests for
// different keys rarely contend on one lock.
const budgetShards = 16

type budgetShard struct {
	mu sync.RWMutex
	m  map[string]*budgetEntry
}

// maxGrants bounds the reservations one key holds at once: the current one
// and the next, plus room for requests that cost more than is held.
const maxGrants = 4

// budgetEntry is one key's local state. mu guards every field but key.
type budgetEntry struct {
	key string

	mu     sync.Mutex
	grants [maxGrants]heldGrant // oldest first
	n      int
	// coolUntil: no RL.ACQUIRE before this instant (a refusal's
	// retry_after).
	coolUntil int64
	// inflight is the reservation being made, if any.
	inflight *refill
	// From the last reply: the rule's capacity, the key's remaining after
	// the grant, and the instant the key would be full again.
	limit, serverRemaining, resetAt int64
	lastUse                         int64
	// dead: the sweeper dropped the entry from its shard.
	dead bool
}

// heldGrant is a reservation's units not yet served.
type heldGrant struct {
	key     string
	at      int64 // the server's grant instant, for RL.REFUND
	left    int64 // units not yet served
	expires int64 // served only until this instant (inclusive)
}

// refill is one RL.ACQUIRE in flight for a key; done is closed when its
// outcome is applied, err set before.
type refill struct {
	done chan struct{}
	err  error
}

// budgetCounters count the server calls a Budget makes.
type budgetCounters struct {
	acquires, granted, refunds, returned atomic.Int64
}

// BudgetStats are a Budget's server calls so far.
type BudgetStats struct {
	Acquires int64 // RL.ACQUIRE calls answered
	Granted  int64 // units they granted
	Refunds  int64 // units offered back with RL.REFUND
	Returned int64 // units the server took back
	Keys     int64 // keys held now
}

// NewBudget returns a Budget for rule over c, and starts its goroutines.
func NewBudget(c *Client, rule string, opts BudgetOptions) *Budget {
	opts.setDefaults()
	b := &Budget{
		c: c, rule: rule, opts: opts, base: opts.Now(), seed: maphash.MakeSeed(),
		work: make(chan *budgetEntry, 64), stop: make(chan struct{}),
	}
	for i := range b.shards {
		b.shards[i].m = make(map[string]*budgetEntry)
	}
	for range max(opts.workers, 0) {
		b.wg.Add(1)
		go b.reserveInBackground()
	}
	if opts.sweepEvery > 0 {
		b.wg.Add(1)
		go b.sweepEvery(opts.sweepEvery)
	}
	return b
}

// Rule is the rule the Budget reserves under.
func (b *Budget) Rule() string { return b.rule }

// Stats returns the Budget's server calls so far.
func (b *Budget) Stats() BudgetStats {
	return BudgetStats{
		Acquires: b.stats.acquires.Load(), Granted: b.stats.granted.Load(),
		Refunds: b.stats.refunds.Load(), Returned: b.stats.returned.Load(), Keys: b.held.Load(),
	}
}

func (b *Budget) now() int64 { return int64(b.opts.Now().Sub(b.base)) }

// entry returns key's entry, creating it if there is room; nil if the
// Budget holds MaxKeys keys already.
func (b *Budget) entry(key string) *budgetEntry {
	sh := &b.shards[maphash.String(b.seed, key)%budgetShards]
	sh.mu.RLock()
	e := sh.m[key]
	sh.mu.RUnlock()
	if e != nil {
		return e
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[key]; e != nil {
		return e
	}
	if b.held.Load() >= int64(b.opts.MaxKeys) {
		return nil
	}
	e = &budgetEntry{key: key}
	sh.m[key] = e
	b.held.Add(1)
	return e
}

// Take decides a request of cost units (at least 1) for key: from the units
// held in memory if there are enough, else after reserving more from the
// server (waiting at most as ctx allows). A denial is a Decision with
// Allowed false; an error means the server could not be asked (the caller
// applies its fail policy). Serving from memory does not allocate.
func (b *Budget) Take(ctx context.Context, key string, cost int64) (Decision, error) {
	if cost < 1 {
		return Decision{}, &CostError{Cost: cost}
	}
	if b.closed.Load() {
		return Decision{}, ErrClosed
	}
	e := b.entry(key)
	if e != nil {
		e.mu.Lock()
		for e != nil && e.dead { // dropped by the sweeper (or Close)
			e.mu.Unlock()
			if b.closed.Load() {
				return Decision{}, ErrClosed
			}
			if e = b.entry(key); e != nil {
				e.mu.Lock()
			}
		}
	}
	if e != nil {
		now := b.now()
		e.lastUse = now
		if d, ok := b.serve(e, now, cost); ok {
			e.mu.Unlock()
			return d, nil
		}
	}
	// The server is needed (or may be): bound the wait.
	if b.opts.Wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opts.Wait)
		defer cancel()
	}
	if e == nil {
		// MaxKeys keys are held: this one is decided request by request.
		return b.c.Allow(ctx, key, b.rule, cost)
	}
	return b.takeSlow(ctx, e, cost)
}

// takeSlow is Take for a request e cannot serve from memory as it stands:
// it waits for a reservation in flight or makes one (at most two), and
// denies from memory during a cooldown. e.mu is held on entry and released
// on return.
func (b *Budget) takeSlow(ctx context.Context, e *budgetEntry, cost int64) (Decision, error) {
	for asked := 0; ; {
		if e.dead {
			// Close dropped the entry while this request waited: only
			// Close does while a reservation is in flight.
			e.mu.Unlock()
			return Decision{}, ErrClosed
		}
		now := b.now()
		if d, ok := b.serve(e, now, cost); ok {
			e.mu.Unlock()
			return d, nil
		}
		if e.limit > 0 && cost > e.limit {
			e.mu.Unlock()
			return Decision{}, &CostError{Cost: cost, Capacity: e.limit, Rule: b.rule}
		}
		if now < e.coolUntil || asked == 2 {
			d := b.denial(e, now)
			e.mu.Unlock()
			return d, nil
		}
		if r := e.inflight; r != nil {
			e.mu.Unlock()
			if b.onWait != nil {
				b.onWait()
			}
			select {
			case <-r.done:
			case <-ctx.Done():
				return Decision{}, classify(ctx.Err())
			}
			if r.err != nil {
				return Decision{}, r.err
			}
			e.mu.Lock()
			continue
		}
		asked++
		r := &refill{done: make(chan struct{})}
		e.inflight = r
		need := max(b.opts.Chunk, cost-e.avail(now))
		e.mu.Unlock()
		if err := b.reserve(ctx, e, r, need); err != nil {
			return Decision{}, err
		}
		e.mu.Lock()
	}
}

// PutBack returns n units taken from key by a Take whose request did not go
// ahead after all (another limit of the same request denied), so the next
// request can use them. They join the key's newest reservation that is
// still being served; if there is none they are lost (the effective limit
// is lower by n, never higher).
func (b *Budget) PutBack(key string, n int64) {
	sh := &b.shards[maphash.String(b.seed, key)%budgetShards]
	sh.mu.RLock()
	e := sh.m[key]
	sh.mu.RUnlock()
	if e == nil || n < 1 {
		return
	}
	now := b.now()
	e.mu.Lock()
	for i := e.n - 1; i >= 0; i-- {
		if e.grants[i].expires >= now {
			e.grants[i].left += n
			break
		}
	}
	e.mu.Unlock()
}

// avail is the units e can serve at now. e.mu is held.
func (e *budgetEntry) avail(now int64) int64 {
	var n int64
	for _, g := range e.grants[:e.n] {
		if g.expires >= now {
			n += g.left
		}
	}
	return n
}

// serve takes cost units from e's live reservations, those that end
// soonest first, if they hold enough; it may start a background
// reservation. e.mu is held.
func (b *Budget) serve(e *budgetEntry, now, cost int64) (Decision, bool) {
	avail := e.avail(now)
	if avail < cost {
		return Decision{}, false
	}
	for need := cost; need > 0; {
		best := -1
		for i, g := range e.grants[:e.n] {
			if g.left > 0 && g.expires >= now && (best < 0 || g.expires < e.grants[best].expires) {
				best = i
			}
		}
		t := min(need, e.grants[best].left)
		e.grants[best].left -= t
		need -= t
	}
	// Drop the grants served out.
	k := 0
	for _, g := range e.grants[:e.n] {
		if g.left > 0 {
			e.grants[k] = g
			k++
		}
	}
	clear(e.grants[k:e.n])
	e.n = k
	left := avail - cost
	if left < b.opts.LowWater && e.inflight == nil && now >= e.coolUntil && e.n < maxGrants-1 {
		b.startBackground(e)
	}
	return Decision{
		Allowed: true, Limit: e.limit, Remaining: left + e.serverRemaining,
		ResetAfter: time.Duration(max(e.resetAt-now, 0)), Rule: b.rule,
	}, true
}

// denial is the Decision for a request e cannot serve. e.mu is held.
func (b *Budget) denial(e *budgetEntry, now int64) Decision {
	wait := time.Duration(e.coolUntil - now)
	if wait <= 0 {
		wait = time.Millisecond // the server granted less than asked twice: try again soon
	}
	return Decision{
		Limit: e.limit, Remaining: e.avail(now), RetryAfter: wait,
		ResetAfter: time.Duration(max(e.resetAt-now, 0)), Rule: b.rule,
	}
}

// startBackground hands e to a background reservation, unless the queue is
// full (a later request tries again). e.mu is held.
func (b *Budget) startBackground(e *budgetEntry) {
	r := &refill{done: make(chan struct{})}
	e.inflight = r
	select {
	case b.work <- e:
	default:
		e.inflight = nil
	}
}

func (b *Budget) reserveInBackground() {
	defer b.wg.Done()
	for {
		select {
		case <-b.stop:
			return
		case e := <-b.work:
			e.mu.Lock()
			r := e.inflight
			e.mu.Unlock()
			if r == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), b.opts.Timeout)
			b.reserve(ctx, e, r, b.opts.Chunk)
			cancel()
		}
	}
}

// reserve asks the server for n units for e and applies the answer; r is
// e's in-flight reservation, which it completes. e.mu is not held.
func (b *Budget) reserve(ctx context.Context, e *budgetEntry, r *refill, n int64) error {
	sent := b.now()
	g, err := b.c.Acquire(ctx, e.key, b.rule, n)
	recv := b.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inflight = nil
	r.err = err
	close(r.done)
	if err != nil {
		return err
	}
	b.stats.acquires.Add(1)
	b.stats.granted.Add(g.Granted)
	e.limit, e.serverRemaining = g.Limit, g.Remaining
	e.resetAt = recv + int64(g.ResetAfter)
	if g.Granted == 0 {
		// Not asked again until one more unit could be granted: the
		// server's wait, counted from the reply (so never early).
		e.coolUntil = recv + int64(max(g.RetryAfter, time.Millisecond))
		return nil
	}
	hold := b.opts.MaxHold
	if g.ResetAfter > 0 {
		// End before the key's reset (for a fixed window, its end) by a
		// round trip and the reply's millisecond rounding, so the refund
		// of what is left still reaches the server in the grant's window.
		hold = min(hold, g.ResetAfter-time.Millisecond-time.Duration(recv-sent))
	}
	h := heldGrant{key: e.key, at: g.At, left: g.Granted, expires: max(sent+int64(hold), recv)}
	if e.n == maxGrants {
		// Full (a run of requests costing more than was held): the
		// reservation with the fewest units goes back to the server.
		least := 0
		for i, x := range e.grants[:e.n] {
			if x.left < e.grants[least].left {
				least = i
			}
		}
		b.queueRefund(e.grants[least])
		copy(e.grants[least:], e.grants[least+1:e.n])
		e.n--
	}
	e.grants[e.n] = h
	e.n++
	if e.dead {
		// Dropped (by Close) while the reservation was in flight: nothing
		// will serve it, so it goes back.
		b.queueRefund(h)
		e.n--
	}
	return nil
}

func (b *Budget) queueRefund(g heldGrant) {
	if g.left < 1 {
		return
	}
	b.pendingMu.Lock()
	b.pending = append(b.pending, g)
	b.pendingMu.Unlock()
}

func (b *Budget) sweepEvery(every time.Duration) {
	defer b.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), b.opts.Timeout)
			b.sweep(ctx)
			cancel()
		}
	}
}

// sweep gives back the units of reservations that ended, and drops keys
// that hold nothing, wait for nothing and were not used for MaxHold.
func (b *Budget) sweep(ctx context.Context) error {
	now := b.now()
	idle := int64(b.opts.MaxHold)
	var back []heldGrant
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			e.mu.Lock()
			keep := 0
			for _, g := range e.grants[:e.n] {
				switch {
				case g.expires < now:
					if g.left > 0 {
						back = append(back, g)
					}
				case g.left > 0:
					e.grants[keep] = g
					keep++
				}
			}
			clear(e.grants[keep:e.n])
			e.n = keep
			if e.n == 0 && e.inflight == nil && now >= e.coolUntil && now-e.lastUse > idle {
				e.dead = true
				delete(sh.m, k)
				b.held.Add(-1)
			}
			e.mu.Unlock()
		}
		sh.mu.Unlock()
	}
	b.pendingMu.Lock()
	back = append(back, b.pending...)
	b.pending = nil
	b.pendingMu.Unlock()
	return b.refund(ctx, back)
}

// refund sends one RL.REFUND per grant, pipelined.
func (b *Budget) refund(ctx context.Context, grants []heldGrant) error {
	var cmds []*redis.Cmd
	for _, g := range grants {
		if g.at == 0 || g.left < 1 {
			continue // a grant without an instant cannot be identified
		}
		cmd := redis.NewCmd(ctx, "RL.REFUND", g.key, b.rule, g.left, g.at)
		cmd.SetFirstKeyPos(1)
		cmds = append(cmds, cmd)
		b.stats.refunds.Add(g.left)
	}
	if len(cmds) == 0 {
		return nil
	}
	err := b.c.pipeline(ctx, cmds)
	for _, cmd := range cmds {
		if n, e := cmd.Int64(); e == nil {
			b.stats.returned.Add(n)
		} else if err == nil {
			err = classify(e)
		}
	}
	return err
}

// Close stops the Budget's goroutines and gives back every unit it holds,
// waiting for the refunds as long as ctx allows. Take then fails with
// ErrClosed. Close is safe to call more than once; later calls do nothing.
func (b *Budget) Close(ctx context.Context) error {
	var err error
	b.close.Do(func() {
		b.closed.Store(true)
		close(b.stop)
		b.wg.Wait()
		// Background reservations still queued will not be made: release
		// the requests waiting for them.
		for drained := false; !drained; {
			select {
			case e := <-b.work:
				e.mu.Lock()
				if r := e.inflight; r != nil {
					e.inflight, r.err = nil, ErrClosed
					close(r.done)
				}
				e.mu.Unlock()
			default:
				drained = true
			}
		}
		var back []heldGrant
		for i := range b.shards {
			sh := &b.shards[i]
			sh.mu.Lock()
			for k, e := range sh.m {
				e.mu.Lock()
				for _, g := range e.grants[:e.n] {
					if g.left > 0 {
						back = append(back, g)
					}
				}
				e.n, e.dead = 0, true
				e.mu.Unlock()
				delete(sh.m, k)
			}
			sh.mu.Unlock()
		}
		b.held.Store(0)
		b.pendingMu.Lock()
		back = append(back, b.pending...)
		b.pending = nil
		b.pendingMu.Unlock()
		err = b.refund(ctx, back)
	})
	return err
}

// pipeline sends cmds in one round trip (per node, in a cluster), through
// the breaker. Each command's own error is on it.
func (c *Client) pipeline(ctx context.Context, cmds []*redis.Cmd) error {
	call := func() (any, error) {
		pipe := c.rdb.Pipeline()
		for _, cmd := range cmds {
			_ = pipe.Process(ctx, cmd)
		}
		start := time.Now()
		_, err := pipe.Exec(ctx)
		err = answered(err) // a command's error reply: the server answered
		if c.observe != nil {
			name, _ := cmds[0].Args()[0].(string)
			c.observe(name, time.Since(start), err)
		}
		return nil, err
	}
	var err error
	if c.breaker != nil {
		_, err = c.breaker.run(call)
	} else {
		_, err = call()
	}
	return classify(err)
}
