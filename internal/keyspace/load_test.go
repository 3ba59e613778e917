package keyspace

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rlserver/rlserver/internal/algorithms"
)

// loadKeys loads n fixed-window keys of rule "r", key i having spent i+1
// units, through one reused key buffer (the Loader must copy it).
func loadKeys(t *testing.T, m *Map, n int, now int64, reserve bool) error {
	t.Helper()
	rule := m.shards[0].rules.Load().Get([]byte("r"))
	l := m.NewLoader()
	if reserve {
		l.Reserve(rule, n)
	}
	key := make([]byte, 0, 16)
	for i := range n {
		key = fmt.Appendf(key[:0], "k%04d", i)
		if err := l.Add(Item{Rule: rule, Key: key, State: algorithms.State{Stamp: now, Count: int64(i%100 + 1)}}); err != nil {
			return err
		}
	}
	return l.Close()
}

func TestLoaderCopiesAndStoresEveryKey(t *testing.T) {
	m, st, clk := newMap(t, 4, def(t, "r", "fixed_window", "100", "1h", ""))
	const n = 3*loadBatchItems + 17 // several batches, the last partial
	if err := loadKeys(t, m, n, clk.now(), true); err != nil {
		t.Fatal(err)
	}
	if got := m.Stats().Keys; got != n {
		t.Fatalf("%d keys stored of %d", got, n)
	}
	for _, i := range []int{0, 1, loadBatchItems, n - 1} {
		if op := do(m, st, Peek, "r", fmt.Sprintf("k%04d", i), 1); op.Decision.Remaining != int64(100-(i%100+1)) {
			t.Fatalf("key %d: %+v", i, op.Decision)
		}
	}
}

func TestLoaderKeepsMaxKeys(t *testing.T) {
	t.Run("evict", func(t *testing.T) {
		m, st, clk := newMapWith(t, Config{Shards: 4, MaxKeys: 100}, def(t, "r", "fixed_window", "100", "1h", ""))
		if err := loadKeys(t, m, 1000, clk.now(), true); err != nil {
			t.Fatal(err)
		}
		s := m.Stats()
		if s.Keys > 100 || s.Keys < 90 || s.PressureEvictions != uint64(1000-s.Keys) {
			t.Fatalf("holding %d keys after loading 1000 under --maxkeys 100, %d evicted", s.Keys, s.PressureEvictions)
		}
		// Every key goes fresh at the same instant here, so which are
		// kept is arbitrary; what is kept answers with its budget.
		kept := 0
		for i := range 1000 {
			if op := do(m, st, Peek, "r", fmt.Sprintf("k%04d", i), 1); op.Decision.Remaining != 100 {
				kept++
			}
		}
		if kept != s.Keys {
			t.Fatalf("%d keys answer with their saved budget, %d held", kept, s.Keys)
		}
	})
	t.Run("reject", func(t *testing.T) {
		m, _, clk := newMapWith(t, Config{Shards: 4, MaxKeys: 100, Reject: true}, def(t, "r", "fixed_window", "100", "1h", ""))
		const n = 1000 + 3*loadBatchItems
		err := loadKeys(t, m, n, clk.now(), false)
		var le *LoadLimitError
		if !errors.As(err, &le) || le.Keys != n || le.MaxKeys != 100 {
			t.Fatalf("loading %d keys under --maxkeys 100 (reject): %v", n, err)
		}
		// It stops storing once over the limit: the batch that crossed it
		// and the one in flight meanwhile are all it stores past it.
		if held := m.Stats().Keys; held > 100+2*loadBatchItems {
			t.Fatalf("holding %d keys", held)
		}
	})
	t.Run("reject within the limit", func(t *testing.T) {
		// 100 keys under --maxkeys 100 on 4 shards: some shard gets more
		// than its share of 25, which the load allows (the total holds);
		// that shard then refuses new keys.
		m, st, clk := newMapWith(t, Config{Shards: 4, MaxKeys: 100, Reject: true}, def(t, "r", "fixed_window", "100", "1h", ""))
		if err := loadKeys(t, m, 100, clk.now(), true); err != nil {
			t.Fatal(err)
		}
		if got := m.Stats().Keys; got != 100 {
			t.Fatalf("%d keys", got)
		}
		if op := do(m, st, Allow, "r", "new", 1); !errors.Is(op.Err, ErrKeyLimit) {
			t.Fatalf("a new key after a load to the limit: %+v", op)
		}
	})
}
