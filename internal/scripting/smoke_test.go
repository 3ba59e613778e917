package scripting

import (
	"context"
	"testing"
	"time"
)

func TestSmoke(t *testing.T) {
	e := New(Options{})
	c := NewCache(CacheLimits{})
	f := newFakeRedis(time.Unix(1_800_000_000, 0))
	for _, src := range []string{
		"return 1",
		"return {1, 2, 'x', {ok='OK'}, {err='E x'}}",
		"return redis.call('set', KEYS[1], ARGV[1])",
		"return redis.call('get', KEYS[1])",
		"return redis.call('incr', KEYS[1])",
		"return x",
		"x = 1",
		"error('boom')",
		"\n\nredis.call('nosuch')",
		"return redis.pcall('nosuch')",
		"return tostring(1e15) .. ' ' .. tostring(0/0)",
		"return string.format('%5.2f|%d|%s|%q|%x', 3.14159, 3.7, 'a', 'x\"y\\n', 255)",
		"return {string.find('hello world', 'o w'), string.match('key=val', '(%w+)=(%w+)')}",
		"return (string.gsub('hello world', 'o', '0'))",
		"return bit.tohex(bit.bxor(5, 3))",
		"return cjson.encode({1,2,3})",
		"return rawset(_G, 'x', 1)",
		"local g = getmetatable(_G); g.__index = {}",
		"setmetatable(_G, {})",
		"return 1 +",
		"return redis.sha1hex('')",
		"redis.setresp(3); return redis.call('hgetall', 'h')",
		"return {double=3.5}",
		"local ok, e = pcall(redis.call, 'nosuch'); return e",
		"return table.concat({1, 2.5, 1e15}, ',')",
	} {
		s, err := c.Load([]byte(src))
		if err != nil {
			t.Logf("%q: load: %v", src, err)
			continue
		}
		out, err := e.Run(context.Background(), s, [][]byte{[]byte("k")}, [][]byte{[]byte("5")}, 2, f.Call, false, nil)
		t.Logf("%q: %q %v", src, out, err)
	}
}
