package scripting

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Redis's version as scripts see it (redis.REDIS_VERSION): the version whose
// scripting rlserver reproduces.
const (
	redisVersion    = "7.0.15"
	redisVersionNum = 0x07000f
)

// logLevels maps redis.LOG_* (Redis's LL_DEBUG..LL_WARNING) to slog levels.
var logLevels = [...]slog.Level{slog.LevelDebug, slog.LevelDebug + 2, slog.LevelInfo, slog.LevelWarn}

// redisLibrary builds the redis table.
func (st *state) redisLibrary() *lua.LTable {
	t := st.L.CreateTable(0, 32)
	for name, fn := range map[string]lua.LGFunction{
		"call": st.redisCall, "pcall": st.redisPCall,
		"error_reply": errorReply, "status_reply": statusReply,
		"sha1hex": sha1hex, "log": st.redisLog, "setresp": st.setResp,
		"set_repl": setRepl, "replicate_commands": replicateCommands,
		"breakpoint": breakpoint, "debug": nothing,
	} {
		st.set(t, name, fn)
	}
	for name, n := range map[string]int{
		"LOG_DEBUG": 0, "LOG_VERBOSE": 1, "LOG_NOTICE": 2, "LOG_WARNING": 3,
		"REPL_NONE": 0, "REPL_AOF": 1, "REPL_SLAVE": 2, "REPL_REPLICA": 2, "REPL_ALL": 3,
		"REDIS_VERSION_NUM": redisVersionNum,
	} {
		t.RawSetString(name, lua.LNumber(n))
	}
	t.RawSetString("REDIS_VERSION", lua.LString(redisVersion))
	return t
}

// errTable is the error table Redis builds for text: {err="CODE msg"}.
func errTable(L *lua.LState, text string) *lua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString("err", lua.LString(errorTableText(text)))
	return t
}

// raise raises text as an error table, without a position: Redis's
// luaPushError followed by lua_error.
func raise(L *lua.LState, text string) {
	L.Error(errTable(L, text), 0)
}

func (st *state) redisCall(L *lua.LState) int  { return st.command(L, true) }
func (st *state) redisPCall(L *lua.LState) int { return st.command(L, false) }

// command is redis.call (raise) and redis.pcall: it runs one command through
// the run's Caller and converts the reply. A failure raises, under call, or
// is returned as an error table, under pcall.
func (st *state) command(L *lua.LState, raiseErrors bool) int {
	r := &st.run
	fail := func(text string) int {
		t := errTable(L, text)
		if raiseErrors {
			L.Error(t, 0)
		}
		L.Push(t)
		return 1
	}
	if L.GetTop() == 0 {
		return fail(msgNoArgs)
	}
	if !r.collectArgs(L) {
		L.SetTop(0)
		return fail(msgBadArgType)
	}
	L.SetTop(0)
	out, err := r.invoke()
	switch err {
	case errStopped:
		L.RaiseError("%s", context.Canceled) // the VM would stop at the next instruction anyway
	case errCallerPanicked:
		L.RaiseError("%s", err) // Run reports the panic whatever the script does with this
	}
	if err != nil {
		return fail(err.Error())
	}
	v, isError, err := parseReply(L, out, &st.statuses)
	r.replyBuf = out[:0]
	if err != nil {
		return fail(err.Error())
	}
	if isError && raiseErrors {
		L.Error(v, 0)
	}
	L.Push(v)
	return 1
}

var (
	// errStopped fails a call made after the run was killed, aborted or
	// stopped to be rerun.
	errStopped = errors.New("script stopped")
	// errCallerPanicked fails a call whose Caller panicked.
	errCallerPanicked = errors.New("the command panicked")
)

// invoke runs the collected command through the Caller, under the run's
// lock so that a kill cannot slip between the command and its write flag. A
// panic of the Caller is a bug of the server, not of the script: it is
// recorded for Run to return as an internal error, and the lock released.
func (r *run) invoke() (out []byte, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stoppedLocked() {
		return nil, errStopped
	}
	defer func() {
		if p := recover(); p != nil {
			r.panicked = fmt.Errorf("scripting: the Caller panicked running %q: %v\n%s", r.args[0], p, debug.Stack())
			out, err = nil, errCallerPanicked
		}
	}()
	out, write, err := r.call(r.args, r.resp, r.readOnly, r.replyBuf[:0])
	if write {
		r.written.Store(true)
	}
	if rerun, ok := err.(*Rerun); ok {
		if r.written.Load() {
			return out, rerun.Err // its writes cannot be undone: no rerun
		}
		r.rerun = rerun
		r.cancel() // the VM stops at its next instruction, even under pcall
		return nil, errStopped
	}
	return out, err
}

// collectArgs copies the call's arguments into the run's buffers: strings as
// they are, numbers as %.17g, as Redis does (Lua's own %.14g would lose
// precision). It reports false for any other type.
func (r *run) collectArgs(L *lua.LState) bool {
	r.argBuf, r.argEnds, r.args = r.argBuf[:0], r.argEnds[:0], r.args[:0]
	n := L.GetTop()
	for i := 1; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			r.argBuf = append(r.argBuf, v...)
		case lua.LNumber:
			r.argBuf = appendNumber17(r.argBuf, float64(v))
		default:
			return false
		}
		r.argEnds = append(r.argEnds, len(r.argBuf))
	}
	start := 0
	for _, end := range r.argEnds {
		r.args = append(r.args, r.argBuf[start:end:end])
		start = end
	}
	return true
}

// singleString returns the only argument if it is a string, as
// redis.error_reply and status_reply require (a number is refused).
func singleString(L *lua.LState) (string, bool) {
	if L.GetTop() != 1 {
		return "", false
	}
	s, ok := L.Get(1).(lua.LString)
	return string(s), ok
}

// errorReply is redis.error_reply: {err=text}, the code ERR added when text
// names none ("-" starts an explicit one).
func errorReply(L *lua.LState) int {
	s, ok := singleString(L)
	if !ok {
		L.Push(errTable(L, msgWrongArgType))
		return 1
	}
	if !strings.HasPrefix(s, "-") {
		s = "-" + s
	}
	L.Push(errTable(L, s))
	return 1
}

// statusReply is redis.status_reply: {ok=text}.
func statusReply(L *lua.LState) int {
	s, ok := singleString(L)
	if !ok {
		L.Push(errTable(L, msgWrongArgType))
		return 1
	}
	t := L.CreateTable(0, 1)
	t.RawSetString("ok", lua.LString(s))
	L.Push(t)
	return 1
}

// luaText converts a string or number as lua_tolstring does; ok is false for
// other types.
func luaText(v lua.LValue) (string, bool) {
	switch v := v.(type) {
	case lua.LString:
		return string(v), true
	case lua.LNumber:
		return number14(float64(v)), true
	}
	return "", false
}

// luaNumber converts a number or numeric string as lua_tonumber does: 0 for
// anything else.
func luaNumber(v lua.LValue) (float64, bool) {
	switch v := v.(type) {
	case lua.LNumber:
		return float64(v), true
	case lua.LString:
		return parseLuaNumber(string(v))
	}
	return 0, false
}

// sha1hex is redis.sha1hex: the hex SHA1 of a string (of "" for a value that
// is neither string nor number, as Redis).
func sha1hex(L *lua.LState) int {
	if L.GetTop() != 1 {
		raise(L, msgWrongArgs)
	}
	s, _ := luaText(L.Get(1))
	sum := sha1.Sum([]byte(s))
	L.Push(lua.LString(hex.EncodeToString(sum[:])))
	return 1
}

// redisLog is redis.log(level, ...): the arguments that are strings or
// numbers, joined by spaces as Redis joins them, logged at level.
func (st *state) redisLog(L *lua.LState) int {
	n := L.GetTop()
	if n < 2 {
		raise(L, "redis.log() requires two arguments or more.")
	}
	f, ok := luaNumber(L.Get(1))
	if !ok {
		raise(L, "First argument must be a number (log level).")
	}
	level := int(f)
	if level < 0 || level >= len(logLevels) {
		raise(L, "Invalid debug level.")
	}
	if !st.e.log.Enabled(context.Background(), logLevels[level]) {
		return 0
	}
	var msg strings.Builder
	for j := 1; j < n; j++ {
		if s, ok := luaText(L.Get(j + 1)); ok {
			if j != 1 {
				msg.WriteByte(' ')
			}
			msg.WriteString(s)
		}
	}
	st.e.log.Log(context.Background(), logLevels[level], msg.String(), "script", st.run.script.hexSHA)
	return 0
}

// setResp is redis.setresp: the protocol of the replies redis.call converts,
// and whether booleans return as RESP3 booleans.
func (st *state) setResp(L *lua.LState) int {
	if L.GetTop() != 1 {
		raise(L, "redis.setresp() requires one argument.")
	}
	f, _ := luaNumber(L.Get(1))
	if resp := int(f); resp == 2 || resp == 3 {
		st.run.resp = resp
		return 0
	}
	raise(L, "RESP version must be 2 or 3.")
	return 0
}

// setRepl is redis.set_repl: checked as Redis checks it, then ignored, since
// rlserver has no replication.
func setRepl(L *lua.LState) int {
	if L.GetTop() != 1 {
		raise(L, "redis.set_repl() requires two arguments.")
	}
	f, _ := luaNumber(L.Get(1))
	if int(f)&^3 != 0 {
		raise(L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
	}
	return 0
}

// replicateCommands is redis.replicate_commands: always true since Redis 7.
func replicateCommands(L *lua.LState) int {
	L.Push(lua.LTrue)
	return 1
}

// breakpoint is redis.breakpoint: false, there being no debugger session.
func breakpoint(L *lua.LState) int {
	L.Push(lua.LFalse)
	return 1
}

// nothing is redis.debug outside a debugger session: it does nothing.
func nothing(*lua.LState) int { return 0 }
