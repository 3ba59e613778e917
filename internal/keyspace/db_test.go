package keyspace

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// str returns key's String value as text, "" and false when it has none.
func str(db *DB, key string) (string, bool) {
	v := db.Get([]byte(key))
	if v == nil {
		return "", false
	}
	return string(v.(*String).B), true
}

func TestPlainKeysThroughADB(t *testing.T) {
	m, _, clk := newMap(t, 2)
	k := []byte("k")
	task(m, k, func(db *DB) {
		if _, ok := str(db, "k"); ok {
			t.Error("a new key has a value")
		}
		if db.Delete(k) || db.SetExpiry(k, db.Now()+sec) {
			t.Error("a missing key was deleted or given an expiry")
		}
		if _, ok := db.Expiry(k); ok {
			t.Error("a missing key has an expiry")
		}
		if err := db.SetString(k, []byte("one")); err != nil {
			t.Fatal(err)
		}
		if !db.SetExpiry(k, db.Now()+sec) {
			t.Error("SetExpiry on an existing key")
		}
		if err := db.SetString(k, []byte("two")); err != nil {
			t.Fatal(err)
		}
		if v, _ := str(db, "k"); v != "two" {
			t.Errorf("value %q", v)
		}
		if at, ok := db.Expiry(k); !ok || at != db.Now()+sec {
			t.Errorf("SetString dropped the expiry: %d %v", at, ok)
		}
	})
	if st := m.Stats(); st.PlainKeys != 1 || st.PlainExpiring != 1 {
		t.Fatalf("stats %+v", st)
	}
	// The expiry is exact to the nanosecond on access, before any tick.
	clk.ns.Add(sec - 1)
	task(m, k, func(db *DB) {
		if _, ok := str(db, "k"); !ok {
			t.Error("expired a nanosecond early")
		}
	})
	clk.ns.Add(1)
	task(m, k, func(db *DB) {
		if _, ok := str(db, "k"); ok {
			t.Error("not expired at its instant")
		}
	})
	if st := m.Stats(); st.PlainKeys != 0 || st.PlainExpiring != 0 || st.ExpiredKeys != 1 {
		t.Fatalf("stats after expiry %+v", st)
	}
	// An expiry in the past deletes; 0 removes the expiry.
	task(m, k, func(db *DB) {
		db.SetString(k, []byte("v"))
		db.SetExpiry(k, db.Now()+sec)
		db.SetExpiry(k, 0)
		if at, ok := db.Expiry(k); !ok || at != 0 {
			t.Errorf("persist: %d %v", at, ok)
		}
		if !db.SetExpiry(k, db.Now()) {
			t.Error("SetExpiry(now) on an existing key")
		}
		if _, ok := str(db, "k"); ok {
			t.Error("an expiry at now kept the key")
		}
	})
}

func TestTasksRunInOrderWithDecisions(t *testing.T) {
	m, st, _ := newMap(t, 4, def(t, "r", "fixed_window", "10", "1h", ""))
	d := m.NewDispatcher()
	var order []string
	var mu sync.Mutex // tasks on different shards run at once
	note := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	k := []byte("same")
	d.AddTask(k, TaskFunc(func(db *DB) { db.SetString(k, []byte("1")); note("set 1") }))
	d.AddTask(k, TaskFunc(func(db *DB) { v, _ := str(db, "same"); note("read " + v) }))
	d.AddTask(k, TaskFunc(func(db *DB) { db.SetString(k, []byte("2")); note("set 2") }))
	allow := d.Add(Op{Kind: Allow, Rule: st.Load().Get([]byte("r")), Key: []byte("x"), Cost: 3})
	d.Run()
	if got := strings.Join(order, ","); got != "set 1,read 1,set 2" {
		t.Fatalf("tasks on one key ran as %s", got)
	}
	if op := d.Op(allow); op.Err != nil || op.Decision.Remaining != 7 {
		t.Fatalf("decision in the same round: %+v", op)
	}
}

func TestDoHoldsEveryOwner(t *testing.T) {
	m, _, _ := newMap(t, 4)
	keys := make([][]byte, 16)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "k%d", i)
	}
	d := m.NewDispatcher()
	if err := d.Do(keys, TaskFunc(func(db *DB) {
		for _, k := range keys {
			if !db.Covers(k) {
				t.Errorf("%s not covered", k)
			}
			db.SetString(k, k)
		}
	})); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.PlainKeys != 16 {
		t.Fatalf("%d keys", st.PlainKeys)
	}
	// A key outside those declared is a bug in the caller, caught at once:
	// on a coordinator holding shards, it panics there...
	a := keys[0]
	b := plainKeyElsewhere(m, a)
	var outside []byte
	for i := 0; outside == nil; i++ {
		if k := fmt.Appendf(nil, "o%d", i); m.shardOf(nil, k) != m.shardOf(nil, a) && m.shardOf(nil, k) != m.shardOf(nil, b) {
			outside = k
		}
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "does not cover") {
				t.Fatalf("reaching an undeclared key: %v", r)
			}
		}()
		d.Do([][]byte{a, b}, TaskFunc(func(db *DB) {
			if db.Covers(outside) {
				t.Error("covers a key on another shard")
			}
			db.Get(outside)
		}))
	}()
	if failed(m) {
		t.Fatal("a panic before any state was reached failed a shard")
	}
	// ...and on the shard that runs it alone, the shard fails (its state
	// may be half changed by then).
	d.Do([][]byte{a}, TaskFunc(func(db *DB) { db.SetString(a, a); db.Get(outside) }))
	if f := m.Failure(); f == nil || f.Shard != m.shardOf(nil, a) || !strings.Contains(f.Panic, "does not cover") {
		t.Fatalf("failure %+v", f)
	}
}

func TestExecSeesEverythingAtOneInstant(t *testing.T) {
	m, st, clk := newMap(t, 4, def(t, "r", "token_bucket", "10", "1h", ""))
	rule := st.Load().Get([]byte("r"))
	err := m.NewDispatcher().Exec(func(db *DB) {
		now := db.Now()
		for i := range 8 {
			k := fmt.Appendf(nil, "k%d", i)
			db.SetString(k, k)
			op := Op{Kind: Allow, Rule: rule, Key: k, Cost: 10}
			db.Apply(&op)
			if !op.Decision.Allowed || db.Now() != now {
				t.Errorf("%s: %+v", k, op)
			}
		}
		if s := db.Stats(); s.Keys != 8 || s.PlainKeys != 8 {
			t.Errorf("stats inside: %+v", s)
		}
		clk.ns.Add(sec) // the clock moves; the transaction's instant does not
		if db.Now() != now {
			t.Error("Now moved")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	m.NewDispatcher().Exec(func(db *DB) { db.Flush() })
	if s := m.Stats(); s.Keys+s.PlainKeys != 0 {
		t.Fatalf("after a flush in a transaction: %+v", s)
	}
}

func TestTooLargeValues(t *testing.T) {
	m, _, _ := newMapWith(t, Config{Shards: 1, MaxValueSize: 4})
	k := []byte("k")
	task(m, k, func(db *DB) {
		var tl *TooLargeError
		if err := db.SetString(k, []byte("12345")); !errors.As(err, &tl) || tl.What != "value" {
			t.Errorf("SetString over the limit: %v", err)
		}
		if err := db.Put(k, &String{B: []byte("12345")}); !errors.Is(err, ErrTooLarge) {
			t.Errorf("Put over the limit: %v", err)
		}
		if err := db.CheckSize(5); !errors.Is(err, ErrTooLarge) || db.CheckSize(4) != nil {
			t.Errorf("CheckSize: %v", err)
		}
		if db.Get(k) != nil {
			t.Error("a refused write created the key")
		}
	})
}

// TestAMessageToAHeldShardIsCaught: a command that asks the shards by
// message while its own transaction holds them would wait forever; builds
// tagged invariants catch it at the send instead.
func TestAMessageToAHeldShardIsCaught(t *testing.T) {
	if !invariants {
		t.Skip("only builds tagged invariants check who sends to a held shard")
	}
	m, _, _ := newMap(t, 2)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "which it holds") {
			t.Fatalf("Stats by message inside a transaction: %v", r)
		}
	}()
	m.NewDispatcher().Exec(func(db *DB) { m.Stats() })
}

// TestOnlyTheOwnerTouchesAShard: a goroutine that reaches a shard's state
// without owning it or holding it is caught (builds tagged invariants).
func TestOnlyTheOwnerTouchesAShard(t *testing.T) {
	if !invariants {
		t.Skip("only builds tagged invariants check ownership")
	}
	m, _, _ := newMap(t, 1)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "touched shard") {
			t.Fatalf("a stranger touching a shard: %v", r)
		}
	}()
	m.shards[0].tick(0)
}
