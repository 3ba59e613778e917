package algorithms

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// acquireStep is one Acquire at an instant and what it must grant.
type acquireStep struct {
	at         int64 // offset from t0, ns
	n          int64
	granted    int64
	remaining  int64
	retryAfter int64 // ns, checked when nothing is granted
}

func TestAcquireGrantsWhatFits(t *testing.T) {
	// Limit 10 per second. 4 fit, then 6 of 10, then nothing: the wait
	// for one more unit is a bucket's 100 ms (one unit at 10 per second),
	// the end of the window for fixed_window and sliding_log, and for the
	// sliding counter the instant the previous window's 10 weigh at most 9:
	// 100 ms into the next window.
	retry := map[Algorithm]int64{
		TokenBucket: 100 * ms, LeakyBucket: 100 * ms,
		FixedWindow: sec, SlidingLog: sec, SlidingCounter: sec + 100*ms,
	}
	for _, a := range all {
		p := params(a, 10, sec, 0)
		steps := []acquireStep{
			{0, 4, 4, 6, 0},
			{0, 10, 6, 0, 0},
			{0, 1, 0, 0, retry[a]},
			{0, 1_000_000, 0, 0, retry[a]}, // a count above the capacity is fine
		}
		var s State
		for i, st := range steps {
			next, granted, d := Acquire(p, s, t0+st.at, st.n)
			if granted != st.granted || d.Remaining != st.remaining || d.Allowed != (granted > 0) {
				t.Fatalf("%s step %d: granted %d, %+v; want %d remaining %d", a, i, granted, d, st.granted, st.remaining)
			}
			if granted == 0 && d.RetryAfter != st.retryAfter {
				t.Fatalf("%s step %d: retry_after %d, want %d", a, i, d.RetryAfter, st.retryAfter)
			}
			s = next
		}
		// The client that waits retry_after gets exactly one more unit
		// (the buckets and the counter free one; the others free all 10,
		// of which one is asked for).
		if _, granted, _ := Acquire(p, clone(s), t0+retry[a], 1); granted != 1 {
			t.Errorf("%s: granted %d after waiting retry_after", a, granted)
		}
	}
}

// TestAcquireIsTheLargestAdmittedCost checks, over random states, that
// Acquire grants exactly min(n, the largest cost Decide would admit), and
// that the grant spends as Decide of that cost does.
func TestAcquireIsTheLargestAdmittedCost(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for iter := range 2000 {
		a := all[rng.IntN(len(all))]
		p := randomParams(rng, a)
		if p.Capacity > 50 {
			p = params(a, 1+rng.Int64N(50), p.Window, 0)
		}
		now := t0 + rng.Int64N(p.Window)
		var s State
		for range 1 + rng.IntN(10) {
			now += rng.Int64N(p.Window/2 + 1)
			s, _ = Decide(p, s, now, 1+rng.Int64N(p.Capacity))
		}
		now += rng.Int64N(p.Window/2 + 1)
		fits := int64(0)
		for c := int64(1); c <= p.Capacity; c++ {
			if Peek(p, s, now, c).Allowed {
				fits = c
			}
		}
		n := 1 + rng.Int64N(p.Capacity+2)
		next, granted, d := Acquire(p, clone(s), now, n)
		if granted != min(n, fits) {
			t.Fatalf("iter %d %+v: Acquire(%d) granted %d, the largest admitted cost is %d", iter, p, n, granted, fits)
		}
		if granted > 0 {
			want, wd := Decide(p, clone(s), now, granted)
			if next.Stamp != want.Stamp || next.Count != want.Count || next.Aux != want.Aux || d != wd {
				t.Fatalf("iter %d %+v: grant of %d left %+v %+v, Decide leaves %+v %+v", iter, p, granted, next, d, want, wd)
			}
		}
		if err := Valid(p, next); err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
	}
}

func TestRefundBucketTakesOffWhatMayHaveDrained(t *testing.T) {
	for _, a := range []Algorithm{TokenBucket, LeakyBucket} {
		p := params(a, 10, sec, 0) // one unit drains every 100 ms
		s, _, _ := Acquire(p, State{}, t0, 10)
		at := s.Stamp
		// At once: all of it comes back.
		if _, got := Refund(p, clone(s), t0, at, 4); got != 4 {
			t.Errorf("%s: refund at the grant's instant returned %d of 4", a, got)
		}
		// 150 ms later up to 2 units (1.5 rounded up) of the grant
		// may have drained: 4 - 2 come back, and the level is what the
		// caller actually used (6) less what drained (1.5).
		s2, got := Refund(p, clone(s), t0+150*ms, at, 4)
		if got != 2 {
			t.Errorf("%s: refund after 150 ms returned %d, want 2", a, got)
		}
		if d := Peek(p, s2, t0+150*ms, 1); d.Remaining != 10-(10-2-1) {
			t.Errorf("%s: after the refund remaining %d, want 3", a, d.Remaining)
		}
		// Once the grant could have drained, nothing comes back.
		if _, got := Refund(p, clone(s), t0+sec, at, 10); got != 0 {
			t.Errorf("%s: refund after the level drained returned %d", a, got)
		}
		// Never below empty: asking for more than the level gives the level.
		small, _, _ := Acquire(p, State{}, t0, 3)
		if next, got := Refund(p, small, t0, small.Stamp, 10); got != 3 || next.Count != 0 || next.Aux != 0 {
			t.Errorf("%s: refund of 10 from a level of 3: %d, %+v", a, got, next)
		}
	}
}

func TestRefundWindowsOnlyInTheGrantsWindow(t *testing.T) {
	for _, a := range []Algorithm{FixedWindow, SlidingCounter} {
		p := params(a, 10, sec, 0)
		s, _ := Decide(p, State{}, t0+100*ms, 3) // someone else's 3
		s, _, _ = Acquire(p, s, t0+200*ms, 5)
		at := s.Stamp
		s2, got := Refund(p, clone(s), t0+900*ms, at, 5)
		if got != 5 {
			t.Fatalf("%s: refund in the grant's window returned %d of 5", a, got)
		}
		if d := Peek(p, s2, t0+900*ms, 1); d.Remaining != 7 {
			t.Errorf("%s: remaining %d after the refund, want 7", a, d.Remaining)
		}
		// Asking for more than the caller was granted cannot dig into the
		// others' units beyond the window's count.
		if _, got := Refund(p, clone(s), t0+900*ms, at, 100); got != 8 {
			t.Errorf("%s: an over-large refund returned %d, want the count 8", a, got)
		}
		// In the next window the grant's units are no longer this
		// window's to give: nothing comes back, and for the sliding
		// counter the previous window (which still weighs) is untouched.
		s3, _ := Decide(p, clone(s), t0+sec+100*ms, 2)
		s4, got := Refund(p, clone(s3), t0+sec+200*ms, at, 5)
		if got != 0 || s4.Count != s3.Count || s4.Aux != s3.Aux {
			t.Errorf("%s: refund in a later window returned %d: %+v -> %+v", a, got, s3, s4)
		}
	}
}

func TestRefundLogRemovesTheGrantsEntries(t *testing.T) {
	p := params(SlidingLog, 10, sec, 0)
	s, _ := Decide(p, State{}, t0+100*ms, 2)
	s, _, _ = Acquire(p, s, t0+200*ms, 4)
	at := s.Stamp
	s, _ = Decide(p, s, t0+300*ms, 3) // admitted after the grant
	s, got := Refund(p, s, t0+400*ms, at, 3)
	if got != 3 {
		t.Fatalf("returned %d of 3", got)
	}
	want := []int64{t0 + 100*ms, t0 + 100*ms, t0 + 200*ms, t0 + 300*ms, t0 + 300*ms, t0 + 300*ms}
	var entries []int64
	for i := range s.Count {
		entries = append(entries, logAt(s, i))
	}
	if !slices.Equal(entries, want) {
		t.Fatalf("log %v, want %v: the later admissions keep their instants", entries, want)
	}
	// Only one entry of the grant is left: asking for 3 returns 1.
	if _, got := Refund(p, clone(s), t0+400*ms, at, 3); got != 1 {
		t.Errorf("second refund returned %d, want 1", got)
	}
	// Once the grant aged out (at + window) nothing is returned.
	if _, got := Refund(p, clone(s), t0+200*ms+sec, at, 1); got != 0 {
		t.Errorf("refund after the grant aged out returned %d", got)
	}
	// A refund wraps around the ring: fill, age some out, grant, refund.
	r := params(SlidingLog, 4, sec, 0)
	var w State
	for i := range int64(4) {
		w, _ = Decide(r, w, t0+i*100*ms, 1)
	}
	w, _, _ = Acquire(r, w, t0+1150*ms, 2) // two aged out; the grant wraps
	w, _ = Decide(r, w, t0+1200*ms, 1)     // the entry at 200 ms ages out
	w, got = Refund(r, w, t0+1250*ms, t0+1150*ms, 2)
	if got != 2 || w.Count != 2 || logAt(w, 0) != t0+300*ms || logAt(w, 1) != t0+1200*ms {
		t.Fatalf("wrapped refund returned %d, state %+v", got, w)
	}
}

func TestRefundNothingToReturn(t *testing.T) {
	for _, a := range all {
		p := params(a, 10, sec, 0)
		s, got := Refund(p, State{}, t0, t0, 5)
		if got != 0 || s.Count != 0 {
			t.Errorf("%s: refund to a new key returned %d, %+v", a, got, s)
		}
		s, _, _ = Acquire(p, State{}, t0, 5)
		if _, got := Refund(p, clone(s), t0, s.Stamp, 0); got != 0 {
			t.Errorf("%s: a refund of 0 returned %d", a, got)
		}
		// An instant earlier than the state's counts as no time passing.
		if _, got := Refund(p, clone(s), t0-sec, s.Stamp, 5); got != 5 {
			t.Errorf("%s: refund with the clock behind returned %d", a, got)
		}
	}
}

// actor is one caller in TestInterleavingNeverExceedsTheLimit: a gateway
// node holding grants whose unused units it may give back later.
type actor struct{ grants []heldGrant }

type heldGrant struct {
	at, unused int64
}

// used is an amount of traffic actually served at an instant.
type used struct{ at, units int64 }

// TestInterleavingNeverExceedsTheLimit drives random interleavings of
// Decide, Peek, Acquire and Refund by several callers against one key. Each
// grant is partly used and the rest refunded (at once, later, in parts, or
// never). The traffic actually served — admitted costs, and each grant's
// units less the unused ones the caller gave up — must be traffic the
// algorithm itself admits: replayed through Decide on a new key, every piece
// is admitted. States stay Valid, and refunds never exceed what was asked.
func TestInterleavingNeverExceedsTheLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for iter := range 3000 {
		a := all[rng.IntN(len(all))]
		limit := 1 + rng.Int64N(12)
		var burst int64
		if a.IsBucket() && rng.IntN(2) == 0 {
			burst = 1 + rng.Int64N(15)
		}
		p := params(a, limit, []int64{10 * ms, sec, 60 * sec}[rng.IntN(3)], burst)
		actors := make([]actor, 1+rng.IntN(3))
		var served []used
		now := t0 + rng.Int64N(p.Window)
		var s State
		for step := range 60 {
			if rng.IntN(3) == 0 {
				now += rng.Int64N(p.Window/2 + 1)
			}
			who := &actors[rng.IntN(len(actors))]
			switch op := rng.IntN(10); {
			case op < 3:
				cost := 1 + rng.Int64N(p.Capacity)
				var d Decision
				s, d = Decide(p, s, now, cost)
				if d.Allowed {
					served = append(served, used{s.Stamp, cost})
				}
			case op < 6:
				n := 1 + rng.Int64N(p.Capacity+1)
				var granted int64
				s, granted, _ = Acquire(p, s, now, n)
				if granted > n || granted < 0 {
					t.Fatalf("iter %d: granted %d of %d", iter, granted, n)
				}
				if granted > 0 {
					unused := rng.Int64N(granted + 1)
					served = append(served, used{s.Stamp, granted - unused})
					who.grants = append(who.grants, heldGrant{s.Stamp, unused})
				}
			case op < 9:
				if len(who.grants) == 0 {
					continue
				}
				i := rng.IntN(len(who.grants))
				g := &who.grants[i]
				n := g.unused
				if n > 1 && rng.IntN(2) == 0 {
					n = 1 + rng.Int64N(n) // in parts
				}
				var back int64
				s, back = Refund(p, s, now, g.at, n)
				if back < 0 || back > n {
					t.Fatalf("iter %d: refund of %d returned %d", iter, n, back)
				}
				// The caller gives the units up whether or not they came
				// back: they were never served either way.
				g.unused -= n
				if g.unused == 0 {
					who.grants = slices.Delete(who.grants, i, i+1)
				}
			default:
				Peek(p, s, now, 1+rng.Int64N(p.Capacity))
			}
			if err := Valid(p, s); err != nil {
				t.Fatalf("iter %d step %d %+v: %v", iter, step, p, err)
			}
		}
		if bad := replay(p, served); bad >= 0 {
			t.Fatalf("iter %d %+v: traffic served %v exceeds the limit at piece %d", iter, p, served, bad)
		}
	}
}

// replay runs served traffic, in order, through Decide on a new key and
// returns the index of the first piece it denies, or -1.
func replay(p Params, served []used) int {
	var s State
	for i, u := range served {
		if u.units == 0 {
			continue
		}
		var d Decision
		s, d = Decide(p, s, u.at, u.units)
		if !d.Allowed {
			return i
		}
	}
	return -1
}

func TestAcquireAndRefundDoNotAllocate(t *testing.T) {
	for _, a := range all {
		p := params(a, 1000, sec, 0)
		var s State
		s, _ = Decide(p, s, t0, 1000) // a sliding log's ring at its full size
		now := t0
		allocs := testing.AllocsPerRun(100, func() {
			now += sec
			var granted int64
			s, granted, _ = Acquire(p, s, now, 50)
			s, _ = Refund(p, s, now, s.Stamp, granted/2)
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per Acquire and Refund", a, allocs)
		}
	}
}

func BenchmarkAcquireRefund(b *testing.B) {
	for _, a := range all {
		b.Run(a.String(), func(b *testing.B) {
			p := params(a, 1000, sec, 0)
			var s State
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now += 20 * ms // 20 units' worth of the rate per grant of 20
				var granted int64
				s, granted, _ = Acquire(p, s, now, 20)
				s, _ = Refund(p, s, now, s.Stamp, granted/4)
			}
		})
	}
}
