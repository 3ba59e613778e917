package algorithms

import (
	"math/rand/v2"
	"testing"
)

const (
	ms  = int64(1_000_000)
	sec = 1000 * ms
	day = 86400 * sec
	// t0 is a fixed instant aligned to every window used below (a whole
	// number of days since the epoch), so window boundaries fall on t0+k·W.
	t0 = 20_000 * day
)

var all = []Algorithm{TokenBucket, LeakyBucket, FixedWindow, SlidingLog, SlidingCounter}

func params(a Algorithm, limit, window, burst int64) Params {
	c := limit
	if a.IsBucket() && burst > 0 {
		c = burst
	}
	return Params{Algorithm: a, Limit: limit, Window: window, Capacity: c}
}

// step is one request at an instant and what it must be answered.
type step struct {
	at         int64 // offset from t0, ns
	cost       int64
	allowed    bool
	remaining  int64
	retryAfter int64 // ns, checked when denied
}

func run(t *testing.T, p Params, steps []step) {
	t.Helper()
	var s State
	for i, st := range steps {
		var d Decision
		s, d = Decide(p, s, t0+st.at, st.cost)
		if d.Allowed != st.allowed || d.Remaining != st.remaining {
			t.Fatalf("%s step %d (t=%v cost=%d): allowed=%v remaining=%d, want %v %d",
				p.Algorithm, i, st.at, st.cost, d.Allowed, d.Remaining, st.allowed, st.remaining)
		}
		if !st.allowed && d.RetryAfter != st.retryAfter {
			t.Fatalf("%s step %d: retry_after=%d, want %d", p.Algorithm, i, d.RetryAfter, st.retryAfter)
		}
		if st.allowed && d.RetryAfter != 0 {
			t.Fatalf("%s step %d: allowed with retry_after=%d", p.Algorithm, i, d.RetryAfter)
		}
	}
}

func TestSevenAtLimitFive(t *testing.T) {
	// Limit 5 per second, seven requests at one instant: five admitted,
	// two denied. The buckets free one unit every 200 ms; fixed window and
	// sliding log free everything when the window ends (1 s). The sliding
	// counter is not free at 1 s: at the start of the next window the
	// previous window still weighs 5 × (1 − 0) = 5, and a unit fits only
	// when 5 × (1 − e/W) <= 4, at e = 200 ms, so its exact answer is 1.2 s.
	want := map[Algorithm]int64{
		TokenBucket: 200 * ms, LeakyBucket: 200 * ms,
		FixedWindow: sec, SlidingLog: sec, SlidingCounter: 1200 * ms,
	}
	for _, a := range all {
		steps := []step{
			{0, 1, true, 4, 0}, {0, 1, true, 3, 0}, {0, 1, true, 2, 0},
			{0, 1, true, 1, 0}, {0, 1, true, 0, 0},
			{0, 1, false, 0, want[a]}, {0, 1, false, 0, want[a]},
		}
		run(t, params(a, 5, sec, 0), steps)
		// And the client that waits exactly that long gets in.
		var s State
		for range 5 {
			s, _ = Decide(params(a, 5, sec, 0), s, t0, 1)
		}
		if _, d := Decide(params(a, 5, sec, 0), s, t0+want[a], 1); !d.Allowed {
			t.Errorf("%s: denied after waiting retry_after", a)
		}
	}
}

func TestBoundaryBurst(t *testing.T) {
	// Five at 0.9 s then five at 1.0 s (a window boundary).
	admitted := func(a Algorithm) int {
		p := params(a, 5, sec, 0)
		var s State
		n := 0
		for _, at := range []int64{900 * ms, sec} {
			for range 5 {
				var d Decision
				s, d = Decide(p, s, t0+at, 1)
				if d.Allowed && at == sec {
					n++
				}
			}
		}
		return n
	}
	if n := admitted(FixedWindow); n != 5 {
		t.Errorf("fixed_window admitted %d of the second five, want 5 (all 10)", n)
	}
	if n := admitted(SlidingCounter); n != 0 {
		t.Errorf("sliding_counter admitted %d of the second five, want 0", n)
	}
	if n := admitted(SlidingLog); n != 0 {
		t.Errorf("sliding_log admitted %d of the second five, want 0", n)
	}
}

func TestTokenBucketBurstThenRate(t *testing.T) {
	// 60 per minute (one per second) with a burst of 10: a full bucket
	// lets 10 through at once, then one per second.
	p := params(TokenBucket, 60, 60*sec, 10)
	var steps []step
	for i := range int64(10) {
		steps = append(steps, step{0, 1, true, 9 - i, 0})
	}
	steps = append(steps,
		step{0, 1, false, 0, sec},
		step{500 * ms, 1, false, 0, 500 * ms},
		step{sec, 1, true, 0, 0},
		step{sec, 1, false, 0, sec},
		step{3500 * ms, 1, true, 1, 0}, // 2.5 s refilled two whole tokens
		step{3500 * ms, 1, true, 0, 0},
		step{3500 * ms, 1, false, 0, 500 * ms}, // half a token already refilled
		step{100 * sec, 1, true, 9, 0},         // full again, capped at the burst
	)
	run(t, p, steps)
}

func TestLeakyBucketDelay(t *testing.T) {
	// A queue of depth 3 draining 10 per second: each admitted request is
	// told how long the work ahead of it takes to drain.
	p := params(LeakyBucket, 10, sec, 3)
	var s State
	var delays []int64
	for range 4 {
		var d Decision
		s, d = Decide(p, s, t0, 1)
		delays = append(delays, d.Delay)
	}
	want := []int64{0, 100 * ms, 200 * ms, 0}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("delays %v, want %v", delays, want)
		}
	}
	// 150 ms later 1.5 units drained: 1.5 queued, so the next waits 150 ms
	// and fills the queue (1.5 + 1 rounds up to 3 whole units held).
	if _, d := Decide(p, s, t0+150*ms, 1); !d.Allowed || d.Delay != 150*ms || d.Remaining != 0 {
		t.Fatalf("after 150ms: %+v", d)
	}
}

func TestSlidingLogRetryPointsAtOldestEntry(t *testing.T) {
	p := params(SlidingLog, 3, sec, 0)
	run(t, p, []step{
		{0, 1, true, 2, 0},
		{300 * ms, 1, true, 1, 0},
		{600 * ms, 1, true, 0, 0},
		{700 * ms, 1, false, 0, 300 * ms}, // the entry at 0 leaves at 1.0 s
		{700 * ms, 2, false, 0, 600 * ms}, // two must leave: the one at 0.3 s leaves at 1.3 s
		{sec, 1, true, 0, 0},              // at exactly 1.0 s the first entry is out
		{sec, 1, false, 0, 300 * ms},
	})
}

func TestCostWeighted(t *testing.T) {
	for _, a := range all {
		p := params(a, 5, sec, 0)
		// The sliding counter: next window's previous count is 3 and room
		// is 5 − 3 = 2, so 3 × (1 − e) <= 2 at e = 1/3 s.
		retry := map[Algorithm]int64{TokenBucket: 200 * ms, LeakyBucket: 200 * ms,
			FixedWindow: sec, SlidingLog: sec, SlidingCounter: sec + 333_333_334}[a]
		run(t, p, []step{
			{0, 3, true, 2, 0},
			{0, 3, false, 2, retry},
			{0, 2, true, 0, 0},
		})
	}
}

func TestSlidingCounterRetryInsideWindow(t *testing.T) {
	// Previous window full (10), current has 2; limit 10. At the start of
	// the window the estimate is 12 > 10 - 1. One unit fits when
	// 10 × (1 − e) + 2 + 1 <= 10, e >= 0.3: retry lands mid-window, not at
	// the next boundary.
	p := params(SlidingCounter, 10, sec, 0)
	var s State
	for range 10 {
		s, _ = Decide(p, s, t0+500*ms, 1)
	}
	s, _ = Decide(p, s, t0+sec, 1) // denied: previous weighs 10
	s.Count = 2                    // two admitted in the current window (set directly for the scenario)
	_, d := Decide(p, s, t0+sec+100*ms, 1)
	if d.Allowed || d.RetryAfter != 200*ms {
		t.Fatalf("got %+v, want denied with retry 200ms", d)
	}
}

func TestHugeLimitsAndWindows(t *testing.T) {
	const year = 366 * day
	// 10^9 per 366 days: one unit every 31.6224 ms, exactly.
	for _, a := range all {
		if a == SlidingLog {
			continue // its limit is capped at 100000
		}
		p := params(a, 1e9, year, 0)
		var s State
		s, d := Decide(p, s, t0, 1e9)
		if !d.Allowed || d.Remaining != 0 {
			t.Fatalf("%s: spending the whole limit: %+v", a, d)
		}
		_, d = Decide(p, s, t0, 1)
		// Buckets free one unit every 366 days / 10^9 = 31.6224 ms exactly.
		// t0 is not aligned to 366 days, so the windows end year − t0%year
		// from now, and the sliding counter then needs one more unit's
		// worth of its previous window to slide out.
		want := map[Algorithm]int64{
			TokenBucket: year / 1e9, LeakyBucket: year / 1e9,
			FixedWindow: year - t0%year, SlidingCounter: year - t0%year + year/1e9,
		}[a]
		if d.Allowed || d.RetryAfter != want {
			t.Fatalf("%s: retry %d, want %d", a, d.RetryAfter, want)
		}
	}
	// A 1 ms window with a limit of 10^9: 1000 units per nanosecond.
	p := params(TokenBucket, 1e9, ms, 0)
	s, _ := Decide(p, State{}, t0, 1e9)
	if _, d := Decide(p, s, t0+1, 1000); !d.Allowed {
		t.Fatal("1000 units should refill in 1 ns")
	}
	if _, d := Decide(p, s, t0+1, 1001); d.Allowed || d.RetryAfter != 1 {
		t.Fatalf("1001 units: %+v", d)
	}
}

func TestTimeBackwardsIsNoTimePassing(t *testing.T) {
	for _, a := range all {
		p := params(a, 5, sec, 0)
		var s State
		for range 5 {
			s, _ = Decide(p, s, t0+500*ms, 1)
		}
		// An earlier instant must not free anything, nor move retry later
		// than "no time passed" would.
		_, late := Decide(p, s, t0+500*ms, 1)
		_, early := Decide(p, s, t0, 1)
		if early.Allowed || early.Remaining != 0 || early.RetryAfter != late.RetryAfter {
			t.Errorf("%s: backwards clock: %+v, want %+v", a, early, late)
		}
	}
}

func TestPeekSpendsNothing(t *testing.T) {
	for _, a := range all {
		p := params(a, 5, sec, 0)
		s, _ := Decide(p, State{}, t0, 2)
		before := s
		for range 10 {
			if d := Peek(p, s, t0, 3); !d.Allowed || d.Remaining != 3 {
				t.Fatalf("%s: peek %+v", a, d)
			}
		}
		if d := Peek(p, s, t0, 4); d.Allowed || d.RetryAfter == 0 {
			t.Fatalf("%s: peek of 4 should be denied with a retry: %+v", a, d)
		}
		if s.Count != before.Count || s.Aux != before.Aux || s.Stamp != before.Stamp {
			t.Fatalf("%s: state changed by peek", a)
		}
		if _, d := Decide(p, s, t0, 3); !d.Allowed || d.Remaining != 0 {
			t.Fatalf("%s: after peeks: %+v", a, d)
		}
	}
}

func TestResetAfter(t *testing.T) {
	tests := []struct {
		a    Algorithm
		want int64
	}{
		{TokenBucket, 600 * ms},     // three units at 200 ms each
		{LeakyBucket, 600 * ms},     // likewise
		{FixedWindow, 700 * ms},     // window ends at 1 s
		{SlidingLog, sec},           // the newest entry (at 0.3 s) ages out at 1.3 s
		{SlidingCounter, 1700 * ms}, // the current window stops counting at 2 s
	}
	for _, tt := range tests {
		p := params(tt.a, 5, sec, 0)
		s, d := Decide(p, State{}, t0+300*ms, 3)
		if d.ResetAfter != tt.want {
			t.Errorf("%s: reset_after %d, want %d", tt.a, d.ResetAfter, tt.want)
		}
		if d := Peek(p, s, t0+300*ms+tt.want, 5); !d.Allowed || d.Remaining != 5 {
			t.Errorf("%s: not full at reset_after: %+v", tt.a, d)
		}
	}
}

// TestRetryAfterProperty drives random rules with random requests. Whenever
// a request is denied, a client that waits retry_after rounded up to whole
// milliseconds (as the RESP reply gives it) and retries the same cost must be
// admitted, and the unrounded figure must be exact: one nanosecond earlier
// is still denied.
func TestRetryAfterProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	windows := []int64{ms, 7 * ms, sec, 1500 * ms, 60 * sec, day}
	for iter := range 3000 {
		a := all[rng.IntN(len(all))]
		limit := 1 + rng.Int64N(20)
		if rng.IntN(4) == 0 {
			limit = 1 + rng.Int64N(1e9)
		}
		if a == SlidingLog {
			limit = min(limit, 50)
		}
		var burst int64
		if a.IsBucket() && rng.IntN(2) == 0 {
			burst = 1 + rng.Int64N(30)
		}
		p := params(a, limit, windows[rng.IntN(len(windows))], burst)
		now := t0 + rng.Int64N(p.Window)
		var s State
		for range 40 {
			now += rng.Int64N(p.Window/3 + 1)
			cost := 1 + rng.Int64N(min(p.Capacity, 5))
			if rng.IntN(10) == 0 {
				cost = p.Capacity
			}
			next, d := Decide(p, s, now, cost)
			if d.Allowed {
				if d.RetryAfter != 0 || d.Remaining < 0 {
					t.Fatalf("iter %d %+v: allowed with %+v", iter, p, d)
				}
				s = next
				continue
			}
			if d.RetryAfter <= 0 {
				t.Fatalf("iter %d %+v: denied with retry_after %d", iter, p, d.RetryAfter)
			}
			if e := Peek(p, s, now+d.RetryAfter-1, cost); e.Allowed {
				t.Fatalf("iter %d %+v cost %d: admitted 1ns before retry_after %d", iter, p, cost, d.RetryAfter)
			}
			wait := (d.RetryAfter + ms - 1) / ms * ms
			if e := Peek(p, s, now+wait, cost); !e.Allowed {
				t.Fatalf("iter %d %+v cost %d at %d: denied after waiting %d (retry_after %d): %+v, state %+v",
					iter, p, cost, now-t0, wait, d.RetryAfter, e, s)
			}
		}
	}
}

func TestRescaleKeepsSpentBudget(t *testing.T) {
	for _, a := range all {
		old := params(a, 10, sec, 0)
		s, _ := Decide(old, State{}, t0+100*ms, 4)
		// Raise the limit to 20 per 2 s: the 4 spent still count.
		bigger := params(a, 20, 2*sec, 0)
		s2 := Rescale(old, bigger, s, t0+100*ms)
		_, d := Decide(bigger, s2, t0+100*ms, 1)
		if !d.Allowed || d.Remaining < 14 || d.Remaining > 15 {
			t.Errorf("%s: after raising the limit: %+v (state %+v)", a, d, s2)
		}
		// Lower the limit below what was spent: denied at once.
		smaller := params(a, 3, sec, 0)
		s3 := Rescale(old, smaller, s, t0+100*ms)
		if _, d := Decide(smaller, s3, t0+100*ms, 1); d.Allowed {
			t.Errorf("%s: lowered ceiling not applied at once: %+v", a, d)
		}
	}
}

func TestSlidingLogBoundedMemory(t *testing.T) {
	p := params(SlidingLog, 100, sec, 0)
	var s State
	now := t0
	for range 10_000 {
		now += 3 * ms
		s, _ = Decide(p, s, now, 1)
	}
	if len(s.Log) > 100 {
		t.Fatalf("ring grew to %d slots for a limit of 100", len(s.Log))
	}
}

func TestParseAlgorithm(t *testing.T) {
	for _, a := range all {
		got, ok := ParseAlgorithm(a.String())
		if !ok || got != a {
			t.Errorf("round trip of %s gave %v %v", a, got, ok)
		}
	}
	if _, ok := ParseAlgorithm("Token_Bucket"); ok {
		t.Error("names are case-sensitive")
	}
}

func BenchmarkDecide(b *testing.B) {
	for _, a := range all {
		b.Run(a.String(), func(b *testing.B) {
			p := params(a, 1000, sec, 0)
			var s State
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now += 1 * ms // 1 per ms = the limit's rate: a mix of admits
				s, _ = Decide(p, s, now, 1)
			}
		})
	}
}

// TestFreshAt checks, for random sequences, that from FreshAt on every
// decision on the state equals the decision on a new key (so dropping the
// key then is lossless), and that just before it some decision differs
// (so keys are not kept longer than needed), for every algorithm.
func TestFreshAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := range 2000 {
		a := all[rng.IntN(len(all))]
		p := params(a, 1+rng.Int64N(10), []int64{ms, sec, 60 * sec}[rng.IntN(3)], 0)
		now := t0 + rng.Int64N(p.Window)
		var s State
		for range 1 + rng.IntN(8) {
			now += rng.Int64N(p.Window / 2)
			s, _ = Decide(p, s, now, 1+rng.Int64N(p.Capacity))
		}
		fresh := FreshAt(p, s)
		if fresh < s.Stamp {
			t.Fatalf("%s: FreshAt %d before the state's stamp %d", a, fresh, s.Stamp)
		}
		for _, at := range []int64{fresh, fresh + 1, fresh + p.Window/2, fresh + 3*p.Window} {
			for cost := int64(1); cost <= p.Capacity; cost++ {
				_, got := Decide(p, clone(s), at, cost)
				_, want := Decide(p, State{}, at, cost)
				if got != want {
					t.Fatalf("iter %d %s: at FreshAt+%d cost %d: %+v, a new key gets %+v", iter, a, at-fresh, cost, got, want)
				}
			}
		}
		if fresh > s.Stamp {
			differs := false
			for cost := int64(1); cost <= p.Capacity; cost++ {
				_, got := Decide(p, clone(s), fresh-1, cost)
				_, want := Decide(p, State{}, fresh-1, cost)
				differs = differs || got != want
			}
			if !differs {
				t.Fatalf("iter %d %s: state already fresh 1ns before FreshAt", iter, a)
			}
		}
	}
}

// clone copies s, including the sliding log's buffer, which Decide reuses.
func clone(s State) State {
	s.Log = append([]int64(nil), s.Log...)
	return s
}
