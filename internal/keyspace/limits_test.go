package keyspace

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/rules"
)

// creator is one way a client can create a key: it runs an operation that
// creates key if allowed, and returns the operation's error.
type creator struct {
	name   string
	create func(m *Map, st *rules.Store, key []byte) error
}

// creators lists every operation that creates a key. A new one belongs
// here, so that the key limits are checked for it too.
var creators = []creator{
	{"RL.ALLOW", func(m *Map, st *rules.Store, key []byte) error {
		return one(m, Op{Kind: Allow, Rule: st.Load().Get([]byte("r")), Key: key, Cost: 1}).Err
	}},
	{"RL.ALLOWALL one shard", func(m *Map, st *rules.Store, key []byte) error {
		_, err := m.NewDispatcher().AllowAll([]Op{{Kind: Allow, Rule: st.Load().Get([]byte("r")), Key: key, Cost: 1}})
		return err
	}},
	{"RL.ALLOWALL across shards", func(m *Map, st *rules.Store, key []byte) error {
		// key and a second key on another shard, both new.
		rule := st.Load().Get([]byte("r"))
		other := append(key[:len(key):len(key)], '.')
		for m.shardOf(rule, other) == m.shardOf(rule, key) {
			other[len(other)-1]++
		}
		_, err := m.NewDispatcher().AllowAll([]Op{
			{Kind: Allow, Rule: rule, Key: key, Cost: 1},
			{Kind: Allow, Rule: rule, Key: other, Cost: 1},
		})
		return err
	}},
	{"DB.SetString in a batch", func(m *Map, _ *rules.Store, key []byte) error {
		var err error
		task(m, key, func(db *DB) { err = db.SetString(key, []byte("v")) })
		return err
	}},
	{"DB.Put in a batch", func(m *Map, _ *rules.Store, key []byte) error {
		var err error
		task(m, key, func(db *DB) { err = db.Put(key, &String{B: []byte("v")}) })
		return err
	}},
	{"DB.SetString holding several shards", func(m *Map, _ *rules.Store, key []byte) error {
		var err error
		other := plainKeyElsewhere(m, key)
		if derr := m.NewDispatcher().Do([][]byte{key, other}, TaskFunc(func(db *DB) { err = db.SetString(key, []byte("v")) })); derr != nil {
			return derr
		}
		return err
	}},
	{"MULTI SET", func(m *Map, _ *rules.Store, key []byte) error {
		var err error
		m.NewDispatcher().Exec(func(db *DB) { err = db.SetString(key, []byte("v")) })
		return err
	}},
	{"MULTI RL.ALLOWALL", func(m *Map, st *rules.Store, key []byte) error {
		var err error
		m.NewDispatcher().Exec(func(db *DB) {
			_, err = db.AllowAll([]Op{{Kind: Allow, Rule: st.Load().Get([]byte("r")), Key: key, Cost: 1}})
		})
		return err
	}},
}

// task runs fn as a Task on the shard owning key, through a fresh
// dispatcher.
func task(m *Map, key []byte, fn func(db *DB)) {
	d := m.NewDispatcher()
	d.AddTask(key, TaskFunc(fn))
	d.Run()
}

// plainKeyElsewhere returns a plain key on another shard than key's (key
// itself when there is one shard).
func plainKeyElsewhere(m *Map, key []byte) []byte {
	if m.Len() == 1 {
		return key
	}
	other := append(key[:len(key):len(key)], '.')
	for m.shardOf(nil, other) == m.shardOf(nil, key) {
		other[len(other)-1]++
	}
	return other
}

// one runs op through a fresh dispatcher.
func one(m *Map, op Op) Op {
	d := m.NewDispatcher()
	tk := d.Add(op)
	d.Run()
	return *d.Op(tk)
}

// TestEveryKeyCreatorHonoursTheLimits checks the class of issue 11's bug
// (--maxkeys-policy reject without --maxkeys refused every limiter key while
// SET worked): every path that creates a key, under both policies, with and
// without a key limit, and with keys too large.
func TestEveryKeyCreatorHonoursTheLimits(t *testing.T) {
	for _, c := range creators {
		for _, reject := range []bool{false, true} {
			for _, maxKeys := range []int{0, 4} {
				name := fmt.Sprintf("%s/reject=%v/maxkeys=%d", c.name, reject, maxKeys)
				t.Run(name, func(t *testing.T) {
					m, st, _ := newMapWith(t, Config{Shards: 2, MaxKeys: maxKeys, Reject: reject, MaxKeySize: 16},
						def(t, "r", "fixed_window", "100", "1h", ""))
					created := 0
					for i := range 10 {
						err := c.create(m, st, fmt.Appendf(nil, "k%d", i))
						switch {
						case err == nil:
							created++
						case reject && maxKeys > 0 && errors.Is(err, ErrKeyLimit):
						default:
							t.Fatalf("key %d: %v", i, err)
						}
					}
					keys := m.Stats()
					held := keys.Keys + keys.PlainKeys
					switch {
					case maxKeys == 0 && created != 10:
						t.Fatalf("no key limit, yet %d of 10 keys created", created)
					case maxKeys > 0 && held > maxKeys:
						t.Fatalf("holding %d keys under --maxkeys %d", held, maxKeys)
					case reject && maxKeys > 0 && created == 10:
						t.Fatal("the reject policy never refused")
					case !reject && created != 10:
						t.Fatalf("the evict policy refused %d keys", 10-created)
					}
					err := c.create(m, st, bytes.Repeat([]byte("x"), 17))
					var tooLarge *TooLargeError
					if !errors.As(err, &tooLarge) || tooLarge.What != "key" || tooLarge.Size != 17 || tooLarge.Limit != 16 {
						t.Fatalf("a 17-byte key under a 16-byte limit: %v", err)
					}
					if after := m.Stats(); after.Keys+after.PlainKeys != held {
						t.Fatal("a refused key was stored")
					}
				})
			}
		}
	}
}

func TestValueSizeLimit(t *testing.T) {
	m, _, _ := newMapWith(t, Config{Shards: 2, MaxValueSize: 8})
	set := func(key, value string) error {
		var err error
		task(m, []byte(key), func(db *DB) { err = db.SetString([]byte(key), []byte(value)) })
		return err
	}
	if err := set("k", "12345678"); err != nil {
		t.Fatalf("a value at the limit: %v", err)
	}
	err := set("k", "123456789")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "value of 9 bytes exceeds the 8-byte limit (--max-value-size)") {
		t.Fatalf("a value over the limit: %v", err)
	}
	var got string
	task(m, []byte("k"), func(db *DB) { got = string(db.Get([]byte("k")).(*String).B) })
	if got != "12345678" {
		t.Fatalf("a refused SET changed the value: %q", got)
	}
	if m, _ := m.MaxSizes(); m != DefaultMaxKeySize {
		t.Fatalf("default key size %d", m)
	}
}

// TestRuleCountersAreMonotonic checks issue 12: FLUSHALL (and rule changes
// that keep the algorithm) must not reset a rule's decision counters, which
// restart only when the rule is deleted or its algorithm changes.
func TestRuleCountersAreMonotonic(t *testing.T) {
	m, st, _ := newMap(t, 4, def(t, "r", "token_bucket", "3", "1h", ""))
	counters := func() RuleStats { return m.Stats().Rules[st.Load().Get([]byte("r")).ID] }
	spend := func(n int) {
		for i := range n {
			do(m, st, Allow, "r", fmt.Sprint("k", i%2), 1)
		}
	}
	spend(8) // two keys of 3: 6 allowed, 2 denied
	if c := counters(); c.Allowed != 6 || c.Denied != 2 {
		t.Fatalf("before: %+v", c)
	}
	m.Flush()
	if c, st := counters(), m.Stats(); c.Allowed != 6 || c.Denied != 2 || c.Keys != 0 || st.Allowed != 6 {
		t.Fatalf("after FLUSHALL: %+v (totals %d)", c, st.Allowed)
	}
	m.NewDispatcher().Exec(func(db *DB) { db.Flush() })
	spend(2)
	if c := counters(); c.Allowed != 8 || c.Denied != 2 {
		t.Fatalf("after FLUSHALL in MULTI and 2 more: %+v", c)
	}
	st.Put(def(t, "r", "token_bucket", "10", "1m", "20")) // numbers change, same algorithm
	m.Reconcile()
	spend(1)
	if c := counters(); c.Allowed != 9 {
		t.Fatalf("after changing the numbers: %+v", c)
	}
	st.Put(def(t, "r", "fixed_window", "10", "1m", "")) // a new algorithm: counters restart
	m.Reconcile()
	spend(1)
	if c := counters(); c.Allowed != 1 || c.Denied != 0 {
		t.Fatalf("after an algorithm change: %+v", c)
	}
}
