package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/client/internal/resptest"
	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rltest"
)

// The local tier's tests run against resptest's server, whose RL.ACQUIRE
// and RL.REFUND are algorithms.Acquire and Refund, the maths the real
// server will run.

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time            { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Unix() int64               { return c.ns.Load() }
func (c *fakeClock) Advance(d time.Duration)   { c.ns.Add(int64(d)) }
func (c *fakeClock) Set(t time.Time)           { c.ns.Store(t.UnixNano()) }
func (c *fakeClock) Since(t time.Time) float64 { return float64(c.ns.Load()-t.UnixNano()) / 1e9 }

// TestBudgetNeverAdmitsMoreThanTheLimit runs several Budgets (nodes, each
// with its own connection pool) with several goroutines each against one
// key of a real rlserver, for every algorithm: once with far more demand
// than the limit, once with less (so the nodes hold units at the end).
//
// The rules' window is 366 days, so in the seconds the test runs a bucket
// drains far less than one unit and a window does not end (a window
// boundary falls inside a given few seconds with odds of about 1 in 10^7):
// the total admitted must be at most the limit, exactly. After Close the
// server shows at least the admitted units spent (none invented); only a
// bucket may show a little more, one unit per refund at most, since a
// refund takes off what may have drained since the grant, rounded up.
func TestBudgetNeverAdmitsMoreThanTheLimit(t *testing.T) {
	const (
		nodes      = 3
		goroutines = 6
		requests   = 60 // per goroutine: 3 × 6 × 60 = 1080 requests of 2 units on average
	)
	for _, c := range []struct {
		a     algorithms.Algorithm
		limit int64
	}{
		{algorithms.TokenBucket, 500}, {algorithms.LeakyBucket, 500}, {algorithms.FixedWindow, 500},
		{algorithms.SlidingLog, 500}, {algorithms.SlidingCounter, 500},
		{algorithms.TokenBucket, 5000}, {algorithms.SlidingLog, 5000}, {algorithms.SlidingCounter, 5000},
	} {
		a, limit := c.a, c.limit
		t.Run(fmt.Sprint(a, limit), func(t *testing.T) {
			t.Parallel()
			p := rltest.Start(t, bin, fmt.Sprintf("rules:\n  - {name: r, algorithm: %s, limit: %d, window: 8784h}\n", a, limit))
			var admitted, denied atomic.Int64
			var budgets []*Budget
			for range nodes {
				b := NewBudget(newClient(t, p.Addr, 3), "r", BudgetOptions{Chunk: 7, MaxHold: time.Hour})
				budgets = append(budgets, b)
			}
			var wg sync.WaitGroup
			for _, b := range budgets {
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range requests {
							cost := int64(1 + (g+i)%3)
							d, err := b.Take(context.Background(), "hot", cost)
							switch {
							case err != nil:
								t.Error(err)
								return
							case d.Allowed:
								admitted.Add(cost)
							default:
								denied.Add(1)
							}
						}
					}()
				}
			}
			wg.Wait()
			if admitted.Load() > limit {
				t.Fatalf("admitted %d units, limit %d", admitted.Load(), limit)
			}
			if overDemand := limit < 2000; overDemand != (denied.Load() > 0) {
				t.Fatalf("%d denied with a limit of %d", denied.Load(), limit)
			}
			var refunds int64
			for _, b := range budgets {
				if err := b.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				st := b.Stats()
				refunds += st.Acquires // at most one refund per grant
			}
			cl := newClient(t, p.Addr, 2)
			d, err := cl.Peek(context.Background(), "hot", "r", 1)
			if err != nil {
				t.Fatal(err)
			}
			spent := limit - d.Remaining
			lost := spent - admitted.Load()
			if lost < 0 || (lost > 0 && !a.IsBucket()) || lost > refunds {
				t.Fatalf("server shows %d spent, %d were admitted: units lost or invented", spent, admitted.Load())
			}
			t.Logf("admitted %d of %d, %d requests denied, %d units not returned", admitted.Load(), limit, denied.Load(), lost)
		})
	}
}

// TestBudgetSavesRoundTrips counts RL.ACQUIRE calls to a real server for
// sequential requests under a limit they never reach: one per chunk.
func TestBudgetSavesRoundTrips(t *testing.T) {
	p := rltest.Start(t, bin, "rules:\n  - {name: r, algorithm: sliding_counter, limit: 1000000, window: 8784h}\n")
	for _, chunk := range []int64{20, 50} {
		b := NewBudget(newClient(t, p.Addr, 3), "r", BudgetOptions{Chunk: chunk, LowWater: -1, MaxHold: time.Hour})
		const requests = 2000
		key := fmt.Sprint("k", chunk)
		for range requests {
			if d, err := b.Take(context.Background(), key, 1); err != nil || !d.Allowed {
				t.Fatalf("%+v, %v", d, err)
			}
		}
		trips := b.Stats().Acquires
		b.Close(context.Background())
		if want := int64(requests) / chunk; trips != want {
			t.Errorf("chunk %d: %d round trips for %d requests, want %d", chunk, trips, requests, want)
		}
		// The server counted exactly the units served: the last chunk was
		// used up, nothing was left to give back.
		d, err := newClient(t, p.Addr, 2).Peek(context.Background(), key, "r", 1)
		if err != nil || 1_000_000-d.Remaining != requests {
			t.Fatalf("chunk %d: server shows %d spent, %v", chunk, 1_000_000-d.Remaining, err)
		}
		t.Logf("chunk %d: %d requests, %d RL.ACQUIRE round trips (%.1f× fewer)", chunk, requests, trips, float64(requests)/float64(trips))
	}
}

// TestBudgetCooldownAfterRefusal: once the server grants nothing, the key
// is not asked again until retry_after has passed, however many requests
// arrive; then it is asked once.
func TestBudgetCooldownAfterRefusal(t *testing.T) {
	clock := newFakeClock()
	s := resptest.Start(t, map[string]resptest.Rule{"r": {Algorithm: algorithms.FixedWindow, Limit: 5, Window: time.Minute}})
	s.SetClock(clock.Unix)
	clock.Set(clock.Now().Truncate(time.Minute).Add(10 * time.Second)) // 50 s before the window ends
	b := NewBudget(newClient(t, s.Addr(), 2), "r", BudgetOptions{Chunk: 5, Now: clock.Now, sweepEvery: -1})
	defer b.Close(context.Background())
	ctx := context.Background()
	for i := range 5 {
		if d, err := b.Take(ctx, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
	}
	d, err := b.Take(ctx, "k", 1)
	if err != nil || d.Allowed || d.RetryAfter != 50*time.Second {
		t.Fatalf("6th of 5: %+v, %v; want denied for 50s", d, err)
	}
	asked := s.Count("RL.ACQUIRE")
	for range 1000 {
		if d, _ := b.Take(ctx, "k", 1); d.Allowed {
			t.Fatal("admitted during the cooldown")
		}
	}
	clock.Advance(49 * time.Second)
	if d, _ := b.Take(ctx, "k", 1); d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("1 s before the end: %+v", d)
	}
	if n := s.Count("RL.ACQUIRE"); n != asked {
		t.Fatalf("%d RL.ACQUIRE during the cooldown", n-asked)
	}
	clock.Advance(time.Second)
	if d, err := b.Take(ctx, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("after the cooldown: %+v, %v", d, err)
	}
	if n := s.Count("RL.ACQUIRE"); n != asked+1 {
		t.Fatalf("%d RL.ACQUIRE after the cooldown, want 1", n-asked)
	}
}

// TestBudgetGivesBackWhatIsLeft: a reservation's leftover goes back when
// it ends (here MaxHold) and at Close; a fixed window's reservation ends
// before the window does, so the refund still counts.
func TestBudgetGivesBackWhatIsLeft(t *testing.T) {
	clock := newFakeClock()
	s := resptest.Start(t, map[string]resptest.Rule{"r": {Algorithm: algorithms.FixedWindow, Limit: 100, Window: time.Minute}})
	s.SetClock(clock.Unix)
	clock.Set(clock.Now().Truncate(time.Minute))
	b := NewBudget(newClient(t, s.Addr(), 3), "r", BudgetOptions{Chunk: 10, LowWater: -1, MaxHold: 5 * time.Second, Now: clock.Now, sweepEvery: -1})
	ctx := context.Background()
	b.Take(ctx, "a", 3)
	if r := s.Peek("a", "r").Remaining; r != 90 {
		t.Fatalf("server remaining %d after a chunk of 10", r)
	}
	clock.Advance(4 * time.Second)
	b.sweep(ctx)
	if s.Count("RL.REFUND") != 0 {
		t.Fatal("refunded before the reservation ended")
	}
	clock.Advance(2 * time.Second)
	b.sweep(ctx)
	if r := s.Peek("a", "r").Remaining; r != 97 {
		t.Fatalf("server remaining %d after the refund, want 97", r)
	}
	// The window ends in 54 s: a reservation made 1 s before its end is
	// served for less than 1 s, and its leftover still comes back.
	clock.Advance(53 * time.Second)
	b.Take(ctx, "b", 1)
	clock.Advance(time.Second - time.Millisecond)
	if d, _ := b.Take(ctx, "b", 1); !d.Allowed {
		t.Fatalf("inside the window: %+v", d)
	}
	b.Take(ctx, "c", 2)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if rb, rc := s.Peek("b", "r").Remaining, s.Peek("c", "r").Remaining; rb != 98 || rc != 98 {
		t.Fatalf("after Close: b remaining %d, c remaining %d; want 98 each", rb, rc)
	}
	st := b.Stats()
	if st.Refunds != st.Returned || st.Keys != 0 {
		t.Fatalf("stats %+v: every unit offered back should have been taken", st)
	}
	if _, err := b.Take(ctx, "a", 1); err != ErrClosed {
		t.Fatalf("Take after Close: %v", err)
	}
}

// TestBudgetWithoutGrantInstants: a server whose RL.ACQUIRE replies with
// six fields gives no way to identify a grant; the Budget then serves as
// usual and gives nothing back (units are lost, never invented).
func TestBudgetWithoutGrantInstants(t *testing.T) {
	s := resptest.Start(t, map[string]resptest.Rule{"r": {Algorithm: algorithms.TokenBucket, Limit: 100, Window: time.Hour}})
	s.SixFieldGrants()
	b := NewBudget(newClient(t, s.Addr(), 2), "r", BudgetOptions{Chunk: 10})
	if d, err := b.Take(context.Background(), "k", 1); err != nil || !d.Allowed {
		t.Fatalf("%+v, %v", d, err)
	}
	b.Close(context.Background())
	if n := s.Count("RL.REFUND"); n != 0 {
		t.Fatalf("%d RL.REFUND without grant instants", n)
	}
}

// TestBudgetMaxKeys: beyond MaxKeys keys, requests go to the server one by
// one, and the Budget holds no more keys.
func TestBudgetMaxKeys(t *testing.T) {
	s := resptest.Start(t, map[string]resptest.Rule{"r": {Algorithm: algorithms.FixedWindow, Limit: 100, Window: time.Hour}})
	b := NewBudget(newClient(t, s.Addr(), 3), "r", BudgetOptions{Chunk: 10, MaxKeys: 2})
	defer b.Close(context.Background())
	for i := range 5 {
		if d, err := b.Take(context.Background(), fmt.Sprint("k", i), 1); err != nil || !d.Allowed {
			t.Fatalf("key %d: %+v, %v", i, d, err)
		}
	}
	if st := b.Stats(); st.Keys != 2 {
		t.Fatalf("holding %d keys, MaxKeys 2", st.Keys)
	}
	if n := s.Count("RL.ALLOW"); n != 3 {
		t.Fatalf("%d RL.ALLOW for the 3 keys beyond MaxKeys", n)
	}
	if r := s.Peek("k4", "r").Remaining; r != 99 {
		t.Fatalf("a key beyond MaxKeys spent %d", 100-r)
	}
}

// TestBudgetWaitsForOneReservation: concurrent requests for a key with
// nothing held make one RL.ACQUIRE between them, even with a slow server.
func TestBudgetWaitsForOneReservation(t *testing.T) {
	s := resptest.Start(t, map[string]resptest.Rule{"r": {Algorithm: algorithms.FixedWindow, Limit: 1000, Window: time.Hour}})
	s.SetDelay(30 * time.Millisecond)
	b := NewBudget(newClient(t, s.Addr(), 3), "r", BudgetOptions{Chunk: 50, LowWater: -1})
	defer b.Close(context.Background())
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d, err := b.Take(context.Background(), "k", 1); err != nil || !d.Allowed {
				t.Errorf("%+v, %v", d, err)
			}
		}()
	}
	wg.Wait()
	if n := s.Count("RL.ACQUIRE"); n != 1 {
		t.Fatalf("%d RL.ACQUIRE for 20 concurrent requests, want 1", n)
	}
}

func TestBudgetServingFromMemoryDoesNotAllocate(t *testing.T) {
	s := resptest.Start(t, map[string]resptest.Rule{"r": {Algorithm: algorithms.FixedWindow, Limit: 1_000_000_000, Window: time.Hour}})
	b := NewBudget(newClient(t, s.Addr(), 3), "r", BudgetOptions{Chunk: 1_000_000, LowWater: -1, MaxHold: time.Hour})
	defer b.Close(context.Background())
	ctx := context.Background()
	b.Take(ctx, "k", 1)
	if allocs := testing.AllocsPerRun(1000, func() { b.Take(ctx, "k", 1) }); allocs != 0 {
		t.Fatalf("%.1f allocations per request served from memory", allocs)
	}
}

// BenchmarkBudgetTake measures a request served from memory, and (as
// trips/op) how many reservations requests cost at chunks 20 and 50.
func BenchmarkBudgetTake(b *testing.B) {
	s := resptest.Start(b, map[string]resptest.Rule{"r": {Algorithm: algorithms.SlidingCounter, Limit: 1_000_000_000, Window: time.Hour}})
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	c := New(rdb)
	b.Run("hit", func(b *testing.B) {
		bud := NewBudget(c, "r", BudgetOptions{Chunk: 1 << 40, LowWater: -1, MaxHold: time.Hour})
		defer bud.Close(context.Background())
		bud.Take(context.Background(), "k", 1)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bud.Take(context.Background(), "k", 1)
			}
		})
	})
	for _, chunk := range []int64{1, 20, 50} {
		b.Run(fmt.Sprint("chunk", chunk), func(b *testing.B) {
			bud := NewBudget(c, "r", BudgetOptions{Chunk: chunk, MaxHold: time.Hour})
			defer bud.Close(context.Background())
			b.ReportAllocs()
			for b.Loop() {
				bud.Take(context.Background(), "k", 1)
			}
			b.ReportMetric(float64(bud.Stats().Acquires)/float64(b.N), "trips/op")
		})
	}
}

// TestBudgetCloseReleasesWaiters: a request waiting for a background
// reservation that Close cancels returns rather than waiting forever.
func TestBudgetCloseReleasesWaiters(t *testing.T) {
	s := resptest.Start(t, map[string]resptest.Rule{"r": {Algorithm: algorithms.FixedWindow, Limit: 100, Window: time.Hour}})
	// No background workers: the reservation the first request queues
	// stays queued.
	b := NewBudget(newClient(t, s.Addr(), 3), "r", BudgetOptions{Chunk: 4, LowWater: 4, workers: -1})
	waiting := make(chan struct{})
	b.onWait = func() { close(waiting) }
	ctx := context.Background()
	if d, err := b.Take(ctx, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("%+v, %v", d, err)
	}
	done := make(chan error)
	go func() {
		_, err := b.Take(ctx, "k", 4) // 3 held: waits for the queued reservation
		done <- err
	}()
	<-waiting
	b.Close(ctx)
	select {
	case err := <-done:
		if err != ErrClosed {
			t.Fatalf("waiting request: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a request waiting for a cancelled reservation never returned")
	}
}
