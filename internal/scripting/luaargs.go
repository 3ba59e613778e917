package scripting

import lua "github.com/yuin/gopher-lua"

// Argument checks for the library functions this package implements, with
// Lua 5.1's messages ("bad argument #2 to 'rep' (number expected, got no
// value)"); gopher-lua's own checks word them differently and do not quote
// the function's name. fname is the name the function is registered under.

func argError(L *lua.LState, n int, fname, msg string) {
	L.RaiseError("bad argument #%d to '%s' (%s)", n, fname, msg)
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
