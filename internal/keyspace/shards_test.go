package keyspace

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rlserver/rlserver/internal/rules"
)

const sec = int64(1e9)

// fakeClock is an injected clock tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() int64 { return c.ns.Load() }

func newMap(t testing.TB, shards int, defs ...rules.Def) (*Map, *rules.Store, *fakeClock) {
	t.Helper()
	return newMapWith(t, Config{Shards: shards}, defs...)
}

// newMapWith is newMap with more of the Config set (Clock and Rules are
// filled in).
func newMapWith(t testing.TB, cfg Config, defs ...rules.Def) (*Map, *rules.Store, *fakeClock) {
	t.Helper()
	st, err := rules.NewStore(defs)
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{}
	clk.ns.Store(1_700_000_000 * sec)
	cfg.Clock, cfg.Rules = clk.now, st
	m := New(cfg)
	t.Cleanup(m.Stop)
	return m, st, clk
}

// def is a rule definition for tests.
func def(_ testing.TB, name, alg, limit, window, burst string) rules.Def {
	return rules.MustParseDef(name, alg, limit, window, burst)
}

// do runs one op through a fresh dispatcher and returns it.
func do(m *Map, st *rules.Store, kind OpKind, rule, key string, cost int64) Op {
	d := m.NewDispatcher()
	tk := d.Add(Op{Kind: kind, Rule: st.Load().Get([]byte(rule)), Key: []byte(key), Cost: cost})
	d.Run()
	return *d.Op(tk)
}

func TestConcurrentCallersNeverExceedTheLimit(t *testing.T) {
	for _, alg := range []string{"token_bucket", "leaky_bucket", "fixed_window", "sliding_log", "sliding_counter"} {
		t.Run(alg, func(t *testing.T) {
			m, st, _ := newMap(t, 4, def(t, "r", alg, "1000", "24h", ""))
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range 32 {
				wg.Go(func() {
					d := m.NewDispatcher()
					rule := st.Load().Get([]byte("r"))
					for range 20 {
						// A pipeline of 4 on the hot key plus noise on others.
						var ts []int
						for j := range 4 {
							ts = append(ts, d.Add(Op{Kind: Allow, Rule: rule, Key: []byte("hot"), Cost: 1}))
							d.Add(Op{Kind: Allow, Rule: rule, Key: fmt.Appendf(nil, "k%d", j), Cost: 1})
						}
						d.Run()
						for _, tk := range ts {
							if d.Op(tk).Decision.Allowed {
								admitted.Add(1)
							}
						}
						d.Reset()
					}
				})
			}
			wg.Wait()
			if got := admitted.Load(); got != 1000 {
				t.Fatalf("admitted %d of 2560, want exactly 1000", got)
			}
			if st := m.Stats(); st.Allowed+st.Denied != 32*20*8 {
				t.Fatalf("counted %d decisions, want %d", st.Allowed+st.Denied, 32*20*8)
			}
		})
	}
}

func TestPipelineKeepsOrderPerKey(t *testing.T) {
	m, st, _ := newMap(t, 4, def(t, "r", "fixed_window", "5", "1m", ""))
	rule := st.Load().Get([]byte("r"))
	d := m.NewDispatcher()
	var ts []int
	for i := range 7 {
		ts = append(ts, d.Add(Op{Kind: Allow, Rule: rule, Key: []byte("a"), Cost: 1}))
		d.Add(Op{Kind: Allow, Rule: rule, Key: fmt.Appendf(nil, "other%d", i), Cost: 1})
	}
	d.Run()
	for i, tk := range ts {
		op := d.Op(tk)
		if op.Decision.Allowed != (i < 5) || op.Decision.Remaining != max(int64(4-i), 0) {
			t.Fatalf("op %d: %+v", i, op.Decision)
		}
	}
}

func TestPeekAndReset(t *testing.T) {
	m, st, _ := newMap(t, 2, def(t, "r", "token_bucket", "5", "1s", ""))
	if op := do(m, st, Peek, "r", "k", 2); !op.Decision.Allowed || op.Decision.Remaining != 5 {
		t.Fatalf("peek on a new key: %+v", op.Decision)
	}
	if m.Stats().Keys != 0 {
		t.Fatal("peek created state")
	}
	if op := do(m, st, Reset, "r", "k", 0); op.Existed {
		t.Fatal("reset of a missing key reported it existed")
	}
	do(m, st, Allow, "r", "k", 3)
	if op := do(m, st, Peek, "r", "k", 3); op.Decision.Allowed || op.Decision.Remaining != 2 {
		t.Fatalf("peek after spending 3: %+v", op.Decision)
	}
	if op := do(m, st, Reset, "r", "k", 0); !op.Existed {
		t.Fatal("reset of an existing key reported it missing")
	}
	if op := do(m, st, Peek, "r", "k", 5); !op.Decision.Allowed {
		t.Fatalf("after reset: %+v", op.Decision)
	}
	if m.Stats().Keys != 0 {
		t.Fatal("reset left state behind")
	}
}

func TestRulesNeverShareState(t *testing.T) {
	m, st, _ := newMap(t, 4, def(t, "a", "fixed_window", "1", "1m", ""), def(t, "b", "fixed_window", "1", "1m", ""))
	if !do(m, st, Allow, "a", "k", 1).Decision.Allowed || !do(m, st, Allow, "b", "k", 1).Decision.Allowed {
		t.Fatal("rule b saw rule a's spending")
	}
	if do(m, st, Allow, "a", "k", 1).Decision.Allowed {
		t.Fatal("second spend on a admitted")
	}
}

func TestRuleChanges(t *testing.T) {
	m, st, clk := newMap(t, 4, def(t, "r", "token_bucket", "10", "1m", ""))
	for range 4 {
		do(m, st, Allow, "r", "k", 1)
	}
	// New limit: the 4 spent carry over, the new ceiling applies at once.
	st.Put(def(t, "r", "token_bucket", "5", "1m", ""))
	if op := do(m, st, Peek, "r", "k", 1); op.Decision.Remaining != 1 || op.Decision.Limit != 5 {
		t.Fatalf("after lowering the limit: %+v", op.Decision)
	}
	// Reconcile applies it to keys not touched since.
	do(m, st, Allow, "r", "other", 1)
	st.Put(def(t, "r", "token_bucket", "3", "1m", ""))
	m.Reconcile()
	if op := do(m, st, Peek, "r", "other", 1); op.Decision.Remaining != 2 {
		t.Fatalf("reconciled key: %+v", op.Decision)
	}
	// New algorithm: keys start fresh.
	st.Put(def(t, "r", "fixed_window", "5", "1m", ""))
	m.Reconcile()
	if op := do(m, st, Peek, "r", "k", 1); op.Decision.Remaining != 5 {
		t.Fatalf("after an algorithm change: %+v", op.Decision)
	}
	if m.Stats().Keys != 0 {
		t.Fatal("the old algorithm's keys survived reconcile")
	}
	// Deleting drops keys; re-creating starts fresh.
	do(m, st, Allow, "r", "k", 5)
	st.Delete("r")
	m.Reconcile()
	if m.Stats().Keys != 0 {
		t.Fatal("deleted rule's keys survived")
	}
	st.Put(def(t, "r", "fixed_window", "5", "1m", ""))
	if op := do(m, st, Peek, "r", "k", 1); op.Decision.Remaining != 5 {
		t.Fatalf("re-created rule saw old state: %+v", op.Decision)
	}
	clk.ns.Add(sec)
}

func TestRequestForDeletedRuleStoresNothing(t *testing.T) {
	m, st, _ := newMap(t, 1, def(t, "r", "token_bucket", "10", "1m", ""))
	stale := st.Load().Get([]byte("r"))
	st.Delete("r")
	m.Reconcile()
	d := m.NewDispatcher()
	tk := d.Add(Op{Kind: Allow, Rule: stale, Key: []byte("k"), Cost: 1})
	d.Run()
	if !d.Op(tk).Decision.Allowed || m.Stats().Keys != 0 {
		t.Fatalf("stale request: %+v, keys %d", d.Op(tk).Decision, m.Stats().Keys)
	}
}

func TestStopTwice(t *testing.T) {
	m, _, _ := newMap(t, 2)
	m.Stop()
	m.Stop()
}

func TestDefaultShardsIsAPowerOfTwo(t *testing.T) {
	n := DefaultShards()
	if n < 1 || n&(n-1) != 0 {
		t.Fatalf("DefaultShards() = %d", n)
	}
}

func TestShardOfSpreadsKeys(t *testing.T) {
	m, st, _ := newMap(t, 8, def(t, "r", "token_bucket", "10", "1m", ""))
	rule := st.Load().Get([]byte("r"))
	counts := make([]int, 8)
	for i := range 8000 {
		counts[m.shardOf(rule, fmt.Appendf(nil, "user:%d", i))]++
	}
	for i, c := range counts {
		if c < 800 || c > 1200 {
			t.Fatalf("shard %d got %d of 8000 keys: %v", i, c, counts)
		}
	}
}

func TestSteadyDecisionsDoNotAllocate(t *testing.T) {
	if invariants {
		t.Skip("the invariants build reads goroutine ids from stacks, which allocates")
	}
	m, st, _ := newMap(t, 4, def(t, "r", "sliding_log", "100", "1s", ""))
	rule := st.Load().Get([]byte("r"))
	d := m.NewDispatcher()
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	round := func() {
		for _, k := range keys {
			d.Add(Op{Kind: Allow, Rule: rule, Key: k, Cost: 1})
		}
		d.Run()
		d.Reset()
	}
	round()
	if n := testing.AllocsPerRun(200, round); n != 0 {
		t.Fatalf("a round of decisions on existing keys allocates %v times", n)
	}
}

func benchMap(b *testing.B, alg string) (*Map, *rules.Rule) {
	m, st, _ := newMap(b, DefaultShards(), def(b, "r", alg, "1000000000", "1s", ""))
	return m, st.Load().Get([]byte("r"))
}

// BenchmarkShardRoundTrip measures one decision sent to a shard and back
// (RL.ALLOW without pipelining), beside the bare algorithm call it wraps.
func BenchmarkShardRoundTrip(b *testing.B) {
	m, rule := benchMap(b, "token_bucket")
	d := m.NewDispatcher()
	key := []byte("user:1")
	b.ReportAllocs()
	for b.Loop() {
		d.Add(Op{Kind: Allow, Rule: rule, Key: key, Cost: 1})
		d.Run()
		d.Reset()
	}
}

// BenchmarkPipelinedBatch measures 16 decisions on 16 keys sent as one
// pipeline; ns/op is per batch of 16.
func BenchmarkPipelinedBatch(b *testing.B) {
	m, rule := benchMap(b, "token_bucket")
	d := m.NewDispatcher()
	var keys [][]byte
	for i := range 16 {
		keys = append(keys, fmt.Appendf(nil, "user:%d", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, k := range keys {
			d.Add(Op{Kind: Allow, Rule: rule, Key: k, Cost: 1})
		}
		d.Run()
		d.Reset()
	}
}

// BenchmarkParallelRoundTrips measures many connections deciding at once.
func BenchmarkParallelRoundTrips(b *testing.B) {
	m, rule := benchMap(b, "token_bucket")
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		d := m.NewDispatcher()
		key := fmt.Appendf(nil, "user:%d", n.Add(1))
		for pb.Next() {
			d.Add(Op{Kind: Allow, Rule: rule, Key: key, Cost: 1})
			d.Run()
			d.Reset()
		}
	})
}
