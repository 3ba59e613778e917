package keyspace

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/rules"
)

// TestEvictionChangesNothing replays the same random requests against two
// keyspaces under the same fake clock, one evicting idle keys as often as
// possible and one never, and requires identical decisions, for every
// algorithm. The evicting one must actually evict.
func TestEvictionChangesNothing(t *testing.T) {
	algs := []string{"token_bucket", "leaky_bucket", "fixed_window", "sliding_log", "sliding_counter"}
	for _, grace := range []int64{0, 300 * ms} {
		for _, alg := range algs {
			t.Run(fmt.Sprintf("%s/grace=%dms", alg, grace/ms), func(t *testing.T) { evictionChangesNothing(t, alg, grace) })
		}
	}
}

func evictionChangesNothing(t *testing.T, alg string, grace int64) {
	d := def(t, "r", alg, "5", "1s", "")
	if alg == "token_bucket" || alg == "leaky_bucket" {
		d = def(t, "r", alg, "5", "1s", "8")
	}
	evicting, st1, clk1 := newMapWith(t, Config{Shards: 4, IdleGrace: time.Duration(grace)}, d)
	keeping, st2, clk2 := newMap(t, 4, d)
	rng := rand.New(rand.NewPCG(11, uint64(len(alg))))
	d1, d2 := evicting.NewDispatcher(), keeping.NewDispatcher()
	r1, r2 := st1.Load().Get([]byte("r")), st2.Load().Get([]byte("r"))
	for i := range 4000 {
		elapsed := int64(rng.IntN(400)) * 1e6 // up to 400 ms
		if rng.IntN(50) == 0 {
			elapsed = 3 * sec // long idle stretches let keys go fresh
		}
		clk1.ns.Add(elapsed)
		clk2.ns.Add(elapsed)
		evicting.Tick()
		key := fmt.Appendf(nil, "k%d", rng.IntN(20))
		kind := []OpKind{Allow, Allow, Allow, Peek}[rng.IntN(4)]
		cost := 1 + rng.Int64N(5)
		t1 := d1.Add(Op{Kind: kind, Rule: r1, Key: key, Cost: cost})
		t2 := d2.Add(Op{Kind: kind, Rule: r2, Key: key, Cost: cost})
		d1.Run()
		d2.Run()
		if a, b := d1.Op(t1).Decision, d2.Op(t2).Decision; a != b {
			t.Fatalf("request %d %s %s: with eviction %+v, without %+v", i, key, []string{"", "allow", "peek"}[kind], a, b)
		}
		d1.Reset()
		d2.Reset()
	}
	st := evicting.Stats()
	if st.IdleEvictions == 0 {
		t.Fatal("no key was ever evicted")
	}
	if st.Keys >= keeping.Stats().Keys && keeping.Stats().Keys > 0 {
		t.Fatalf("evicting map holds %d keys, the other %d", st.Keys, keeping.Stats().Keys)
	}
}

// TestIdleGraceKeepsFreshKeysBriefly: with a grace, a key whose state is
// fresh stays (answering as a new key would) until the grace has passed.
func TestIdleGraceKeepsFreshKeysBriefly(t *testing.T) {
	m, st, clk := newMapWith(t, Config{Shards: 1, IdleGrace: 500 * time.Millisecond}, def(t, "r", "fixed_window", "5", "1s", ""))
	do(m, st, Allow, "r", "k", 2)
	clk.ns.Add(sec) // the window is over: the state is fresh
	m.Tick()
	if s := m.Stats(); s.Keys != 1 || s.IdleEvictions != 0 {
		t.Fatalf("within the grace: %d keys, %d evictions", s.Keys, s.IdleEvictions)
	}
	if op := do(m, st, Peek, "r", "k", 1); op.Decision.Remaining != 5 {
		t.Fatalf("a fresh key kept for the grace answers %d remaining, want 5", op.Decision.Remaining)
	}
	clk.ns.Add(499 * ms)
	m.Tick()
	if m.Stats().Keys != 1 {
		t.Fatal("dropped before the grace was over")
	}
	clk.ns.Add(2 * ms)
	m.Tick()
	if s := m.Stats(); s.Keys != 0 || s.IdleEvictions != 1 {
		t.Fatalf("after the grace: %d keys, %d evictions", s.Keys, s.IdleEvictions)
	}
}

func TestIdleKeysLeaveOnTheirOwn(t *testing.T) {
	m, st, clk := newMap(t, 2, def(t, "r", "fixed_window", "5", "1s", ""))
	for i := range 100 {
		do(m, st, Allow, "r", fmt.Sprint(i), 1)
	}
	m.Tick()
	if m.Stats().Keys != 100 {
		t.Fatal("keys evicted before their window ended")
	}
	clk.ns.Add(sec) // t0 is aligned to a second: the window is over
	m.Tick()
	if s := m.Stats(); s.Keys != 0 || s.IdleEvictions != 100 {
		t.Fatalf("after the window: %d keys, %d idle evictions", s.Keys, s.IdleEvictions)
	}
}

// TestBusyKeyLeavesWhenFreshNotWhenFirstScheduled: a key's timer is set
// when it is created and not moved by later admissions; when it fires early
// the key stays, and it leaves at the instant it really goes fresh.
const ms = sec / 1000

func TestBusyKeyLeavesWhenFreshNotWhenFirstScheduled(t *testing.T) {
	// 10 tokens per second, burst 10: one token refills in 100 ms.
	m, st, clk := newMap(t, 1, def(t, "r", "token_bucket", "10", "1s", "10"))
	do(m, st, Allow, "r", "k", 1) // full again at +100 ms: the timer's instant
	clk.ns.Add(50 * ms)
	do(m, st, Allow, "r", "k", 5) // 5.5 tokens short: full again at +600 ms
	clk.ns.Add(60 * ms)           // +110 ms: past the timer, not fresh
	m.Tick()
	if s := m.Stats(); s.Keys != 1 || s.IdleEvictions != 0 {
		t.Fatalf("at +110 ms: %d keys, %d evictions; the key is not fresh yet", s.Keys, s.IdleEvictions)
	}
	if op := do(m, st, Peek, "r", "k", 1); op.Decision.Remaining != 5 {
		t.Fatalf("at +110 ms: %d remaining, want 5", op.Decision.Remaining)
	}
	clk.ns.Add(489 * ms) // +599 ms: still a token short of full
	m.Tick()
	if s := m.Stats(); s.Keys != 1 {
		t.Fatal("evicted before the bucket was full")
	}
	clk.ns.Add(2 * ms) // +601 ms
	m.Tick()
	if s := m.Stats(); s.Keys != 0 || s.IdleEvictions != 1 {
		t.Fatalf("at +601 ms: %d keys, %d evictions; the bucket is full", s.Keys, s.IdleEvictions)
	}
}

// TestMaxKeysLooksPastEarlyTimers: under pressure the victim is the key that
// goes fresh soonest, even when a busier key's timer was set earlier.
func TestMaxKeysLooksPastEarlyTimers(t *testing.T) {
	st, err := rules.NewStore([]rules.Def{def(t, "tb", "token_bucket", "10", "1s", "10"), def(t, "long", "fixed_window", "5", "1h", "")})
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{}
	clk.ns.Store(1_700_000_000 * sec)
	m := New(Config{Shards: 1, Clock: clk.now, Rules: st, MaxKeys: 2})
	t.Cleanup(m.Stop)
	do(m, st, Allow, "tb", "busy", 1) // timer at +100 ms
	clk.ns.Add(50 * ms)
	do(m, st, Allow, "tb", "busy", 9) // really full again at +1000 ms; its timer stays at +100
	clk.ns.Add(10 * ms)
	do(m, st, Allow, "tb", "quiet", 3) // full again at +360 ms: the soonest fresh
	do(m, st, Allow, "long", "x", 1)   // a third key: one must go
	if s := m.Stats(); s.Keys != 2 || s.PressureEvictions != 1 {
		t.Fatalf("%d keys, %d pressure evictions", s.Keys, s.PressureEvictions)
	}
	if op := do(m, st, Peek, "tb", "quiet", 1); op.Decision.Remaining != 10 {
		t.Fatalf("quiet: %d remaining, want 10 (it goes fresh soonest, so it was evicted)", op.Decision.Remaining)
	}
	if op := do(m, st, Peek, "tb", "busy", 1); op.Decision.Remaining != 0 {
		t.Fatalf("busy: %d remaining, want 0 (kept)", op.Decision.Remaining)
	}
}

// TestPressureTakesGraceKeysFirst: under --maxkeys, a key kept only for the
// grace is dropped first, and counted as the lossless eviction it is.
func TestPressureTakesGraceKeysFirst(t *testing.T) {
	m, st, clk := newMapWith(t, Config{Shards: 1, MaxKeys: 2, IdleGrace: time.Hour},
		def(t, "short", "fixed_window", "5", "1s", ""), def(t, "long", "fixed_window", "5", "1h", ""))
	do(m, st, Allow, "short", "done", 1)
	clk.ns.Add(sec) // "done" is fresh, kept for the grace
	do(m, st, Allow, "long", "a", 1)
	do(m, st, Allow, "long", "b", 1) // a third key: "done" goes
	s := m.Stats()
	if s.Keys != 2 || s.IdleEvictions != 1 || s.PressureEvictions != 0 {
		t.Fatalf("%d keys, %d idle and %d pressure evictions", s.Keys, s.IdleEvictions, s.PressureEvictions)
	}
	if op := do(m, st, Peek, "long", "a", 1); op.Decision.Remaining != 4 {
		t.Fatal("a key with spent budget was evicted")
	}
}

func newLimitedMap(t *testing.T, maxKeys int, reject bool) (*Map, *rules.Store, *fakeClock) {
	st, err := rules.NewStore([]rules.Def{def(t, "short", "fixed_window", "5", "1s", ""), def(t, "long", "fixed_window", "5", "1h", "")})
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{}
	clk.ns.Store(1_700_000_000 * sec)
	m := New(Config{Shards: 1, Clock: clk.now, Rules: st, MaxKeys: maxKeys, Reject: reject})
	t.Cleanup(m.Stop)
	return m, st, clk
}

func TestMaxKeysEvictsTheSoonestFresh(t *testing.T) {
	m, st, _ := newLimitedMap(t, 3, false)
	do(m, st, Allow, "long", "a", 1)
	do(m, st, Allow, "short", "b", 1) // fresh again in under a second: the first to go
	do(m, st, Allow, "long", "c", 1)
	do(m, st, Allow, "long", "d", 1)
	s := m.Stats()
	if s.Keys != 3 || s.PressureEvictions != 1 {
		t.Fatalf("%d keys, %d pressure evictions", s.Keys, s.PressureEvictions)
	}
	if op := do(m, st, Peek, "short", "b", 1); op.Decision.Remaining != 5 {
		t.Fatal("the soonest-fresh key was not the one evicted")
	}
	if op := do(m, st, Peek, "long", "a", 1); op.Decision.Remaining != 4 {
		t.Fatal("a long-lived key was evicted")
	}
}

func TestMaxKeysRejects(t *testing.T) {
	m, st, _ := newLimitedMap(t, 2, true)
	do(m, st, Allow, "long", "a", 1)
	do(m, st, Allow, "long", "b", 1)
	if op := do(m, st, Allow, "long", "c", 1); !errors.Is(op.Err, ErrKeyLimit) {
		t.Fatalf("third key: %+v", op)
	}
	if op := do(m, st, Allow, "long", "a", 1); op.Err != nil || op.Decision.Remaining != 3 {
		t.Fatalf("existing keys keep working: %+v", op)
	}
	if op := do(m, st, Peek, "long", "c", 1); op.Err != nil || !op.Decision.Allowed {
		t.Fatalf("peek creates nothing, so it works: %+v", op)
	}
	d := m.NewDispatcher()
	rule := st.Load().Get([]byte("long"))
	ok, err := d.AllowAll([]Op{{Kind: Allow, Rule: rule, Key: []byte("a"), Cost: 1}, {Kind: Allow, Rule: rule, Key: []byte("z"), Cost: 1}})
	if ok || !errors.Is(err, ErrKeyLimit) {
		t.Fatalf("ALLOWALL creating a key: %v %v", ok, err)
	}
	if op := do(m, st, Peek, "long", "a", 1); op.Decision.Remaining != 3 {
		t.Fatal("a refused ALLOWALL charged a pair")
	}
}

func TestExportImportRoundTrip(t *testing.T) {
	algs := []string{"token_bucket", "leaky_bucket", "fixed_window", "sliding_log", "sliding_counter"}
	var defs []rules.Def
	for _, a := range algs {
		defs = append(defs, def(t, a, a, "50", "1h", ""))
	}
	src, st, _ := newMap(t, 4, defs...)
	for i := range 300 {
		do(src, st, Allow, algs[i%5], fmt.Sprint("k", i%60), int64(1+i%3))
	}
	var items []Item
	chunks := 0
	err := src.Export(7, func(x Exported) {
		c := *x.State
		c.Log = append([]int64(nil), x.State.Log...)
		items = append(items, Item{Rule: x.Rule, Key: []byte(x.Key), State: c})
	}, func() error { chunks++; return nil })
	if err != nil || len(items) != 60 || chunks < 60/7 {
		t.Fatalf("exported %d items in %d chunks: %v", len(items), chunks, err)
	}
	dst, st2, _ := newMap(t, 2, defs...)
	for i := range items {
		items[i].Rule = st2.Load().Get([]byte(items[i].Rule.Name))
	}
	if err := dst.Import(items); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		alg := algs[i%5]
		a := do(src, st, Peek, alg, fmt.Sprint("k", i), 1)
		b := do(dst, st2, Peek, alg, fmt.Sprint("k", i), 1)
		if a.Decision != b.Decision {
			t.Fatalf("%s k%d: source %+v, imported %+v", alg, i, a.Decision, b.Decision)
		}
	}
}
