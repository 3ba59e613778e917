package scripting

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Lua 5.1 patterns (string.find, match, gmatch, gsub), written for this
// package because gopher-lua's cannot be interrupted: a script killed inside
// one of its matches runs on, and its gsub copies the whole subject for each
// match (a gsub over 20 000 bytes took seconds). This matcher follows the
// Lua 5.1 reference manual (§5.4.1) and lstrlib.c's observable behaviour:
// backtracking, as Lua's, but it checks every matchCheckSteps steps whether
// the run was killed, bounds its recursion like Lua 5.2 ("pattern too
// complex"), and builds gsub's result once, bounded by MaxStringBytes.

const (
	maxCaptures     = 32   // LUA_MAXCAPTURES
	maxMatchDepth   = 200  // Lua 5.2's MAXCCALLS for the matcher
	matchCheckSteps = 4096 // steps between checks for a kill
	capUnfinished   = -1
	capPosition     = -2
	patternSpecials = "^$*+?.([%-"
)

// matcher matches one pattern against one subject.
type matcher struct {
	L        *lua.LState
	st       *state
	src, pat string
	level    int // captures open or closed so far
	capture  [maxCaptures]struct{ start, len int }
	depth    int
	steps    int
}

func (m *matcher) step() {
	if m.steps++; m.steps%matchCheckSteps == 0 {
		select {
		case <-m.st.ctx.Done():
			luaLError(m.L, "%s", m.st.ctx.Err())
		default:
		}
	}
}

// match returns the end of a match of pat[p:] at src[s:], or -1.
func (m *matcher) match(s, p int) int {
	if m.depth++; m.depth > maxMatchDepth {
		luaLError(m.L, "pattern too complex")
	}
	defer func() { m.depth-- }()
	for {
		m.step()
		if p == len(m.pat) {
			return s
		}
		switch m.pat[p] {
		case '(':
			if p+1 < len(m.pat) && m.pat[p+1] == ')' {
				return m.startCapture(s, p+2, capPosition)
			}
			return m.startCapture(s, p+1, capUnfinished)
		case ')':
			return m.endCapture(s, p+1)
		case '$':
			if p+1 == len(m.pat) {
				if s == len(m.src) {
					return s
				}
				return -1
			}
		case '%':
			if p+1 < len(m.pat) {
				switch c := m.pat[p+1]; {
				case c == 'b':
					if s = m.matchBalance(s, p+2); s < 0 {
						return -1
					}
					p += 4
					continue
				case c == 'f':
					var ok bool
					if p, ok = m.frontier(s, p+2); !ok {
						return -1
					}
					continue
				case c >= '0' && c <= '9':
					if s = m.matchCapture(s, c); s < 0 {
						return -1
					}
					p += 2
					continue
				}
			}
		}
		ep := m.classEnd(p)
		matched := s < len(m.src) && m.singleMatch(m.src[s], p, ep)
		if ep < len(m.pat) {
			switch m.pat[ep] {
			case '?':
				if matched {
					if r := m.match(s+1, ep+1); r >= 0 {
						return r
					}
				}
				p = ep + 1
				continue
			case '*':
				return m.maxExpand(s, p, ep)
			case '+':
				if !matched {
					return -1
				}
				return m.maxExpand(s+1, p, ep)
			case '-':
				return m.minExpand(s, p, ep)
			}
		}
		if !matched {
			return -1
		}
		s, p = s+1, ep
	}
}

func (m *matcher) maxExpand(s, p, ep int) int {
	i := 0
	for s+i < len(m.src) && m.singleMatch(m.src[s+i], p, ep) {
		m.step()
		i++
	}
	for ; i >= 0; i-- {
		if r := m.match(s+i, ep+1); r >= 0 {
			return r
		}
	}
	return -1
}

func (m *matcher) minExpand(s, p, ep int) int {
	for {
		if r := m.match(s, ep+1); r >= 0 {
			return r
		}
		if s < len(m.src) && m.singleMatch(m.src[s], p, ep) {
			s++
			continue
		}
		return -1
	}
}

func (m *matcher) startCapture(s, p, what int) int {
	if m.level >= maxCaptures {
		luaLError(m.L, "too many captures")
	}
	m.capture[m.level].start, m.capture[m.level].len = s, what
	m.level++
	r := m.match(s, p)
	if r < 0 {
		m.level--
	}
	return r
}

func (m *matcher) endCapture(s, p int) int {
	l := -1
	for i := m.level - 1; i >= 0; i-- {
		if m.capture[i].len == capUnfinished {
			l = i
			break
		}
	}
	if l < 0 {
		luaLError(m.L, "invalid pattern capture")
	}
	m.capture[l].len = s - m.capture[l].start
	r := m.match(s, p)
	if r < 0 {
		m.capture[l].len = capUnfinished
	}
	return r
}

// matchBalance matches %bxy at src[s:]; p is at x.
func (m *matcher) matchBalance(s, p int) int {
	if p+1 >= len(m.pat) {
		luaLError(m.L, "unbalanced pattern")
	}
	if s >= len(m.src) || m.src[s] != m.pat[p] {
		return -1
	}
	open, close := m.pat[p], m.pat[p+1]
	depth := 1
	for s++; s < len(m.src); s++ {
		m.step()
		switch m.src[s] {
		case close:
			if depth--; depth == 0 {
				return s + 1
			}
		case open:
			depth++
		}
	}
	return -1
}

// frontier matches %f[set] at s; p is at '['. It returns where the pattern
// continues.
func (m *matcher) frontier(s, p int) (int, bool) {
	if p >= len(m.pat) || m.pat[p] != '[' {
		luaLError(m.L, "%s", "missing '[' after '%f' in pattern")
	}
	ep := m.classEnd(p)
	var prev, cur byte
	if s > 0 {
		prev = m.src[s-1]
	}
	if s < len(m.src) {
		cur = m.src[s]
	}
	if !m.bracketMatch(prev, p, ep-1) && m.bracketMatch(cur, p, ep-1) {
		return ep, true
	}
	return 0, false
}

// matchCapture matches a back reference %1..%9 at s.
func (m *matcher) matchCapture(s int, digit byte) int {
	l := m.checkCapture(int(digit) - '1')
	c := m.capture[l]
	// A position capture has no text; Lua compares its negative length as
	// unsigned, so it never matches.
	if c.len >= 0 && len(m.src)-s >= c.len && m.src[c.start:c.start+c.len] == m.src[s:s+c.len] {
		return s + c.len
	}
	return -1
}

func (m *matcher) checkCapture(l int) int {
	if l < 0 || l >= m.level || m.capture[l].len == capUnfinished {
		luaLError(m.L, "invalid capture index")
	}
	return l
}

// classEnd returns the end of the single-character class at p.
func (m *matcher) classEnd(p int) int {
	c := m.pat[p]
	p++
	switch c {
	case '%':
		if p >= len(m.pat) {
			luaLError(m.L, "%s", "malformed pattern (ends with '%')")
		}
		return p + 1
	case '[':
		if p < len(m.pat) && m.pat[p] == '^' {
			p++
		}
		for { // the first character, even ']', is part of the set
			if p >= len(m.pat) {
				luaLError(m.L, "malformed pattern (missing ']')")
			}
			c := m.pat[p]
			p++
			if c == '%' && p < len(m.pat) {
				p++
			}
			if p < len(m.pat) && m.pat[p] == ']' {
				return p + 1
			}
		}
	}
	return p
}

// singleMatch reports whether c matches the class pat[p:ep].
func (m *matcher) singleMatch(c byte, p, ep int) bool {
	switch m.pat[p] {
	case '.':
		return true
	case '%':
		return classMatch(c, m.pat[p+1])
	case '[':
		return m.bracketMatch(c, p, ep-1)
	}
	return m.pat[p] == c
}

// bracketMatch matches c against the set pat[p:ec]; p is at '[' and ec at
// its ']'.
func (m *matcher) bracketMatch(c byte, p, ec int) bool {
	want := true
	p++
	if p < ec && m.pat[p] == '^' {
		want = false
		p++
	}
	for ; p < ec; p++ {
		switch {
		case m.pat[p] == '%' && p+1 <= ec:
			p++
			if classMatch(c, m.pat[p]) {
				return want
			}
		case p+2 < ec && m.pat[p+1] == '-':
			if m.pat[p] <= c && c <= m.pat[p+2] {
				return want
			}
			p += 2
		case m.pat[p] == c:
			return want
		}
	}
	return !want
}

// classMatch matches c against %cl, in the C locale; an upper-case class
// letter is the complement.
func classMatch(c, cl byte) bool {
	var res bool
	switch cl | 0x20 {
	case 'a':
		res = isAlpha(c)
	case 'c':
		res = c < 0x20 || c == 0x7f
	case 'd':
		res = c >= '0' && c <= '9'
	case 'l':
		res = c >= 'a' && c <= 'z'
	case 'p':
		res = c > 0x20 && c < 0x7f && !isAlpha(c) && !(c >= '0' && c <= '9')
	case 's':
		res = cSpace(c)
	case 'u':
		res = c >= 'A' && c <= 'Z'
	case 'w':
		res = isAlpha(c) || (c >= '0' && c <= '9')
	case 'x':
		res = (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'f')
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if cl >= 'A' && cl <= 'Z' {
		return !res
	}
	return res
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// pushCapture pushes capture i of the match src[s:e]; with no captures,
// capture 0 is the whole match.
func (m *matcher) pushCapture(i, s, e int) {
	if i >= m.level {
		if i != 0 {
			luaLError(m.L, "invalid capture index")
		}
		m.L.Push(lua.LString(m.src[s:e]))
		return
	}
	c := m.capture[i]
	switch c.len {
	case capUnfinished:
		luaLError(m.L, "unfinished capture")
	case capPosition:
		m.L.Push(lua.LNumber(c.start + 1))
	default:
		m.L.Push(lua.LString(m.src[c.start : c.start+c.len]))
	}
}

// pushCaptures pushes every capture, or the whole match if there are none
// and wholeIfNone; it returns how many it pushed.
func (m *matcher) pushCaptures(s, e int, wholeIfNone bool) int {
	n := m.level
	if n == 0 && wholeIfNone {
		n = 1
	}
	for i := 0; i < n; i++ {
		m.pushCapture(i, s, e)
	}
	return n
}

// startIndex converts a Lua init argument to an offset in a string of n
// bytes, clamped as Lua 5.1 clamps it.
func startIndex(init, n int) int {
	if init < 0 {
		init += n + 1
	}
	init--
	return max(0, min(init, n))
}

func (st *state) newMatcher(L *lua.LState, src, pat string) *matcher {
	return &matcher{L: L, st: st, src: src, pat: pat}
}

func (st *state) stringFind(L *lua.LState) int  { return st.findAux(L, true, "find") }
func (st *state) stringMatch(L *lua.LState) int { return st.findAux(L, false, "match") }

// findAux is string.find (find) and string.match.
func (st *state) findAux(L *lua.LState, find bool, fname string) int {
	src, pat := checkString(L, 1, fname), checkString(L, 2, fname)
	init := startIndex(optInt(L, 3, fname, 1), len(src))
	if find && (lua.LVAsBool(L.Get(4)) || !strings.ContainsAny(pat, patternSpecials)) {
		if i := strings.Index(src[init:], pat); i >= 0 {
			L.Push(lua.LNumber(init + i + 1))
			L.Push(lua.LNumber(init + i + len(pat)))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	anchor := strings.HasPrefix(pat, "^")
	if anchor {
		pat = pat[1:]
	}
	m := st.newMatcher(L, src, pat)
	for s := init; ; s++ {
		m.level = 0
		if e := m.match(s, 0); e >= 0 {
			if find {
				L.Push(lua.LNumber(s + 1))
				L.Push(lua.LNumber(e))
				return m.pushCaptures(s, e, false) + 2
			}
			return m.pushCaptures(s, e, true)
		}
		if s >= len(src) || anchor {
			break
		}
	}
	L.Push(lua.LNil)
	return 1
}

// stringGmatch is string.gmatch (and Lua 5.1's alias gfind): an iterator over
// the matches; '^' is an ordinary character here, as in Lua 5.1.
func (st *state) stringGmatch(L *lua.LState) int {
	src, pat := checkString(L, 1, "gmatch"), checkString(L, 2, "gmatch")
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		m := st.newMatcher(L, src, pat)
		for s := pos; s <= len(src); s++ {
			m.level = 0
			if e := m.match(s, 0); e >= 0 {
				pos = e
				if e == s {
					pos++ // an empty match: move on
				}
				return m.pushCaptures(s, e, true)
			}
		}
		pos = len(src) + 1
		return 0
	}))
	return 1
}

// stringGsub is string.gsub(s, pattern, repl [, n]).
func (st *state) stringGsub(L *lua.LState) int {
	src, pat := checkString(L, 1, "gsub"), checkString(L, 2, "gsub")
	repl := L.Get(3)
	switch repl.Type() {
	case lua.LTNumber, lua.LTString, lua.LTTable, lua.LTFunction:
	default:
		argError(L, 3, "gsub", "string/function/table expected")
	}
	maxN := optInt(L, 4, "gsub", len(src)+1)
	anchor := strings.HasPrefix(pat, "^")
	if anchor {
		pat = pat[1:]
	}
	m := st.newMatcher(L, src, pat)
	var b []byte
	n, s := 0, 0
	for n < maxN {
		m.level = 0
		e := m.match(s, 0)
		if e >= 0 {
			n++
			b = st.addValue(m, b, s, e, repl)
		}
		switch {
		case e > s:
			s = e
		case s < len(src):
			b = append(b, src[s])
			s++
		default:
			s = len(src) + 1
		}
		if s > len(src) || anchor {
			break
		}
	}
	if s < len(src) {
		b = append(b, src[s:]...)
	}
	st.checkLength(L, len(b))
	L.Push(lua.LString(b))
	L.Push(lua.LNumber(n))
	return 2
}

// addValue appends the replacement of the match src[s:e].
func (st *state) addValue(m *matcher, b []byte, s, e int, repl lua.LValue) []byte {
	L := m.L
	if text, ok := repl.(lua.LString); ok || repl.Type() == lua.LTNumber {
		if !ok {
			text = lua.LString(number14(float64(repl.(lua.LNumber))))
		}
		b = st.expandReplacement(m, b, string(text), s, e)
		st.checkLength(L, len(b))
		return b
	}
	var v lua.LValue
	if t, ok := repl.(*lua.LTable); ok {
		m.pushCapture(0, s, e)
		v = L.GetTable(t, L.Get(-1))
		L.Pop(1)
	} else {
		L.Push(repl)
		n := m.pushCaptures(s, e, true)
		L.Call(n, 1)
		v = L.Get(-1)
		L.Pop(1)
	}
	if !lua.LVAsBool(v) {
		b = append(b, m.src[s:e]...) // false or nil: keep the match
	} else if text, ok := luaText(v); ok {
		b = append(b, text...)
	} else {
		luaLError(L, "invalid replacement value (a %s)", v.Type().String())
	}
	st.checkLength(L, len(b))
	return b
}

// expandReplacement appends a replacement string: %0 is the match, %1..%9
// its captures, % followed by anything else that character.
func (st *state) expandReplacement(m *matcher, b []byte, repl string, s, e int) []byte {
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		if i++; i == len(repl) {
			b = append(b, 0) // Lua 5.1 reads the string's terminating NUL here
			break
		}
		c = repl[i]
		switch {
		case c == '0':
			b = append(b, m.src[s:e]...)
		case c >= '1' && c <= '9':
			m.pushCapture(int(c-'1'), s, e)
			text, _ := luaText(m.L.Get(-1))
			m.L.Pop(1)
			b = append(b, text...)
		default:
			b = append(b, c)
		}
		st.checkLength(m.L, len(b))
	}
	return b
}
