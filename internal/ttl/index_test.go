package ttl

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// The IndexWheel's tests are the Wheel's (wheel_test.go), over indices.

type firedIndex struct {
	w   *IndexWheel
	got []uint32
	at  []int64
	now int64
}

func newFiredIndex() *firedIndex { return &firedIndex{w: NewIndex(t0), now: t0} }

func (f *firedIndex) advance(to int64) {
	f.now = to
	f.w.Advance(to, func(i uint32) {
		f.got = append(f.got, i)
		f.at = append(f.at, f.w.At(i))
	})
}

func TestIndexOrderingAndNeverEarly(t *testing.T) {
	f := newFiredIndex()
	at := []int64{t0 + 30*ms, t0 + 10*ms, t0 + 5*sec, t0 + 10*ms + 1, t0 + 70*ms}
	for i, a := range at {
		f.w.Schedule(uint32(i), a)
	}
	f.advance(t0 + 10*ms - 1)
	if len(f.got) != 0 {
		t.Fatalf("fired early: %v", f.got)
	}
	f.advance(t0 + 10*ms)
	if !slices.Equal(f.got, []uint32{1}) {
		t.Fatalf("at 10ms: %v", f.got)
	}
	f.advance(t0 + 11*ms) // the 10ms+1ns timer is due at the 11ms tick
	f.advance(t0 + 100*ms)
	if !slices.Equal(f.got, []uint32{1, 3, 0, 4}) {
		t.Fatalf("by 100ms: %v", f.got)
	}
	f.advance(t0 + 5*sec)
	if !slices.Equal(f.got, []uint32{1, 3, 0, 4, 2}) || f.w.Len() != 0 {
		t.Fatalf("by 5s: %v, %d left", f.got, f.w.Len())
	}
}

func TestIndexCancelAndReschedule(t *testing.T) {
	f := newFiredIndex()
	const a, b, c = 1, 2, 3
	f.w.Schedule(a, t0+sec)
	f.w.Schedule(b, t0+sec)
	f.w.Schedule(c, t0+2*sec)
	f.w.Cancel(a)
	f.w.Cancel(a)              // twice is harmless
	f.w.Cancel(5000)           // never scheduled, beyond the storage: harmless
	f.w.Schedule(c, t0+500*ms) // earlier
	f.w.Schedule(b, t0+3*day)  // much later
	if f.w.Len() != 2 || f.w.Scheduled(a) || !f.w.Scheduled(b) {
		t.Fatalf("len %d", f.w.Len())
	}
	f.advance(t0 + 2*sec)
	if !slices.Equal(f.got, []uint32{c}) {
		t.Fatalf("got %v", f.got)
	}
	f.advance(t0 + 3*day)
	if !slices.Equal(f.got, []uint32{c, b}) || f.w.Len() != 0 {
		t.Fatalf("got %v", f.got)
	}
}

func TestIndexFarFutureAcrossLevels(t *testing.T) {
	f := newFiredIndex()
	at := []int64{t0 + 63*ms, t0 + 64*ms, t0 + 4095*ms, t0 + 4096*ms, t0 + 300*sec, t0 + 5*3600*sec,
		t0 + 20*day, t0 + 366*day, t0 + 3*366*day, t0 + 50*366*day}
	for i, a := range at {
		f.w.Schedule(uint32(i)*3000, a) // spread over several chunks
	}
	for now := t0; now <= t0+51*366*day; now += (now-t0)/3 + 7*ms {
		f.advance(now)
	}
	f.advance(t0 + 51*366*day)
	if len(f.got) != len(at) {
		t.Fatalf("fired %d of %d: %v", len(f.got), len(at), f.got)
	}
	for i := range f.got {
		if f.got[i] != uint32(i)*3000 {
			t.Fatalf("out of order: %v", f.got)
		}
	}
}

func TestIndexManyTimersInOneSlot(t *testing.T) {
	f := newFiredIndex()
	for i := range 10000 {
		f.w.Schedule(uint32(i), t0+42*ms+int64(i%3))
	}
	f.advance(t0 + 42*ms)
	n42 := len(f.got)
	f.advance(t0 + 43*ms)
	if n42 != 3334 || len(f.got) != 10000 || f.w.Len() != 0 {
		t.Fatalf("fired %d at 42ms, %d by 43ms", n42, len(f.got))
	}
}

func TestIndexScheduleInThePastFiresNextAdvance(t *testing.T) {
	f := newFiredIndex()
	f.advance(t0 + sec)
	f.w.Schedule(7, t0)
	f.advance(t0 + sec)
	if !slices.Equal(f.got, []uint32{7}) {
		t.Fatalf("got %v", f.got)
	}
}

func TestIndexSoonest(t *testing.T) {
	f := newFiredIndex()
	if _, ok := f.w.Soonest(); ok {
		t.Fatal("empty wheel has a soonest timer")
	}
	for i, d := range []int64{day, 3 * sec, 40 * ms, 2 * day} {
		f.w.Schedule(uint32(i), t0+d)
	}
	if s, _ := f.w.Soonest(); s != 2 {
		t.Fatalf("soonest is %d", s)
	}
	s, _ := f.w.Soonest()
	f.w.Cancel(s)
	if s, _ := f.w.Soonest(); s != 1 {
		t.Fatalf("then soonest is %d", s)
	}
}

func TestIndexOutOfRangePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("scheduling an index above MaxIndex did not panic")
		}
	}()
	NewIndex(t0).Schedule(MaxIndex+1, t0)
}

// TestIndexRandomAgainstModel is TestRandomAgainstModel for the index
// wheel: each timer fires exactly once, at the first Advance at or after its
// tick boundary, never before its instant; fire sometimes reschedules the
// timer it was given, as a shard does for an early eviction timer.
func TestIndexRandomAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	w := NewIndex(t0)
	const n = 3000 // three chunks of links
	want := map[uint32]int64{}
	spans := []int64{ms, 50 * ms, 2 * sec, 10 * 60 * sec, 2 * day, 400 * day}
	now := t0
	for step := range 6000 {
		switch rng.IntN(4) {
		case 0, 1:
			i := uint32(rng.IntN(n))
			at := now + rng.Int64N(spans[rng.IntN(len(spans))])
			w.Schedule(i, at)
			want[i] = at
		case 2:
			i := uint32(rng.IntN(n))
			w.Cancel(i)
			delete(want, i)
		case 3:
			now += rng.Int64N(spans[rng.IntN(len(spans))])
			w.Advance(now, func(i uint32) {
				at, ok := want[i]
				if !ok || at != w.At(i) || w.Scheduled(i) {
					t.Fatalf("step %d: timer %d fired but was not due (%v)", step, i, ok)
				}
				if at > now {
					t.Fatalf("step %d: timer %d fired %d ns early", step, i, at-now)
				}
				delete(want, i)
				if rng.IntN(8) == 0 {
					later := now + 1 + rng.Int64N(sec)
					w.Schedule(i, later)
					want[i] = later
				}
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
		for i, at := range want {
			if !w.Scheduled(i) || w.At(i) != at {
				t.Fatalf("step %d: timer %d not scheduled at %d", step, i, at)
			}
		}
	}
}

func BenchmarkIndexScheduleAdvance(b *testing.B) {
	w := NewIndex(t0)
	now := t0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.Schedule(uint32(i&(1<<16-1)), now+int64(i%5000)*ms)
		i++
		if i%64 == 0 {
			now += ms
			w.Advance(now, func(uint32) {})
		}
	}
}

func TestIndexReserve(t *testing.T) {
	w := NewIndex(t0)
	w.Reserve(5000)
	// The links' memory itself, not the process's allocation count: that
	// counts every goroutine's allocations, and other goroutines (the
	// race detector's, the test runner's) made the check fail now and then.
	type chunk struct {
		data *link
		len  int
	}
	layout := func() []chunk {
		var cs []chunk
		for _, c := range w.chunks {
			cs = append(cs, chunk{unsafe.SliceData(c), len(c)})
		}
		return cs
	}
	before := layout()
	for i := range uint32(5000) {
		w.Schedule(i, t0+int64(i)*ms)
	}
	if after := layout(); !slices.Equal(before, after) {
		t.Fatalf("scheduling reserved timers moved or grew the links: %v, then %v", before, after)
	}
	if allocs := testing.AllocsPerRun(100, func() { w.Schedule(7, t0+9*ms) }); allocs != 0 {
		t.Fatalf("%v allocations moving a reserved timer", allocs)
	}
}

// TestIndexSmallWheelIsSmall: a wheel timing a few records holds a few
// links, not a whole chunk of them.
func TestIndexSmallWheelIsSmall(t *testing.T) {
	w := NewIndex(t0)
	for i := range uint32(3) {
		w.Schedule(i, t0+sec)
	}
	n := 0
	for _, c := range w.chunks {
		n += len(c)
	}
	if n > 16 {
		t.Fatalf("3 timers hold %d links", n)
	}
}
