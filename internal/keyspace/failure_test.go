package keyspace

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/rules"
)

// keyOn returns a key of rule that lives on shard i.
func keyOn(m *Map, rule *rules.Rule, i int) []byte {
	for n := 0; ; n++ {
		if k := fmt.Appendf(nil, "key:%d", n); m.shardOf(rule, k) == i {
			return k
		}
	}
}

// failed reports whether m.Failed is closed.
func failed(m *Map) bool {
	select {
	case <-m.Failed():
		return true
	default:
		return false
	}
}

func TestShardPanicFailsOnlyThatShard(t *testing.T) {
	m, st, _ := newMap(t, 2, def(t, "r", "fixed_window", "10", "1h", ""))
	rule := st.Load().Get([]byte("r"))
	k0, k1 := keyOn(m, rule, 0), keyOn(m, rule, 1)
	allow := func(k []byte) Op { return one(m, Op{Kind: Allow, Rule: rule, Key: k, Cost: 1}) }
	allow(k0)
	allow(k1)
	if failed(m) || m.Failure() != nil {
		t.Fatal("failed before any panic")
	}

	m.InjectPanic(0)

	select {
	case <-m.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("Failed not closed after a shard panicked")
	}
	f := m.Failure()
	if f == nil || f.Shard != 0 || !strings.Contains(f.Panic, "injected") || !strings.Contains(string(f.Stack), "keyspace.(*shard)") ||
		!strings.Contains(f.Error(), "shard 0 failed: panic: injected") {
		t.Fatalf("failure: %+v", f)
	}
	// The failed shard answers every kind of message without touching its
	// state; the healthy one serves as before.
	if op := allow(k0); !errors.Is(op.Err, ErrShardFailed) {
		t.Fatalf("a key on the failed shard: %+v", op)
	}
	if op := allow(k1); op.Err != nil || op.Decision.Remaining != 8 {
		t.Fatalf("a key on the healthy shard: %+v", op)
	}
	plain := keyOn(m, nil, 0)
	ran := false
	if op := one(m, Op{Kind: Run, Key: plain, Task: TaskFunc(func(*DB) { ran = true })}); !errors.Is(op.Err, ErrShardFailed) || ran {
		t.Fatalf("a Task on the failed shard: %+v (ran: %v)", op, ran)
	}
	d := m.NewDispatcher()
	if ok, err := d.AllowAll([]Op{{Kind: Allow, Rule: rule, Key: k0, Cost: 1}, {Kind: Allow, Rule: rule, Key: k1, Cost: 1}}); ok || !errors.Is(err, ErrShardFailed) {
		t.Fatalf("ALLOWALL across the failed shard: %v %v", ok, err)
	}
	if ok, err := d.AllowAll([]Op{{Kind: Allow, Rule: rule, Key: k0, Cost: 1}}); ok || !errors.Is(err, ErrShardFailed) {
		t.Fatalf("ALLOWALL on the failed shard alone: %v %v", ok, err)
	}
	if err := d.Do([][]byte{plain, keyOn(m, nil, 1)}, TaskFunc(func(*DB) { ran = true })); !errors.Is(err, ErrShardFailed) || ran {
		t.Fatalf("a multi-key Task across the failed shard: %v (ran: %v)", err, ran)
	}
	if err := d.Do([][]byte{plain}, TaskFunc(func(*DB) { ran = true })); !errors.Is(err, ErrShardFailed) || ran {
		t.Fatalf("a multi-key Task on the failed shard alone: %v (ran: %v)", err, ran)
	}
	if err := d.Exec(func(*DB) { ran = true }); !errors.Is(err, ErrShardFailed) || ran {
		t.Fatalf("a transaction once a shard failed: %v (ran: %v)", err, ran)
	}
	if op := allow(k1); op.Decision.Remaining != 7 {
		t.Fatalf("the refused ALLOWALL charged the healthy shard: %+v", op)
	}
	m.Tick()
	m.Reconcile()
	if st := m.Stats(); st.Keys != 1 {
		t.Fatalf("stats count %d keys, want the healthy shard's 1", st.Keys)
	}
	var exported []string
	if err := m.Export(10, func(x Exported) { exported = append(exported, x.Key) }, func() error { return nil }); err != nil ||
		len(exported) != 1 || exported[0] != string(k1) {
		t.Fatalf("export: %v %v, want only the healthy shard's key %s", exported, err, k1)
	}
	m.Flush()
	m.Stop() // the failed shard's goroutine exits too
}

// TestCoordinatorPanicFailsTheShardsItHeld: a panic while a coordinator
// changes the state of shards lent to it fails those shards, and every
// shard it held is released; a panic elsewhere in a transaction fails none.
func TestCoordinatorPanicFailsTheShardsItHeld(t *testing.T) {
	m, st, _ := newMap(t, 4, def(t, "r", "fixed_window", "10", "1h", ""))
	rule := st.Load().Get([]byte("r"))
	d := m.NewDispatcher()
	mustPanic := func(what string, fn func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Fatalf("%s did not panic", what)
			}
		}()
		fn()
	}

	mustPanic("a transaction's own code", func() { d.Exec(func(*DB) { panic("a handler's bug") }) })
	if failed(m) {
		t.Fatal("a panic outside any operation failed a shard")
	}
	if op := one(m, Op{Kind: Allow, Rule: rule, Key: []byte("a"), Cost: 1}); op.Err != nil {
		t.Fatalf("shards not released after a panicking transaction: %+v", op)
	}

	// An operation that panics inside the shard's code: a limiter
	// operation with no rule dereferences nil.
	broken := Op{Kind: Allow, Key: []byte("b"), Cost: 1}
	victim := m.shardOf(nil, broken.Key)
	mustPanic("an operation in a transaction", func() { d.Exec(func(db *DB) { db.Apply(&broken) }) })
	if f := m.Failure(); f == nil || f.Shard != victim {
		t.Fatalf("failure %+v, want shard %d", f, victim)
	}
	for i := range m.Len() {
		op := one(m, Op{Kind: Allow, Rule: rule, Key: keyOn(m, rule, i), Cost: 1})
		if (i == victim) != errors.Is(op.Err, ErrShardFailed) {
			t.Fatalf("shard %d after shard %d failed: %+v", i, victim, op)
		}
	}

	// The same inside AllowAll across shards: both of its shards fail.
	x, y := (victim+1)%4, (victim+2)%4
	mustPanic("ALLOWALL", func() {
		d.AllowAll([]Op{{Kind: Allow, Rule: rule, Key: keyOn(m, rule, x), Cost: 1}, {Kind: Allow, Key: keyOn(m, nil, y), Cost: 1}})
	})
	for _, i := range []int{x, y} {
		if op := one(m, Op{Kind: Allow, Rule: rule, Key: keyOn(m, rule, i), Cost: 1}); !errors.Is(op.Err, ErrShardFailed) {
			t.Fatalf("shard %d, which the panicking ALLOWALL held: %+v", i, op)
		}
	}
	last := (victim + 3) % 4
	if op := one(m, Op{Kind: Allow, Rule: rule, Key: keyOn(m, rule, last), Cost: 1}); op.Err != nil {
		t.Fatalf("a shard no panic touched: %+v", op)
	}
}
