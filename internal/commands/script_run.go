//lint:file-ignore ST1005 the errors a script sees keep Redis's style: a capital, as scripting's own

package commands

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/scripting"
	"github.com/rlserver/rlserver/internal/service"
)

// Where a script runs, and what other clients see meanwhile.
//
// A script runs holding the shards of its declared KEYS (every shard when
// it declares none, and inside EXEC). A redis.call on a key of another
// shard, or a command over the whole keyspace (DBSIZE, FLUSHALL, KEYS,
// INFO, RL.ALLOWALL...), cannot be served there: the other shards' owners
// cannot be reached while shards are held without risking deadlock. If the
// script has not written yet, it is stopped (scripting.Rerun) and run again
// from the start holding every shard, in the ascending order EXEC takes
// them; its first run wrote nothing and its reply is dropped, so the client
// sees one run. The script is marked (scripting.Script.MarkWholeKeyspace),
// so its later runs hold every shard from the start. One that has already
// written gets errUndeclaredAfterWrite: its writes stay, as every write a
// failing Redis script made stays. In cluster mode a key may live on
// another node, so reaching beyond the declared keys is an error, as in
// Redis Cluster. An undeclared key that happens to live on a held shard
// works, as in Redis Cluster for a key of the same slot.
//
// While a script runs, commands of other clients on its shards wait for it,
// as every command waits for a Redis script. Once it has run past
// --lua-time-limit they are refused with BUSY instead (the gate below),
// as Redis refuses every command then; clients whose commands touch other
// shards are served throughout. SCRIPT KILL stops a script past the limit
// that has not written. Known limit: a command queued on a shard while the
// script there had run for less than gateQueueAge waits for the script's
// end (see gate).

// scriptHost is the server's scripting: one cache and one engine (so SCRIPT
// KILL sees every script, as in Redis), and the scripts in flight with the
// shards they hold, for the gate.
type scriptHost struct {
	cache  *scripting.Cache
	engine *scripting.Engine
	now    func() time.Time

	// inFlight counts the scripts between dispatch and end; while it is
	// 0 the gate costs one atomic load.
	inFlight atomic.Int32
	mu       sync.Mutex
	flights  []*flight
}

// flight is a script between dispatch and end: when it was dispatched,
// and the shards it holds (all: every shard).
type flight struct {
	since  time.Time
	all    bool
	shards []int
}

func newScriptHost(cfg Config) *scriptHost {
	cache := cfg.Scripts
	if cache == nil {
		cache = scripting.NewCache(scripting.CacheLimits{})
	}
	now := func() time.Time { return time.Unix(0, cfg.Clock()) }
	limit := cfg.LuaTimeLimit
	if limit == 0 {
		limit = scripting.DefaultTimeLimit
	}
	// Scripts run on the shards' goroutines (or a coordinator holding
	// them), so as many run at once as there are shards: keep a Lua state
	// for each rather than build one (~190 µs) per script.
	idle := runtime.GOMAXPROCS(0)
	if cfg.Service != nil {
		idle = max(idle, cfg.Service.Shards())
	}
	engine := scripting.New(scripting.Options{TimeLimit: limit, Now: now, Logger: cfg.Logger, MaxIdleStates: idle})
	return &scriptHost{cache: cache, engine: engine, now: now}
}

func (h *scriptHost) start(f *flight) {
	h.mu.Lock()
	h.flights = append(h.flights, f)
	h.inFlight.Add(1)
	h.mu.Unlock()
}

func (h *scriptHost) end(f *flight) {
	h.mu.Lock()
	if i := slices.Index(h.flights, f); i >= 0 {
		h.flights = slices.Delete(h.flights, i, i+1)
	}
	h.inFlight.Add(-1)
	h.mu.Unlock()
}

// gateWait is how long the gate sleeps between looks at a script in
// flight on the shards a command needs: a script ends within microseconds
// unless it is a runaway, so the first waits are short.
var gateWait = [...]time.Duration{20 * time.Microsecond, 100 * time.Microsecond, time.Millisecond}

// gateQueueAge is how long a script may have been in flight for a command
// needing its shards to queue behind it on the shard rather than wait at
// the gate. Limiter scripts run for microseconds: under script load some
// script nearly always holds each shard, and waiting at the gate for each
// (a sleep of at least gateWait[0]) would cost every command far more than
// the script it waits for. A script older than this is unusual, and a
// command waits at the gate for it, to get BUSY once it is past the limit.
const gateQueueAge = time.Millisecond

// gate lets a command that needs the given shards (all: every shard)
// through once no script holds any of them, or the scripts that do have
// been in flight for less than gateQueueAge (the command then queues on
// the shard behind them), and refuses it with BUSY while one that does has
// run past the time limit. It waits meanwhile, as the command would wait
// behind the script on the shard, but outside the shard's queue, so that
// BUSY comes as soon as the limit passes.
func (h *scriptHost) gate(all bool, shards ...int) error {
	for try := 0; h.inFlight.Load() != 0; try++ {
		since, ok := h.holder(all, shards)
		if !ok {
			return nil
		}
		age := h.now().Sub(since)
		if age < gateQueueAge {
			return nil
		}
		if limit := h.engine.TimeLimit(); limit > 0 && age >= limit {
			h.engine.Busy() // logs the slow script once
			return scripting.ErrBusy
		}
		time.Sleep(gateWait[min(try, len(gateWait)-1)])
	}
	return nil
}

// holder returns when the oldest script holding one of the shards (any,
// when all) was dispatched.
func (h *scriptHost) holder(all bool, shards []int) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var since time.Time
	found := false
	for _, f := range h.flights {
		hit := all || f.all
		for _, s := range shards {
			hit = hit || slices.Contains(f.shards, s)
		}
		if hit && (!found || f.since.Before(since)) {
			since, found = f.since, true
		}
	}
	return since, found
}

// wholeKeyspace reports whether cmd works on every shard rather than on
// keys it names: keyless commands that read or change the keyspace
// (DBSIZE, FLUSHALL, RL.RULE SET...), INFO (its keyspace statistics), EXEC
// (it holds every shard), CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT (a
// slot's keys are on any shard), and commands run in place over keys
// found by parsing (RL.ALLOWALL).
func wholeKeyspace(cmd *command) bool {
	switch {
	case cmd.name == "exec" || cmd.name == "info" ||
		cmd.name == "cluster|countkeysinslot" || cmd.name == "cluster|getkeysinslot":
		return true
	case cmd.keys.first == 0 && cmd.movableKeys == nil:
		return cmd.flags&(flagWrite|flagReadonly|flagAdmin) != 0
	}
	return cmd.run != nil && cmd.exec == nil && cmd.group != groupScripting && cmd.flags&flagTxControl == 0
}

// gateCommand is the gate for a command about to run or be batched: its
// keys' shards, or every shard. A decision's shard is known only once it
// is prepared (gateDecision).
func (c *session) gateCommand(cmd *command, args [][]byte) error {
	hs := c.h.scripts
	if hs.inFlight.Load() == 0 || c.db != nil || c.inMulti && cmd.flags&flagTxControl == 0 {
		return nil
	}
	if cmd.group == groupScripting || cmd.prepare != nil {
		return nil // a script gates itself once it knows its shards; a decision once prepared
	}
	if wholeKeyspace(cmd) {
		return hs.gate(true)
	}
	var shards []int
	for _, i := range cmd.keyPositions(args) {
		shards = append(shards, c.h.svc.ShardOf(nil, args[i]))
	}
	if len(shards) == 0 {
		return nil
	}
	return hs.gate(false, shards...)
}

// gateDecision is the gate for a prepared decision.
func (c *session) gateDecision(op *service.Op) error {
	if c.h.scripts.inFlight.Load() == 0 || c.db != nil {
		return nil
	}
	return c.h.scripts.gate(false, c.h.svc.ShardOf(op.Rule, op.Key))
}

// eval runs EVAL, EVALSHA, EVAL_RO or EVALSHA_RO.
func (c *session) eval(args [][]byte, bySHA, readOnly bool) error {
	keys, argv, err := scripting.SplitKeys(args[2:])
	if err != nil {
		return err
	}
	hs := c.h.scripts
	var script *scripting.Script
	if bySHA {
		if script = hs.cache.Get(args[1]); script == nil {
			return scripting.ErrNoScript
		}
	} else if script, err = hs.cache.Load(args[1]); err != nil {
		return err
	}
	t := c.scriptTask()
	t.script, t.keys, t.argv, t.readOnly = script, keys, argv, readOnly
	t.proto, t.limit = c.out.Proto(), c.out.Limit()
	defer t.clear()
	if c.db != nil { // inside EXEC: the transaction holds every shard
		t.Run(c.db)
		return t.answer(c)
	}
	all := len(keys) == 0 || script.WholeKeyspace()
	if err := t.dispatch(all); err != nil {
		return err
	}
	if _, rerun := t.err.(*scripting.Rerun); rerun && !all {
		// It reached beyond its shards before writing: run it again
		// from the start holding every shard. The first run wrote
		// nothing and its reply was dropped, so the client sees one run.
		t.dropObserved()
		t.reply, t.err = t.reply[:0], nil
		if err := t.dispatch(true); err != nil {
			return err
		}
	}
	return t.answer(c)
}

// dispatch runs the script once, where it runs (see the top of this file):
// holding every shard when all, else on its declared keys' shards.
func (t *scriptTask) dispatch(all bool) (err error) {
	c, hs := t.c, t.c.h.scripts
	f := &t.flight
	f.all, f.shards = all, f.shards[:0]
	if !all {
		for _, k := range t.keys {
			f.shards = append(f.shards, c.h.svc.ShardOf(nil, k))
		}
	}
	if err := hs.gate(f.all, f.shards...); err != nil {
		return err
	}
	f.since = hs.now()
	hs.start(f)
	if f.all {
		err = c.batch.ss.Exec(t.Run)
	} else {
		err = c.batch.ss.Do(t.keys, t)
	}
	hs.end(f)
	return err
}

// scriptTask is one script's run, a service.Task on the shards it holds. It
// belongs to its client's session and is reused from script to script.
type scriptTask struct {
	c        *session
	script   *scripting.Script
	keys     [][]byte
	argv     [][]byte
	readOnly bool
	proto    int // the client's
	limit    int // the client's output limit, bytes
	caller   scripting.Caller

	flight flight // where the script runs, for the gate

	db    *service.DB // while running
	sub   session     // runs the script's commands: the client's, on db, replying to w
	w     resp.Writer
	reply []byte // the script's reply
	err   error
	// panicked is what the script's run panicked with (a bug), recovered
	// while the keyspace was consistent.
	panicked any
	// observed holds the durations of the script's commands until the run
	// is final (a run stopped to be rerun must not count them twice).
	observed []observation
}

func (c *session) scriptTask() *scriptTask {
	if c.script == nil {
		t := &scriptTask{c: c}
		t.caller = t.call
		c.script = t
	}
	return c.script
}

func (t *scriptTask) clear() {
	t.flushObserved()
	t.script, t.keys, t.argv, t.db, t.err, t.panicked = nil, nil, nil, nil, nil, nil
	if cap(t.reply) > resp.KeepBuffer {
		t.reply = nil
	}
	t.reply = t.reply[:0]
	t.w.Release()
}

// Run implements service.Task: it runs the script on db.
func (t *scriptTask) Run(db *service.DB) {
	defer t.recover(db)
	t.db = db
	t.sub = session{h: t.c.h, conn: t.c.conn, out: &t.w, db: db, observed: &t.observed}
	t.reply, t.err = t.c.h.scripts.engine.Run(context.Background(), t.script, t.keys, t.argv, t.proto,
		t.caller, t.readOnly, t.reply[:0])
}

// recover keeps a panic of the run for the client's goroutine to answer,
// unless it came from inside the keyspace, whose shards must then fail.
func (t *scriptTask) recover(db *service.DB) {
	if r := recover(); r != nil {
		if !db.Consistent() {
			panic(r)
		}
		t.panicked = r
	}
}

// answer writes the script's reply, or its error, to the client.
func (t *scriptTask) answer(c *session) error {
	switch {
	case t.panicked != nil:
		c.h.handlerPanicked(c, commands.byName["eval"], t.panicked)
		return nil
	case t.err != nil:
		return t.err
	}
	c.out.Raw(t.reply)
	return nil
}

// errUndeclaredKey fails a script's command on a key of a shard the script
// does not hold, in cluster mode (the key may live on another node).
func errUndeclaredKey(cmd string, key []byte) error {
	return fmt.Errorf("Script attempted to access key '%.128s' with '%s', which is not declared in KEYS and lives on a shard the script does not hold; declare every key the script touches", key, cmd)
}

// errNeedsEveryShard fails a script's whole-keyspace command when the script
// holds only its keys' shards, in cluster mode.
func errNeedsEveryShard(cmd string) error {
	return fmt.Errorf("Script attempted to run '%s', which needs every shard; only a script that declares no keys (numkeys 0) holds every shard", cmd)
}

// errUndeclaredAfterWrite fails a script's command on a key of a shard the
// script does not hold, or a whole-keyspace command, once the script has
// written: rerunning it holding every shard would apply its writes twice.
func errUndeclaredAfterWrite(cmd string, key []byte) error {
	what := fmt.Sprintf("run '%s', which needs every shard,", cmd)
	if key != nil {
		what = fmt.Sprintf("access key '%.128s' with '%s', which is not declared in KEYS,", key, cmd)
	}
	return fmt.Errorf("Script attempted to %s after it had written; its writes stay. Declare every key the script touches: its next run holds every shard from the start", what)
}

// beyondShards answers a script's command that needs a shard the script does
// not hold (key: the undeclared key; nil for a whole-keyspace command).
// Outside cluster mode the script is marked as needing every shard (its
// later runs hold them all from the start) and asked to be rerun holding
// them, which the engine does only if it has not written yet. In cluster
// mode the key may live on another node: an error, as in Redis Cluster.
func (t *scriptTask) beyondShards(cmd string, key []byte) error {
	if t.c.h.cfg.Cluster != nil {
		if key == nil {
			return errNeedsEveryShard(cmd)
		}
		return errUndeclaredKey(cmd, key)
	}
	t.script.MarkWholeKeyspace()
	return &scripting.Rerun{Err: errUndeclaredAfterWrite(cmd, key)}
}

// observation is the duration of one of a script's commands.
type observation struct {
	cmd *command
	d   time.Duration
}

// observe records the duration of a command run since start: at once, or,
// for a script's command, when the script's run is final.
func (c *session) observe(cmd *command, start time.Time) {
	if c.observed != nil && c.h.observers != nil {
		*c.observed = append(*c.observed, observation{cmd, time.Since(start)})
		return
	}
	c.h.observe(cmd, start)
}

// flushObserved records the durations of the final run's commands.
func (t *scriptTask) flushObserved() {
	for _, o := range t.observed {
		t.c.h.observers[o.cmd.index].Observe(o.d.Seconds())
	}
	t.dropObserved()
}

// dropObserved forgets the durations of a run stopped to be rerun.
func (t *scriptTask) dropObserved() {
	clear(t.observed)
	t.observed = t.observed[:0]
}

// call is the script's Caller: it runs one command through the command
// table on the held keyspace, with the checks Redis makes for a script's
// command, and appends its reply in the protocol the script chose.
func (t *scriptTask) call(args [][]byte, proto int, readOnly bool, reply []byte) ([]byte, bool, error) {
	cmd, err := commands.resolve(args)
	switch {
	case err != nil:
		return reply, false, scripting.ErrUnknownCommand
	case cmd.checkArity(args) != nil:
		return reply, false, scripting.ErrWrongArity
	case cmd.flags&(flagNoScript|flagTxControl) != 0:
		return reply, false, scripting.ErrNotAllowed
	case readOnly && cmd.flags&flagWrite != 0:
		return reply, false, scripting.ErrWriteFromReadOnly
	}
	sub, db := &t.sub, t.db
	t.w.Reuse(proto, t.limit)
	switch {
	case cmd.prepare != nil:
		op, ok, err := sub.prepare(cmd, args)
		switch {
		case !ok:
			return reply, false, t.commandPanicked(cmd)
		case err != nil:
			t.w.Error(errorText(err))
		case !db.CoversOp(op.Rule, op.Key):
			return reply, false, t.beyondShards(cmd.name, op.Key)
		default:
			db.Apply(&op)
			sub.reply(cmd, &op)
		}
	case cmd.exec != nil:
		if key := uncovered(cmd, args, db); key != nil {
			return reply, false, t.beyondShards(cmd.name, key)
		}
		sub.runKeyed(cmd, args)
	default:
		if wholeKeyspace(cmd) && !db.CoversAll() {
			return reply, false, t.beyondShards(cmd.name, nil)
		}
		sub.run(cmd, args)
	}
	if sub.panicked {
		return reply, false, t.commandPanicked(cmd)
	}
	if t.w.Over() {
		return reply, false, fmt.Errorf("the reply of '%s' is larger than the client's output limit", cmd.name)
	}
	return append(reply, t.w.Bytes()...), cmd.flags&flagWrite != 0, nil
}

// uncovered returns a key of cmd's that db does not reach, or nil. A
// command with fixed key positions costs no allocation.
func uncovered(cmd *command, args [][]byte, db *service.DB) []byte {
	if cmd.movableKeys != nil {
		for _, i := range cmd.movableKeys(args) {
			if !db.CoversOp(nil, args[i]) {
				return args[i]
			}
		}
		return nil
	}
	k := cmd.keys
	for i := k.first; i <= k.lastIn(args); i += k.step {
		if !db.CoversOp(nil, args[i]) {
			return args[i]
		}
	}
	return nil
}

// commandPanicked answers a script's command whose handler panicked (logged by
// the guard): the script sees an error, the client's connection stays.
func (t *scriptTask) commandPanicked(cmd *command) error {
	t.sub.panicked = false
	return fmt.Errorf("internal error in '%s' (the server log has the details)", cmd.name)
}
