package scripting

import (
	"context"
	"testing"
	"time"
)

// libraryRig runs the libraries' scripts (testdata/libraries) on the fake
// keyspace, whose clock the test moves.
type libraryRig struct {
	t      *testing.T
	engine *Engine
	cache  *Cache
	fake   *fakeRedis
}

func newLibraryRig(t *testing.T) *libraryRig {
	return &libraryRig{t: t, engine: New(Options{}), cache: NewCache(CacheLimits{}), fake: newFakeRedis(time.Unix(1_796_021_453, 222_782_400))}
}

// eval runs a library script as EVAL would and returns the parsed reply.
func (r *libraryRig) eval(file string, keys []string, args ...string) any {
	r.t.Helper()
	s, err := r.cache.Load([]byte(librarySource(r.t, file)))
	if err != nil {
		r.t.Fatal(err)
	}
	out, err := r.engine.Run(context.Background(), s, bytesOf(keys), bytesOf(args), 2, r.fake.Call, false, nil)
	if err != nil {
		r.t.Fatalf("%s: %v", file, err)
	}
	v, _, err := parseTestReply(out)
	if err != nil {
		r.t.Fatalf("%s: %q: %v", file, out, err)
	}
	return v
}

func (r *libraryRig) admitted(hits int, admit func() bool) int {
	n := 0
	for i := 0; i < hits; i++ {
		if admit() {
			n++
		}
	}
	return n
}

func pair(t *testing.T, v any) (int64, int64) {
	t.Helper()
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		t.Fatalf("reply %#v is not a pair", v)
	}
	x, ok1 := a[0].(int64)
	y, ok2 := a[1].(int64)
	if !ok1 || !ok2 {
		t.Fatalf("reply %#v is not two integers", v)
	}
	return x, y
}

// Each library, limit 5 per 10 s, seven hits: exactly five admitted; then
// its get, penalty and reset paths, and a new window after 10 s.

func TestRateLimiterFlexible(t *testing.T) {
	r := newLibraryRig(t)
	key := []string{"rlf:user1"}
	consume := func(points string) (int64, int64) {
		return pair(t, r.eval("rate-limiter-flexible_incrttl.lua", key, points, "10", "5", "10"))
	}
	if n := r.admitted(7, func() bool { c, _ := consume("1"); return c <= 5 }); n != 5 {
		t.Fatalf("admitted %d of 7", n)
	}
	if c, ttl := consume("2"); c != 9 || ttl != 10000 {
		t.Errorf("penalty: consumed %d ttl %d", c, ttl)
	}
	if c, _ := consume("-1"); c != 8 {
		t.Errorf("reward: consumed %d", c)
	}
	r.fake.now = r.fake.now.Add(10 * time.Second)
	if c, _ := consume("1"); c != 1 {
		t.Errorf("next window: consumed %d", c)
	}
}

func TestRateLimitRedis(t *testing.T) {
	r := newLibraryRig(t)
	key := []string{"rl:client1"}
	if n := r.admitted(7, func() bool {
		hits, _ := pair(t, r.eval("rate-limit-redis_increment.lua", key, "10000"))
		return hits <= 5
	}); n != 5 {
		t.Fatalf("admitted %d of 7", n)
	}
	got := r.eval("rate-limit-redis_get.lua", key).([]any)
	if got[0] != "7" || got[1] != int64(10000) {
		t.Errorf("get: %#v", got)
	}
	r.fake.Call(bytesOf([]string{"DEL", "rl:client1"}), 2, false, nil)
	if got := r.eval("rate-limit-redis_get.lua", key).([]any); len(got) != 2 || got[0] != nil || got[1] != int64(-2) {
		t.Errorf("get after reset: %#v, want [nil -2] (false must not end the array)", got)
	}
}

func TestLimitsFixedWindow(t *testing.T) {
	r := newLibraryRig(t)
	key := []string{"LIMITER/user1/5/10/second"}
	if n := r.admitted(7, func() bool { return r.eval("limits_incr_expire.lua", key, "10", "1").(int64) <= 5 }); n != 5 {
		t.Fatalf("admitted %d of 7", n)
	}
	if ttl := r.fake.expires[key[0]].Sub(r.fake.now); ttl != 10*time.Second {
		t.Errorf("expiry %v", ttl)
	}
	r.eval("limits_incr_expire.lua", []string{"LIMITER/other/5/10/second"}, "10", "1")
	if n := r.eval("limits_clear_keys.lua", []string{"LIMITER*"}).(int64); n != 2 || len(r.fake.strings) != 0 {
		t.Errorf("reset deleted %d keys, %d left", n, len(r.fake.strings))
	}
}

func TestLimitsMovingWindow(t *testing.T) {
	r := newLibraryRig(t)
	key := []string{"LIMITER/mw/5/10/second"}
	now := "1796021453.2227824"
	if got := r.eval("limits_moving_window.lua", key, "1796021443", "5").([]any); len(got) != 0 {
		t.Fatalf("empty window: %#v, want [] (the array ends at the nil oldest)", got)
	}
	if n := r.admitted(7, func() bool { return r.eval("limits_acquire_moving_window.lua", key, now, "5", "10", "1") == int64(1) }); n != 5 {
		t.Fatalf("admitted %d of 7", n)
	}
	if got := r.fake.lists[key[0]]; len(got) != 5 || got[0] != now {
		t.Errorf("window %q: the float timestamp must be stored as %%.17g", got)
	}
	if oldest, count := pair(t, r.eval("limits_moving_window.lua", key, "1796021443", "5")); oldest != 1796021453 || count != 5 {
		t.Errorf("window stats: oldest %d count %d", oldest, count)
	}
}

func TestRedisRate(t *testing.T) {
	r := newLibraryRig(t)
	key := []string{"rate:user1"}
	allow := func() []any { return r.eval("redis_rate_allowN.lua", key, "5", "5", "10", "1").([]any) }
	if n := r.admitted(7, func() bool { return allow()[0] == int64(1) }); n != 5 {
		t.Fatalf("admitted %d of 7", n)
	}
	got := allow()
	if got[0] != int64(0) || got[2] != "2" || got[3] != "10" {
		t.Errorf("denied: %#v, want retry after 2 s and reset after 10 s as tostring prints them", got)
	}
	most := r.eval("redis_rate_allowAtMost.lua", []string{"rate:user2"}, "5", "5", "10", "3").([]any)
	if most[0] != int64(3) || most[1] != int64(2) || most[2] != "-1" || most[3] != "6" {
		t.Errorf("allowAtMost: %#v", most)
	}
}

func TestUlule(t *testing.T) {
	r := newLibraryRig(t)
	key := []string{"limiter:user1"}
	if c, ttl := pair(t, r.eval("ulule_peek.lua", key)); c != 0 || ttl != 0 {
		t.Errorf("peek before: %d %d", c, ttl)
	}
	if n := r.admitted(7, func() bool { c, _ := pair(t, r.eval("ulule_incr.lua", key, "1", "10000")); return c <= 5 }); n != 5 {
		t.Fatalf("admitted %d of 7", n)
	}
	if c, ttl := pair(t, r.eval("ulule_peek.lua", key)); c != 7 || ttl != 10000 {
		t.Errorf("peek: %d %d", c, ttl)
	}
	if c, _ := pair(t, r.eval("ulule_incr.lua", key, "2", "10000")); c != 9 {
		t.Errorf("increment by 2: %d", c)
	}
}

func TestThrottled(t *testing.T) {
	r := newLibraryRig(t)
	key := []string{"throttled:user1"}
	if got := r.eval("throttled_cas.lua", key, "1", "2", "10"); !isError(got, "key does not exist") {
		t.Errorf("missing key: %#v, want the error reply 'key does not exist' without ERR", got)
	}
	r.fake.Call(bytesOf([]string{"SET", key[0], "1796021528850378000"}), 2, false, nil)
	if got := r.eval("throttled_cas.lua", key, "1796021528850378000", "1796021530850378000", "10"); got != int64(1) {
		t.Errorf("CAS: %#v", got)
	}
	if got := r.eval("throttled_cas.lua", key, "1796021528850378000", "1", "10"); got != int64(0) {
		t.Errorf("CAS with a stale value: %#v", got)
	}
	if r.fake.strings[key[0]] != "1796021530850378000" {
		t.Errorf("stored %q", r.fake.strings[key[0]])
	}
}

func isError(v any, text string) bool {
	err, ok := v.(error)
	return ok && err.Error() == text
}
