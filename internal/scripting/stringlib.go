package scripting

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// extendLibraries replaces the library functions that differ from Lua 5.1 as
// Redis runs it, or that could build unbounded strings in one Go call, which
// no kill can interrupt; and adds the Lua 5.1 functions gopher-lua lacks.
func (st *state) extendLibraries(g *lua.LTable) {
	str := st.lib(g, "string")
	str.RawSetString("__index", lua.LNil) // gopher-lua's string table indexes itself; Redis's does not
	st.set(str, "rep", st.stringRep)
	st.set(str, "format", st.stringFormat)
	st.set(str, "find", st.stringFind)
	st.set(str, "match", st.stringMatch)
	st.set(str, "gmatch", st.stringGmatch)
	st.set(str, "gfind", st.stringGmatch)
	st.set(str, "gsub", st.stringGsub)
	tab := st.lib(g, "table")
	st.set(tab, "concat", st.tableConcat)
	st.set(tab, "foreach", tableForeach)
	st.set(tab, "foreachi", tableForeachi)
	st.set(tab, "setn", tableSetn)
	m := st.lib(g, "math")
	st.set(m, "random", st.mathRandom)
	st.set(m, "randomseed", st.mathRandomseed)
}

// maxString is the run's bound on a built string.
func (st *state) maxString() int { return st.e.opts.Limits.MaxStringBytes }

// checkLength raises if a string of n bytes would pass the bound.
func (st *state) checkLength(L *lua.LState, n int) {
	if n > st.maxString() || n < 0 {
		luaLError(L, "resulting string too large (more than %d bytes)", st.maxString())
	}
}

// stringRep is string.rep(s, n), bounded.
func (st *state) stringRep(L *lua.LState) int {
	s := checkString(L, 1, "rep")
	n := checkInt(L, 2, "rep")
	if n <= 0 || s == "" {
		L.Push(lua.LString(""))
		return 1
	}
	if n > st.maxString()/len(s) {
		st.checkLength(L, -1)
	}
	L.Push(lua.LString(strings.Repeat(s, n)))
	return 1
}

// tableConcat is table.concat(t [, sep [, i [, j]]]) with Lua 5.1's number
// formatting and errors, bounded.
func (st *state) tableConcat(L *lua.LState) int {
	t := L.CheckTable(1)
	sep := optString(L, 2, "concat", "")
	i := optInt(L, 3, "concat", 1)
	j := optInt(L, 4, "concat", t.Len())
	var b []byte
	for k := i; k <= j; k++ {
		s, ok := luaText(t.RawGetInt(k))
		if !ok {
			luaLError(L, "invalid value (at index %d) in table for 'concat'", k)
		}
		st.checkLength(L, len(b)+len(s)+len(sep))
		b = append(b, s...)
		if k < j {
			b = append(b, sep...)
		}
	}
	L.Push(lua.LString(b))
	return 1
}

// tableForeach is Lua 5.1's table.foreach(t, f): f(k, v) for each pair until
// f returns a value, which foreach returns.
func tableForeach(L *lua.LState) int {
	t := L.CheckTable(1)
	f := L.CheckFunction(2)
	for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
		L.Push(f)
		L.Push(k)
		L.Push(v)
		L.Call(2, 1)
		if r := L.Get(-1); r != lua.LNil {
			return 1
		}
		L.Pop(1)
	}
	return 0
}

// tableForeachi is Lua 5.1's table.foreachi(t, f): f(i, t[i]) for i = 1..#t.
func tableForeachi(L *lua.LState) int {
	t := L.CheckTable(1)
	f := L.CheckFunction(2)
	n := t.Len()
	for i := 1; i <= n; i++ {
		L.Push(f)
		L.Push(lua.LNumber(i))
		L.Push(t.RawGetInt(i))
		L.Call(2, 1)
		if r := L.Get(-1); r != lua.LNil {
			return 1
		}
		L.Pop(1)
	}
	return 0
}

// tableSetn is Lua 5.1's table.setn, obsolete there too.
func tableSetn(L *lua.LState) int {
	luaLError(L, "'setn' is obsolete")
	return 0
}

// rand48 is the generator behind Redis's math.random (rand.c): the 48-bit
// linear congruential generator of POSIX drand48, so that a script seeding
// it gets Redis's sequence. Redis keeps one generator for the server; each
// pooled state keeps its own, so the sequence without math.randomseed
// differs.
type rand48 struct{ x uint64 }

const (
	rand48Mul  = 0x5DEECE66D
	rand48Add  = 0xB
	rand48Mask = 1<<48 - 1
	rand48Max  = math.MaxInt32 // REDIS_LRAND48_MAX
)

func (r *rand48) seed0()          { r.x = 0x1234ABCD330E }
func (r *rand48) seed(seed int32) { r.x = uint64(uint32(seed))<<16 | 0x330E }
func (r *rand48) next() int32 {
	r.x = (r.x*rand48Mul + rand48Add) & rand48Mask
	return int32(r.x >> 17)
}

// mathRandom is Redis's math.random: Lua 5.1's over rand48.
func (st *state) mathRandom(L *lua.LState) int {
	f := float64(st.rng.next()%rand48Max) / rand48Max
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(f))
	case 1:
		u := checkInt(L, 1, "random")
		if u < 1 {
			argError(L, 1, "random", "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(f*float64(u)) + 1))
	case 2:
		l, u := checkInt(L, 1, "random"), checkInt(L, 2, "random")
		if l > u {
			argError(L, 2, "random", "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(f*float64(u-l+1)) + float64(l)))
	default:
		luaLError(L, "wrong number of arguments")
	}
	return 1
}

// mathRandomseed is math.randomseed(n).
func (st *state) mathRandomseed(L *lua.LState) int {
	st.rng.seed(int32(checkInt(L, 1, "randomseed")))
	return 0
}

// stringFormat is Lua 5.1's string.format, as C's sprintf would print each
// conversion: widths and precisions of at most two digits (so no conversion
// can build a long string), %q quoting as Lua's, numbers printed for the
// conversion asked (gopher-lua hands the format to Go's fmt, which differs).
func (st *state) stringFormat(L *lua.LState) int {
	format := checkString(L, 1, "format")
	var b []byte
	arg := 1
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		if i+1 < len(format) && format[i+1] == '%' {
			b = append(b, '%')
			i++
			continue
		}
		spec, next := readSpec(L, format, i+1)
		if arg++; arg > L.GetTop() {
			argError(L, arg, "format", "no value")
		}
		b = st.formatOne(L, b, spec, arg)
		st.checkLength(L, len(b))
		i = next
	}
	L.Push(lua.LString(b))
	return 1
}

// formatSpec is one parsed %-conversion.
type formatSpec struct {
	flags     string
	width     int // -1: none
	precision int // -1: none
	verb      byte
}

// readSpec parses the conversion after a '%' at format[i:], with Lua 5.1's
// checks, and returns it and the index of its verb.
func readSpec(L *lua.LState, format string, i int) (formatSpec, int) {
	spec := formatSpec{width: -1, precision: -1}
	start := i
	for i < len(format) && strings.IndexByte("-+ #0", format[i]) >= 0 {
		i++
	}
	if i-start > 5 {
		luaLError(L, "invalid format (repeated flags)")
	}
	spec.flags = format[start:i]
	digits := func() int {
		d := i
		for i < len(format) && format[i] >= '0' && format[i] <= '9' {
			i++
		}
		if i-d > 2 {
			luaLError(L, "invalid format (width or precision too long)")
		}
		if i == d {
			return -1
		}
		n, _ := strconv.Atoi(format[d:i])
		return n
	}
	spec.width = digits()
	if i < len(format) && format[i] == '.' {
		i++
		if spec.precision = digits(); spec.precision < 0 {
			spec.precision = 0
		}
	}
	if i >= len(format) {
		luaLError(L, "invalid option '%%' to 'format'")
	}
	spec.verb = format[i]
	return spec, i
}

// formatOne appends argument arg converted by spec.
func (st *state) formatOne(L *lua.LState, b []byte, spec formatSpec, arg int) []byte {
	switch spec.verb {
	case 'd', 'i':
		n := toInteger(checkNumber(L, arg, "format"))
		return fmt.Appendf(b, spec.goFormat('d'), n)
	case 'o', 'u', 'x', 'X':
		n := uint64(toInteger(checkNumber(L, arg, "format")))
		verb := spec.verb
		if verb == 'u' {
			verb = 'd'
		}
		return fmt.Appendf(b, spec.goFormat(rune(verb)), n)
	case 'c':
		return append(b, byte(toInteger(checkNumber(L, arg, "format"))))
	case 'e', 'E', 'f', 'g', 'G':
		f := checkNumber(L, arg, "format")
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return spec.pad(b, spec.signed(string(appendG(nil, f, 0)), f))
		}
		if spec.precision < 0 {
			spec.precision = 6 // C's default; Go's %g would print the shortest form
		}
		return fmt.Appendf(b, spec.goFormat(rune(spec.verb)), f)
	case 'q':
		return appendQuoted(b, checkString(L, arg, "format"))
	case 's':
		s := checkString(L, arg, "format")
		if spec.precision >= 0 && spec.precision < len(s) {
			s = s[:spec.precision]
		}
		return spec.pad(b, s)
	}
	luaLError(L, "invalid option '%%%c' to 'format'", spec.verb)
	return b
}

// goFormat is the spec as a Go format with verb, which Go reads as C does for
// the integer and floating-point verbs.
func (s formatSpec) goFormat(verb rune) string {
	f := "%" + s.flags
	if s.width >= 0 {
		f += strconv.Itoa(s.width)
	}
	if s.precision >= 0 {
		f += "." + strconv.Itoa(s.precision)
	}
	return f + string(verb)
}

// signed adds the sign flags C applies to an infinity or NaN's text.
func (s formatSpec) signed(text string, f float64) string {
	if !strings.HasPrefix(text, "-") {
		if strings.Contains(s.flags, "+") {
			return "+" + text
		}
		if strings.Contains(s.flags, " ") {
			return " " + text
		}
	}
	return text
}

// pad pads text with spaces to the width, on the right under the '-' flag,
// counting bytes as C does (Go's %s counts runes).
func (s formatSpec) pad(b []byte, text string) []byte {
	fill := s.width - len(text)
	left := strings.Contains(s.flags, "-")
	if !left {
		for ; fill > 0; fill-- {
			b = append(b, ' ')
		}
	}
	b = append(b, text...)
	for ; fill > 0; fill-- {
		b = append(b, ' ')
	}
	return b
}

// appendQuoted is Lua 5.1's %q: a double-quoted string whose quotes,
// backslashes and line breaks are escaped, "\r" as \r and NUL as \000.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', '\n':
			b = append(b, '\\', c)
		case '\r':
			b = append(b, `\r`...)
		case 0:
			b = append(b, `\000`...)
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
