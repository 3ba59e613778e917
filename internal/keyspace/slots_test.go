package keyspace

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/rlserver/rlserver/internal/cluster"
)

// testSlot puts a key in slot (its last byte mod 4): few slots, so every
// slot holds keys of several shards.
func testSlot(key []byte) uint16 {
	if len(key) == 0 {
		return 0
	}
	return uint16(key[len(key)-1] % 4)
}

// slotsByScan counts every shard's keys per slot and lists their names by
// walking the maps: what the counters must agree with.
func slotsByScan(m *Map) (counts [4]int, names [4][]string) {
	m.each(func(s *shard) {}) // the shards are idle after this
	for _, s := range m.shards {
		add := func(k string) {
			counts[testSlot([]byte(k))]++
			names[testSlot([]byte(k))] = append(names[testSlot([]byte(k))], k)
		}
		for k := range s.plain {
			add(k)
		}
		for _, t := range s.tables {
			t.eachKey(func(k lkey) { add(string(t.keyOf(k))) })
		}
	}
	return counts, names
}

// checkSlots asserts that SlotKeys agrees with a walk over the keys, for
// every slot and a few bounds, through the pooled and the held keyspace.
func checkSlots(t *testing.T, m *Map, step string) {
	t.Helper()
	counts, names := slotsByScan(m)
	for slot := range uint16(4) {
		for _, max := range []int{0, 1, 2, 1 << 20} {
			n, keys := m.SlotKeys(slot, max)
			var held int
			var heldKeys [][]byte
			m.NewDispatcher().Exec(func(db *DB) { held, heldKeys = db.SlotKeys(slot, max) })
			if n != counts[slot] || held != counts[slot] {
				t.Fatalf("%s: slot %d: counted %d pooled, %d held; the maps hold %d", step, slot, n, held, counts[slot])
			}
			for _, got := range [][][]byte{keys, heldKeys} {
				if len(got) != min(max, counts[slot]) {
					t.Fatalf("%s: slot %d max %d: %d names, want %d", step, slot, max, len(got), min(max, counts[slot]))
				}
				for _, k := range got {
					if !slices.Contains(names[slot], string(k)) {
						t.Fatalf("%s: slot %d: name %q is not a key of the slot", step, slot, k)
					}
				}
			}
		}
	}
}

func TestSlotCountsFollowEveryWayKeysComeAndGo(t *testing.T) {
	for _, chunk := range []int{4096, 3} {
		t.Run(fmt.Sprint("chunk=", chunk), func(t *testing.T) {
			defer func(was int) { slotWalkChunk = was }(slotWalkChunk)
			slotWalkChunk = chunk
			slotCountsFollowEveryWayKeysComeAndGo(t)
		})
	}
}

func slotCountsFollowEveryWayKeysComeAndGo(t *testing.T) {
	m, st, clk := newMapWith(t, Config{Shards: 4, SlotOf: testSlot},
		def(t, "a", "token_bucket", "10", "1s", ""), def(t, "b", "fixed_window", "5", "1h", ""))
	checkSlots(t, m, "empty")
	for i := range 40 {
		do(m, st, Allow, "a", fmt.Sprint("k", i), 1)
		if i%2 == 0 {
			do(m, st, Allow, "b", fmt.Sprint("k", i), 1) // the same name under a second rule: a second state
		}
		task(m, fmt.Appendf(nil, "p%d", i), func(db *DB) {
			if err := db.SetString(fmt.Appendf(nil, "p%d", i), []byte("v")); err != nil {
				t.Error(err)
			}
			if i%3 == 0 {
				db.SetExpiry(fmt.Appendf(nil, "p%d", i), db.Now()+5*sec)
			}
		})
	}
	checkSlots(t, m, "created")
	do(m, st, Reset, "a", "k1", 0)
	task(m, []byte("p2"), func(db *DB) { db.Delete([]byte("p2")) })
	checkSlots(t, m, "reset and deleted")

	// Rule a's keys are fresh after 1 s and leave; the plain keys with a
	// TTL expire at 5 s.
	clk.ns.Add(10 * sec)
	m.Tick()
	checkSlots(t, m, "evicted and expired")

	if _, ok := st.Delete("b"); !ok {
		t.Fatal("rule b not deleted")
	}
	m.Reconcile()
	checkSlots(t, m, "rule deleted")

	m.Flush()
	checkSlots(t, m, "flushed")
	if n, _ := m.SlotKeys(1, 10); n != 0 {
		t.Fatalf("after FLUSHALL slot 1 counts %d", n)
	}
}

// TestSlotKeysWhileKeysChange walks a slot in chunks of 2 keys while
// other keys come and go: every key present throughout is found exactly
// once, and every name returned is a key of the slot.
func TestSlotKeysWhileKeysChange(t *testing.T) {
	defer func(was int) { slotWalkChunk = was }(slotWalkChunk)
	slotWalkChunk = 2
	m, st, _ := newMapWith(t, Config{Shards: 2, SlotOf: testSlot},
		def(t, "a", "token_bucket", "10", "1s", ""), def(t, "b", "token_bucket", "10", "1s", ""))
	stable := map[string]bool{}
	for i := range 30 {
		k := fmt.Sprintf("s%d1", i) // slot 1 ('1' % 4)
		do(m, st, Allow, "a", k, 1)
		stable[k] = true
	}
	stop := make(chan struct{})
	var churn sync.WaitGroup
	defer churn.Wait()
	defer close(stop) // first, also when the test fails
	churn.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Sprintf("c%d%d", i%50, i%4)
			do(m, st, Allow, "b", k, 1)
			if i%3 == 0 {
				do(m, st, Reset, "b", fmt.Sprintf("c%d%d", (i+7)%50, (i+7)%4), 0)
			}
		}
	})
	for range 20 {
		_, keys := m.SlotKeys(1, 1<<20)
		seen := map[string]int{}
		for _, k := range keys {
			if testSlot(k) != 1 {
				t.Fatalf("%q is not in slot 1", k)
			}
			seen[string(k)]++
		}
		for k := range stable {
			if seen[k] != 1 {
				t.Fatalf("stable key %q found %d times", k, seen[k])
			}
		}
	}
}

func TestSlotKeysWithoutSlotOf(t *testing.T) {
	m, st, _ := newMap(t, 2, def(t, "a", "token_bucket", "10", "1s", ""))
	do(m, st, Allow, "a", "k1", 1)
	if n, keys := m.SlotKeys(1, 10); n != 0 || keys != nil {
		t.Fatalf("without SlotOf: %d, %q", n, keys)
	}
}

// BenchmarkSlotKeysWalk measures GETKEYSINSLOT's worst case: a slot with
// one key, found last, on one shard of 200,000 keys (with the real slot
// function). ns/key is the walk's cost per key held.
func BenchmarkSlotKeysWalk(b *testing.B) {
	const n = 200_000
	m, st, _ := newMapWith(b, Config{Shards: 1, SlotOf: cluster.KeySlot}, def(b, "a", "token_bucket", "10", "24h", ""))
	d := m.NewDispatcher()
	rule := st.Load().Get([]byte("a"))
	for i := range n {
		d.Add(Op{Kind: Allow, Rule: rule, Key: fmt.Appendf(nil, "user:%d:api", i), Cost: 1})
		if d.Len() == 1000 {
			d.Run()
			d.Reset()
		}
	}
	d.Run()
	// A slot holding none of them, but one key of its own.
	var lonely []byte
	for i := 0; lonely == nil; i++ {
		k := fmt.Appendf(nil, "other:%d", i)
		if cnt, _ := m.SlotKeys(cluster.KeySlot(k), 0); cnt == 0 {
			lonely = k
		}
	}
	do(m, st, Allow, "a", string(lonely), 1)
	slot := cluster.KeySlot(lonely)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if cnt, keys := m.SlotKeys(slot, 10); cnt != 1 || len(keys) != 1 {
			b.Fatalf("%d keys, %q", cnt, keys)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/key")
}

// BenchmarkSlotCount measures COUNTKEYSINSLOT: a message per shard.
func BenchmarkSlotCount(b *testing.B) {
	m, _, _ := newMapWith(b, Config{Shards: 8, SlotOf: cluster.KeySlot})
	b.ReportAllocs()
	for b.Loop() {
		m.SlotKeys(1, 0)
	}
}
