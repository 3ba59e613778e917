package values

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// value is what the limit tests need of each type.
type value interface {
	Size() int
	AppendBinary([]byte) []byte
}

// refused runs op on v and checks that it failed with a *LimitError on
// what, leaving v byte for byte as it was.
func refused(t *testing.T, name string, v value, what string, op func() error) {
	t.Helper()
	before, size := v.AppendBinary(nil), v.Size()
	err := op()
	var le *LimitError
	if !errors.As(err, &le) || le.What != what || !errors.Is(err, ErrLimit) {
		t.Fatalf("%s: got %v, want a LimitError on %s", name, err, what)
	}
	if after := v.AppendBinary(nil); !bytes.Equal(before, after) || v.Size() != size {
		t.Fatalf("%s: refused, but the value changed", name)
	}
}

func mustOK(t *testing.T, name string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestHashLimits(t *testing.T) {
	lim := Limits{MaxElements: 2}
	h := NewHash()
	_, err := h.Set(lim, bs("a", "1", "b", "2"))
	mustOK(t, "HSET to the limit", err)
	refused(t, "HSET a third field", h, "elements", func() error { _, err := h.Set(lim, bs("a", "9", "c", "3")); return err })
	refused(t, "HSETNX a third field", h, "elements", func() error { _, err := h.SetNX(lim, []byte("c"), []byte("3")); return err })
	refused(t, "HINCRBY a third field", h, "elements", func() error { _, err := h.IncrBy(lim, []byte("c"), 1); return err })
	refused(t, "HINCRBYFLOAT a third field", h, "elements", func() error {
		_, err := h.IncrByFloat(lim, []byte("c"), LongDouble{})
		return err
	})
	_, err = h.Set(lim, bs("a", "x", "a", "y", "b", "z"))
	mustOK(t, "HSET of existing fields at the limit", err)

	_, err = h.Set(lim, bs("a", "9"))
	mustOK(t, "HSET", err)
	lim = Limits{MaxSize: h.Size()}
	refused(t, "HSET a longer value", h, "bytes", func() error { _, err := h.Set(lim, bs("a", "xyz")); return err })
	refused(t, "HINCRBY to a longer number", h, "bytes", func() error { _, err := h.IncrBy(lim, []byte("a"), 1); return err })
	refused(t, "HINCRBYFLOAT to a longer number", h, "bytes", func() error {
		x, _ := ParseFloatIncrement([]byte("0.5"))
		_, err := h.IncrByFloat(lim, []byte("a"), x)
		return err
	})
	_, err = h.IncrBy(lim, []byte("a"), -1)
	mustOK(t, "HINCRBY to a number as long", err)

	// A hash over a lowered limit can shrink and keep its size, not grow.
	lim = Limits{MaxElements: 1, MaxSize: 1}
	_, err = h.Set(lim, bs("a", ""))
	mustOK(t, "HSET a shorter value over the limits", err)
	if h.Del([]byte("b")) != 1 {
		t.Fatal("HDEL over the limits")
	}
	refused(t, "HSET growing over the byte limit", h, "bytes", func() error { _, err := h.Set(lim, bs("a", "long")); return err })
}

func TestListLimits(t *testing.T) {
	lim := Limits{MaxElements: 3}
	l := NewList()
	_, err := l.PushRight(lim, bs("a", "b")...)
	mustOK(t, "RPUSH", err)
	refused(t, "RPUSH past the limit", l, "elements", func() error { _, err := l.PushRight(lim, bs("c", "d")...); return err })
	refused(t, "LPUSH past the limit", l, "elements", func() error { _, err := l.PushLeft(lim, bs("c", "d")...); return err })
	_, err = l.PushLeft(lim, []byte("c"))
	mustOK(t, "LPUSH to the limit", err)

	lim = Limits{MaxSize: l.Size()}
	refused(t, "LSET a longer element", l, "bytes", func() error { return l.Set(lim, 0, []byte("longer")) })
	refused(t, "RPUSH past the byte limit", l, "bytes", func() error { _, err := l.PushRight(lim, []byte("")); return err })
	mustOK(t, "LSET an element as long", l.Set(lim, 0, []byte("z")))
	mustOK(t, "LSET a shorter element", l.Set(lim, -1, []byte("")))
	if err := l.Set(lim, 3, []byte("")); err != ErrIndexOutOfRange {
		t.Fatalf("LSET out of range: %v", err)
	}
}

func TestZSetLimits(t *testing.T) {
	lim := Limits{MaxElements: 2}
	z := NewZSet()
	_, err := z.Add(lim, ZAddOptions{}, bs("1", "a", "2", "b"))
	mustOK(t, "ZADD to the limit", err)
	refused(t, "ZADD a third member", z, "elements", func() error {
		_, err := z.Add(lim, ZAddOptions{}, bs("5", "a", "3", "c"))
		return err
	})
	refused(t, "ZADD INCR a third member", z, "elements", func() error {
		_, err := z.Add(lim, ZAddOptions{Incr: true}, bs("3", "c"))
		return err
	})
	refused(t, "ZINCRBY a third member", z, "elements", func() error { _, err := z.IncrBy(lim, 1, []byte("c")); return err })
	// XX adds nothing, so it is never refused on elements; NX, GT and LT
	// still add new members.
	_, err = z.Add(lim, ZAddOptions{XX: true}, bs("3", "c", "4", "a"))
	mustOK(t, "ZADD XX at the limit", err)
	refused(t, "ZADD GT of a new member", z, "elements", func() error {
		_, err := z.Add(lim, ZAddOptions{GT: true}, bs("3", "c"))
		return err
	})
	// A member named twice counts once.
	lim = Limits{MaxElements: 3}
	res, err := z.Add(lim, ZAddOptions{CH: true}, bs("1", "c", "2", "c"))
	mustOK(t, "ZADD of one new member twice", err)
	if res.Count(ZAddOptions{CH: true}) != 2 {
		t.Fatalf("ZADD CH 1 c 2 c counted %d, Redis counts 2 (added, then updated)", res.Count(ZAddOptions{CH: true}))
	}

	lim = Limits{MaxSize: z.Size() + ZSetEntryOverhead + 2}
	refused(t, "ZADD a member past the byte limit", z, "bytes", func() error {
		_, err := z.Add(lim, ZAddOptions{}, bs("1", "abc"))
		return err
	})
	_, err = z.Add(lim, ZAddOptions{}, bs("1", "ab"))
	mustOK(t, "ZADD a member to the byte limit", err)
}

// A refused ZADD reports its option and score errors before anything
// else, and the limit before NaN: no error leaves a change behind.
func TestZAddErrorsChangeNothing(t *testing.T) {
	z := NewZSet()
	_, _ = z.Add(Limits{}, ZAddOptions{}, bs("inf", "a", "1", "b"))
	tests := []struct {
		opts  ZAddOptions
		pairs []string
		want  error
	}{
		{ZAddOptions{}, []string{"1"}, ErrSyntax},
		{ZAddOptions{}, nil, ErrSyntax},
		{ZAddOptions{NX: true, XX: true, GT: true}, []string{"1", "a"}, ErrXXAndNX},
		{ZAddOptions{GT: true, LT: true}, []string{"1", "a"}, ErrGTLTNX},
		{ZAddOptions{NX: true, LT: true}, []string{"x", "a"}, ErrGTLTNX},
		{ZAddOptions{Incr: true}, []string{"1", "a", "2", "b"}, ErrIncrPair},
		{ZAddOptions{Incr: true, NX: true, GT: true}, []string{"1", "a", "2", "b"}, ErrGTLTNX},
		{ZAddOptions{}, []string{"1", "c", "x", "d"}, ErrNotFloat},
		{ZAddOptions{}, []string{"1", "c", "nan", "d"}, ErrNotFloat},
		{ZAddOptions{Incr: true}, []string{"-inf", "a"}, ErrScoreNaN},
		{ZAddOptions{Incr: true, XX: true}, []string{"-inf", "a"}, ErrScoreNaN},
	}
	for _, tt := range tests {
		before := z.AppendBinary(nil)
		if _, err := z.Add(Limits{}, tt.opts, bs(tt.pairs...)); err != tt.want {
			t.Errorf("ZADD %+v %q: %v, want %v", tt.opts, tt.pairs, err, tt.want)
		}
		if !bytes.Equal(before, z.AppendBinary(nil)) {
			t.Errorf("ZADD %+v %q failed but changed the set", tt.opts, tt.pairs)
		}
	}
	if _, err := z.IncrBy(Limits{}, math.Inf(-1), []byte("a")); err != ErrScoreNaN {
		t.Errorf("ZINCRBY -inf on +inf: %v", err)
	}
	if _, err := z.IncrBy(Limits{}, math.NaN(), []byte("new")); err != ErrScoreNaN || z.Card() != 2 {
		t.Errorf("ZINCRBY NaN: %v, %d members", err, z.Card())
	}
	// NX leaves the member alone before the sum is ever made, as Redis.
	if res, err := z.Add(Limits{}, ZAddOptions{Incr: true, NX: true}, bs("-inf", "a")); err != nil || res.Done {
		t.Errorf("ZADD NX INCR -inf on +inf: %+v, %v; want no change and no error", res, err)
	}
}

func TestLimitErrorText(t *testing.T) {
	err := Limits{MaxElements: 3}.check("list", 3, 4, 0, 0)
	if err == nil || err.Error() != "list of 4 elements exceeds the 3-element limit per key" {
		t.Errorf("elements: %v", err)
	}
	err = Limits{}.check("hash", 0, 1, 0, DefaultMaxSize+1)
	if err == nil || !strings.Contains(err.Error(), "hash of 33554433 bytes exceeds the 33554432-byte limit") {
		t.Errorf("bytes: %v", err)
	}
	if err := (Limits{}).check("hash", 0, DefaultMaxElements, 0, DefaultMaxSize); err != nil {
		t.Errorf("at the defaults: %v", err)
	}
}
