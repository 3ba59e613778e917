package scripting

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Caller runs one Redis command (args[0] is its name) on behalf of a script
// and appends the command's reply, RESP-encoded in protocol proto (2 or 3,
// as the script chose with redis.setresp), to reply, returning it. It
// reports whether the command was a write it ran, so that SCRIPT KILL can
// refuse to stop a script that has written.
//
// An error reply is just bytes in reply ("-ERR ...\r\n"); err is only for a
// call that did not run: ErrUnknownCommand, ErrWrongArity, ErrNotAllowed,
// ErrWriteFromReadOnly (which the Caller must return, without running the
// command, for a write when readOnly is true), a *Rerun (stop the script, to
// run it again: see Rerun), or a failure of its own, which the script sees
// as "ERR " and its text.
//
// The Caller runs on the goroutine that called Run. It must not keep args
// (their bytes are reused by the next call), must append exactly one reply,
// and must not call the Engine's Kill (SCRIPT KILL is not allowed from
// scripts).
type Caller func(args [][]byte, proto int, readOnly bool, reply []byte) (out []byte, write bool, err error)

// DefaultTimeLimit is Redis's lua-time-limit.
const DefaultTimeLimit = 5 * time.Second

// Options configure an Engine. Zero fields take the defaults given.
type Options struct {
	// TimeLimit is how long a script runs before it is busy: Busy reports
	// it and Kill may stop it (0: DefaultTimeLimit; negative: never busy,
	// as Redis's lua-time-limit 0). Like Redis, the limit only reports: a
	// busy script runs on until it ends or is killed.
	TimeLimit time.Duration
	// Logger receives redis.log and the engine's own warnings (default:
	// discarded).
	Logger *slog.Logger
	// Now is the clock the time limit is measured with (default time.Now).
	Now func() time.Time
	// MaxIdleStates is how many Lua states the engine keeps for reuse
	// (default GOMAXPROCS). Each takes a few hundred KiB; more concurrent
	// runs than this create states that are dropped afterwards.
	MaxIdleStates int
	// Limits bound what one script can make the server hold.
	Limits Limits
}

// Limits bound the memory one running script can make the engine hold where
// gopher-lua lets it be bounded. What stays unbounded: the tables a script
// builds, and strings it concatenates with "..": only the time limit and
// SCRIPT KILL stop a script that grows them forever (Redis 7.0 has the same
// exposure).
type Limits struct {
	// MaxStringBytes is the longest string a library function may build:
	// string.rep, string.format, string.gsub, table.concat, cjson.encode
	// (default 64 MiB). Past it the function raises an error.
	MaxStringBytes int
	// MaxReplyBytes is the longest reply a script may return (default 64
	// MiB, the server's pipeline output limit).
	MaxReplyBytes int
	// CallDepth is how deeply Lua calls may nest (default 1000, gopher-lua
	// call frames); past it the script gets "stack overflow".
	CallDepth int
	// StackSlots is the most values a state's stack may hold, all frames
	// together (default 65 536, 16 bytes each); unpack of a larger table
	// fails with "registry overflow".
	StackSlots int
	// MaxCoroutines is how many coroutines one run may create (default
	// 1000); each has its own stack.
	MaxCoroutines int
}

// DefaultLimits are the limits of a zero Limits.
var DefaultLimits = Limits{
	MaxStringBytes: 64 << 20,
	MaxReplyBytes:  64 << 20,
	CallDepth:      1000,
	StackSlots:     64 << 10,
	MaxCoroutines:  1000,
}

// replyMaxDepth is how deeply a script's reply may nest before its innermost
// table becomes "-ERR reached lua stack limit": the depth at which Redis
// 7.0.15's Lua stack runs out for a table that contains itself (measured).
const replyMaxDepth = 7995

// Engine runs scripts. It is safe for concurrent use: every Run takes a Lua
// state of its own from a pool, so runs on different goroutines (shards)
// proceed in parallel. One Engine may serve the whole server (Busy and Kill
// then see every run) or one execution context each, sharing a Cache.
type Engine struct {
	opts      Options
	timeLimit atomic.Int64 // nanoseconds; <= 0: never busy
	log       *slog.Logger

	poolMu sync.Mutex
	idle   []*state

	runsMu  sync.Mutex
	runs    []*run       // runs in progress
	running atomic.Int32 // len(runs), read without the lock by Busy
}

// New returns an engine configured by opts.
func New(opts Options) *Engine {
	if opts.TimeLimit == 0 {
		opts.TimeLimit = DefaultTimeLimit
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxIdleStates <= 0 {
		opts.MaxIdleStates = runtime.GOMAXPROCS(0)
	}
	opts.Limits = opts.Limits.withDefaults()
	e := &Engine{opts: opts, log: opts.Logger}
	e.SetTimeLimit(opts.TimeLimit)
	return e
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxStringBytes <= 0 {
		l.MaxStringBytes = d.MaxStringBytes
	}
	if l.MaxReplyBytes <= 0 {
		l.MaxReplyBytes = d.MaxReplyBytes
	}
	if l.CallDepth <= 0 {
		l.CallDepth = d.CallDepth
	}
	if l.StackSlots <= 0 {
		l.StackSlots = d.StackSlots
	}
	if l.MaxCoroutines <= 0 {
		l.MaxCoroutines = d.MaxCoroutines
	}
	return l
}

// SetTimeLimit changes the time limit for runs in progress and later ones
// (CONFIG SET lua-time-limit); d <= 0 means never busy.
func (e *Engine) SetTimeLimit(d time.Duration) { e.timeLimit.Store(int64(d)) }

// TimeLimit returns the current time limit; <= 0 means never busy.
func (e *Engine) TimeLimit() time.Duration { return time.Duration(e.timeLimit.Load()) }

// Run runs script with KEYS and ARGV and appends its reply, RESP-encoded for a
// client speaking proto (2 or 3), to dst. A script error (raised, compiled,
// killed) is an *Error in Redis's words and leaves dst as it was; an error
// reply the script returns ({err=...}, redis.error_reply) is reply bytes, not
// an error. readOnly is EVAL_RO/EVALSHA_RO: the Caller is told to refuse
// writes, as it is for a script whose shebang declares no-writes.
//
// A Caller may stop the script to have it run again (see Rerun): Run then
// returns the *Rerun and appends nothing.
//
// Cancelling ctx stops the script at its next Lua instruction even if it has
// written (like SHUTDOWN NOSAVE); Run then returns ctx's error. A ctx that
// can be cancelled costs a few allocations per run; context.Background costs
// none.
func (e *Engine) Run(ctx context.Context, script *Script, keys, argv [][]byte, proto int, call Caller, readOnly bool, dst []byte) ([]byte, error) {
	if proto != 2 && proto != 3 {
		return dst, fmt.Errorf("scripting: protocol %d is not 2 or 3", proto)
	}
	if readOnly && script.shebang && !script.noWrites {
		return dst, ErrWriteScriptReadOnly
	}
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	st := e.getState()
	r := &st.run
	gen := st.begin(script, call, readOnly || script.noWrites, e.opts.Now())
	e.register(r)
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { r.abort(ctx, gen) })
	}
	out, err := st.execute(keys, argv, proto, dst)
	if stop != nil {
		stop()
	}
	e.unregister(r)
	e.putState(st)
	return out, err
}

// BusyScript describes a script running past the time limit.
type BusyScript struct {
	SHA     string    // the script's SHA1
	Since   time.Time // when it started
	Written bool      // whether it has run a write command, so cannot be killed
}

// Busy reports the longest-running script that is past the time limit, if
// any. While one is, Redis answers other clients ErrBusy. With no script
// running it costs one atomic load and allocates nothing.
func (e *Engine) Busy() (BusyScript, bool) {
	if e.running.Load() == 0 {
		return BusyScript{}, false
	}
	limit := e.TimeLimit()
	if limit <= 0 {
		return BusyScript{}, false
	}
	now := e.opts.Now()
	e.runsMu.Lock()
	defer e.runsMu.Unlock()
	var oldest *run
	for _, r := range e.runs {
		if now.Sub(r.start) >= limit && (oldest == nil || r.start.Before(oldest.start)) {
			oldest = r
		}
	}
	if oldest == nil {
		return BusyScript{}, false
	}
	if !oldest.reportedBusy {
		oldest.reportedBusy = true
		e.log.Warn("slow script detected: still in execution; you can try killing it with SCRIPT KILL",
			"script", oldest.script.hexSHA, "running", now.Sub(oldest.start))
	}
	return BusyScript{SHA: oldest.script.hexSHA, Since: oldest.start, Written: oldest.written.Load()}, true
}

// Kill stops every script past the time limit that has not written (SCRIPT
// KILL): each ends with "ERR Script killed by user with SCRIPT KILL..." to
// its own client. It returns ErrNotBusy if no script is past the limit and
// ErrUnkillable if one that is has written (those that had not are stopped
// all the same). A script that has written cannot be stopped short of
// ending the process, as in Redis: stopping it would leave half its writes.
// A script within the limit is not touched: a long but legitimate script on
// another shard keeps running.
func (e *Engine) Kill() error {
	limit := e.TimeLimit()
	if limit <= 0 || e.running.Load() == 0 {
		return ErrNotBusy
	}
	now := e.opts.Now()
	e.runsMu.Lock()
	defer e.runsMu.Unlock()
	busy, unkillable := 0, false
	for _, r := range e.runs {
		if now.Sub(r.start) < limit {
			continue
		}
		busy++
		if !r.kill() {
			unkillable = true
		}
	}
	switch {
	case busy == 0:
		return ErrNotBusy
	case unkillable:
		return ErrUnkillable
	}
	e.log.Warn("Lua script killed by user with SCRIPT KILL.")
	return nil
}

func (e *Engine) register(r *run) {
	e.runsMu.Lock()
	e.runs = append(e.runs, r)
	e.running.Store(int32(len(e.runs)))
	e.runsMu.Unlock()
}

func (e *Engine) unregister(r *run) {
	e.runsMu.Lock()
	for i, x := range e.runs {
		if x == r {
			last := len(e.runs) - 1
			e.runs[i] = e.runs[last]
			e.runs[last] = nil
			e.runs = e.runs[:last]
			break
		}
	}
	e.running.Store(int32(len(e.runs)))
	e.runsMu.Unlock()
}

// getState takes an idle state or makes one.
func (e *Engine) getState() *state {
	e.poolMu.Lock()
	if n := len(e.idle); n > 0 {
		st := e.idle[n-1]
		e.idle[n-1] = nil
		e.idle = e.idle[:n-1]
		e.poolMu.Unlock()
		return st
	}
	e.poolMu.Unlock()
	return newState(e)
}

// putState keeps st for reuse, or closes it when enough are idle. A broken
// state is dropped.
func (e *Engine) putState(st *state) {
	if st.broken {
		st.cancel()
		return
	}
	st.reset()
	e.poolMu.Lock()
	if len(e.idle) < e.opts.MaxIdleStates {
		e.idle = append(e.idle, st)
		e.poolMu.Unlock()
		return
	}
	e.poolMu.Unlock()
	st.L.Close()
}

// run is the state of one script execution. The goroutine running the script
// owns it; Kill and Busy reach it through Engine.runs. mu orders a kill
// against the script's command calls: a script is killed either before a
// call starts (the call then fails) or after it returned (and it is
// unkillable if the call wrote), never while a write is under way.
type run struct {
	script   *Script
	call     Caller
	readOnly bool
	start    time.Time
	resp     int // redis.setresp: the protocol of the Caller's replies
	written  atomic.Bool

	mu      sync.Mutex
	gen     uint64             // counts runs of this state, so a late abort of an earlier run is ignored
	killed  bool               // by Kill: the script sees msgKilled
	rerun   *Rerun             // the Caller asked for a rerun before any write: Run returns it
	aborted context.Context    // Run's cancelled ctx: the script stops
	cancel  context.CancelFunc // cancels the state's context, which the Lua VM checks at every instruction

	reportedBusy bool // guarded by Engine.runsMu

	panicked   error    // the Caller panicked: Run returns this
	coroutines int      // created in this run
	args       [][]byte // the current command's arguments, slices of argBuf
	argEnds    []int    // where each argument ends in argBuf
	argBuf     []byte
	replyBuf   []byte // the Caller's reply, reused from call to call

	// Where the error the run ended with was raised, found by the error
	// handler while the stack is still there.
	errSource  string
	errLine    int
	errFound   bool
	chunkNames map[string]string // short names of chunks loadstring compiled → their names
}

// kill stops the script unless it has written; it reports whether the
// script is stopped (or ending anyway).
func (r *run) kill() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.written.Load() {
		return false
	}
	r.killed = true
	r.cancel()
	return true
}

// abort stops run gen because ctx, Run's context, was cancelled.
func (r *run) abort(ctx context.Context, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen != gen {
		return // that run has ended; the state runs another script now
	}
	r.aborted = ctx
	r.cancel()
}

// stoppedLocked reports whether the run was killed or aborted, so no further
// command may run.
func (r *run) stoppedLocked() bool { return r.killed || r.aborted != nil || r.rerun != nil }

// rerunRequested returns the Rerun the Caller stopped the run with, unless
// a kill or an abort came too (they win: the script is not to run again).
func (r *run) rerunRequested() *Rerun {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.killed || r.aborted != nil {
		return nil
	}
	return r.rerun
}
