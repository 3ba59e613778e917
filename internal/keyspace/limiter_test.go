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

// TestExportPassesFreeRecordsInSpans: an export's chunk of n keys looks at
// no more than n spans of walkSpan records, so a table emptied by
// deletions (mostly free records) does not stop its shard for a pass over
// all of them in one message.
func TestExportPassesFreeRecordsInSpans(t *testing.T) {
	m, st, _ := newMap(t, 1, def(t, "a", "token_bucket", "10", "1h", ""))
	const n = 20 * walkSpan
	for i := range n {
		do(m, st, Allow, "a", fmt.Sprintf("k%d", i), 1)
	}
	for i := range n - 1 {
		do(m, st, Reset, "a", fmt.Sprintf("k%d", i), 0)
	}
	var got []string
	chunks := 0
	m.each(func(s *shard) {
		for more := true; more; chunks++ {
			more = s.scanChunk(1, func(x Exported) { got = append(got, x.Key) })
		}
	})
	last := fmt.Sprintf("k%d", n-1)
	if len(got) != 1 || got[0] != last {
		t.Fatalf("exported %q, want only %q", got, last)
	}
	if chunks < n/walkSpan {
		t.Fatalf("the export took %d chunks of one key over %d records, some passing more than %d", chunks, n, walkSpan)
	}
}
