package scripting

import (
	"context"
	"crypto/sha1"
	"strings"
	"testing"
	"time"
)

// oneKeyWords is a command table for the tests: most commands take their
// key at word 1; MSET takes keys at 1, 3, 5...; TIME takes none; KEYS and
// DBSIZE reach the whole keyspace.
func oneKeyWords(name string, words int) ([]int, bool) {
	switch name {
	case "time", "ping":
		return nil, true
	case "keys", "dbsize", "rl.allow":
		return nil, false
	case "mset":
		if words < 0 {
			return nil, false
		}
		var p []int
		for i := 1; i < words; i += 2 {
			p = append(p, i)
		}
		return p, true
	}
	return []int{1}, true
}

func reaches(t *testing.T, src string) bool {
	t.Helper()
	s, err := compile(sha1.Sum([]byte(src)), []byte(src), 1<<20)
	if err != nil {
		t.Fatalf("compile %q: %v", src, err)
	}
	return s.MayReachUndeclared(oneKeyWords)
}

func TestMayReachUndeclared(t *testing.T) {
	confined := []string{
		`return redis.call('get', KEYS[1])`,
		`local k = KEYS[1] redis.call('set', k, 1) return redis.pcall('incr', k)`,
		`redis.call('lpush', KEYS[1], unpack({1, 2, 3}))`,
		`local t = redis.call('TIME') return redis.call('get', KEYS[2])`,
		`if #KEYS > 1 then return redis.call('get', KEYS[#KEYS]) end`,
		`local function f(x) return x + 1 end return f(redis.call('incr', KEYS[1]))`,
		`return redis.error_reply(redis.sha1hex('x'))`,
		`redis.call('mset', KEYS[1], 1, KEYS[2], 2)`,
		`for i = 1, 3 do redis.call('incr', KEYS[i]) end`,
		`return 1`,
	}
	for _, src := range confined {
		if reaches(t, src) {
			t.Errorf("%q: not proven confined, want confined", src)
		}
	}
	reaching := []string{
		`return redis.call('get', 'other')`,                                                   // a literal key
		`return redis.call('get', KEYS[1] .. ':x')`,                                           // a key built from a declared one
		`local k = KEYS[1] k = 'x' return redis.call('get', k)`,                               // the alias reassigned
		`local k = KEYS[1] local function f(k) return redis.call('get', k) end return f('x')`, // shadowed
		`local c = redis.call return c('get', KEYS[1])`,                                       // redis.call aliased
		`return redis.call(ARGV[1], KEYS[1])`,                                                 // computed command name
		`KEYS[1] = 'x' return redis.call('get', KEYS[1])`,                                     // KEYS written
		`table.insert(KEYS, 'x') return redis.call('get', KEYS[2])`,                           // KEYS passed on
		`return redis.call('get', unpack(KEYS))`,                                              // keys from an expansion
		`return redis.call('keys', '*')`,                                                      // the whole keyspace
		`return _G.redis.call('get', 'x')`,                                                    // the environment
		`return loadstring("return redis.call('get', 'x')")()`,                                // code not read
		`local r = redis return r.call('get', 'x')`,                                           // redis passed on
		`redis.call('mset', KEYS[1], 1, 'x', 2)`,                                              // an undeclared key at word 3
		`redis.call('mset', KEYS[1], 1, unpack({'x', 2}))`,                                    // an expansion over key words
		`return redis.call('rl.allow', KEYS[1], 'api')`,                                       // a command not keyed by its words
		`local redis = {call = function() end} return redis.call('get', 'x')`,                 // a local redis
	}
	for _, src := range reaching {
		if !reaches(t, src) {
			t.Errorf("%q: proven confined, want not", src)
		}
	}
}

// TestMayReachUndeclaredCaches checks the answer is computed once: a
// different table later does not change it.
func TestMayReachUndeclaredCaches(t *testing.T) {
	src := `return redis.call('get', KEYS[1])`
	s, err := compile(sha1.Sum([]byte(src)), []byte(src), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if s.MayReachUndeclared(oneKeyWords) {
		t.Fatal("not confined")
	}
	if s.MayReachUndeclared(func(string, int) ([]int, bool) { return nil, false }) {
		t.Fatal("the cached answer changed")
	}
}

// FuzzReachReading checks the reading against the running engine: a script
// the reading proves confined never runs a command on a word that is a key
// but not a declared one, nor a command it could not place. The seeds are
// the libraries' scripts and the cases above; mutations that still compile
// explore the reading's corners.
func FuzzReachReading(f *testing.F) {
	for _, name := range []string{"rate-limiter-flexible_incrttl.lua", "limits_moving_window.lua", "redis_rate_allowN.lua",
		"ulule_incr.lua", "throttled_cas.lua", "limits_clear_keys.lua"} {
		f.Add(librarySource(f, name))
	}
	for _, src := range []string{
		`local k = KEYS[1] redis.call('set', k, 1) return redis.pcall('incr', k)`,
		`redis.call('mset', KEYS[1], 1, KEYS[2], 2)`,
		`for i = 1, 3 do redis.call('incr', KEYS[i]) end`,
		`local k = KEYS[1] local function f(k) return redis.call('get', k) end return f('x')`,
		`return redis.call('get', KEYS[1] .. ':x')`,
	} {
		f.Add(src)
	}
	engine := New(Options{TimeLimit: -1})
	keys, argv := bytesOf([]string{"k1", "k2"}), bytesOf([]string{"1", "2", "3", "4"})
	f.Fuzz(func(t *testing.T, src string) {
		s, err := compile(sha1.Sum([]byte(src)), []byte(src), 1<<16)
		if err != nil || s.MayReachUndeclared(oneKeyWords) {
			return
		}
		call := func(args [][]byte, proto int, readOnly bool, reply []byte) ([]byte, bool, error) {
			name := strings.ToLower(string(args[0]))
			positions, ok := oneKeyWords(name, len(args))
			if !ok {
				t.Fatalf("%q ran %q, which the reading cannot place", src, name)
			}
			for _, p := range positions {
				if p < len(args) && string(args[p]) != "k1" && string(args[p]) != "k2" {
					t.Fatalf("%q ran %q on undeclared key %q", src, name, args[p])
				}
			}
			return append(reply, ":1\r\n"...), false, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, _ = engine.Run(ctx, s, keys, argv, 2, call, false, nil) // a script's errors are its own
	})
}
