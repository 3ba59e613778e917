package commands_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testserver"
)

// TestValueLimits: a write that would take a hash, list or sorted set past
// --max-elements or --max-value-size is refused with an error naming the
// bound, and changes nothing: not the value, and no key is created.
func TestValueLimits(t *testing.T) { testserver.Models(t, testValueLimits) }

func testValueLimits(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{MaxElements: 3, MaxValueSize: 400})
	c := ts.Client(t, 2)
	ctx := context.Background()
	for _, step := range []struct {
		args []any
		want string
	}{
		{[]any{"RPUSH", "l", "a", "b", "c", "d"}, "ERR list of 4 elements exceeds the 3-element limit per key"},
		{[]any{"HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4"}, "ERR hash of 4 elements exceeds the 3-element limit per key"},
		{[]any{"ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"}, "ERR sorted set of 4 elements exceeds the 3-element limit per key"},
		// 96 bytes per field beyond its bytes: 1 + 304 + 96 = 401.
		{[]any{"HSET", "h", "f", string(make([]byte, 304))}, "ERR hash of 401 bytes exceeds the 400-byte limit (--max-value-size)"},
		{[]any{"SET", "s", string(make([]byte, 401))}, "ERR value of 401 bytes exceeds the 400-byte limit (--max-value-size)"},
	} {
		if got := testserver.RedisError(t, c, step.args...); got != step.want {
			t.Errorf("%v: %q, want %q", step.args[:3], got, step.want)
		}
	}
	if n := c.Exists(ctx, "l", "h", "z", "s").Val(); n != 0 {
		t.Fatalf("refused writes created %d keys", n)
	}
	// Within the bound, then one more: refused, the value unchanged.
	c.RPush(ctx, "l", "a", "b", "c")
	c.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"}, redis.Z{Score: 3, Member: "c"})
	c.Set(ctx, "s", string(make([]byte, 399)), 0)
	if got := testserver.RedisError(t, c, "LPUSH", "l", "x"); got != "ERR list of 4 elements exceeds the 3-element limit per key" {
		t.Errorf("LPUSH onto a full list: %q", got)
	}
	if got := testserver.RedisError(t, c, "ZADD", "z", "0", "new"); got != "ERR sorted set of 4 elements exceeds the 3-element limit per key" {
		t.Errorf("ZADD onto a full set: %q", got)
	}
	if got := testserver.RedisError(t, c, "APPEND", "s", "xy"); got != "ERR value of 401 bytes exceeds the 400-byte limit (--max-value-size)" {
		t.Errorf("APPEND past the size: %q", got)
	}
	if l := c.LRange(ctx, "l", 0, -1).Val(); !slices.Equal(l, []string{"a", "b", "c"}) {
		t.Errorf("list after a refused push: %q", l)
	}
	if n := c.ZCard(ctx, "z").Val(); n != 3 {
		t.Errorf("sorted set after a refused add: %d members", n)
	}
	if n := c.StrLen(ctx, "s").Val(); n != 399 {
		t.Errorf("string after a refused append: %d bytes", n)
	}
	// Updating in place (no new element) and shrinking stay allowed.
	if err := c.ZAdd(ctx, "z", redis.Z{Score: 9, Member: "a"}).Err(); err != nil {
		t.Errorf("ZADD updating a member of a full set: %v", err)
	}
	if err := c.LPop(ctx, "l").Err(); err != nil || c.LPush(ctx, "l", "y").Err() != nil {
		t.Errorf("pop then push on a full list: %v", err)
	}
}

// TestLibraryPatterns drives, through go-redis in both protocols, the
// command sequences the rate-limiter libraries send for their sliding log
// (the ratelimiter npm package: a sorted set in MULTI), moving window (the
// limits Python library: a list) and token bucket in a hash, with the
// injected clock, and checks that 5 of 7 hits in a window are admitted.
func TestLibraryPatterns(t *testing.T) { testserver.Models(t, testLibraryPatterns) }

func testLibraryPatterns(t *testing.T) {
	testserver.EachProtocol(t, func(t *testing.T, protocol int) {
		ts := testserver.Start(t, testserver.Options{})
		c := ts.Client(t, protocol)
		ctx := context.Background()
		const limit, window = 5, 10 * time.Second
		slidingLog := func(now time.Time) bool {
			ms := now.UnixMilli()
			var card *redis.IntCmd
			_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.ZRemRangeByScore(ctx, "log", "0", strconv.FormatInt(ms-window.Milliseconds(), 10))
				card = p.ZCard(ctx, "log")
				p.ZAdd(ctx, "log", redis.Z{Score: float64(ms), Member: strconv.FormatInt(ms, 10)})
				p.ZRange(ctx, "log", 0, 0)
				p.ZRange(ctx, "log", -limit, -limit)
				p.ZRemRangeByRank(ctx, "log", 0, -limit-1)
				p.PExpire(ctx, "log", window)
				return nil
			})
			if err != nil {
				t.Fatalf("sliding log: %v", err)
			}
			return card.Val() < limit
		}
		movingWindow := func(now time.Time) bool {
			ms := now.UnixMilli()
			oldest, err := c.LIndex(ctx, "mw", limit-1).Int64()
			if err != nil && err != redis.Nil {
				t.Fatalf("moving window: %v", err)
			}
			if err == nil && oldest > ms-window.Milliseconds() {
				return false
			}
			c.LPush(ctx, "mw", ms)
			c.LTrim(ctx, "mw", 0, limit-1)
			c.Expire(ctx, "mw", window)
			return true
		}
		bucket := func(now time.Time) bool {
			n, err := c.HIncrBy(ctx, "tb", "used", 1).Result()
			if err != nil {
				t.Fatalf("hash bucket: %v", err)
			}
			if n == 1 {
				c.Expire(ctx, "tb", window)
			}
			return n <= limit
		}
		for name, hit := range map[string]func(time.Time) bool{"sliding log": slidingLog, "moving window": movingWindow, "hash bucket": bucket} {
			ts.Clock.Set(testserver.T0)
			admitted := 0
			for range 7 {
				ts.Clock.Advance(100 * time.Millisecond)
				if hit(time.Unix(0, ts.Clock.Now())) {
					admitted++
				}
			}
			if admitted != limit {
				t.Errorf("%s: %d of 7 admitted, want %d", name, admitted, limit)
			}
			ts.Clock.Advance(window)
			if !hit(time.Unix(0, ts.Clock.Now())) {
				t.Errorf("%s: refused once the window has passed", name)
			}
		}
	})
}

// TestValueBytesInInfo: INFO memory's rl_plain_value_bytes follows what the
// values hold, by their sizes, through writes in place, removals, RENAME,
// expiry and FLUSHALL.
func TestValueBytesInInfo(t *testing.T) { testserver.Models(t, testValueBytesInInfo) }

func testValueBytesInInfo(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{})
	c := ts.Client(t, 2)
	ctx := context.Background()
	valueBytes := func() int {
		t.Helper()
		info := c.Info(ctx, "memory").Val()
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "rl_plain_value_bytes:"); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		t.Fatalf("no rl_plain_value_bytes in %q", info)
		return 0
	}
	for _, step := range []struct {
		do   func()
		want int
	}{
		{func() { c.Set(ctx, "s", "12345", 0) }, 5},
		{func() { c.Append(ctx, "s", "678") }, 8},
		{func() { c.HSet(ctx, "h", "f", "v") }, 8 + 2 + 96},
		{func() { c.HSet(ctx, "h", "g", "vv") }, 8 + 2 + 96 + 3 + 96},
		{func() { c.HDel(ctx, "h", "f") }, 8 + 3 + 96},
		{func() { c.RPush(ctx, "l", "a", "bb") }, 8 + 3 + 96 + 3 + 2*40},
		{func() { c.LPop(ctx, "l") }, 8 + 3 + 96 + 2 + 40},
		{func() { c.Rename(ctx, "l", "l2") }, 8 + 3 + 96 + 2 + 40},
		{func() { c.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "m"}) }, 8 + 3 + 96 + 2 + 40 + 1 + 96},
		{func() { c.Del(ctx, "s", "h") }, 2 + 40 + 1 + 96},
		{func() { c.Expire(ctx, "z", time.Second); ts.Clock.Advance(2 * time.Second); c.Exists(ctx, "z") }, 2 + 40},
		{func() { c.FlushAll(ctx) }, 0},
	} {
		step.do()
		if got := valueBytes(); got != step.want {
			t.Fatalf("rl_plain_value_bytes %d, want %d", got, step.want)
		}
	}
}

// TestRefusedNewKeyIsTheOnlyReply: a write creating a hash, list or sorted
// set that --maxkeys (reject) refuses answers with the error alone, and the
// connection stays in step (HINCRBYFLOAT wrote its result before storing
// the new key, so a refusal added a second reply).
func TestRefusedNewKeyIsTheOnlyReply(t *testing.T) {
	testserver.Models(t, testRefusedNewKeyIsTheOnlyReply)
}

func testRefusedNewKeyIsTheOnlyReply(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Shards: 1, MaxKeys: 1, Reject: true})
	c := ts.Client(t, 2)
	ctx := context.Background()
	c.Set(ctx, "full", "1", 0)
	for _, args := range [][]any{
		{"HINCRBYFLOAT", "h", "f", "1.5"}, {"HSET", "h", "f", "v"}, {"HINCRBY", "h", "f", "1"}, {"HSETNX", "h", "f", "v"},
		{"RPUSH", "l", "a"}, {"ZADD", "z", "1", "m"}, {"ZINCRBY", "z", "1", "m"}, {"SETNX", "s", "v"}, {"APPEND", "s", "v"},
		{"INCRBYFLOAT", "s", "1"}, {"MSET", "a", "1"}, {"RENAME", "full", "other"},
	} {
		if got := testserver.RedisError(t, c, args...); !strings.Contains(got, "key limit") && !strings.Contains(got, "maxkeys") {
			t.Errorf("%v: %q", args, got)
		}
		if pong := c.Ping(ctx).Val(); pong != "PONG" {
			t.Fatalf("after %v the next reply is %q, not PING's", args, pong)
		}
	}
	if n := c.DBSize(ctx).Val(); n != 1 || c.Get(ctx, "full").Val() != "1" {
		t.Errorf("after the refusals: %d keys, full=%q", n, c.Get(ctx, "full").Val())
	}
}
