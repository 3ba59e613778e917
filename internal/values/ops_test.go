package values

import (
	"fmt"
	"math"
	"strconv"
	"testing"
)

// Table tests of single operations. Expected answers are redis-server
// 7.0.15's replies to the same commands (recorded with redis-cli).

func TestHashOperations(t *testing.T) {
	h := NewHash()
	if n, _ := h.Set(Limits{}, bs("a", "1", "a", "2")); n != 1 {
		t.Errorf("HSET h a 1 a 2 = %d, want 1", n)
	}
	if v, _ := h.Get([]byte("a")); string(v) != "2" {
		t.Errorf("HGET a = %q after HSET a 1 a 2, want 2", v)
	}
	if n := h.Del(bs("a", "a", "b")...); n != 1 {
		t.Errorf("HDEL a a b = %d, want 1", n)
	}
	if _, err := h.Set(Limits{}, bs("a", "1", "b")); err != ErrSyntax {
		t.Errorf("HSET with an odd count: %v", err)
	}
	// An empty value exists and is not nil.
	_, _ = h.Set(Limits{}, bs("empty", ""))
	if v, ok := h.Get([]byte("empty")); !ok || v == nil || len(v) != 0 {
		t.Errorf("HGET of an empty value = %q, %v", v, ok)
	}
	if ok, _ := h.SetNX(Limits{}, []byte("empty"), []byte("x")); ok {
		t.Error("HSETNX of an existing field set it")
	}
	// Order: first-added, kept across updates and deletes.
	h = NewHash()
	_, _ = h.Set(Limits{}, bs("a", "1", "b", "2", "c", "3"))
	h.Del([]byte("b"))
	_, _ = h.Set(Limits{}, bs("b", "4", "a", "5"))
	var order []string
	for f, v := range h.All() {
		order = append(order, f+"="+string(v))
	}
	if fmt.Sprint(order) != "[a=5 c=3 b=4]" {
		t.Errorf("HGETALL order %v, want [a=5 c=3 b=4]", order)
	}
}

func TestHIncrBy(t *testing.T) {
	notInt := ErrHashValueNotInteger
	tests := []struct {
		cur  string // "" for a missing field
		incr int64
		want int64
		err  error
	}{
		{"", 5, 5, nil},
		{"10", -15, -5, nil},
		{"-9223372036854775808", 1, math.MinInt64 + 1, nil},
		{"9223372036854775807", 1, 0, ErrOverflow},
		{"-9223372036854775808", -1, 0, ErrOverflow},
		{"9223372036854775807", math.MinInt64, -1, nil},
		{"+5", 1, 0, notInt}, {"05", 1, 0, notInt}, {"-0", 1, 0, notInt}, {" 1", 1, 0, notInt},
		{"abc", 1, 0, notInt}, {"1.5", 1, 0, notInt}, {"0.1", 1, 0, notInt},
	}
	for _, tt := range tests {
		h := NewHash()
		if tt.cur != "" {
			_, _ = h.Set(Limits{}, bs("f", tt.cur))
		}
		got, err := h.IncrBy(Limits{}, []byte("f"), tt.incr)
		if got != tt.want || err != tt.err {
			t.Errorf("HINCRBY on %q by %d = %d, %v; want %d, %v", tt.cur, tt.incr, got, err, tt.want, tt.err)
		}
		v, _ := h.Get([]byte("f"))
		if tt.err == nil && string(v) != strconv.FormatInt(tt.want, 10) || tt.err != nil && string(v) != tt.cur {
			t.Errorf("HINCRBY on %q by %d stored %q", tt.cur, tt.incr, v)
		}
	}
}

func listOf(t *testing.T, elems ...string) *List {
	t.Helper()
	l := NewList()
	if _, err := l.PushRight(Limits{}, bs(elems...)...); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestListOperations(t *testing.T) {
	l := NewList()
	if n, _ := l.PushLeft(Limits{}, bs("a", "b", "c")...); n != 3 || dumpList(l) != `"c" "b" "a" ` {
		t.Errorf("LPUSH a b c = %d, list %s; want 3, c b a", n, dumpList(l))
	}
	l = listOf(t, "a", "b", "c", "d", "e")
	if got := l.AppendPopLeft([][]byte{}, 0); len(got) != 0 {
		t.Errorf("LPOP 0 = %q", got)
	}
	if got := fmt.Sprintf("%q", l.AppendPopRight(nil, 2)); got != `["e" "d"]` {
		t.Errorf("RPOP 2 = %s, want [e d]", got)
	}
	if e, ok := l.Index(-1); !ok || string(e) != "c" {
		t.Errorf("LINDEX -1 = %q, %v", e, ok)
	}
	if _, ok := l.Index(100); ok {
		t.Error("LINDEX 100 found an element")
	}
	if err := l.Set(Limits{}, 10, []byte("x")); err != ErrIndexOutOfRange {
		t.Errorf("LSET 10: %v", err)
	}
	_, _ = l.PushRight(Limits{}, bs("a", "b", "a", "c", "a")...)
	if n := l.Rem(-2, []byte("a")); n != 2 || dumpList(l) != `"a" "b" "c" "a" "b" "c" ` {
		t.Errorf("LREM -2 a = %d, list %s; want 2, a b c a b c", n, dumpList(l))
	}
	if n := l.Rem(1, []byte("b")); n != 1 || dumpList(l) != `"a" "c" "a" "b" "c" ` {
		t.Errorf("LREM 1 b = %d, list %s", n, dumpList(l))
	}
	if n := l.Rem(0, []byte("c")); n != 2 || dumpList(l) != `"a" "a" "b" ` {
		t.Errorf("LREM 0 c = %d, list %s", n, dumpList(l))
	}
	if n := l.Trim(5, 2); n != 3 || l.Len() != 0 {
		t.Errorf("LTRIM 5 2 removed %d, left %d; want all", n, l.Len())
	}
	if _, ok := l.PopLeft(); ok {
		t.Error("LPOP of an empty list")
	}
	_, _ = l.PushRight(Limits{}, []byte(""))
	if e, ok := l.Index(0); !ok || e == nil {
		t.Errorf("an empty element reads back as %v, %v", e, ok)
	}
}

// The moving window of the limits library (acquire_moving_window.lua):
// LINDEX limit-1, LPUSH now, LTRIM 0 limit-1 on every hit. After limit
// hits within the window the entry at limit-1 is recent and the hit is
// refused. Its steady state reuses the trimmed slots: no allocation.
func TestMovingWindowPattern(t *testing.T) {
	const limit, expiry = 5, 10.0
	l := NewList()
	admitted := 0
	for i := range 7 {
		now := 1796021453.2227824 + float64(i)
		if e, ok := l.Index(limit - 1); ok {
			if ts, _ := strconv.ParseFloat(string(e), 64); ts >= now-expiry {
				continue
			}
		}
		_, _ = l.PushLeft(Limits{}, strconv.AppendFloat(nil, now, 'g', 17, 64))
		l.Trim(0, limit-1)
		admitted++
	}
	if admitted != limit || l.Len() != limit {
		t.Fatalf("admitted %d of 7 with a window of %d (list of %d)", admitted, limit, l.Len())
	}
	elem := []byte("1796021453.2227824")
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = l.PushLeft(Limits{}, elem)
		l.Trim(0, limit-1)
	})
	if allocs != 0 {
		t.Errorf("LPUSH+LTRIM in steady state allocates %v times", allocs)
	}
}

func zsetOf(t *testing.T, pairs ...string) *ZSet {
	t.Helper()
	z := NewZSet()
	if _, err := z.Add(Limits{}, ZAddOptions{}, bs(pairs...)); err != nil {
		t.Fatal(err)
	}
	return z
}

func members(ms []ScoredMember) string {
	s := ""
	for _, m := range ms {
		s += m.Member
	}
	return s
}

func TestZAddOptions(t *testing.T) {
	ch := ZAddOptions{CH: true}
	tests := []struct {
		start []string
		opts  ZAddOptions
		pairs []string
		reply string // the integer, the INCR score, or nil
	}{
		{nil, ch, []string{"1", "a", "2", "a"}, "2"},
		{[]string{"2", "a"}, ch, []string{"3", "a", "3", "a"}, "1"},
		{nil, ZAddOptions{}, []string{"1", "a", "1", "a"}, "1"},
		{[]string{"1", "a"}, ZAddOptions{}, []string{"5", "a", "1", "b"}, "1"},
		{[]string{"1", "a"}, ZAddOptions{NX: true}, []string{"5", "a", "1", "b"}, "1"},
		{[]string{"1", "a"}, ZAddOptions{XX: true, CH: true}, []string{"5", "a", "1", "b"}, "1"},
		{[]string{"5", "a"}, ZAddOptions{GT: true, CH: true}, []string{"3", "a", "1", "b"}, "1"},
		{[]string{"5", "a"}, ZAddOptions{LT: true, CH: true}, []string{"3", "a"}, "1"},
		{[]string{"5", "a"}, ZAddOptions{XX: true, GT: true, CH: true}, []string{"6", "a", "7", "b"}, "1"},
		{[]string{"0.1", "a"}, ZAddOptions{Incr: true, NX: true}, []string{"5", "a"}, "nil"},
		{[]string{"0.1", "a"}, ZAddOptions{Incr: true, XX: true}, []string{"5", "nonex"}, "nil"},
		{[]string{"0.1", "a"}, ZAddOptions{Incr: true, GT: true}, []string{"0", "a"}, "nil"},
		{[]string{"0.1", "a"}, ZAddOptions{Incr: true}, []string{"0", "a"}, "0.10000000000000001"},
		{[]string{"inf", "h"}, ZAddOptions{Incr: true}, []string{"inf", "h"}, "inf"},
		{nil, ZAddOptions{Incr: true}, []string{"-0", "neg"}, "-0"},
		{nil, ZAddOptions{Incr: true}, []string{"0x10", "hex"}, "16"},
	}
	for _, tt := range tests {
		z := NewZSet()
		if tt.start != nil {
			z = zsetOf(t, tt.start...)
		}
		res, err := z.Add(Limits{}, tt.opts, bs(tt.pairs...))
		got := fmt.Sprint(res.Count(tt.opts))
		if tt.opts.Incr {
			got = "nil"
			if res.Done {
				got = string(AppendScore(nil, res.Score))
			}
		}
		if err != nil || got != tt.reply {
			t.Errorf("ZADD %+v %q on %q = %s, %v; want %s", tt.opts, tt.pairs, tt.start, got, err, tt.reply)
		}
		if err := z.checkConsistency(); err != nil {
			t.Error(err)
		}
	}
	// -0 is stored as 0 (ZSCORE answers "0") though ZINCRBY answers "-0".
	z := NewZSet()
	if s, _ := z.IncrBy(Limits{}, math.Copysign(0, -1), []byte("m")); !math.Signbit(s) {
		t.Error("ZINCRBY -0 of a new member did not answer -0")
	}
	if s, _ := z.Score([]byte("m")); math.Signbit(s) {
		t.Error("ZSCORE after ZINCRBY -0 answers -0")
	}
}

func TestZSetRanges(t *testing.T) {
	z := zsetOf(t, "1", "a", "2", "b", "3", "c", "4", "d", "5", "e")
	all := ScoreRange{Min: math.Inf(-1), Max: math.Inf(1)}
	byScore := []struct {
		r             ScoreRange
		rev           bool
		offset, count int
		want          string
	}{
		{all, false, -1, 2, ""},
		{all, false, 1, -1, "bcde"},
		{all, false, 1, 0, ""},
		{all, false, 5, 1, ""},
		{all, false, 4, 1, "e"},
		{all, true, 1, 2, "dc"},
		{ScoreRange{Min: 3, Max: 5}, true, 0, -1, "edc"},
		{ScoreRange{Min: 5, Max: 3}, true, 0, -1, ""},
		{ScoreRange{Min: 2, Max: 4, MinExclusive: true}, false, 0, -1, "cd"},
		{ScoreRange{Min: 2, Max: 4, MaxExclusive: true}, true, 0, -1, "cb"},
		{ScoreRange{Min: 3, Max: 3}, false, 0, -1, "c"},
		{ScoreRange{Min: 3, Max: 3, MinExclusive: true}, false, 0, -1, ""},
		{ScoreRange{Min: math.Inf(1), Max: math.Inf(1)}, false, 0, -1, ""},
	}
	for _, tt := range byScore {
		if got := members(z.AppendRangeByScore(nil, tt.r, tt.rev, tt.offset, tt.count)); got != tt.want {
			t.Errorf("range %+v rev=%v limit %d %d = %q, want %q", tt.r, tt.rev, tt.offset, tt.count, got, tt.want)
		}
	}
	counts := []struct {
		min, max string
		want     int
	}{{"", "", 0}, {"(", "5", 5}, {" 1", "5", 5}, {"1e400", "inf", 0}, {"-1e400", "+inf", 5}, {"(-inf", "(+inf", 5},
		{"0x1", "0x3", 3}, {"(1", "(5", 3}}
	for _, tt := range counts {
		r, err := ParseScoreRange([]byte(tt.min), []byte(tt.max))
		if got := z.Count(r); err != nil || got != tt.want {
			t.Errorf("ZCOUNT %q %q = %d, %v; want %d", tt.min, tt.max, got, err, tt.want)
		}
	}
	if got := members(z.AppendRangeByRank(nil, -2, -1, false)); got != "de" {
		t.Errorf("ZRANGE -2 -1 = %q", got)
	}
	if got := members(z.AppendRangeByRank(nil, 0, 1, true)); got != "ed" {
		t.Errorf("ZREVRANGE 0 1 = %q", got)
	}
	if n := z.RemRangeByRank(0, -4); n != 2 || members(z.AppendRangeByRank(nil, 0, -1, false)) != "cde" {
		t.Errorf("ZREMRANGEBYRANK 0 -4 = %d", n)
	}
	if n := z.RemRangeByScore(ScoreRange{Min: 4, Max: math.Inf(1), MinExclusive: true}); n != 1 {
		t.Errorf("ZREMRANGEBYSCORE (4 +inf = %d", n)
	}
	if n := z.Rem(bs("c", "c", "x", "d")...); n != 2 || z.Card() != 0 {
		t.Errorf("ZREM c c x d = %d, left %d", n, z.Card())
	}
}

// The sliding log of the ratelimiter npm package, as traced against Redis:
// per call ZREMRANGEBYSCORE 0 now-window, ZCARD, ZADD now now, ZRANGE 0 0,
// ZRANGE -max -max, ZREMRANGEBYRANK 0 -(max+1); remaining is max - ZCARD
// (before the add), so 7 calls with max 5 leave 5,4,3,2,1,0,0.
func TestSlidingLogPattern(t *testing.T) {
	const maxHits, window = 5, 10_000_000 // microseconds
	z := NewZSet()
	var remaining []int
	for i := range 7 {
		now := 1796021406436562 + int64(i)*1000
		z.RemRangeByScore(ScoreRange{Min: 0, Max: float64(now - window)})
		count := z.Card()
		ts := []byte(strconv.FormatInt(now, 10))
		if _, err := z.Add(Limits{}, ZAddOptions{}, [][]byte{ts, ts}); err != nil {
			t.Fatal(err)
		}
		z.AppendRangeByRank(nil, 0, 0, false)
		z.AppendRangeByRank(nil, -maxHits, -maxHits, false)
		z.RemRangeByRank(0, -(maxHits + 1))
		remaining = append(remaining, max(maxHits-count, 0))
	}
	if fmt.Sprint(remaining) != "[5 4 3 2 1 0 0]" {
		t.Errorf("remaining %v, want [5 4 3 2 1 0 0]", remaining)
	}
	if z.Card() != maxHits {
		t.Errorf("the log keeps %d entries, want %d", z.Card(), maxHits)
	}
}
