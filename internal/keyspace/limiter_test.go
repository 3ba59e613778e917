package keyspace

import (
	"fmt"
	"testing"
)

// TestWalksEndAtFlushAndDroppedTable: a walk over a table's records (a
// GETKEYSINSLOT between its chunks) that meets FLUSHALL, or the rule's
// deletion, finds none of the keys dropped: they are not held any more.
func TestWalksEndAtFlushAndDroppedTable(t *testing.T) {
	for _, how := range []string{"flush", "delete rule"} {
		t.Run(how, func(t *testing.T) {
			m, st, _ := newMapWith(t, Config{Shards: 1, SlotOf: func([]byte) uint16 { return 7 }},
				def(t, "a", "token_bucket", "10", "1h", ""))
			for i := range 50 {
				do(m, st, Allow, "a", fmt.Sprintf("k%d", i), 1)
			}
			var found [][]byte
			m.each(func(s *shard) {
				var w slotWalk
				if n := s.startSlotWalk(&w, 7, 100); n != 50 {
					t.Errorf("slot holds %d keys, want 50", n)
				}
				found = s.walkSlot(&w, 5, nil) // the plain keys, then into the table
				if how == "flush" {
					s.flush(s.clock())
				} else {
					s.rules.Delete("a")
					s.reconcile()
				}
				before := len(found)
				found = s.walkSlot(&w, 100, found)
				if len(found) != before || !w.done {
					t.Errorf("after %s the walk found %d more keys (done %v)", how, len(found)-before, w.done)
				}
			})
			if f := m.Failure(); f != nil {
				t.Fatalf("the shard failed: %v", f)
			}
			if len(found) == 0 {
				t.Fatal("the walk found no key before the change")
			}
		})
	}
}
