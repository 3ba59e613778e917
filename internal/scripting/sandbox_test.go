package scripting

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// runScript runs src on a fresh engine with the fake keyspace and returns its
// reply, or "-" and its error text.
func runScript(t *testing.T, src string, keys ...string) string {
	t.Helper()
	return runOn(t, New(Options{}), newFakeRedis(time.Unix(1_800_000_000, 0)), src, 2, keys...)
}

func runOn(t *testing.T, e *Engine, f *fakeRedis, src string, proto int, keys ...string) string {
	t.Helper()
	s, err := NewCache(CacheLimits{}).Load([]byte(src))
	if err == nil {
		var out []byte
		if out, err = e.Run(context.Background(), s, bytesOf(keys), nil, proto, f.Call, false, nil); err == nil {
			return string(out)
		}
	}
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("%q: not a Redis error: %v", src, err)
	}
	return "-" + se.Text
}

// TestSandboxEscapesFail tries the ways out of Redis's sandbox; each must
// fail, with Redis's error where Redis has one.
func TestSandboxEscapesFail(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"os.execute('touch /tmp/pwned')", "Script attempted to access nonexistent global variable 'os'"},
		{"io.open('/etc/passwd')", "Script attempted to access nonexistent global variable 'io'"},
		{"require('os')", "Script attempted to access nonexistent global variable 'require'"},
		{"loadfile('/etc/passwd')", "Script attempted to access nonexistent global variable 'loadfile'"},
		{"dofile('/etc/passwd')", "Script attempted to access nonexistent global variable 'dofile'"},
		{"return debug.getinfo(1)", "Script attempted to access nonexistent global variable 'debug'"},
		{"return getfenv(0)", "Script attempted to access nonexistent global variable 'getfenv'"},
		{"setfenv(1, {})", "Script attempted to access nonexistent global variable 'setfenv'"},
		{"return package.loaded", "Script attempted to access nonexistent global variable 'package'"},
		{"return newproxy(true)", "Script attempted to access nonexistent global variable 'newproxy'"},
		{"return _printregs()", "Script attempted to access nonexistent global variable '_printregs'"},
		{"return loadstring(string.dump(function() return 1 end))()", "GopherLua does not support the string.dump"},
		{"local f = loadstring('\\27Lua\\81\\0'); return f()", "attempt to call a non-function object"},
		{"return load(function() return nil end)", "$-1"}, // an empty chunk compiles to nothing returned
		{"setmetatable(_G, {})", "Attempt to modify a readonly table"},
		{"rawset(_G, 'x', 1)", "Attempt to modify a readonly table"},
		{"rawset(redis, 'call', function() end)", "Attempt to modify a readonly table"},
		{"rawset(getmetatable(''), '__index', {})", "Attempt to modify a readonly table"},
		{"local m = getmetatable(''); m.__index = {}", "Attempt to modify a readonly table"},
		{"getmetatable(_G).__newindex = function() end", "Attempt to modify a readonly table"},
		{"_G.redis = {}", "Attempt to modify a readonly table"},
		{"string.rep = function() return '' end", "Attempt to modify a readonly table"},
		{"table.insert = nil", "Attempt to modify a readonly table"},
		{"math.random = function() return 4 end", "Attempt to modify a readonly table"},
		{"coroutine.wrap = nil", "Attempt to modify a readonly table"},
		{"setmetatable('', {})", "table expected"},
		{"setmetatable(1, {})", "table expected"},
		{"return coroutine.yield()", "can not yield from outside of a coroutine"},
		{"local co = coroutine.create(function() error('in co') end) local ok, e = coroutine.resume(co) error(e)", "in co"},
		{"local co = coroutine.wrap(function() redis.call('nosuch') end) co()", "Unknown Redis command called from script"},
		{"return collectgarbage('count')", ":0"},
		{"local function f() return f() + 1 end return f()", "stack overflow"},
		{"return select('#', unpack({}, 1, 1e7))", "registry overflow"},
		{"local t = {} for i = 1, 200000 do t[i] = i end return select('#', unpack(t))", "registry overflow"},
	} {
		got := runScript(t, c.src)
		if !strings.Contains(got, c.want) {
			t.Errorf("%s:\n got %q\nwant it to contain %q", c.src, got, c.want)
		}
	}
}

// TestDeepSyntaxIsRefused: gopher-lua compiles deep nesting in quadratic time
// without interruption; the cache refuses it first.
func TestDeepSyntaxIsRefused(t *testing.T) {
	for _, src := range []string{
		strings.Repeat("do ", 5000) + strings.Repeat(" end", 5000),
		"return " + strings.Repeat("f(", 5000) + "1" + strings.Repeat(")", 5000),
		"return " + strings.Repeat("{", 5000) + strings.Repeat("}", 5000),
		"return " + strings.Repeat("'a' .. ", 5000) + "'a'",
	} {
		start := time.Now()
		_, err := NewCache(CacheLimits{}).Load([]byte(src))
		if err == nil || !strings.Contains(err.Error(), "too many syntax levels") {
			t.Errorf("%.20s...: %v", src, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%.20s...: refused after %v", src, d)
		}
	}
	if got := runScript(t, "local f = loadstring(string.rep('do ', 5000) .. string.rep(' end', 5000)) return f == nil"); got != ":1" && !strings.Contains(got, ":1") {
		t.Errorf("loadstring of deep syntax: %q", got)
	}
	ok := strings.Repeat("do ", 100) + "return 1" + strings.Repeat(" end", 100)
	if _, err := NewCache(CacheLimits{}).Load([]byte(ok)); err != nil {
		t.Errorf("100 levels refused: %v", err)
	}
}

// TestStackOverflowDoesNotBreakTheEngine: filling a state's stack makes
// gopher-lua's PCall panic past its own recovery; the run fails with the
// Lua error, the state is dropped, and the next script runs.
func TestStackOverflowDoesNotBreakTheEngine(t *testing.T) {
	e := New(Options{MaxIdleStates: 1})
	f := newFakeRedis(time.Now())
	got := runOn(t, e, f, "return select('#', unpack({}, 1, 1e7))", 2)
	if got != "-ERR user_script:1: registry overflow" {
		t.Errorf("overflow: %q", got)
	}
	if got := runOn(t, e, f, "return 1", 2); got != ":1\r\n" {
		t.Errorf("next script: %q", got)
	}
	got = runOn(t, e, f, "return xpcall(function() return unpack({}, 1, 1e7) end, function(e) return e end)", 2)
	if !strings.Contains(got, "registry overflow") {
		t.Errorf("overflow under xpcall: %q", got)
	}
	if got := runOn(t, e, f, "return 2", 2); got != ":2\r\n" {
		t.Errorf("next script: %q", got)
	}
}
