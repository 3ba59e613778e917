package scripting

import (
	"context"
	"strings"
	"testing"
	"time"
)

// cannedCaller answers a limiter script's commands with fixed replies, so a
// benchmark measures the engine alone.
func cannedCaller(args [][]byte, proto int, ro bool, out []byte) ([]byte, bool, error) {
	switch strings.ToLower(string(args[0])) {
	case "incrby", "incr":
		return append(out, ":1\r\n"...), true, nil
	case "pttl":
		return append(out, ":10000\r\n"...), false, nil
	case "pexpire", "expire":
		return append(out, ":1\r\n"...), true, nil
	case "set":
		return append(out, "$-1\r\n"...), true, nil // SET NX of an existing key
	}
	return append(out, "+OK\r\n"...), false, nil
}

// benchEvalSHA measures EVALSHA as the command layer will run it: look the
// script up by SHA1, run it, append its reply to a reused buffer.
func benchEvalSHA(b *testing.B, src string, keys, argv [][]byte, call Caller) {
	cache := NewCache(CacheLimits{})
	s, err := cache.Load([]byte(src))
	if err != nil {
		b.Fatal(err)
	}
	sha := []byte(s.SHA())
	e := New(Options{})
	var reply []byte
	b.ReportAllocs()
	for b.Loop() {
		script := cache.Get(sha)
		if reply, err = e.Run(context.Background(), script, keys, argv, 2, call, false, reply[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvalSHA: ulule/limiter's increment script (INCRBY, PEXPIRE on
// the first hit, a two-integer reply) and a baseline script.
func BenchmarkEvalSHA(b *testing.B) {
	ulule := librarySource(b, "ulule_incr.lua")
	keys, argv := bytesOf([]string{"limiter:user1"}), bytesOf([]string{"1", "10000"})
	b.Run("return1", func(b *testing.B) { benchEvalSHA(b, "return 1", nil, nil, cannedCaller) })
	b.Run("ulule/canned", func(b *testing.B) { benchEvalSHA(b, ulule, keys, argv, cannedCaller) })
	b.Run("ulule/fake", func(b *testing.B) {
		f := newFakeRedis(time.Unix(1_800_000_000, 0))
		benchEvalSHA(b, ulule, keys, argv, f.Call)
	})
	b.Run("rate-limiter-flexible/canned", func(b *testing.B) {
		benchEvalSHA(b, librarySource(b, "rate-limiter-flexible_incrttl.lua"), keys, bytesOf([]string{"1", "3600"}), cannedCaller)
	})
	b.Run("rate-limiter-flexible/canned-new-key", func(b *testing.B) { // SET NX answers +OK
		newKey := func(args [][]byte, proto int, ro bool, out []byte) ([]byte, bool, error) {
			if strings.EqualFold(string(args[0]), "set") {
				return append(out, "+OK\r\n"...), true, nil
			}
			return cannedCaller(args, proto, ro, out)
		}
		benchEvalSHA(b, librarySource(b, "rate-limiter-flexible_incrttl.lua"), keys, bytesOf([]string{"1", "3600"}), newKey)
	})
	b.Run("rate-limit-redis/canned", func(b *testing.B) {
		benchEvalSHA(b, librarySource(b, "rate-limit-redis_increment.lua"), keys, bytesOf([]string{"10000"}), cannedCaller)
	})
}

// BenchmarkEvalSHAParallel runs the limiter script from every P at once, as
// shards do.
func BenchmarkEvalSHAParallel(b *testing.B) {
	cache := NewCache(CacheLimits{})
	s, err := cache.Load([]byte(librarySource(b, "ulule_incr.lua")))
	if err != nil {
		b.Fatal(err)
	}
	sha := []byte(s.SHA())
	e := New(Options{})
	keys, argv := bytesOf([]string{"limiter:user1"}), bytesOf([]string{"1", "10000"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var reply []byte
		for pb.Next() {
			if reply, err = e.Run(context.Background(), cache.Get(sha), keys, argv, 2, cannedCaller, false, reply[:0]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkBusyIdle is the check the server makes before other clients'
// commands: with no script running it must cost nothing.
func BenchmarkBusyIdle(b *testing.B) {
	e := New(Options{})
	b.ReportAllocs()
	for b.Loop() {
		if _, busy := e.Busy(); busy {
			b.Fatal("busy")
		}
	}
}

// BenchmarkCacheGet is EVALSHA's lookup, with an upper-case SHA1.
func BenchmarkCacheGet(b *testing.B) {
	cache := NewCache(CacheLimits{})
	s, _ := cache.Load([]byte("return 1"))
	sha := []byte(strings.ToUpper(s.SHA()))
	b.ReportAllocs()
	for b.Loop() {
		if cache.Get(sha) == nil {
			b.Fatal("miss")
		}
	}
}

// BenchmarkNewState is what pooling saves per run.
func BenchmarkNewState(b *testing.B) {
	e := New(Options{})
	b.ReportAllocs()
	for b.Loop() {
		newState(e).L.Close()
	}
}
