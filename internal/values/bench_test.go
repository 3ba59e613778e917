package values

import (
	"math"
	"strconv"
	"testing"
)

// Benchmarks of the operations the rate-limiter libraries repeat on every
// request, over values of a realistic size, each with b.ReportAllocs.

// BenchmarkSlidingLog is one request of the sorted-set sliding log (the
// ratelimiter npm package): ZREMRANGEBYSCORE 0 now-window, ZCARD, ZADD
// now now, ZRANGE 0 0, ZRANGE -max -max, ZREMRANGEBYRANK 0 -(max+1), over
// a log of about max members.
func BenchmarkSlidingLog(b *testing.B) {
	for _, maxHits := range []int{10, 100, 10000} {
		b.Run(strconv.Itoa(maxHits), func(b *testing.B) {
			z := NewZSet()
			now := int64(1796021406436562)
			window := int64(maxHits) // one hit per microsecond fills the log
			ts := make([]byte, 0, 20)
			pairs := make([][]byte, 2)
			var out []ScoredMember
			step := func() {
				now++
				z.RemRangeByScore(ScoreRange{Min: 0, Max: float64(now - window)})
				_ = z.Card()
				ts = strconv.AppendInt(ts[:0], now, 10)
				pairs[0], pairs[1] = ts, ts
				_, _ = z.Add(Limits{}, ZAddOptions{}, pairs)
				out = z.AppendRangeByRank(out[:0], 0, 0, false)
				out = z.AppendRangeByRank(out[:0], -maxHits, -maxHits, false)
				z.RemRangeByRank(0, -(maxHits + 1))
			}
			for range 2 * maxHits {
				step()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				step()
			}
		})
	}
}

func filledZSet(n int) *ZSet {
	z := NewZSet()
	for i := range n {
		s := []byte(strconv.Itoa(i))
		_, _ = z.Add(Limits{}, ZAddOptions{}, [][]byte{s, s})
	}
	return z
}

// BenchmarkZAdd adds a new member to a set of 1000 and removes it again
// (ZADD + ZREM), so the set stays the same size.
func BenchmarkZAdd(b *testing.B) {
	z := filledZSet(1000)
	pairs := [][]byte{[]byte("500.5"), []byte("new-member")}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_, _ = z.Add(Limits{}, ZAddOptions{}, pairs)
		z.Rem(pairs[1])
	}
}

// BenchmarkZAddUpdate changes an existing member's score back and forth.
func BenchmarkZAddUpdate(b *testing.B) {
	z := filledZSet(1000)
	a := [][]byte{[]byte("250.5"), []byte("500")}
	c := [][]byte{[]byte("500"), []byte("500")}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_, _ = z.Add(Limits{}, ZAddOptions{}, a)
		_, _ = z.Add(Limits{}, ZAddOptions{}, c)
	}
}

func BenchmarkZScore(b *testing.B) {
	z := filledZSet(1000)
	m := []byte("500")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_, _ = z.Score(m)
	}
}

func BenchmarkZCard(b *testing.B) {
	z := filledZSet(1000)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = z.Card()
	}
}

// BenchmarkZCount counts a middle range of a set of 100000: O(log² n).
func BenchmarkZCount(b *testing.B) {
	z := filledZSet(100_000)
	r := ScoreRange{Min: 25_000, Max: 75_000, MaxExclusive: true}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if z.Count(r) != 50_000 {
			b.Fatal("wrong count")
		}
	}
}

// BenchmarkZRangeByScoreLimit reads 10 members from the middle of a set of
// 100000 (ZRANGEBYSCORE ... LIMIT 1000 10).
func BenchmarkZRangeByScoreLimit(b *testing.B) {
	z := filledZSet(100_000)
	r := ScoreRange{Min: 25_000, Max: math.Inf(1)}
	var out []ScoredMember
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		out = z.AppendRangeByScore(out[:0], r, false, 1000, 10)
	}
}

// BenchmarkMovingWindow is one admitted request of the limits library's
// moving window: LINDEX limit-1, LPUSH now, LTRIM 0 limit-1.
func BenchmarkMovingWindow(b *testing.B) {
	for _, limit := range []int{10, 1000} {
		b.Run(strconv.Itoa(limit), func(b *testing.B) {
			l := NewList()
			elem := []byte("1796021453.2227824")
			for range limit {
				_, _ = l.PushLeft(Limits{}, elem)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				_, _ = l.Index(limit - 1)
				_, _ = l.PushLeft(Limits{}, elem)
				l.Trim(0, limit-1)
			}
		})
	}
}

func BenchmarkLIndex(b *testing.B) {
	l := NewList()
	for i := range 1000 {
		_, _ = l.PushRight(Limits{}, []byte(strconv.Itoa(i)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		_, _ = l.Index(i%2000 - 1000)
	}
}

// BenchmarkListPushPop pushes and pops at both ends.
func BenchmarkListPushPop(b *testing.B) {
	l := NewList()
	e := []byte("element")
	b.ReportAllocs()
	for range b.N {
		_, _ = l.PushRight(Limits{}, e)
		_, _ = l.PushLeft(Limits{}, e)
		l.PopLeft()
		l.PopRight()
	}
}

// BenchmarkHashBucket is a token bucket kept in a hash: HSET of two fields
// then HGET of both.
func BenchmarkHashBucket(b *testing.B) {
	h := NewHash()
	pairs := [][]byte{[]byte("tokens"), []byte("42"), []byte("ts"), []byte("1796021406436")}
	b.ReportAllocs()
	for range b.N {
		_, _ = h.Set(Limits{}, pairs)
		_, _ = h.Get(pairs[0])
		_, _ = h.Get(pairs[2])
	}
}

func BenchmarkHIncrBy(b *testing.B) {
	h := NewHash()
	f := []byte("counter")
	b.ReportAllocs()
	for range b.N {
		_, _ = h.IncrBy(Limits{}, f, 1)
	}
}

func BenchmarkHIncrByFloat(b *testing.B) {
	h := NewHash()
	f := []byte("f")
	incr, _ := ParseFloatIncrement([]byte("0.1"))
	b.ReportAllocs()
	for range b.N {
		_, _ = h.IncrByFloat(Limits{}, f, incr)
	}
}

// BenchmarkHIncrByFloatExtreme adds the smallest increment to the largest
// long double Redis can hold: the costliest exact arithmetic there is.
func BenchmarkHIncrByFloatExtreme(b *testing.B) {
	h := NewHash()
	f := []byte("f")
	_, _ = h.Set(Limits{}, [][]byte{f, []byte("1.18973149535723176502e+4932")})
	incr, _ := ParseFloatIncrement([]byte("-1.9e-4951"))
	b.ReportAllocs()
	for range b.N {
		_, _ = h.IncrByFloat(Limits{}, f, incr)
	}
}

func BenchmarkParseScore(b *testing.B) {
	for _, s := range []string{"1796021406436562", "0.10000000000000001", "-inf"} {
		b.Run(s, func(b *testing.B) {
			in := []byte(s)
			b.ReportAllocs()
			for range b.N {
				_, _ = ParseScore(in)
			}
		})
	}
}

func BenchmarkAppendScore(b *testing.B) {
	buf := make([]byte, 0, 32)
	b.ReportAllocs()
	for i := range b.N {
		buf = AppendScore(buf[:0], float64(i)*0.1)
	}
}
