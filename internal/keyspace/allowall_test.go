package keyspace

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/rules"
)

func allowAll(d *Dispatcher, st *rules.Store, pairs ...string) (bool, []Op) {
	var ops []Op
	for i := 0; i < len(pairs); i += 2 {
		ops = append(ops, Op{Kind: Allow, Rule: st.Load().Get([]byte(pairs[i+1])), Key: []byte(pairs[i]), Cost: 1})
	}
	ok, err := d.AllowAll(ops)
	if err != nil {
		panic(err)
	}
	return ok, ops
}

func TestAllowAllChargesAllOrNothing(t *testing.T) {
	for _, n := range []int{1, 8} { // one shard: the group path; eight: the hold path
		t.Run(fmt.Sprintf("%d shards", n), func(t *testing.T) {
			m, st, _ := newMap(t, n,
				def(t, "user", "token_bucket", "5", "24h", ""),
				def(t, "tenant", "sliding_counter", "8", "24h", ""))
			d := m.NewDispatcher()
			admitted := 0
			for range 6 {
				if ok, _ := allowAll(d, st, "u1", "user", "t1", "tenant"); ok {
					admitted++
				}
			}
			if admitted != 5 {
				t.Fatalf("u1: %d admitted, want 5", admitted)
			}
			admitted = 0
			var last []Op
			for range 5 {
				var ok bool
				ok, last = allowAll(d, st, "u2", "user", "t1", "tenant")
				if ok {
					admitted++
				}
			}
			if admitted != 3 {
				t.Fatalf("u2: %d admitted, want 3", admitted)
			}
			// The denial says which limit bound: the user alone would pass.
			if !last[0].Decision.Allowed || last[1].Decision.Allowed || last[0].Decision.Remaining != 2 {
				t.Fatalf("denied decisions: %+v / %+v", last[0].Decision, last[1].Decision)
			}
			if op := do(m, st, Peek, "user", "u2", 1); op.Decision.Remaining != 2 {
				t.Fatalf("u2 has %d remaining; denied calls charged something", op.Decision.Remaining)
			}
		})
	}
}

// TestAllowAllConcurrentSharedTenant: 64 callers, each with its own user key,
// share one tenant key of limit 1000: exactly 1000 are admitted and the
// users' charges add up to 1000.
func TestAllowAllConcurrentSharedTenant(t *testing.T) {
	m, st, _ := newMap(t, 8,
		def(t, "user", "token_bucket", "100", "24h", ""),
		def(t, "tenant", "fixed_window", "1000", "24h", ""))
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			d := m.NewDispatcher()
			user := fmt.Sprintf("u%d", i)
			for range 30 {
				if ok, _ := allowAll(d, st, user, "user", "acme", "tenant"); ok {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 1000 {
		t.Fatalf("admitted %d, want exactly 1000", admitted.Load())
	}
	var charged int64
	for i := range 64 {
		charged += 100 - do(m, st, Peek, "user", fmt.Sprintf("u%d", i), 1).Decision.Remaining
	}
	if charged != 1000 {
		t.Fatalf("users were charged %d in all, want 1000", charged)
	}
}

// TestAllowAllNoDeadlock has many callers decide random pairs in random
// orders across shards, mixed with ordinary batches, for a bounded number of
// rounds; every caller must finish.
func TestAllowAllNoDeadlock(t *testing.T) {
	m, st, _ := newMap(t, 8, def(t, "r", "token_bucket", "1000000", "1s", ""))
	rule := st.Load().Get([]byte("r"))
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			d := m.NewDispatcher()
			for range 300 {
				perm := rng.Perm(16)
				var ops []Op
				for _, k := range perm[:2+rng.IntN(6)] {
					ops = append(ops, Op{Kind: Allow, Rule: rule, Key: fmt.Appendf(nil, "k%d", k), Cost: 1})
				}
				if rng.IntN(3) == 0 {
					for _, op := range ops {
						d.Add(op)
					}
					d.Run()
					d.Reset()
				} else {
					if _, err := d.AllowAll(ops); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("callers still blocked after 60s: deadlock")
	}
}

// BenchmarkAllowAll compares one RL.ALLOWALL of n pairs with n separate
// RL.ALLOW round trips, at the dispatcher (no network).
func BenchmarkAllowAll(b *testing.B) {
	for _, n := range []int{2, 3} {
		m, st, _ := newMap(b, DefaultShards(), def(b, "r", "token_bucket", "1000000000", "1s", ""))
		rule := st.Load().Get([]byte("r"))
		var ops []Op
		for i := range n {
			ops = append(ops, Op{Kind: Allow, Rule: rule, Key: fmt.Appendf(nil, "key-%d", i), Cost: 1})
		}
		d := m.NewDispatcher()
		b.Run(fmt.Sprintf("ALLOWALL/%d-pairs", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d.AllowAll(ops)
			}
		})
		b.Run(fmt.Sprintf("separate-ALLOW/%d-calls", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, op := range ops {
					d.Add(op)
					d.Run()
					d.Reset()
				}
			}
		})
	}
}
