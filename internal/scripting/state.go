package scripting

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// state is one pooled Lua state with Redis's environment. One goroutine uses
// it at a time: the one that took it from the pool. Nothing a script does
// outlives its run: every table reachable from the globals is read-only (see
// sandbox.go) but KEYS and ARGV, which reset empties (or drops, if the script
// changed them beyond their values), and the per-run parts (KEYS, ARGV,
// redis.setresp) are set afresh by begin and execute.
type state struct {
	e      *Engine
	L      *lua.LState
	ctx    context.Context // the VM checks it at every instruction; cancelled by a kill
	cancel context.CancelFunc

	globals *lua.LTable                 // the table behind _G's read-only view
	views   map[*lua.LTable]*lua.LTable // read-only view → the table it shows
	handler *lua.LFunction              // the error handler of every run
	orig    builtins                    // gopher-lua functions the sandbox wraps
	rng     rand48                      // math.random
	broken  bool                        // gopher-lua left the state inconsistent: drop it

	// Reused from run to run while scripts leave them as given: the KEYS
	// and ARGV tables (see argTable), and the function of the last script
	// run.
	keys, argv argTable
	lastProto  *lua.FunctionProto
	lastFn     *lua.LFunction
	statuses   statusTables // redis.call's {ok=...} tables

	run run
}

// newState builds a state with Redis's Lua environment.
func newState(e *Engine) *state {
	lim := e.opts.Limits
	initial := min(1024, lim.StackSlots)
	L := lua.NewState(lua.Options{
		SkipOpenLibs:        true,
		CallStackSize:       lim.CallDepth,
		MinimizeStackMemory: true, // coroutines and shallow scripts need few frames
		RegistrySize:        initial,
		RegistryMaxSize:     lim.StackSlots,
		RegistryGrowStep:    initial,
	})
	st := &state{e: e, L: L, views: make(map[*lua.LTable]*lua.LTable)}
	st.run.chunkNames = make(map[string]string)
	st.rng.seed0()
	st.newContext()
	st.openLibraries()
	st.handler = L.NewFunction(st.handleError)
	return st
}

// newContext gives the VM a fresh, uncancelled context.
func (st *state) newContext() {
	st.ctx, st.cancel = context.WithCancel(context.Background())
	st.L.SetContext(st.ctx)
}

// begin readies the state to run script and returns the run's generation.
func (st *state) begin(script *Script, call Caller, readOnly bool, now time.Time) uint64 {
	r := &st.run
	r.script, r.call, r.readOnly, r.start, r.resp = script, call, readOnly, now, 2
	r.written.Store(false)
	r.reportedBusy = false
	r.coroutines = 0
	r.errFound = false
	r.panicked = nil
	clear(r.chunkNames)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	// A kill, or the abort of an earlier run that fired late, may have
	// cancelled the context; from here on an abort of an earlier
	// generation is ignored, so a fresh context stays fresh.
	if st.ctx.Err() != nil {
		st.newContext()
	}
	r.killed, r.aborted, r.rerun, r.cancel = false, nil, nil, st.cancel
	return r.gen
}

// reset drops what the run left behind before the state is pooled.
func (st *state) reset() {
	r := &st.run
	if r.coroutines > 0 {
		// Each coroutine registered a child of the state's context; a
		// suspended one would stay registered forever. Cancelling drops
		// them all; begin makes a new context.
		st.cancel()
	}
	r.script, r.call = nil, nil
	st.keys.recycle(st.globals, "KEYS")
	st.argv.recycle(st.globals, "ARGV")
	st.statuses.reclaim()
	const keep = 64 << 10 // buffers larger than this are not kept while idle
	if cap(r.argBuf) > keep {
		r.argBuf = nil
	}
	if cap(r.replyBuf) > keep {
		r.replyBuf = nil
	}
	if cap(r.args) > 1024 {
		r.args, r.argEnds = nil, nil
	}
	clear(r.args[:cap(r.args)])
	st.L.SetTop(0)
}

// execute runs the script begin readied and appends its reply to dst.
func (st *state) execute(keys, argv [][]byte, proto int, dst []byte) ([]byte, error) {
	L, r := st.L, &st.run
	st.fill(&st.keys, "KEYS", keys)
	st.fill(&st.argv, "ARGV", argv)
	if st.lastProto != r.script.proto {
		// The main chunk has no upvalues and its environment is fixed, so
		// one function value serves every run of the same script.
		st.lastProto, st.lastFn = r.script.proto, L.NewFunctionFromProto(r.script.proto)
	}
	L.Push(st.lastFn)
	err := st.pcall0()
	if r.panicked != nil {
		return dst, r.panicked
	}
	if rerun := r.rerunRequested(); rerun != nil {
		// Whatever the script did after the Caller's request (caught
		// the error and returned): it stopped there.
		return dst, rerun
	}
	if st.broken {
		return dst, st.brokenError(err)
	}
	if err != nil {
		return dst, st.runError(err)
	}
	v := L.Get(-1)
	L.Pop(1)
	w := replyWriter{proto: proto, scriptResp: r.resp, maxDepth: replyMaxDepth,
		limit: st.e.opts.Limits.MaxReplyBytes, start: len(dst)}
	out, err := w.write(dst, v, 0)
	if err != nil {
		return dst, replyTooLarge(w.limit)
	}
	return out, nil
}

// pcall0 calls the function on the stack with the error handler. gopher-lua
// lets a panic escape PCall when the stack is full as the error is raised
// (the handler cannot be pushed: unpack({}, 1, 1e7) did it); such a state is
// left inconsistent, so it is marked broken, to be dropped, not pooled.
func (st *state) pcall0() (err error) {
	defer func() {
		if p := recover(); p != nil {
			st.broken = true
			if apiErr, ok := p.(*lua.ApiError); ok {
				err = apiErr
			} else {
				err = fmt.Errorf("scripting: gopher-lua panicked: %v", p)
			}
		}
	}()
	return st.L.PCall(0, 1, st.handler)
}

// brokenError is the error of a run whose state broke: a Lua error keeps its
// text (the handler did not run, so it has no location).
func (st *state) brokenError(err error) error {
	var apiErr *lua.ApiError
	if errors.As(err, &apiErr) {
		return &Error{replyLine(raisedText(apiErr.Object))}
	}
	return err
}

// argTable is the KEYS or ARGV table of a state, kept from run to run: the
// global names it between runs too (emptied), so a run sets neither the
// global nor, when they repeat, the strings. The script can write the table
// but not the global (the globals are read-only), and recycle keeps the
// table only if the script left nothing in it beyond the values it was
// given, which it clears: the next run sees only what fill puts in.
type argTable struct {
	t *lua.LTable // set as the global; nil: the next fill makes one
	n int         // how many items the last fill put in t
	// vals are the Lua strings of the last fill's first items, reused by
	// the next one wherever its item has the same bytes: converting bytes
	// to a Lua string allocates twice (the bytes, the interface value), and
	// a limiter's ARGV (its limit, its window) is the same on every call.
	vals []lua.LValue // each an LString
}

// Bounds on what argTable.vals keeps: the first maxKeptArgs items, each of
// at most maxKeptArgBytes bytes, so an idle state holds at most 1 KiB of
// them.
const (
	maxKeptArgs     = 16
	maxKeptArgBytes = 64
)

// fill puts items in a's table, making one (and setting it as the global
// name) where recycle kept none.
func (st *state) fill(a *argTable, name string, items [][]byte) {
	if a.t == nil {
		a.t = st.L.CreateTable(len(items), 0)
		st.globals.RawSetString(name, a.t)
	}
	for i, b := range items {
		switch {
		case i > len(a.vals) || i >= maxKeptArgs || len(b) > maxKeptArgBytes:
			// Not kept: past the bounds, or after an item that was not
			// (vals holds the leading items only).
			a.t.RawSetInt(i+1, lua.LString(b))
			continue
		case i == len(a.vals):
			a.vals = append(a.vals, lua.LString(b))
		case string(a.vals[i].(lua.LString)) != string(b):
			a.vals[i] = lua.LString(b)
		}
		a.t.RawSetInt(i+1, a.vals[i])
	}
	a.n = len(items)
}

// smallInts are the numbers 0..255 as LValues, converted once: converting a
// number to an LValue allocates.
var smallInts = func() (v [256]lua.LValue) {
	for i := range v {
		v[i] = lua.LNumber(i)
	}
	return v
}()

// recycle empties a's table, the global name in globals, for the next run;
// or, if the script changed it beyond its values (added a key, removed one,
// set a metatable), removes it, so that the next run makes a new one and an
// idle state holds nothing the script built.
func (a *argTable) recycle(globals *lua.LTable, name string) {
	t, n := a.t, a.n
	if t == nil {
		return
	}
	after := lua.LNil
	if n > 0 && n < len(smallInts) {
		after = smallInts[n]
	}
	if k, _ := t.Next(after); n >= len(smallInts) || t.Metatable != lua.LNil || t.Len() != n || k != lua.LNil {
		a.t = nil
		globals.RawSetString(name, lua.LNil)
		return
	}
	for i := 1; i <= n; i++ {
		t.RawSetInt(i, lua.LNil)
	}
}

// handleError is the error handler of every run, called with the error
// while the stack that raised it is still there. Like Redis's, it notes
// where the error was raised: the function that raised it or, if that is a
// Go function (redis.call, error), its caller.
func (st *state) handleError(L *lua.LState) int {
	r := &st.run
	dbg, ok := st.frameInfo(1)
	if ok && dbg.What == "G" {
		dbg, ok = st.frameInfo(2)
	}
	if r.errFound = ok; ok {
		switch full, loaded := r.chunkNames[dbg.Source]; {
		case dbg.What == "G" || dbg.Source == "":
			r.errSource, r.errLine = "=[C]", -1
		case loaded:
			r.errSource, r.errLine = full, dbg.CurrentLine
		default: // the script itself, named "@user_script" as Redis names it
			r.errSource, r.errLine = "@"+dbg.Source, dbg.CurrentLine
		}
	}
	L.Push(L.Get(1))
	return 1
}

// frameInfo describes the function level frames below the running one.
func (st *state) frameInfo(level int) (*lua.Debug, bool) {
	dbg, ok := st.L.GetStack(level)
	if !ok {
		return nil, false
	}
	if _, err := st.L.GetInfo("Sl", dbg, lua.LNil); err != nil {
		return nil, false
	}
	return dbg, true
}

// runError turns what a failed run raised into the error Run returns.
func (st *state) runError(err error) error {
	r := &st.run
	r.mu.Lock()
	killed, aborted := r.killed, r.aborted
	r.mu.Unlock()
	if aborted != nil {
		return fmt.Errorf("scripting: script stopped: %w", context.Cause(aborted))
	}
	var text string
	if killed {
		text = msgKilled
	} else {
		var apiErr *lua.ApiError
		if !errors.As(err, &apiErr) {
			return fmt.Errorf("scripting: %w", err)
		}
		text = raisedText(apiErr.Object)
	}
	if r.errFound {
		text += " script: " + r.script.hexSHA + ", on " + r.errSource + ":" + strconv.Itoa(r.errLine) + "."
	}
	return &Error{replyLine(text)}
}

// raisedText is the reply text of a raised value, as Redis's error handler
// makes it: an error table gives its err field; anything else is prefixed
// with "ERR ".
func raisedText(v lua.LValue) string {
	switch v := v.(type) {
	case *lua.LTable:
		switch e := v.RawGetString("err").(type) {
		case lua.LString:
			return string(e)
		case lua.LNumber:
			return number14(float64(e))
		}
		// Redis 7.0.15 crashes on an error table without an err string.
		return "ERR unknown error"
	case lua.LString:
		return "ERR " + string(v)
	case lua.LNumber:
		return "ERR " + number14(float64(v))
	case nil:
		return "ERR nil"
	}
	return "ERR " + v.String()
}
