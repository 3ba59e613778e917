package scripting

import (
	"context"
	"strings"
	"testing"
	"time"
)

// luaReplyCases are Lua → RESP conversions, the replies as redis-server
// 7.0.15 sent them (TestConversionsMatchRedis checks the same scripts
// against a live server when one is installed).
var luaReplyCases = []struct{ script, resp2, resp3 string }{
	{"return 3.99", ":3\r\n", ":3\r\n"},
	{"return -3.99", ":-3\r\n", ":-3\r\n"},
	{"return 2^63", ":-9223372036854775808\r\n", ":-9223372036854775808\r\n"},
	{"return 0/0", ":-9223372036854775808\r\n", ":-9223372036854775808\r\n"},
	{"return 'x'", "$1\r\nx\r\n", "$1\r\nx\r\n"},
	{"return {1.5, nil, 2}", "*1\r\n:1\r\n", "*1\r\n:1\r\n"},
	{"return {nil, 2}", "*0\r\n", "*0\r\n"},
	{"return {1,{2,{3}},'x',redis.status_reply('S'),{err='E'}}", "*5\r\n:1\r\n*2\r\n:2\r\n*1\r\n:3\r\n$1\r\nx\r\n+S\r\n-E\r\n", "*5\r\n:1\r\n*2\r\n:2\r\n*1\r\n:3\r\n$1\r\nx\r\n+S\r\n-E\r\n"},
	{"return nil", "$-1\r\n", "_\r\n"},
	{"return false", "$-1\r\n", "_\r\n"},
	{"return true", ":1\r\n", ":1\r\n"},
	{"return {true, false}", "*2\r\n:1\r\n$-1\r\n", "*2\r\n:1\r\n_\r\n"},
	{"redis.setresp(3); return {true, false}", "*2\r\n:1\r\n:0\r\n", "*2\r\n#t\r\n#f\r\n"},
	{"return {}", "*0\r\n", "*0\r\n"},
	{"return {a=1}", "*0\r\n", "*0\r\n"},
	{"return redis.error_reply('no prefix')", "-no prefix\r\n", "-no prefix\r\n"},
	{"return redis.error_reply('key does not exist')", "-key does not exist\r\n", "-key does not exist\r\n"},
	{"return {err='-MYERR bad'}", "--MYERR bad\r\n", "--MYERR bad\r\n"},
	{"return {err='a\\r\\nb\\n'}", "-a  b\r\n", "-a  b\r\n"},
	{"return {ok='a\\r\\nb'}", "+a  b\r\n", "+a  b\r\n"},
	{"return {double=3.5}", "$3\r\n3.5\r\n", ",3.5\r\n"},
	{"return {double=0.1}", "$19\r\n0.10000000000000001\r\n", ",0.10000000000000001\r\n"},
	{"return {double=1/0}", "$3\r\ninf\r\n", ",inf\r\n"},
	{"return {double=0/0}", "$4\r\n-nan\r\n", ",-nan\r\n"},
	{"return {big_number='123\\r\\n4'}", "$6\r\n123  4\r\n", "(123  4\r\n"},
	{"return {verbatim_string={format='txt', string='hi'}}", "$2\r\nhi\r\n", "=6\r\ntxt:hi\r\n"},
	{"return {verbatim_string={format='t', string='hi'}}", "$2\r\nhi\r\n", "=6\r\nt  :hi\r\n"},
	{"return {map={a=1}}", "*2\r\n$1\r\na\r\n:1\r\n", "%1\r\n$1\r\na\r\n:1\r\n"},
	{"return {set={a=true}}", "*1\r\n$1\r\na\r\n", "~1\r\n$1\r\na\r\n"},
	{"return {err='x', ok='y'}", "-x\r\n", "-x\r\n"},
	{"return {double='x'}", "*0\r\n", "*0\r\n"},
	{"return function() end", "$-1\r\n", "_\r\n"},
	{"return tostring(1e15) .. ' ' .. tostring(0/0) .. ' ' .. tostring(1234567.5)", "$20\r\n1e+15 -nan 1234567.5\r\n", "$20\r\n1e+15 -nan 1234567.5\r\n"},
	{"redis.call('set', 'k', 0.1) return redis.call('get', 'k')", "$19\r\n0.10000000000000001\r\n", "$19\r\n0.10000000000000001\r\n"},
	{"redis.call('set', 'k', 2^53+1) return redis.call('get', 'k')", "$16\r\n9007199254740992\r\n", "$16\r\n9007199254740992\r\n"},
}

func TestLuaToRESP(t *testing.T) {
	e := New(Options{})
	for _, c := range luaReplyCases {
		for proto, want := range map[int]string{2: c.resp2, 3: c.resp3} {
			if got := runOn(t, e, newFakeRedis(time.Now()), c.script, proto); got != want {
				t.Errorf("%s under RESP%d: %q, want %q", c.script, proto, got, want)
			}
		}
	}
}

// TestRecursiveTableReply: a table that contains itself becomes nested
// arrays down to Redis's Lua stack limit, then an error element.
func TestRecursiveTableReply(t *testing.T) {
	got := runScript(t, "local a = {}; local b = {a}; a[1] = b; return a")
	want := strings.Repeat("*1\r\n", replyMaxDepth) + "-ERR reached lua stack limit\r\n"
	if got != want {
		t.Errorf("got %d bytes ending %q, want %d bytes", len(got), got[max(0, len(got)-40):], len(want))
	}
}

// dumpScript returns redis.pcall('raw')'s result as text, table keys sorted.
const dumpScript = `
local function dump(v)
  if type(v) ~= 'table' then return type(v) .. ':' .. tostring(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys+1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts+1] = tostring(k) .. '=' .. dump(v[k]) end
  return '{' .. table.concat(parts, ',') .. '}'
end
return dump(redis.pcall('raw'))
`

// TestRESPToLua: a command's reply as redis.call returns it.
func TestRESPToLua(t *testing.T) {
	for _, c := range []struct{ reply, want string }{
		{":5\r\n", "number:5"},
		{":-9223372036854775808\r\n", "number:-9.2233720368548e+18"},
		{"$3\r\nabc\r\n", "string:abc"},
		{"$0\r\n\r\n", "string:"},
		{"$-1\r\n", "boolean:false"},
		{"*-1\r\n", "boolean:false"},
		{"*0\r\n", "{}"},
		{"*2\r\n:1\r\n$1\r\nx\r\n", "{1=number:1,2=string:x}"},
		{"*2\r\n*1\r\n:1\r\n$-1\r\n", "{1={1=number:1},2=boolean:false}"},
		{"+OK\r\n", "{ok=string:OK}"},
		{"-ERR bad thing\r\n", "{err=string:ERR bad thing}"},
		{"-NOSPACE\r\n", "{err=string:ERR NOSPACE}"},
		{"-WRONGTYPE Operation\r\n", "{err=string:WRONGTYPE Operation}"},
		{"*2\r\n-ERR inner\r\n:1\r\n", "{1={err=string:ERR inner},2=number:1}"},
		{"_\r\n", "nil:nil"},
		{"#t\r\n", "boolean:true"},
		{"#f\r\n", "boolean:false"},
		{",3.5\r\n", "{double=number:3.5}"},
		{",inf\r\n", "{double=number:inf}"},
		{"(12345678901234567890\r\n", "{big_number=string:12345678901234567890}"},
		{"%1\r\n$1\r\na\r\n:1\r\n", "{map={a=number:1}}"},
		{"%2\r\n_\r\n:1\r\n$1\r\nb\r\n_\r\n", "{map={}}"},
		{"~2\r\n$1\r\na\r\n$1\r\nb\r\n", "{set={a=boolean:true,b=boolean:true}}"},
		{"=7\r\ntxt:abc\r\n", "{verbatim_string={format=string:txt,string=string:abc}}"},
		{"|1\r\n+key\r\n+val\r\n:7\r\n", "number:7"},
		{"*3\r\n:1\r\n_\r\n:3\r\n", "{1=number:1,3=number:3}"},
	} {
		call := func(args [][]byte, proto int, ro bool, out []byte) ([]byte, bool, error) {
			return append(out, c.reply...), false, nil
		}
		out, err := New(Options{}).Run(context.Background(), mustLoad(t, dumpScript), nil, nil, 2, call, false, nil)
		if err != nil {
			t.Errorf("%q: %v", c.reply, err)
			continue
		}
		if got := string(out); got != string(appendBulk(nil, c.want)) {
			t.Errorf("%q: %q, want %q", c.reply, got, c.want)
		}
	}
}

// TestMalformedCommandReply: a Caller's malformed reply fails the call, it
// never panics or reads past the reply.
func TestMalformedCommandReply(t *testing.T) {
	for _, reply := range []string{"", "$5\r\nab\r\n", ":x\r\n", "*2\r\n:1\r\n", "?\r\n", ":1\r\n:2\r\n", "$1\r\nab",
		"*99999999999\r\n", "%1\r\n:1\r\n", "#x\r\n", ",abc\r\n", "=2\r\nab\r\n", "~-1\r\n", ":1", "*1\r\n" + strings.Repeat("*1\r\n", 100) + ":1\r\n"} {
		call := func(args [][]byte, proto int, ro bool, out []byte) ([]byte, bool, error) {
			return append(out, reply...), false, nil
		}
		out, err := New(Options{}).Run(context.Background(), mustLoad(t, "return redis.pcall('raw')"), nil, nil, 2, call, false, nil)
		if err != nil || !strings.HasPrefix(string(out), "-ERR malformed reply from command") {
			t.Errorf("%q: %q %v", reply, out, err)
		}
	}
}
