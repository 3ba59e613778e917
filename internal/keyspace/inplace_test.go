package keyspace

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/rules"
)

// callerID returns the calling goroutine's id (test only: slow).
func callerID() uint64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// TestBatchRunsOnTheCaller: a round's batch runs on the Dispatcher's own
// goroutine, not the shard's; for a shard another round is running, it
// waits until that round is done, then runs on its own goroutine too.
func TestBatchRunsOnTheCaller(t *testing.T) {
	m, _, _ := newMap(t, 1)
	key := []byte("k")
	me := callerID()
	var ranOn uint64
	task(m, key, func(*DB) { ranOn = callerID() })
	if ranOn != me {
		t.Fatalf("the batch of an idle shard ran on goroutine %d, not the caller's %d", ranOn, me)
	}

	// Keep the shard busy with another dispatcher's batch until released.
	started, release := make(chan struct{}), make(chan struct{})
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		task(m, key, func(*DB) { close(started); <-release })
	}()
	<-started
	type ran struct{ caller, on uint64 }
	done := make(chan ran)
	go func() {
		var on uint64
		task(m, key, func(*DB) { on = callerID() })
		done <- ran{callerID(), on}
	}()
	select {
	case <-done:
		t.Fatal("a batch ran while the shard was busy with another")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-busy
	if r := <-done; r.on != r.caller {
		t.Fatalf("the batch for a busy shard ran on goroutine %d, not its caller's %d", r.on, r.caller)
	}
}

// TestPanicInPlaceFailsTheShard: a panic in a batch run in place fails the
// shard as one on its goroutine does: the panic does not reach the caller,
// the batch is refused, and the shard refuses what follows while the
// others serve.
func TestPanicInPlaceFailsTheShard(t *testing.T) {
	m, _, _ := newMap(t, 2)
	k0, k1 := keyOn(m, nil, 0), keyOn(m, nil, 1)
	d := m.NewDispatcher()
	tk := d.AddTask(k0, TaskFunc(func(*DB) { panic("in place") }))
	d.Run()
	if op := d.Op(tk); !errors.Is(op.Err, ErrShardFailed) {
		t.Fatalf("the panicking batch: %+v", op)
	}
	d.Reset()
	if f := m.Failure(); f == nil || f.Shard != 0 || f.Panic != "in place" {
		t.Fatalf("failure: %+v", f)
	}
	ran := false
	if op := one(m, Op{Kind: Run, Key: k0, Task: TaskFunc(func(*DB) { ran = true })}); !errors.Is(op.Err, ErrShardFailed) || ran {
		t.Fatalf("a Task on the failed shard: %+v (ran %v)", op, ran)
	}
	if op := one(m, Op{Kind: Run, Key: k1, Task: TaskFunc(func(*DB) { ran = true })}); op.Err != nil || !ran {
		t.Fatalf("a Task on the healthy shard: %+v (ran %v)", op, ran)
	}
}

// TestReleaseLetsTheWaiterRun: a goroutine waiting for a shard runs as soon
// as the holder releases it, before the holder goes on. An event loop with
// input every round never parks, so a waiter left runnable behind it (the
// shard's own goroutine with a wheel tick, another loop's round) would wait
// for Go's 10 ms preemption. One processor makes the order observable: the
// waiter can only have run if release gave up the processor. The scheduler
// sometimes takes its global queue first (1 time in 61), so most of the
// trials, not all, must see the hand-over; without it none does.
func TestReleaseLetsTheWaiterRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	m, _, _ := newMap(t, 1)
	s := m.shards[0]
	const trials = 20
	handedOver := 0
	for range trials {
		s.acquire()
		var ran atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.acquire()
			ran.Store(true)
			s.release()
		}()
		for s.waiting.Load() == 0 {
			runtime.Gosched() // until the waiter blocks in acquire
		}
		s.release()
		if ran.Load() {
			handedOver++
		}
		<-done
	}
	if handedOver < trials*3/4 {
		t.Fatalf("the waiter ran before the holder went on in %d of %d trials", handedOver, trials)
	}
}

// TestReadingAheadChangesNothing: the same random rounds of operations —
// decisions, peeks, resets and acquisitions on rules kept in records and in
// a map, Tasks between them — give the same results whether each round
// reads its records ahead (shard.touch) or not.
func TestReadingAheadChangesNothing(t *testing.T) {
	defs := []rules.Def{
		def(t, "tb", "token_bucket", "5", "1s", ""),
		def(t, "fw", "fixed_window", "3", "1s", ""),
		def(t, "log", "sliding_log", "4", "1s", ""),
	}
	run := func(from int) []Op {
		defer func(saved int) { touchFrom = saved }(touchFrom)
		touchFrom = from
		m, st, clk := newMap(t, 2, defs...)
		rng := rand.New(rand.NewPCG(18, 1))
		var got []Op
		for range 300 {
			clk.ns.Add(rng.Int64N(int64(200 * time.Millisecond)))
			d := m.NewDispatcher()
			n := 1 + rng.IntN(40)
			for range n {
				key := []byte(fmt.Sprint("k", rng.IntN(60)))
				rule := st.Load().Get([]byte([]string{"tb", "fw", "log"}[rng.IntN(3)]))
				switch k := rng.IntN(10); {
				case k < 6:
					d.Add(Op{Kind: Allow, Rule: rule, Key: key, Cost: 1 + rng.Int64N(2)})
				case k < 7:
					d.Add(Op{Kind: Peek, Rule: rule, Key: key, Cost: 1})
				case k < 8:
					d.Add(Op{Kind: Reset, Rule: rule, Key: key})
				case k < 9:
					d.Add(Op{Kind: Acquire, Rule: rule, Key: key, Cost: 3})
				default:
					d.AddTask(key, TaskFunc(func(*DB) {}))
				}
			}
			d.Run()
			for i := range n {
				op := *d.Op(i)
				op.Task, op.Rule = nil, nil
				got = append(got, op)
			}
		}
		return got
	}
	touched, plain := run(1), run(math.MaxInt)
	if len(touched) != len(plain) {
		t.Fatalf("%d results against %d", len(touched), len(plain))
	}
	for i := range touched {
		if !reflect.DeepEqual(touched[i], plain[i]) {
			t.Fatalf("operation %d: %+v reading ahead, %+v without", i, touched[i], plain[i])
		}
	}
}
