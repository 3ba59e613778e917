package scripting

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The sandbox gives scripts Redis 7.0's globals and nothing else
// (script_lua.c, luaLoadLibraries and the allow lists):
//
//   - base functions without dofile, loadfile, print, module, require,
//     getfenv, setfenv, newproxy; loadstring and load compile source only
//     (gopher-lua has no bytecode loader);
//   - the string, table, math, coroutine, bit and cjson libraries and the
//     redis table; no os, io, package or debug.
//
// Redis makes every table reachable from the globals read-only. gopher-lua
// has no read-only tables, so each one is shown through a view: an empty
// table whose metatable reads from the real one and raises "Attempt to
// modify a readonly table" on any write. rawset and setmetatable refuse
// views; rawget, next, pairs and ipairs look through them. Reading a global
// that does not exist raises "Script attempted to access nonexistent global
// variable". Because nothing reachable can change, a pooled state needs no
// cleaning between scripts.

// builtins are gopher-lua's functions that the sandbox wraps.
type builtins struct {
	tostring, tonumber, pcall, rawset, setmetatable, coroutineCreate, coroutineWrap lua.LGFunction
}

// removedGlobals are gopher-lua globals Redis does not have.
var removedGlobals = []string{"dofile", "loadfile", "print", "module", "require", "getfenv", "setfenv",
	"newproxy", "_printregs", "_GOPHER_LUA_VERSION"}

// openLibraries builds the environment and makes it read-only.
func (st *state) openLibraries() {
	L := st.L
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath}, {lua.CoroutineLibName, lua.OpenCoroutine}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	g := L.G.Global
	st.globals = g
	for _, name := range removedGlobals {
		g.RawSetString(name, lua.LNil)
	}
	st.wrapBase(g)
	st.extendLibraries(g)
	g.RawSetString("redis", st.redisLibrary())
	g.RawSetString("bit", st.bitLibrary())
	g.RawSetString("cjson", st.cjsonLibrary())
	st.protectGlobals(g)
}

// lib returns the global library table name.
func (st *state) lib(g *lua.LTable, name string) *lua.LTable {
	return g.RawGetString(name).(*lua.LTable)
}

// gfunc returns the Go function behind a library's name.
func gfunc(t *lua.LTable, name string) lua.LGFunction {
	return t.RawGetString(name).(*lua.LFunction).GFunction
}

// set registers fn as name in t.
func (st *state) set(t *lua.LTable, name string, fn lua.LGFunction) {
	t.RawSetString(name, st.L.NewFunction(fn))
}

// wrapBase replaces the base functions whose behaviour differs from Redis's
// or that could reach past the sandbox.
func (st *state) wrapBase(g *lua.LTable) {
	co := st.lib(g, "coroutine")
	st.orig = builtins{
		tostring: gfunc(g, "tostring"), tonumber: gfunc(g, "tonumber"), pcall: gfunc(g, "pcall"),
		rawset: gfunc(g, "rawset"), setmetatable: gfunc(g, "setmetatable"),
		coroutineCreate: gfunc(co, "create"), coroutineWrap: gfunc(co, "wrap"),
	}
	for _, name := range []string{"pairs", "ipairs", "next", "rawget"} {
		st.set(g, name, st.throughView(g.RawGetString(name).(*lua.LFunction)))
	}
	st.set(g, "tostring", st.tostring)
	st.set(g, "tonumber", st.tonumber)
	st.set(g, "error", luaError)
	st.set(g, "pcall", st.pcall)
	st.set(g, "rawset", st.rawset)
	st.set(g, "setmetatable", st.setmetatable)
	st.set(g, "collectgarbage", zero)
	st.set(g, "gcinfo", zero)
	st.set(g, "loadstring", st.loadstring)
	st.set(g, "load", st.load)
	st.set(co, "create", st.countCoroutine(st.orig.coroutineCreate))
	st.set(co, "wrap", st.countCoroutine(st.orig.coroutineWrap))
}

// protectGlobals puts every library behind a read-only view and makes _G
// itself one; the string metatable is protected the same way.
func (st *state) protectGlobals(g *lua.LTable) {
	L := st.L
	readOnly := L.NewFunction(readOnlyError)
	stringLib := st.lib(g, "string")
	for _, name := range []string{"string", "table", "math", "coroutine", "redis", "bit", "cjson"} {
		g.RawSetString(name, st.view(st.lib(g, name), readOnly, lua.LFalse))
	}
	// Strings index the real library; getmetatable("") shows a read-only
	// metatable whose __index is the library's view.
	shown := L.CreateTable(0, 1)
	shown.RawSetString("__index", g.RawGetString("string"))
	stringMeta := L.CreateTable(0, 2)
	stringMeta.RawSetString("__index", stringLib)
	stringMeta.RawSetString("__metatable", st.view(shown, readOnly, lua.LFalse))
	L.SetMetatable(lua.LString(""), stringMeta)

	missing := L.CreateTable(0, 1)
	missing.RawSetString("__index", L.NewFunction(missingGlobal))
	g.Metatable = missing
	gMeta := L.CreateTable(0, 2)
	gMeta.RawSetString("__index", missing.RawGetString("__index"))
	gMeta.RawSetString("__newindex", readOnly)
	globalsView := st.view(g, readOnly, st.view(gMeta, readOnly, lua.LFalse))
	g.RawSetString("_G", globalsView)
	L.Env = globalsView
}

// view returns a read-only view of t; getmetatable of the view returns
// shownMeta.
func (st *state) view(t *lua.LTable, readOnly lua.LValue, shownMeta lua.LValue) *lua.LTable {
	v := st.L.CreateTable(0, 0)
	mt := st.L.CreateTable(0, 3)
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", readOnly)
	mt.RawSetString("__metatable", shownMeta)
	v.Metatable = mt
	st.views[v] = t
	return v
}

// protected reports whether t is a read-only view or a table behind one.
func (st *state) protected(t *lua.LTable) bool {
	if _, ok := st.views[t]; ok {
		return true
	}
	return t == st.globals
}

// readOnlyError is every view's __newindex.
func readOnlyError(L *lua.LState) int {
	luaLError(L, msgReadOnly)
	return 0
}

// missingGlobal is the globals' __index.
func missingGlobal(L *lua.LState) int {
	luaLError(L, "Script attempted to access nonexistent global variable '%s'", tostringPlain(L.Get(2)))
	return 0
}

// tostringPlain converts a string or number to text without metamethods.
func tostringPlain(v lua.LValue) string {
	if n, ok := v.(lua.LNumber); ok {
		return number14(float64(n))
	}
	return v.String()
}

// throughView wraps a function whose first argument is a table so that a
// read-only view is replaced by the table it shows.
func (st *state) throughView(fn *lua.LFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		if t, ok := L.Get(1).(*lua.LTable); ok {
			if real, ok := st.views[t]; ok {
				L.Replace(1, real)
			}
		}
		L.Insert(fn, 1)
		L.Call(L.GetTop()-1, lua.MultRet)
		return L.GetTop()
	}
}

// rawset refuses protected tables, with Redis's unpositioned message.
func (st *state) rawset(L *lua.LState) int {
	if t, ok := L.Get(1).(*lua.LTable); ok && st.protected(t) {
		L.Error(lua.LString(msgReadOnly), 0)
	}
	return st.orig.rawset(L)
}

// setmetatable refuses protected tables and, as Lua 5.1, anything but a
// table: gopher-lua would set the shared metatable of all numbers or
// booleans, which would outlive the script.
func (st *state) setmetatable(L *lua.LState) int {
	t := L.CheckTable(1)
	if st.protected(t) {
		L.Error(lua.LString(msgReadOnly), 0)
	}
	return st.orig.setmetatable(L)
}

// tostring formats numbers as Lua 5.1 does (%.14g); gopher-lua uses Go's
// formatting (1e15 → "1000000000000000", 1/0 → "+Inf").
func (st *state) tostring(L *lua.LState) int {
	if n, ok := L.CheckAny(1).(lua.LNumber); ok {
		L.Push(lua.LString(number14(float64(n))))
		return 1
	}
	return st.orig.tostring(L)
}

// tonumber reads decimal text as C's strtod does, as Lua 5.1 does ("inf",
// "nan" and hexadecimal included); other bases are gopher-lua's.
func (st *state) tonumber(L *lua.LState) int {
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		return st.orig.tonumber(L)
	}
	switch v := L.CheckAny(1).(type) {
	case lua.LNumber:
		L.Push(v)
	case lua.LString:
		if f, ok := parseLuaNumber(string(v)); ok {
			L.Push(lua.LNumber(f))
		} else {
			L.Push(lua.LNil)
		}
	default:
		L.Push(lua.LNil)
	}
	return 1
}

// luaError is Lua 5.1's error(message [, level]): a string or number
// message gets the position of the function level levels up the stack (1:
// the caller of error), if that is Lua code, as luaL_where gives it; a
// number is converted to text.
func luaError(L *lua.LState) int {
	obj := L.CheckAny(1)
	level := L.OptInt(2, 1)
	text, isText := luaText(obj)
	if !isText {
		L.Error(obj, 0)
	}
	if level > 0 {
		text = where(L, level) + text
	}
	L.Error(lua.LString(text), 0)
	return 0
}

// pcall is Redis's: an error table caught (from redis.call) is returned as
// its err text, as scripts written before Redis 7 expect.
func (st *state) pcall(L *lua.LState) int {
	n := st.orig.pcall(L)
	top := L.GetTop()
	if n >= 2 && L.Get(top-n+1) == lua.LFalse {
		if t, ok := L.Get(top - n + 2).(*lua.LTable); ok {
			switch e := t.RawGetString("err").(type) {
			case lua.LString, lua.LNumber:
				L.Replace(top-n+2, e)
			}
		}
	}
	return n
}

// zero is collectgarbage and gcinfo: gopher-lua's collectgarbage runs a full
// Go garbage collection, which a script could repeat in a loop to stall the
// whole server; the Go heap has no per-script count to report.
func zero(L *lua.LState) int {
	L.Push(lua.LNumber(0))
	return 1
}

// countCoroutine wraps coroutine.create or wrap to bound how many coroutines
// one run creates: each has a stack of its own.
func (st *state) countCoroutine(fn lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		if st.run.coroutines++; st.run.coroutines > st.e.opts.Limits.MaxCoroutines {
			luaLError(L, "too many coroutines (more than %d in one script)", st.e.opts.Limits.MaxCoroutines)
		}
		return fn(L)
	}
}

// maxChunkNames bounds how many chunk names one run remembers for error
// locations; later chunks report their short name.
const maxChunkNames = 1000

// maxLoadBytes bounds the source loadstring and load compile, as the cache's
// MaxScriptBytes bounds scripts.
const maxLoadBytes = 1 << 20

// loadstring compiles source within the sandbox: the chunk sees the same
// read-only globals. It returns nil and a message on failure.
func (st *state) loadstring(L *lua.LState) int {
	src := L.CheckString(1)
	return st.loadChunk(L, src, L.OptString(2, src))
}

// load is loadstring over the pieces a function returns.
func (st *state) load(L *lua.LState) int {
	fn := L.CheckFunction(1)
	name := L.OptString(2, "=(load)")
	var src []byte
	for {
		L.Push(fn)
		L.Call(0, 1)
		piece := L.Get(-1)
		L.Pop(1)
		s, ok := piece.(lua.LString)
		if !ok || s == "" {
			if piece != lua.LNil && !ok {
				L.Push(lua.LNil)
				L.Push(lua.LString("reader function must return a string"))
				return 2
			}
			break
		}
		if len(src)+len(s) > maxLoadBytes {
			L.Push(lua.LNil)
			L.Push(lua.LString(fmt.Sprintf("chunk longer than %d bytes", maxLoadBytes)))
			return 2
		}
		src = append(src, s...)
	}
	return st.loadChunk(L, string(src), name)
}

// loadChunk compiles src named chunkname. gopher-lua uses one name where Lua
// has two: the chunk name, which Redis's error handler reports, and its
// short form in messages ("[string \"...\"]", or the name after a leading
// '=' or '@'). The chunk is compiled under the short form; the run keeps
// the full name to report.
func (st *state) loadChunk(L *lua.LState, src, chunkname string) int {
	name := shortSource(chunkname)
	if len(st.run.chunkNames) < maxChunkNames {
		st.run.chunkNames[name] = chunkname
	}
	if len(src) > maxLoadBytes {
		L.Push(lua.LNil)
		L.Push(lua.LString(fmt.Sprintf("chunk longer than %d bytes", maxLoadBytes)))
		return 2
	}
	proto, _, msg := compileChunk(src, name)
	if msg != "" {
		L.Push(lua.LNil)
		L.Push(lua.LString(msg))
		return 2
	}
	L.Push(L.NewFunctionFromProto(proto))
	return 1
}

// shortSource is Lua 5.1's short form of a chunk name (luaO_chunkid): the
// name after a leading '=' or '@', or [string "first line"].
func shortSource(chunkname string) string {
	if strings.HasPrefix(chunkname, "=") || strings.HasPrefix(chunkname, "@") {
		return chunkname[1:]
	}
	line := chunkname
	for i := 0; i < len(line); i++ {
		if line[i] == '\n' || line[i] == '\r' {
			line = line[:i] + "..."
			break
		}
	}
	if len(line) > 45 {
		line = line[:42] + "..."
	}
	return `[string "` + line + `"]`
}
