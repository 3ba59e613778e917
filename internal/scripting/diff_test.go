package scripting

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// diffCase is one script run both on redis-server and on the engine.
type diffCase struct {
	script     string
	keys, args []string
	proto      int        // the client's protocol (0: 2)
	ro         bool       // EVAL_RO
	setup      [][]string // commands run before the script on both
}

// diffHarness runs diffCases on redis-server and on an engine whose Caller
// forwards to the same server.
type diffHarness struct {
	t      *testing.T
	client map[int]*redisConn // EVAL on redis, per protocol
	admin  *redisConn
	caller *redisCaller
	engine *Engine
	cache  *Cache
}

func newDiffHarness(t *testing.T) *diffHarness {
	t.Helper()
	return &diffHarness{t: t, client: map[int]*redisConn{2: dialRedis(t, 2), 3: dialRedis(t, 3)},
		admin: dialRedis(t, 2), caller: newRedisCaller(t), engine: New(Options{}), cache: NewCache(CacheLimits{})}
}

func (h *diffHarness) prepare(c diffCase) {
	h.admin.do("FLUSHALL")
	for _, cmd := range c.setup {
		h.admin.do(cmd...)
	}
}

// onRedis runs c's EVAL on redis-server and returns the raw reply.
func (h *diffHarness) onRedis(c diffCase) []byte {
	h.prepare(c)
	cmd := "EVAL"
	if c.ro {
		cmd = "EVAL_RO"
	}
	args := append([]string{cmd, c.script, strconv.Itoa(len(c.keys))}, c.keys...)
	return h.client[c.protocol()].do(append(args, c.args...)...)
}

// onEngine runs c on the engine and returns its reply, or its error as an
// error reply.
func (h *diffHarness) onEngine(c diffCase) []byte {
	h.prepare(c)
	s, err := h.cache.Load([]byte(c.script))
	if err == nil {
		var out []byte
		out, err = h.engine.Run(context.Background(), s, bytesOf(c.keys), bytesOf(c.args), c.protocol(), h.caller.Call, c.ro, nil)
		if err == nil {
			return out
		}
	}
	var se *Error
	if !errors.As(err, &se) {
		h.t.Fatalf("%q: not a Redis error: %v", c.script, err)
	}
	return appendErrorReply(nil, se.Text)
}

func (c diffCase) protocol() int {
	if c.proto == 0 {
		return 2
	}
	return c.proto
}

func bytesOf(items []string) [][]byte {
	b := make([][]byte, len(items))
	for i, s := range items {
		b[i] = []byte(s)
	}
	return b
}

// check runs c on both and fails if the replies differ.
func (h *diffHarness) check(c diffCase) {
	h.t.Helper()
	want, got := h.onRedis(c), h.onEngine(c)
	if !bytes.Equal(want, got) {
		h.t.Errorf("script %q keys %q args %q RESP%d ro=%v:\nredis:  %q\nengine: %q", c.script, c.keys, c.args, c.protocol(), c.ro, want, got)
	}
}

// conversionCases cover Lua → RESP in both protocols and the number
// formats.
var conversionCases = []string{
	"return 3.99", "return -3.99", "return 2^63", "return -2^63", "return 2^64", "return 0/0", "return 1/0",
	"return {1.5, nil, 2}", "return {nil, 2}", "return {1,{2,{3}},'x',redis.status_reply('S'),{err='E'}}",
	"return nil", "return false", "return true", "return {}", "return {a=1}", "return {true, false, 1}",
	"return redis.error_reply('no prefix')", "return {err='MYERR bad'}", "return {err='-MYERR bad'}",
	"return {ok='-x'}", "return {err=''}", "return {err='a\\r\\nb\\n'}", "return {ok='a\\r\\nb'}",
	"return redis.error_reply('-ERR')", "return redis.error_reply('')", "return redis.error_reply(1)",
	"return redis.status_reply(1)", "return redis.status_reply('fine')",
	"return {double=3.5}", "return {double=0/0}", "return {double=-(0/0)}", "return {double=1/0}", "return {double=-1/0}",
	"return {double=0.1}", "return {double=1e300}", "return {big_number='123\\r\\n4'}",
	"return {verbatim_string={format='txt', string='hi'}}", "return {verbatim_string={format='t', string='hi'}}",
	"return {map={a=1}}", "return {set={a=true}}", "return {map={a={1,2}}}",
	"redis.setresp(3); return {true, false, 1}", "redis.setresp(3); return false", "redis.setresp(3); return nil",
	"return {err='x', ok='y'}", "return {ok='y', double=1}", "return {double='x'}", "return {map='x'}",
	"return {1, {err='nested'}, 3}", "return function() end", "return {function() end}",
	"return {tostring(1e15), tostring(1/0), tostring(0/0), tostring(-1/0), tostring(1234567.5), tostring(2^63), tostring(0.1), tostring(-0.5), tostring(1e-5), tostring(123456789012345678)}",
	"return table.concat({0.1, 1e15, 3, -2.5}, ',')",
	"redis.call('set','k',0.1); redis.call('set','k2',1e20); redis.call('set','k3',2^53+1); redis.call('set','k4', 1/0); redis.call('set','k5', -1/0); redis.call('set','k6', 1796021453.2227824); redis.call('set','k7', 2); redis.call('set', 'k8', 1e-7); return redis.call('mget','k','k2','k3','k4','k5','k6','k7','k8')",
	"return {tonumber('0x10'), tonumber('  5  '), tonumber('1e1'), tonumber('1e400'), tonumber('-0x1p4'), tonumber('.5'), tonumber('5.'), tonumber('')}",
	"return {tonumber('inf'), tonumber('nan'), tonumber('-Infinity')}",
	"return {tonumber('z', 36), tonumber('ff', 16), tonumber('12abc'), tonumber('1_000'), tonumber('0b1'), tonumber(nil)}",
	"return string.format('%5.2f|%d|%s|%q|%x|%X|%o|%e|%g|%G|%c|%i|%u', 3.14159, 3.7, 'a', 'x\"y\\n\\r\\0z', 255, 255, 8, 12345.678, 0.0001, 1e20, 65, -4, 7)",
	"return string.format('%-5s|%5s|%.2s|%05d|%+d|% d|%#x|%#o|%.3g|%10.4f|%-10.2e|', 'ab', 'ab', 'abc', 42, 42, 42, 255, 8, 1234567, 3.14159, 31415.9)",
	"return string.format('%g %g %g %g %f %e', 1/0, -1/0, 0/0, 1e15, 1/0, -1/0)",
	"return string.format('%s %s %s', 1e15, 0.1, true)",
	"return string.format('%100d', 1)", "return string.format('%y', 1)", "return string.format('%d')",
	"return {string.rep('ab', 3), string.rep('x', 0), string.rep('x', -1)}",
	"return {select('#', unpack({1,2,3}, 1, 5)), unpack({1,2,3}, 2)}",
	"return {bit.tobit(1), bit.band(1), bit.bxor(1,2), bit.bor(1,2,4,8,16,32,64,128), bit.tobit(2^32+5), bit.tobit(-1), bit.bnot(0), bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-16, 2), bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.bswap(0x12345678), bit.tobit(3.5), bit.tobit(4.5), bit.tobit('7')}",
	"return {bit.tohex(255), bit.tohex(-1), bit.tohex(255, 2), bit.tohex(255, -4), bit.tohex(0x12345678, 20)}",
	"return bit.band()", "return bit.tobit('x')",
	"return {redis.sha1hex(''), redis.sha1hex('Pizza & Mandolino'), redis.sha1hex(12), redis.sha1hex(nil)}",
	"return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL, redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING, redis.REDIS_VERSION, redis.REDIS_VERSION_NUM}",
	"return {redis.replicate_commands(), redis.breakpoint(), redis.debug('x'), redis.set_repl(redis.REPL_ALL), redis.log(redis.LOG_DEBUG, 'x')}",
	"return _VERSION", "return type(unpack)", "return type(table.unpack)", "return type(gcinfo)",
	"return {table.getn({1,2,nil,4}), #{1,nil,3}, table.maxn({1,2,[10]=3})}",
	"local t = {} table.foreach({5}, function(k, v) t[#t+1] = k; t[#t+1] = v end) table.foreachi({7, 8}, function(i, v) t[#t+1] = v end) return t",
	"return table.foreach({5}, function(k, v) return 'stop' end)",
	"return coroutine.wrap(function() coroutine.yield(5) end)()",
	"local co = coroutine.create(function(a) local b = coroutine.yield(a + 1); return b * 2 end) local _, x = coroutine.resume(co, 1) local _, y = coroutine.resume(co, 10) return {x, y, coroutine.status(co)}",
	"return loadstring('return 1 + 1')()", "return {loadstring('return +')}",
	"local n = 0 for _ in pairs(redis) do n = n + 1 end return n > 10",
	"return type(getmetatable(_G))", "return type(getmetatable(''))", "return type(getmetatable('').__index)",
	"return ('x'):rep(3)", "return #KEYS + #ARGV", "return type(arg)", "local f = function(a, ...) return arg.n end return f(1, 2, 3)",
	"return loadstring('return type(arg)')()", "return loadstring('return x', '=named')()", "return loadstring('\\nreturn x', '@file')()",
	"return loadstring('error(\\'in chunk\\')')()", "return {loadstring('return +', '=named')}",
}

func TestConversionsMatchRedis(t *testing.T) {
	h := newDiffHarness(t)
	for _, proto := range []int{2, 3} {
		for _, script := range conversionCases {
			h.check(diffCase{script: script, proto: proto})
		}
	}
}

// TestCommandRepliesMatchRedis converts every reply type Redis's commands
// produce (DEBUG PROTOCOL makes each) into Lua, under RESP2 and after
// redis.setresp(3), and back into a reply.
func TestCommandRepliesMatchRedis(t *testing.T) {
	h := newDiffHarness(t)
	dump := strings.Replace(dumpScript, "return dump(redis.pcall('raw'))", "", 1)
	for _, resp := range []string{"", "redis.setresp(3) "} {
		for _, kind := range []string{"string", "integer", "double", "bignum", "null", "array", "set", "map",
			"attrib", "verbatim", "true", "false"} {
			call := fmt.Sprintf("redis.call('debug', 'protocol', '%s')", kind)
			for _, proto := range []int{2, 3} {
				h.check(diffCase{script: dump + resp + "return dump(" + call + ")", proto: proto})
				h.check(diffCase{script: resp + "return " + call, proto: proto})
			}
		}
	}
	for _, src := range []string{
		"return redis.call('hgetall', KEYS[1])", "redis.setresp(3) return redis.call('hgetall', KEYS[1])",
		"redis.setresp(3) return redis.call('smembers', KEYS[2])", "redis.setresp(3) return redis.call('zscore', KEYS[3], 'm')",
		"redis.setresp(3) return redis.call('get', 'missing')", "return redis.call('zscore', KEYS[3], 'm')",
		"redis.setresp(3) return {redis.call('get', 'missing'), 1}", "return redis.call('lpop', 'missing', 2)",
		"redis.setresp(3) return redis.call('zrange', KEYS[3], 0, -1, 'withscores')",
	} {
		for _, proto := range []int{2, 3} {
			h.check(diffCase{script: src, keys: []string{"h", "s", "z"}, proto: proto, setup: [][]string{
				{"HSET", "h", "f", "v"}, {"SADD", "s", "a"}, {"ZADD", "z", "1.5", "m"}}})
		}
	}
}

// errorCases are scripts whose error replies clients and Redis's tests match.
var errorCases = []diffCase{
	{script: "return x"}, {script: "x = 1"}, {script: "error('boom')"}, {script: "error('a\\nb')"},
	{script: "error('trailing\\n')"}, {script: "error(12)"}, {script: "error(nil)"}, {script: "error('x', 0)"},
	{script: "error({err='CUSTOM boom'})"}, {script: "error({err='lower boom'})"}, {script: "error(true)"},
	{script: "\n\nlocal a = 1\nredis.call('nosuch')"}, {script: "return redis.call('nosuch')"},
	{script: "return redis.pcall('nosuch')"}, {script: "return redis.call('get', 'a', 'b')"},
	{script: "return redis.pcall('incr')"}, {script: "return redis.call()"}, {script: "return redis.pcall()"},
	{script: "return redis.call('set','a',{})"}, {script: "return redis.call('set','a',true)"},
	{script: "return redis.call('eval','return 1','0')"}, {script: "return redis.call('multi')"},
	{script: "redis.call('set', KEYS[1], 'x'); return redis.call('incr', KEYS[1])", keys: []string{"k"}},
	{script: "redis.call('set', KEYS[1], 'x'); return redis.pcall('incr', KEYS[1])", keys: []string{"k"}},
	{script: "redis.call('set', KEYS[1], 'x'); return redis.call('lpush', KEYS[1], 'v')", keys: []string{"k"}},
	{script: "return redis.call('set', KEYS[1], '1')", keys: []string{"k"}, ro: true},
	{script: "return redis.pcall('set', KEYS[1], '1')", keys: []string{"k"}, ro: true},
	{script: "return redis.call('get', KEYS[1])", keys: []string{"k"}, ro: true},
	{script: "#!lua\nreturn 1", ro: true}, {script: "#!lua flags=no-writes\nreturn redis.call('set','a','b')"},
	{script: "#!lua flags=no-writes,allow-oom\nreturn redis.call('get','a')", ro: true},
	{script: "#!lua flags=no-writes,bad\nreturn 1"}, {script: "#!lua name=x\nreturn 1"}, {script: "#!luax\nreturn 1"},
	{script: "#!lua"}, {script: "#!lua flags=\nreturn 1"}, {script: "#!lua\nreturn x"},
	{script: "local ok, e = pcall(redis.call, 'nosuch'); return e"},
	{script: "local ok, e = pcall(redis.call, 'nosuch'); return type(e)"},
	{script: "local ok, e = pcall(error, {err='X y'}); return e"},
	{script: "local ok, e = pcall(error, {foo='X y'}); return type(e)"},
	{script: "local ok, e = pcall(error, 'plain'); return e"},
	{script: "return xpcall(function() error({err='in xpcall'}) end, function(e) return e.err end)"},
	{script: "rawset(_G, 'x', 1)"}, {script: "setmetatable(_G, {})"}, {script: "local g = getmetatable(_G); g.__index = {}"},
	{script: "redis = function() return 1 end"}, {script: "_G = {}"}, {script: "redis.call = function() return 1 end"},
	{script: "cjson.encode = function() return 1 end"}, {script: "bit.lshift = function() return 1 end"},
	{script: "string.rep = nil"}, {script: "getmetatable('').__index = {}"}, {script: "KEYS = {}"},
	{script: "loadfile('x')"}, {script: "dofile('x')"}, {script: "print('x')"}, {script: "return getfenv"},
	{script: "return setfenv"}, {script: "return newproxy"}, {script: "return os"}, {script: "return io"},
	{script: "return debug"}, {script: "return require"}, {script: "return package"}, {script: "return module"},
	{script: "redis.setresp(4)"}, {script: "redis.setresp()"}, {script: "redis.setresp('3'); return 1"},
	{script: "return redis.sha1hex()"}, {script: "return redis.log(1)"}, {script: "return redis.log('a', 'b')"},
	{script: "return redis.log(7, 'b')"}, {script: "return redis.set_repl(8)"}, {script: "return redis.set_repl()"},
	{script: "return table.setn({}, 1)"},
	{script: "local a = {}; a[1] = a; return a[1][1][1] == a"},
	{script: "return string.find('a', '%')"}, {script: "return string.find('a', '[a')"},
	{script: "return string.gsub('abc', '(', 'x')"}, {script: "return string.match('abc', '%1')"},
	{script: "return string.gsub('abc', 'b', {})"}, {script: "return string.gsub('abc', 'b', function() return {} end)"},
}

func TestErrorsMatchRedis(t *testing.T) {
	h := newDiffHarness(t)
	for _, c := range errorCases {
		h.check(c)
	}
}

// TestLibraryScriptsMatchRedis runs each library's sequence (limit 5 per
// 10 s, seven hits, then its get/reset calls) on both; the scripts that read
// TIME or a TTL are compared with a tolerance for the clock moving between
// the two runs.
func TestLibraryScriptsMatchRedis(t *testing.T) {
	h := newDiffHarness(t)
	for _, seq := range librarySequences(t) {
		h.admin.do("FLUSHALL")
		var redisReplies, engineReplies [][]byte
		for _, step := range seq.steps {
			redisReplies = append(redisReplies, h.evalOnRedis(step))
		}
		h.admin.do("FLUSHALL")
		for _, step := range seq.steps {
			engineReplies = append(engineReplies, h.evalOnEngine(step))
		}
		for i := range seq.steps {
			if !closeReplies(t, redisReplies[i], engineReplies[i]) {
				t.Errorf("%s step %d (%s %q %q):\nredis:  %q\nengine: %q", seq.name, i, seq.steps[i].file,
					seq.steps[i].keys, seq.steps[i].args, redisReplies[i], engineReplies[i])
			}
		}
	}
}

// libraryStep is one EVAL of a library script, or a plain command.
type libraryStep struct {
	file       string // the script under testdata/libraries; "" for a command
	source     string
	keys, args []string
	command    []string
}

type librarySequence struct {
	name  string
	steps []libraryStep
}

func (h *diffHarness) evalOnRedis(s libraryStep) []byte {
	if s.command != nil {
		return h.admin.do(s.command...)
	}
	args := append([]string{"EVAL", s.source, strconv.Itoa(len(s.keys))}, s.keys...)
	return h.client[2].do(append(args, s.args...)...)
}

func (h *diffHarness) evalOnEngine(s libraryStep) []byte {
	if s.command != nil {
		return h.admin.do(s.command...)
	}
	script, err := h.cache.Load([]byte(s.source))
	if err != nil {
		h.t.Fatal(err)
	}
	out, err := h.engine.Run(context.Background(), script, bytesOf(s.keys), bytesOf(s.args), 2, h.caller.Call, false, nil)
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			return appendErrorReply(nil, se.Text)
		}
		h.t.Fatal(err)
	}
	return out
}

func librarySource(t testing.TB, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "libraries", file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// librarySequences are the libraries' calls as traced against Redis 7.0
// (research notes §2), for a limit of 5 per 10 s and seven hits.
func librarySequences(t *testing.T) []librarySequence {
	step := func(file string, keys []string, args ...string) libraryStep {
		return libraryStep{file: file, source: librarySource(t, file), keys: keys, args: args}
	}
	command := func(args ...string) libraryStep { return libraryStep{command: args} }
	repeat := func(n int, s libraryStep) []libraryStep {
		out := make([]libraryStep, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	k := func(key string) []string { return []string{key} }
	ts := "1796021453.2227824"
	var seqs []librarySequence
	seqs = append(seqs, librarySequence{"rate-limiter-flexible", append(repeat(7,
		step("rate-limiter-flexible_incrttl.lua", k("rlf:user1"), "1", "10", "5", "10")),
		step("rate-limiter-flexible_incrttl.lua", k("rlf:user1"), "2", "10", "5", "10"),
		step("rate-limiter-flexible_incrttl.lua", k("rlf:user1"), "-1", "10", "5", "10"))})
	seqs = append(seqs, librarySequence{"rate-limit-redis", append(append(repeat(7,
		step("rate-limit-redis_increment.lua", k("rl:client1"), "10000")),
		step("rate-limit-redis_get.lua", k("rl:client1"))),
		command("DEL", "rl:client1"), step("rate-limit-redis_get.lua", k("rl:client1")))})
	seqs = append(seqs, librarySequence{"limits fixed window", append(repeat(7,
		step("limits_incr_expire.lua", k("LIMITER/user1/5/10/second"), "10", "1")),
		step("limits_incr_expire.lua", k("LIMITER/user1/5/10/second"), "10", "2"),
		step("limits_clear_keys.lua", k("LIMITER*")))})
	seqs = append(seqs, librarySequence{"limits moving window", append(append(
		[]libraryStep{step("limits_moving_window.lua", k("LIMITER/mw/5/10/second"), "1796021443", "5")},
		repeat(7, step("limits_acquire_moving_window.lua", k("LIMITER/mw/5/10/second"), ts, "5", "10", "1"))...),
		step("limits_moving_window.lua", k("LIMITER/mw/5/10/second"), "1796021443", "5"),
		step("limits_acquire_moving_window.lua", k("LIMITER/mw2/5/10/second"), ts, "5", "10", "3"),
		command("LRANGE", "LIMITER/mw2/5/10/second", "0", "-1"))})
	seqs = append(seqs, librarySequence{"redis_rate", append(repeat(7,
		step("redis_rate_allowN.lua", k("rate:user1"), "5", "5", "10", "1")),
		step("redis_rate_allowAtMost.lua", k("rate:user2"), "5", "5", "10", "3"),
		step("redis_rate_allowAtMost.lua", k("rate:user2"), "5", "5", "10", "3"))})
	seqs = append(seqs, librarySequence{"ulule", append(append(
		[]libraryStep{step("ulule_peek.lua", k("limiter:user1"))},
		repeat(7, step("ulule_incr.lua", k("limiter:user1"), "1", "10000"))...),
		step("ulule_peek.lua", k("limiter:user1")), step("ulule_incr.lua", k("limiter:user1"), "2", "10000"))})
	seqs = append(seqs, librarySequence{"throttled", []libraryStep{
		step("throttled_cas.lua", k("throttled:user1"), "1", "2", "10"),
		command("SET", "throttled:user1", "1796021528850378000"),
		step("throttled_cas.lua", k("throttled:user1"), "1796021528850378000", "1796021530850378000", "10"),
		step("throttled_cas.lua", k("throttled:user1"), "1796021528850378000", "1796021532850378000", "10"),
		command("GET", "throttled:user1")}})
	return seqs
}

// closeReplies compares two replies exactly, except that integers may differ
// by 50 and numeric strings by 0.05 (milliseconds and seconds of a clock
// that moved between the runs).
func closeReplies(t *testing.T, a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	va, _, err1 := parseTestReply(a)
	vb, _, err2 := parseTestReply(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return closeValues(va, vb)
}

func closeValues(a, b any) bool {
	switch a := a.(type) {
	case int64:
		b, ok := b.(int64)
		return ok && a-b <= 50 && b-a <= 50
	case string:
		b, ok := b.(string)
		if !ok {
			return false
		}
		fa, err1 := strconv.ParseFloat(a, 64)
		fb, err2 := strconv.ParseFloat(b, 64)
		if err1 == nil && err2 == nil {
			return math.Abs(fa-fb) <= 0.05
		}
		return a == b
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !closeValues(a[i], b[i]) {
				return false
			}
		}
		return true
	case error:
		b, ok := b.(error)
		return ok && a.Error() == b.Error()
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// TestNumkeysMatchRedis checks SplitKeys's errors against EVAL's.
func TestNumkeysMatchRedis(t *testing.T) {
	h := newDiffHarness(t)
	for _, args := range [][]string{{"-1"}, {"2", "a"}, {"x"}, {"99999999999999999999"}, {"+1", "a"}, {" 1", "a"},
		{"1", "a", "b"}, {"0"}, {"01", "a"}, {"1.0", "a"}} {
		want := h.client[2].do(append([]string{"EVAL", "return {KEYS, ARGV}"}, args...)...)
		keys, argv, err := SplitKeys(bytesOf(args))
		var got []byte
		if err != nil {
			got = appendErrorReply(nil, err.Error())
		} else {
			s, _ := h.cache.Load([]byte("return {KEYS, ARGV}"))
			got, err = h.engine.Run(context.Background(), s, keys, argv, 2, h.caller.Call, false, nil)
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(want, got) {
			t.Errorf("numkeys %q: redis %q, SplitKeys %q", args, want, got)
		}
	}
}

// TestScriptCommandsMatchRedis compares SCRIPT LOAD's replies and errors and
// EVALSHA's NOSCRIPT.
func TestScriptCommandsMatchRedis(t *testing.T) {
	h := newDiffHarness(t)
	for _, src := range []string{"return 1", "return 1 +", "#!notlua\nreturn 1", "#!lua flags=no-writes\nreturn 1",
		"for i=1 do end", "return 'abc", "x = ", "local function f() return end end"} {
		want := h.client[2].do("SCRIPT", "LOAD", src)
		var got []byte
		if s, err := h.cache.Load([]byte(src)); err != nil {
			got = appendErrorReply(nil, err.Error())
		} else {
			got = appendBulk(nil, s.SHA())
		}
		if !bytes.Equal(want, got) {
			// gopher-lua's parser words syntax errors differently; the
			// prefix clients match must agree.
			const prefix = "-ERR Error compiling script (new function): user_script:"
			if !(bytes.HasPrefix(want, []byte(prefix)) && bytes.HasPrefix(got, []byte(prefix))) {
				t.Errorf("SCRIPT LOAD %q: redis %q, cache %q", src, want, got)
			}
		}
	}
	for _, sha := range []string{"ffffffffffffffffffffffffffffffffffffffff", "abc", strings.Repeat("g", 40)} {
		want := h.client[2].do("EVALSHA", sha, "0")
		if h.cache.Get([]byte(sha)) != nil || !bytes.Equal(want, appendErrorReply(nil, ErrNoScript.Text)) {
			t.Errorf("EVALSHA %s: redis %q", sha, want)
		}
	}
	idle := h.client[2].do("SCRIPT", "KILL")
	if !bytes.Equal(idle, appendErrorReply(nil, ErrNotBusy.Text)) || h.engine.Kill() != ErrNotBusy {
		t.Errorf("SCRIPT KILL idle: redis %q, engine %v", idle, h.engine.Kill())
	}
}
