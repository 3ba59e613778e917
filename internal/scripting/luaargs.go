package scripting

import (
	"fmt"
	"strconv"

	lua "github.com/yuin/gopher-lua"
)

// Argument checks for the library functions this package implements, with
// Lua 5.1's messages ("bad argument #2 to 'rep' (number expected, got no
// value)"); gopher-lua's own checks word them differently and do not quote
// the function's name. fname is the name the function is registered under.

func argError(L *lua.LState, n int, fname, msg string) {
	luaLError(L, "bad argument #%d to '%s' (%s)", n, fname, msg)
}

func typeError(L *lua.LState, n int, fname, want string) {
	got := "no value"
	if n <= L.GetTop() {
		got = L.Get(n).Type().String()
	}
	argError(L, n, fname, want+" expected, got "+got)
}

// checkNumber is luaL_checknumber: a number or a numeric string.
func checkNumber(L *lua.LState, n int, fname string) float64 {
	if n <= L.GetTop() {
		if f, ok := luaNumber(L.Get(n)); ok {
			return f
		}
	}
	typeError(L, n, fname, "number")
	return 0
}

// checkInt is luaL_checkint: a number truncated toward zero.
func checkInt(L *lua.LState, n int, fname string) int {
	return int(toInteger(checkNumber(L, n, fname)))
}

// optInt is luaL_optint: def when the argument is absent or nil.
func optInt(L *lua.LState, n int, fname string, def int) int {
	if n > L.GetTop() || L.Get(n) == lua.LNil {
		return def
	}
	return checkInt(L, n, fname)
}

// checkString is luaL_checklstring: a string, or a number as %.14g text.
func checkString(L *lua.LState, n int, fname string) string {
	if n <= L.GetTop() {
		if s, ok := luaText(L.Get(n)); ok {
			return s
		}
	}
	typeError(L, n, fname, "string")
	return ""
}

// optString is luaL_optlstring.
func optString(L *lua.LState, n int, fname, def string) string {
	if n > L.GetTop() || L.Get(n) == lua.LNil {
		return def
	}
	return checkString(L, n, fname)
}

// luaLError raises an error as luaL_error does: the message is prefixed with
// the position of the code that called the running library function, if that
// code is Lua (pcall(string.rep) gets no position). gopher-lua's RaiseError
// instead skips every Go frame up to the nearest Lua code.
func luaLError(L *lua.LState, format string, args ...any) {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	L.Error(lua.LString(where(L, 1)+msg), 0)
}

// where is luaL_where: "source:line: " for the Lua function level levels up
// the stack (0: the running function), or "".
func where(L *lua.LState, level int) string {
	dbg, ok := L.GetStack(level)
	if !ok {
		return ""
	}
	if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil || dbg.What == "G" || dbg.CurrentLine <= 0 {
		return ""
	}
	return dbg.Source + ":" + strconv.Itoa(dbg.CurrentLine) + ": "
}
