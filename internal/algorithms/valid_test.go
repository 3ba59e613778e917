package algorithms

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestValidRejects(t *testing.T) {
	tb := params(TokenBucket, 10, sec, 0)
	fw := params(FixedWindow, 10, sec, 0)
	sc := params(SlidingCounter, 10, sec, 0)
	sl := params(SlidingLog, 10, sec, 0)
	for _, tt := range []struct {
		name string
		p    Params
		s    State
		want string
	}{
		{"negative stamp", tb, State{Stamp: -1}, "before the epoch"},
		{"negative count", fw, State{Stamp: t0, Count: -1}, "negative"},
		{"bucket progress past a unit", tb, State{Stamp: t0, Count: 1, Aux: sec}, "drain progress"},
		{"bucket progress with nothing held", tb, State{Stamp: t0, Aux: 1}, "drain progress"},
		{"bucket level beyond any rule", tb, State{Stamp: t0, Count: MaxLimit + 1}, "bucket level"},
		{"bucket level beyond MaxDrain", params(TokenBucket, 1, MaxWindow, 0), State{Stamp: t0, Count: 101}, "bucket level"},
		{"bucket with a log", tb, State{Stamp: t0, Count: 1, Log: []int64{t0}}, "holds a log"},
		{"fixed window with aux", fw, State{Stamp: t0, Count: 1, Aux: 1}, "aux"},
		{"fixed window count beyond any rule", fw, State{Stamp: t0, Count: MaxLimit + 1}, "count"},
		{"sliding counter beyond any rule", sc, State{Stamp: t0, Aux: MaxLimit + 1}, "exceed"},
		{"log longer than its ring", sl, State{Stamp: t0, Count: 2, Log: []int64{t0}}, "log of 2"},
		{"log beyond any rule", sl, State{Stamp: t0, Count: MaxSlidingLogLimit + 1, Log: make([]int64, MaxSlidingLogLimit+1)}, "log of"},
		{"log head outside the ring", sl, State{Stamp: t0, Count: 1, Aux: 1, Log: []int64{t0}}, "head"},
		{"log head without a ring", sl, State{Stamp: t0, Aux: 1}, "head"},
		{"log out of order", sl, State{Stamp: t0, Count: 2, Log: []int64{t0, t0 - 1}}, "out of order"},
		{"log entry after the stamp", sl, State{Stamp: t0, Count: 1, Log: []int64{t0 + 1}}, "out of order"},
		{"log entry before the epoch", sl, State{Stamp: t0, Count: 1, Log: []int64{-5}}, "out of order"},
	} {
		err := Valid(tt.p, tt.s)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Valid = %v, want an error about %q", tt.name, err, tt.want)
		}
	}
	// The ring's order is the log's: a wrapped ring in time order is valid.
	if err := Valid(sl, State{Stamp: t0, Count: 3, Aux: 3, Log: []int64{t0 - 1, t0, 99, t0 - 3}}); err != nil {
		t.Errorf("wrapped ring: %v", err)
	}
	for _, a := range all {
		if err := Valid(params(a, 1, MinWindow, 0), State{}); err != nil {
			t.Errorf("%s: the zero State is invalid: %v", a, err)
		}
	}
}

// randomParams returns a rule's numbers as the rules package allows them:
// limit, window and burst drawn from small and extreme values alike.
func randomParams(rng *rand.Rand, a Algorithm) Params {
	limits := []int64{1, 2, 3, 5, 10, 100, 1000, 1_000_000, MaxLimit}
	windows := []int64{MinWindow, 7 * ms, sec, 1500 * ms, 60 * sec, 3600 * sec, day, MaxWindow}
	limit := limits[rng.IntN(len(limits))]
	if rng.IntN(2) == 0 {
		limit = 1 + rng.Int64N(20)
	}
	if a == SlidingLog {
		limit = min(limit, 1000) // the log holds one entry per unit
	}
	window := windows[rng.IntN(len(windows))]
	var burst int64
	if a.IsBucket() && rng.IntN(2) == 0 {
		burst = limits[rng.IntN(len(limits))]
		// The rules package refuses a burst that takes longer than
		// MaxDrain to refill; so does this.
		if q, _ := mul(burst, window).divmod(limit); q > MaxDrain {
			burst = 0
		}
	}
	return params(a, limit, window, burst)
}

// TestRescaleAndDecideStayValid changes a key's rule at random — limit up
// and down, window, burst — between random decisions, and checks that every
// state produced is Valid, and that every duration a decision reports and
// the instant the key goes fresh stay in range (no overflow).
func TestRescaleAndDecideStayValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for iter := range 3000 {
		a := all[rng.IntN(len(all))]
		p := randomParams(rng, a)
		now := t0 + rng.Int64N(p.Window)
		var s State
		for step := range 30 {
			if rng.IntN(3) == 0 {
				q := randomParams(rng, a)
				s = Rescale(p, q, s, now)
				p = q
				if err := Valid(p, s); err != nil {
					t.Fatalf("iter %d step %d: Rescale to %+v gave %+v: %v", iter, step, p, s, err)
				}
			}
			now += rng.Int64N(min(p.Window/3, 10*day) + 1)
			cost := 1 + rng.Int64N(min(p.Capacity, 5))
			if rng.IntN(8) == 0 {
				cost = min(p.Capacity, 1000)
			}
			next, d := Decide(p, s, now, cost)
			if err := Valid(p, next); err != nil {
				t.Fatalf("iter %d step %d: Decide under %+v gave %+v: %v", iter, step, p, next, err)
			}
			for _, ns := range []int64{d.RetryAfter, d.ResetAfter, d.Delay} {
				if ns < 0 || ns > 2*MaxDrain {
					t.Fatalf("iter %d step %d %+v: duration out of range in %+v", iter, step, p, d)
				}
			}
			if fresh := FreshAt(p, next); fresh < next.Stamp || fresh > next.Stamp+2*MaxDrain {
				t.Fatalf("iter %d step %d %+v: FreshAt %d for a state stamped %d", iter, step, p, fresh, next.Stamp)
			}
			s = next
		}
	}
}

// TestOverSpentKeyStaysDenied lowers a rule below what a key has spent, as
// issue 11 found: the state is valid and the key is denied until the spent
// units drain or age out.
func TestOverSpentKeyStaysDenied(t *testing.T) {
	for _, a := range all {
		old, low := params(a, 10, 3600*sec, 0), params(a, 2, 3600*sec, 0)
		s, _ := Decide(old, State{}, t0, 8)
		s = Rescale(old, low, s, t0)
		if err := Valid(low, s); err != nil {
			t.Fatalf("%s: 8 spent under a limit lowered to 2: %v", a, err)
		}
		if _, d := Decide(low, clone(s), t0+sec, 1); d.Allowed || d.Remaining != 0 {
			t.Errorf("%s: an over-spent key was admitted: %+v", a, d)
		}
	}
	// The level a bucket keeps is what drains in MaxDrain: a billion units
	// spent at a billion per millisecond, then the rule lowered to one per
	// 366 days, would otherwise take 366 billion days to drain.
	fast, slow := params(TokenBucket, MaxLimit, MinWindow, 0), params(TokenBucket, 1, MaxWindow, 0)
	s, _ := Decide(fast, State{}, t0, MaxLimit)
	s = Rescale(fast, slow, s, t0)
	if err := Valid(slow, s); err != nil || s.Count != MaxDrain/MaxWindow {
		t.Fatalf("capped level %d (%v), want %d", s.Count, err, MaxDrain/MaxWindow)
	}
	if _, d := Decide(slow, s, t0, 1); d.Allowed || d.RetryAfter != MaxDrain {
		t.Fatalf("capped key: %+v, want denied for MaxDrain", d)
	}
}
