package ttl

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

const (
	ms  = int64(time.Millisecond)
	sec = int64(time.Second)
	day = 86400 * sec
	t0  = int64(1_704_067_200) * sec
)

type fired struct {
	w   *Wheel[int]
	got []int
	at  []int64 // the instant each fired at
	now int64
}

func newFired() *fired { return &fired{w: New[int](t0), now: t0} }

func (f *fired) advance(to int64) {
	f.now = to
	f.w.Advance(to, func(t *Timer[int]) {
		f.got = append(f.got, t.Value)
		f.at = append(f.at, t.At())
	})
}

func TestOrderingAndNeverEarly(t *testing.T) {
	f := newFired()
	timers := make([]*Timer[int], 5)
	at := []int64{t0 + 30*ms, t0 + 10*ms, t0 + 5*sec, t0 + 10*ms + 1, t0 + 70*ms}
	for i := range timers {
		timers[i] = &Timer[int]{Value: i}
		f.w.Schedule(timers[i], at[i])
	}
	f.advance(t0 + 10*ms - 1)
	if len(f.got) != 0 {
		t.Fatalf("fired early: %v", f.got)
	}
	f.advance(t0 + 10*ms)
	if !slices.Equal(f.got, []int{1}) {
		t.Fatalf("at 10ms: %v", f.got)
	}
	f.advance(t0 + 11*ms) // the 10ms+1ns timer is due at the 11ms tick
	f.advance(t0 + 100*ms)
	if !slices.Equal(f.got, []int{1, 3, 0, 4}) {
		t.Fatalf("by 100ms: %v", f.got)
	}
	f.advance(t0 + 5*sec)
	if !slices.Equal(f.got, []int{1, 3, 0, 4, 2}) || f.w.Len() != 0 {
		t.Fatalf("by 5s: %v, %d left", f.got, f.w.Len())
	}
}

func TestCancelAndReschedule(t *testing.T) {
	f := newFired()
	a, b, c := &Timer[int]{Value: 1}, &Timer[int]{Value: 2}, &Timer[int]{Value: 3}
	f.w.Schedule(a, t0+sec)
	f.w.Schedule(b, t0+sec)
	f.w.Schedule(c, t0+2*sec)
	f.w.Cancel(a)
	f.w.Cancel(a)              // twice is harmless
	f.w.Schedule(c, t0+500*ms) // earlier
	f.w.Schedule(b, t0+3*day)  // much later
	if f.w.Len() != 2 || a.Scheduled() || !b.Scheduled() {
		t.Fatalf("len %d", f.w.Len())
	}
	f.advance(t0 + 2*sec)
	if !slices.Equal(f.got, []int{3}) {
		t.Fatalf("got %v", f.got)
	}
	f.advance(t0 + 3*day)
	if !slices.Equal(f.got, []int{3, 2}) || f.w.Len() != 0 {
		t.Fatalf("got %v", f.got)
	}
}

func TestFarFutureAcrossLevels(t *testing.T) {
	f := newFired()
	at := []int64{t0 + 63*ms, t0 + 64*ms, t0 + 4095*ms, t0 + 4096*ms, t0 + 300*sec, t0 + 5*3600*sec,
		t0 + 20*day, t0 + 366*day, t0 + 3*366*day, t0 + 50*366*day}
	for i, a := range at {
		f.w.Schedule(&Timer[int]{Value: i}, a)
	}
	// Walk in uneven steps, as an idle shard would.
	for now := t0; now <= t0+51*366*day; now += (now-t0)/3 + 7*ms {
		f.advance(now)
	}
	f.advance(t0 + 51*366*day)
	if len(f.got) != len(at) {
		t.Fatalf("fired %d of %d: %v", len(f.got), len(at), f.got)
	}
	for i := range f.got {
		if f.got[i] != i {
			t.Fatalf("out of order: %v", f.got)
		}
	}
}

func TestManyTimersInOneSlot(t *testing.T) {
	f := newFired()
	for i := range 10000 {
		f.w.Schedule(&Timer[int]{Value: i}, t0+42*ms+int64(i%3)) // all due at the 43 ms tick or before
	}
	f.advance(t0 + 42*ms)
	n42 := len(f.got)
	f.advance(t0 + 43*ms)
	if n42 != 3334 || len(f.got) != 10000 || f.w.Len() != 0 {
		t.Fatalf("fired %d at 42ms, %d by 43ms", n42, len(f.got))
	}
}

func TestScheduleInThePastFiresNextAdvance(t *testing.T) {
	f := newFired()
	f.advance(t0 + sec)
	f.w.Schedule(&Timer[int]{Value: 7}, t0)
	f.advance(t0 + sec) // same instant: still fires what is already due
	if !slices.Equal(f.got, []int{7}) {
		t.Fatalf("got %v", f.got)
	}
}

func TestSoonest(t *testing.T) {
	f := newFired()
	if f.w.Soonest() != nil {
		t.Fatal("empty wheel has a soonest timer")
	}
	for i, d := range []int64{day, 3 * sec, 40 * ms, 2 * day} {
		f.w.Schedule(&Timer[int]{Value: i}, t0+d)
	}
	if s := f.w.Soonest(); s.Value != 2 {
		t.Fatalf("soonest is %d", s.Value)
	}
	f.w.Cancel(f.w.Soonest())
	if s := f.w.Soonest(); s.Value != 1 {
		t.Fatalf("then soonest is %d", s.Value)
	}
}

// TestRandomAgainstModel schedules, reschedules and cancels at random while
// advancing at random, and checks each timer fires exactly once, at the
// first Advance at or after its tick boundary, never before its instant.
func TestRandomAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	w := New[int](t0)
	const n = 2000
	timers := make([]*Timer[int], n)
	want := map[int]int64{} // live timer -> instant
	for i := range timers {
		timers[i] = &Timer[int]{Value: i}
	}
	spans := []int64{ms, 50 * ms, 2 * sec, 10 * 60 * sec, 2 * day, 400 * day}
	now := t0
	for step := range 3000 {
		switch rng.IntN(4) {
		case 0, 1:
			i := rng.IntN(n)
			at := now + rng.Int64N(spans[rng.IntN(len(spans))])
			w.Schedule(timers[i], at)
			want[i] = at
		case 2:
			i := rng.IntN(n)
			w.Cancel(timers[i])
			delete(want, i)
		case 3:
			now += rng.Int64N(spans[rng.IntN(len(spans))])
			w.Advance(now, func(tm *Timer[int]) {
				at, ok := want[tm.Value]
				if !ok || at != tm.At() {
					t.Fatalf("step %d: timer %d fired but was not due (%v)", step, tm.Value, ok)
				}
				if at > now {
					t.Fatalf("step %d: timer %d fired %d ns early", step, tm.Value, at-now)
				}
				delete(want, tm.Value)
			})
			for i, at := range want {
				boundary := t0 + (at-t0+ms-1)/ms*ms
				if boundary <= now {
					t.Fatalf("step %d: timer %d due at %d not fired by %d", step, i, at-t0, now-t0)
				}
			}
		}
		if w.Len() != len(want) {
			t.Fatalf("step %d: Len %d, model %d", step, w.Len(), len(want))
		}
	}
}

func BenchmarkScheduleAdvance(b *testing.B) {
	w := New[int](t0)
	timers := make([]Timer[int], 1<<16)
	now := t0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.Schedule(&timers[i&(len(timers)-1)], now+int64(i%5000)*ms)
		i++
		if i%64 == 0 {
			now += ms
			w.Advance(now, func(*Timer[int]) {})
		}
	}
}
